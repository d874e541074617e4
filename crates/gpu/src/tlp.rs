//! Thread-level parallelism beyond an SM's scheduling limits (papers/lin-thesis ch. 3): extra
//! TBs resident without all their contexts active, switched with the active ones when those
//! stall on long-latency operations.
//!
//! Two schemes, chosen per GPU (`[sm.tlp]`):
//!
//! * **Virtual Thread** (`vt`; Yoon et al., ISCA'16, as papers/lin-thesis §3.5.2 describes
//!   it): for *scheduling-limited* kernels — those whose TBs are limited by warp or TB slots
//!   while the register file and shared memory have room — the extra TBs keep their
//!   registers and shared memory in place; a switch moves only the warp-slot state (PC,
//!   reconvergence stack, scoreboard). It does nothing for capacity-limited kernels.
//! * **GPUDuet** (`gpuduet`; §3.6): the register file and shared memory form one store,
//!   and the *limiting context* of the extra TBs — the resource that cannot hold every
//!   resident TB's share — is spilled into the other's spare room, registers at their live
//!   and compressed size at the switch points (§3.6.6, "Register Context Reduction": the
//!   compiler's liveness and `regalloc::patterns`; `compression = false` for liveness
//!   alone). A kernel limited by
//!   both registers and shared memory gets no extra TB (§3.6.2). A switch moves the warp
//!   slots and the limiting context through the on-chip port (`port_bytes` per cycle,
//!   Equation 3.1; 128 bytes in the thesis, §3.7.4 varies it over 256, 128 and 64).
//!
//! [`extra_tbs`] is §3.6.4's upper bound on the number of extra TBs (ME), from the warp and
//! TB context tables (twice the warp slots — 128 entries for 64 slots — and as many TB
//! entries as TB slots), the on-chip capacity, and the configured maximum. The switching
//! itself (which TBs are active, when they swap, and what it costs) is the timed SM's
//! (`timing::sm::tlp`).
//!
//! The L1 data cache is GPUDuet's third store (§3.6.4) once the throughput monitor has
//! bypassed it (`timing::tlp_monitor`): [`extra_tbs`]'s `l1_bytes`.
//!
//! What is ours, not the thesis's: the size of a warp slot's state is 12 bytes per
//! reconvergence-stack entry (as [`crate::timing::TbContext::sizes`] counts them) and 8
//! bytes of scoreboard; a compressed context that would be no smaller than its plain size
//! is stored plain; the L1 is a store only under the monitor (a static ME has no
//! measurement of the L1's use to decide by).

use serde::{Deserialize, Serialize};

use crate::occupancy::{Occupancy, SmResources, TbDemand};

/// Which scheme raises an SM's TLP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TlpScheme {
    /// No extra TBs (the baseline).
    #[default]
    Off,
    /// Virtual Thread: warp-slot state switched, registers and shared memory in place.
    Vt,
    /// GPUDuet: context switching into spare on-chip storage, warp by warp where registers
    /// or warp slots limit the kernel, whole TBs where shared memory does.
    Gpuduet,
    /// GPUDuet with TB-level switching only (Figure 3.13's GPUDuet_TB).
    GpuduetTb,
}

impl TlpScheme {
    pub fn name(self) -> &'static str {
        match self {
            TlpScheme::Off => "off",
            TlpScheme::Vt => "vt",
            TlpScheme::Gpuduet => "gpuduet",
            TlpScheme::GpuduetTb => "gpuduet-tb",
        }
    }
}

/// `[sm.tlp]` of a GPU configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlpConfig {
    pub scheme: TlpScheme,
    /// The most extra TBs per SM (ME's upper bound before the capacity bounds; §3.7.1
    /// evaluates 1 to 4).
    pub max_extra_tbs: u32,
    /// Bytes the on-chip storage moves per core cycle during a switch (§3.6.7).
    pub port_bytes: u32,
    /// Set the extra TBs at run time from the throughput monitor (§3.6.4), up to the
    /// bound; else every launch gets the bound from its start (Figure 3.12's static ME).
    pub dynamic: bool,
    /// Size spilled register contexts with compression as well as liveness (§3.6.6,
    /// "Register Context Reduction": each live register at the compressed size the
    /// compiler proves, `regalloc::patterns`); else with liveness only.
    pub compression: bool,
}

impl Default for TlpConfig {
    fn default() -> Self {
        TlpConfig {
            scheme: TlpScheme::Off,
            max_extra_tbs: 4,
            port_bytes: 128,
            dynamic: false,
            compression: true,
        }
    }
}

/// The most `max_extra_tbs` may be: the TB context table has as many entries as TB slots,
/// and no GPU has more than 64.
pub const MAX_EXTRA_TBS: u32 = 64;

impl TlpConfig {
    pub fn is_off(&self) -> bool {
        self.scheme == TlpScheme::Off
    }

    /// The first field out of range, with why.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if !(1..=MAX_EXTRA_TBS).contains(&self.max_extra_tbs) {
            return Err((
                "sm.tlp.max_extra_tbs",
                format!("{} is out of 1..={MAX_EXTRA_TBS}", self.max_extra_tbs),
            ));
        }
        if !(1..=4096).contains(&self.port_bytes) {
            return Err((
                "sm.tlp.port_bytes",
                format!("{} is out of 1..=4096", self.port_bytes),
            ));
        }
        Ok(())
    }

    /// Core cycles a switch moving `bytes` takes (Equation 3.1), at least 1.
    pub fn switch_cycles(&self, bytes: u64) -> u64 {
        bytes.div_ceil(u64::from(self.port_bytes)).max(1)
    }
}

/// What a switch of one of a kernel's TBs moves besides its warp slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Moved {
    /// Nothing: registers and shared memory of every resident TB fit in place.
    Slots,
    /// Its live registers (they do not all fit in the register file).
    Registers,
    /// Its shared memory.
    SharedMemory,
}

/// A kernel's TBs per SM under a scheme: `native` active at once, up to `extra` more
/// resident and inactive, and what a switch moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ExtraTbs {
    pub native: u32,
    pub extra: u32,
    pub moved: Moved,
}

/// §3.6.4's bound on the extra TBs of a kernel whose TBs take `d` on an SM with `sm`'s
/// resources and occupancy `occ`, when the live registers at its switch points take
/// `live_registers` of the TB's `d.registers`. The shared-memory capacity is the carve-out
/// the kernel gets alone; `l1_bytes` more join the store where GPUDuet uses the bypassed
/// L1 data cache as its third store (0: it does not).
pub fn extra_tbs(
    cfg: &TlpConfig,
    sm: &SmResources,
    d: &TbDemand,
    occ: &Occupancy,
    live_registers: u32,
    l1_bytes: u64,
) -> ExtraTbs {
    let native = occ.tbs_per_sm;
    let none = ExtraTbs {
        native,
        extra: 0,
        moved: Moved::Slots,
    };
    if cfg.is_off() || native == 0 {
        return none;
    }
    let (rf, shared) = (u64::from(sm.registers), u64::from(occ.shared_memory_config));
    let (r, s) = (u64::from(d.registers), u64::from(d.shared_memory));
    let live = u64::from(live_registers.min(d.registers));
    // What `n` extra TBs move, if they fit.
    let fits = |n: u32| -> Option<Moved> {
        let all = u64::from(native + n);
        // The context tables: as many TB entries as TB slots, twice the warp slots (and
        // threads) in warp entries.
        if native + n > sm.max_tbs
            || all * u64::from(d.warps) > 2 * u64::from(sm.max_warps)
            || all * u64::from(d.threads) > 2 * u64::from(sm.max_threads)
        {
            return None;
        }
        let (regs_over, shared_over) = (all * r > rf, all * s > shared);
        match cfg.scheme {
            TlpScheme::Off => None,
            TlpScheme::Vt => (!regs_over && !shared_over).then_some(Moved::Slots),
            TlpScheme::Gpuduet | TlpScheme::GpuduetTb => {
                let n = u64::from(n);
                let native = u64::from(native);
                // One store of registers (4 bytes each) and shared memory (and the L1);
                // the spilled context of each extra TB takes its place in the spare room.
                let store = rf * 4 + shared + l1_bytes;
                match (regs_over, shared_over) {
                    (true, true) => None,
                    (true, false) => ((native * r + n * live) * 4 + (native + n) * s <= store)
                        .then_some(Moved::Registers),
                    (false, true) => {
                        ((native + n) * (r * 4 + s) <= store).then_some(Moved::SharedMemory)
                    }
                    (false, false) => Some(Moved::Slots),
                }
            }
        }
    };
    let mut best = none;
    for n in 1..=cfg.max_extra_tbs {
        match fits(n) {
            Some(moved) => {
                best = ExtraTbs {
                    native,
                    extra: n,
                    moved,
                }
            }
            None => break,
        }
    }
    best
}

/// What an SM's context switching logic did (`timing::sm::tlp`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TlpCounters {
    /// TBs made inactive, and made active again.
    pub switched_out: u64,
    pub switched_in: u64,
    /// Bytes the switches moved, and the cycles they took.
    pub bytes: u64,
    pub cycles: u64,
    /// The most TBs resident at once, and the most warps active at once.
    pub peak_tbs: u64,
    pub peak_active_warps: u64,
}

impl TlpCounters {
    /// Whether nothing was counted (the scheme is off).
    pub fn is_idle(&self) -> bool {
        *self == TlpCounters::default()
    }

    /// Sums counts and keeps the larger peaks (over SMs).
    pub fn add(&mut self, o: &TlpCounters) {
        self.switched_out += o.switched_out;
        self.switched_in += o.switched_in;
        self.bytes += o.bytes;
        self.cycles += o.cycles;
        self.peak_tbs = self.peak_tbs.max(o.peak_tbs);
        self.peak_active_warps = self.peak_active_warps.max(o.peak_active_warps);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::occupancy::{CarveOut, RegisterAllocation};

    /// A Maxwell SM of papers/lin-thesis Table 4.1: 64 warps, 32 TBs, 64K registers, 96 KB
    /// of shared memory.
    fn maxwell() -> SmResources {
        SmResources {
            max_threads: 2048,
            max_warps: 64,
            max_tbs: 32,
            registers: 65536,
            max_registers_per_thread: 255,
            register_allocation: RegisterAllocation::Warp { unit: 256 },
            shared_memory: vec![98304],
            shared_allocation_unit: 256,
            carve_out: CarveOut::SmallestFit,
            uniform_registers: 0,
        }
    }

    fn bound(scheme: TlpScheme, max: u32, d: TbDemand, live: u32) -> ExtraTbs {
        let sm = maxwell();
        let cfg = TlpConfig {
            scheme,
            max_extra_tbs: max,
            ..TlpConfig::default()
        };
        extra_tbs(&cfg, &sm, &d, &Occupancy::of(&sm, &d), live, 0)
    }

    fn tb(warps: u32, regs_per_thread: u32, shared: u32) -> TbDemand {
        TbDemand::for_kernel(&maxwell(), warps * 32, regs_per_thread, shared)
    }

    #[test]
    fn a_warp_slot_limited_kernel_gets_what_its_spare_registers_hold() {
        // 8 warps of 24 registers: 8 TBs by warp slots take 49,152 of 65,536 registers;
        // VT fits two more TBs in place (a third would need 67,584).
        let d = tb(8, 24, 0);
        let vt = bound(TlpScheme::Vt, 4, d, d.registers);
        assert_eq!((vt.native, vt.extra, vt.moved), (8, 2, Moved::Slots));
        // GPUDuet spills the registers of the extra TBs into spare shared memory at their
        // live size: with half of them live, the warp context table (128 entries, 16 TBs
        // of 8 warps) is what bounds it.
        let duet = bound(TlpScheme::Gpuduet, 8, d, d.registers / 2);
        assert_eq!(
            (duet.native, duet.extra, duet.moved),
            (8, 8, Moved::Registers)
        );
        // With every register live the store bounds it: 8 × 24,576 + n × 24,576 bytes of
        // registers must fit 262,144 + 98,304 bytes, so n = 6.
        let full = bound(TlpScheme::Gpuduet, 8, d, d.registers);
        assert_eq!((full.extra, full.moved), (6, Moved::Registers));
    }

    #[test]
    fn the_bypassed_l1_holds_more_spilled_contexts() {
        // The full-register case above: the store (register file and shared memory) holds
        // 6 extra TBs' registers of 24,576 bytes; a 32 KiB L1 besides makes room for
        // exactly 8 (8 × 24,576 + 8 × 24,576 = 360,448 + 32,768).
        let d = tb(8, 24, 0);
        let sm = maxwell();
        let cfg = TlpConfig {
            scheme: TlpScheme::Gpuduet,
            max_extra_tbs: 8,
            ..TlpConfig::default()
        };
        let occ = Occupancy::of(&sm, &d);
        let without = extra_tbs(&cfg, &sm, &d, &occ, d.registers, 0);
        let with = extra_tbs(&cfg, &sm, &d, &occ, d.registers, 32 * 1024);
        assert_eq!((without.extra, with.extra), (6, 8));
        assert_eq!(with.moved, Moved::Registers);
        // Nothing for VT, which spills nothing.
        let vt = TlpConfig {
            scheme: TlpScheme::Vt,
            ..cfg
        };
        assert_eq!(
            extra_tbs(&vt, &sm, &d, &occ, d.registers, 32 * 1024).extra,
            extra_tbs(&vt, &sm, &d, &occ, d.registers, 0).extra
        );
    }

    #[test]
    fn vt_gives_a_capacity_limited_kernel_nothing() {
        // 64 registers × 8 warps: 4 TBs fill the register file.
        let d = tb(8, 64, 0);
        assert_eq!(bound(TlpScheme::Vt, 4, d, d.registers).extra, 0);
        let duet = bound(TlpScheme::Gpuduet, 4, d, d.registers / 2);
        assert_eq!(duet.moved, Moved::Registers);
        assert!(duet.extra >= 1);
    }

    #[test]
    fn a_shared_memory_limited_kernel_spills_shared_memory_into_registers() {
        // 32 KB per TB: 3 TBs; registers mostly free.
        let d = tb(4, 16, 32768);
        assert_eq!(bound(TlpScheme::Vt, 4, d, d.registers).extra, 0);
        let duet = bound(TlpScheme::Gpuduet, 4, d, d.registers);
        assert_eq!((duet.native, duet.moved), (3, Moved::SharedMemory));
        assert!(duet.extra >= 1);
    }

    #[test]
    fn registers_and_shared_memory_both_limiting_get_no_extra_tb() {
        // 4 TBs by registers (8 warps × 64) and by shared memory (24 KB).
        let d = tb(8, 64, 24576);
        let duet = bound(TlpScheme::Gpuduet, 4, d, d.registers / 4);
        assert_eq!((duet.native, duet.extra), (4, 0));
    }

    #[test]
    fn the_configured_maximum_and_the_tables_bound_it() {
        let d = tb(2, 16, 0); // 32 TBs by TB slots: the TB table is full.
        assert_eq!(bound(TlpScheme::Vt, 4, d, d.registers).extra, 0);
        let d = tb(16, 16, 0); // 4 TBs by warp slots; 8 fit the warp table.
        assert_eq!(bound(TlpScheme::Vt, 2, d, d.registers).extra, 2);
        assert_eq!(bound(TlpScheme::Vt, 8, d, d.registers).extra, 4);
        assert_eq!(bound(TlpScheme::Off, 8, d, d.registers).extra, 0);
    }

    #[test]
    fn a_switch_takes_its_bytes_over_the_port() {
        let cfg = TlpConfig {
            port_bytes: 64,
            ..TlpConfig::default()
        };
        assert_eq!(cfg.switch_cycles(0), 1);
        assert_eq!(cfg.switch_cycles(128), 2);
        assert_eq!(cfg.switch_cycles(129), 3);
        assert!(TlpConfig {
            max_extra_tbs: 0,
            ..cfg
        }
        .check()
        .is_err());
    }
}
