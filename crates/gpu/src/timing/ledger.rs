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

use serde::Serialize;

use crate::occupancy::{carve_out, CarveOut, SmResources, TbDemand};

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
}

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
        }
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
        debug_assert!(self.fits(d));
        self.shared_memory = self.shared_capacity_for(d);
        self.used_tbs += 1;
        self.used_warps += d.warps;
        self.used_threads += d.threads;
        self.used_registers += d.registers;
        self.used_shared_memory += d.shared_memory;
    }

    /// Gives back what [`SmLedger::take`] took.
    pub fn give(&mut self, d: &TbDemand) {
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
        self.used_warps += d.warps;
        self.used_threads += d.threads;
        self.used_registers += d.registers;
        self.used_shared_memory += d.shared_memory;
    }

    /// Gives back what [`SmLedger::take_part`] took.
    pub fn give_part(&mut self, d: &TbDemand) {
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
