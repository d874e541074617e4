//! The registers LIVE saves are the ones the analyses call live: for every warp a LIVE
//! context switch takes off an SM (each suite kernel, preempted every 1,500 cycles), the
//! 32-bit registers per thread it saves equal `analyze`'s LIVE context at the warp's
//! instruction (`CtxBack::live`, what `switchyard analyze --per-instruction` prints as
//! `live_words`), computed on the kernel as the machine times it. Diverged warps save the
//! union over their SIMT stack, which the per-instruction figure does not describe, and are
//! counted apart.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use analysis::ctxback::{CtxBack, CtxBackConfig};
use gpu::config::GpuConfig;
use gpu::timing::{HoldId, Machine, SmId, TbContext, TbRef, TimedGpu, TimingError, TransferId};
use kir::{InstId, Kernel};
use preempt::{Cx, Mechanism, MechanismKind, Preempted, Switch, SwitchConfig};
use sched::{Framework, SmState};
use suite::Size;
use workload::scenario::{Process, Program};
use workload::system::Injector;
use workload::{Setup, System};

#[derive(Default)]
struct Tally {
    compared: u32,
    diverged: u32,
    mismatches: Vec<String>,
}

/// LIVE switching, measuring every warp it takes against the analysis first.
struct Probe {
    inner: Switch,
    measure: Switch,
    analyses: HashMap<usize, (Arc<Kernel>, CtxBack)>,
    tally: Rc<RefCell<Tally>>,
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
        let (_, ctxback) = self
            .analyses
            .entry(Arc::as_ptr(&kernel) as usize)
            .or_insert_with(|| {
                let c = CtxBack::compute(&kernel, &CtxBackConfig::default());
                (kernel.clone(), c)
            });
        let mut t = self.tally.borrow_mut();
        for w in &context.warps {
            if w.warp.is_done() {
                continue;
            }
            let entries = w
                .warp
                .stack
                .iter()
                .filter(|e| e.mask != 0 && e.pc != e.rpc)
                .count();
            if entries > 1 {
                t.diverged += 1;
                continue;
            }
            let pc = w.warp.next_entry().expect("a running warp").pc;
            let analysed = ctxback.live(InstId(pc)).words();
            let (saved, _, _) = self.measure.measure_warp(&kernel, &w.warp, block_x);
            t.compared += 1;
            if saved != analysed {
                t.mismatches.push(format!(
                    "{} pc {pc}: LIVE saved {saved} registers per thread, analyze says {analysed}",
                    kernel.name
                ));
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
fn live_saves_exactly_the_registers_the_analysis_calls_live() {
    let mut total = Tally::default();
    for &k in suite::all() {
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
        let tally = Rc::new(RefCell::new(Tally::default()));
        let probe = Probe {
            inner: Switch::new("live", SwitchConfig::LIVE),
            measure: Switch::new("live", SwitchConfig::LIVE),
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
