//! What LIVE context switches take off the SMs, checked against the analyses that describe
//! it. Every suite kernel is preempted every 1,500 cycles under LIVE switching, and every
//! warp taken is inspected before it is saved:
//!
//! * The registers LIVE saves are the ones the analyses call live: the 32-bit registers
//!   per thread it saves equal `analyze`'s LIVE context at the warp's instruction
//!   (`CtxBack::live`, what `switchyard analyze --per-instruction` prints as `live_words`),
//!   computed on the kernel as the machine times it. Diverged warps save the union over
//!   their SIMT stack, which the per-instruction figure does not describe, and are counted
//!   apart.
//! * The compressed register context GPUDuet reserves (papers/lin-thesis §3.6.6) is proved
//!   by the compiler (`regalloc::patterns`), not measured: every live 32-bit register's
//!   values, as papers/lin-lightweight §III-C's compressor classes them
//!   (`preempt::compress`), are no less regular than the analysis says — a register it
//!   calls uniform is uniform in every pattern analysing group, one it calls strided is
//!   uniform or strided. Only the low 32 bits of each register are compared: the analysis
//!   assumes (and says so) that a strided 64-bit value's high half does not change between
//!   a group's lanes, which the values may contradict.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use analysis::ctxback::{CtxBack, CtxBackConfig};
use gpu::config::GpuConfig;
use gpu::exec::Warp;
use gpu::timing::{HoldId, Machine, SmId, TbContext, TbRef, TimedGpu, TimingError, TransferId};
use kir::{InstId, Kernel};
use preempt::compress::{self, Pattern};
use preempt::{Cx, Mechanism, MechanismKind, Preempted, Switch, SwitchConfig};
use regalloc::patterns::{ValuePattern, ValuePatterns};
use sched::{Framework, SmState};
use suite::Size;
use workload::scenario::Process;
use workload::system::Injector;
use workload::{Setup, System};

/// What an inspection sees of one evicted warp: its kernel (as the machine times it), the
/// TB's x dimension, and the warp.
type Inspect = dyn FnMut(&Arc<Kernel>, u32, &Warp);

/// LIVE switching, showing every warp it takes to `inspect` first.
struct Probe {
    inner: Switch,
    inspect: Box<Inspect>,
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
        let kernel = launch.ctx().kernel.clone();
        let block_x = launch.ctx().block[0];
        for w in context.warps.iter().filter(|w| !w.warp.is_done()) {
            (self.inspect)(&kernel, block_x, &w.warp);
        }
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

/// Runs suite kernel `k` at `small` under LIVE switching, preempted every 1,500 cycles,
/// every warp taken shown to `inspect`; the run must verify.
fn run_preempted(k: &'static dyn suite::Kernel, inspect: Box<Inspect>) {
    // The GTX480 has no tensor cores; the tensor-core kernels switch on the A100.
    let preset = if k.needs_tensor_cores() {
        "a100"
    } else {
        "gtx480"
    };
    let timing = TimedGpu::new(GpuConfig::preset(preset).unwrap());
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
    let probe = Probe {
        inner: Switch::new("live", SwitchConfig::LIVE),
        inspect,
    };
    let process = Process::suite(k, Size::Small, 1);
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
}

/// The PC a converged warp stands at (`None` for a diverged one, or one past the code).
fn converged_pc(kernel: &Kernel, w: &Warp) -> Option<u32> {
    let entries = w
        .stack
        .iter()
        .filter(|e| e.mask != 0 && e.pc != e.rpc)
        .count();
    let pc = w.next_entry()?.pc;
    (entries <= 1 && (pc as usize) < kernel.insts.len()).then_some(pc)
}

#[derive(Default)]
struct Tally {
    compared: u32,
    diverged: u32,
    mismatches: Vec<String>,
}

#[test]
fn live_saves_exactly_the_registers_the_analysis_calls_live() {
    let mut total = Tally::default();
    for &k in suite::all() {
        let tally = Rc::new(RefCell::new(Tally::default()));
        let t = tally.clone();
        let measure = RefCell::new(Switch::new("live", SwitchConfig::LIVE));
        let mut analyses: HashMap<usize, CtxBack> = HashMap::new();
        run_preempted(
            k,
            Box::new(move |kernel, block_x, w| {
                let mut t = t.borrow_mut();
                let Some(pc) = converged_pc(kernel, w) else {
                    t.diverged += 1;
                    return;
                };
                let ctxback = analyses
                    .entry(Arc::as_ptr(kernel) as usize)
                    .or_insert_with(|| CtxBack::compute(kernel, &CtxBackConfig::default()));
                let analysed = ctxback.live(InstId(pc)).words();
                let (saved, _, _) = measure.borrow_mut().measure_warp(kernel, w, block_x);
                t.compared += 1;
                if saved != analysed {
                    t.mismatches.push(format!(
                        "{} pc {pc}: LIVE saved {saved} registers per thread, analyze says {analysed}",
                        kernel.name
                    ));
                }
            }),
        );
        let t = tally.borrow();
        eprintln!(
            "{}: {} warps compared, {} diverged",
            k.name(),
            t.compared,
            t.diverged
        );
        total.compared += t.compared;
        total.diverged += t.diverged;
        total.mismatches.extend(t.mismatches.iter().cloned());
    }
    assert!(
        total.mismatches.is_empty(),
        "{} of {} warps differ:\n{}",
        total.mismatches.len(),
        total.compared,
        total.mismatches[..total.mismatches.len().min(20)].join("\n")
    );
    assert!(
        total.compared > 1000,
        "only {} warps compared",
        total.compared
    );
}

/// Registers compared, how many the analysis called uniform or strided, how many whose
/// values the compressor found compressible and the analysis did not, and the ones less
/// regular than the analysis says.
#[derive(Default)]
struct Patterns {
    compared: u64,
    compressible: u64,
    missed: u64,
    wrong: Vec<String>,
}

fn rank(p: Pattern) -> ValuePattern {
    match p {
        Pattern::Uniform => ValuePattern::Uniform,
        Pattern::Strided => ValuePattern::Strided,
        Pattern::Random => ValuePattern::Random,
    }
}

#[test]
fn registers_the_analysis_calls_compressible_are_compressible() {
    let total = Rc::new(RefCell::new(Patterns::default()));
    for &k in suite::all().iter().filter(|k| !k.needs_tensor_cores()) {
        let t = total.clone();
        let mut analyses: HashMap<usize, (ValuePatterns, analysis::Liveness)> = HashMap::new();
        run_preempted(
            k,
            Box::new(move |kernel, block_x, w| {
                let Some(pc) = converged_pc(kernel, w) else {
                    return;
                };
                let (patterns, live) =
                    analyses
                        .entry(Arc::as_ptr(kernel) as usize)
                        .or_insert_with(|| {
                            let mut live = analysis::Liveness::new();
                            live.compute(kernel);
                            (ValuePatterns::compute(kernel, block_x), live)
                        });
                let lanes = w.valid & !w.exited;
                let pag = compress::pag(block_x);
                let mut t = t.borrow_mut();
                for r in live.live_in(InstId(pc)).iter() {
                    if kernel.regs[r].ty == kir::Ty::Pred {
                        continue;
                    }
                    let base = r.0 as usize * 32;
                    let found =
                        compress::compress_register(|l| w.regs[base + l] as u32, lanes, pag);
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
            }),
        );
    }
    let t = total.borrow();
    eprintln!(
        "{} registers compared, {} called compressible, {} compressible values missed",
        t.compared, t.compressible, t.missed
    );
    assert!(
        t.wrong.is_empty(),
        "{} registers less regular than the analysis says, e.g. {:?}",
        t.wrong.len(),
        &t.wrong[..t.wrong.len().min(10)]
    );
    // The comparison saw registers of every kind: many called compressible.
    assert!(t.compared > 1000, "{}", t.compared);
    assert!(
        t.compressible * 10 > t.compared,
        "{} of {}",
        t.compressible,
        t.compared
    );
}
