//! Context switching by dedicated routines (papers/ji-ctxback §IV-A): the compiler appends
//! to every kernel a preemption and a resume routine per instruction
//! ([`analysis::ctxback::routine`]), and a preempted warp saves and restores its registers
//! by running them on the SM as ordinary timed instructions ([`Request::Routine`]), so their
//! memory traffic, the instructions they revert and the ones they re-execute are simulated,
//! not estimated. Three designs share the engine ([`RoutineDesign`]):
//!
//! * **CTXBack** (§III): each warp saves the context of the flashback point the analysis
//!   chose for its instruction — reverting, at preemption, what lies between — and on resume
//!   reloads it, re-executes and jumps back.
//! * **CTXBack+CS-Defer** (§IV-C): per instruction, CTXBack's routines or CS-Defer's,
//!   whichever the analysis estimates the faster to preempt.
//! * **CS-Defer** (§II-B, §V): each warp runs on along its statically known path to the
//!   instruction where its live context is cheapest to save (the analysis's choice), saves
//!   the live-in registers there, and resumes there. As in the paper ("CS-Defer needs to
//!   execute the in-between instructions in the preemption routine", §V-B), the deferred
//!   instructions run in the preemption routine (copies of the kernel's), and the warp's PC
//!   is moved to the deferral's target with its context.
//!
//! **The sequence.** On a request the TB stops at once (`StopAt::Boundary`) and stays
//! resident; every lane group of every warp — the top SIMT stack entry's lanes, and the lanes
//! parked on the stack, each at its own PC ("Divergent warps" in the routine module) — runs
//! its preemption routine in turn. Only a warp's top group not waiting at a barrier may
//! defer: parked lanes must not run ahead, and a warp waiting at a barrier must not run past
//! it. Then the TB leaves holding its resources while its shared memory, SIMT stacks and
//! barrier state are written to a context area ([`Request::Transfer`], as
//! [`crate::Switch`] does), and the resources are released. On resume the TB's resources are
//! taken, that part is loaded back, the TB is installed stopped, each group runs its resume
//! routine until its lanes reach their PC ([`gpu::timing::RoutineEnd::Reach`]), and the TB
//! resumes.
//!
//! **What is counted.** The registers the routines store live in each thread's local-memory
//! context area (the pass grows every thread's local size by it), so nothing of the
//! registers travels with the captured context: every register of every lane is overwritten
//! with garbage once the TB has left, and a register a routine fails to restore corrupts the
//! result. [`ContextBytes::registers`] of a preemption is what the routines store (every
//! `st.local` into the context area, per lane that runs it: predicates are stored as 4-byte
//! words, uniform registers once per lane, since a routine runs per thread); of a resume,
//! what the resume routines load. [`ContextBytes::metadata`] of a resume is the resume
//! routine code transferred for it (§IV-A: "only the necessary dedicated resuming routines
//! are transferred on-demand during resuming"): the distinct instructions of the resume
//! routines its groups enter, at the GPU's instruction size
//! ([`gpu::pipeline::FetchSpec::inst_bytes`]); the bytes are counted, the host's copy of
//! them is not timed. The preemption routines are transferred with the kernel once, before
//! any preemption, and are not counted per preemption. [`RegisterCensus::occupied`] is what a
//! routine saving every allocated register would store (4 bytes per register per lane).
//!
//! A kernel the pass could not give routines (none of the suite's) is refused: its TBs
//! drain, and the refusal is recorded.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use analysis::ctxback::{
    backup_scalars, generate_combined_routines, generate_cs_defer_routines, generate_routines,
    CtxBackConfig, InstalledRoutines, OsrbConfig, OsrbKernel, Routines,
};
use gpu::exec::{Warp, WARP_SIZE};
use gpu::occupancy::SmResources;
use gpu::timing::{
    AfterStop, Direction, Event, HoldId, KernelPass, Pass, Request, Routine, RoutineEnd, SmId,
    Start, StopAt, TbContext, TbRef, TimingError, TransferId, WarpReports,
};
use kir::inst::{Op, Operand, Space};
use kir::{InstId, Kernel};

use crate::drain::Drain;
use crate::switch::stack_barrier_bytes;
use crate::{ContextBytes, Cx, How, Mechanism, Preempted, Record, RegisterCensus, Want};

/// Which routines a [`RoutineSwitch`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoutineDesign {
    CtxBack,
    CtxBackCsDefer,
    CsDefer,
}

impl RoutineDesign {
    /// The mechanism's name.
    pub fn name(self) -> &'static str {
        match self {
            RoutineDesign::CtxBack => "ctxback",
            RoutineDesign::CtxBackCsDefer => "ctxback-cs-defer",
            RoutineDesign::CsDefer => "cs-defer",
        }
    }

    /// The kernel as the design rewrites it, and its routines. CTXBack's designs first back
    /// up the scalars whose backup gives better flashback points (OSRB, §III-D) in the
    /// uniform registers the SM has (`uniform_registers`; none: the kernel stays as it is);
    /// CS-Defer has no flashback points to improve.
    fn generate(self, kernel: &Kernel, uniform_registers: u32) -> Option<(OsrbKernel, Routines)> {
        let osrb =
            (self != RoutineDesign::CsDefer && uniform_registers > 0).then_some(OsrbConfig {
                uniform_registers,
                // Backups in the warp's shared memory would grow the TB's shared memory after
                // its launch was laid out; registers only.
                shared_words: 0,
                registers: true,
            });
        let config = CtxBackConfig {
            osrb,
            ..CtxBackConfig::default()
        };
        let (rewritten, ctx) = backup_scalars(kernel, &config);
        let k = &rewritten.kernel;
        let routines = match self {
            RoutineDesign::CtxBack => generate_routines(k, &ctx),
            RoutineDesign::CtxBackCsDefer => generate_combined_routines(k, &ctx),
            RoutineDesign::CsDefer => generate_cs_defer_routines(k, &ctx),
        }
        .ok()?;
        Some((rewritten, routines))
    }
}

/// A kernel with its routines, as the pass installed them.
pub struct KernelRoutines {
    pub installed: InstalledRoutines,
    /// Byte offset of the context area in each thread's local memory.
    pub context_base: u32,
}

impl KernelRoutines {
    /// Bytes one lane moves between its registers and the context area running `code`:
    /// every `st.local` (`store`) or `ld.local` into the context area (the kernel's own
    /// local accesses, which re-executed or deferred copies may repeat, lie below it).
    fn context_bytes(&self, code: &Range<InstId>, store: bool) -> u64 {
        let base = i64::from(self.context_base);
        (code.start.0..code.end.0)
            .map(|pc| &self.installed.kernel.insts[InstId(pc)])
            .filter_map(|i| {
                let (ty, vec, offset) = match i.op {
                    Op::St {
                        space: Space::Local,
                        ty,
                        vec,
                        offset,
                    } if store => (ty, vec, offset),
                    Op::Ld {
                        space: Space::Local,
                        ty,
                        vec,
                        offset,
                        ..
                    } if !store => (ty, vec, offset),
                    _ => return None,
                };
                (i.srcs[0] == Operand::Imm(0) && i64::from(offset) >= base)
                    .then(|| u64::from(ty.bits() / 8) * u64::from(vec))
            })
            .sum()
    }
}

/// The routines the pass installed, by kernel name (kernels of different modules may share
/// a name; their code tells them apart).
type Installed = Arc<Mutex<HashMap<String, Vec<Arc<KernelRoutines>>>>>;

/// The compiler pass: appends the design's routines to every timed kernel, after register
/// allocation (the analysis's intended input).
struct RoutinePass {
    design: RoutineDesign,
    installed: Installed,
}

impl KernelPass for RoutinePass {
    fn name(&self) -> &str {
        match self.design {
            RoutineDesign::CtxBack => "ctxback-routines",
            RoutineDesign::CtxBackCsDefer => "ctxback-cs-defer-routines",
            RoutineDesign::CsDefer => "cs-defer-routines",
        }
    }

    fn run(&self, kernel: &Kernel, sm: &SmResources) -> Option<(Kernel, Vec<InstId>)> {
        let (rewritten, routines) = self.design.generate(kernel, sm.uniform_registers)?;
        let installed = routines.install(&rewritten.kernel);
        // A backup copy serves the instruction it was inserted before; routine instructions
        // serve the kernel's last instruction in error messages.
        let last = InstId(kernel.insts.len().saturating_sub(1) as u32);
        let mut origins = vec![last; installed.kernel.insts.len()];
        let mut next = last;
        for (pc, o) in rewritten.origin.iter().enumerate().rev() {
            next = o.unwrap_or(next);
            origins[pc] = next;
        }
        let out = installed.kernel.clone();
        self.installed
            .lock()
            .expect("not poisoned")
            .entry(kernel.name.clone())
            .or_default()
            .push(Arc::new(KernelRoutines {
                installed,
                context_base: routines.context_base,
            }));
        Some((out, origins))
    }
}

/// One lane group of a warp: its lanes, its routines, and where it resumes.
#[derive(Clone, Debug)]
struct Group {
    mask: u32,
    preempt: Range<InstId>,
    resume: Range<InstId>,
    /// The PC its lanes resume at (a CS-Defer switch: the deferral's target).
    land: InstId,
    /// A CS-Defer switch: the warp's top SIMT stack entry moves to `land`.
    deferred: bool,
}

/// The routines of a TB's warps in flight: per warp its groups and how many have started;
/// routines not yet acknowledged.
struct Running {
    warps: Vec<(Vec<Group>, usize)>,
    in_flight: usize,
    restoring: bool,
}

/// A TB being saved.
struct Saving {
    requested: u64,
    stopped: u64,
    routines: Option<Arc<KernelRoutines>>,
    bytes: ContextBytes,
    census: RegisterCensus,
    moving: Vec<(u64, u64)>,
    /// Once it has left: its hold, context and area, and when the transfer started.
    hold: Option<HoldId>,
    context: Option<Box<TbContext>>,
    area: u64,
    transfer_from: u64,
}

/// A TB being restored.
struct Restoring {
    hold: HoldId,
    started: u64,
    bytes: ContextBytes,
}

/// What a transfer of this mechanism is for.
enum Moving {
    Save(TbRef),
    Restore(Box<Preempted>),
}

/// Context switching by dedicated routines: CTXBack, CTXBack+CS-Defer or CS-Defer.
pub struct RoutineSwitch {
    design: RoutineDesign,
    installed: Installed,
    /// By the timed kernel's address (kernels live as long as their launches): its
    /// routines, `None` when the pass gave it none.
    kernels: HashMap<usize, (Arc<Kernel>, Option<Arc<KernelRoutines>>)>,
    saving: HashMap<(SmId, TbRef), Saving>,
    running: HashMap<TbRef, Running>,
    /// Per preempted TB, its warps' groups, for the resume.
    plans: HashMap<TbRef, Vec<Vec<Group>>>,
    restoring: HashMap<TbRef, Restoring>,
    moving: HashMap<(SmId, TransferId), Moving>,
    /// TBs of kernels without routines, draining.
    draining: Drain,
}

/// Where every live lane of `warp` waits, top entry first, each lane at the topmost entry
/// that holds it.
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

impl RoutineSwitch {
    pub fn new(design: RoutineDesign) -> RoutineSwitch {
        RoutineSwitch {
            design,
            installed: Arc::default(),
            kernels: HashMap::new(),
            saving: HashMap::new(),
            running: HashMap::new(),
            plans: HashMap::new(),
            restoring: HashMap::new(),
            moving: HashMap::new(),
            draining: Drain::default(),
        }
    }

    /// The routines of `kernel` (a timed kernel), if the pass installed some.
    fn routines(&mut self, kernel: &Arc<Kernel>) -> Option<Arc<KernelRoutines>> {
        let installed = &self.installed;
        self.kernels
            .entry(Arc::as_ptr(kernel) as usize)
            .or_insert_with(|| {
                let found = installed
                    .lock()
                    .expect("not poisoned")
                    .get(&kernel.name)
                    .and_then(|v| {
                        v.iter()
                            .find(|r| {
                                let k = &r.installed.kernel;
                                k.insts.len() == kernel.insts.len()
                                    && k.insts.values().eq(kernel.insts.values())
                            })
                            .cloned()
                    });
                (kernel.clone(), found)
            })
            .1
            .clone()
    }

    /// The groups of a halted warp and their routines. Only the top group of a warp not
    /// waiting at a barrier may defer.
    fn plan(&self, r: &KernelRoutines, warp: &Warp, at_barrier: bool) -> Vec<Group> {
        let r = &r.installed;
        lane_groups(warp, r.kernel_len)
            .into_iter()
            .enumerate()
            .map(
                |(n, (pc, mask))| match r.deferral(pc).filter(|_| n == 0 && !at_barrier) {
                    Some(d) => Group {
                        mask,
                        preempt: d.preempt,
                        resume: d.resume,
                        land: d.target,
                        deferred: true,
                    },
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
        sm: SmId,
        tb: TbRef,
        w: usize,
        cx: &mut Cx,
    ) -> Result<bool, TimingError> {
        let s = self.running.get_mut(&tb).expect("running routines");
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
        cx.ask(Request::Routine {
            sm,
            tb,
            warp: w as u32,
            routine,
        })?;
        Ok(true)
    }

    /// Starts every warp's first routine of `tb`; when no warp has one, finishes at once.
    fn start_routines(
        &mut self,
        sm: SmId,
        tb: TbRef,
        warps: Vec<Vec<Group>>,
        restoring: bool,
        cx: &mut Cx,
    ) -> Result<(), TimingError> {
        let n = warps.len();
        self.running.insert(
            tb,
            Running {
                warps: warps.into_iter().map(|g| (g, 0)).collect(),
                in_flight: 0,
                restoring,
            },
        );
        let mut any = false;
        for w in 0..n {
            any |= self.next_routine(sm, tb, w, cx)?;
        }
        if !any {
            self.routines_done(sm, tb, cx)?;
        }
        Ok(())
    }

    /// Every routine of `tb` is done: it leaves holding its resources (saving), or runs
    /// (restoring).
    fn routines_done(&mut self, sm: SmId, tb: TbRef, cx: &mut Cx) -> Result<(), TimingError> {
        let r = self.running.remove(&tb).expect("running routines");
        let now = cx.machine.cycle();
        if r.restoring {
            cx.ask(Request::Resume { sm, tb })?;
            let x = self.restoring.remove(&tb).expect("restoring");
            cx.out.records.push(Record::Restored {
                sm,
                tb,
                started: x.started,
                finished: now,
                bytes: x.bytes,
            });
        } else {
            let s = self.saving.get_mut(&(sm, tb)).expect("saving");
            if now > s.stopped {
                s.moving.push((s.stopped, now));
            }
            self.plans
                .insert(tb, r.warps.into_iter().map(|(g, _)| g).collect());
            cx.ask(Request::Evict {
                sm,
                tb,
                then: AfterStop::LeaveHolding,
            })?;
        }
        Ok(())
    }

    /// TB `tb` on `sm` has stopped: plan and start its warps' preemption routines.
    fn stopped(&mut self, sm: SmId, tb: TbRef, cycle: u64, cx: &mut Cx) -> Result<(), TimingError> {
        let Some(s) = self.saving.get_mut(&(sm, tb)) else {
            return Err(TimingError::Mechanism(format!(
                "{}: TB {tb:?} on SM {sm:?} stopped without a request",
                self.design.name()
            )));
        };
        s.stopped = cycle;
        let r = s
            .routines
            .clone()
            .expect("a TB is stopped only with routines");
        let views = cx.machine.warps_of(sm, tb).unwrap_or_default();
        let mut warps = Vec::with_capacity(views.len());
        let (mut stored, mut occupied) = (0, 0);
        let words = 4 * r.installed.kernel.regs.len() as u64;
        for v in &views {
            let groups = match cx.machine.idle_warp(sm, tb, v.index) {
                Some(w) if !v.done => self.plan(&r, w, v.at_barrier),
                _ => Vec::new(),
            };
            for g in &groups {
                let lanes = u64::from(g.mask.count_ones());
                stored += r.context_bytes(&g.preempt, true) * lanes;
                occupied += words * lanes;
            }
            warps.push(groups);
        }
        let s = self.saving.get_mut(&(sm, tb)).expect("saving");
        s.bytes.registers = stored;
        s.census = RegisterCensus {
            occupied,
            live: stored,
            moved: stored,
            ..RegisterCensus::default()
        };
        self.start_routines(sm, tb, warps, false, cx)
    }
}

impl Mechanism for RoutineSwitch {
    fn name(&self) -> String {
        self.design.name().into()
    }

    /// The routines, appended to every timed kernel.
    fn kernel_pass(&self) -> Option<Pass> {
        Some(Pass(Arc::new(RoutinePass {
            design: self.design,
            installed: self.installed.clone(),
        })))
    }

    fn preempt(&mut self, sm: SmId, want: Want, cx: &mut Cx) -> Result<(), TimingError> {
        let now = cx.machine.cycle();
        for tb in cx.take(sm, &want) {
            let kernel = cx.machine.launch(tb.launch).ctx().kernel.clone();
            let Some(routines) = self.routines(&kernel) else {
                cx.out.records.push(Record::Refused {
                    cycle: now,
                    sm,
                    tb,
                    why: format!(
                        "kernel `{}` has no {} routines; it drains",
                        kernel.name,
                        self.design.name()
                    ),
                });
                self.draining.watch(sm, tb, now);
                continue;
            };
            cx.ask(Request::Stop {
                sm,
                tb,
                at: StopAt::Boundary,
                then: AfterStop::Stay,
                reports: WarpReports::None,
            })?;
            self.saving.insert(
                (sm, tb),
                Saving {
                    requested: now,
                    stopped: now,
                    routines: Some(routines),
                    bytes: ContextBytes::default(),
                    census: RegisterCensus::default(),
                    moving: Vec::new(),
                    hold: None,
                    context: None,
                    area: 0,
                    transfer_from: now,
                },
            );
        }
        Ok(())
    }

    fn acknowledged(&mut self, event: Event, cx: &mut Cx) -> Result<(), TimingError> {
        match event {
            Event::TbStopped { cycle, sm, tb } => self.stopped(sm, tb, cycle, cx),
            Event::RoutineDone { sm, tb, warp, .. } => {
                let Some(r) = self.running.get_mut(&tb) else {
                    return Err(TimingError::Mechanism(format!(
                        "{}: a routine of TB {tb:?} it did not start ended",
                        self.design.name()
                    )));
                };
                r.in_flight -= 1;
                self.next_routine(sm, tb, warp as usize, cx)?;
                if self.running[&tb].in_flight == 0 {
                    self.routines_done(sm, tb, cx)?;
                }
                Ok(())
            }
            Event::TbResumed { .. } => Ok(()),
            other => Err(TimingError::Mechanism(format!(
                "{} was told of {other:?}, which it never asks for",
                self.design.name()
            ))),
        }
    }

    fn evicted(
        &mut self,
        sm: SmId,
        mut context: Box<TbContext>,
        hold: Option<HoldId>,
        cx: &mut Cx,
    ) -> Result<(), TimingError> {
        let tb = context.tb;
        let name = self.design.name();
        let (Some(s), Some(hold)) = (self.saving.get_mut(&(sm, tb)), hold) else {
            return Err(TimingError::Mechanism(format!(
                "{name}: TB {tb:?} left SM {sm:?} without a request or its resources held"
            )));
        };
        let plan = self.plans.get(&tb).expect("planned before it left");
        for (i, wc) in context.warps.iter_mut().enumerate() {
            let w = &mut wc.warp;
            // A CS-Defer switch saved the context of its target: the warp resumes there.
            if let Some(g) = plan.get(i).and_then(|g| g.first()).filter(|g| g.deferred) {
                if let Some(top) = w.stack.iter().rposition(|e| e.mask != 0 && e.pc != e.rpc) {
                    w.stack[top].pc = g.land.0;
                }
            }
            // Nothing of the registers travels: the routines saved what is needed.
            for (j, r) in w.regs.iter_mut().enumerate() {
                let (reg, lane) = (j / WARP_SIZE, j % WARP_SIZE);
                *r = 0xdead_0000_0000_0000 | (reg as u64) << 8 | lane as u64;
            }
        }
        let now = cx.machine.cycle();
        s.bytes.shared = context.shared.len() as u64;
        s.bytes.stack_barrier =
            stack_barrier_bytes(context.warps.iter().map(|w| w.warp.stack.len()));
        let rest = s.bytes.shared + s.bytes.stack_barrier;
        s.area = cx.machine.memory_mut().alloc(rest.max(1));
        s.hold = Some(hold);
        s.context = Some(context);
        s.transfer_from = now;
        let area = s.area;
        let id = cx.transfer(sm, Direction::Save, area, rest, tb.launch, now)?;
        self.moving.insert((sm, id), Moving::Save(tb));
        Ok(())
    }

    fn finished(&mut self, sm: SmId, tb: TbRef, cycle: u64, cx: &mut Cx) {
        // A TB that finished before it stopped drained.
        if let Some(s) = self.saving.remove(&(sm, tb)) {
            cx.out
                .records
                .push(Record::drained(sm, tb, s.requested, cycle));
        } else {
            self.draining.finished_tb(sm, tb, cycle, cx);
        }
    }

    fn transfer_done(&mut self, sm: SmId, id: TransferId, cx: &mut Cx) -> Result<(), TimingError> {
        let Some(m) = self.moving.remove(&(sm, id)) else {
            return Ok(());
        };
        let now = cx.machine.cycle();
        match m {
            Moving::Save(tb) => {
                let mut s = self.saving.remove(&(sm, tb)).expect("saving");
                let hold = s.hold.expect("left holding");
                cx.ask(Request::Release { sm, hold })?;
                s.moving.push((s.transfer_from, now));
                cx.out.records.push(Record::Preempted {
                    sm,
                    tb,
                    how: How::Switched,
                    requested: s.requested,
                    stopped: s.stopped,
                    moving: s.moving,
                    released: now,
                    bytes: s.bytes,
                    registers: s.census,
                });
                cx.out.preempted.push(Preempted {
                    context: s.context.expect("left"),
                    area: s.area,
                    bytes: s.bytes,
                });
            }
            Moving::Restore(p) => {
                let tb = p.context.tb;
                let hold = self.restoring[&tb].hold;
                cx.ask(Request::Install {
                    sm,
                    context: p.context,
                    into: Some(hold),
                    start: Start::Stopped,
                })?;
                cx.machine.memory_mut().free(p.area);
                let warps = self.plans.remove(&tb).expect("planned when it left");
                self.start_routines(sm, tb, warps, true, cx)?;
            }
        }
        Ok(())
    }

    fn resume(&mut self, sm: SmId, p: Preempted, cx: &mut Cx) -> Result<(), TimingError> {
        let tb = p.context.tb;
        let kernel = cx.machine.launch(tb.launch).ctx().kernel.clone();
        let r = self.routines(&kernel).expect("a TB it saved has routines");
        let plan = self.plans.get(&tb).expect("planned when it left");
        // What the resume routines load, and their code, sent to the device for this resume.
        let mut loaded = 0;
        let mut code: Vec<u32> = Vec::new();
        for g in plan.iter().flatten() {
            loaded += r.context_bytes(&g.resume, false) * u64::from(g.mask.count_ones());
            code.extend(g.resume.start.0..g.resume.end.0);
        }
        code.sort_unstable();
        code.dedup();
        let inst_bytes = u64::from(cx.machine.config().pipeline.fetch.inst_bytes);
        let hold = cx
            .ask(Request::Hold {
                sm,
                launch: tb.launch,
            })?
            .hold()
            .expect("a hold's ticket names it");
        let now = cx.machine.cycle();
        self.restoring.insert(
            tb,
            Restoring {
                hold,
                started: now,
                bytes: ContextBytes {
                    registers: loaded,
                    shared: p.bytes.shared,
                    stack_barrier: p.bytes.stack_barrier,
                    metadata: code.len() as u64 * inst_bytes,
                },
            },
        );
        let rest = p.bytes.shared + p.bytes.stack_barrier;
        let id = cx.transfer(sm, Direction::Restore, p.area, rest, tb.launch, now)?;
        self.moving.insert((sm, id), Moving::Restore(Box::new(p)));
        Ok(())
    }
}
