//! Counters of a timed launch (serializable to JSON; DESIGN.md §1.6).

use memsys::{MemConfig, MemStats};
use serde::Serialize;

use crate::occupancy::Occupancy;
use crate::tlp::TlpCounters;

/// Why a warp scheduler issued nothing in a cycle. When several warps are blocked for
/// different reasons the cycle is charged to the warp closest to issuing, in the order
/// `PipelineBusy` > `Scoreboard` > `Memory` > `Barrier` > `Fetch` > `NoWarp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum StallReason {
    /// The scheduler has no resident, unfinished warp.
    NoWarp,
    /// No instruction: the warp's instruction buffer is empty while its next instructions
    /// are fetched (after a branch, or when it has issued what the buffer held).
    Fetch,
    /// Every warp waits at a barrier.
    Barrier,
    /// Waiting for a load's data, or the memory system refused the access (L1 port, MSHRs,
    /// outstanding accesses, interconnect queue).
    Memory,
    /// Waiting for an arithmetic result (RAW/WAW on a register written by a non-memory op).
    Scoreboard,
    /// The functional unit the next instruction needs is busy (initiation interval).
    PipelineBusy,
}

/// What one warp scheduler did in one cycle (what [`super::Probe::on_sm_cycle`]
/// hears).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedulerCycle {
    Issued,
    Stalled(StallReason),
}

/// One warp scheduler's cycles: every cycle is either an issue or exactly one stall.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SchedulerStats {
    pub issued: u64,
    pub no_warp: u64,
    pub fetch: u64,
    pub barrier: u64,
    pub memory: u64,
    pub scoreboard: u64,
    pub pipeline_busy: u64,
}

impl SchedulerStats {
    /// Counts one cycle.
    #[inline]
    pub fn count(&mut self, c: SchedulerCycle) {
        self.count_n(c, 1);
    }

    /// Counts `n` cycles that did `c`.
    #[inline]
    pub fn count_n(&mut self, c: SchedulerCycle, n: u64) {
        match c {
            SchedulerCycle::Issued => self.issued += n,
            SchedulerCycle::Stalled(r) => match r {
                StallReason::NoWarp => self.no_warp += n,
                StallReason::Fetch => self.fetch += n,
                StallReason::Barrier => self.barrier += n,
                StallReason::Memory => self.memory += n,
                StallReason::Scoreboard => self.scoreboard += n,
                StallReason::PipelineBusy => self.pipeline_busy += n,
            },
        }
    }

    #[inline]
    pub fn stall(&mut self, r: StallReason) {
        self.count_n(SchedulerCycle::Stalled(r), 1);
    }

    pub fn add(&mut self, o: &SchedulerStats) {
        self.issued += o.issued;
        self.no_warp += o.no_warp;
        self.fetch += o.fetch;
        self.barrier += o.barrier;
        self.memory += o.memory;
        self.scoreboard += o.scoreboard;
        self.pipeline_busy += o.pipeline_busy;
    }

    /// The counts between the snapshot `e` and `self`.
    pub fn since(&self, e: &SchedulerStats) -> SchedulerStats {
        SchedulerStats {
            issued: self.issued - e.issued,
            no_warp: self.no_warp - e.no_warp,
            fetch: self.fetch - e.fetch,
            barrier: self.barrier - e.barrier,
            memory: self.memory - e.memory,
            scoreboard: self.scoreboard - e.scoreboard,
            pipeline_busy: self.pipeline_busy - e.pipeline_busy,
        }
    }

    /// Cycles accounted for (issues plus stalls).
    pub fn cycles(&self) -> u64 {
        self.issued
            + self.no_warp
            + self.fetch
            + self.barrier
            + self.memory
            + self.scoreboard
            + self.pipeline_busy
    }
}

/// Counters of the instruction front end and the operand collector, summed over SMs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FrontendStats {
    /// Instruction-buffer fills (each through the i-cache).
    pub fetches: u64,
    pub icache_misses: u64,
    /// Cycles instructions waited for register-bank ports beyond the conflict-free read,
    /// summed over instructions.
    pub operand_conflict_cycles: u64,
    /// With a pipeline organisation that disables warps (`memsys::Pipeline::WdCommit`,
    /// `WdLastcheck`): memory instructions that disabled their warp, and the cycles warps
    /// spent disabled, summed over warps. Written out only when not zero.
    #[serde(skip_serializing_if = "is_zero")]
    pub warp_disables: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub disabled_cycles: u64,
    /// With the replay queue (`memsys::Pipeline::ReplayQueue`): memory instructions whose
    /// source registers were held against overwriting until their last TLB check. Written
    /// out only when not zero.
    #[serde(skip_serializing_if = "is_zero")]
    pub source_holds: u64,
    /// With a pipeline that replays (`memsys::Pipeline::squashes`): warps that replayed
    /// after their faults were serviced, and the memory instructions they replayed.
    /// Written out only when not zero.
    #[serde(skip_serializing_if = "is_zero")]
    pub replays: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub replayed_instructions: u64,
    /// With the operand log (`memsys::Pipeline::OperandLog`): memory instructions that
    /// could not issue for want of log space (one per try), and the log's peak occupancy
    /// in bytes (the largest of any SM). Written out only when not zero.
    #[serde(skip_serializing_if = "is_zero")]
    pub log_full_stalls: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub log_peak_bytes: u64,
    /// TB switching on fault (`memsys::TbSwitch`, papers/tanasic-thesis §6.4.1): TBs
    /// switched out, switched-out TBs switched back in, the cycles contexts spent moving
    /// (saves and restores, summed), and the most TBs switched out and not yet resumed on
    /// one SM at once (the largest of any SM). Written out only when not zero, so only
    /// with switching on.
    #[serde(skip_serializing_if = "is_zero")]
    pub tbs_switched_out: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub tbs_switched_in: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub switch_cycles: u64,
    #[serde(skip_serializing_if = "is_zero")]
    pub switched_out_peak: u64,
    /// Extra TBs beyond the scheduling limits (`crate::tlp`, papers/lin-thesis ch. 3): TBs
    /// made inactive and active again, the bytes and cycles of the switches (summed), the
    /// most TBs resident and warps active on one SM at once (the largest of any SM).
    /// Written out only with `[sm.tlp]` on.
    #[serde(skip_serializing_if = "TlpCounters::is_idle")]
    pub tlp: TlpCounters,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn is_zero32(v: &u32) -> bool {
    *v == 0
}

impl FrontendStats {
    pub fn add(&mut self, o: &FrontendStats) {
        self.fetches += o.fetches;
        self.icache_misses += o.icache_misses;
        self.operand_conflict_cycles += o.operand_conflict_cycles;
        self.warp_disables += o.warp_disables;
        self.disabled_cycles += o.disabled_cycles;
        self.source_holds += o.source_holds;
        self.replays += o.replays;
        self.replayed_instructions += o.replayed_instructions;
        self.log_full_stalls += o.log_full_stalls;
        self.log_peak_bytes = self.log_peak_bytes.max(o.log_peak_bytes);
        self.tbs_switched_out += o.tbs_switched_out;
        self.tbs_switched_in += o.tbs_switched_in;
        self.switch_cycles += o.switch_cycles;
        self.switched_out_peak = self.switched_out_peak.max(o.switched_out_peak);
        self.tlp.add(&o.tlp);
    }

    /// The counts between the snapshot `e` and `self`.
    pub fn since(&self, e: &FrontendStats) -> FrontendStats {
        FrontendStats {
            fetches: self.fetches - e.fetches,
            icache_misses: self.icache_misses - e.icache_misses,
            operand_conflict_cycles: self.operand_conflict_cycles - e.operand_conflict_cycles,
            warp_disables: self.warp_disables - e.warp_disables,
            disabled_cycles: self.disabled_cycles - e.disabled_cycles,
            source_holds: self.source_holds - e.source_holds,
            replays: self.replays - e.replays,
            replayed_instructions: self.replayed_instructions - e.replayed_instructions,
            log_full_stalls: self.log_full_stalls - e.log_full_stalls,
            // A peak is not a difference: the peak so far.
            log_peak_bytes: self.log_peak_bytes,
            tbs_switched_out: self.tbs_switched_out - e.tbs_switched_out,
            tbs_switched_in: self.tbs_switched_in - e.tbs_switched_in,
            switch_cycles: self.switch_cycles - e.switch_cycles,
            switched_out_peak: self.switched_out_peak,
            tlp: TlpCounters {
                switched_out: self.tlp.switched_out - e.tlp.switched_out,
                switched_in: self.tlp.switched_in - e.tlp.switched_in,
                bytes: self.tlp.bytes - e.tlp.bytes,
                cycles: self.tlp.cycles - e.tlp.cycles,
                ..self.tlp
            },
        }
    }
}

/// One SM's counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SmStats {
    /// Cycles with at least one resident TB.
    pub active_cycles: u64,
    pub tbs: u64,
    pub warp_instructions: u64,
    /// Sum over cycles of the warps resident on the SM (warp slots held by resident TBs).
    pub resident_warp_cycles: u64,
    /// Per warp scheduler.
    pub schedulers: Vec<SchedulerStats>,
    pub frontend: FrontendStats,
}

impl SmStats {
    /// The counts between the snapshot `e` and `self`.
    pub fn since(&self, e: &SmStats) -> SmStats {
        SmStats {
            active_cycles: self.active_cycles - e.active_cycles,
            tbs: self.tbs - e.tbs,
            warp_instructions: self.warp_instructions - e.warp_instructions,
            resident_warp_cycles: self.resident_warp_cycles - e.resident_warp_cycles,
            schedulers: self
                .schedulers
                .iter()
                .zip(&e.schedulers)
                .map(|(a, b)| a.since(b))
                .collect(),
            frontend: self.frontend.since(&e.frontend),
        }
    }
}

/// Resident warps over the whole GPU, sampled every `interval` core cycles (sample `k` is
/// taken at the end of cycle `k × interval`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OccupancyTrace {
    pub interval: u64,
    pub warps: Vec<u32>,
}

/// How busy a kernel keeps the GPU's throughput resources, papers/lin-thesis §3.4.1, with its
/// class by Table 3.3.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Utilisation {
    /// Issued instructions over scheduler cycles (cycles × schedulers per SM × SMs).
    pub scheduler: f64,
    /// L1 data-port use: hits over the lines the L1 tag ports could serve (the data port is
    /// busy for one cycle per hit, reading a whole line; §3.4.1 counts hits only).
    pub l1: f64,
    /// Interconnect throughput over the *sustainable* throughput, 60% of peak (§3.4.1: output
    /// contention caps a crossbar at about 60%), per direction: flits moved over
    /// `0.6 × inputs × flits_per_cycle × cycles`, the inputs being the SMs (requests) and the
    /// L2 slices (replies). May exceed 1 when the traffic pattern avoids contention.
    pub icnt_request: f64,
    pub icnt_reply: f64,
    /// L2 data-port use: hits over slice cycles (one access per L2 cycle per slice).
    pub l2: f64,
    /// DRAM data-bus busy cycles over channel cycles.
    pub dram: f64,
    pub class: UtilisationClass,
}

/// papers/lin-thesis Table 3.3.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UtilisationClass {
    /// Scheduler < 60%, interconnect < 60%, DRAM < 50%, L1 < 60% and L2 < 60%.
    #[default]
    Underutilised,
    /// Neither of the others.
    Moderate,
    /// Scheduler > 80%, interconnect > 90%, DRAM > 70%, L1 > 80% or L2 > 80%.
    Saturated,
}

/// lin-thesis §3.4.1: "at most 60% of the peak bandwidth can be achieved".
pub const SUSTAINABLE_ICNT_FRACTION: f64 = 0.6;

fn ratio(n: u64, d: f64) -> f64 {
    if d > 0.0 {
        n as f64 / d
    } else {
        0.0
    }
}

/// The counts a [`Utilisation`] is computed from; counts of several intervals add up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UtilisationCounts {
    pub core_cycles: u64,
    pub issued: u64,
    pub scheduler_cycles: u64,
    pub l1_hits: u64,
    pub icnt_cycles: u64,
    pub icnt_request_flits: u64,
    pub icnt_reply_flits: u64,
    pub l2_hits: u64,
    pub l2_cycles: u64,
    pub dram_busy_cycles: u64,
    pub dram_cycles: u64,
}

impl UtilisationCounts {
    pub fn of(sched: &SchedulerStats, mem: &MemStats) -> UtilisationCounts {
        UtilisationCounts {
            core_cycles: mem.core_cycles,
            issued: sched.issued,
            scheduler_cycles: sched.cycles(),
            l1_hits: mem.l1_total.hits,
            icnt_cycles: mem.icnt_cycles,
            icnt_request_flits: mem.icnt_request.flits,
            icnt_reply_flits: mem.icnt_reply.flits,
            l2_hits: mem.l2_total.hits,
            l2_cycles: mem.l2_cycles,
            dram_busy_cycles: mem.dram_total.bus_busy_cycles,
            dram_cycles: mem.dram_total.cycles,
        }
    }

    pub fn add(&mut self, o: &UtilisationCounts) {
        self.core_cycles += o.core_cycles;
        self.issued += o.issued;
        self.scheduler_cycles += o.scheduler_cycles;
        self.l1_hits += o.l1_hits;
        self.icnt_cycles += o.icnt_cycles;
        self.icnt_request_flits += o.icnt_request_flits;
        self.icnt_reply_flits += o.icnt_reply_flits;
        self.l2_hits += o.l2_hits;
        self.l2_cycles += o.l2_cycles;
        self.dram_busy_cycles += o.dram_busy_cycles;
        self.dram_cycles += o.dram_cycles;
    }
}

impl Utilisation {
    /// The utilisations of a run of `cycles` core cycles with `schedulers` issue slots summed.
    pub fn of(sched: &SchedulerStats, mem: &MemStats, cfg: &MemConfig) -> Utilisation {
        Utilisation::of_counts(&UtilisationCounts::of(sched, mem), cfg)
    }

    /// The utilisations of the intervals `c` counts.
    pub fn of_counts(c: &UtilisationCounts, cfg: &MemConfig) -> Utilisation {
        let cycles = c.core_cycles.max(1) as f64;
        let sms = cfg.num_sms as f64;
        let icnt = |flits: u64, inputs: usize, spec: &memsys::IcntSpec| {
            let peak = inputs as f64 * f64::from(spec.flits_per_cycle) * c.icnt_cycles as f64;
            ratio(flits, SUSTAINABLE_ICNT_FRACTION * peak)
        };
        let mut u = Utilisation {
            scheduler: ratio(c.issued, c.scheduler_cycles as f64),
            l1: ratio(c.l1_hits, cycles * sms * f64::from(cfg.l1_lines_per_cycle)),
            icnt_request: icnt(c.icnt_request_flits, cfg.num_sms, &cfg.icnt_request),
            icnt_reply: icnt(c.icnt_reply_flits, cfg.l2_slices, &cfg.icnt_reply),
            l2: ratio(c.l2_hits, c.l2_cycles as f64 * cfg.l2_slices as f64),
            dram: ratio(c.dram_busy_cycles, c.dram_cycles as f64),
            class: UtilisationClass::Underutilised,
        };
        u.class = u.classify();
        u
    }

    /// The class of papers/lin-thesis Table 3.3 (the interconnect counts its busier direction).
    pub fn classify(&self) -> UtilisationClass {
        let icnt = self.icnt_request.max(self.icnt_reply);
        if self.scheduler > 0.8 || icnt > 0.9 || self.dram > 0.7 || self.l1 > 0.8 || self.l2 > 0.8 {
            UtilisationClass::Saturated
        } else if self.scheduler < 0.6
            && icnt < 0.6
            && self.dram < 0.5
            && self.l1 < 0.6
            && self.l2 < 0.6
        {
            UtilisationClass::Underutilised
        } else {
            UtilisationClass::Moderate
        }
    }
}

/// Rates derived from the counters, for the readable summary.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Rates {
    pub l1_hit_rate: f64,
    pub l2_hit_rate: f64,
    pub l1_mshr_merges: u64,
    pub l2_mshr_merges: u64,
    /// Row-buffer hits over DRAM requests.
    pub row_buffer_hit_rate: f64,
    /// Bytes moved on the DRAM buses per second of simulated time, and the fraction of peak.
    pub dram_gbps: f64,
    pub dram_peak_fraction: f64,
    /// Bytes carried by each network per second (flits × flit size).
    pub icnt_request_gbps: f64,
    pub icnt_reply_gbps: f64,
    /// With address translation on (`memory.translation`): hits over page lookups of the
    /// L1 TLBs (all SMs) and of the shared L2 TLB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l1_tlb_hit_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l2_tlb_hit_rate: Option<f64>,
}

impl Rates {
    pub fn of(mem: &MemStats, cfg: &MemConfig) -> Rates {
        let seconds = mem.core_cycles as f64 / (cfg.clocks.core_mhz * 1e6);
        let gbps = |bytes: f64| {
            if seconds > 0.0 {
                bytes / seconds / 1e9
            } else {
                0.0
            }
        };
        let dram_gbps = gbps(mem.dram_total.bytes as f64);
        let hit_rate = |c: &memsys::CacheStats| ratio(c.hits, c.accesses as f64);
        Rates {
            l1_hit_rate: hit_rate(&mem.l1_total),
            l2_hit_rate: hit_rate(&mem.l2_total),
            l1_mshr_merges: mem.l1_total.mshr_merges,
            l2_mshr_merges: mem.l2_total.mshr_merges,
            row_buffer_hit_rate: ratio(
                mem.dram_total.row_hits,
                (mem.dram_total.row_hits + mem.dram_total.row_misses) as f64,
            ),
            dram_gbps,
            dram_peak_fraction: dram_gbps * 1e9 / cfg.dram_peak_bytes_per_s(),
            icnt_request_gbps: gbps(
                mem.icnt_request.flits as f64 * f64::from(cfg.icnt_request.flit_bytes),
            ),
            icnt_reply_gbps: gbps(
                mem.icnt_reply.flits as f64 * f64::from(cfg.icnt_reply.flit_bytes),
            ),
            l1_tlb_hit_rate: mem.translation.as_ref().map(|t| t.l1_tlb.hit_rate()),
            l2_tlb_hit_rate: mem.translation.as_ref().map(|t| t.l2_tlb.hit_rate()),
        }
    }
}

/// Counters of a timed launch.
///
/// The launch's own counts (instructions, TBs, loads, shared-memory accesses) are its own.
/// The machine-wide counters (schedulers, SMs, front end, memory, utilisations, rates and
/// the occupancy trace) cover the launch's interval on the machine: exact when it ran alone,
/// and including the work of other launches that ran at the same time otherwise. Scheduler,
/// SM and front-end counters stop when the last TB finishes; memory counters when the last
/// access completes.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TimedStats {
    pub kernel: String,
    /// Core cycles from the launch's arrival at the machine until its last TB finished and
    /// every access it made completed (stores acknowledged).
    pub cycles: u64,
    /// Core cycles from its arrival until the last TB finished (before its last stores were
    /// acknowledged).
    pub cycles_to_last_tb: u64,
    /// The machine's core cycle at which the launch arrived, at which its first TB was
    /// dispatched, and at which it finished. The machine outlives launches, so these are
    /// absolute (on a fresh machine running one launch, `submitted_at` is 0).
    pub submitted_at: u64,
    pub started_at: u64,
    pub finished_at: u64,
    pub tbs: u64,
    pub warps: u64,
    pub warp_instructions: u64,
    pub thread_instructions: u64,
    /// Warp instructions per core cycle, whole GPU.
    pub ipc: f64,
    /// The GPU configuration's name.
    pub gpu: String,
    /// Occupancy at dispatch (TBs per SM, limiting factors) and the registers per thread
    /// assumed.
    pub occupancy_limit: Occupancy,
    pub tbs_per_sm: u32,
    /// Extra TBs per SM beyond `tbs_per_sm` ([`crate::tlp`]; at the end, under a dynamic
    /// scheme). Written out only when not zero.
    #[serde(skip_serializing_if = "is_zero32")]
    pub extra_tbs: u32,
    /// Registers per thread a spilled register context reserves under `[sm.tlp]`: those
    /// live at the kernel's switch points, compressed unless `compression = false`
    /// (papers/lin-thesis §3.6.6). Written out only when not zero.
    #[serde(skip_serializing_if = "is_zero32")]
    pub context_registers: u32,
    /// Whether GPUDuet's monitor made the bypassed L1 a context store while this launch
    /// ran (papers/lin-thesis §3.6.4). Written out only when true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub l1_store: bool,
    pub regs_per_thread: u32,
    /// Mean resident warps per SM over its active cycles, as a fraction of its warp slots
    /// (under `[sm.tlp]` the present ones: an inactive TB's warps hold no slot).
    pub achieved_occupancy: f64,
    /// Resident warps over time.
    pub occupancy: OccupancyTrace,
    /// Load and atomic accesses that went through the memory system (the parts of a split
    /// warp access counted separately), and their mean latency in core cycles (issue to data).
    pub global_loads: u64,
    pub mean_load_latency: f64,
    /// Shared-memory warp accesses and their bank-conflict passes, summed.
    pub shared_accesses: u64,
    pub shared_passes: u64,
    /// Instruction fetch and operand collection.
    pub frontend: FrontendStats,
    /// All schedulers summed.
    pub schedulers: SchedulerStats,
    pub sms: Vec<SmStats>,
    pub utilisation: Utilisation,
    pub rates: Rates,
    pub memory: MemStats,
}

impl TimedStats {
    /// A readable multi-line summary of the launch.
    pub fn summary(&self) -> String {
        use std::fmt::Write;
        let mut o = String::new();
        let pct = |x: f64| format!("{:.1}%", 100.0 * x);
        let limits: Vec<String> = self
            .occupancy_limit
            .limited_by
            .iter()
            .map(|l| format!("{l:?}").to_lowercase())
            .collect();
        let _ = writeln!(
            o,
            "{} on {}: {} cycles ({} to the last TB), {} warp instructions, IPC {:.2}",
            self.kernel,
            self.gpu,
            self.cycles,
            self.cycles_to_last_tb,
            self.warp_instructions,
            self.ipc
        );
        let _ = writeln!(
            o,
            "  occupancy: {} TBs/SM ({} warps) limited by {}; {} registers/thread; achieved {}",
            self.tbs_per_sm,
            self.occupancy_limit.warps_per_sm,
            limits.join(" and "),
            self.regs_per_thread,
            pct(self.achieved_occupancy)
        );
        let s = &self.schedulers;
        let c = s.cycles().max(1) as f64;
        let _ = writeln!(
            o,
            "  scheduler cycles: issued {}, memory {}, scoreboard {}, pipeline busy {}, barrier {}, fetch {}, no warp {}",
            pct(s.issued as f64 / c),
            pct(s.memory as f64 / c),
            pct(s.scoreboard as f64 / c),
            pct(s.pipeline_busy as f64 / c),
            pct(s.barrier as f64 / c),
            pct(s.fetch as f64 / c),
            pct(s.no_warp as f64 / c)
        );
        let f = &self.frontend;
        let _ = writeln!(
            o,
            "  front end: {} fetches, i-cache misses {}, operand bank-conflict cycles {}",
            f.fetches,
            pct(f.icache_misses as f64 / f.fetches.max(1) as f64),
            f.operand_conflict_cycles
        );
        let r = &self.rates;
        let _ = writeln!(
            o,
            "  memory: L1 hits {}, L2 hits {}, MSHR merges L1 {} / L2 {}, row-buffer hits {}, DRAM {:.1} GB/s ({} of peak), mean load latency {:.1} cycles",
            pct(r.l1_hit_rate),
            pct(r.l2_hit_rate),
            r.l1_mshr_merges,
            r.l2_mshr_merges,
            pct(r.row_buffer_hit_rate),
            r.dram_gbps,
            pct(r.dram_peak_fraction),
            self.mean_load_latency
        );
        if let Some(t) = &self.memory.translation {
            let _ = writeln!(
                o,
                "  translation: L1 TLB hits {}, L2 TLB hits {}, {} walks, {:.1} cycles per access translating, {} stall cycles",
                pct(t.l1_tlb.hit_rate()),
                pct(t.l2_tlb.hit_rate()),
                t.walks,
                t.translation_cycles as f64 / t.accesses.max(1) as f64,
                t.stall_cycles
            );
            // Demand paging (memsys::fault), once something faulted.
            if let Some(f) = t.faults.filter(|f| f.far_faults > 0) {
                let _ = writeln!(
                    o,
                    "  demand paging: {} far faults ({} walks merged into them) in {} batches, {} regions migrated, {} allocated, {} cycles faults outstanding, {} accesses stalled on a waiting fault",
                    f.far_faults,
                    f.merged,
                    f.batches,
                    f.regions_migrated,
                    f.regions_allocated,
                    f.fault_cycles,
                    f.faulted_accesses
                );
            }
        }
        let u = &self.utilisation;
        let _ = writeln!(
            o,
            "  utilisation (lin-thesis §3.4): scheduler {}, L1 {}, icnt SM→L2 {}, icnt L2→SM {}, L2 {}, DRAM {} → {:?}",
            pct(u.scheduler),
            pct(u.l1),
            pct(u.icnt_request),
            pct(u.icnt_reply),
            pct(u.l2),
            pct(u.dram),
            u.class
        );
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each kind of cycle adds to its own counter and to no other.
    #[test]
    fn a_scheduler_cycle_counts_in_its_own_counter() {
        let reasons = [
            StallReason::NoWarp,
            StallReason::Fetch,
            StallReason::Barrier,
            StallReason::Memory,
            StallReason::Scoreboard,
            StallReason::PipelineBusy,
        ];
        let kinds = std::iter::once(SchedulerCycle::Issued)
            .chain(reasons.into_iter().map(SchedulerCycle::Stalled));
        for (k, c) in kinds.enumerate() {
            let mut s = SchedulerStats::default();
            s.count_n(c, 3);
            s.count(c);
            let all = [
                s.issued,
                s.no_warp,
                s.fetch,
                s.barrier,
                s.memory,
                s.scoreboard,
                s.pipeline_busy,
            ];
            let want: Vec<u64> = (0..7).map(|i| if i == k { 4 } else { 0 }).collect();
            assert_eq!(all.to_vec(), want, "{c:?}");
        }
    }
}
