//! The framework on the timed GTX480 with real launches: one kernel alone runs exactly as
//! the one-launch driver runs it; several kernels run side by side on disjoint SMs (or
//! share SMs when allowed), each result correct; NPQ serves the high-priority context first;
//! a reserved SM drains and is then set up for the kernel it was reserved for.

use std::collections::BTreeMap;

use gpu::config::GpuConfig;
use gpu::memory::DeviceMemory;
use gpu::timing::{run_launch, LaunchId, Machine, Move, Residency, ResidencyLog, SmId, TimedGpu};
use gpu::{DeviceLimits, KernelArg, LoadedModule};
use sched::{
    Command, ContextId, Fcfs, Framework, FrameworkConfig, KernelSlot, Policy, PolicyEnv,
    PolicyKind, Record, Tables, Waiting,
};

/// A run of four processes on `sm_count` SMs with 50 µs time slices at 700 MHz.
fn env(sm_count: u32) -> PolicyEnv {
    PolicyEnv {
        default_slice_us: 50.0,
        clock_mhz: 700.0,
        sm_count,
        priorities: vec![0; 4],
    }
}

/// `busy(out, n)`: thread `g` writes `sum over j < n of g * j + j` (wrapping u32).
const BUSY: &str = r#".version 8.0
.target sm_70
.address_size 64
.visible .entry busy(.param .u64 out, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mad.lo.s32 %r5, %r3, %r4, %r2;
    mov.u32 %r6, 0;
    mov.u32 %r7, 0;
L:
    setp.ge.u32 %p1, %r7, %r1;
    @%p1 bra DONE;
    mad.lo.s32 %r6, %r5, %r7, %r6;
    add.u32 %r6, %r6, %r7;
    add.u32 %r7, %r7, 1;
    bra L;
DONE:
    mul.wide.u32 %rd2, %r5, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r6;
    ret;
}
"#;

fn expected(threads: u32, n: u32) -> Vec<u32> {
    (0..threads)
        .map(|g| {
            (0..n).fold(0u32, |acc, j| {
                acc.wrapping_add(g.wrapping_mul(j)).wrapping_add(j)
            })
        })
        .collect()
}

fn timing() -> TimedGpu {
    TimedGpu::new(GpuConfig::preset("gtx480").expect("preset"))
}

/// A machine with the `busy` module loaded, logging TBs' moves.
fn machine() -> (Machine, LoadedModule) {
    let t = timing();
    let mut mem = DeviceMemory::new();
    let module = LoadedModule::load(&mut mem, "busy.ptx", BUSY).expect("loads");
    let mut m = Machine::new(t.gpu, t.options, mem).expect("machine");
    m.attach(Box::new(ResidencyLog::default()));
    (m, module)
}

/// Every TB arriving on or leaving an SM so far.
fn moves(m: &mut Machine) -> Vec<Residency> {
    let log = m.detach().and_then(|p| p.downcast::<ResidencyLog>());
    log.expect("a residency log is attached").moves
}

/// A launch of `busy` over `tbs` TBs of 128 threads, writing a fresh buffer.
struct Job {
    out: u64,
    threads: u32,
    n: u32,
}

fn command(
    m: &mut Machine,
    module: &mut LoadedModule,
    context: u32,
    priority: i32,
    tbs: u32,
    n: u32,
    tag: u64,
) -> (Command, Job) {
    let threads = tbs * 128;
    let out = m.memory_mut().alloc(u64::from(threads) * 4);
    let limits = DeviceLimits {
        num_sms: m.sm_count(),
        ..DeviceLimits::default()
    };
    let k = module.kernel("busy").expect("kernel");
    let launch = module
        .launch_ctx(
            &limits,
            k,
            [tbs, 1, 1],
            [128, 1, 1],
            0,
            &[KernelArg::U64(out), KernelArg::U32(n)],
            tag,
        )
        .expect("launch");
    let timed = module.timed_kernel(k, &timing());
    (
        Command {
            context: ContextId(context),
            priority,
            stream_priority: 0,
            launch,
            timed,
            tag,
        },
        Job { out, threads, n },
    )
}

fn check(m: &Machine, job: &Job) {
    let bytes = m
        .memory()
        .read_bytes(job.out, u64::from(job.threads) * 4)
        .expect("output");
    let got: Vec<u32> = bytes
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, expected(job.threads, job.n));
}

/// Steps until the framework has nothing waiting or active.
fn run(m: &mut Machine, fw: &mut Framework) -> Vec<Record> {
    let mut records = Vec::new();
    for _ in 0..5_000_000 {
        m.step(fw).expect("step");
        records.extend(fw.take_records());
        if fw.is_idle() {
            return records;
        }
    }
    panic!("did not finish");
}

/// Per SM, the maximum number of kernels resident at once.
fn kernels_sharing(moves: &[Residency]) -> BTreeMap<SmId, usize> {
    let mut resident: BTreeMap<SmId, BTreeMap<LaunchId, u32>> = BTreeMap::new();
    let mut most = BTreeMap::new();
    for m in moves {
        let on = resident.entry(m.sm).or_default();
        if m.how.arrives() {
            *on.entry(m.tb.launch).or_default() += 1;
        } else {
            *on.get_mut(&m.tb.launch).unwrap() -= 1;
            on.retain(|_, n| *n > 0);
        }
        for (&sm, r) in &resident {
            let e = most.entry(sm).or_insert(0);
            *e = (*e).max(r.len());
        }
    }
    most
}

fn finished_at(records: &[Record], tag: u64) -> u64 {
    records
        .iter()
        .find_map(|r| match *r {
            Record::KernelFinished { cycle, tag: t, .. } if t == tag => Some(cycle),
            _ => None,
        })
        .expect("finished")
}

#[test]
fn one_kernel_runs_exactly_as_the_one_launch_driver_runs_it() {
    let (mut a, mut module) = machine();
    let (cmd, job) = command(&mut a, &mut module, 0, 0, 40, 50, 1);
    let want = run_launch(&mut a, cmd.launch, &cmd.timed, &mut |_| {}).unwrap();
    check(&a, &job);

    let (mut b, mut module) = machine();
    let (cmd, job) = command(&mut b, &mut module, 0, 0, 40, 50, 1);
    let mut fw = Framework::new(FrameworkConfig::default(), Box::new(Fcfs), b.sm_count());
    fw.deliver(cmd, 0);
    run(&mut b, &mut fw);
    check(&b, &job);
    let got = b.launch(LaunchId(0)).stats().unwrap();
    assert!(
        format!("{want:?}") == format!("{got:?}"),
        "statistics differ"
    );
    assert!(want.cycles > 1000 && want.tbs == 40);
}

#[test]
fn kernels_run_on_disjoint_sms_or_share_them_when_allowed() {
    for sharing in [false, true] {
        for policy in [PolicyKind::Fcfs, PolicyKind::Npq] {
            let (mut m, mut module) = machine();
            let config = FrameworkConfig {
                intra_sm_sharing: sharing,
                active_kernels: None,
            };
            let mut fw = Framework::new(config, policy.build(&env(m.sm_count())), m.sm_count());
            let mut jobs = Vec::new();
            // Four contexts; uneven kernels so that some SMs free up while others still run.
            for c in 0..4u32 {
                let (cmd, job) =
                    command(&mut m, &mut module, c, 0, 10 + 7 * c, 20 + 30 * c, c.into());
                fw.deliver(cmd, 0);
                jobs.push(job);
            }
            run(&mut m, &mut fw);
            for job in &jobs {
                check(&m, job);
            }
            let most = kernels_sharing(&moves(&mut m)).into_values().max().unwrap();
            if sharing {
                assert!(most >= 2, "{policy:?}: no SM ever held two kernels");
            } else {
                assert_eq!(most, 1, "{policy:?}: an SM held two kernels at once");
            }
        }
    }
}

#[test]
fn npq_serves_the_high_priority_context_first() {
    // Context 3 has the highest priority but reaches the GPU last, behind three long kernels
    // that each fill the GPU.
    let finish = |policy: PolicyKind| {
        let (mut m, mut module) = machine();
        let mut fw = Framework::new(
            FrameworkConfig::default(),
            policy.build(&env(m.sm_count())),
            m.sm_count(),
        );
        let mut jobs = Vec::new();
        for c in 0..4u32 {
            let priority = if c == 3 { 10 } else { 0 };
            let (cmd, job) = command(&mut m, &mut module, c, priority, 60, 60, c.into());
            fw.deliver(cmd, u64::from(c));
            jobs.push(job);
        }
        let records = run(&mut m, &mut fw);
        for job in &jobs {
            check(&m, job);
        }
        (0..4).map(|t| finished_at(&records, t)).collect::<Vec<_>>()
    };
    let fcfs = finish(PolicyKind::Fcfs);
    let npq = finish(PolicyKind::Npq);
    eprintln!("finish cycles: fcfs {fcfs:?}, npq {npq:?}");
    // FCFS serves in arrival order; NPQ lets context 3 overtake the two that were waiting.
    assert!(fcfs[3] > fcfs[1] && fcfs[3] > fcfs[2], "{fcfs:?}");
    assert!(npq[3] < npq[1] && npq[3] < npq[2], "{npq:?}");
    assert!(npq[3] * 2 < fcfs[3], "npq {npq:?} fcfs {fcfs:?}");
}

/// Gives every SM to the first kernel, and reserves SM 0 for the second as soon as it
/// arrives; counts the completed preemptions it is told of.
struct ReserveZero {
    first: Option<KernelSlot>,
    done: std::rc::Rc<std::cell::Cell<u32>>,
}

impl Policy for ReserveZero {
    fn name(&self) -> &'static str {
        "reserve-zero"
    }
    fn admit(&mut self, waiting: &[Waiting]) -> Option<ContextId> {
        waiting.first().map(|w| w.context)
    }
    fn on_kernel_activated(&mut self, k: KernelSlot, t: &mut Tables) {
        match self.first {
            None => {
                self.first = Some(k);
                for sm in t.idle_sms() {
                    t.assign(sm, k);
                }
            }
            Some(_) => {
                assert!(t.reserve(SmId(0), k));
            }
        }
    }
    fn on_sm_idle(&mut self, sm: SmId, t: &mut Tables) {
        if let Some(&k) = t.active().iter().find(|&&k| t.ksr(k).has_work()) {
            t.assign(sm, k);
        }
    }
    fn on_preemption_done(&mut self, sm: SmId, t: &mut Tables) {
        assert_eq!(sm, SmId(0));
        assert_eq!(
            t.sm(sm).state,
            sched::SmState::Running,
            "set up for its next kernel"
        );
        self.done.set(self.done.get() + 1);
    }
}

#[test]
fn a_reserved_sm_drains_then_runs_the_kernel_it_was_reserved_for() {
    let (mut m, mut module) = machine();
    let done = std::rc::Rc::new(std::cell::Cell::new(0));
    let mut fw = Framework::new(
        FrameworkConfig::default(),
        Box::new(ReserveZero {
            first: None,
            done: done.clone(),
        }),
        m.sm_count(),
    );
    let (a, job_a) = command(&mut m, &mut module, 0, 0, 200, 40, 0);
    let (b, job_b) = command(&mut m, &mut module, 1, 0, 4, 40, 1);
    fw.deliver(a, 0);
    // The second kernel arrives once the first fills the GPU.
    m.run_until(300, &mut fw).unwrap();
    assert_eq!(m.cycle(), 300);
    let mut records = fw.take_records();
    fw.deliver(b, m.cycle());
    records.extend(run(&mut m, &mut fw));
    check(&m, &job_a);
    check(&m, &job_b);
    let reserved_at = records
        .iter()
        .find_map(|r| match *r {
            Record::SmReserved {
                cycle, sm: SmId(0), ..
            } => Some(cycle),
            _ => None,
        })
        .expect("reserved");
    // After the reservation, SM 0 receives no TB of the first kernel, and its first TB of
    // the second comes only once the first kernel's TBs on it have all finished.
    let on_zero: Vec<(u64, LaunchId, bool)> = moves(&mut m)
        .iter()
        .filter_map(|r| match r.how {
            Move::Dispatched if r.sm == SmId(0) && r.cycle > reserved_at => {
                Some((r.cycle, r.tb.launch, true))
            }
            Move::Finished if r.sm == SmId(0) && r.cycle >= reserved_at => {
                Some((r.cycle, r.tb.launch, false))
            }
            _ => None,
        })
        .collect();
    let first_b = on_zero
        .iter()
        .position(|&(_, l, d)| d && l == LaunchId(1))
        .expect("SM 0 runs the second kernel");
    assert!(on_zero[..first_b]
        .iter()
        .all(|&(_, l, d)| !d && l == LaunchId(0)));
    assert!(!on_zero[..first_b].is_empty(), "SM 0 had TBs to drain");
}
