//! Occupancy against the papers' tables.

use gpu::config::GpuConfig;
use gpu::occupancy::{Limit, Occupancy, TbDemand};
use Limit::*;

/// A row of papers/lin-lightweight Table II: (label, warps/TB, TBs/SM, Vec_reg/Warp =
/// registers per thread, Smem/TB bytes, limiting factors).
type LinRow = (&'static str, u32, u32, u32, u32, &'static [Limit]);

const LIN_TABLE_II: &[LinRow] = &[
    ("BP_1", 8, 6, 13, 1128, &[Warps]),
    ("BP_2", 8, 6, 18, 40, &[Warps, Registers]),
    ("BFS_1", 16, 3, 7, 44, &[Warps]),
    ("BFS_2", 16, 3, 4, 36, &[Warps]),
    ("BT_1", 8, 6, 10, 48, &[Warps]),
    ("BT_2", 8, 6, 9, 60, &[Warps]),
    ("CFD_1", 6, 8, 6, 32, &[Warps]),
    ("CFD_2", 6, 8, 8, 48, &[Warps, TbSlots]),
    ("CFD_3", 6, 4, 39, 36, &[Registers]),
    ("DWT_1", 8, 6, 4, 804, &[Warps]),
    ("DWT_2", 6, 5, 32, 8668, &[Registers, SharedMemory]),
    ("HW_1", 8, 4, 23, 11888, &[SharedMemory]),
    ("HS_1", 8, 4, 31, 3144, &[Registers]),
    ("HG_1", 3, 3, 10, 12324, &[SharedMemory]),
    ("KM_1", 8, 6, 9, 32, &[Warps]),
    ("LK_1", 6, 8, 18, 24, &[Warps, TbSlots]),
    ("LUD_1", 1, 8, 8, 2076, &[TbSlots]),
    ("LUD_2", 1, 8, 16, 3104, &[TbSlots]),
    ("LUD_3", 8, 6, 9, 1056, &[Warps]),
    ("SR_1", 16, 3, 14, 4132, &[Warps]),
    ("SR_2", 16, 3, 16, 128, &[Warps]),
    ("PF_1", 8, 6, 12, 2096, &[Warps]),
    ("SC_1", 16, 3, 8, 56, &[Warps]),
];

/// Rows whose limiting-factor column cannot match, and why. The TBs/SM column matches for
/// every row.
const LIN_TABLE_II_FACTOR_EXCEPTIONS: &[(&str, &[Limit], &str)] = &[
    (
        // With GPGPU-Sim's rounding (18 → 20 registers), 6 warps × 32 × 20 = 3840 registers
        // per TB allow exactly 8 TBs in 32768, so registers limit too. Without rounding they
        // would not (9 TBs) — but then BP_2 (18 registers, listed as register-limited) would
        // allow 7 TBs, not 6. One rule cannot give both rows; we keep the simulator's rule.
        "LK_1",
        &[Warps, Registers, TbSlots],
        "registers also limit at 8 TBs under GPGPU-Sim's (regs+3)&~3 rounding",
    ),
    (
        // 6 warps per TB: 48 warp slots / 6 = 8 = the 8 TB slots, so both limit. The table
        // lists "warp" here but "warp, TB" for CFD_2, which has the same warps/TB and TBs/SM
        // and is far from the register and shared-memory limits too: the table is
        // inconsistent between the two rows, and we agree with CFD_2's entry.
        "CFD_1",
        &[Warps, TbSlots],
        "same shape as CFD_2, which the table lists as warp- and TB-limited",
    ),
];

#[test]
fn gtx480_reproduces_lin_lightweight_table_ii() {
    let gpu = GpuConfig::preset("gtx480").unwrap();
    let sm = &gpu.sm.resources;
    let mut mismatched = Vec::new();
    for &(label, warps, tbs, regs, smem, factors) in LIN_TABLE_II {
        let d = TbDemand::for_kernel(sm, warps * 32, regs, smem);
        let o = Occupancy::of(sm, &d);
        assert_eq!(o.tbs_per_sm, tbs, "{label}: TBs/SM, occupancy {o:?}");
        let mut want: Vec<Limit> = factors.to_vec();
        if let Some((_, documented, _)) = LIN_TABLE_II_FACTOR_EXCEPTIONS
            .iter()
            .find(|(l, _, _)| *l == label)
        {
            want = documented.to_vec();
            mismatched.push(label);
        }
        assert_eq!(
            o.limited_by, want,
            "{label}: limiting factors, occupancy {o:?}"
        );
    }
    assert_eq!(mismatched, vec!["CFD_1", "LK_1"]);
}

/// papers/tanasic-thesis Table 5.2: (kernel, shared memory/TB, registers/TB, TBs/SM).
/// The table gives registers per TB as allocated, not threads per TB.
const TANASIC_TABLE_5_2: &[(&str, u32, u32, u32)] = &[
    ("StreamCollide", 0, 4320, 15),
    ("final", 0, 19456, 3),
    ("prescan", 4096, 9216, 4),
    ("intermediates", 0, 8964, 4),
    ("main", 24576, 16896, 1),
    ("genhists", 13312, 7680, 1),
    ("spmvjds", 0, 928, 16),
    ("ComputeQ", 0, 5376, 8),
    ("ComputePhiMag", 0, 6144, 4),
    ("largersadcalc8", 0, 3328, 16),
    ("largersadcalc16", 0, 832, 16),
    ("mbsadcalc", 2224, 2135, 7),
    ("mysgemmNT", 512, 4480, 14),
    ("block2Dregtiling", 0, 41984, 1),
    ("lattice6overlap", 4116, 3328, 3),
    ("binning", 0, 4096, 4),
    ("scaninter1", 665, 1173, 16),
    ("scanL1", 4368, 9216, 3),
    ("uniformAdd", 16, 4096, 4),
    ("reorder", 0, 8192, 4),
    ("splitSort", 4484, 10240, 3),
    ("griddingGPU", 1536, 3648, 10),
    ("splitRearrange", 4160, 5888, 3),
    ("scaninter2", 665, 1173, 16),
];

/// Kernels whose TBs/SM in the table is below what registers, shared memory and TB slots
/// allow: their limit is the thread count (2048 threads per SM), and the table does not list
/// threads per TB. For these the test checks that the other limits are indeed higher, so the
/// row is consistent with a thread limit of 2048 / (TBs/SM) threads per TB.
const THREAD_LIMITED: &[&str] = &[
    "intermediates",
    "ComputeQ",
    "ComputePhiMag",
    "binning",
    "uniformAdd",
    "reorder",
];

#[test]
fn k20c_reproduces_tanasic_table_5_2() {
    let gpu = GpuConfig::preset("k20c").unwrap();
    let sm = &gpu.sm.resources;
    for &(kernel, smem, regs_per_tb, tbs) in TANASIC_TABLE_5_2 {
        // Registers come allocated per TB; one warp stands in for the unknown TB size, so
        // the warp limit never binds here.
        let d = TbDemand {
            warps: 1,
            threads: 32,
            registers: regs_per_tb,
            shared_memory: smem.next_multiple_of(sm.shared_allocation_unit),
        };
        let o = Occupancy::of(sm, &d);
        if THREAD_LIMITED.contains(&kernel) {
            assert!(o.tbs_per_sm > tbs, "{kernel}: {o:?}");
            // The thread limit that would explain the row: a power-of-two TB size.
            let threads = 2048 / tbs;
            assert!(threads.is_power_of_two() && threads <= 1024, "{kernel}");
            let with_threads = Occupancy::of(
                sm,
                &TbDemand {
                    warps: threads / 32,
                    threads,
                    ..d
                },
            );
            assert_eq!(with_threads.tbs_per_sm, tbs, "{kernel}: {with_threads:?}");
            assert_eq!(with_threads.limited_by, vec![Warps], "{kernel}");
        } else {
            assert_eq!(o.tbs_per_sm, tbs, "{kernel}: {o:?}");
        }
    }
}

#[test]
fn kepler_picks_the_smallest_shared_memory_split_that_fits() {
    let gpu = GpuConfig::preset("k20c").unwrap();
    let sm = &gpu.sm.resources;
    let o = Occupancy::of(sm, &TbDemand::for_kernel(sm, 256, 16, 24576));
    assert_eq!(o.shared_memory_config, 32768);
    assert_eq!(o.tbs_per_sm, 1);
    let o = Occupancy::of(sm, &TbDemand::for_kernel(sm, 256, 16, 4096));
    assert_eq!(o.shared_memory_config, 16384);
    assert_eq!(o.tbs_per_sm, 4);
    assert_eq!(o.limited_by, vec![SharedMemory]);
}

#[test]
fn warp_granularity_rounds_registers_per_warp() {
    let gpu = GpuConfig::preset("v100").unwrap();
    let sm = &gpu.sm.resources;
    // 33 registers × 32 lanes = 1056 → 1280 per warp (multiple of 256).
    let d = TbDemand::for_kernel(sm, 128, 33, 0);
    assert_eq!(d.registers, 4 * 1280);
    let o = Occupancy::of(sm, &d);
    assert_eq!(o.by_registers, 65536 / 5120);
}
