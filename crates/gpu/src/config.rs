//! GPU configurations: plain data read from TOML (`configs/*.toml`), every field documented
//! there and here. Unknown or ill-typed fields are errors that name the field.
//!
//! A configuration describes the SMs (count, clock, warp schedulers), the resources that bound
//! occupancy ([`crate::occupancy::SmResources`]), the memory hierarchy (`[memory]`, a
//! [`memsys::MemConfig`] whose SM count and core clock come from `[sm]`) and, optionally, the
//! SM pipeline's latencies (`[pipeline]`, a [`PipelineSpec`]; GTX480 numbers by default).

use serde::{Deserialize, Serialize};

use memsys::MemConfig;

use crate::occupancy::{RegisterAllocation, SmResources};
use crate::pipeline::PipelineSpec;

/// Warp scheduling policies (the timing model's warp schedulers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SchedulerPolicy {
    /// Loose round robin.
    Lrr,
    /// Greedy then oldest.
    Gto,
    /// Two-level (an active set of warps, refilled from a pending set).
    TwoLevel,
}

/// The most uniform registers a warp can name (`UR0`–`UR62`; `URZ` reads as zero).
pub const MAX_UNIFORM_REGISTERS: u32 = 63;

/// The SMs of a GPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmConfig {
    /// Number of SMs.
    pub count: u32,
    /// Core clock in MHz.
    pub clock_mhz: f64,
    /// Warp schedulers per SM (each issues up to one instruction per cycle).
    pub warp_schedulers: u32,
    pub scheduler: SchedulerPolicy,
    pub resources: SmResources,
    /// Extra TBs beyond the scheduling limits (papers/lin-thesis ch. 3): Virtual Thread or
    /// GPUDuet; off unless the file has `[sm.tlp]`.
    #[serde(default)]
    pub tlp: crate::tlp::TlpConfig,
}

/// A whole GPU configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuConfig {
    /// Short name (`gtx480`).
    pub name: String,
    /// What the configuration models and where its numbers come from.
    pub description: String,
    pub sm: SmConfig,
    /// The memory hierarchy.
    pub memory: MemConfig,
    /// Operation latencies and initiation intervals; every field may be left out.
    #[serde(default)]
    pub pipeline: PipelineSpec,
    /// The host side: the link to the CPU, copy engines and the launch path.
    #[serde(default)]
    pub host: HostSpec,
}

/// The host side of a GPU: what a copy and a launch cost before the GPU sees them
/// (papers/tanasic-thesis §5.3.1 models the PCIe link and a data-transfer engine; papers/li-pep
/// §3.1 the time from a launch call to the kernel's arrival at the kernel management unit).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HostSpec {
    /// Peak bandwidth of one direction of the host link, GB/s (10^9 bytes per second).
    pub pcie_gbps: f64,
    /// Fixed cost of one copy, µs: driver, DMA setup and the link's round trip.
    pub copy_latency_us: f64,
    /// From the host's launch call to the kernel's arrival at the GPU, µs.
    pub launch_latency_us: f64,
    /// Copy (DMA) engines; each serves its queue first come, first served.
    pub copy_engines: u32,
}

impl Default for HostSpec {
    /// PCIe 3.0 x16, one copy engine, 5 µs fixed costs (see `configs/*.toml`).
    fn default() -> Self {
        HostSpec {
            pcie_gbps: 15.75,
            copy_latency_us: 5.0,
            launch_latency_us: 5.0,
            copy_engines: 1,
        }
    }
}

/// A configuration that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: {message}")]
    Parse { file: String, message: String },
    #[error("{file}: `{field}`: {what}")]
    Invalid {
        file: String,
        field: String,
        what: String,
    },
    #[error("no GPU preset `{0}`; presets: {1}")]
    UnknownPreset(String, String),
}

/// The built-in presets: (name, TOML text). The files are compiled into `memsys`, which reads
/// their `[memory]` sections; this is the same list.
pub const PRESETS: &[(&str, &str)] = memsys::presets::FILES;

impl GpuConfig {
    /// Parses and validates a configuration; `file` names it in errors.
    pub fn from_toml(file: &str, text: &str) -> Result<GpuConfig, ConfigError> {
        let mut c: GpuConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            file: file.to_string(),
            message: e.to_string(),
        })?;
        c.validate(file)?;
        Ok(c)
    }

    /// A built-in preset by name.
    pub fn preset(name: &str) -> Result<GpuConfig, ConfigError> {
        match PRESETS.iter().find(|(n, _)| *n == name) {
            Some((n, text)) => GpuConfig::from_toml(&format!("configs/{n}.toml"), text),
            None => Err(ConfigError::UnknownPreset(
                name.to_string(),
                PRESETS
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", "),
            )),
        }
    }

    /// Sets `[sm.tlp]` (a command line's override), checked as the file's would be.
    pub fn set_tlp(&mut self, tlp: crate::tlp::TlpConfig) -> Result<(), ConfigError> {
        let old = std::mem::replace(&mut self.sm.tlp, tlp);
        let r = self.validate("--tlp");
        if r.is_err() {
            self.sm.tlp = old;
        }
        r
    }

    fn validate(&mut self, file: &str) -> Result<(), ConfigError> {
        let invalid = |field: &str, what: &str| ConfigError::Invalid {
            file: file.to_string(),
            field: field.to_string(),
            what: what.to_string(),
        };
        self.check_ranges(file)?;
        let r = &self.sm.resources;
        if self.sm.count == 0 {
            return Err(invalid("sm.count", "must be at least 1"));
        }
        if self.sm.clock_mhz.is_nan() || self.sm.clock_mhz <= 0.0 {
            return Err(invalid("sm.clock_mhz", "must be positive"));
        }
        if let Err((field, what)) = self.sm.tlp.check() {
            return Err(invalid(field, &what));
        }
        if !self.sm.tlp.is_off()
            && self
                .memory
                .translating()
                .is_some_and(|t| !t.tb_switch.is_off())
        {
            return Err(invalid(
                "sm.tlp.scheme",
                "cannot be combined with memory.translation.tb_switch (both switch TBs out of their SM)",
            ));
        }
        if self.sm.warp_schedulers == 0 {
            return Err(invalid("sm.warp_schedulers", "must be at least 1"));
        }
        if self.pipeline.register_banks == 0 {
            return Err(invalid("pipeline.register_banks", "must be at least 1"));
        }
        let f = &self.pipeline.fetch;
        if f.inst_bytes == 0 || f.ibuffer_entries == 0 || f.hit_latency == 0 {
            return Err(invalid(
                "pipeline.fetch",
                "inst_bytes, ibuffer_entries and hit_latency must be positive",
            ));
        }
        let way_bytes = f.icache_line_bytes.checked_mul(f.icache_assoc).unwrap_or(0);
        if way_bytes == 0 || f.icache_bytes == 0 || !f.icache_bytes.is_multiple_of(way_bytes) {
            return Err(invalid(
                "pipeline.fetch.icache_bytes",
                "must be a positive multiple of icache_line_bytes × icache_assoc",
            ));
        }
        if r.max_warps == 0 || r.max_threads == 0 || r.max_tbs == 0 || r.registers == 0 {
            return Err(invalid(
                "sm.resources",
                "max_warps, max_threads, max_tbs and registers must be positive",
            ));
        }
        if r.max_threads > r.max_warps * 32 {
            return Err(invalid(
                "sm.resources.max_threads",
                "exceeds max_warps × 32",
            ));
        }
        if r.max_threads < crate::occupancy::WARP_SIZE {
            return Err(invalid(
                "sm.resources.max_threads",
                "must hold at least one warp (32 threads)",
            ));
        }
        // Relations between fields: each value may be in range and the machine still unable
        // to run anything, or the field silently ignored.
        let max_regs = r.max_registers_per_thread;
        let (min_regs, isa_regs) = (regalloc::MIN_GPRS, 255);
        if !(min_regs..=isa_regs).contains(&max_regs) {
            return Err(invalid(
                "sm.resources.max_registers_per_thread",
                &format!(
                    "{max_regs} is out of {min_regs}..={isa_regs} (the register allocator needs {min_regs}; PTX allows at most {isa_regs})"
                ),
            ));
        }
        if u64::from(max_regs) * u64::from(crate::occupancy::WARP_SIZE) > u64::from(r.registers) {
            return Err(invalid(
                "sm.resources.max_registers_per_thread",
                &format!(
                    "{max_regs} registers × 32 threads exceed sm.resources.registers {}: a warp using them could never be resident",
                    r.registers
                ),
            ));
        }
        if r.uniform_registers > MAX_UNIFORM_REGISTERS {
            return Err(invalid(
                "sm.resources.uniform_registers",
                &format!(
                    "{} is over {MAX_UNIFORM_REGISTERS} (the uniform registers a warp can name, UR0 to UR62)",
                    r.uniform_registers
                ),
            ));
        }
        let (RegisterAllocation::Thread { unit } | RegisterAllocation::Warp { unit }) =
            r.register_allocation;
        if unit == 0 {
            return Err(invalid(
                "sm.resources.register_allocation.unit",
                "must be at least 1",
            ));
        }
        if r.shared_allocation_unit == 0 {
            return Err(invalid(
                "sm.resources.shared_allocation_unit",
                "must be at least 1",
            ));
        }
        if r.shared_memory.is_empty() || r.shared_memory.windows(2).any(|w| w[0] > w[1]) {
            return Err(invalid(
                "sm.resources.shared_memory",
                "needs at least one size, smallest first",
            ));
        }
        // A unit may be in range and still round every TB past the SM: a warp that uses the
        // most registers a thread may have must fit in the register file once rounded, and a
        // TB with one byte of shared memory in the largest carve-out (else every kernel that
        // the allocator accepts, or every kernel using shared memory, is turned away at launch
        // with an error that blames the kernel).
        let warp = u64::from(crate::occupancy::WARP_SIZE);
        let rounded_warp = match r.register_allocation {
            RegisterAllocation::Thread { unit } => {
                warp * u64::from(max_regs).next_multiple_of(u64::from(unit))
            }
            RegisterAllocation::Warp { unit } => {
                (warp * u64::from(max_regs)).next_multiple_of(u64::from(unit))
            }
        };
        if rounded_warp > u64::from(r.registers) {
            return Err(invalid(
                "sm.resources.register_allocation.unit",
                &format!(
                    "{unit} rounds a warp of {max_regs} registers per thread (sm.resources.max_registers_per_thread) up to {rounded_warp} registers, more than sm.resources.registers {}",
                    r.registers
                ),
            ));
        }
        let largest = r.shared_memory.last().copied().unwrap_or(0);
        if r.shared_allocation_unit > largest {
            return Err(invalid(
                "sm.resources.shared_allocation_unit",
                &format!(
                    "{} is more than the largest sm.resources.shared_memory carve-out {largest}: no TB using shared memory could be placed",
                    r.shared_allocation_unit
                ),
            ));
        }
        let h = &self.host;
        if !(h.pcie_gbps.is_finite() && h.pcie_gbps > 0.0) {
            return Err(invalid("host.pcie_gbps", "must be positive"));
        }
        for (field, v) in [
            ("host.copy_latency_us", h.copy_latency_us),
            ("host.launch_latency_us", h.launch_latency_us),
        ] {
            if !(v.is_finite() && (0.0..=1.0e6).contains(&v)) {
                return Err(invalid(field, "must be between 0 and 10^6 µs"));
            }
        }
        if h.copy_engines == 0 || h.copy_engines > 64 {
            return Err(invalid("host.copy_engines", "must be in 1..=64"));
        }
        if u64::from(largest) != self.memory.shared.size_bytes {
            return Err(invalid(
                "memory.shared.size_bytes",
                &format!(
                    "{} differs from the largest sm.resources.shared_memory carve-out {largest}",
                    self.memory.shared.size_bytes
                ),
            ));
        }
        let mem = |e: memsys::ConfigError| {
            let memsys::ConfigError::Invalid { what, reason } = e;
            ConfigError::Invalid {
                file: file.to_string(),
                field: format!("memory.{what}"),
                what: reason,
            }
        };
        self.memory
            .complete(self.sm.count as usize, self.sm.clock_mhz)
            .map_err(mem)?;
        self.memory.validate().map_err(mem)?;
        Ok(())
    }

    /// Every number in the configuration lies in a physically meaningful range (see
    /// [`ceiling`]), checked before anything is sized from it: a latency of 4 billion cycles
    /// or 4 billion SMs is a mistake, and would otherwise hang or exhaust memory.
    fn check_ranges(&self, file: &str) -> Result<(), ConfigError> {
        let value = toml::Value::try_from(self).map_err(|e| ConfigError::Parse {
            file: file.to_string(),
            message: e.to_string(),
        })?;
        let mut bad = None;
        let mut values = std::collections::HashMap::new();
        walk_numbers(&value, &mut String::new(), &mut |path, v| {
            let max = ceiling(path);
            if bad.is_none() && !(v.is_finite() && v <= max) {
                bad = Some((path.to_string(), v, max));
            }
            values.entry(path.to_string()).or_insert(v);
        });
        if let Some((field, v, max)) = bad {
            return Err(ConfigError::Invalid {
                file: file.to_string(),
                field,
                what: format!("{v} is out of range: at most {max}"),
            });
        }
        // Each value may be in range and their product still more state than a run can
        // hold: the simulator sizes these arrays up front.
        let get = |path: &str| values.get(path).copied().unwrap_or(0.0);
        let lines = |cache: &str| {
            get(&format!("memory.{cache}.size_bytes"))
                / get(&format!("memory.{cache}.line_bytes")).max(1.0)
        };
        let products = [
            (
                "memory",
                "cache lines in all (sm.count × (l1 + const_cache lines) + l2_slices × l2 lines)",
                get("sm.count") * (lines("l1") + lines("const_cache"))
                    + get("memory.l2_slices") * lines("l2"),
                (1u64 << 25) as f64,
            ),
            (
                "memory.max_outstanding_accesses",
                "outstanding accesses in all (× sm.count)",
                get("sm.count") * get("memory.max_outstanding_accesses"),
                (1u64 << 22) as f64,
            ),
            (
                "memory.translation.l1_tlb.entries",
                "L1 TLB entries in all (× sm.count)",
                get("sm.count") * get("memory.translation.l1_tlb.entries"),
                (1u64 << 22) as f64,
            ),
            (
                "memory.dram",
                "DRAM queue entries and banks in all (× dram_channels)",
                get("memory.dram_channels")
                    * (get("memory.dram.queue_entries") + get("memory.dram.banks")),
                (1u64 << 22) as f64,
            ),
        ];
        for (field, what, v, max) in products {
            if v > max {
                return Err(ConfigError::Invalid {
                    file: file.to_string(),
                    field: field.to_string(),
                    what: format!("{v} {what} is more than the simulator holds: at most {max}"),
                });
            }
        }
        Ok(())
    }
}

/// Calls `f` with the dotted path and value of every number under `v` (array elements take
/// their array's path).
fn walk_numbers(v: &toml::Value, path: &mut String, f: &mut impl FnMut(&str, f64)) {
    match v {
        toml::Value::Integer(i) => f(path, *i as f64),
        toml::Value::Float(x) => f(path, *x),
        toml::Value::Array(items) => items.iter().for_each(|x| walk_numbers(x, path, f)),
        toml::Value::Table(t) => {
            for (k, x) in t {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                walk_numbers(x, path, f);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// The largest value a configuration field may take. The bounds are generous (well beyond
/// any GPU built) but keep every count the simulator sizes arrays from, and every latency
/// it waits for, within what a run can hold and finish.
fn ceiling(path: &str) -> f64 {
    let leaf = path.rsplit('.').next().unwrap_or(path);
    match path {
        "sm.count" => 1024.0,
        "sm.warp_schedulers" => 64.0,
        "sm.resources.max_warps" | "sm.resources.max_tbs" => 1024.0,
        "sm.resources.max_threads" => 32768.0,
        "sm.resources.registers" => (1u64 << 20) as f64,
        "sm.resources.shared_memory" | "memory.shared.size_bytes" => (1u64 << 24) as f64,
        "pipeline.register_banks" => 1024.0,
        // Translation (only when enabled: a switched-off section is not serialized).
        "memory.translation.l1_tlb.entries" | "memory.translation.l2_tlb.entries" => 65536.0,
        "memory.translation.l1_tlb.mshrs"
        | "memory.translation.l2_tlb.mshrs"
        | "memory.translation.walkers" => 4096.0,
        "host.pcie_gbps" => 100_000.0,
        _ if leaf.ends_with("_mhz") => 100_000.0,
        _ if leaf == "size_bytes" => (1u64 << 28) as f64,
        _ if leaf.ends_with("bytes") => (1u64 << 20) as f64,
        _ => 1_000_000.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_loads() {
        for (name, _) in PRESETS {
            let c = GpuConfig::preset(name).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(&c.name, name);
        }
    }

    #[test]
    fn unknown_fields_are_named() {
        let text = PRESETS[0].1.replace("count = 15", "count = 15\ncuont = 3");
        let e = GpuConfig::from_toml("x.toml", &text)
            .unwrap_err()
            .to_string();
        assert!(e.contains("cuont"), "{e}");
        let text = PRESETS[0].1.replace("count = 15", "count = 0");
        let e = GpuConfig::from_toml("x.toml", &text)
            .unwrap_err()
            .to_string();
        assert!(e.contains("sm.count"), "{e}");
        let text = PRESETS[0]
            .1
            .replace("scheduler = \"lrr\"", "scheduler = \"fifo\"");
        let e = GpuConfig::from_toml("x.toml", &text)
            .unwrap_err()
            .to_string();
        assert!(e.contains("fifo") && e.contains("lrr"), "{e}");
        let text = PRESETS[0].1.replace("t_rcd = 12", "t_rcd = 12\nt_rdc = 3");
        let e = GpuConfig::from_toml("x.toml", &text)
            .unwrap_err()
            .to_string();
        assert!(e.contains("t_rdc"), "{e}");
        let text = PRESETS[0].1.replace("l2_slices = 12", "l2_slices = 7");
        let e = GpuConfig::from_toml("x.toml", &text)
            .unwrap_err()
            .to_string();
        assert!(e.contains("memory") && e.contains("l2_slices"), "{e}");
        let text = PRESETS[0]
            .1
            .replace("size_bytes = 49152", "size_bytes = 16384");
        let e = GpuConfig::from_toml("x.toml", &text)
            .unwrap_err()
            .to_string();
        assert!(e.contains("memory.shared.size_bytes"), "{e}");
        for (from, to, field) in [
            (
                "register_banks = 16",
                "register_banks = 0",
                "pipeline.register_banks",
            ),
            (
                "icache_bytes = 2048",
                "icache_bytes = 2000",
                "pipeline.fetch.icache_bytes",
            ),
            (
                "icache_assoc = 4",
                "icache_assoc = 4294967295",
                "pipeline.fetch.icache_assoc",
            ),
            (
                "ibuffer_entries = 2",
                "ibuffer_entries = 0",
                "pipeline.fetch",
            ),
            (
                "hit_latency = 2 ",
                "hit_latency = 2\nhit_latncy = 1 ",
                "hit_latncy",
            ),
            ("pcie_gbps = 8.0", "pcie_gbps = 0.0", "host.pcie_gbps"),
            ("copy_engines = 1", "copy_engines = 0", "host.copy_engines"),
            ("count = 15", "count = 4294967295", "sm.count"),
            (
                "register_banks = 16",
                "register_banks = 4294967295",
                "pipeline.register_banks",
            ),
            ("t_rcd = 12", "t_rcd = 4294967295", "memory.dram.t_rcd"),
            (
                "hit_latency = 120",
                "hit_latency = 4000000000",
                "memory.l2.hit_latency",
            ),
            (
                "icnt_mhz = 700.0",
                "icnt_mhz = inf",
                "memory.clocks.icnt_mhz",
            ),
            (
                "l2_slices = 12",
                "l2_slices = 1000000",
                "cache lines in all",
            ),
            (
                "max_outstanding_accesses = 64",
                "max_outstanding_accesses = 1000000",
                "memory.max_outstanding_accesses",
            ),
            (
                "launch_latency_us = 5.0",
                "launch_latency_us = -1.0",
                "host.launch_latency_us",
            ),
        ] {
            let text = PRESETS[0].1.replace(from, to);
            assert_ne!(text, PRESETS[0].1, "{from}");
            let e = GpuConfig::from_toml("x.toml", &text)
                .unwrap_err()
                .to_string();
            assert!(e.contains(field), "{e}");
        }
        assert!(GpuConfig::preset("gtx4800")
            .unwrap_err()
            .to_string()
            .contains("gtx480"));
    }

    /// `[memory.translation]`: a bad value names the file and the dotted field, enabled or
    /// not (papers/tanasic-thesis Table 6.1's values load).
    #[test]
    fn tlp_settings_are_read_and_bad_ones_named() {
        use crate::tlp::TlpScheme;
        let text = PRESETS.iter().find(|(n, _)| *n == "maxwell16").unwrap().1;
        assert!(GpuConfig::from_toml("m.toml", text)
            .unwrap()
            .sm
            .tlp
            .is_off());
        let with = |table: &str| format!("{text}\n[sm.tlp]\n{table}\n");
        let c = GpuConfig::from_toml(
            "m.toml",
            &with("scheme = \"gpuduet\"\nmax_extra_tbs = 3\nport_bytes = 64"),
        )
        .unwrap();
        assert_eq!(
            (c.sm.tlp.scheme, c.sm.tlp.max_extra_tbs, c.sm.tlp.port_bytes),
            (TlpScheme::Gpuduet, 3, 64)
        );
        for (table, field) in [
            ("scheme = \"duet\"", "scheme"),
            ("max_extra_tbs = 0", "sm.tlp.max_extra_tbs"),
            ("max_extra_tbs = 65", "sm.tlp.max_extra_tbs"),
            ("port_bytes = 0", "sm.tlp.port_bytes"),
            ("ports = 1", "ports"),
        ] {
            let e = GpuConfig::from_toml("m.toml", &with(table))
                .unwrap_err()
                .to_string();
            assert!(e.contains("m.toml") && e.contains(field), "{table}: {e}");
        }
        // Both switch TBs out of their SM: refused together.
        let fault = PRESETS.iter().find(|(n, _)| *n == "fault-study").unwrap().1;
        let both = format!(
            "{}\n[sm.tlp]\nscheme = \"vt\"\n",
            fault.replace(
                "pipeline = \"stall\"",
                "pipeline = \"replay-queue\"\ntb_switch = \"save\""
            )
        );
        let e = GpuConfig::from_toml("f.toml", &both)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("sm.tlp.scheme") && e.contains("tb_switch"),
            "{e}"
        );
    }

    #[test]
    fn bad_translation_values_name_the_file_and_field() {
        let c = GpuConfig::preset("fault-study").unwrap();
        let t = c.memory.translating().expect("fault-study translates");
        assert_eq!(
            (
                t.l1_tlb.entries,
                t.l1_tlb.assoc,
                t.l1_tlb.latency,
                t.l1_tlb.mshrs
            ),
            (32, 8, 40, 32)
        );
        assert_eq!(
            (
                t.l2_tlb.entries,
                t.l2_tlb.assoc,
                t.l2_tlb.latency,
                t.l2_tlb.mshrs
            ),
            (1024, 8, 70, 128)
        );
        assert_eq!((t.walkers, t.walk_latency, t.page_kb), (64, 500, 4));
        let f = t.faults.as_ref().expect("fault-study pages on demand");
        assert_eq!((f.granularity_kb, f.batch_size), (64, 256));
        assert_eq!((f.pcie.transfer_us, f.pcie.alloc_us), (25.0, 12.0));
        assert_eq!((f.nvlink.transfer_us, f.nvlink.alloc_us), (12.0, 10.0));
        assert_eq!((f.handler, f.gpu_handler_us), (memsys::Handler::Cpu, 20.0));
        for (name, _) in PRESETS {
            let c = GpuConfig::preset(name).unwrap();
            assert!(c.memory.translation.is_some(), "{name} describes its TLBs");
            assert_eq!(
                c.memory.translating().is_some(),
                *name == "fault-study",
                "{name}"
            );
        }
        let text = PRESETS.iter().find(|(n, _)| *n == "fault-study").unwrap().1;
        for (from, to, field) in [
            ("page_kb = 4 ", "page_kb = 8 ", "memory.translation.page_kb"),
            (
                "\nentries = 32\n",
                "\nentries = 0\n",
                "memory.translation.l1_tlb.entries",
            ),
            (
                "\nentries = 32\nassoc = 8",
                "\nentries = 32\nassoc = 3",
                "memory.translation.l1_tlb.assoc",
            ),
            (
                "\nentries = 1024\nassoc = 8",
                "\nentries = 1024\nassoc = 0",
                "memory.translation.l2_tlb.assoc",
            ),
            (
                "latency = 70\nmshrs = 128",
                "latency = 70\nmshrs = 0",
                "memory.translation.l2_tlb.mshrs",
            ),
            ("walkers = 64", "walkers = 0", "memory.translation.walkers"),
            (
                "walk_latency = 500",
                "walk_latency = 0",
                "memory.translation.walk_latency",
            ),
            ("walkers = 64", "walkers = 64\nwalker = 3", "walker"),
            (
                "walk_latency = 500",
                "walk_latency = 4000000000",
                "memory.translation.walk_latency",
            ),
            (
                "\nentries = 1024\n",
                "\nentries = 1048576\n",
                "memory.translation.l2_tlb.entries",
            ),
            (
                "mshrs = 32\n\n[memory.translation.l2_tlb]",
                "mshrs = 100000\n\n[memory.translation.l2_tlb]",
                "memory.translation.l1_tlb.mshrs",
            ),
            // Demand paging (papers/tanasic-thesis §6.5.3).
            (
                "granularity_kb = 64 ",
                "granularity_kb = 2 ",
                "memory.translation.faults.granularity_kb",
            ),
            (
                "batch_size = 256 ",
                "batch_size = 0 ",
                "memory.translation.faults.batch_size",
            ),
            (
                "transfer_us = 25.0",
                "transfer_us = -1.0",
                "memory.translation.faults.pcie.transfer_us",
            ),
            (
                "transfer_us = 12.0",
                "transfer_us = 2000000.0",
                "memory.translation.faults.nvlink.transfer_us",
            ),
            ("link = \"pcie\"", "link = \"pci\"", "link"),
            ("handler = \"cpu\"", "handler = \"host\"", "handler"),
            (
                "gpu_handler_us = 20.0",
                "gpu_handler_us = 0.0",
                "memory.translation.faults.gpu_handler_us",
            ),
            // Pipeline organisations (papers/tanasic-thesis §6.3).
            ("pipeline = \"stall\"", "pipeline = \"replay\"", "pipeline"),
            ("pipeline = \"stall\"", "pipeline = 3", "pipeline"),
            (
                "pipeline = \"stall\"",
                "pipeline = \"operand-log\"\noperand_log_bytes = 4096",
                "memory.translation.operand_log_bytes",
            ),
            (
                "pipeline = \"stall\"",
                "pipeline = \"operand-log\"\noperand_log_bytes = 65536",
                "memory.translation.operand_log_bytes",
            ),
            (
                "batch_size = 256 ",
                "batch_size = 256\nbatches = 1 ",
                "batches",
            ),
            // TB switching on fault (papers/tanasic-thesis §6.4.1).
            (
                "pipeline = \"stall\"",
                "pipeline = \"stall\"\ntb_switch = \"ideal\"",
                "memory.translation.tb_switch",
            ),
            (
                "pipeline = \"stall\"",
                "pipeline = \"replay-queue\"\ntb_switch = \"fast\"",
                "tb_switch",
            ),
            (
                "pipeline = \"stall\"",
                "pipeline = \"replay-queue\"\ntb_switch = \"save\"\ntb_switch_extra = 0",
                "memory.translation.tb_switch_extra",
            ),
            (
                "pipeline = \"stall\"",
                "pipeline = \"replay-queue\"\ntb_switch = \"save\"\ntb_switch_extra = 65",
                "memory.translation.tb_switch_extra",
            ),
        ] {
            let bad = text.replace(from, to);
            assert_ne!(bad, text, "{from}");
            let e = GpuConfig::from_toml("mine.toml", &bad)
                .unwrap_err()
                .to_string();
            assert!(e.contains("mine.toml") && e.contains(field), "{e}");
        }
        // Each L1 TLB within bounds, but too many of them.
        let many = text
            .replace("count = 16\n", "count = 128\n")
            .replace("\nentries = 32\n", "\nentries = 65536\n");
        let e = GpuConfig::from_toml("mine.toml", &many)
            .unwrap_err()
            .to_string();
        assert!(e.contains("L1 TLB entries in all"), "{e}");
        // Checked when off too.
        let off = text.replace("enabled = true", "enabled = false");
        let e = GpuConfig::from_toml("mine.toml", &off.replace("walkers = 64", "walkers = 0"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("memory.translation.walkers"), "{e}");
        // TB switching needs translation on.
        let switching = off.replace(
            "pipeline = \"stall\"",
            "pipeline = \"wd-commit\"\ntb_switch = \"ideal\"",
        );
        let e = GpuConfig::from_toml("mine.toml", &switching)
            .unwrap_err()
            .to_string();
        assert!(e.contains("memory.translation.tb_switch"), "{e}");
    }

    /// Each value in range, but together unable to run anything, or a field that would be
    /// silently ignored: refused, naming the dotted field.
    #[test]
    fn relations_between_fields_are_checked() {
        let gtx480 = PRESETS.iter().find(|(n, _)| *n == "gtx480").unwrap().1;
        for (from, to, field, what) in [
            // A refresh every 100 cycles that lasts 102 + t_rp: always refreshing.
            (
                "t_refi = 3604",
                "t_refi = 100",
                "memory.dram.t_refi",
                "always be refreshing",
            ),
            (
                "t_refi = 3604",
                "t_refi = 102",
                "memory.dram.t_refi",
                "always be refreshing",
            ),
            (
                "max_registers_per_thread = 63",
                "max_registers_per_thread = 0",
                "sm.resources.max_registers_per_thread",
                "out of 16..=255",
            ),
            (
                "max_registers_per_thread = 63",
                "max_registers_per_thread = 300",
                "sm.resources.max_registers_per_thread",
                "out of 16..=255",
            ),
            (
                "registers = 32768 ",
                "registers = 1024 ",
                "sm.resources.max_registers_per_thread",
                "exceed sm.resources.registers",
            ),
            (
                "shared_allocation_unit = 1 ",
                "uniform_registers = 64\nshared_allocation_unit = 1 ",
                "sm.resources.uniform_registers",
                "over 63",
            ),
            (
                "unit = 4 }",
                "unit = 0 }",
                "sm.resources.register_allocation.unit",
                "at least 1",
            ),
            (
                "shared_allocation_unit = 1 ",
                "shared_allocation_unit = 0 ",
                "sm.resources.shared_allocation_unit",
                "at least 1",
            ),
            (
                "max_threads = 1536 ",
                "max_threads = 16 ",
                "sm.resources.max_threads",
                "one warp",
            ),
        ] {
            let text = gtx480.replace(from, to);
            assert_ne!(text, gtx480, "{from}");
            let e = GpuConfig::from_toml("x.toml", &text)
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("x.toml: `") && e.contains(&format!("`{field}`")) && e.contains(what),
                "{to}: {e}"
            );
        }
        // Refresh off, and a refresh with time to spare, are fine.
        assert!(
            GpuConfig::from_toml("x.toml", &gtx480.replace("t_refi = 3604", "t_refi = 0")).is_ok()
        );
        assert!(
            GpuConfig::from_toml("x.toml", &gtx480.replace("t_refi = 3604", "t_refi = 200"))
                .is_ok()
        );
    }
}
