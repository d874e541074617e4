//! Far faults: demand paging of managed (unified) memory, with the GPU stalling on a fault
//! (papers/tanasic-thesis §2.1 and §6.4.2, the costs of §6.5.3, the 64 KiB handling
//! granularity of §6.5.1).
//!
//! **What faults.** A managed allocation (`cudaMallocManaged`, [`FarFaults::manage`])
//! starts resident on the host. A page-table walk ([`crate::tlb::SharedTlb`]) that ends on
//! a page holding managed bytes whose *region* (`granularity_kb`, 64 KiB in the thesis; a
//! larger page is a region of its own) is not resident on the GPU raises a far fault, and
//! the page's translation completes only when the region has migrated. A region with any managed byte is managed as a whole
//! (allocations are 256-byte aligned, so a small buffer may share its region with another:
//! the whole region migrates). Walks of other pages of a region already faulting merge into
//! its fault (counted as merged, not as new far faults) and complete when it does; a region
//! resident once stays resident.
//!
//! **What it costs** (§6.5.3): per fault, with a data transfer (`transfer_us`: PCIe 25 µs,
//! NVLink 12 µs) or allocation only (`alloc_us`: 12 µs and 10 µs) — the latter for regions
//! with no host data ([`Populate::Unpopulated`]: never written by the host, so nothing
//! migrates; the CPU still allocates the GPU's frame and maps it, §6.4.2). The link (`link`)
//! picks which pair applies.
//!
//! **Batches** (the UVM driver's, as NVIDIA's open kernel module describes it:
//! `uvm_gpu_replayable_faults.c`, module parameter `uvm_perf_fault_batch_count` — "number of
//! entries that are fetched from the GPU fault buffer and serviced in batch", 256 by
//! default; replay policy `batch_flush` by default — the GPU's faulted accesses are replayed
//! once a batch is serviced; faults that "arrived during servicing" are left for the next
//! batch; Allen & Ge, "In-depth analyses of unified virtual memory system for GPU accelerated
//! computing", SC'21, analyse the same batch-by-batch servicing). The model:
//! * a fault enters the fault buffer when its walk ends (its *raise* cycle);
//! * the handler is idle or servicing one batch; when idle with faults waiting, a batch
//!   starts at the later of the end of the previous batch and the first waiting fault's
//!   raise, and takes every fault raised by then, oldest first, at most `batch_size`;
//! * the CPU services a batch's faults one by one (§6.5.4: the faults "overwhelm the system
//!   interconnect and the CPU who have to handle them one by one"): the batch lasts the sum
//!   of its faults' costs, and every one of them completes (is replayed) at its end;
//! * faults raised while a batch is in service wait for the next one.
//!
//! **Local handling** (§6.4.2, `handler = "gpu"`, Figures 6.14–6.15). A fault that needs no
//! data transfer — a region with no host data ([`Populate::Unpopulated`]: the kernel's own
//! allocations, output pages the host never wrote) — can be handled on the GPU itself: the
//! faulting SM runs the handler (allocate a frame, update the GPU page table) in system
//! mode, which preemptible faults make possible. It takes `gpu_handler_us` (§6.5.4: 20 µs,
//! "an order of magnitude more" than the CPU's) from the fault's raise, and handlers run
//! side by side (§6.4.2: "this lazy physical memory allocation scheme allows many GPU
//! threads to allocate physical memory in parallel"): they neither wait for nor join the
//! CPU's batches. Faults with host data still go to the CPU. Assumption: a handler costs
//! latency only (the thesis gives no per-SM limit or the handler's footprint).
//!
//! **Time.** A fault's completion is unknown when it is raised (its batch has not started),
//! so the walk answers [`PENDING`], and [`FarFaults::service`], called every core cycle,
//! forms batches and reports each faulted region's completion cycle, which the TLBs write
//! into their waiting entries. Raises arrive in non-decreasing cycles (walk ends, see
//! [`crate::tlb`]) and each is later than the core cycle of the lookup that caused it, so at
//! core cycle `now` every fault raised by `now` is known: a batch that starts by `now` holds
//! exactly the faults it would have held. Nothing iterates a hash map: deterministic.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ConfigError;

/// The completion cycle of a translation waiting for a fault whose batch has not started.
pub const PENDING: u64 = u64::MAX;

/// The most a per-fault cost may be, in µs (one second).
pub const MAX_FAULT_US: f64 = 1.0e6;

/// The most faults a batch may take (the driver's fault buffer is sized in thousands).
pub const MAX_BATCH: u32 = 65536;

/// The link between the host and the GPU, over which managed memory migrates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Link {
    /// PCI Express (3.0 in §6.5.3).
    Pcie,
    /// NVLink.
    Nvlink,
}

/// Per-fault costs over one link, in µs (papers/tanasic-thesis §6.5.3: page pinning,
/// physical frame allocation and the transfer, with the interconnect's latency).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultCosts {
    /// A fault whose region holds host data: migrated.
    pub transfer_us: f64,
    /// A fault whose region has no host data: allocated and mapped only.
    pub alloc_us: f64,
}

/// Demand paging: the `[memory.translation.faults]` section of a GPU file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    /// Which link's costs apply.
    pub link: Link,
    /// The unit a fault migrates, in KiB: a power of two from 4 to 2048 (§6.5.1: 64); with
    /// larger pages a fault migrates its whole page.
    pub granularity_kb: u32,
    /// Faults a batch takes at most (the UVM driver's `uvm_perf_fault_batch_count`: 256).
    pub batch_size: u32,
    /// Costs over PCIe.
    pub pcie: FaultCosts,
    /// Costs over NVLink.
    pub nvlink: FaultCosts,
    /// Who handles faults that need no transfer (§6.4.2): the CPU (the default, written
    /// out only when not it) or the GPU itself.
    #[serde(default, skip_serializing_if = "Handler::is_cpu")]
    pub handler: Handler,
    /// The GPU handler's latency per fault, µs (§6.5.4: 20; written out only when not it).
    #[serde(
        default = "default_gpu_handler_us",
        skip_serializing_if = "is_default_gpu_handler_us"
    )]
    pub gpu_handler_us: f64,
}

/// Who handles a fault that needs no data transfer (papers/tanasic-thesis §6.4.2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Handler {
    /// The host's driver, in its batches (today's GPUs).
    #[default]
    Cpu,
    /// The faulting SM, in system mode, without the CPU (local handling).
    Gpu,
}

impl Handler {
    fn is_cpu(&self) -> bool {
        *self == Handler::Cpu
    }
}

/// §6.5.4: "We estimate the latency of the GPU handler to be 20µs".
pub const GPU_HANDLER_US: f64 = 20.0;

fn default_gpu_handler_us() -> f64 {
    GPU_HANDLER_US
}

fn is_default_gpu_handler_us(us: &f64) -> bool {
    *us == GPU_HANDLER_US
}

impl FaultSpec {
    /// The costs of the link in use.
    pub fn costs(&self) -> &FaultCosts {
        match self.link {
            Link::Pcie => &self.pcie,
            Link::Nvlink => &self.nvlink,
        }
    }

    /// Checks every field; the error names it (`translation.faults.pcie.transfer_us`, ...).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |what: &'static str, reason: String| Err(ConfigError::Invalid { what, reason });
        let g = self.granularity_kb;
        if !g.is_power_of_two() || !(4..=2048).contains(&g) {
            return bad(
                "translation.faults.granularity_kb",
                format!("{g} KiB is not a power of two from 4 to 2048"),
            );
        }
        if !(1..=MAX_BATCH).contains(&self.batch_size) {
            return bad(
                "translation.faults.batch_size",
                format!("{} is not in 1..={MAX_BATCH}", self.batch_size),
            );
        }
        let h = self.gpu_handler_us;
        if !(h.is_finite() && h > 0.0 && h <= MAX_FAULT_US) {
            return bad(
                "translation.faults.gpu_handler_us",
                format!("{h} µs is not more than 0 and at most {MAX_FAULT_US}"),
            );
        }
        for (names, c) in [
            (
                [
                    "translation.faults.pcie.transfer_us",
                    "translation.faults.pcie.alloc_us",
                ],
                &self.pcie,
            ),
            (
                [
                    "translation.faults.nvlink.transfer_us",
                    "translation.faults.nvlink.alloc_us",
                ],
                &self.nvlink,
            ),
        ] {
            for (name, us) in names.into_iter().zip([c.transfer_us, c.alloc_us]) {
                if !(us.is_finite() && us > 0.0 && us <= MAX_FAULT_US) {
                    return bad(
                        name,
                        format!("{us} µs is not more than 0 and at most {MAX_FAULT_US}"),
                    );
                }
            }
        }
        Ok(())
    }
}

/// Whether a managed allocation holds host data (so a fault migrates it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Populate {
    /// Written by the host: a fault transfers the region (`transfer_us`).
    HostData,
    /// Never written by the host: a fault allocates and maps a frame only (`alloc_us`).
    Unpopulated,
}

/// Demand-paging counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultStats {
    /// Far faults: regions found not resident by a walk (one per region and migration).
    pub far_faults: u64,
    /// Walks that found their region already faulting and waited for that fault.
    pub merged: u64,
    /// Batches serviced.
    pub batches: u64,
    /// Regions migrated with their host data (`granularity_kb` each).
    pub regions_migrated: u64,
    /// Regions allocated and mapped without a transfer.
    pub regions_allocated: u64,
    /// Core cycles from each far fault's raise to its completion, summed: the time
    /// translations stalled on faults.
    pub fault_cycles: u64,
    /// Core cycles the handler spent servicing batches.
    pub busy_cycles: u64,
    /// Accesses accepted while a page of theirs waited for a fault whose batch had not
    /// started (those merging into a fault already in service are not counted).
    pub faulted_accesses: u64,
    /// Regions allocated by the GPU's own handler (`handler = "gpu"`; not in
    /// `regions_allocated`, which counts the CPU's). Written out only when some were.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub regions_allocated_locally: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl FaultStats {
    /// The counts between `earlier` and `self`.
    pub fn since(&self, e: &FaultStats) -> FaultStats {
        FaultStats {
            far_faults: self.far_faults - e.far_faults,
            merged: self.merged - e.merged,
            batches: self.batches - e.batches,
            regions_migrated: self.regions_migrated - e.regions_migrated,
            regions_allocated: self.regions_allocated - e.regions_allocated,
            fault_cycles: self.fault_cycles - e.fault_cycles,
            busy_cycles: self.busy_cycles - e.busy_cycles,
            faulted_accesses: self.faulted_accesses - e.faulted_accesses,
            regions_allocated_locally: self.regions_allocated_locally - e.regions_allocated_locally,
        }
    }
}

/// Where a faulted region is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Region {
    /// In the fault buffer, its batch not started.
    Waiting,
    /// In a batch: on the GPU at `ready`.
    Migrating { ready: u64 },
    /// On the GPU.
    Resident,
}

/// A far fault in the fault buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Fault {
    raised: u64,
    region: u64,
    populate: Populate,
}

/// A managed allocation: `[start, end)`.
#[derive(Debug, Clone, Copy)]
struct Managed {
    start: u64,
    end: u64,
    populate: Populate,
}

/// The GPU's view of managed memory and the host's fault handler (the UVM driver).
#[derive(Debug, Clone)]
pub struct FarFaults {
    region_bytes: u64,
    /// Core cycles per fault: with a transfer, allocation only.
    transfer: u64,
    alloc: u64,
    batch_size: usize,
    /// Core cycles of the GPU's own handler per fault with no host data, when it handles
    /// them (`handler = "gpu"`).
    local: Option<u64>,
    /// Faults the GPU handles (`local`), in raise order: (raise, region).
    local_faults: std::collections::VecDeque<(u64, u64)>,
    /// Sorted by start, disjoint.
    managed: Vec<Managed>,
    regions: BTreeMap<u64, Region>,
    /// The fault buffer, in (raise, region) order.
    buffer: Vec<Fault>,
    /// The cycle the batch in service ends (the handler is idle from then).
    busy_until: u64,
    stats: FaultStats,
}

impl FarFaults {
    /// A handler for `spec` at `core_mhz` (fault costs become core cycles, at least 1) over
    /// pages of `page_bytes` (a fault migrates the larger of a page and `granularity_kb`).
    pub fn new(spec: &FaultSpec, core_mhz: f64, page_bytes: u64) -> FarFaults {
        let cycles = |us: f64| ((us * core_mhz).round() as u64).max(1);
        let c = spec.costs();
        FarFaults {
            region_bytes: (u64::from(spec.granularity_kb.max(1)) * 1024).max(page_bytes),
            transfer: cycles(c.transfer_us),
            alloc: cycles(c.alloc_us),
            batch_size: spec.batch_size.max(1) as usize,
            local: (spec.handler == Handler::Gpu).then(|| cycles(spec.gpu_handler_us)),
            local_faults: Default::default(),
            managed: Vec::new(),
            regions: BTreeMap::new(),
            buffer: Vec::new(),
            busy_until: 0,
            stats: FaultStats::default(),
        }
    }

    /// A handler with the given costs in core cycles (tests).
    pub fn with_cycles(region_bytes: u64, transfer: u64, alloc: u64, batch_size: usize) -> Self {
        FarFaults {
            region_bytes: region_bytes.max(1),
            transfer: transfer.max(1),
            alloc: alloc.max(1),
            batch_size: batch_size.max(1),
            local: None,
            local_faults: Default::default(),
            managed: Vec::new(),
            regions: BTreeMap::new(),
            buffer: Vec::new(),
            busy_until: 0,
            stats: FaultStats::default(),
        }
    }

    /// Faults with no host data are handled on the GPU in `cycles` each (tests).
    pub fn with_local_handler(mut self, cycles: u64) -> Self {
        self.local = Some(cycles.max(1));
        self
    }

    /// Bytes a fault migrates.
    pub fn region_bytes(&self) -> u64 {
        self.region_bytes
    }

    /// Its counters.
    pub fn stats(&self) -> FaultStats {
        self.stats
    }

    /// Counts an access whose translation waited for a fault.
    pub fn count_faulted_access(&mut self) {
        self.stats.faulted_accesses += 1;
    }

    /// Declares `[start, start + bytes)` managed memory, resident on the host (allocations
    /// do not overlap; an empty one is ignored).
    pub fn manage(&mut self, start: u64, bytes: u64, populate: Populate) {
        if bytes == 0 {
            return;
        }
        let end = start.saturating_add(bytes);
        let i = self.managed.partition_point(|m| m.start < start);
        self.managed.insert(
            i,
            Managed {
                start,
                end,
                populate,
            },
        );
    }

    /// The host wrote `[start, start + bytes)`: every managed allocation it overlaps holds
    /// host data from now on (faults raised later migrate its regions; a region already
    /// faulted or resident is not moved back).
    pub fn populate(&mut self, start: u64, bytes: u64) {
        let end = start.saturating_add(bytes);
        let first = self.managed.partition_point(|m| m.end <= start);
        for m in self.managed[first..]
            .iter_mut()
            .take_while(|m| m.start < end)
        {
            m.populate = Populate::HostData;
        }
    }

    /// The managed allocations overlapping `[lo, hi)`.
    fn overlapping(&self, lo: u64, hi: u64) -> impl Iterator<Item = &Managed> + '_ {
        // Disjoint and sorted by start, so sorted by end too.
        let first = self.managed.partition_point(|m| m.end <= lo);
        self.managed[first..]
            .iter()
            .take_while(move |m| m.start < hi)
    }

    /// A walk of the page `[page, page + page_bytes)` ending at `raised` (not before an
    /// earlier one): `None` when the page needs no fault (not managed, or its region is
    /// resident by then); else the cycle its region is on the GPU, [`PENDING`] while its
    /// batch has not started.
    pub fn walk(&mut self, page: u64, page_bytes: u64, raised: u64) -> Option<u64> {
        // A page with no managed byte never faults, even in a region that does.
        self.overlapping(page, page.saturating_add(page_bytes))
            .next()?;
        let region = page / self.region_bytes;
        match self.regions.get(&region).copied() {
            Some(Region::Resident) => return None,
            Some(Region::Migrating { ready }) if ready <= raised => {
                self.regions.insert(region, Region::Resident);
                return None;
            }
            Some(Region::Migrating { ready }) => {
                self.stats.merged += 1;
                return Some(ready);
            }
            Some(Region::Waiting) => {
                self.stats.merged += 1;
                return Some(PENDING);
            }
            None => {}
        }
        // The whole region migrates: host data if any allocation in it has some.
        let lo = region * self.region_bytes;
        let populate = self
            .overlapping(lo, lo.saturating_add(self.region_bytes))
            .map(|m| m.populate)
            .min()
            .unwrap_or(Populate::HostData);
        self.stats.far_faults += 1;
        self.regions.insert(region, Region::Waiting);
        if populate == Populate::Unpopulated && self.local.is_some() {
            // Handled by the faulting SM from its raise, beside any other handler
            // (§6.4.2); like a CPU fault it is pending until then, so the SM squashes the
            // access as it would any fault.
            self.local_faults.push_back((raised, region));
            return Some(PENDING);
        }
        let f = Fault {
            raised,
            region,
            populate,
        };
        let i = self.buffer.partition_point(|x| *x <= f);
        self.buffer.insert(i, f);
        Some(PENDING)
    }

    /// Whether faults wait for a batch.
    pub fn has_waiting(&self) -> bool {
        !self.buffer.is_empty() || !self.local_faults.is_empty()
    }

    /// Starts every batch that starts by core cycle `now`, pushing each of its regions with
    /// the cycle it is on the GPU to `done`.
    pub fn service(&mut self, now: u64, done: &mut Vec<(u64, u64)>) {
        let local = self.local.unwrap_or(0);
        while let Some(&(raised, region)) = self.local_faults.front() {
            if raised > now {
                break;
            }
            self.local_faults.pop_front();
            let ready = raised + local;
            self.stats.regions_allocated_locally += 1;
            self.stats.fault_cycles += local;
            self.regions.insert(region, Region::Migrating { ready });
            done.push((region, ready));
        }
        while let Some(first) = self.buffer.first() {
            let start = self.busy_until.max(first.raised);
            if start > now {
                return;
            }
            let n = self
                .buffer
                .partition_point(|f| f.raised <= start)
                .min(self.batch_size);
            let mut end = start;
            for f in &self.buffer[..n] {
                end += match f.populate {
                    Populate::HostData => self.transfer,
                    Populate::Unpopulated => self.alloc,
                };
            }
            for f in self.buffer.drain(..n) {
                match f.populate {
                    Populate::HostData => self.stats.regions_migrated += 1,
                    Populate::Unpopulated => self.stats.regions_allocated += 1,
                }
                self.stats.fault_cycles += end - f.raised;
                self.regions
                    .insert(f.region, Region::Migrating { ready: end });
                done.push((f.region, end));
            }
            self.stats.batches += 1;
            self.stats.busy_cycles += end - start;
            self.busy_until = end;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KB64: u64 = 64 << 10;

    /// Regions of 64 KiB, 100 cycles with a transfer, 40 without, batches of 256.
    fn handler() -> FarFaults {
        let mut f = FarFaults::with_cycles(KB64, 100, 40, 256);
        f.manage(0, 4 * KB64, Populate::HostData);
        f
    }

    #[test]
    fn two_faults_raised_during_a_batch_are_serviced_together_in_the_next() {
        let mut f = handler();
        let mut done = Vec::new();
        // Region 0 faults at 10: its batch starts at 10 and ends at 110.
        assert_eq!(f.walk(0, 4096, 10), Some(PENDING));
        f.service(10, &mut done);
        assert_eq!(done, vec![(0, 110)]);
        // Regions 1 and 2 fault at 20 and 30, while the first batch is in service.
        assert_eq!(f.walk(KB64, 4096, 20), Some(PENDING));
        assert_eq!(f.walk(2 * KB64, 4096, 30), Some(PENDING));
        done.clear();
        for now in 11..110 {
            f.service(now, &mut done);
            assert!(
                done.is_empty(),
                "nothing starts before the first batch ends"
            );
        }
        // At 110 the next batch takes both: 110 + 100 + 100.
        f.service(110, &mut done);
        assert_eq!(done, vec![(1, 310), (2, 310)]);
        let s = f.stats();
        assert_eq!((s.far_faults, s.batches, s.regions_migrated), (3, 2, 3));
        assert_eq!(s.fault_cycles, 100 + (310 - 20) + (310 - 30));
        assert_eq!(s.busy_cycles, 300);
    }

    #[test]
    fn a_region_faults_once_and_later_pages_merge_or_hit() {
        let mut f = handler();
        let mut done = Vec::new();
        assert_eq!(f.walk(0, 4096, 5), Some(PENDING));
        // Another 4 KiB page of the same region, before its batch starts: merged.
        assert_eq!(f.walk(8192, 4096, 5), Some(PENDING));
        f.service(5, &mut done);
        assert_eq!(done, vec![(0, 105)]);
        // During the migration: merged, ready at its end; after it: resident.
        assert_eq!(f.walk(12288, 4096, 50), Some(105));
        assert_eq!(f.walk(16384, 4096, 105), None);
        assert_eq!(f.walk(0, 4096, 200), None);
        let s = f.stats();
        assert_eq!((s.far_faults, s.merged, s.batches), (1, 2, 1));
    }

    #[test]
    fn unmanaged_pages_never_fault_and_unpopulated_regions_cost_allocation_only() {
        let mut f = FarFaults::with_cycles(KB64, 100, 40, 256);
        f.manage(KB64, 4096, Populate::Unpopulated);
        assert_eq!(f.walk(0, 4096, 0), None);
        assert_eq!(f.walk(2 * KB64, 4096, 0), None);
        assert_eq!(f.walk(KB64, 4096, 0), Some(PENDING));
        // A page of the region beyond the allocation holds no managed byte: no fault.
        assert_eq!(f.walk(KB64 + 8192, 4096, 1), None);
        let mut done = Vec::new();
        f.service(0, &mut done);
        assert_eq!(done, vec![(1, 40)]);
        assert_eq!(f.stats().regions_allocated, 1);
    }

    #[test]
    fn the_gpu_handles_faults_without_host_data_itself_side_by_side() {
        // Two regions without host data and one with: under the GPU handler (300 cycles,
        // slower than the CPU's 40) the first two complete 300 cycles after each raise,
        // in parallel and without a batch; the third still goes to the CPU.
        let mut f = FarFaults::with_cycles(KB64, 100, 40, 256).with_local_handler(300);
        f.manage(0, 2 * KB64, Populate::Unpopulated);
        f.manage(2 * KB64, KB64, Populate::HostData);
        assert_eq!(f.walk(0, 4096, 10), Some(PENDING));
        assert_eq!(f.walk(KB64, 4096, 12), Some(PENDING));
        assert_eq!(f.walk(2 * KB64, 4096, 12), Some(PENDING));
        let mut done = Vec::new();
        f.service(10, &mut done);
        assert_eq!(done, vec![(0, 310)]);
        // A later page of a locally handled region merges into its handler.
        assert_eq!(f.walk(8192, 4096, 20), Some(310));
        done.clear();
        f.service(12, &mut done);
        assert_eq!(
            done,
            vec![(1, 312), (2, 112)],
            "the second handler runs beside the first; only the host data goes to the CPU"
        );
        let s = f.stats();
        assert_eq!(
            (
                s.far_faults,
                s.regions_allocated_locally,
                s.regions_allocated
            ),
            (3, 2, 0)
        );
        assert_eq!((s.regions_migrated, s.batches, s.merged), (1, 1, 1));
        assert_eq!(s.fault_cycles, 300 + 300 + 100);
        assert_eq!(f.walk(0, 4096, 310), None, "resident once handled");
        // Under the CPU handler the same two regions wait for one batch, serialised.
        let mut cpu = FarFaults::with_cycles(KB64, 100, 40, 256);
        cpu.manage(0, 2 * KB64, Populate::Unpopulated);
        assert_eq!(cpu.walk(0, 4096, 10), Some(PENDING));
        assert_eq!(cpu.walk(KB64, 4096, 10), Some(PENDING));
        done.clear();
        cpu.service(10, &mut done);
        assert_eq!(done, vec![(0, 90), (1, 90)]);
    }

    #[test]
    fn what_the_host_writes_migrates_and_the_rest_is_only_allocated() {
        let mut f = FarFaults::with_cycles(KB64, 100, 40, 256);
        f.manage(0, KB64, Populate::Unpopulated);
        f.manage(KB64, KB64, Populate::Unpopulated);
        // The host writes 8 bytes of the second allocation only (and bytes of no
        // managed allocation, which changes nothing).
        f.populate(KB64 + 16, 8);
        f.populate(4 * KB64, 8);
        f.walk(0, 4096, 0);
        f.walk(KB64, 4096, 0);
        let mut done = Vec::new();
        f.service(0, &mut done);
        assert_eq!(done, vec![(0, 140), (1, 140)]);
        let s = f.stats();
        assert_eq!((s.regions_allocated, s.regions_migrated), (1, 1));
    }

    #[test]
    fn a_batch_takes_at_most_batch_size_faults() {
        let mut f = FarFaults::with_cycles(KB64, 100, 40, 2);
        f.manage(0, 8 * KB64, Populate::HostData);
        for r in 0..3 {
            f.walk(r * KB64, 4096, 7);
        }
        let mut done = Vec::new();
        f.service(7, &mut done);
        assert_eq!(done, vec![(0, 207), (1, 207)]);
        done.clear();
        f.service(207, &mut done);
        assert_eq!(done, vec![(2, 307)]);
        assert_eq!(f.stats().batches, 2);
    }

    #[test]
    fn bad_specs_name_their_field() {
        let good = FaultSpec {
            link: Link::Pcie,
            granularity_kb: 64,
            batch_size: 256,
            pcie: FaultCosts {
                transfer_us: 25.0,
                alloc_us: 12.0,
            },
            nvlink: FaultCosts {
                transfer_us: 12.0,
                alloc_us: 10.0,
            },
            handler: Handler::Cpu,
            gpu_handler_us: GPU_HANDLER_US,
        };
        assert!(good.validate().is_ok());
        let field = |f: &dyn Fn(&mut FaultSpec)| {
            let mut s = good.clone();
            f(&mut s);
            let ConfigError::Invalid { what, .. } = s.validate().unwrap_err();
            what
        };
        assert_eq!(
            field(&|s| s.granularity_kb = 48),
            "translation.faults.granularity_kb"
        );
        assert_eq!(
            field(&|s| s.granularity_kb = 2),
            "translation.faults.granularity_kb"
        );
        assert_eq!(
            field(&|s| s.batch_size = 0),
            "translation.faults.batch_size"
        );
        assert_eq!(
            field(&|s| s.pcie.transfer_us = f64::NAN),
            "translation.faults.pcie.transfer_us"
        );
        assert_eq!(
            field(&|s| s.nvlink.alloc_us = 0.0),
            "translation.faults.nvlink.alloc_us"
        );
        assert_eq!(
            field(&|s| s.gpu_handler_us = -1.0),
            "translation.faults.gpu_handler_us"
        );
        // 25 µs at 1 GHz is 25,000 core cycles; a 2 MiB page migrates whole.
        let f = FarFaults::new(&good, 1000.0, 4096);
        assert_eq!(
            (f.transfer, f.alloc, f.region_bytes()),
            (25_000, 12_000, KB64)
        );
        assert_eq!(
            FarFaults::new(&good, 1000.0, 2 << 20).region_bytes(),
            2 << 20
        );
    }
}
