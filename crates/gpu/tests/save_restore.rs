//! Thread-block save and restore is bit-exact, tested as a property: every suite kernel, on
//! both PTX targets, runs on the timed GTX480 while TBs are stopped at seeded random cycles
//! and at adversarial moments (right after dispatch, while warps wait at a barrier, inside
//! divergent regions, and, for the persistent `mandel`, while its TBs hold work taken from
//! its atomic queue), their contexts held for a while and installed again on a different SM;
//! device memory must end bit-identical to the uninterrupted run. A second test shows the
//! check has teeth: perturbing one captured register makes it fail. A third stops TBs of
//! kernels with selective preemption points (papers/lin-lightweight §IV-A) at those points:
//! every warp halts right after a `pp` or waiting at a `bar.pp`, and the kernels verify.

mod timing_common;

use gpu::config::GpuConfig;
use gpu::timing::{
    AfterStop, Control, Event, LaunchId, Machine, Request, SmId, Start, StopAt, TbContext,
    TbControl, TbRef, TimedGpu, TimedStats, TimingError, WarpReports,
};
use gpu::{DevPtr, Gpu, KernelArg, ModuleId};
use suite::{Rng, Size, Target};
use timing_common::{Device, Engine};

/// Where a TB stood when it was stopped.
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    evictions: u32,
    restores: u32,
    /// Stopped in the cycle it was dispatched (nothing executed yet).
    after_dispatch: u32,
    /// Some warp waited at a barrier.
    at_barrier: u32,
    /// Some warp's lanes were split over several SIMT stack entries.
    diverged: u32,
    /// Stopped after it had started working, none of the above.
    running: u32,
    /// Stopped at preemption points.
    at_points: u32,
}

/// Whether a stopped warp waits at a preemption point: finished, just past a `pp`, waiting
/// at a barrier (a `bar.pp`, or another one it reached first), or just past a barrier
/// (every warp of the TB reached it, so it completed).
fn at_point(kernel: &kir::Kernel, w: &gpu::timing::WarpContext) -> bool {
    use gpu::barrier::WarpStatus;
    use kir::inst::Op;
    let ops = kernel.insts.as_slice();
    match w.status {
        WarpStatus::Done => true,
        WarpStatus::Waiting(a) => matches!(ops[a.pc.0 as usize].op, Op::Bar { .. }),
        WarpStatus::Ready => match w.warp.next_entry() {
            None => true,
            Some(e) => {
                e.pc > 0 && matches!(ops[e.pc as usize - 1].op, Op::Pp { .. } | Op::Bar { .. })
            }
        },
    }
}

/// Flips bit 0 of one register of one lane of warp 0 in the first context captured after
/// that warp has done some work.
#[derive(Clone, Copy, Debug)]
struct Perturb {
    reg: usize,
    lane: usize,
}

/// A control that runs a launch like `GridDriver` while stopping TBs at the cycles in
/// `evict_at` (and, when `adversarial`, some right after dispatch), holding each context for
/// a random while and installing it on another SM, before any new TB.
struct Shuffler<'a> {
    launch: LaunchId,
    /// Absolute cycles, latest first.
    evict_at: Vec<u64>,
    held: Vec<(Box<TbContext>, u64)>,
    adversarial: bool,
    rng: &'a mut Rng,
    counts: &'a mut Counts,
    perturb: Option<Perturb>,
    /// Rotates the preferred kind of victim.
    turn: u32,
    stop_at: StopAt,
}

impl Shuffler<'_> {
    /// Stops a resident TB, preferring (in turn) one at a barrier, one diverged, any.
    fn evict_one(&mut self, m: &mut Machine) -> Result<(), TimingError> {
        let mut all = Vec::new();
        for sm in m.sm_ids() {
            for (tb, control) in m.resident(sm) {
                if control == TbControl::Running && tb.launch == self.launch {
                    all.push((sm, tb));
                }
            }
        }
        if all.is_empty() {
            return Ok(());
        }
        let kind = |m: &Machine, sm: SmId, tb: TbRef| {
            let w = m.warps_of(sm, tb).expect("resident");
            (
                w.iter().any(|w| w.at_barrier),
                w.iter().any(|w| w.diverged),
                w.iter().all(|w| w.executed == 0),
            )
        };
        self.turn += 1;
        let preferred: Vec<(SmId, TbRef)> = all
            .iter()
            .copied()
            .filter(|&(sm, tb)| {
                let (b, d, _) = kind(m, sm, tb);
                match self.turn % 3 {
                    0 => b,
                    1 => d,
                    _ => true,
                }
            })
            .collect();
        let pool = if preferred.is_empty() {
            &all
        } else {
            &preferred
        };
        let (sm, tb) = pool[self.rng.below(pool.len() as u32) as usize];
        self.stop(m, sm, tb)
    }

    fn stop(&mut self, m: &mut Machine, sm: SmId, tb: TbRef) -> Result<(), TimingError> {
        let w = m.warps_of(sm, tb).expect("resident");
        let c = &mut *self.counts;
        if w.iter().all(|w| w.executed == 0) {
            c.after_dispatch += 1;
        } else if w.iter().any(|w| w.at_barrier) {
            c.at_barrier += 1;
        } else if w.iter().any(|w| w.diverged) {
            c.diverged += 1;
        } else {
            c.running += 1;
        }
        m.request(Request::Stop {
            sm,
            tb,
            at: self.stop_at,
            then: AfterStop::Leave,
            reports: WarpReports::None,
        })?;
        Ok(())
    }
}

impl Control for Shuffler<'_> {
    fn on_cycle(&mut self, m: &mut Machine) -> Result<(), TimingError> {
        let now = m.cycle();
        for e in m.take_events() {
            match e {
                Event::TbEvicted {
                    mut context, sm, ..
                } => {
                    assert_eq!(context.from, sm);
                    self.counts.evictions += 1;
                    if self.stop_at == StopAt::PreemptionPoint {
                        let kernel = &m.launch(context.tb.launch).ctx().kernel;
                        for w in &context.warps {
                            assert!(
                                at_point(kernel, w),
                                "{}: warp {} halted away from a preemption point",
                                kernel.name,
                                w.warp.index
                            );
                        }
                        self.counts.at_points += 1;
                    }
                    let w = &mut context.warps[0].warp;
                    if let Some(p) = self.perturb.filter(|_| w.executed > 20 && !w.is_done()) {
                        w.regs[p.reg * 32 + p.lane] ^= 1;
                        self.perturb = None;
                    }
                    let hold = 1 + u64::from(self.rng.below(3000));
                    self.held.push((context, now + hold));
                }
                Event::TbDispatched { sm, tb, .. }
                    if self.adversarial && self.rng.below(16) == 0 =>
                {
                    self.stop(m, sm, tb)?;
                }
                _ => {}
            }
        }
        // Contexts first (the PTBQ rule of papers/tanasic-thesis §5.2.3), each on an SM other
        // than the one it left.
        let mut i = 0;
        while i < self.held.len() {
            if self.held[i].1 > now {
                i += 1;
                continue;
            }
            let from = self.held[i].0.from;
            let room: Vec<SmId> = m
                .sm_ids()
                .filter(|&sm| sm != from && m.fits(sm, self.launch))
                .collect();
            if room.is_empty() {
                i += 1;
                continue;
            }
            let sm = room[self.rng.below(room.len() as u32) as usize];
            let (context, _) = self.held.remove(i);
            m.request(Request::Install {
                sm,
                context,
                into: None,
                start: Start::Running,
            })?;
            self.counts.restores += 1;
        }
        for sm in m.sm_ids() {
            if m.launch(self.launch).undispatched() > 0 && m.fits(sm, self.launch) {
                m.request(Request::Dispatch {
                    sm,
                    launch: self.launch,
                })?;
            }
        }
        while self.evict_at.last().is_some_and(|&c| c <= now) {
            self.evict_at.pop();
            self.evict_one(m)?;
        }
        Ok(())
    }
}

/// Runs a suite kernel's host program on a timed device whose launches are shuffled.
struct ShufflingDevice {
    gpu: Gpu,
    module: ModuleId,
    allocs: Vec<(u64, u64)>,
    /// Per launch, in order: how many cycles it took uninterrupted.
    reference_cycles: Vec<u64>,
    evictions_per_launch: Vec<u32>,
    launches: usize,
    rng: Rng,
    counts: Counts,
    perturb: Option<Perturb>,
    stop_at: StopAt,
}

impl suite::Device for ShufflingDevice {
    fn alloc(&mut self, bytes: u64) -> Result<suite::DevPtr, suite::DeviceError> {
        let p = self.gpu.alloc(bytes).0;
        self.allocs.push((p, bytes));
        Ok(suite::DevPtr(p))
    }

    fn write(&mut self, dst: suite::DevPtr, data: &[u8]) -> Result<(), suite::DeviceError> {
        self.gpu
            .copy_to_device(DevPtr(dst.0), data)
            .map_err(|e| suite::DeviceError(e.to_string()))
    }

    fn read(&mut self, src: suite::DevPtr, len: u64) -> Result<Vec<u8>, suite::DeviceError> {
        self.gpu
            .copy_from_device(DevPtr(src.0), len)
            .map_err(|e| suite::DeviceError(e.to_string()))
    }

    fn launch(&mut self, l: &suite::Launch<'_>) -> Result<(), suite::DeviceError> {
        let args: Vec<KernelArg> = l.args.iter().map(|a| arg(*a)).collect();
        let n = self.launches;
        self.launches += 1;
        let span = self.reference_cycles.get(n).copied().unwrap_or(1).max(2);
        let start = self.gpu.machine().expect("timed").cycle();
        let k = self.evictions_per_launch.get(n).copied().unwrap_or(0);
        let mut evict_at: Vec<u64> = (0..k)
            .map(|_| start + 1 + u64::from(self.rng.below(span as u32 - 1)))
            .collect();
        evict_at.sort_unstable_by(|a, b| b.cmp(a));
        let (rng, counts, perturb) = (&mut self.rng, &mut self.counts, &mut self.perturb);
        let stop_at = self.stop_at;
        self.gpu
            .launch_timed_with(
                self.module,
                l.entry,
                [l.grid.x, l.grid.y, l.grid.z],
                [l.block.x, l.block.y, l.block.z],
                l.dynamic_smem,
                &args,
                |launch| Shuffler {
                    launch,
                    evict_at,
                    held: Vec::new(),
                    adversarial: true,
                    rng,
                    counts,
                    perturb: perturb.take(),
                    turn: 0,
                    stop_at,
                },
            )
            .map(|_| ())
            .map_err(|e| suite::DeviceError(e.to_string()))
    }
}

fn arg(a: suite::Arg) -> KernelArg {
    match a {
        suite::Arg::Ptr(p) => KernelArg::Ptr(DevPtr(p.0)),
        suite::Arg::U32(v) => KernelArg::U32(v),
        suite::Arg::I32(v) => KernelArg::I32(v),
        suite::Arg::U64(v) => KernelArg::U64(v),
        suite::Arg::F32(v) => KernelArg::F32(v),
        suite::Arg::F64(v) => KernelArg::F64(v),
    }
}

fn gtx480() -> TimedGpu {
    TimedGpu::new(GpuConfig::preset("gtx480").expect("preset"))
}

/// The GTX480, or the A100 for a kernel that needs tensor cores.
fn timed_for(k: &dyn suite::Kernel) -> TimedGpu {
    match Engine::for_kernel(k) {
        Engine::Timed(t) => *t,
        Engine::Functional => unreachable!("a timed engine"),
    }
}

/// The uninterrupted timed run: final memory of every allocation, and every launch's stats.
fn reference(k: &dyn suite::Kernel, target: Target) -> (Vec<Vec<u8>>, Vec<TimedStats>) {
    let file = format!("{}.{}.ptx", k.name(), target.name());
    let mut d = Device::new(&file, k.ptx(target).unwrap(), Engine::for_kernel(k));
    let v = k
        .run(&mut d, Size::Small, 1)
        .unwrap_or_else(|e| panic!("{}: {e}", k.name()));
    assert!(v.passed(), "{}: {v:?}", k.name());
    (d.snapshot(), d.stats)
}

/// Runs `k` with at least `min_evictions` stops spread over its launches in proportion to
/// their length; returns the final memory, whether the host program's own check passed (or
/// its error), and what happened.
fn shuffled(
    k: &dyn suite::Kernel,
    target: Target,
    reference: &[TimedStats],
    min_evictions: u32,
    seed: u64,
    perturb: Option<Perturb>,
) -> (Vec<Vec<u8>>, Result<bool, String>, Counts) {
    let total: u64 = reference.iter().map(|s| s.cycles).sum();
    let evictions_per_launch = reference
        .iter()
        .map(|s| {
            let share = (u64::from(min_evictions) * s.cycles).div_ceil(total.max(1));
            share as u32 + 1
        })
        .collect();
    let mut gpu = Gpu::timed(timed_for(k)).expect("preset");
    let file = format!("{}.{}.ptx", k.name(), target.name());
    let module = gpu
        .load_ptx(&file, k.ptx(target).unwrap())
        .expect("suite PTX loads");
    let mut d = ShufflingDevice {
        gpu,
        module,
        allocs: Vec::new(),
        reference_cycles: reference.iter().map(|s| s.cycles).collect(),
        evictions_per_launch,
        launches: 0,
        rng: Rng::for_kernel(k.name(), seed),
        counts: Counts::default(),
        perturb,
        stop_at: StopAt::Boundary,
    };
    let outcome = k
        .run(&mut d, Size::Small, 1)
        .map(|v| v.passed())
        .map_err(|e| e.to_string());
    let memory = d
        .allocs
        .iter()
        .map(|&(p, n)| d.gpu.copy_from_device(DevPtr(p), n).expect("allocation"))
        .collect();
    (memory, outcome, d.counts)
}

#[test]
fn stopped_and_restored_tbs_end_bit_identical_on_every_suite_kernel() {
    let mut total = Counts::default();
    for &k in suite::all() {
        for &(target, _) in k.sources() {
            let (want, stats) = reference(k, target);
            let (got, outcome, c) = shuffled(k, target, &stats, 30, 7, None);
            let name = format!("{} ({})", k.name(), target.name());
            assert_eq!(outcome, Ok(true), "{name}: the host program's check");
            assert!(
                want == got,
                "{name}: memory differs from the uninterrupted run"
            );
            assert!(c.evictions >= 20, "{name}: only {} evictions", c.evictions);
            assert_eq!(c.evictions, c.restores, "{name}: every context came back");
            if k.name() == "mandel" {
                // Persistent TBs take work items from an atomic queue for as long as they
                // run: every stop after the first instruction holds some.
                assert!(c.running + c.at_barrier + c.diverged >= 20, "{name}: {c:?}");
            }
            eprintln!("{name}: {c:?}");
            total.evictions += c.evictions;
            total.after_dispatch += c.after_dispatch;
            total.at_barrier += c.at_barrier;
            total.diverged += c.diverged;
            total.running += c.running;
        }
    }
    eprintln!("all: {total:?}");
    assert!(total.after_dispatch >= 20, "{total:?}");
    assert!(total.at_barrier >= 20, "{total:?}");
    assert!(total.diverged >= 20, "{total:?}");
}

#[test]
fn a_perturbed_register_in_a_context_is_caught() {
    // gemm keeps its accumulators and addresses in registers across the whole k-loop: some
    // register of warp 0 that the kernel still reads is among the first few.
    let k = suite::by_name("gemm").expect("gemm");
    let (want, stats) = reference(k, Target::Sm70);
    let (same, outcome, _) = shuffled(k, Target::Sm70, &stats, 4, 3, None);
    assert!(
        same == want && outcome == Ok(true),
        "the unperturbed run is exact"
    );
    let caught = (0..16).find(|&reg| {
        let (got, outcome, c) = shuffled(
            k,
            Target::Sm70,
            &stats,
            8,
            3,
            Some(Perturb { reg, lane: 0 }),
        );
        assert!(c.evictions > 0);
        got != want || outcome != Ok(true)
    });
    assert!(
        caught.is_some(),
        "perturbing a captured register never changed the result"
    );
}

#[test]
fn tbs_stopped_at_preemption_points_halt_there_and_verify() {
    use analysis::preemption_points::{insert_points, PpConfig, PreemptionPlan};
    let mut total = 0;
    for name in [
        "gemm",
        "mandel",
        "dgemv",
        "bitonic",
        "hotspot",
        "branchy",
        "pathfinder",
    ] {
        let k = suite::by_name(name).expect("suite kernel");
        let file = format!("{name}.sm_70.ptx");
        let text = k.ptx(Target::Sm70).unwrap();
        // Points go in after register allocation, over physical registers (regalloc's
        // invariants); the machine then times that kernel as it is.
        let mut module = gpu::lower_ptx(&file, text).expect("lowers");
        let ids: Vec<kir::KernelId> = module.kernels.ids().collect();
        for id in ids {
            let allocated = regalloc::allocate(&module.kernels[id], &Default::default())
                .expect("allocates")
                .kernel;
            let plan = PreemptionPlan::compute(&allocated, &PpConfig::default());
            module.kernels[id] = insert_points(&allocated, &plan.points)
                .expect("points fit")
                .kernel;
        }
        let mut timing = gtx480();
        timing.options.allocate = false;
        let mut gpu = Gpu::timed(timing).expect("gtx480");
        let module = gpu.load_module(&file, text, module).expect("loads");
        // How long its launches take uninterrupted, to spread the stops over.
        let (_, stats) = reference(k, Target::Sm70);
        let total_cycles: u64 = stats.iter().map(|s| s.cycles).sum();
        let mut d = ShufflingDevice {
            gpu,
            module,
            allocs: Vec::new(),
            reference_cycles: stats.iter().map(|s| s.cycles).collect(),
            evictions_per_launch: stats
                .iter()
                .map(|s| (16 * s.cycles).div_ceil(total_cycles.max(1)) as u32 + 1)
                .collect(),
            launches: 0,
            rng: Rng::for_kernel(name, 11),
            counts: Counts::default(),
            perturb: None,
            stop_at: StopAt::PreemptionPoint,
        };
        let v = k
            .run(&mut d, Size::Small, 1)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(v.passed(), "{name}: {v:?}");
        assert_eq!(d.counts.evictions, d.counts.restores, "{name}");
        eprintln!("{name}: {:?}", d.counts);
        total += d.counts.at_points;
    }
    assert!(total >= 30, "only {total} TBs stopped at preemption points");
}
