//! The framework's tables (papers/tanasic-thesis §5.2.3, Figure 5.3): the command buffers,
//! the active queue and the KSRT with a PTBQ per kernel, and the SMST; what a policy may read
//! and do ([`Tables`]), and the records reports and traces are built from. The framework
//! ([`crate::framework`]) keeps them and carries decisions out; policies
//! ([`crate::policy`]) read and change them only through [`Tables`].

use std::collections::VecDeque;

use gpu::exec::LaunchCtx;
use gpu::occupancy::{SmResources, TbDemand};
use gpu::timing::{KernelLimits, LaunchId, SmId, TimedKernel};
use preempt::Preempted;
use serde::{Deserialize, Serialize};

use crate::ccbp::Sustainable;

/// A GPU context: one process's view of the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ContextId(pub u32);

/// An entry of the KSRT.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct KernelSlot(pub u32);

/// Settings of the framework.
/// The most entries the active queue and the KSRT may have ([`FrameworkConfig::active_kernels`]):
/// far more kernels than any GPU runs at once (Hyper-Q has 32 hardware queues), and few enough
/// that the tables sized from it are small. A loader checks a configuration against it
/// before the framework is built.
pub const MAX_ACTIVE_KERNELS: u32 = 4096;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrameworkConfig {
    /// Let TBs of different kernels share an SM when its resources allow.
    #[serde(default)]
    pub intra_sm_sharing: bool,
    /// Entries of the active queue and the KSRT, 1 to [`MAX_ACTIVE_KERNELS`]; `None`: one
    /// per SM (§5.2.3).
    #[serde(default)]
    pub active_kernels: Option<u32>,
}

/// A kernel launch that has reached the GPU.
pub struct Command {
    pub context: ContextId,
    /// Larger is more important.
    pub priority: i32,
    /// The priority of the stream it was launched on, larger more important (0: the
    /// default): among the kernels of one context, the block scheduler prefers TBs of the
    /// highest ([`Tables::assign`], and `Tables::yield_to_streams` every cycle).
    pub stream_priority: i32,
    /// The launch as the host built it, and its kernel as the machine times it.
    pub launch: LaunchCtx,
    pub timed: TimedKernel,
    /// The caller's name for the launch, carried into every record about it.
    pub tag: u64,
}

/// A command waiting in its context's command buffer, as a policy sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waiting {
    pub context: ContextId,
    pub priority: i32,
    pub tag: u64,
    /// Core cycle it reached the GPU.
    pub arrived_at: u64,
}

/// A kernel status register: one active kernel.
#[derive(Debug)]
pub struct Ksr {
    pub launch: LaunchId,
    /// Its kernel's name (`.entry`).
    pub kernel: std::sync::Arc<str>,
    pub context: ContextId,
    pub priority: i32,
    /// Its stream's priority ([`Command::stream_priority`]).
    pub stream_priority: i32,
    pub tag: u64,
    pub arrived_at: u64,
    pub activated_at: u64,
    /// Preempted TBs of the kernel, issued before any new one.
    pub(crate) ptbq: VecDeque<Preempted>,
    /// TBs still to issue: new ones plus those in the PTBQ (refreshed every cycle).
    pub pending_tbs: u64,
    /// SMs whose SMST entry names this kernel.
    pub sms: u32,
    /// What one of its TBs takes on an SM, and how many fit on an empty SM (its occupancy
    /// alone): what co-running schemes plan with ([`crate::corun`]).
    pub demand: TbDemand,
    pub alone_tbs: u32,
}

impl Ksr {
    /// Whether it has TBs to issue.
    pub fn has_work(&self) -> bool {
        self.pending_tbs > 0
    }

    /// TBs in its PTBQ.
    pub fn preempted(&self) -> usize {
        self.ptbq.len()
    }
}

/// The state of an SM in the SMST.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum SmState {
    Idle,
    Running,
    /// No new TB; once empty it runs [`SmEntry::next`].
    Reserved,
}

/// Kernels that may join an SM beside the one it was set up for ([`Tables::make_room`]).
pub const MAX_GUESTS: usize = 3;

/// An entry of the SMST.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmEntry {
    pub state: SmState,
    /// The kernel it was set up for (issues TBs of).
    pub kernel: Option<KernelSlot>,
    /// Kernels that joined it through a partial preemption and run beside `kernel`, each
    /// limited to the TBs it was given room for, in the order they joined.
    pub guests: [Option<KernelSlot>; MAX_GUESTS],
    /// When reserved, the kernel it is reserved for.
    pub next: Option<KernelSlot>,
    /// A partial preemption in progress: room being made for a kernel to join.
    pub room: Option<RoomRequest>,
    /// Resident TBs, of any kernel.
    pub tbs: u32,
    /// Reserved because a kernel of a higher stream priority of the same context has TBs
    /// to issue (`Tables::yield_to_streams`): it drains, whatever the mechanism, and no
    /// running TB is preempted. A policy's [`Tables::reserve`] of it hands it to the
    /// mechanism after all.
    pub yielding: bool,
}

impl SmEntry {
    pub(crate) const IDLE: SmEntry = SmEntry {
        state: SmState::Idle,
        kernel: None,
        guests: [None; MAX_GUESTS],
        next: None,
        room: None,
        tbs: 0,
        yielding: false,
    };

    /// The kernels it issues TBs of: its guests first (each keeps the room made for it),
    /// then the kernel it was set up for.
    pub fn kernels(&self) -> impl Iterator<Item = KernelSlot> + '_ {
        self.guests.iter().flatten().copied().chain(self.kernel)
    }

    /// Whether it issues TBs of `k`.
    pub fn runs(&self, k: KernelSlot) -> bool {
        self.kernels().any(|x| x == k)
    }
}

/// Room asked for on a running SM: `tbs` TBs of `kernel`, which then runs there beside the
/// SM's kernels, limited to that many TBs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoomRequest {
    pub kernel: KernelSlot,
    pub tbs: u32,
    /// Core cycle of the request.
    pub at: u64,
}

/// What the framework decided, for reports and traces (core cycles). TBs arriving on and
/// leaving SMs are the machine's own events: a [`gpu::timing::ResidencyLog`] probe keeps
/// them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// A launch reached the GPU (its context's command buffer).
    KernelArrived {
        cycle: u64,
        tag: u64,
    },
    /// It entered the active queue and was submitted to the machine.
    KernelActivated {
        cycle: u64,
        tag: u64,
        launch: LaunchId,
    },
    /// Its last TB finished and its last access completed.
    KernelFinished {
        cycle: u64,
        tag: u64,
        launch: LaunchId,
    },
    /// An SM was set up for a kernel.
    SmAssigned {
        cycle: u64,
        sm: SmId,
        launch: LaunchId,
    },
    /// An SM was reserved for another kernel.
    SmReserved {
        cycle: u64,
        sm: SmId,
        next: LaunchId,
    },
    SmIdle {
        cycle: u64,
        sm: SmId,
    },
    /// An SM stopped taking TBs of its kernel for `next`, a kernel of the same context on a
    /// stream of higher priority: it drains (nothing is preempted) and then runs `next`.
    SmYielded {
        cycle: u64,
        sm: SmId,
        next: LaunchId,
    },
    /// Room for `tbs` TBs of `launch` was asked for on a running SM.
    RoomRequested {
        cycle: u64,
        sm: SmId,
        launch: LaunchId,
        tbs: u32,
    },
    /// The room was made (or everything the request took has left): `launch` joined the SM.
    RoomMade {
        cycle: u64,
        sm: SmId,
        launch: LaunchId,
    },
}

/// The framework's tables, which a policy reads and acts on.
pub struct Tables {
    pub(crate) config: FrameworkConfig,
    pub(crate) capacity: usize,
    /// Per context, the commands that reached the GPU in order (the front one is in the
    /// context's command buffer).
    pub(crate) buffers: Vec<VecDeque<(Command, u64)>>,
    pub(crate) ksrt: Vec<Option<Ksr>>,
    /// KSRT slots of the active kernels, in activation order.
    pub(crate) active: Vec<KernelSlot>,
    pub(crate) smst: Vec<SmEntry>,
    pub(crate) records: Vec<Record>,
    /// SMs reserved, or asked for room on, since the mechanism was last told.
    pub(crate) newly_reserved: Vec<SmId>,
    pub(crate) newly_partial: Vec<SmId>,
    /// Limits a policy set ([`Tables::limit`]) that the machine has not been given yet.
    pub(crate) new_limits: Vec<(SmId, LaunchId, KernelLimits)>,
    /// The SMs' static resources (known once the framework has seen the machine).
    pub(crate) resources: Option<SmResources>,
    pub(crate) now: u64,
    /// Whether a kernel on a stream of non-default priority was ever activated.
    pub(crate) stream_priorities: bool,
    /// Each SM's counts so far, refreshed every cycle while a policy watches them
    /// ([`Tables::watch_sm_counters`]): hardware performance counters per SM, which
    /// Warped-Slicer's and CCBP's profiles read.
    pub(crate) sm_counts: Vec<SmCounts>,
    pub(crate) watching_sms: bool,
    /// Each active kernel's counts so far (by KSRT slot), refreshed every cycle while a
    /// policy watches them ([`Tables::watch_kernel_counters`]): what Maestro's search
    /// scores combinations by, and CCBP's cost of a request.
    pub(crate) kernel_counts: Vec<Option<KernelCounts>>,
    pub(crate) watching_kernels: bool,
    /// One SM's share of the sustainable NoC and DRAM bandwidth (once the framework has
    /// seen the machine), and the memory system's line size: CCBP's units.
    pub(crate) sustainable: Option<Sustainable>,
    pub(crate) line_bytes: u64,
}

/// What one SM has done so far, as its hardware performance counters count it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SmCounts {
    pub warp_instructions: u64,
    /// Request packets sent towards the L2 (L1 misses, stores, atomics): what an issue
    /// rate controller counts (papers/lin-thesis §4.5.1).
    pub noc_requests: u64,
}

/// What one kernel (its launch) has done so far, over every SM.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelCounts {
    pub warp_instructions: u64,
    pub noc_requests: u64,
    /// Interconnect flits its requests and their replies moved.
    pub noc_flits: u64,
    /// DRAM bytes its accesses caused (fetches and the write-backs they evicted).
    pub dram_bytes: u64,
}

impl Tables {
    pub fn config(&self) -> &FrameworkConfig {
        &self.config
    }

    /// The current core cycle.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Commands in the command buffers (one per context at most), by context.
    pub fn waiting(&self) -> Vec<Waiting> {
        self.buffers
            .iter()
            .filter_map(|b| offered(b).map(|i| &b[i]))
            .map(|(c, at)| Waiting {
                context: c.context,
                priority: c.priority,
                tag: c.tag,
                arrived_at: *at,
            })
            .collect()
    }

    /// Active kernels in activation order.
    pub fn active(&self) -> &[KernelSlot] {
        &self.active
    }

    /// First come, first served among the active kernels with TBs to issue that `eligible`
    /// accepts: the one that arrived first (first activated on ties).
    pub fn first_come(&self, eligible: impl Fn(&Ksr) -> bool) -> Option<KernelSlot> {
        self.active
            .iter()
            .copied()
            .filter(|&k| {
                let ksr = self.ksr(k);
                ksr.has_work() && eligible(ksr)
            })
            .min_by_key(|&k| (self.ksr(k).arrived_at, self.ksr(k).activated_at))
    }

    pub fn ksr(&self, k: KernelSlot) -> &Ksr {
        self.ksrt[k.0 as usize].as_ref().expect("a live KSRT entry")
    }

    pub fn sm(&self, sm: SmId) -> &SmEntry {
        &self.smst[sm.0 as usize]
    }

    pub fn sm_count(&self) -> u32 {
        self.smst.len() as u32
    }

    /// An SM's static resources (every SM has the same), once the framework has run a
    /// cycle.
    pub fn sm_resources(&self) -> Option<&SmResources> {
        self.resources.as_ref()
    }

    /// Starts (or stops) refreshing each SM's counts ([`SmCounts`]) every cycle.
    pub fn watch_sm_counters(&mut self, on: bool) {
        self.watching_sms = on;
    }

    /// What `sm` has done so far, as the cycle began; `None` unless the SMs are watched
    /// ([`Tables::watch_sm_counters`]) and the framework has refreshed them.
    pub fn sm_counts(&self, sm: SmId) -> Option<SmCounts> {
        if !self.watching_sms {
            return None;
        }
        self.sm_counts.get(sm.0 as usize).copied()
    }

    /// Starts (or stops) refreshing each active kernel's counts ([`KernelCounts`]) every
    /// cycle.
    pub fn watch_kernel_counters(&mut self, on: bool) {
        self.watching_kernels = on;
    }

    /// What active kernel `k` has done so far, as the cycle began; `None` unless the
    /// kernels are watched ([`Tables::watch_kernel_counters`]) and refreshed.
    pub fn kernel_counts(&self, k: KernelSlot) -> Option<KernelCounts> {
        if !self.watching_kernels {
            return None;
        }
        self.kernel_counts.get(k.0 as usize).copied().flatten()
    }

    /// One SM's share of the sustainable NoC and DRAM bandwidth per IRC window
    /// ([`Sustainable`]), once the framework has run a cycle.
    pub fn sustainable(&self) -> Option<Sustainable> {
        self.sustainable
    }

    /// The memory system's line size, bytes (DRAM lines are CCBP's unit).
    pub fn line_bytes(&self) -> u64 {
        self.line_bytes
    }

    /// Idle SMs in index order.
    pub fn idle_sms(&self) -> Vec<SmId> {
        (0..self.smst.len() as u32)
            .map(SmId)
            .filter(|&s| self.sm(s).state == SmState::Idle)
            .collect()
    }

    /// Sets up `sm` for kernel `k`: an idle SM, or (with intra-SM sharing) a running SM
    /// whose kernel has nothing left to issue. Anything else is ignored (false).
    ///
    /// Stream priorities are the block scheduler's, below every policy: when another
    /// kernel of `k`'s context, on a stream of higher priority, has TBs to issue, the SM
    /// is set up for it instead ([`Tables::preferred`]). The policy chose the context; the
    /// hardware chooses among its streams.
    pub fn assign(&mut self, sm: SmId, k: KernelSlot) -> bool {
        if self.ksrt.get(k.0 as usize).is_none_or(Option::is_none) {
            return false;
        }
        let k = self.preferred(k).unwrap_or(k);
        let e = self.smst[sm.0 as usize];
        let can = match e.state {
            SmState::Idle => true,
            SmState::Running => {
                self.config.intra_sm_sharing
                    && e.kernel
                        .is_some_and(|old| old != k && !self.ksr(old).has_work())
            }
            SmState::Reserved => false,
        };
        if !can || self.ksrt[k.0 as usize].is_none() {
            return false;
        }
        self.set_kernel(sm, Some(k));
        self.smst[sm.0 as usize].state = SmState::Running;
        self.smst[sm.0 as usize].yielding = false;
        let launch = self.ksr(k).launch;
        self.records.push(Record::SmAssigned {
            cycle: self.now,
            sm,
            launch,
        });
        true
    }

    /// Reserves running `sm` for kernel `next`: it receives no more TBs, and once empty it
    /// runs `next` (the policy may change `next` while it drains, §5.2.4).
    pub fn reserve(&mut self, sm: SmId, next: KernelSlot) -> bool {
        let e = self.smst[sm.0 as usize];
        if e.state == SmState::Idle || self.ksrt[next.0 as usize].is_none() {
            return false;
        }
        let entry = &mut self.smst[sm.0 as usize];
        // A policy's reservation of an SM that was yielding to a stream priority is the
        // mechanism's to carry out.
        if entry.state != SmState::Reserved || entry.yielding {
            self.newly_reserved.push(sm);
        }
        entry.yielding = false;
        entry.state = SmState::Reserved;
        entry.next = Some(next);
        // The whole SM is taken: a partial request still open ends (its TBs go too).
        entry.room = None;
        let launch = self.ksr(next).launch;
        self.records.push(Record::SmReserved {
            cycle: self.now,
            sm,
            next: launch,
        });
        true
    }

    /// Sets up `sm` to run `kernels` side by side from now on (a co-running scheme's plan,
    /// [`crate::corun`]): the first as the kernel it is set up for, the others as guests,
    /// without preempting anything (TBs of kernels no longer named keep running there until
    /// they finish). Each should be given its limits there ([`Tables::limit`]). False
    /// (nothing done) if `sm` is reserved or has room being made, `kernels` is empty or
    /// longer than one plus [`MAX_GUESTS`], or names a kernel twice or one not active.
    pub fn host(&mut self, sm: SmId, kernels: &[KernelSlot]) -> bool {
        let Some(e) = self.smst.get(sm.0 as usize).copied() else {
            return false;
        };
        let distinct = kernels
            .iter()
            .enumerate()
            .all(|(i, k)| !kernels[..i].contains(k));
        let can = e.state != SmState::Reserved
            && e.room.is_none()
            && !kernels.is_empty()
            && kernels.len() <= 1 + MAX_GUESTS
            && distinct
            && kernels
                .iter()
                .all(|k| self.ksrt.get(k.0 as usize).is_some_and(Option::is_some));
        if !can {
            return false;
        }
        self.leave(sm, None);
        let first = kernels[0];
        if e.kernel != Some(first) || e.state != SmState::Running {
            self.set_kernel(sm, Some(first));
            self.smst[sm.0 as usize].state = SmState::Running;
            let launch = self.ksr(first).launch;
            self.records.push(Record::SmAssigned {
                cycle: self.now,
                sm,
                launch,
            });
        }
        for &g in &kernels[1..] {
            self.join(sm, g);
        }
        true
    }

    /// Gives active kernel `k` `limits` on `sm` (TBs, warps, registers, shared memory,
    /// issue quota: [`gpu::timing::KernelLimits`]), sent to the machine before the SM
    /// driver places TBs this cycle; they stay until set again. False if `k` is not active
    /// or `sm` does not exist.
    pub fn limit(&mut self, sm: SmId, k: KernelSlot, limits: KernelLimits) -> bool {
        if sm.0 as usize >= self.smst.len() {
            return false;
        }
        let Some(ksr) = self.ksrt.get(k.0 as usize).and_then(Option::as_ref) else {
            return false;
        };
        let launch = ksr.launch;
        self.new_limits.push((sm, launch, limits));
        true
    }

    /// Asks for room for `tbs` TBs of kernel `k` on running `sm`, which keeps running its
    /// other TBs (partial preemption): the framework's mechanism takes the fewest TBs of
    /// the SM's other kernels that make the room ([`preempt::Want::Room`]), and once it is
    /// made `k` joins the SM as a guest, limited there to `tbs` TBs
    /// ([`gpu::timing::KernelLimits::tbs`]). False (nothing done) unless `sm` is running,
    /// `k` is active and not on it, no other request for it is open, and a guest place is
    /// free.
    pub fn make_room(&mut self, sm: SmId, k: KernelSlot, tbs: u32) -> bool {
        let Some(e) = self.smst.get(sm.0 as usize) else {
            return false;
        };
        let can = e.state == SmState::Running
            && e.room.is_none()
            && !e.runs(k)
            && e.guests.iter().any(Option::is_none)
            && tbs > 0
            && self.ksrt.get(k.0 as usize).is_some_and(Option::is_some);
        if !can {
            return false;
        }
        self.smst[sm.0 as usize].room = Some(RoomRequest {
            kernel: k,
            tbs,
            at: self.now,
        });
        self.newly_partial.push(sm);
        let launch = self.ksr(k).launch;
        self.records.push(Record::RoomRequested {
            cycle: self.now,
            sm,
            launch,
            tbs,
        });
        true
    }

    /// The kernel of `k`'s context the block scheduler prefers to `k`: of those on a
    /// stream of higher priority than `k`'s with TBs to issue, the highest, first activated
    /// on ties; `None` when there is none.
    pub fn preferred(&self, k: KernelSlot) -> Option<KernelSlot> {
        let of = self.ksr(k);
        self.active
            .iter()
            .copied()
            .filter(|&x| {
                let ksr = self.ksr(x);
                ksr.context == of.context
                    && ksr.stream_priority > of.stream_priority
                    && ksr.has_work()
            })
            .min_by_key(|&x| std::cmp::Reverse(self.ksr(x).stream_priority))
    }

    /// Stream priorities (CUDA's `cudaStreamCreateWithPriority`): every running SM whose
    /// kernel still has TBs to issue while a kernel of the same context on a stream of
    /// higher priority has some too stops taking the first kernel's TBs and, once its
    /// running TBs have finished, is set up for the preferred kernel. Nothing is
    /// preempted, whatever the mechanism: the SM drains ([`SmEntry::yielding`]). SMs of
    /// other contexts are the policy's business.
    pub(crate) fn yield_to_streams(&mut self) {
        // Nearly every run has no stream priorities, and pays nothing for them.
        if !self.stream_priorities {
            return;
        }
        for i in 0..self.smst.len() {
            let e = self.smst[i];
            if e.state == SmState::Reserved && e.yielding {
                // The kernel it yields to has nothing left to issue (or is gone): it takes
                // its own kernel's TBs again, as the block scheduler would.
                let wanted = e
                    .next
                    .and_then(|n| self.ksrt[n.0 as usize].as_ref())
                    .is_some_and(Ksr::has_work);
                if !wanted && e.kernel.is_some() {
                    let entry = &mut self.smst[i];
                    entry.state = SmState::Running;
                    entry.next = None;
                    entry.yielding = false;
                }
                continue;
            }
            if e.state != SmState::Running || e.room.is_some() {
                continue;
            }
            let Some(k) = e.kernel else {
                continue;
            };
            if !self.ksr(k).has_work() {
                continue;
            }
            let Some(next) = self.preferred(k) else {
                continue;
            };
            let entry = &mut self.smst[i];
            entry.state = SmState::Reserved;
            entry.next = Some(next);
            entry.yielding = true;
            let launch = self.ksr(next).launch;
            self.records.push(Record::SmYielded {
                cycle: self.now,
                sm: SmId(i as u32),
                next: launch,
            });
        }
    }

    /// Kernel `k` joins `sm` as a guest (its room was made).
    pub(crate) fn join(&mut self, sm: SmId, k: KernelSlot) {
        let entry = &mut self.smst[sm.0 as usize];
        let free = entry
            .guests
            .iter_mut()
            .find(|g| g.is_none())
            .expect("make_room checked for a free guest place");
        *free = Some(k);
        if let Some(ksr) = self.ksrt[k.0 as usize].as_mut() {
            ksr.sms += 1;
        }
    }

    /// Guest `k` leaves `sm` (`None`: every guest does, as when the SM goes idle or is set
    /// up anew).
    pub(crate) fn leave(&mut self, sm: SmId, k: Option<KernelSlot>) {
        let entry = &mut self.smst[sm.0 as usize];
        for g in &mut entry.guests {
            if g.is_some() && (k.is_none() || *g == k) {
                let old = g.take().expect("checked");
                if let Some(ksr) = self.ksrt[old.0 as usize].as_mut() {
                    ksr.sms -= 1;
                }
            }
        }
    }

    pub(crate) fn set_kernel(&mut self, sm: SmId, k: Option<KernelSlot>) {
        let entry = &mut self.smst[sm.0 as usize];
        if let Some(old) = entry.kernel {
            if let Some(ksr) = self.ksrt[old.0 as usize].as_mut() {
                ksr.sms -= 1;
            }
        }
        entry.kernel = k;
        if let Some(new) = k {
            if let Some(ksr) = self.ksrt[new.0 as usize].as_mut() {
                ksr.sms += 1;
            }
        }
    }

    pub(crate) fn slot_of(&self, launch: LaunchId) -> Option<KernelSlot> {
        self.active
            .iter()
            .copied()
            .find(|&k| self.ksr(k).launch == launch)
    }
}

/// The command a context's buffer offers the active queue: the oldest of the highest stream
/// priority (each stream has one launch there at most: the host delivers a launch only
/// once the work before it in its stream has finished).
pub(crate) fn offered(buffer: &VecDeque<(Command, u64)>) -> Option<usize> {
    buffer
        .iter()
        .enumerate()
        .max_by_key(|(i, (c, _))| (c.stream_priority, std::cmp::Reverse(*i)))
        .map(|(i, _)| i)
}
