//! The scheduling framework of papers/tanasic-thesis §5.2.3 (Figure 5.3) and the SM driver of
//! §5.2.2 (Figure 5.2), as a [`Control`] of the timing [`Machine`].
//!
//! * **Command buffers**, one per GPU context (process): a kernel launch that has reached
//!   the GPU waits in its context's buffer (one command each; later commands of the same
//!   context queue behind it, as in the hardware queues in front of the dispatcher).
//! * **Active queue** and **KSRT** (kernel status register table): when the active queue
//!   has room (by default as many entries as SMs, §5.2.3), the policy picks a waiting
//!   command; its kernel gets a KSR ([`Ksr`]) and is submitted to the machine.
//! * **SMST** (SM status table, [`SmEntry`]): per SM, its state (idle, running, reserved),
//!   the kernel it runs and, when reserved, the kernel it is reserved for.
//! * **PTBQ** (preempted TB queue), one per kernel: TBs taken off an SM wait there and are
//!   issued before any new TB of their kernel (§5.2.3).
//! * **SM driver**: every cycle, each running SM whose resources have room for another TB of
//!   its kernel receives one (from the PTBQ first, resumed by the mechanism that preempted
//!   it, else the next new TB). A reserved SM receives nothing: the preemption mechanism
//!   ([`preempt::Mechanism`]; draining by default) is asked to empty it, and once its last TB
//!   has left and every resource is released it is set up for the kernel it was reserved
//!   for (§5.2.2).
//!
//! **Intra-SM sharing** ([`FrameworkConfig::intra_sm_sharing`]): off, an SM is handed to
//! another kernel only once empty, so kernels run side by side on disjoint SMs. On, an SM
//! whose kernel has no TB left to issue is offered to the policy at once, and TBs of the new
//! kernel fill whatever room the finishing TBs leave.
//!
//! **Partial preemption** ([`Tables::make_room`], papers/lin-thesis ch. 4): room for some
//! TBs of a kernel is made on a running SM by the mechanism ([`Want::Room`]: the fewest TBs
//! of the SM's other kernels), which keeps running the rest; the kernel then joins the SM as
//! a guest ([`SmEntry::guests`]), limited there to the TBs it asked room for.
//!
//! The policy ([`Policy`]) decides; the framework keeps the tables and carries decisions
//! out. Every step is in a fixed order (SMs and contexts by index), so runs are deterministic.

use std::collections::VecDeque;

use gpu::timing::{
    Control, Event, KernelLimits, LaunchId, Machine, Request, SmId, TbRef, TimingError, IRC_WINDOW,
};
use preempt::{Cx, Mechanism, Output, Want};

use crate::ccbp::Sustainable;
use crate::policy::Policy;
use crate::tables::{
    Command, ContextId, FrameworkConfig, KernelCounts, KernelSlot, Ksr, Record, SmCounts, SmEntry,
    SmState, Tables,
};

/// The framework with its policy and preemption mechanism: a [`Control`] for the machine.
pub struct Framework {
    tables: Tables,
    policy: Box<dyn Policy>,
    mechanism: Box<dyn Mechanism>,
    out: Output,
    /// What mechanisms recorded.
    preemptions: Vec<preempt::Record>,
    /// The launch each SM was last seen set up for, to tell the mechanism of changes.
    set_up_for: Vec<Option<LaunchId>>,
    /// The limits the framework set on SMs for guests (and kernels room is being made
    /// for), lifted once the kernel is neither there.
    limited: Vec<(SmId, KernelSlot, LaunchId)>,
    /// TBs preemption requests took that have not left their SM yet.
    leaving: Vec<(SmId, TbRef)>,
    /// Launches the host called since the last cycle, to tell the mechanism of.
    called: Vec<Called>,
    /// Where a policy's limits were sent ([`Tables::limit`]), lifted when the launch
    /// finishes so that no SM keeps the limits of a launch that is gone.
    policy_limited: Vec<(SmId, LaunchId)>,
}

/// A launch the host called ([`Framework::launch_called`], [`Framework::anticipate`]).
enum Called {
    /// By a process of this context and priority: it may preempt the kernels of lower
    /// priority of other contexts.
    Process { context: ContextId, priority: i32 },
    /// By an experiment, for these SMs.
    Sms(Vec<SmId>),
}

impl Framework {
    /// The framework with `policy`, emptying reserved SMs by draining them.
    pub fn new(config: FrameworkConfig, policy: Box<dyn Policy>, sm_count: u32) -> Framework {
        Framework::with_mechanism(
            config,
            policy,
            Box::new(preempt::Drain::default()),
            sm_count,
        )
    }

    /// The framework with `policy` and the preemption `mechanism`.
    pub fn with_mechanism(
        config: FrameworkConfig,
        policy: Box<dyn Policy>,
        mechanism: Box<dyn Mechanism>,
        sm_count: u32,
    ) -> Framework {
        let capacity = config.active_kernels.unwrap_or(sm_count).max(1) as usize;
        Framework {
            tables: Tables {
                config,
                capacity,
                buffers: Vec::new(),
                ksrt: (0..capacity).map(|_| None).collect(),
                active: Vec::new(),
                smst: vec![SmEntry::IDLE; sm_count as usize],
                records: Vec::new(),
                newly_reserved: Vec::new(),
                newly_partial: Vec::new(),
                new_limits: Vec::new(),
                resources: None,
                now: 0,
                stream_priorities: false,
                sm_counts: Vec::new(),
                watching_sms: false,
                kernel_counts: Vec::new(),
                watching_kernels: false,
                sustainable: None,
                line_bytes: 128,
            },
            policy,
            mechanism,
            out: Output::default(),
            preemptions: Vec::new(),
            set_up_for: vec![None; sm_count as usize],
            limited: Vec::new(),
            leaving: Vec::new(),
            called: Vec::new(),
            policy_limited: Vec::new(),
        }
    }

    /// Reserves `sm` for the kernel it runs (a preemption request from outside the policy,
    /// as an experiment makes one: the SM is emptied by the mechanism and set up for the
    /// same kernel again, which resumes its preempted TBs first). False if the SM is idle or
    /// already reserved.
    pub fn preempt_sm(&mut self, sm: SmId) -> bool {
        let e = self.tables.smst[sm.0 as usize];
        match (e.state, e.kernel) {
            (SmState::Running, Some(k)) => self.tables.reserve(sm, k),
            _ => false,
        }
    }

    /// Asks for room for `tbs` TBs of `launch` on running `sm`, whose other TBs keep
    /// running (a partial preemption request from outside the policy, as an experiment or a
    /// test makes one; [`Tables::make_room`]). False if it cannot be asked now.
    pub fn make_room(&mut self, sm: SmId, launch: LaunchId, tbs: u32) -> bool {
        match self.tables.slot_of(launch) {
            Some(k) => self.tables.make_room(sm, k, tbs),
            None => false,
        }
    }

    /// The mechanism's name.
    pub fn mechanism_name(&self) -> String {
        self.mechanism.name()
    }

    /// What the mechanism recorded since this was last taken.
    pub fn take_preemptions(&mut self) -> Vec<preempt::Record> {
        std::mem::take(&mut self.preemptions)
    }

    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    pub fn policy_name(&self) -> &str {
        self.policy.name()
    }

    /// The host of `context` called a launch at `priority` (`cudaLaunch`): it reaches the
    /// GPU a launch latency later, and may then preempt the kernels of other contexts the
    /// policy would take SMs from ([`Policy::may_preempt_on_arrival`]: under PPQ, those of
    /// lower priority). The mechanism hears of it, with the SMs those kernels run on, at the
    /// next cycle ([`preempt::Mechanism::launch_called`], papers/li-pep §3.3).
    pub fn launch_called(&mut self, context: ContextId, priority: i32) {
        self.called.push(Called::Process { context, priority });
    }

    /// Tells the mechanism at the next cycle that a launch that may preempt the kernels on
    /// `sms` was called (an experiment's launch, which [`Framework::preempt_sm`] then
    /// follows).
    pub fn anticipate(&mut self, sms: Vec<SmId>) {
        self.called.push(Called::Sms(sms));
    }

    /// Tells the mechanism of the launches called since the last cycle.
    fn tell_called(&mut self, m: &mut Machine) -> Result<(), TimingError> {
        for called in std::mem::take(&mut self.called) {
            let t = &self.tables;
            let sms: Vec<SmId> = match called {
                Called::Sms(sms) => sms,
                Called::Process { context, priority } => (0..t.smst.len())
                    .filter(|&i| {
                        let e = &t.smst[i];
                        e.state == SmState::Running
                            && e.kernel
                                .and_then(|k| t.ksrt[k.0 as usize].as_ref())
                                .is_some_and(|k| {
                                    k.context != context
                                        && self.policy.may_preempt_on_arrival(priority, k.priority)
                                })
                    })
                    .map(|i| SmId(i as u32))
                    .collect(),
            };
            if sms.is_empty() {
                continue;
            }
            let mut cx = Cx {
                machine: m,
                out: &mut self.out,
            };
            self.mechanism.launch_called(&sms, &mut cx)?;
            self.collect();
        }
        Ok(())
    }

    /// A launch reaches the GPU at core cycle `cycle`: into its context's command buffer.
    pub fn deliver(&mut self, command: Command, cycle: u64) {
        let c = command.context.0 as usize;
        let t = &mut self.tables;
        while t.buffers.len() <= c {
            t.buffers.push(VecDeque::new());
        }
        t.records.push(Record::KernelArrived {
            cycle,
            tag: command.tag,
        });
        t.buffers[c].push_back((command, cycle));
    }

    /// The records since they were last taken.
    pub fn take_records(&mut self) -> Vec<Record> {
        std::mem::take(&mut self.tables.records)
    }

    /// Whether nothing is waiting or active.
    pub fn is_idle(&self) -> bool {
        self.tables.active.is_empty() && self.tables.buffers.iter().all(VecDeque::is_empty)
    }

    /// Reads the machine's events into the tables, and hands the mechanism what is its.
    fn observe(&mut self, m: &mut Machine) -> Result<(), TimingError> {
        for e in m.take_events() {
            let t = &mut self.tables;
            match e {
                Event::TbDispatched { sm, .. } | Event::TbRestored { sm, .. } => {
                    t.smst[sm.0 as usize].tbs += 1;
                }
                Event::TbFinished { cycle, sm, tb } => {
                    t.smst[sm.0 as usize].tbs -= 1;
                    let e = &t.smst[sm.0 as usize];
                    // An SM yielding to a stream priority drains without the mechanism.
                    let open = (e.state == SmState::Reserved && !e.yielding) || e.room.is_some();
                    if self.left(sm, tb) || open {
                        let mut cx = Cx {
                            machine: m,
                            out: &mut self.out,
                        };
                        self.mechanism.finished(sm, tb, cycle, &mut cx);
                    }
                }
                Event::TbEvicted {
                    sm, context, hold, ..
                } => {
                    t.smst[sm.0 as usize].tbs -= 1;
                    self.left(sm, context.tb);
                    let mut cx = Cx {
                        machine: m,
                        out: &mut self.out,
                    };
                    self.mechanism.evicted(sm, context, hold, &mut cx)?;
                }
                Event::TbDiscarded { sm, tb, .. } => {
                    t.smst[sm.0 as usize].tbs -= 1;
                    self.left(sm, tb);
                }
                Event::WarpDrained { sm, tb, warp, .. } => {
                    let mut cx = Cx {
                        machine: m,
                        out: &mut self.out,
                    };
                    self.mechanism.warp_drained(sm, tb, warp, &mut cx)?;
                }
                Event::TransferDone { sm, id, .. } => {
                    let mut cx = Cx {
                        machine: m,
                        out: &mut self.out,
                    };
                    self.mechanism.transfer_done(sm, id, &mut cx)?;
                }
                // The other acknowledgements of the control protocol go to the mechanism,
                // whose requests they answer.
                e @ (Event::TbStopped { .. }
                | Event::TbResumed { .. }
                | Event::RoutineDone { .. }
                | Event::WarpHeld { .. }
                | Event::WarpReleased { .. }
                | Event::CheckpointDone { .. }
                | Event::CheckpointDue { .. }
                | Event::TbRolledBack { .. }) => {
                    let mut cx = Cx {
                        machine: m,
                        out: &mut self.out,
                    };
                    self.mechanism.acknowledged(e, &mut cx)?;
                }
                // Holds and limits change no table of the framework.
                Event::LimitsSet { .. }
                | Event::BlockCountSet { .. }
                | Event::HoldTaken { .. }
                | Event::HoldReleased { .. }
                | Event::HoldParked { .. }
                | Event::HoldUnparked { .. } => {}
                Event::LaunchFinished { cycle, launch } => {
                    let mut i = 0;
                    while i < self.policy_limited.len() {
                        let (sm, l) = self.policy_limited[i];
                        if l == launch {
                            self.policy_limited.swap_remove(i);
                            m.request(Request::Limit {
                                sm,
                                launch,
                                limits: KernelLimits::default(),
                            })?;
                        } else {
                            i += 1;
                        }
                    }
                    let Some(k) = t.slot_of(launch) else {
                        continue;
                    };
                    for sm in 0..t.smst.len() {
                        let e = t.smst[sm];
                        if e.kernel == Some(k) {
                            t.set_kernel(SmId(sm as u32), None);
                        }
                        t.leave(SmId(sm as u32), Some(k));
                        if e.next == Some(k) {
                            t.smst[sm].next = None;
                        }
                        if e.room.is_some_and(|r| r.kernel == k) {
                            t.smst[sm].room = None;
                        }
                    }
                    let ksr = t.ksrt[k.0 as usize].take().expect("active");
                    t.active.retain(|&a| a != k);
                    t.records.push(Record::KernelFinished {
                        cycle,
                        tag: ksr.tag,
                        launch,
                    });
                    self.policy.on_kernel_finished(&mut self.tables);
                }
            }
            self.collect();
        }
        Ok(())
    }

    /// `tb` left `sm`: whether a preemption request had taken it (it is forgotten).
    fn left(&mut self, sm: SmId, tb: TbRef) -> bool {
        match self.leaving.iter().position(|&x| x == (sm, tb)) {
            Some(i) => {
                self.leaving.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// Moves what the mechanism produced into the PTBQs and the records.
    fn collect(&mut self) {
        self.leaving.append(&mut self.out.taken);
        let t = &mut self.tables;
        for p in self.out.preempted.drain(..) {
            let k = t
                .slot_of(p.context.tb.launch)
                .expect("a preempted TB's kernel is active");
            t.ksrt[k.0 as usize]
                .as_mut()
                .expect("active")
                .ptbq
                .push_back(p);
        }
        self.preemptions.append(&mut self.out.records);
    }

    /// Asks the mechanism to empty every SM a policy reserved since the last call.
    fn preempt(&mut self, m: &mut Machine) -> Result<(), TimingError> {
        while let Some(sm) = self.tables.newly_reserved.pop() {
            let t = &self.tables;
            let next = t.smst[sm.0 as usize]
                .next
                .and_then(|k| t.ksrt[k.0 as usize].as_ref())
                .map(|k| k.launch);
            let mut cx = Cx {
                machine: m,
                out: &mut self.out,
            };
            self.mechanism.preempt(sm, Want::Sm { next }, &mut cx)?;
            self.collect();
        }
        while let Some(sm) = self.tables.newly_partial.pop() {
            let t = &self.tables;
            let Some(room) = t.smst[sm.0 as usize].room else {
                continue;
            };
            let launch = t.ksr(room.kernel).launch;
            // The kernel may hold only the room it asked for: the SM's other kernels keep
            // the rest.
            self.limited.push((sm, room.kernel, launch));
            m.request(Request::Limit {
                sm,
                launch,
                limits: KernelLimits {
                    tbs: Some(room.tbs),
                    ..KernelLimits::default()
                },
            })?;
            let mut cx = Cx {
                machine: m,
                out: &mut self.out,
            };
            let want = Want::Room {
                launch,
                tbs: room.tbs,
            };
            self.mechanism.preempt(sm, want, &mut cx)?;
            self.collect();
        }
        Ok(())
    }

    /// Sends the machine the limits policies set ([`Tables::limit`]) for launches still
    /// running.
    fn send_limits(&mut self, m: &mut Machine) -> Result<(), TimingError> {
        for (sm, launch, limits) in std::mem::take(&mut self.tables.new_limits) {
            if m.launch(launch).finished_at().is_none() {
                m.request(Request::Limit { sm, launch, limits })?;
                if !self.policy_limited.contains(&(sm, launch)) {
                    self.policy_limited.push((sm, launch));
                }
            }
        }
        Ok(())
    }

    /// Lifts the limits of kernels that are no longer guests of an SM (nor waiting for room
    /// on it), so that the SM's next set-up for them is unlimited.
    fn unlimit(&mut self, m: &mut Machine) -> Result<(), TimingError> {
        let t = &self.tables;
        let mut i = 0;
        while i < self.limited.len() {
            let (sm, k, launch) = self.limited[i];
            let e = &t.smst[sm.0 as usize];
            let live = t.ksrt[k.0 as usize]
                .as_ref()
                .is_some_and(|ksr| ksr.launch == launch);
            let there = e.guests.contains(&Some(k)) || e.room.is_some_and(|r| r.kernel == k);
            if live && there {
                i += 1;
                continue;
            }
            self.limited.swap_remove(i);
            if live {
                m.request(Request::Limit {
                    sm,
                    launch,
                    limits: KernelLimits::default(),
                })?;
            }
        }
        Ok(())
    }

    /// Tells the mechanism of every SM set up for another kernel (or none) since the last
    /// call.
    fn announce(&mut self, m: &mut Machine) -> Result<(), TimingError> {
        for i in 0..self.tables.smst.len() {
            let t = &self.tables;
            let now = t.smst[i]
                .kernel
                .and_then(|k| t.ksrt[k.0 as usize].as_ref())
                .map(|k| k.launch);
            if now != self.set_up_for[i] {
                self.set_up_for[i] = now;
                let mut cx = Cx {
                    machine: m,
                    out: &mut self.out,
                };
                self.mechanism.assigned(SmId(i as u32), now, &mut cx)?;
                self.collect();
            }
        }
        Ok(())
    }

    /// Moves waiting commands into the active queue while it has room and the policy picks
    /// one; each new kernel is submitted to the machine and shown to the policy.
    fn admit(&mut self, m: &mut Machine) -> Result<(), TimingError> {
        loop {
            let t = &mut self.tables;
            if t.active.len() >= t.capacity {
                return Ok(());
            }
            let waiting = t.waiting();
            if waiting.is_empty() {
                return Ok(());
            }
            let Some(context) = self.policy.admit(&waiting) else {
                return Ok(());
            };
            let t = &mut self.tables;
            let Some((cmd, arrived_at)) = t.buffers.get_mut(context.0 as usize).and_then(|b| {
                let i = crate::tables::offered(b)?;
                b.remove(i)
            }) else {
                return Ok(());
            };
            let launch = m.submit(cmd.launch, &cmd.timed)?;
            let slot = t
                .ksrt
                .iter()
                .position(Option::is_none)
                .expect("the active queue has room");
            let k = KernelSlot(slot as u32);
            t.ksrt[slot] = Some(Ksr {
                launch,
                kernel: m.launch(launch).ctx().kernel.name.as_str().into(),
                context: cmd.context,
                priority: cmd.priority,
                stream_priority: cmd.stream_priority,
                tag: cmd.tag,
                arrived_at,
                activated_at: t.now,
                ptbq: VecDeque::new(),
                pending_tbs: m.launch(launch).undispatched(),
                sms: 0,
                demand: *m.launch(launch).demand(),
                alone_tbs: m.launch(launch).occupancy().tbs_per_sm,
            });
            t.active.push(k);
            t.stream_priorities |= cmd.stream_priority != 0;
            t.records.push(Record::KernelActivated {
                cycle: t.now,
                tag: cmd.tag,
                launch,
            });
            self.policy.on_kernel_activated(k, t);
        }
    }

    /// Refreshes what each kernel has left to issue.
    fn refresh(&mut self, m: &Machine) {
        let t = &mut self.tables;
        for &k in &t.active {
            let ksr = t.ksrt[k.0 as usize].as_mut().expect("active");
            ksr.pending_tbs = m.launch(ksr.launch).undispatched() + ksr.ptbq.len() as u64;
        }
    }

    /// SMST transitions: reserved SMs that emptied are set up for their next kernel; SMs
    /// whose kernel has nothing left become idle once empty (or, with intra-SM sharing, are
    /// offered to the policy at once).
    fn transitions(&mut self, m: &Machine) {
        for i in 0..self.tables.smst.len() {
            let sm = SmId(i as u32);
            let e = self.tables.smst[i];
            // Empty: nothing resident or moving (a mechanism may have parked parts of
            // stopped TBs here, which do not keep the SM from its next kernel).
            let empty = m.vacated(sm);
            match e.state {
                SmState::Reserved if empty => {
                    let t = &mut self.tables;
                    t.smst[i].state = SmState::Idle;
                    t.smst[i].yielding = false;
                    t.leave(sm, None);
                    match e.next.take_if_live(t) {
                        Some(next) => {
                            t.assign(sm, next);
                        }
                        None => {
                            t.set_kernel(sm, None);
                            t.records.push(Record::SmIdle { cycle: t.now, sm });
                            self.policy.on_sm_idle(sm, &mut self.tables);
                        }
                    }
                    self.tables.smst[i].next = None;
                    self.policy.on_preemption_done(sm, &mut self.tables);
                }
                SmState::Running => {
                    if let Some(room) = e.room {
                        // Done once the room is there, or once everything the request took
                        // has left (it could not make more).
                        let launch = self.tables.ksr(room.kernel).launch;
                        let gone = !self.leaving.iter().any(|&(s, _)| s == sm) && m.settled(sm);
                        if !gone && m.room_for(sm, launch) < room.tbs {
                            continue;
                        }
                        let t = &mut self.tables;
                        t.smst[i].room = None;
                        t.join(sm, room.kernel);
                        t.records.push(Record::RoomMade {
                            cycle: t.now,
                            sm,
                            launch,
                        });
                        self.policy.on_room_made(sm, room.kernel, &mut self.tables);
                        continue;
                    }
                    let t = &self.tables;
                    let done = e.kernels().all(|k| !t.ksr(k).has_work());
                    if !done {
                        continue;
                    }
                    if empty {
                        let t = &mut self.tables;
                        t.set_kernel(sm, None);
                        t.leave(sm, None);
                        t.smst[i].state = SmState::Idle;
                        t.records.push(Record::SmIdle { cycle: t.now, sm });
                        self.policy.on_sm_idle(sm, &mut self.tables);
                    } else if self.tables.config.intra_sm_sharing {
                        self.policy.on_sm_room(sm, &mut self.tables);
                    }
                }
                _ => {}
            }
        }
    }

    /// The SM driver: one TB per running SM with room (a TB being resumed keeps the room it
    /// needs: nothing else is placed there in the same cycle), of the first kernel it runs
    /// that has one to place — its guests first, so each takes the room made for it — from
    /// the kernel's PTBQ first. An SM with room being made for a kernel receives nothing
    /// until it is made.
    fn drive(&mut self, m: &mut Machine) -> Result<(), TimingError> {
        for i in 0..self.tables.smst.len() {
            let e = self.tables.smst[i];
            if e.state != SmState::Running || e.room.is_some() {
                continue;
            }
            for k in e.kernels() {
                if self.place(m, SmId(i as u32), k)? {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Places one TB of kernel `k` on `sm` if it has one to issue and there is room, its
    /// PTBQ first; whether it did.
    fn place(&mut self, m: &mut Machine, sm: SmId, k: KernelSlot) -> Result<bool, TimingError> {
        let ksr = self.tables.ksrt[k.0 as usize].as_mut().expect("active");
        if !ksr.has_work() {
            return Ok(false);
        }
        // The PTBQ first: the first preempted TB the mechanism can resume here.
        let mechanism = &self.mechanism;
        if let Some(i) = ksr.ptbq.iter().position(|p| mechanism.can_resume(sm, p, m)) {
            let p = ksr.ptbq.remove(i).expect("found");
            let mut cx = Cx {
                machine: m,
                out: &mut self.out,
            };
            self.mechanism.resume(sm, p, &mut cx)?;
        } else if m.launch(ksr.launch).undispatched() > 0 && m.fits(sm, ksr.launch) {
            m.request(Request::Dispatch {
                sm,
                launch: ksr.launch,
            })?;
        } else {
            return Ok(false);
        }
        ksr.pending_tbs -= 1;
        Ok(true)
    }
}

/// `Option<KernelSlot>` of a reservation, kept only if the kernel is still active.
trait LiveSlot {
    fn take_if_live(self, t: &Tables) -> Option<KernelSlot>;
}

impl LiveSlot for Option<KernelSlot> {
    fn take_if_live(self, t: &Tables) -> Option<KernelSlot> {
        self.filter(|k| t.ksrt[k.0 as usize].is_some())
    }
}

impl Control for Framework {
    fn on_cycle(&mut self, m: &mut Machine) -> Result<(), TimingError> {
        self.tables.now = m.cycle();
        if self.tables.resources.is_none() {
            let c = m.config();
            self.tables.resources = Some(c.sm.resources.clone());
            self.tables.sustainable = Some(Sustainable::from_peaks(
                c.memory.noc_flits_per_sm_core_cycle(),
                c.memory.dram_bytes_per_core_cycle() / f64::from(c.sm.count.max(1)),
                c.memory.line_bytes,
                IRC_WINDOW,
            ));
            self.tables.line_bytes = c.memory.line_bytes;
        }
        self.observe(m)?;
        if !self.called.is_empty() {
            self.tell_called(m)?;
        }
        self.refresh(m);
        if self.tables.watching_sms {
            let sms = m.sm_count();
            let counters = m.counters();
            let counts = (0..sms).map(SmId).map(|sm| SmCounts {
                warp_instructions: counters.sm(sm).warp_instructions,
                noc_requests: counters.sm_noc_requests(sm),
            });
            self.tables.sm_counts.clear();
            self.tables.sm_counts.extend(counts);
        }
        if self.tables.watching_kernels {
            let t = &mut self.tables;
            t.kernel_counts.clear();
            t.kernel_counts.resize(t.ksrt.len(), None);
            for (i, ksr) in t.ksrt.iter().enumerate() {
                if let Some(ksr) = ksr {
                    let tally = m.counters().launch(ksr.launch);
                    t.kernel_counts[i] = Some(KernelCounts {
                        warp_instructions: tally.warp_instructions,
                        noc_requests: tally.noc_requests,
                        noc_flits: m.noc_flits(ksr.launch),
                        dram_bytes: m.dram_bytes(ksr.launch),
                    });
                }
            }
        }
        self.admit(m)?;
        self.policy.on_cycle(&mut self.tables);
        self.tables.yield_to_streams();
        self.preempt(m)?;
        self.transitions(m);
        self.preempt(m)?;
        self.announce(m)?;
        if !self.limited.is_empty() {
            self.unlimit(m)?;
        }
        if !self.tables.new_limits.is_empty() {
            self.send_limits(m)?;
        }
        self.drive(m)?;
        self.collect();
        Ok(())
    }
}
