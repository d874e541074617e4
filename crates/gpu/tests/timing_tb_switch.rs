//! TB switching on fault (papers/tanasic-thesis §6.4.1, §6.5.3, Figure 6.13; issue 26 item
//! 4), and TBs stopped while one of their accesses is squashed for a fault: under every
//! pipeline organisation that squashes, a TB may leave its SM with its squashed
//! instructions (they travel in its context and replay wherever it is installed), and the
//! SM's local scheduler switches out a TB whose warps are all blocked, faulted or at a
//! barrier. Final memory is compared with the functional core's.

mod timing_common;

use gpu::config::GpuConfig;
use gpu::exec::LaunchCtx;
use gpu::func;
use gpu::memory::DeviceMemory;
use gpu::timing::{
    AfterStop, Control, Event, LaunchId, Machine, Request, SmId, Start, StopAt, TbContext, TbRef,
    TimedGpu, TimedKernel, TimedStats, TimingError, WarpReports,
};
use gpu::{DeviceLimits, KernelArg, LoadedModule};
use memsys::{Pipeline, Populate, TbSwitch};

const SQUASHING: [Pipeline; 4] = [
    Pipeline::WdCommit,
    Pipeline::WdLastcheck,
    Pipeline::ReplayQueue,
    Pipeline::OperandLog,
];

const REGION: u64 = 64 * 1024;

/// Each TB of 64 threads: its first warp loads a word of the managed buffer when the TB is
/// one of the first `nf` (at `(ctaid * stride) mod man_bytes`, then one word per thread),
/// every other thread a word of the resident buffer; all store it to shared memory, meet
/// at a barrier (so the second warp of a faulting TB waits there while the first waits
/// for its fault), read a neighbour's word, run `iters` dependent multiply-adds, and store
/// the result.
const KERNEL: &str = r#".version 8.0
.target sm_70
.address_size 64
.visible .entry k(.param .u64 out, .param .u64 aux, .param .u64 man, .param .u32 nf,
    .param .u32 iters, .param .u32 stride, .param .u32 man_bytes)
{
    .reg .pred %p<4>;
    .reg .b32 %r<32>;
    .reg .b64 %rd<16>;
    .shared .align 4 .b32 sh[64];
    ld.param.u64 %rd0, [out];
    ld.param.u64 %rd1, [aux];
    ld.param.u64 %rd5, [man];
    ld.param.u32 %r20, [nf];
    ld.param.u32 %r21, [iters];
    ld.param.u32 %r22, [stride];
    ld.param.u32 %r23, [man_bytes];
    mov.u32 %r1, %tid.x;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mad.lo.s32 %r2, %r3, %r4, %r1;
    mul.wide.u32 %rd2, %r1, 4;
    mul.wide.u32 %rd7, %r2, 4;
    setp.lt.u32 %p1, %r3, %r20;
    setp.lt.u32 %p2, %r1, 32;
    and.pred %p1, %p1, %p2;
    mul.lo.u32 %r6, %r3, %r22;
    rem.u32 %r6, %r6, %r23;
    cvt.u64.u32 %rd10, %r6;
    add.s64 %rd8, %rd5, %rd10;
    add.s64 %rd8, %rd8, %rd2;
    add.s64 %rd9, %rd1, %rd7;
    @%p1 ld.global.u32 %r10, [%rd8];
    @!%p1 ld.global.u32 %r10, [%rd9];
    mov.u32 %r7, sh;
    shl.b32 %r8, %r1, 2;
    add.u32 %r9, %r7, %r8;
    st.shared.u32 [%r9], %r10;
    bar.sync 0;
    add.u32 %r11, %r1, 1;
    rem.u32 %r11, %r11, %r4;
    shl.b32 %r11, %r11, 2;
    add.u32 %r11, %r7, %r11;
    ld.shared.u32 %r11, [%r11];
    add.u32 %r11, %r11, %r10;
    mov.u32 %r12, 0;
    setp.eq.u32 %p3, %r21, 0;
    @%p3 bra DONE;
LOOP:
    mad.lo.u32 %r11, %r11, 3, %r12;
    add.u32 %r12, %r12, 1;
    setp.lt.u32 %p3, %r12, %r21;
    @%p3 bra LOOP;
DONE:
    add.s64 %rd11, %rd0, %rd7;
    st.global.u32 [%rd11], %r11;
    ret;
}
"#;

/// A kernel's shape and where it faults.
#[derive(Clone)]
struct Shape {
    /// TBs of 64 threads, and how many of the first ones read the managed buffer.
    grid: u32,
    nf: u32,
    iters: u32,
    /// Bytes between consecutive TBs' managed words; regions of the managed buffer, and
    /// those resident on the GPU from the start (the others fault on first touch).
    stride: u32,
    regions: u64,
    resident: Vec<u64>,
}

/// A machine ready to run the kernel of `shape`, with the functional core's final memory.
struct Prepared {
    machine: Machine,
    ctx: LaunchCtx,
    timed: TimedKernel,
    buffers: Vec<(u64, u64)>,
    reference: Vec<Vec<u8>>,
}

fn prepare(timing: &TimedGpu, shape: &Shape) -> Prepared {
    let mut mem = DeviceMemory::new();
    let mut module = LoadedModule::load(&mut mem, "k.ptx", KERNEL).unwrap();
    let threads = u64::from(shape.grid) * 64;
    let out = mem.alloc(threads * 4);
    let aux = mem.alloc(threads * 4);
    let aux_data: Vec<u8> = (0..threads as u32)
        .flat_map(|i| (i * 7 + 3).to_le_bytes())
        .collect();
    mem.write_bytes(aux, &aux_data).unwrap();
    let man_bytes = shape.regions * REGION;
    let man = mem.alloc_aligned(man_bytes, REGION);
    let man_data: Vec<u8> = (0..(man_bytes / 4) as u32)
        .flat_map(|i| (i ^ 0x5a5a).to_le_bytes())
        .collect();
    mem.write_bytes(man, &man_data).unwrap();
    let k = module.kernel("k").unwrap();
    let timed = module.timed_kernel(k, timing);
    let limits = DeviceLimits {
        num_sms: timing.gpu.sm.count,
        ..DeviceLimits::default()
    };
    let ctx = module
        .launch_ctx(
            &limits,
            k,
            [shape.grid, 1, 1],
            [64, 1, 1],
            0,
            &[
                KernelArg::U64(out),
                KernelArg::U64(aux),
                KernelArg::U64(man),
                KernelArg::U32(shape.nf),
                KernelArg::U32(shape.iters),
                KernelArg::U32(shape.stride),
                KernelArg::U32(man_bytes as u32),
            ],
            0,
        )
        .unwrap();
    let buffers = vec![(out, threads * 4), (aux, threads * 4), (man, man_bytes)];
    let mut functional = mem.clone();
    func::run(&ctx, &mut functional, 100_000_000u64).unwrap();
    let reference = buffers
        .iter()
        .map(|&(p, n)| functional.read_bytes(p, n).unwrap().to_vec())
        .collect();
    let mut machine = Machine::new(timing.gpu.clone(), timing.options.clone(), mem).unwrap();
    for r in 0..shape.regions {
        if !shape.resident.contains(&r) {
            assert!(machine
                .hierarchy_mut()
                .manage(man + r * REGION, REGION, Populate::HostData));
        }
    }
    Prepared {
        machine,
        ctx,
        timed,
        buffers,
        reference,
    }
}

/// fault-study with `sms` SMs of `tbs` TB slots each, `pipeline`, and TB switching `mode`
/// with at most `extra` extra TBs per SM.
fn gpu(sms: u32, tbs: u32, pipeline: Pipeline, mode: TbSwitch, extra: u32) -> TimedGpu {
    let mut g = GpuConfig::preset("fault-study").unwrap();
    g.sm.count = sms;
    g.sm.resources.max_tbs = tbs;
    let t = g.memory.translation.as_mut().unwrap();
    (t.pipeline, t.tb_switch, t.tb_switch_extra) = (pipeline, mode, extra);
    let mut timing = TimedGpu::new(g);
    timing.options.allocate = false;
    timing
}

/// The cycle limit of a test run: far beyond any of these kernels' runs, so that a TB that
/// never comes back fails the test quickly instead of reaching the runaway rule.
const LIMIT: u64 = 2_000_000;

/// Steps `p`'s machine under `ctl` until its launch finishes (or [`LIMIT`]).
fn run_with(p: &mut Prepared, ctl: &mut dyn Driver) -> Result<(TimedStats, Vec<Vec<u8>>), String> {
    let id = p
        .machine
        .submit(p.ctx.clone(), &p.timed)
        .map_err(|e| e.to_string())?;
    ctl.set_launch(id);
    while p.machine.launch(id).stats().is_none() {
        if p.machine.cycle() > LIMIT {
            return Err(format!(
                "not finished by cycle {LIMIT}: {} of {} TBs done",
                p.machine.launch(id).done(),
                p.machine.launch(id).tbs()
            ));
        }
        p.machine
            .step(ctl.control())
            .map_err(|e: TimingError| e.to_string())?;
    }
    let stats = p.machine.launch(id).stats().unwrap().clone();
    let memory = p
        .buffers
        .iter()
        .map(|&(a, n)| p.machine.memory().read_bytes(a, n).unwrap().to_vec())
        .collect();
    Ok((stats, memory))
}

trait Driver {
    fn set_launch(&mut self, id: LaunchId);
    fn control(&mut self) -> &mut dyn Control;
}

/// Places new TBs where they fit, SMs in order (as `GridDriver` does).
#[derive(Default)]
struct Grid {
    launch: Option<LaunchId>,
}

impl Control for Grid {
    fn on_cycle(&mut self, m: &mut Machine) -> Result<(), TimingError> {
        m.clear_events();
        let launch = self.launch.expect("submitted");
        for sm in m.sm_ids().collect::<Vec<_>>() {
            if m.launch(launch).undispatched() > 0 && m.fits(sm, launch) {
                m.request(Request::Dispatch { sm, launch })?;
            }
        }
        Ok(())
    }
}

impl Driver for Grid {
    fn set_launch(&mut self, id: LaunchId) {
        self.launch = Some(id);
    }
    fn control(&mut self) -> &mut dyn Control {
        self
    }
}

fn run(timing: &TimedGpu, shape: &Shape) -> (TimedStats, Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut p = prepare(timing, shape);
    let (stats, memory) = run_with(&mut p, &mut Grid::default()).unwrap_or_else(|e| {
        let t = timing.gpu.memory.translation.as_ref().unwrap();
        panic!("{:?} {:?}: {e}", t.pipeline, t.tb_switch)
    });
    (stats, memory, p.reference)
}

// ---------------------------------------------------------------------------------------
// A TB stopped while one of its accesses is squashed (the drain bug of issue 26 item 4).

/// One TB on SM 0, asked to stop at `stop_at` (its first warp's load squashed by then);
/// then, with `Leave`, installed again at `back_at` on `to`, or, with `Stay`, resumed at
/// `back_at`.
struct StopWhileSquashed {
    launch: Option<LaunchId>,
    then: AfterStop,
    stop_at: u64,
    back_at: u64,
    to: SmId,
    context: Option<Box<TbContext>>,
    stopped: Option<TbRef>,
    /// Squashed instructions the evicted context carried.
    carried: usize,
    dispatched: bool,
    asked: bool,
}

impl StopWhileSquashed {
    fn new(then: AfterStop, stop_at: u64, back_at: u64, to: u32) -> Self {
        StopWhileSquashed {
            launch: None,
            then,
            stop_at,
            back_at,
            to: SmId(to),
            context: None,
            stopped: None,
            carried: 0,
            dispatched: false,
            asked: false,
        }
    }
}

impl Control for StopWhileSquashed {
    fn on_cycle(&mut self, m: &mut Machine) -> Result<(), TimingError> {
        let launch = self.launch.expect("submitted");
        for e in m.take_events() {
            match e {
                Event::TbEvicted { context, .. } => {
                    self.carried = context.warps.iter().map(|w| w.replays.len()).sum();
                    self.context = Some(context);
                }
                Event::TbStopped { tb, .. } => self.stopped = Some(tb),
                _ => {}
            }
        }
        let now = m.cycle();
        if !self.dispatched {
            m.request(Request::Dispatch {
                sm: SmId(0),
                launch,
            })?;
            self.dispatched = true;
        }
        if now >= self.stop_at && !self.asked {
            let tb = m.resident(SmId(0)).next().expect("resident").0;
            m.request(Request::Stop {
                sm: SmId(0),
                tb,
                at: StopAt::Boundary,
                then: self.then,
                reports: WarpReports::None,
            })?;
            self.asked = true;
        }
        if now >= self.back_at {
            if let Some(context) = self.context.take() {
                m.request(Request::Install {
                    sm: self.to,
                    context,
                    into: None,
                    start: Start::Running,
                })?;
            }
            if let Some(tb) = self.stopped.take() {
                m.request(Request::Resume { sm: SmId(0), tb })?;
            }
        }
        Ok(())
    }
}

impl Driver for StopWhileSquashed {
    fn set_launch(&mut self, id: LaunchId) {
        self.launch = Some(id);
    }
    fn control(&mut self) -> &mut dyn Control {
        self
    }
}

/// One faulting TB (its first warp's load faults on a managed region with host data: 25
/// µs, 25,000 cycles, on fault-study's PCIe).
fn one_tb() -> Shape {
    Shape {
        grid: 1,
        nf: 1,
        iters: 16,
        stride: 0,
        regions: 1,
        resident: vec![],
    }
}

#[test]
fn a_tb_stopped_while_squashed_leaves_with_its_replays_and_ends_bit_exact() {
    // Stopped at cycle 3,000 (the fault detected, far from serviced at ~25,000): evicted
    // and installed before the fault is serviced (its replay is squashed again) on another
    // SM, or after it on the same SM; or kept resident and resumed.
    let cases = [
        (AfterStop::Leave, 6_000, 1),
        (AfterStop::Leave, 40_000, 0),
        (AfterStop::LeaveHolding, 40_000, 1),
        (AfterStop::Stay, 6_000, 0),
        (AfterStop::Stay, 40_000, 0),
    ];
    for p in SQUASHING {
        for &(then, back_at, to) in &cases {
            let timing = gpu(2, 16, p, TbSwitch::Off, 4);
            let mut prep = prepare(&timing, &one_tb());
            let mut ctl = StopWhileSquashed::new(then, 3_000, back_at, to);
            let (stats, memory) = run_with(&mut prep, &mut ctl)
                .unwrap_or_else(|e| panic!("{p:?} {then:?} back at {back_at}: {e}"));
            assert!(
                memory == prep.reference,
                "{p:?} {then:?}: final memory differs from the functional core's"
            );
            if then != AfterStop::Stay {
                assert_eq!(ctl.carried, 1, "{p:?} {then:?}: the squashed load travels");
            }
            assert!(stats.frontend.replayed_instructions > 0, "{p:?} {then:?}");
            let f = stats.memory.translation.as_ref().unwrap().faults.unwrap();
            assert_eq!(f.far_faults, 1, "{p:?} {then:?}");
        }
    }
}

/// One TB on SM 0, discarded (flushed) at `discard_at` while its first warp's load is
/// squashed, and dispatched again (from its first instruction) at `back_at`.
struct DiscardWhileSquashed {
    launch: Option<LaunchId>,
    discard_at: u64,
    back_at: u64,
    step: u32,
}

impl Control for DiscardWhileSquashed {
    fn on_cycle(&mut self, m: &mut Machine) -> Result<(), TimingError> {
        m.clear_events();
        let launch = self.launch.expect("submitted");
        let now = m.cycle();
        let sm = SmId(0);
        match self.step {
            0 => m.request(Request::Dispatch { sm, launch }).map(|_| ())?,
            1 if now >= self.discard_at => {
                let tb = m.resident(sm).next().expect("resident").0;
                m.request(Request::Discard { sm, tb }).map(|_| ())?
            }
            2 if now >= self.back_at => m.request(Request::Dispatch { sm, launch }).map(|_| ())?,
            _ => return Ok(()),
        }
        self.step += 1;
        Ok(())
    }
}

impl Driver for DiscardWhileSquashed {
    fn set_launch(&mut self, id: LaunchId) {
        self.launch = Some(id);
    }
    fn control(&mut self) -> &mut dyn Control {
        self
    }
}

#[test]
fn a_tb_discarded_while_squashed_lets_its_launch_finish_bit_exact() {
    // Discarded at cycle 3,000 (the fault detected, serviced at ~25,000) and dispatched
    // again before the fault is serviced (its new load faults on the same region) or
    // after. The discarded load is never replayed; its launch must still finish: before
    // the fix, the abandoned access kept the launch in flight forever (a flushing
    // preemption hung every squashing organisation).
    for p in SQUASHING {
        for back_at in [6_000, 40_000] {
            let timing = gpu(2, 16, p, TbSwitch::Off, 4);
            let mut prep = prepare(&timing, &one_tb());
            let mut ctl = DiscardWhileSquashed {
                launch: None,
                discard_at: 3_000,
                back_at,
                step: 0,
            };
            let (stats, memory) = run_with(&mut prep, &mut ctl)
                .unwrap_or_else(|e| panic!("{p:?} back at {back_at}: {e}"));
            assert_eq!(ctl.step, 3, "{p:?}: discarded and dispatched again");
            assert!(
                memory == prep.reference,
                "{p:?} back at {back_at}: final memory differs from the functional core's"
            );
            let f = stats.memory.translation.as_ref().unwrap().faults.unwrap();
            assert_eq!(
                f.far_faults, 1,
                "{p:?} back at {back_at}: one region, one fault"
            );
        }
    }
}

/// Checkpoints the one TB on SM 0 at cycle 100 (before its load faults), stops it with
/// `Stay` at 3,000 (its load squashed), and asks to roll it back to the checkpoint.
#[derive(Default)]
struct RollbackWhileSquashed {
    launch: Option<LaunchId>,
    checkpoint: Option<gpu::timing::TbCheckpoint>,
    refusal: Option<String>,
    step: u32,
}

impl Control for RollbackWhileSquashed {
    fn on_cycle(&mut self, m: &mut Machine) -> Result<(), TimingError> {
        let launch = self.launch.expect("submitted");
        let sm = SmId(0);
        for e in m.take_events() {
            match e {
                Event::CheckpointDone { checkpoint, .. } => self.checkpoint = Some(*checkpoint),
                Event::TbStopped { tb, .. } => {
                    let chain = vec![self.checkpoint.take().expect("checkpointed")];
                    let r = m.request(Request::Rollback { sm, tb, chain });
                    self.refusal = Some(format!("{:?}", r.map(|_| ()).map_err(|r| r.error)));
                    m.request(Request::Resume { sm, tb })?;
                }
                _ => {}
            }
        }
        let now = m.cycle();
        let tb = m.resident(sm).next().map(|t| t.0);
        match (self.step, tb) {
            (0, _) => m.request(Request::Dispatch { sm, launch }).map(|_| ())?,
            (1, Some(tb)) if now >= 100 => m
                .request(Request::Checkpoint {
                    sm,
                    tb,
                    scope: gpu::timing::Scope::Full,
                    base: 0x6000_0000_0000,
                })
                .map(|_| ())?,
            (2, Some(tb)) if now >= 3_000 => m
                .request(Request::Stop {
                    sm,
                    tb,
                    at: StopAt::Boundary,
                    then: AfterStop::Stay,
                    reports: WarpReports::None,
                })
                .map(|_| ())?,
            _ => return Ok(()),
        }
        self.step += 1;
        Ok(())
    }
}

impl Driver for RollbackWhileSquashed {
    fn set_launch(&mut self, id: LaunchId) {
        self.launch = Some(id);
    }
    fn control(&mut self) -> &mut dyn Control {
        self
    }
}

#[test]
fn a_tb_with_a_squashed_access_is_not_rolled_back() {
    // Its replay is still to come: re-executing from the checkpoint would issue the load
    // again.
    let timing = gpu(2, 16, Pipeline::ReplayQueue, TbSwitch::Off, 4);
    let mut prep = prepare(&timing, &one_tb());
    let mut ctl = RollbackWhileSquashed::default();
    let (_, memory) = run_with(&mut prep, &mut ctl).unwrap();
    assert!(memory == prep.reference);
    let refusal = ctl.refusal.expect("stopped");
    assert!(
        refusal.contains("NoRollback") && refusal.contains("replayed after a fault"),
        "{refusal}"
    );
}

// ---------------------------------------------------------------------------------------
// TB switching on fault.

/// 2 SMs of 4 TB slots; 24 TBs, the first 8 (the first wave) fault on one region, their
/// second warps waiting at the barrier meanwhile; every TB then computes.
fn waves() -> Shape {
    Shape {
        grid: 24,
        nf: 8,
        iters: 1_500,
        stride: 4096,
        regions: 1,
        resident: vec![],
    }
}

#[test]
fn switching_on_fault_is_bit_exact_under_every_squashing_organisation() {
    for p in SQUASHING {
        for mode in [TbSwitch::Save, TbSwitch::Ideal] {
            let (stats, memory, reference) = run(&gpu(2, 4, p, mode, 4), &waves());
            assert!(memory == reference, "{p:?} {mode:?}: final memory differs");
            let fe = &stats.frontend;
            assert!(fe.tbs_switched_out > 0, "{p:?} {mode:?}: {fe:?}");
            assert_eq!(fe.tbs_switched_in, fe.tbs_switched_out, "{p:?} {mode:?}");
            assert!(
                fe.switch_cycles >= 2 * fe.tbs_switched_out,
                "{p:?} {mode:?}"
            );
        }
    }
}

#[test]
fn switching_is_bit_exact_with_faults_at_seeded_points() {
    // 32 TBs, the first 24 of them reading the managed buffer 32 KiB apart (two TBs a
    // region, over five regions); each seed leaves two regions resident, so the faults
    // fall on different TBs and SMs.
    for seed in 1..=3u64 {
        let resident = timing_common::seeded(seed, 5, 2);
        let shape = Shape {
            grid: 32,
            nf: 24,
            iters: 200,
            stride: 32 * 1024,
            regions: 5,
            resident,
        };
        for p in SQUASHING {
            for mode in [TbSwitch::Save, TbSwitch::Ideal] {
                let (stats, memory, reference) = run(&gpu(2, 4, p, mode, 2), &shape);
                assert!(memory == reference, "seed {seed} {p:?} {mode:?}");
                let peak = stats.sms.iter().map(|s| s.frontend.switched_out_peak);
                assert!(peak.max().unwrap() <= 2, "seed {seed} {p:?} {mode:?}");
            }
        }
    }
}

#[test]
fn switching_out_faulted_tbs_finishes_sooner_and_keeps_the_extra_limit() {
    // §6.5.3: with TBs waiting for a fault switched out, the TBs behind them run during
    // the fault. Without switching the first wave holds every slot for the fault's 25,000
    // cycles.
    let p = Pipeline::ReplayQueue;
    let (off, off_memory, reference) = run(&gpu(2, 4, p, TbSwitch::Off, 4), &waves());
    assert!(off_memory == reference);
    assert_eq!(off.frontend.tbs_switched_out, 0);
    let mut cycles = vec![("off", off.cycles)];
    for (mode, extra) in [
        (TbSwitch::Ideal, 4),
        (TbSwitch::Save, 4),
        (TbSwitch::Ideal, 2),
        (TbSwitch::Ideal, 1),
    ] {
        let (s, memory, _) = run(&gpu(2, 4, p, mode, extra), &waves());
        assert!(memory == reference, "{mode:?} {extra}");
        let peak = s
            .sms
            .iter()
            .map(|x| x.frontend.switched_out_peak)
            .max()
            .unwrap();
        assert!(s.frontend.tbs_switched_out > 0, "{mode:?} {extra}");
        // A TB comes back only once its faults are serviced: its replays are never
        // squashed again, so each faulted load replays once, as without switching.
        assert_eq!(
            s.frontend.replayed_instructions, off.frontend.replayed_instructions,
            "{mode:?} {extra}"
        );
        assert!(
            peak > 0 && peak <= u64::from(extra),
            "{mode:?} {extra}: peak {peak}"
        );
        if extra == 4 {
            // Each SM's first wave (4 TBs) goes out whole.
            assert_eq!(peak, 4, "{mode:?}");
            assert!(
                s.cycles < off.cycles,
                "{mode:?}: {} vs {}",
                s.cycles,
                off.cycles
            );
        }
        cycles.push((mode.name(), s.cycles));
    }
    eprintln!("cycles (off, ideal/4, save/4, ideal/2, ideal/1): {cycles:?}");
    // Moving contexts costs time: ideal switching is at least as fast as saving.
    assert!(cycles[1].1 <= cycles[2].1, "{cycles:?}");
}

#[test]
fn with_switching_off_nothing_is_switched_and_stats_do_not_mention_it() {
    let (s, _, _) = run(
        &gpu(2, 4, Pipeline::ReplayQueue, TbSwitch::Off, 4),
        &waves(),
    );
    let json = serde_json::to_string(&s).unwrap();
    for key in [
        "tbs_switched_out",
        "tbs_switched_in",
        "switch_cycles",
        "switched_out_peak",
    ] {
        assert!(!json.contains(key), "{key} written with switching off");
    }
    let g = GpuConfig::preset("fault-study").unwrap();
    let text = toml::to_string(&g).unwrap();
    assert!(!text.contains("tb_switch"), "{text}");
}
