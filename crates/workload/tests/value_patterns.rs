//! The compressed register context GPUDuet reserves (papers/lin-thesis §3.6.6) is proved by
//! the compiler (`regalloc::patterns`), not measured. This checks the proof against the
//! values: for every warp a LIVE context switch takes off an SM (suite kernels, preempted
//! every 1,500 cycles), every live 32-bit register's values, as papers/lin-lightweight
//! §III-C's compressor classes them (`preempt::compress`), are no less regular than the
//! analysis says — a register it calls uniform is uniform in every pattern analysing
//! group, one it calls strided is uniform or strided. Only the low 32 bits of each
//! register are compared: the analysis assumes (and says so) that a strided 64-bit value's
//! high half does not change between a group's lanes, which the values may contradict.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use gpu::config::GpuConfig;
use gpu::timing::{HoldId, Machine, SmId, TbContext, TbRef, TimedGpu, TimingError, TransferId};
use kir::{InstId, Kernel};
use preempt::compress::{self, Pattern};
use preempt::{Cx, Mechanism, MechanismKind, Preempted, Switch, SwitchConfig};
use regalloc::patterns::{ValuePattern, ValuePatterns};
use sched::{Framework, SmState};
use suite::Size;
use workload::scenario::{Process, Program};
use workload::system::Injector;
use workload::{Setup, System};

#[derive(Default)]
struct Tally {
    /// Registers compared, and how many the analysis called uniform or strided.
    compared: u64,
    compressible: u64,
    /// Registers whose values the compressor found compressible and the analysis did not.
    missed: u64,
    wrong: Vec<String>,
}

/// LIVE switching, comparing every warp it takes with the analysis first.
struct Probe {
    inner: Switch,
    analyses: HashMap<usize, ValuePatterns>,
    tally: Rc<RefCell<Tally>>,
}

fn rank(p: Pattern) -> ValuePattern {
    match p {
        Pattern::Uniform => ValuePattern::Uniform,
        Pattern::Strided => ValuePattern::Strided,
        Pattern::Random => ValuePattern::Random,
    }
}

impl Mechanism for Probe {
    fn name(&self) -> String {
        "live (probed)".into()
    }
    fn kernel_pass(&self) -> Option<gpu::timing::Pass> {
        self.inner.kernel_pass()
    }
    fn preempt(&mut self, sm: SmId, want: preempt::Want, cx: &mut Cx) -> Result<(), TimingError> {
        self.inner.preempt(sm, want, cx)
    }
    fn evicted(
        &mut self,
        sm: SmId,
        context: Box<TbContext>,
        hold: Option<HoldId>,
        cx: &mut Cx,
    ) -> Result<(), TimingError> {
        let launch = cx.machine.launch(context.tb.launch);
        let kernel: Arc<Kernel> = launch.ctx().kernel.clone();
        let block_x = launch.ctx().block[0];
        let patterns = self
            .analyses
            .entry(Arc::as_ptr(&kernel) as usize)
            .or_insert_with(|| ValuePatterns::compute(&kernel, block_x));
        let mut live = analysis::Liveness::new();
        live.compute(&kernel);
        let pag = compress::pag(block_x);
        let mut t = self.tally.borrow_mut();
        for w in &context.warps {
            if w.warp.is_done() {
                continue;
            }
            let Some(pc) = w.warp.next_entry().map(|e| e.pc) else {
                continue;
            };
            if pc as usize >= kernel.insts.len() {
                continue;
            }
            let lanes = w.warp.valid & !w.warp.exited;
            for r in live.live_in(InstId(pc)).iter() {
                if kernel.regs[r].ty == kir::Ty::Pred {
                    continue;
                }
                let base = r.0 as usize * 32;
                let found =
                    compress::compress_register(|l| w.warp.regs[base + l] as u32, lanes, pag);
                let said = patterns.before(InstId(pc), r);
                t.compared += 1;
                if said != ValuePattern::Random {
                    t.compressible += 1;
                }
                if rank(found.pattern) > said {
                    t.wrong.push(format!(
                        "{} pc {pc} {}: analysis {said:?}, values {:?}",
                        kernel.name, kernel.regs[r].name, found.pattern
                    ));
                } else if rank(found.pattern) < said && said == ValuePattern::Random {
                    t.missed += 1;
                }
            }
        }
        drop(t);
        self.inner.evicted(sm, context, hold, cx)
    }
    fn finished(&mut self, sm: SmId, tb: TbRef, cycle: u64, cx: &mut Cx) {
        self.inner.finished(sm, tb, cycle, cx)
    }
    fn transfer_done(&mut self, sm: SmId, id: TransferId, cx: &mut Cx) -> Result<(), TimingError> {
        self.inner.transfer_done(sm, id, cx)
    }
    fn resume(&mut self, sm: SmId, tb: Preempted, cx: &mut Cx) -> Result<(), TimingError> {
        self.inner.resume(sm, tb, cx)
    }
    fn can_resume(&self, sm: SmId, tb: &Preempted, m: &Machine) -> bool {
        self.inner.can_resume(sm, tb, m)
    }
}

/// A preemption request every `interval` cycles, round robin over running SMs.
struct Every {
    interval: u64,
    next: u64,
    turn: u32,
}

impl Injector for Every {
    fn before_cycle(&mut self, m: &Machine, fw: &mut Framework) {
        if m.cycle() < self.next {
            return;
        }
        self.next += self.interval;
        let n = m.sm_count();
        for k in 0..n {
            let sm = SmId((self.turn + k) % n);
            if fw.tables().sm(sm).state == SmState::Running && fw.preempt_sm(sm) {
                self.turn = sm.0 + 1;
                return;
            }
        }
    }
}

#[test]
fn registers_the_analysis_calls_compressible_are_compressible() {
    let mut total = Tally::default();
    for &k in suite::all().iter().filter(|k| !k.needs_tensor_cores()) {
        let timing = TimedGpu::new(GpuConfig::preset("gtx480").unwrap());
        let setup = Setup {
            host: timing.gpu.host.clone(),
            timing,
            framework: Default::default(),
            policy: Default::default(),
            time_slice_us: 50.0,
            mechanism: MechanismKind::Live,
            copy_policy: Default::default(),
            max_cycles: 1 << 26,
            snapshot: false,
            replay: None,
            one_context: false,
        };
        let tally = Rc::new(RefCell::new(Tally::default()));
        let probe = Probe {
            inner: Switch::new("live", SwitchConfig::LIVE),
            analyses: HashMap::new(),
            tally: tally.clone(),
        };
        let process = Process {
            stream_priorities: Vec::new(),
            requests: None,
            name: k.name().into(),
            arrival_us: 0.0,
            priority: 0,
            program: Program::Suite {
                kernel: k,
                size: Size::Small,
                seed: 1,
                target: k.default_target(),
                warm_up: false,
                managed: workload::scenario::Managed::Off,
            },
        };
        let mut every = Every {
            interval: 1_500,
            next: 1_500,
            turn: 0,
        };
        let r = System::with_mechanism(setup, &[process], Box::new(probe))
            .unwrap()
            .run_with(&mut |_| {}, Some(&mut every))
            .unwrap_or_else(|e| panic!("{}: {e}", k.name()));
        assert!(
            r.processes[0].verdict.as_ref().unwrap().verified,
            "{}",
            k.name()
        );
        let t = tally.borrow();
        eprintln!(
            "{}: {} registers compared, {} called compressible, {} compressible values missed",
            k.name(),
            t.compared,
            t.compressible,
            t.missed
        );
        total.compared += t.compared;
        total.compressible += t.compressible;
        total.missed += t.missed;
        total.wrong.extend(t.wrong.iter().cloned());
    }
    eprintln!(
        "all: {} compared, {} compressible, {} missed",
        total.compared, total.compressible, total.missed
    );
    assert!(
        total.wrong.is_empty(),
        "{} registers less regular than the analysis says, e.g. {:?}",
        total.wrong.len(),
        &total.wrong[..total.wrong.len().min(10)]
    );
    // The comparison saw registers of every kind: many called compressible.
    assert!(total.compared > 1000, "{}", total.compared);
    assert!(
        total.compressible * 10 > total.compared,
        "{} of {}",
        total.compressible,
        total.compared
    );
}
