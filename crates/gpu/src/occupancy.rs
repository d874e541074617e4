//! Thread-block occupancy: how many TBs of a kernel fit on one SM at once, and which
//! resource limits it.
//!
//! A TB needs warp slots, registers, shared memory and a TB slot; the SM holds as many TBs as
//! the scarcest of the four allows (papers/tanasic-thesis §5.2.3; papers/lin-lightweight
//! Table II lists the limiting factor of every kernel). Registers are allocated with a
//! granularity that differs between machines, which is configuration, not code:
//!
//! * `Thread { unit }`: registers per thread are rounded up to a multiple of `unit`, and a TB
//!   takes `threads (padded to whole warps) × rounded registers` — the rule of GPGPU-Sim 3.x,
//!   which the GTX480 studies used (`(regs + 3) & ~3`).
//! * `Warp { unit }`: each warp takes `registers per thread × 32` rounded up to a multiple of
//!   `unit` (256 on Kepler and later, as NVIDIA's occupancy calculator documents).
//!
//! Shared memory per TB is rounded up to `shared_allocation_unit`. Where an SM offers several
//! shared-memory carve-outs, [`CarveOut`] says which one a kernel gets: on Kepler the
//! smallest that fits one TB (papers/tanasic-thesis Table 5.1, footnote 2); from Volta on
//! the driver picks one that does not limit occupancy (the CUDA C++ Programming Guide, on
//! compute capabilities 7.x, 8.x and 9.x: the driver configures the shared memory capacity
//! "to avoid shared memory occupancy bottlenecks").

use serde::{Deserialize, Serialize};

/// Warp size in threads (fixed by PTX).
pub const WARP_SIZE: u32 = 32;

/// How registers are allocated to a TB.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "granularity", rename_all = "snake_case", deny_unknown_fields)]
pub enum RegisterAllocation {
    /// Registers per thread rounded up to a multiple of `unit`.
    Thread { unit: u32 },
    /// Registers per warp rounded up to a multiple of `unit`.
    Warp { unit: u32 },
}

/// How an SM with several shared-memory carve-outs picks one for a kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CarveOut {
    /// The smallest carve-out that fits one TB (Kepler, and GPGPU-Sim's studies).
    #[default]
    SmallestFit,
    /// The smallest carve-out with room for as many TBs as the SM's warp slots, registers
    /// and TB slots allow (else the largest): shared memory does not limit occupancy where
    /// the SM has enough (Volta and later).
    Occupancy,
}

/// The shared memory (bytes) of the carve-out `policy` picks among `carve_outs` (smallest
/// first) for TBs of `shared` bytes each when the SM's other resources admit `others` TBs.
pub fn carve_out(carve_outs: &[u32], policy: CarveOut, shared: u32, others: u32) -> u32 {
    let want = match policy {
        CarveOut::SmallestFit => u64::from(shared),
        CarveOut::Occupancy => u64::from(shared) * u64::from(others.max(1)),
    };
    carve_outs
        .iter()
        .copied()
        .find(|&c| u64::from(c) >= want)
        .or_else(|| carve_outs.last().copied())
        .unwrap_or(0)
}

/// The per-SM resources that bound occupancy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmResources {
    /// Resident threads per SM.
    pub max_threads: u32,
    /// Resident warps per SM (warp slots).
    pub max_warps: u32,
    /// Resident TBs per SM (TB slots).
    pub max_tbs: u32,
    /// 32-bit registers per SM.
    pub registers: u32,
    /// Largest register count one thread may use.
    pub max_registers_per_thread: u32,
    pub register_allocation: RegisterAllocation,
    /// Shared-memory carve-outs in bytes, smallest first (`carve_out` says which a kernel
    /// gets). A single entry for a fixed size.
    pub shared_memory: Vec<u32>,
    /// How a carve-out is picked (default: the smallest that fits one TB).
    #[serde(default)]
    pub carve_out: CarveOut,
    /// Shared memory is allocated to a TB in multiples of this many bytes.
    pub shared_allocation_unit: u32,
    /// Uniform registers per warp (NVIDIA Turing and later have 63, `UR0`–`UR62`): the
    /// register allocator keeps values every lane of a warp holds alike there, outside the
    /// per-thread count, and CTXBack's on-chip scalar register backup (papers/ji-ctxback
    /// §III-D, which AMD GCN's scalar registers serve in the paper) copies into the unused
    /// ones. 0 (the default, and every preset's): every value in vector registers, as the
    /// timing model has always allocated.
    #[serde(default)]
    pub uniform_registers: u32,
}

/// What one TB of a kernel takes, after allocation granularity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TbDemand {
    pub warps: u32,
    pub threads: u32,
    /// Registers allocated to the whole TB.
    pub registers: u32,
    /// Shared memory allocated to the TB, in bytes.
    pub shared_memory: u32,
}

impl TbDemand {
    /// The demand of a TB of `threads` threads using `regs_per_thread` registers and
    /// `smem` bytes of shared memory (static plus dynamic), on an SM with `sm`'s granularity.
    pub fn for_kernel(sm: &SmResources, threads: u32, regs_per_thread: u32, smem: u32) -> TbDemand {
        let warps = threads.div_ceil(WARP_SIZE);
        let registers = match sm.register_allocation {
            RegisterAllocation::Thread { unit } => {
                warps * WARP_SIZE * regs_per_thread.next_multiple_of(unit.max(1))
            }
            RegisterAllocation::Warp { unit } => {
                warps * (regs_per_thread * WARP_SIZE).next_multiple_of(unit.max(1))
            }
        };
        TbDemand {
            warps,
            threads,
            registers,
            shared_memory: smem.next_multiple_of(sm.shared_allocation_unit.max(1)),
        }
    }
}

/// A resource that can limit occupancy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// Warp slots (or resident threads).
    Warps,
    Registers,
    SharedMemory,
    /// TB slots.
    TbSlots,
}

/// The result of an occupancy calculation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Occupancy {
    /// TBs that fit on one SM at once (0: the kernel cannot run on this SM).
    pub tbs_per_sm: u32,
    /// Every resource whose own limit equals `tbs_per_sm`.
    pub limited_by: Vec<Limit>,
    /// The limit each resource imposes alone.
    pub by_warps: u32,
    pub by_registers: u32,
    pub by_shared_memory: u32,
    pub by_tb_slots: u32,
    /// The shared-memory carve-out chosen, in bytes.
    pub shared_memory_config: u32,
    /// Resident warps at full occupancy.
    pub warps_per_sm: u32,
}

impl Occupancy {
    /// Occupancy of TBs with demand `d` on an SM with resources `sm`.
    pub fn of(sm: &SmResources, d: &TbDemand) -> Occupancy {
        let per = |capacity: u32, need: u32| capacity.checked_div(need).unwrap_or(u32::MAX);
        let by_warps = per(sm.max_warps, d.warps).min(per(sm.max_threads, d.threads));
        let by_registers = per(sm.registers, d.registers);
        let by_tb_slots = sm.max_tbs;
        let others = by_warps.min(by_registers).min(by_tb_slots);
        let shared_memory_config =
            carve_out(&sm.shared_memory, sm.carve_out, d.shared_memory, others);
        let by_shared_memory = per(shared_memory_config, d.shared_memory);
        let tbs = by_warps
            .min(by_registers)
            .min(by_shared_memory)
            .min(by_tb_slots);
        let mut limited_by = Vec::new();
        for (limit, value) in [
            (Limit::Warps, by_warps),
            (Limit::Registers, by_registers),
            (Limit::SharedMemory, by_shared_memory),
            (Limit::TbSlots, by_tb_slots),
        ] {
            if value == tbs {
                limited_by.push(limit);
            }
        }
        Occupancy {
            tbs_per_sm: tbs,
            limited_by,
            by_warps,
            by_registers,
            by_shared_memory,
            by_tb_slots,
            shared_memory_config,
            warps_per_sm: tbs * d.warps,
        }
    }
}
