//! What the SMs see of the memory hierarchy: a port per SM to offer accesses, pop
//! completions and read the state an offer's answer depends on, and a clock. The full
//! hierarchy (`memsys::MemorySystem`: L1s, crossbars, L2 slices, DRAM) is one
//! implementation; [`FixedLatency`] — every access accepted and completed a fixed number of
//! core cycles later — is another, for single-SM tests whose cycle gaps must not depend on
//! the memory model (shared/STYLE.md: Ramulator 2's controller harness).

use memsys::{
    Completion, Domain, IssueState, MemAccess, MemStats, MemorySystem, RequestId, SmPort, SmPorts,
    Stall,
};

use super::ids::SmId;

/// The memory hierarchy as the machine drives it.
///
/// **Contract:** `offer` takes a whole access or refuses it, changing nothing on a refusal
/// but its own refusal counters; `issue_state` captures everything the answer to an offer
/// depends on besides the offer (two equal states give the same answer to the same offer);
/// completions come back per SM in the order they complete, each exactly once, with the
/// access's tag; `tick_core` advances time to the next core clock edge. It is deterministic.
pub trait MemoryBackend {
    /// One SM's side of the hierarchy for one core cycle, borrowing only that SM's state.
    type Port<'a>: SmMemory + Send
    where
        Self: 'a;
    /// [`MemoryBackend::ports`]' iterator (built each cycle, so it allocates nothing).
    type Ports<'a>: Iterator<Item = Self::Port<'a>>
    where
        Self: 'a;
    /// Every SM's port, in SM order, when SMs can use them independently (on different
    /// threads) with the same result as one after another; `None` when they cannot, and the
    /// machine then steps SMs one after another through the backend itself ([`Through`]).
    /// Whatever the ports did is seen by the backend from its next `tick_core`.
    fn ports(&mut self) -> Option<Self::Ports<'_>>;
    fn offer(&mut self, sm: SmId, access: &MemAccess) -> Result<(), Stall>;
    /// Offers `access` again after it was refused with `stall`, to a hierarchy whose
    /// `issue_state` refuses it again the same way (`IssueState::refuses_again`; an equal
    /// state always does), for the refusal counters (a hierarchy may count them without
    /// looking the access up again).
    fn repeat_refusal(&mut self, sm: SmId, access: &MemAccess, stall: Stall) {
        let r = self.offer(sm, access);
        debug_assert_eq!(r, Err(stall), "an unchanged memory system refuses again");
    }
    fn pop_completed(&mut self, sm: SmId) -> Option<Completion>;
    fn issue_state(&self, sm: SmId) -> IssueState;
    /// Whether SM `sm` would be refused again an access refused with `stall` when its
    /// state was `then` ([`IssueState::refuses_again`] of [`MemoryBackend::issue_state`]).
    fn refuses_again(&self, sm: SmId, then: &IssueState, stall: Stall) -> bool {
        self.issue_state(sm).refuses_again(then, stall)
    }
    /// Advances to the next core cycle.
    fn tick_core(&mut self);
    fn core_cycle(&self) -> u64;
    /// The current time in femtoseconds.
    fn now_fs(&self) -> u64;
    /// Femtoseconds per core cycle.
    fn core_period_fs(&self) -> u64;
    /// No access in flight and every queue empty (completions not yet popped do not count).
    fn is_idle(&self) -> bool;
    /// Jumps an idle hierarchy to the first core edge at or after `t_fs`.
    fn skip_idle_to(&mut self, t_fs: u64);
    fn stats(&self) -> MemStats;
    /// With address translation: the cycle at which the access SM `sm` last had accepted
    /// has its last page translated (`memsys::fault::PENDING` while it waits for a fault);
    /// `None` when nothing is translated, so no access can fault.
    fn last_translated(&self, _sm: SmId) -> Option<u64> {
        None
    }
    /// Cuts the memory into `instances` partitions, SM `sm` using partition
    /// `instance_of_sm[sm]` only (NVIDIA's MIG; `memsys::MemorySystem::partition`). A
    /// hierarchy with nothing shared between SMs has nothing to cut.
    fn partition(
        &mut self,
        _instance_of_sm: &[Option<u32>],
        _instances: u32,
    ) -> Result<(), memsys::ConfigError> {
        Ok(())
    }
    /// With a pipeline that replays (`memsys::Pipeline::squashes`): the oldest access of
    /// SM `sm` squashed because it faulted (it left the memory system; the SM replays it).
    fn pop_squashed(&mut self, _sm: SmId) -> Option<MemAccess> {
        None
    }
    /// With a pipeline that replays (`memsys::Pipeline::squashes`): the tag of the oldest
    /// squashed access of SM `sm` whose fault has been serviced, which the SM replays.
    fn pop_serviced(&mut self, _sm: SmId) -> Option<u64> {
        None
    }
    /// Request packets SM `sm` has sent towards the L2 so far (`memsys::MemorySystem::
    /// noc_requests`), which an issue-rate controller charges; 0 where nothing is sent.
    fn noc_requests(&self, _sm: SmId) -> u64 {
        0
    }
    /// DRAM bytes the accesses of `owner` (a launch's index) have caused so far
    /// (`memsys::MemorySystem::dram_bytes`); 0 where there is no DRAM.
    fn dram_bytes(&self, _owner: u32) -> u64 {
        0
    }
    /// Interconnect flits the accesses of `owner` have moved so far, requests and replies
    /// (`memsys::MemorySystem::noc_flits`); 0 where there is no interconnect.
    fn noc_flits(&self, _owner: u32) -> u64 {
        0
    }
    /// Makes SM `sm`'s global and local accesses bypass its L1 data cache, or use it again
    /// (`memsys::MemorySystem::set_l1_bypass`: GPUDuet's third context store); nothing
    /// where there is no L1.
    fn set_l1_bypass(&mut self, _sm: SmId, _on: bool) {}
}

/// What one SM sees of the memory hierarchy during a cycle: the [`MemoryBackend`] calls
/// that name it, without the name.
pub trait SmMemory {
    fn offer(&mut self, access: &MemAccess) -> Result<(), Stall>;
    /// [`MemoryBackend::repeat_refusal`] of this SM.
    fn repeat_refusal(&mut self, access: &MemAccess, stall: Stall) {
        let r = self.offer(access);
        debug_assert_eq!(r, Err(stall), "an unchanged memory system refuses again");
    }
    fn pop_completed(&mut self) -> Option<Completion>;
    /// Whether a completion may wait to be popped: false only when none does (a port that
    /// cannot tell cheaply says true). A sleeping SM with none is skipped for the cycle.
    fn completions_waiting(&self) -> bool {
        true
    }
    fn issue_state(&self) -> IssueState;
    /// Whether an access refused with `stall` when the state was `then` would be refused
    /// again now ([`IssueState::refuses_again`] of [`SmMemory::issue_state`]; a port may
    /// answer without building the whole state).
    fn refuses_again(&self, then: &IssueState, stall: Stall) -> bool {
        self.issue_state().refuses_again(then, stall)
    }
    /// [`MemoryBackend::last_translated`] of this SM.
    fn last_translated(&self) -> Option<u64> {
        None
    }
    /// [`MemoryBackend::pop_squashed`] of this SM.
    fn pop_squashed(&mut self) -> Option<MemAccess> {
        None
    }
    /// [`MemoryBackend::pop_serviced`] of this SM.
    fn pop_serviced(&mut self) -> Option<u64> {
        None
    }
    /// [`MemoryBackend::noc_requests`] of this SM.
    fn noc_requests(&self) -> u64 {
        0
    }
}

/// SM `sm`'s view through the whole backend (SMs stepped one after another).
pub struct Through<'a, B> {
    pub backend: &'a mut B,
    pub sm: SmId,
}

impl<B: MemoryBackend> SmMemory for Through<'_, B> {
    #[inline]
    fn offer(&mut self, access: &MemAccess) -> Result<(), Stall> {
        self.backend.offer(self.sm, access)
    }
    #[inline]
    fn repeat_refusal(&mut self, access: &MemAccess, stall: Stall) {
        self.backend.repeat_refusal(self.sm, access, stall);
    }
    #[inline]
    fn pop_completed(&mut self) -> Option<Completion> {
        self.backend.pop_completed(self.sm)
    }
    #[inline]
    fn issue_state(&self) -> IssueState {
        self.backend.issue_state(self.sm)
    }
    #[inline]
    fn refuses_again(&self, then: &IssueState, stall: Stall) -> bool {
        self.backend.refuses_again(self.sm, then, stall)
    }
    #[inline]
    fn last_translated(&self) -> Option<u64> {
        self.backend.last_translated(self.sm)
    }
    #[inline]
    fn pop_squashed(&mut self) -> Option<MemAccess> {
        self.backend.pop_squashed(self.sm)
    }
    #[inline]
    fn pop_serviced(&mut self) -> Option<u64> {
        self.backend.pop_serviced(self.sm)
    }
    #[inline]
    fn noc_requests(&self) -> u64 {
        self.backend.noc_requests(self.sm)
    }
}

impl SmMemory for SmPort<'_> {
    #[inline]
    fn offer(&mut self, access: &MemAccess) -> Result<(), Stall> {
        SmPort::offer(self, access).map(|_| ())
    }
    #[inline]
    fn repeat_refusal(&mut self, access: &MemAccess, stall: Stall) {
        SmPort::repeat_refusal(self, access, stall);
    }
    #[inline]
    fn pop_completed(&mut self) -> Option<Completion> {
        SmPort::pop_completed(self)
    }
    #[inline]
    fn completions_waiting(&self) -> bool {
        SmPort::completions_waiting(self)
    }
    #[inline]
    fn issue_state(&self) -> IssueState {
        SmPort::issue_state(self)
    }
    #[inline]
    fn refuses_again(&self, then: &IssueState, stall: Stall) -> bool {
        SmPort::refuses_again(self, then, stall)
    }
    #[inline]
    fn noc_requests(&self) -> u64 {
        SmPort::noc_requests(self)
    }
}

/// The port of a backend that has none ([`MemoryBackend::ports`] is always `None`).
pub enum NoPort {}

impl SmMemory for NoPort {
    fn offer(&mut self, _: &MemAccess) -> Result<(), Stall> {
        match *self {}
    }
    fn pop_completed(&mut self) -> Option<Completion> {
        match *self {}
    }
    fn issue_state(&self) -> IssueState {
        match *self {}
    }
}

impl MemoryBackend for MemorySystem {
    type Port<'a> = SmPort<'a>;
    type Ports<'a> = SmPorts<'a>;
    fn last_translated(&self, sm: SmId) -> Option<u64> {
        MemorySystem::last_translated(self, sm.0 as usize)
    }
    fn partition(
        &mut self,
        instance_of_sm: &[Option<u32>],
        instances: u32,
    ) -> Result<(), memsys::ConfigError> {
        MemorySystem::partition(self, instance_of_sm, instances)
    }
    fn pop_squashed(&mut self, sm: SmId) -> Option<MemAccess> {
        MemorySystem::pop_squashed(self, sm.0 as usize)
    }
    fn pop_serviced(&mut self, sm: SmId) -> Option<u64> {
        MemorySystem::pop_serviced(self, sm.0 as usize)
    }
    fn noc_requests(&self, sm: SmId) -> u64 {
        MemorySystem::noc_requests(self, sm.0 as usize)
    }
    fn dram_bytes(&self, owner: u32) -> u64 {
        MemorySystem::dram_bytes(self, owner)
    }
    fn noc_flits(&self, owner: u32) -> u64 {
        MemorySystem::noc_flits(self, owner)
    }
    fn set_l1_bypass(&mut self, sm: SmId, on: bool) {
        MemorySystem::set_l1_bypass(self, sm.0 as usize, on)
    }
    fn ports(&mut self) -> Option<SmPorts<'_>> {
        MemorySystem::ports(self)
    }
    #[inline]
    fn offer(&mut self, sm: SmId, access: &MemAccess) -> Result<(), Stall> {
        MemorySystem::offer(self, sm.0 as usize, access).map(|_| ())
    }
    #[inline]
    fn repeat_refusal(&mut self, sm: SmId, access: &MemAccess, stall: Stall) {
        MemorySystem::repeat_refusal(self, sm.0 as usize, access, stall);
    }
    #[inline]
    fn pop_completed(&mut self, sm: SmId) -> Option<Completion> {
        MemorySystem::pop_completed(self, sm.0 as usize)
    }
    #[inline]
    fn issue_state(&self, sm: SmId) -> IssueState {
        MemorySystem::issue_state(self, sm.0 as usize)
    }
    #[inline]
    fn refuses_again(&self, sm: SmId, then: &IssueState, stall: Stall) -> bool {
        MemorySystem::refuses_again(self, sm.0 as usize, then, stall)
    }
    fn tick_core(&mut self) {
        while !self.tick().contains(Domain::Core) {}
    }
    fn core_cycle(&self) -> u64 {
        MemorySystem::core_cycle(self)
    }
    fn now_fs(&self) -> u64 {
        MemorySystem::now_fs(self)
    }
    fn core_period_fs(&self) -> u64 {
        self.config().clocks.period_fs(Domain::Core)
    }
    fn is_idle(&self) -> bool {
        MemorySystem::is_idle(self)
    }
    fn skip_idle_to(&mut self, t_fs: u64) {
        MemorySystem::skip_idle_to(self, t_fs)
    }
    fn stats(&self) -> MemStats {
        MemorySystem::stats(self)
    }
}

/// A memory that accepts every access and completes it `latency` core cycles after it was
/// offered (for tests of the SM alone). Time advances one core cycle per tick at
/// `period_fs` femtoseconds a cycle.
#[derive(Clone, Debug)]
pub struct FixedLatency {
    latency: u64,
    period_fs: u64,
    cycle: u64,
    next_id: u64,
    /// Per SM: accesses in flight, in the order they complete (equal latencies keep the
    /// order they were offered in).
    in_flight: Vec<std::collections::VecDeque<Completion>>,
    done: Vec<std::collections::VecDeque<Completion>>,
    accesses: u64,
}

impl FixedLatency {
    /// A memory for `sms` SMs completing every access after `latency` core cycles.
    pub fn new(sms: u32, latency: u64, period_fs: u64) -> FixedLatency {
        FixedLatency {
            latency: latency.max(1),
            period_fs: period_fs.max(1),
            cycle: 0,
            next_id: 0,
            in_flight: vec![Default::default(); sms as usize],
            done: vec![Default::default(); sms as usize],
            accesses: 0,
        }
    }

    /// Accesses offered so far.
    pub fn accesses(&self) -> u64 {
        self.accesses
    }
}

impl MemoryBackend for FixedLatency {
    type Port<'a> = NoPort;
    type Ports<'a> = std::iter::Empty<NoPort>;
    fn ports(&mut self) -> Option<Self::Ports<'_>> {
        None
    }
    fn offer(&mut self, sm: SmId, access: &MemAccess) -> Result<(), Stall> {
        self.next_id += 1;
        self.accesses += 1;
        self.in_flight[sm.0 as usize].push_back(Completion {
            id: RequestId(self.next_id),
            tag: access.tag,
            issued: self.cycle,
            completed: self.cycle + self.latency,
        });
        Ok(())
    }
    fn pop_completed(&mut self, sm: SmId) -> Option<Completion> {
        self.done[sm.0 as usize].pop_front()
    }
    fn issue_state(&self, _: SmId) -> IssueState {
        IssueState::default()
    }
    fn tick_core(&mut self) {
        self.cycle += 1;
        for (q, done) in self.in_flight.iter_mut().zip(&mut self.done) {
            while q.front().is_some_and(|c| c.completed <= self.cycle) {
                done.push_back(q.pop_front().expect("checked"));
            }
        }
    }
    fn core_cycle(&self) -> u64 {
        self.cycle
    }
    fn now_fs(&self) -> u64 {
        self.cycle * self.period_fs
    }
    fn core_period_fs(&self) -> u64 {
        self.period_fs
    }
    fn is_idle(&self) -> bool {
        self.in_flight.iter().all(|q| q.is_empty())
    }
    fn skip_idle_to(&mut self, t_fs: u64) {
        self.cycle = self.cycle.max(t_fs.div_ceil(self.period_fs));
    }
    fn stats(&self) -> MemStats {
        MemStats::default()
    }
}
