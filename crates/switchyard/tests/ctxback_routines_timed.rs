//! CTXBack's routines (papers/ji-ctxback §IV-A) run on the timed SM, as ordinary timed
//! instructions, end bit-exact: every suite kernel runs through its own host program on the
//! cycle-level machine while, at seeded cycles, a resident TB is stopped, each of its warps
//! runs the preemption routine of every lane group (the top SIMT stack entry's lanes at the
//! preempted instruction, the parked lanes at their own PCs, "Divergent warps" in
//! `analysis::ctxback::routine`) through `Request::Routine`, the TB is evicted and **every
//! register of every lane is overwritten with garbage**, and later, on any SM with room, the
//! TB is installed stopped, runs each group's resume routine (reloads, reverts,
//! re-executions and the final jump, until the group's lanes reach their PC), and resumes.
//! Device memory at the end must equal, byte for byte, the memory of a run of the same
//! kernel with no preemption, and the host program's CPU reference must pass.
//!
//! With `generate_combined_routines` (CTXBack+CS-Defer, §IV-C), where the combination
//! defers, the top group's preemption routine runs copies of the deferred instructions
//! before it saves, the warp's top stack entry is moved to the deferral's target, and its
//! resume routine lands there — except for a warp waiting at a barrier, which must not run
//! past it: it takes the CTXBack routines of its PC (this test found wgemm's results
//! corrupted when such a warp deferred; the functional test never preempts a waiting warp).
//!
//! What the routines save lives in each thread's local memory (the context area the
//! installer adds), so nothing of the registers needs to travel with the context: the
//! garbage makes a register the routines fail to restore corrupt the result.

mod common;

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use analysis::ctxback::{
    generate_combined_routines, generate_routines, CtxBack, CtxBackConfig, InstalledRoutines,
};
use common::TimedDevice;
use gpu::exec::{Warp, WARP_SIZE};
use gpu::occupancy::SmResources;
use gpu::timing::{
    AfterStop, Control, Event, KernelPass, LaunchId, Machine, Request, Routine, RoutineEnd, SmId,
    Start, StopAt, TbContext, TbRef, TimingError, WarpReports,
};
use kir::{InstId, Kernel};
use suite::{Rng, Size};

/// The routines of each kernel, by name, as the pass installed them.
type Installed = Arc<Mutex<HashMap<String, Arc<InstalledRoutines>>>>;

/// Appends the CTXBack (or CTXBack+CS-Defer) routines to every timed kernel, after
/// register allocation (the analysis' intended input).
struct RoutinePass {
    combined: bool,
    installed: Installed,
}

impl KernelPass for RoutinePass {
    fn name(&self) -> &str {
        if self.combined {
            "ctxback+cs-defer-routines"
        } else {
            "ctxback-routines"
        }
    }

    fn run(&self, kernel: &Kernel, _sm: &SmResources) -> Option<(Kernel, Vec<InstId>)> {
        let ctx = CtxBack::compute(kernel, &CtxBackConfig::default());
        let routines = if self.combined {
            generate_combined_routines(kernel, &ctx)
        } else {
            generate_routines(kernel, &ctx)
        }
        .unwrap_or_else(|e| panic!("{}: {e}", kernel.name));
        let installed = routines.install(kernel);
        // Routine instructions serve the kernel's last instruction in error messages.
        let n = kernel.insts.len() as u32;
        let origins = (0..installed.kernel.insts.len() as u32)
            .map(|pc| InstId(pc.min(n - 1)))
            .collect();
        let out = installed.kernel.clone();
        self.installed
            .lock()
            .expect("not poisoned")
            .insert(kernel.name.clone(), Arc::new(installed));
        Some((out, origins))
    }
}

/// One lane group of a preempted warp: its lanes, the code it runs and where it resumes.
#[derive(Clone, Debug)]
struct Group {
    mask: u32,
    preempt: Range<InstId>,
    resume: Range<InstId>,
    land: InstId,
    /// A CS-Defer switch: the warp's top entry moves to `land` before it resumes.
    deferred: bool,
}

/// A TB being switched: per warp, its groups and how many have started their routine; the
/// routines not yet acknowledged.
struct Switching {
    warps: Vec<(Vec<Group>, usize)>,
    in_flight: usize,
    restoring: bool,
}

#[derive(Clone, Copy, Debug, Default)]
struct Stats {
    preemptions: u64,
    groups: u64,
    parked_groups: u64,
    deferred: u64,
    routine_acks: u64,
}

/// Dispatches the launch like `GridDriver`, and switches TBs out and in through their
/// routines at seeded cycles.
struct Switcher {
    launch: LaunchId,
    routines: Arc<InstalledRoutines>,
    rng: Rng,
    next_signal: u64,
    interval: u64,
    switching: BTreeMap<TbRef, Switching>,
    /// Evicted contexts and the cycle from which they may come back.
    held: Vec<(Box<TbContext>, u64)>,
    stats: Stats,
}

/// Where every live lane of `warp` waits, top entry first (the functional test's rule).
fn lane_groups(warp: &Warp, kernel_len: u32) -> Vec<(InstId, u32)> {
    let mut claimed = warp.exited | !warp.valid;
    let mut out = Vec::new();
    for e in warp.stack.iter().rev() {
        if e.mask == 0 || e.pc == e.rpc {
            continue;
        }
        let mask = e.mask & !claimed;
        claimed |= e.mask;
        if mask != 0 && e.pc < kernel_len {
            out.push((InstId(e.pc), mask));
        }
    }
    out
}

impl Switcher {
    /// The groups of a halted warp and their routines. A warp waiting at a barrier must not
    /// run past it, so its top group takes no CS-Defer switch (the deferred instructions
    /// follow the barrier).
    fn plan(&mut self, warp: &Warp, at_barrier: bool) -> Vec<Group> {
        let r = &self.routines;
        let groups = lane_groups(warp, r.kernel_len);
        self.stats.groups += groups.len() as u64;
        self.stats.parked_groups += groups.len().saturating_sub(1) as u64;
        groups
            .into_iter()
            .enumerate()
            .map(
                |(n, (pc, mask))| match r.deferral(pc).filter(|_| n == 0 && !at_barrier) {
                    Some(d) => {
                        self.stats.deferred += 1;
                        Group {
                            mask,
                            preempt: d.preempt,
                            resume: d.resume,
                            land: d.target,
                            deferred: true,
                        }
                    }
                    None => Group {
                        mask,
                        preempt: r.preempt_code(pc),
                        resume: r.resume_code(pc),
                        land: pc,
                        deferred: false,
                    },
                },
            )
            .collect()
    }

    /// Starts the next routine of warp `w` of `tb`; whether it had one.
    fn next_routine(
        &mut self,
        m: &mut Machine,
        sm: SmId,
        tb: TbRef,
        w: usize,
    ) -> Result<bool, TimingError> {
        let s = self.switching.get_mut(&tb).expect("switching");
        let (groups, done) = &mut s.warps[w];
        let Some(g) = groups.get(*done) else {
            return Ok(false);
        };
        *done += 1;
        s.in_flight += 1;
        let routine = if s.restoring {
            Routine {
                entry: g.resume.start.0,
                lanes: g.mask,
                end: RoutineEnd::Reach(g.land.0),
            }
        } else {
            Routine {
                entry: g.preempt.start.0,
                lanes: g.mask,
                end: RoutineEnd::Exit,
            }
        };
        m.request(Request::Routine {
            sm,
            tb,
            warp: w as u32,
            routine,
        })?;
        Ok(true)
    }

    /// Starts every warp's first routine; when no warp has one, finishes at once.
    fn start_routines(&mut self, m: &mut Machine, sm: SmId, tb: TbRef) -> Result<(), TimingError> {
        let n = self.switching[&tb].warps.len();
        let mut any = false;
        for w in 0..n {
            any |= self.next_routine(m, sm, tb, w)?;
        }
        if !any {
            self.finish(m, sm, tb)?;
        }
        Ok(())
    }

    /// Every routine of the TB is done: evict it (saving) or let it run (restoring).
    fn finish(&mut self, m: &mut Machine, sm: SmId, tb: TbRef) -> Result<(), TimingError> {
        if self.switching[&tb].restoring {
            self.switching.remove(&tb);
            m.request(Request::Resume { sm, tb })?;
        } else {
            m.request(Request::Evict {
                sm,
                tb,
                then: AfterStop::Leave,
            })?;
        }
        Ok(())
    }

    fn handle(&mut self, m: &mut Machine, e: Event) -> Result<(), TimingError> {
        match e {
            Event::TbStopped { sm, tb, .. } => {
                let views = m.warps_of(sm, tb).expect("resident");
                let mut warps = Vec::with_capacity(views.len());
                for v in views {
                    let warp = m.idle_warp(sm, tb, v.index).expect("halted").clone();
                    warps.push((self.plan(&warp, v.at_barrier), 0));
                }
                self.stats.preemptions += 1;
                self.switching.insert(
                    tb,
                    Switching {
                        warps,
                        in_flight: 0,
                        restoring: false,
                    },
                );
                self.start_routines(m, sm, tb)?;
            }
            Event::RoutineDone { sm, tb, warp, .. } => {
                self.stats.routine_acks += 1;
                self.switching.get_mut(&tb).expect("switching").in_flight -= 1;
                self.next_routine(m, sm, tb, warp as usize)?;
                if self.switching[&tb].in_flight == 0 {
                    self.finish(m, sm, tb)?;
                }
            }
            Event::TbEvicted { mut context, .. } => {
                let s = self.switching.get_mut(&context.tb).expect("switching");
                for (i, (groups, _)) in s.warps.iter().enumerate() {
                    let w = &mut context.warps[i].warp;
                    // A CS-Defer switch saved the context of its target.
                    if let Some(g) = groups.first().filter(|g| g.deferred) {
                        let top = w
                            .stack
                            .iter()
                            .rposition(|e| e.mask != 0 && e.pc != e.rpc)
                            .expect("a top entry");
                        w.stack[top].pc = g.land.0;
                    }
                }
                // Nothing of the registers travels: the routines saved what is needed.
                for wc in &mut context.warps {
                    for r in wc.warp.regs.iter_mut() {
                        *r = self.rng.next_u64();
                    }
                    debug_assert_eq!(wc.warp.regs.len() % WARP_SIZE, 0);
                }
                s.restoring = true;
                for (_, done) in &mut s.warps {
                    *done = 0;
                }
                let back = m.cycle() + 50 + u64::from(self.rng.below(1500));
                self.held.push((context, back));
            }
            Event::TbRestored { sm, tb, .. } if self.switching.contains_key(&tb) => {
                self.start_routines(m, sm, tb)?;
            }
            _ => {}
        }
        Ok(())
    }
}

impl Control for Switcher {
    fn on_cycle(&mut self, m: &mut Machine) -> Result<(), TimingError> {
        for e in m.take_events() {
            self.handle(m, e)?;
        }
        let now = m.cycle();
        // Contexts first, each on the first SM with room.
        let mut i = 0;
        while i < self.held.len() {
            let sm = m.sm_ids().find(|&sm| m.fits(sm, self.launch));
            match sm {
                Some(sm) if self.held[i].1 <= now => {
                    let (context, _) = self.held.remove(i);
                    m.request(Request::Install {
                        sm,
                        context,
                        into: None,
                        start: Start::Stopped,
                    })?;
                }
                _ => i += 1,
            }
        }
        if self.held.is_empty() {
            common::dispatch_new(m, self.launch)?;
        }
        if now >= self.next_signal {
            self.next_signal =
                now + self.interval / 2 + u64::from(self.rng.below(self.interval as u32));
            let running = common::running_tbs(m, Some(self.launch));
            if !running.is_empty() {
                let (sm, tb) = running[self.rng.below(running.len() as u32) as usize];
                m.request(Request::Stop {
                    sm,
                    tb,
                    at: StopAt::Boundary,
                    then: AfterStop::Stay,
                    reports: WarpReports::None,
                })?;
            }
        }
        Ok(())
    }
}

/// The switcher, adding its counters to `out` when the launch's control is dropped.
struct Recorder {
    inner: Switcher,
    out: Rc<Cell<Stats>>,
}

impl Control for Recorder {
    fn on_cycle(&mut self, m: &mut Machine) -> Result<(), TimingError> {
        self.inner.on_cycle(m)
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let (mut t, s) = (self.out.get(), self.inner.stats);
        t.preemptions += s.preemptions;
        t.groups += s.groups;
        t.parked_groups += s.parked_groups;
        t.deferred += s.deferred;
        t.routine_acks += s.routine_acks;
        self.out.set(t);
    }
}

/// Runs `k` through its host program with signals every `interval` cycles (or none): its
/// memory (every allocation of the host program, in order), verdict and counters.
fn run(k: &'static dyn suite::Kernel, combined: bool, interval: u64) -> (Vec<Vec<u8>>, Stats) {
    let installed: Installed = Default::default();
    let pass = RoutinePass {
        combined,
        installed: installed.clone(),
    };
    let stats = Rc::new(Cell::new(Stats::default()));
    let out = stats.clone();
    let mut seed = 7;
    let mut d = TimedDevice::new(
        k,
        Some(Arc::new(pass)),
        |launch, entry: &str, start: u64| {
            seed += 1;
            Recorder {
                inner: Switcher {
                    launch,
                    routines: installed
                        .lock()
                        .expect("not poisoned")
                        .get(entry)
                        .expect("the pass installed the routines")
                        .clone(),
                    rng: Rng::new(seed),
                    next_signal: start.saturating_add(interval / 4),
                    interval,
                    switching: BTreeMap::new(),
                    held: Vec::new(),
                    stats: Stats::default(),
                },
                out: out.clone(),
            }
        },
    );
    let v = k
        .run(&mut d, Size::Small, 1)
        .unwrap_or_else(|e| panic!("{} ({interval}): {e}", k.name()));
    assert!(v.passed(), "{} (signals every {interval}): {v:?}", k.name());
    (d.snapshot(), stats.get())
}

fn check_suite(combined: bool) {
    let mut total = Stats::default();
    let mut kernels = 0;
    for &k in suite::all() {
        let (reference, none) = run(k, combined, u64::MAX);
        assert_eq!(none.preemptions, 0);
        let (memory, s) = run(k, combined, 3_000);
        assert!(
            s.preemptions > 0,
            "{}: no TB was preempted; the signals come too late",
            k.name()
        );
        assert_eq!(
            s.routine_acks,
            s.groups * 2,
            "{}: every group's preemption and resume routine acknowledged",
            k.name()
        );
        for (i, (a, b)) in reference.iter().zip(&memory).enumerate() {
            assert!(
                a == b,
                "{} ({}): allocation {i} differs from the run without preemption",
                k.name(),
                if combined {
                    "CTXBack+CS-Defer"
                } else {
                    "CTXBack"
                }
            );
        }
        total.preemptions += s.preemptions;
        total.groups += s.groups;
        total.parked_groups += s.parked_groups;
        total.deferred += s.deferred;
        kernels += 1;
    }
    eprintln!(
        "{kernels} kernels: {} TBs switched through {} lane groups' routines ({} parked groups, {} CS-Defer switches)",
        total.preemptions, total.groups, total.parked_groups, total.deferred
    );
    assert!(total.parked_groups > 0, "some preempted warp was diverged");
    if combined {
        assert!(total.deferred > 0, "some switch deferred");
    }
}

#[test]
fn ctxback_routines_run_timed_and_end_bit_exact() {
    check_suite(false);
}

#[test]
fn ctxback_cs_defer_routines_run_timed_and_end_bit_exact() {
    check_suite(true);
}
