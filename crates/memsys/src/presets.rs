//! Configurations of the GPUs the papers evaluated on.
//!
//! Each function returns a [`MemConfig`] filled from the paper's configuration table where it
//! gives a value; every other value is an assumption named in the function's documentation
//! (mostly GPGPU-Sim v3.x defaults for that generation, since every paper ran GPGPU-Sim or a
//! simulator calibrated the same way).

use crate::cache::{CacheSpec, WritePolicy};
use crate::clock::ClockSpec;
use crate::dram::DramSpec;
use crate::icnt::IcntSpec;
use crate::system::{AddressHash, AddressMapping, MemConfig, SharedMemSpec};

fn cache(
    size_kib: u64,
    assoc: u32,
    sector_bytes: u64,
    mshrs: u32,
    merge: u32,
    latency: u64,
    write_policy: WritePolicy,
) -> CacheSpec {
    CacheSpec {
        size_bytes: size_kib * 1024,
        assoc,
        line_bytes: 128,
        sector_bytes,
        mshr_entries: mshrs,
        mshr_max_merge: merge,
        hit_latency: latency,
        write_policy,
    }
}

fn icnt(latency: u64) -> IcntSpec {
    IcntSpec {
        flit_bytes: 32,
        header_bytes: 8,
        flits_per_cycle: 1,
        latency,
        input_buffer: 16,
        output_buffer: 16,
    }
}

/// NVIDIA GTX480 (Fermi), papers/lin-lightweight Table I: 15 SMs at 700 MHz; L1 16 KB per SM,
/// 128 B blocks; L2 128 KB per channel, 6 channels; GDDR5 at 924 MHz, QDR, 384-bit bus
/// (177 GB/s); shared memory 48 KB.
///
/// Assumptions (GPGPU-Sim 3.x `GTX480` configuration): interconnect and L2 at 700 MHz; L1 4-way,
/// non-sectored, 32 MSHRs × 8 merges, write-evict, 20-cycle hits; constant cache 8 KB 2-way;
/// two 64 KB 8-way L2 slices per channel with 32 B sectors, 32 MSHRs × 4, a 120-cycle pipeline
/// (GPGPU-Sim's ROP latency); 32 B flits, 8-cycle network latency; DRAM 16 banks, 2 KB rows,
/// tRCD = tCL = tRP = 12, tRAS = 28, a 16-entry FR-FCFS queue, 64-bit channels moving 32 B per
/// cycle, and 100 cycles of controller latency (GPGPU-Sim's `dram_latency`).
pub fn gtx480() -> MemConfig {
    MemConfig {
        num_sms: 15,
        line_bytes: 128,
        clocks: ClockSpec {
            core_mhz: 700.0,
            icnt_mhz: 700.0,
            l2_mhz: 700.0,
            dram_mhz: 924.0,
        },
        l1: cache(16, 4, 128, 32, 8, 20, WritePolicy::WriteEvict),
        const_cache: cache(8, 2, 128, 8, 8, 20, WritePolicy::WriteEvict),
        l1_lines_per_cycle: 1,
        l1_fills_per_cycle: 1,
        max_outstanding_accesses: 64,
        shared: SharedMemSpec {
            size_bytes: 48 * 1024,
            banks: 32,
            bank_bytes: 4,
            latency: 24,
        },
        icnt_request: icnt(8),
        icnt_reply: icnt(8),
        l2_slices: 12,
        l2: cache(64, 8, 32, 32, 4, 120, WritePolicy::WriteBackAllocate),
        l2_input_queue: 128,
        l2_reply_queue: 16,
        l2_dram_queue: 16,
        dram_channels: 6,
        dram: DramSpec {
            banks: 16,
            row_bytes: 2048,
            queue_entries: 16,
            t_rcd: 12,
            t_cl: 12,
            t_rp: 12,
            t_ras: 28,
            bus_bytes_per_cycle: 32,
            controller_latency: 100,
        },
        mapping: AddressMapping {
            interleave_bytes: 256,
            hash: AddressHash::Fold,
        },
    }
}

/// NVIDIA GTX980 (Maxwell GM204), papers/li-pep Table 2: 16 SMs at 1216 MHz, memory clock
/// 7 GHz (effective), 4 memory controllers, 96 KB shared memory.
///
/// Assumptions: 64-bit channels, so the DRAM command clock is 1750 MHz moving 32 B per cycle
/// (224 GB/s, the product specification); 2 MB L2 (product specification) as 8 slices of
/// 256 KB, 16-way, 32 B sectors, 64 MSHRs × 8, pipeline 100 cycles; interconnect and L2 at the
/// core clock; L1 24 KB 6-way sectored, 64 MSHRs × 8, 28-cycle hits; GDDR5 timings scaled from
/// GTX480 to the faster clock (tRCD = tCL = tRP = 20, tRAS = 45), 16 banks, 2 KB rows, a
/// 64-entry queue, 120 cycles of controller latency.
pub fn gtx980() -> MemConfig {
    MemConfig {
        num_sms: 16,
        line_bytes: 128,
        clocks: ClockSpec {
            core_mhz: 1216.0,
            icnt_mhz: 1216.0,
            l2_mhz: 1216.0,
            dram_mhz: 1750.0,
        },
        l1: cache(24, 6, 32, 64, 8, 28, WritePolicy::WriteEvict),
        const_cache: cache(8, 2, 128, 8, 8, 20, WritePolicy::WriteEvict),
        l1_lines_per_cycle: 1,
        l1_fills_per_cycle: 1,
        max_outstanding_accesses: 64,
        shared: SharedMemSpec {
            size_bytes: 96 * 1024,
            banks: 32,
            bank_bytes: 4,
            latency: 24,
        },
        icnt_request: icnt(8),
        icnt_reply: icnt(8),
        l2_slices: 8,
        l2: cache(256, 16, 32, 64, 8, 100, WritePolicy::WriteBackAllocate),
        l2_input_queue: 128,
        l2_reply_queue: 16,
        l2_dram_queue: 32,
        dram_channels: 4,
        dram: DramSpec {
            banks: 16,
            row_bytes: 2048,
            queue_entries: 64,
            t_rcd: 20,
            t_cl: 20,
            t_rp: 20,
            t_ras: 45,
            bus_bytes_per_cycle: 32,
            controller_latency: 120,
        },
        mapping: AddressMapping {
            interleave_bytes: 256,
            hash: AddressHash::Fold,
        },
    }
}

/// NVIDIA K20c-like Kepler, papers/tanasic-thesis Table 5.1: 13 SMs at 706 MHz, 208 GB/s,
/// shared memory 16 KB by default (of 16/32/48 KB).
///
/// Assumptions: five 64-bit GDDR5 channels at a 1300 MHz command clock moving 32 B per cycle
/// (5 × 32 B × 1.3 GHz = 208 GB/s, matching the table); 1.25 MB L2 (product specification) as
/// 10 slices of 128 KB, 16-way, 32 B sectors, 32 MSHRs × 4, pipeline 120 cycles; L1 48 KB (the
/// rest of the 64 KB array when shared memory is 16 KB), 6-way, 32 MSHRs × 8; interconnect and
/// L2 at the core clock; DRAM as GTX480 with tRCD = tCL = tRP = 16, tRAS = 36.
pub fn k20c() -> MemConfig {
    MemConfig {
        num_sms: 13,
        line_bytes: 128,
        clocks: ClockSpec {
            core_mhz: 706.0,
            icnt_mhz: 706.0,
            l2_mhz: 706.0,
            dram_mhz: 1300.0,
        },
        l1: cache(48, 6, 128, 32, 8, 20, WritePolicy::WriteEvict),
        const_cache: cache(8, 2, 128, 8, 8, 20, WritePolicy::WriteEvict),
        l1_lines_per_cycle: 1,
        l1_fills_per_cycle: 1,
        max_outstanding_accesses: 64,
        shared: SharedMemSpec {
            size_bytes: 16 * 1024,
            banks: 32,
            bank_bytes: 4,
            latency: 24,
        },
        icnt_request: icnt(8),
        icnt_reply: icnt(8),
        l2_slices: 10,
        l2: cache(128, 16, 32, 32, 4, 120, WritePolicy::WriteBackAllocate),
        l2_input_queue: 128,
        l2_reply_queue: 16,
        l2_dram_queue: 16,
        dram_channels: 5,
        dram: DramSpec {
            banks: 16,
            row_bytes: 2048,
            queue_entries: 32,
            t_rcd: 16,
            t_cl: 16,
            t_rp: 16,
            t_ras: 36,
            bus_bytes_per_cycle: 32,
            controller_latency: 100,
        },
        mapping: AddressMapping {
            interleave_bytes: 256,
            hash: AddressHash::Fold,
        },
    }
}

/// Maxwell-like 16-SM GPU, papers/lin-thesis Table 4.1: 16 SMs at 1800 MHz; L1 24 KB, 128 B
/// blocks, 8-way, 256 MSHRs; 96 KB shared memory; two 16×16 crossbars, 32 B flits, 1.2 GHz;
/// 16 L2 banks of 128 KB, 128 B blocks, 8-way, 256 MSHRs, write-back write-allocate; DRAM at
/// 1200 MHz, FR-FCFS, 128 queue entries, 16 chips; "L2 cache latency: 200 cycles, DRAM
/// latency: 380 cycles".
///
/// Assumptions: the two latencies are the unloaded round trips an SM sees, in core cycles (as
/// the cited microbenchmarks [MC16] report them); the L2 pipeline (110 L2 cycles at 1.2 GHz)
/// and the DRAM controller latency (84 DRAM cycles) are chosen so the model reproduces them
/// (checked by a test). One 16 B-per-cycle channel per L2 bank: 16 × 16 B × 1.2 GHz = 307 GB/s
/// (the table says 319 GB/s; its Table 3.1 twin says 307 GB/s). L2 clock = interconnect clock;
/// 32 B sectors in both caches; MSHR merge limit 8; L1 hit 28 cycles; DRAM 16 banks, 2 KB rows,
/// tRCD = tCL = tRP = 12, tRAS = 28.
pub fn maxwell16() -> MemConfig {
    MemConfig {
        num_sms: 16,
        line_bytes: 128,
        clocks: ClockSpec {
            core_mhz: 1800.0,
            icnt_mhz: 1200.0,
            l2_mhz: 1200.0,
            dram_mhz: 1200.0,
        },
        l1: cache(24, 8, 32, 256, 8, 28, WritePolicy::WriteEvict),
        const_cache: cache(8, 2, 128, 8, 8, 20, WritePolicy::WriteEvict),
        l1_lines_per_cycle: 1,
        l1_fills_per_cycle: 1,
        max_outstanding_accesses: 128,
        shared: SharedMemSpec {
            size_bytes: 96 * 1024,
            banks: 32,
            bank_bytes: 4,
            latency: 24,
        },
        icnt_request: icnt(8),
        icnt_reply: icnt(8),
        l2_slices: 16,
        l2: cache(128, 8, 32, 256, 8, 110, WritePolicy::WriteBackAllocate),
        l2_input_queue: 128,
        l2_reply_queue: 16,
        l2_dram_queue: 32,
        dram_channels: 16,
        dram: DramSpec {
            banks: 16,
            row_bytes: 2048,
            queue_entries: 128,
            t_rcd: 12,
            t_cl: 12,
            t_rp: 12,
            t_ras: 28,
            bus_bytes_per_cycle: 16,
            controller_latency: 84,
        },
        mapping: AddressMapping {
            interleave_bytes: 256,
            hash: AddressHash::Fold,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_validate_and_match_tables() {
        for c in [gtx480(), gtx980(), k20c(), maxwell16()] {
            c.validate().unwrap();
        }
        // lin-lightweight Table I: 177 GB/s; L2 128 KB per channel.
        let g = gtx480();
        assert!((g.dram_peak_bytes_per_s() / 1e9 - 177.4).abs() < 0.5);
        assert_eq!(
            g.l2.size_bytes * g.l2_slices as u64 / g.dram_channels as u64,
            128 * 1024
        );
        // tanasic-thesis Table 5.1: 208 GB/s.
        assert!((k20c().dram_peak_bytes_per_s() / 1e9 - 208.0).abs() < 0.5);
        // GTX980: 7 GHz effective × 256 bit = 224 GB/s.
        assert!((gtx980().dram_peak_bytes_per_s() / 1e9 - 224.0).abs() < 0.5);
        assert_eq!(maxwell16().l2.size_bytes, 128 * 1024);
    }
}
