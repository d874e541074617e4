//! Seeded, bounded fuzzing of every entry point of `switchyard::fuzz`: a few hundred
//! mutations of real inputs each (seconds, not minutes), the same ones on every run. Longer,
//! coverage-guided runs use the cargo-fuzz targets in `fuzz/` (CONTRIBUTING.md).
//!
//! A failing input is written to the system's temporary directory and named in the panic
//! message, so it can be replayed through the entry point (or added to a cargo-fuzz corpus).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use switchyard::fuzz;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The files under `dir` (relative to the repository root) whose names end in `ext`.
fn files(dir: &str, ext: &str) -> Vec<Vec<u8>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(ext))
        .collect();
    paths.sort();
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// Runs `target` on `iterations` seeded mutations of `seeds`.
fn fuzz_with(name: &str, seeds: &[Vec<u8>], iterations: usize, seed: u64, target: fn(&[u8])) {
    assert!(!seeds.is_empty(), "{name}: no seed inputs");
    let mut state = seed | 1;
    for i in 0..iterations {
        let input = fuzz::mutate(&seeds[i % seeds.len()], &mut state);
        if catch_unwind(AssertUnwindSafe(|| target(&input))).is_err() {
            let path = std::env::temp_dir().join(format!("switchyard-fuzz-{name}-{i}"));
            std::fs::write(&path, &input).unwrap();
            panic!(
                "{name}: mutation {i} panicked; the input is in {}",
                path.display()
            );
        }
    }
}

#[test]
fn ptx_loading_survives_mutations() {
    let mut seeds: Vec<Vec<u8>> = suite::all()
        .iter()
        .map(|k| k.sources()[0].1.as_bytes().to_vec())
        .collect();
    seeds.extend(files("crates/switchyard/tests/data", ".ptx"));
    seeds.extend(files("crates/ptx/tests/data", ".ptx"));
    fuzz_with("ptx", &seeds, 300, 0x5eed_0001, fuzz::ptx);
}

#[test]
fn gpu_configurations_survive_mutations() {
    let seeds = files("configs", ".toml");
    fuzz_with("gpu-config", &seeds, 200, 0x5eed_0002, fuzz::gpu_config);
}

#[test]
fn the_gpu_config_target_runs_what_loads() {
    // Every preset loads and runs its warp of saxpy right (the target panics otherwise).
    for seed in files("configs", ".toml") {
        fuzz::gpu_config(&seed);
    }
    // A configuration the loader refuses is not run: a register allocation unit that
    // leaves no room for a warp (it loaded before issue 21, and no kernel could run).
    let gtx480 = std::fs::read_to_string(root().join("configs/gtx480.toml")).unwrap();
    let bad = gtx480.replace("unit = 4 }", "unit = 1025 }");
    assert_ne!(bad, gtx480);
    fuzz::gpu_config(bad.as_bytes());
}

#[test]
fn launch_specs_and_scenarios_survive_mutations() {
    let mut seeds = files("scenarios", ".toml");
    seeds.extend(files("crates/switchyard/tests/data", ".toml"));
    seeds.extend(files("examples/saxpy", ".toml"));
    seeds.extend(files("examples/texture", ".toml"));
    fuzz_with("spec", &seeds, 400, 0x5eed_0003, fuzz::spec);
}

#[test]
fn odd_kernels_end_alike_on_both_engines() {
    // Random bytes: the generator turns any bytes into a valid kernel.
    let mut state = 0x5eed_0004u64;
    let seeds: Vec<Vec<u8>> = (0..16)
        .map(|_| {
            (0..160)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect()
        })
        .collect();
    fuzz_with("functional", &seeds, 120, 0x5eed_0005, fuzz::functional);
    // The generator must reach both ends: kernels that run to completion and kernels that
    // fail (a fault, a deadlock, a runaway, a collective in divergent code).
    let mut state = 0x5eed_0006u64;
    let (mut finished, mut failed) = (0, Vec::new());
    for i in 0..200 {
        match fuzz::engines_agree(&fuzz::mutate(&seeds[i % seeds.len()], &mut state)) {
            Ok(_) => finished += 1,
            Err(e) => failed.push(e),
        }
    }
    assert!(
        finished >= 100,
        "{finished} of 200 finished; failures: {failed:#?}"
    );
    assert!(failed.len() >= 3, "{} of 200 failed", failed.len());
}

/// The `functional` target's finding of 2026-11-27 (fuzz/regressions/functional-divergent-shfl):
/// a loop steered by a shuffle from lanes that left it. The PTX ISA leaves such a shuffle
/// undefined, and register allocation changes what it reads, so the timed engine runs the
/// kernel as written to compare with the functional core: both end it, with the same
/// memory.
#[test]
fn a_shuffle_from_an_inactive_lane_is_compared_as_written() {
    let dir = root().join("fuzz/regressions/functional-divergent-shfl");
    let data = std::fs::read(dir.join("crash-9cf646b06ce95d6d1244efb885418cc01711f6ce")).unwrap();
    let memory = fuzz::engines_agree(&data).expect("both engines end the kernel");
    assert!(
        memory.iter().any(|&b| b != 0),
        "the kernel wrote its output"
    );
}
