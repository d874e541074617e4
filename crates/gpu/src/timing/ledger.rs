//! The resources of one SM, as a ledger of what resident TBs hold (papers/tanasic-thesis
//! §5.2.3: a TB needs warp slots, registers, shared memory and a TB slot). A TB of any
//! launch is admitted while every resource has room for its [`TbDemand`], so TBs of several
//! kernels can share an SM; with TBs of one kernel only, the ledger admits exactly the
//! [`Occupancy::of`](crate::occupancy::Occupancy::of) count.
//!
//! Shared memory: where the SM offers several carve-outs, an empty SM is configured with the
//! one [`CarveOut`] picks for the first TB placed on it (Kepler: the smallest that fits it,
//! papers/tanasic-thesis Table 5.1, footnote 2; Volta on: one that does not limit that
//! kernel's occupancy); the carve-out stays while any TB is resident.
//!
//! **Several kernels under quotas** (co-running inside an SM, papers/lin-thesis ch. 4): the
//! ledger also books what each launch holds ([`Usage`]), and a launch may be given
//! [`KernelLimits`] on one SM — at most so many TBs, warps, registers or bytes of shared
//! memory — which [`SmLedger::fits_for`] enforces beside the SM's own capacities.
//!
//! **Extra TBs** (papers/lin-thesis ch. 3, [`crate::tlp`]): a launch given a TLP total
//! ([`SmLedger::set_tlp`]) may hold up to that many TBs here while no other launch holds
//! anything, beyond the SM's slots and capacities; the ledger then counts more than the SM
//! has, and the SM keeps only as many of them active as its own resources allow
//! (`timing::sm::tlp`). Another launch's TB fits only once the SM is back within them.

use serde::{Deserialize, Serialize};

use super::ids::LaunchId;
use crate::occupancy::{carve_out, CarveOut, SmResources, TbDemand};

/// The time unit of an issue rate controller, core cycles ([`KernelLimits::noc_quota`]):
/// papers/lin-thesis §4.5.1 controls "how many memory requests to be issued per time unit
/// (200 cycles in this paper)".
pub const IRC_WINDOW: u64 = 200;

/// What one launch may hold and issue on one SM (`None`: no limit but the SM's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelLimits {
    pub tbs: Option<u32>,
    pub warps: Option<u32>,
    pub registers: Option<u32>,
    pub shared_memory: Option<u32>,
    /// Warp instructions per epoch from each of the SM's schedulers
    /// ([`super::scheduler::Quota`]).
    pub issue_quota: Option<u32>,
    /// Requests towards the L2 (L1 misses, stores, atomics) per [`IRC_WINDOW`] core
    /// cycles from this SM: CCBP's issue rate controller (papers/lin-thesis §4.5.1).
    #[serde(default)]
    pub noc_quota: Option<u32>,
}

/// What one launch holds on one SM: its resident TBs, and the resources of its holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub tbs: u32,
    pub warps: u32,
    pub registers: u32,
    pub shared_memory: u32,
}

impl Usage {
    /// Whether `d` more (a whole TB when `tb`) stays within `limits`.
    fn admits(&self, limits: &KernelLimits, d: &TbDemand, tb: bool) -> bool {
        let within = |used: u32, more: u32, limit: Option<u32>| {
            limit.is_none_or(|l| u64::from(used) + u64::from(more) <= u64::from(l))
        };
        within(self.tbs, u32::from(tb), limits.tbs)
            && within(self.warps, d.warps, limits.warps)
            && within(self.registers, d.registers, limits.registers)
            && within(self.shared_memory, d.shared_memory, limits.shared_memory)
    }

    fn add(&mut self, d: &TbDemand, tb: bool) {
        self.tbs += u32::from(tb);
        self.warps += d.warps;
        self.registers += d.registers;
        self.shared_memory += d.shared_memory;
    }

    fn sub(&mut self, d: &TbDemand, tb: bool) {
        self.tbs -= u32::from(tb);
        self.warps -= d.warps;
        self.registers -= d.registers;
        self.shared_memory -= d.shared_memory;
    }
}

/// One launch's share of an SM.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Share {
    pub launch: LaunchId,
    pub used: Usage,
    pub limits: KernelLimits,
}

/// What the TBs resident on one SM hold, and what the SM has.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SmLedger {
    /// Capacities.
    pub max_warps: u32,
    pub max_threads: u32,
    pub max_tbs: u32,
    pub registers: u32,
    /// Shared memory of the current carve-out, in bytes.
    pub shared_memory: u32,
    /// In use by resident TBs.
    pub used_warps: u32,
    pub used_threads: u32,
    pub used_tbs: u32,
    pub used_registers: u32,
    pub used_shared_memory: u32,
    carve_outs: Vec<u32>,
    carve_out: CarveOut,
    /// Per launch with resources or limits here: what it holds and may hold.
    shares: Vec<Share>,
    /// Launches that may hold more TBs than the SM admits, with their totals.
    tlp: Vec<(LaunchId, u32)>,
    /// How many times the ledger has changed (see [`SmLedger::changes`]).
    #[serde(skip)]
    changes: Changes,
}

/// A count of changes kept beside a value, not part of it: any two compare equal, so
/// two ledgers holding the same are equal however they got there.
#[derive(Clone, Copy, Debug, Default)]
struct Changes(u64);

impl PartialEq for Changes {
    fn eq(&self, _: &Changes) -> bool {
        true
    }
}

impl Eq for Changes {}

impl SmLedger {
    /// An empty SM with `r`'s resources, configured with its largest carve-out.
    pub fn new(r: &SmResources) -> SmLedger {
        SmLedger {
            max_warps: r.max_warps,
            max_threads: r.max_threads,
            max_tbs: r.max_tbs,
            registers: r.registers,
            shared_memory: r.shared_memory.last().copied().unwrap_or(0),
            used_warps: 0,
            used_threads: 0,
            used_tbs: 0,
            used_registers: 0,
            used_shared_memory: 0,
            carve_outs: r.shared_memory.clone(),
            carve_out: r.carve_out,
            shares: Vec::new(),
            tlp: Vec::new(),
            changes: Changes::default(),
        }
    }

    /// Grows with every change to what the ledger holds or allows: the answer of
    /// [`SmLedger::fits_for`] for a launch stays the same until it grows (what a control
    /// that polls for room every cycle remembers, instead of asking again).
    pub fn changes(&self) -> u64 {
        self.changes.0
    }

    /// Lets `launch` hold up to `total` TBs here while it is alone (`None`: no more than
    /// the SM admits).
    pub fn set_tlp(&mut self, launch: LaunchId, total: Option<u32>) {
        self.changes.0 += 1;
        self.tlp.retain(|&(l, _)| l != launch);
        if let Some(t) = total {
            self.tlp.push((launch, t));
        }
    }

    /// Whether `launch` may take one more TB beyond the SM's own limits: it holds fewer
    /// than its TLP total, and no other launch holds anything here.
    fn fits_beyond(&self, launch: LaunchId) -> bool {
        let Some(&(_, total)) = self.tlp.iter().find(|&&(l, _)| l == launch) else {
            return false;
        };
        self.usage(launch).tbs < total
            && self
                .shares
                .iter()
                .all(|s| s.launch == launch || s.used == Usage::default())
    }

    /// Whether what is held here is within the SM's own capacities.
    pub fn within_capacity(&self) -> bool {
        self.used_tbs <= self.max_tbs
            && self.used_warps <= self.max_warps
            && self.used_threads <= self.max_threads
            && self.used_registers <= self.registers
            && self.used_shared_memory <= self.shared_memory
    }

    /// What each launch holds here and may hold, by launch.
    pub fn shares(&self) -> &[Share] {
        &self.shares
    }

    /// What `launch` holds here.
    pub fn usage(&self, launch: LaunchId) -> Usage {
        self.share(launch).map(|s| s.used).unwrap_or_default()
    }

    /// The limits of `launch` here.
    pub fn limits(&self, launch: LaunchId) -> KernelLimits {
        self.share(launch).map(|s| s.limits).unwrap_or_default()
    }

    fn share(&self, launch: LaunchId) -> Option<&Share> {
        self.shares.iter().find(|s| s.launch == launch)
    }

    fn share_mut(&mut self, launch: LaunchId) -> &mut Share {
        let i = match self.shares.iter().position(|s| s.launch == launch) {
            Some(i) => i,
            None => {
                self.shares.push(Share {
                    launch,
                    used: Usage::default(),
                    limits: KernelLimits::default(),
                });
                self.shares.len() - 1
            }
        };
        &mut self.shares[i]
    }

    /// Sets what `launch` may hold here (what it holds already stays).
    pub fn set_limits(&mut self, launch: LaunchId, limits: KernelLimits) {
        self.changes.0 += 1;
        self.share_mut(launch).limits = limits;
        self.forget_idle();
    }

    /// Drops the shares of launches that hold nothing and have no limits.
    fn forget_idle(&mut self) {
        self.shares
            .retain(|s| s.used != Usage::default() || s.limits != KernelLimits::default());
    }

    /// Whether one more TB of `launch` with demand `d` fits now, its limits included.
    pub fn fits_for(&self, launch: LaunchId, d: &TbDemand) -> bool {
        (self.fits(d) || self.fits_beyond(launch))
            && self
                .share(launch)
                .is_none_or(|s| s.used.admits(&s.limits, d, true))
    }

    /// How many more whole TBs of `launch` with demand `d` fit now, its limits included
    /// (at most the SM's TB slots: a TB that needs nothing still takes one).
    pub fn room_for(&self, launch: LaunchId, d: &TbDemand) -> u32 {
        let mut probe = self.clone();
        let mut n = 0;
        while n < self.max_tbs && probe.fits_for(launch, d) {
            probe.take_for(launch, d);
            n += 1;
        }
        n
    }

    /// Takes a whole TB of `launch` (the caller checked [`SmLedger::fits_for`]).
    pub fn take_for(&mut self, launch: LaunchId, d: &TbDemand) {
        self.changes.0 += 1;
        debug_assert!(self.fits_for(launch, d));
        self.take_unchecked(d);
        self.share_mut(launch).used.add(d, true);
    }

    /// Gives back what [`SmLedger::take_for`] took.
    pub fn give_for(&mut self, launch: LaunchId, d: &TbDemand) {
        self.changes.0 += 1;
        self.give(d);
        self.share_mut(launch).used.sub(d, true);
        self.forget_idle();
    }

    /// Takes part of a TB of `launch`, without a TB slot.
    pub fn take_part_for(&mut self, launch: LaunchId, d: &TbDemand) {
        self.changes.0 += 1;
        self.take_part(d);
        self.share_mut(launch).used.add(d, false);
    }

    /// Gives back what [`SmLedger::take_part_for`] took.
    pub fn give_part_for(&mut self, launch: LaunchId, d: &TbDemand) {
        self.changes.0 += 1;
        self.give_part(d);
        self.share_mut(launch).used.sub(d, false);
        self.forget_idle();
    }

    pub fn is_empty(&self) -> bool {
        self.used_tbs == 0
    }

    /// The shared memory the SM would offer a TB of demand `d`: the current carve-out, or,
    /// on an empty SM, the one the SM's [`CarveOut`] picks for `d` (else the largest).
    fn shared_capacity_for(&self, d: &TbDemand) -> u32 {
        // Shared memory parked by a stopped TB (in-place switching) keeps the carve-out too.
        if !self.is_empty() || self.used_shared_memory > 0 {
            return self.shared_memory;
        }
        let per = |capacity: u32, need: u32| capacity.checked_div(need).unwrap_or(u32::MAX);
        let others = per(self.max_warps, d.warps)
            .min(per(self.max_threads, d.threads))
            .min(per(self.registers, d.registers))
            .min(self.max_tbs);
        carve_out(&self.carve_outs, self.carve_out, d.shared_memory, others)
    }

    /// Whether one more TB of demand `d` fits now.
    pub fn fits(&self, d: &TbDemand) -> bool {
        self.used_tbs < self.max_tbs
            && self.used_warps + d.warps <= self.max_warps
            && self.used_threads + d.threads <= self.max_threads
            && u64::from(self.used_registers) + u64::from(d.registers) <= u64::from(self.registers)
            && u64::from(self.used_shared_memory) + u64::from(d.shared_memory)
                <= u64::from(self.shared_capacity_for(d))
    }

    /// Takes `d`'s resources (the caller checked [`SmLedger::fits`]).
    pub fn take(&mut self, d: &TbDemand) {
        self.changes.0 += 1;
        debug_assert!(self.fits(d));
        self.take_unchecked(d);
    }

    fn take_unchecked(&mut self, d: &TbDemand) {
        self.shared_memory = self.shared_capacity_for(d);
        self.used_tbs += 1;
        self.used_warps += d.warps;
        self.used_threads += d.threads;
        self.used_registers += d.registers;
        self.used_shared_memory += d.shared_memory;
    }

    /// Gives back what [`SmLedger::take`] took.
    pub fn give(&mut self, d: &TbDemand) {
        self.changes.0 += 1;
        self.used_tbs -= 1;
        self.give_part(d);
    }

    /// Whether `d` fits without a TB slot (part of a TB: registers or shared memory a
    /// stopped TB keeps in place).
    pub fn fits_part(&self, d: &TbDemand) -> bool {
        self.used_warps + d.warps <= self.max_warps
            && self.used_threads + d.threads <= self.max_threads
            && u64::from(self.used_registers) + u64::from(d.registers) <= u64::from(self.registers)
            && u64::from(self.used_shared_memory) + u64::from(d.shared_memory)
                <= u64::from(self.shared_memory)
    }

    /// Takes `d` without a TB slot.
    pub fn take_part(&mut self, d: &TbDemand) {
        self.changes.0 += 1;
        self.used_warps += d.warps;
        self.used_threads += d.threads;
        self.used_registers += d.registers;
        self.used_shared_memory += d.shared_memory;
    }

    /// Gives back what [`SmLedger::take_part`] took.
    pub fn give_part(&mut self, d: &TbDemand) {
        self.changes.0 += 1;
        self.used_warps -= d.warps;
        self.used_threads -= d.threads;
        self.used_registers -= d.registers;
        self.used_shared_memory -= d.shared_memory;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::occupancy::{Occupancy, RegisterAllocation};

    fn k20c_like() -> SmResources {
        SmResources {
            max_threads: 2048,
            max_warps: 64,
            max_tbs: 16,
            registers: 65536,
            max_registers_per_thread: 255,
            register_allocation: RegisterAllocation::Warp { unit: 256 },
            shared_memory: vec![16384, 32768, 49152],
            shared_allocation_unit: 256,
            uniform_registers: 0,
            carve_out: CarveOut::SmallestFit,
        }
    }

    fn admitted(l: &mut SmLedger, d: &TbDemand) -> u32 {
        let mut n = 0;
        while l.fits(d) {
            l.take(d);
            n += 1;
        }
        n
    }

    #[test]
    fn admits_the_occupancy_count_of_one_kernel() {
        let r = k20c_like();
        for (threads, regs, smem) in [
            (256, 32, 0),
            (128, 63, 12000),
            (1024, 20, 20000),
            (64, 8, 100),
        ] {
            let d = TbDemand::for_kernel(&r, threads, regs, smem);
            let mut l = SmLedger::new(&r);
            assert_eq!(
                admitted(&mut l, &d),
                Occupancy::of(&r, &d).tbs_per_sm,
                "{threads} threads, {regs} registers, {smem} B"
            );
        }
    }

    #[test]
    fn every_change_grows_the_count_and_equality_ignores_it() {
        let r = k20c_like();
        let d = TbDemand::for_kernel(&r, 1024, 32, 0); // half the SM: two fit
        let (a, b) = (LaunchId(0), LaunchId(1));
        let mut l = SmLedger::new(&r);
        let fresh = l.clone();
        let mut seen = l.changes();
        assert_eq!(seen, 0);
        let mut grew = |l: &SmLedger, what: &str| {
            assert!(l.changes() > seen, "{what} left the count at {seen}");
            seen = l.changes();
        };
        l.take_for(a, &d);
        grew(&l, "take_for");
        l.take_for(a, &d);
        grew(&l, "take_for");
        assert!(!l.fits_for(a, &d));
        l.give_for(a, &d);
        grew(&l, "give_for");
        assert!(l.fits_for(a, &d), "room again after the count grew");
        l.take_part_for(a, &d);
        grew(&l, "take_part_for");
        l.give_part_for(a, &d);
        grew(&l, "give_part_for");
        l.set_limits(b, KernelLimits::default());
        grew(&l, "set_limits");
        l.set_tlp(b, Some(4));
        grew(&l, "set_tlp");
        l.set_tlp(b, None);
        grew(&l, "set_tlp");
        // Dropping the TLP total again holds what it held before, one more change on.
        let before = l.clone();
        l.set_tlp(b, None);
        grew(&l, "set_tlp");
        assert_eq!(
            l, before,
            "the same holdings compare equal whatever the count"
        );
        assert_ne!(l, fresh);
    }

    #[test]
    fn kernels_share_what_is_left_and_give_it_back() {
        let r = k20c_like();
        let big = TbDemand::for_kernel(&r, 1024, 32, 0); // half the registers and warps
        let small = TbDemand::for_kernel(&r, 128, 16, 0);
        let mut l = SmLedger::new(&r);
        l.take(&big);
        assert!(
            !l.fits(&TbDemand::for_kernel(&r, 1024, 40, 0)),
            "registers left: 32K"
        );
        assert_eq!(admitted(&mut l, &small), 8, "the other 32 warps, 4 per TB");
        for _ in 0..8 {
            l.give(&small);
        }
        l.give(&big);
        assert!(l.is_empty());
        assert_eq!(l.used_registers + l.used_warps + l.used_threads, 0);
    }

    /// Two launches on one SM: each within its own limits, and both within the SM's; what
    /// one gives back is the other's to take.
    #[test]
    fn launches_are_held_to_their_limits_beside_the_sms() {
        let r = k20c_like();
        let (a, b) = (LaunchId(0), LaunchId(1));
        let d = TbDemand::for_kernel(&r, 128, 16, 0); // 4 warps, 2 048 registers
        let mut l = SmLedger::new(&r);
        l.set_limits(
            a,
            KernelLimits {
                tbs: Some(3),
                ..KernelLimits::default()
            },
        );
        l.set_limits(
            b,
            KernelLimits {
                warps: Some(24),
                ..KernelLimits::default()
            },
        );
        let admitted = |l: &mut SmLedger, k| {
            let mut n = 0;
            while l.fits_for(k, &d) {
                l.take_for(k, &d);
                n += 1;
            }
            n
        };
        assert_eq!(admitted(&mut l, a), 3, "a: at most 3 TBs");
        assert_eq!(admitted(&mut l, b), 6, "b: at most 24 warps, 4 a TB");
        assert_eq!(l.usage(a).tbs, 3);
        assert_eq!(l.usage(b).warps, 24);
        // Without limits, a third launch takes what the SM has left: 64 - 36 warps.
        assert_eq!(admitted(&mut l, LaunchId(2)), 7);
        assert!(!l.fits(&d));
        l.give_for(b, &d);
        assert!(l.fits_for(b, &d) && !l.fits_for(a, &d));
        assert_eq!(l.used_warps, 4 * (3 + 5 + 7));
    }

    #[test]
    fn an_empty_sm_takes_the_smallest_carve_out_that_fits() {
        let r = k20c_like();
        let d = TbDemand::for_kernel(&r, 64, 8, 20000);
        let mut l = SmLedger::new(&r);
        l.take(&d);
        assert_eq!(l.shared_memory, 32768);
        // A TB needing more than what the carve-out has left waits for the SM to empty.
        assert!(!l.fits(&TbDemand::for_kernel(&r, 64, 8, 16000)));
        l.give(&d);
        assert!(l.fits(&TbDemand::for_kernel(&r, 64, 8, 40000)));
    }

    /// With the Volta-and-later policy, a TB of 10,000 bytes on an SM whose other resources
    /// admit 16 TBs gets the carve-out with room for as many as it has (49,152 B: 4 TBs,
    /// where the smallest fit, 16,384 B, would hold one); the ledger admits what the
    /// occupancy calculation says.
    #[test]
    fn the_occupancy_policy_takes_the_carve_out_that_limits_least() {
        let r = SmResources {
            carve_out: CarveOut::Occupancy,
            ..k20c_like()
        };
        let d = TbDemand::for_kernel(&r, 64, 8, 10000);
        let o = Occupancy::of(&r, &d);
        assert_eq!((o.shared_memory_config, o.tbs_per_sm), (49152, 4));
        let smallest = Occupancy::of(&k20c_like(), &d);
        assert_eq!(
            (smallest.shared_memory_config, smallest.tbs_per_sm),
            (16384, 1)
        );
        let mut l = SmLedger::new(&r);
        assert_eq!(admitted(&mut l, &d), 4);
        // TBs of 1,024 threads: the warp slots admit 2, and 2 x 6,144 bytes fit the 16 KB
        // carve-out, which the policy then picks.
        let d = TbDemand::for_kernel(&r, 1024, 8, 6000);
        assert_eq!(Occupancy::of(&r, &d).shared_memory_config, 16384);
    }
}
