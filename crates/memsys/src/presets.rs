//! The memory hierarchies of the GPUs the papers evaluated on, and of three recent GPUs.
//!
//! The source of truth is the `[memory]` section of each GPU configuration file in
//! `configs/` (the same files `gpu::config` reads), where every value is either from the
//! paper's configuration table or an assumption stated next to it (mostly GPGPU-Sim defaults
//! for that generation, since every paper ran GPGPU-Sim or a simulator calibrated the same
//! way). This module reads that section, taking the SM count and core clock from the file's
//! `[sm]` section, so the memory system can be built and tested on its own.

use serde::Deserialize;

use crate::system::MemConfig;
use crate::ConfigError;

/// The configuration files: (preset name, TOML text).
pub const FILES: &[(&str, &str)] = &[
    ("gtx480", include_str!("../../../configs/gtx480.toml")),
    ("gtx980", include_str!("../../../configs/gtx980.toml")),
    ("k20c", include_str!("../../../configs/k20c.toml")),
    ("maxwell16", include_str!("../../../configs/maxwell16.toml")),
    (
        "fault-study",
        include_str!("../../../configs/fault-study.toml"),
    ),
    ("v100", include_str!("../../../configs/v100.toml")),
    ("a100", include_str!("../../../configs/a100.toml")),
    ("h100", include_str!("../../../configs/h100.toml")),
];

/// The parts of a GPU configuration file the memory system needs (other fields are ignored
/// here; `gpu::config` checks them).
#[derive(Deserialize)]
struct GpuFile {
    sm: SmPart,
    memory: MemConfig,
}

#[derive(Deserialize)]
struct SmPart {
    count: usize,
    clock_mhz: f64,
}

/// Reads the `[memory]` section of a GPU configuration file and validates it.
pub fn from_gpu_toml(text: &str) -> Result<MemConfig, ConfigError> {
    let f: GpuFile = toml::from_str(text).map_err(|e| ConfigError::Invalid {
        what: "memory",
        reason: e.to_string(),
    })?;
    let mut m = f.memory;
    m.complete(f.sm.count, f.sm.clock_mhz)?;
    m.validate()?;
    Ok(m)
}

/// The memory system of a built-in preset.
pub fn preset(name: &str) -> Result<MemConfig, ConfigError> {
    let (_, text) = FILES
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(|| ConfigError::Invalid {
            what: "preset",
            reason: format!(
                "no preset `{name}`; presets: {}",
                FILES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            ),
        })?;
    from_gpu_toml(text)
}

fn builtin(name: &str) -> MemConfig {
    // The files are compiled in and every one is parsed by `every_preset_parses`.
    preset(name).unwrap_or_else(|e| panic!("built-in preset {name}: {e}"))
}

/// NVIDIA GTX480 (Fermi), papers/lin-lightweight Table I (`configs/gtx480.toml`).
pub fn gtx480() -> MemConfig {
    builtin("gtx480")
}

/// NVIDIA GTX980 (Maxwell GM204), papers/li-pep Table 2 (`configs/gtx980.toml`).
pub fn gtx980() -> MemConfig {
    builtin("gtx980")
}

/// NVIDIA K20c (Kepler), papers/tanasic-thesis Table 5.1 (`configs/k20c.toml`).
pub fn k20c() -> MemConfig {
    builtin("k20c")
}

/// Maxwell-like 16-SM GPU, papers/lin-thesis Table 4.1 (`configs/maxwell16.toml`).
pub fn maxwell16() -> MemConfig {
    builtin("maxwell16")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_parses() {
        for (name, _) in FILES {
            preset(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn presets_match_tables() {
        let gb = |name: &str| preset(name).unwrap().dram_peak_bytes_per_s() / 1e9;
        // lin-lightweight Table I: 177 GB/s; L2 128 KB per channel.
        assert!((gb("gtx480") - 177.4).abs() < 0.5);
        let g = gtx480();
        assert_eq!(
            g.l2.size_bytes * g.l2_slices as u64 / g.dram_channels as u64,
            128 * 1024
        );
        assert_eq!((g.num_sms, g.clocks.core_mhz), (15, 700.0));
        // tanasic-thesis Table 5.1: 208 GB/s; Table 6.1: 250 GB/s, L2 2 MB, 512 MSHRs.
        assert!((gb("k20c") - 208.0).abs() < 0.5);
        assert!((gb("fault-study") - 250.0).abs() < 0.5);
        let f = preset("fault-study").unwrap();
        assert_eq!(f.l2.size_bytes * f.l2_slices as u64, 2 << 20);
        assert_eq!(f.l2.mshr_entries as usize * f.l2_slices, 512);
        // GTX980: 7 GHz effective × 256 bit = 224 GB/s.
        assert!((gb("gtx980") - 224.0).abs() < 0.5);
        assert_eq!(maxwell16().l2.size_bytes, 128 * 1024);
        // Product specifications: V100 900 GB/s, A100 1555 GB/s, H100 SXM 3.35 TB/s; L2 6, 40
        // and 50 MB.
        assert!((gb("v100") / 900.0 - 1.0).abs() < 0.01);
        assert!((gb("a100") / 1555.0 - 1.0).abs() < 0.01);
        assert!((gb("h100") / 3350.0 - 1.0).abs() < 0.01);
        for (name, mib) in [("v100", 6), ("a100", 40), ("h100", 50)] {
            let c = preset(name).unwrap();
            assert_eq!(c.l2.size_bytes * c.l2_slices as u64, mib << 20, "{name}");
        }
    }

    #[test]
    fn bad_files_name_the_field() {
        let text = FILES[0].1.replace("t_rcd = 12", "t_rcd = 12\nt_rdc = 3");
        let e = from_gpu_toml(&text).unwrap_err().to_string();
        assert!(e.contains("t_rdc"), "{e}");
        assert!(preset("gtx4800")
            .unwrap_err()
            .to_string()
            .contains("gtx480"));
    }
}
