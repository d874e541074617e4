//! Issue 21 ("Trustworthy II"): no silent wrong result and no unbounded work from a small
//! file. Times that cannot be counted are errors, never sums that wrap; check tolerances
//! must be finite and non-negative; what a scenario asks to allocate or repeat is bounded
//! before it is done.

use std::path::Path;

use gpu::config::GpuConfig;
use gpu::timing::TimedGpu;
use workload::{parse, Files, RunError, Setup, System};

const SAXPY: &str = include_str!("../../../examples/saxpy/saxpy.ptx");

struct Mem;

impl Files for Mem {
    fn read(&self, path: &Path) -> Result<Vec<u8>, String> {
        match path.file_name().and_then(|f| f.to_str()) {
            Some("saxpy.ptx") => Ok(SAXPY.as_bytes().to_vec()),
            _ => Err("No such file or directory".into()),
        }
    }
}

/// Copies x to the device, runs saxpy (y = 2x + y) and copies y back.
const SAXPY_RUN: &str = r#"[[process]]
name = "p"
ptx = "saxpy.ptx"

[[process.buffer]]
name = "x"
type = "f32"
len = 64
init = "iota"

[[process.buffer]]
name = "y"
type = "f32"
len = 64
init = "fill"
value = 1.0

[[process.command]]
copy = "x"

[[process.command]]
copy = "y"

[[process.command]]
launch = "saxpy"
grid = [1]
block = [64]
args = [{ buffer = "x" }, { buffer = "y" }, { f32 = 2.0 }, { u32 = 64 }]

[[process.command]]
copy = "y"
direction = "to_host"

[[process.check]]
buffer = "y"
fill = 1.0
"#;

fn error(text: &str) -> String {
    parse("s.toml", text, &Mem).unwrap_err().to_string()
}

fn run(text: &str) -> Result<workload::RunRecord, RunError> {
    let s = parse("s.toml", text, &Mem).unwrap_or_else(|e| panic!("{e}"));
    let gpu = GpuConfig::preset("gtx480").unwrap();
    let setup = Setup::for_scenario(&s, TimedGpu::new(gpu), 1 << 28);
    System::new(setup, &s.processes)?.run(&mut |_| {})
}

#[test]
fn a_copy_too_slow_to_count_is_an_error_not_a_wrapped_time() {
    // 256 bytes at 1e-12 GB/s take 2.6e14 ns: past what the host model counts. The sum
    // `now + latency + transfer` used to wrap and report the copy as fast.
    let text = format!("[host]\npcie_gbps = 1e-12\n\n{SAXPY_RUN}");
    match run(&text) {
        Err(e @ RunError::Time { .. }) => {
            let e = e.to_string();
            assert!(
                e.contains("process `p`")
                    && e.contains("copy of 256 bytes")
                    && e.contains("pcie_gbps"),
                "{e}"
            );
        }
        Ok(r) => panic!("ran, copies {:?}", r.copies),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn a_slower_link_never_makes_a_copy_faster() {
    let time = |gbps: &str| {
        let text = format!("[host]\npcie_gbps = {gbps}\ncopy_latency_us = 0.0\n\n{SAXPY_RUN}");
        let r = run(&text).unwrap_or_else(|e| panic!("{e}"));
        let c = &r.copies[0];
        c.finished_fs - c.started_fs
    };
    let (fast, slow) = (time("8.0"), time("1e-4"));
    // 256 bytes: 32 ns at 8 GB/s, 2.56 ms at 1e-4 GB/s.
    assert_eq!(fast, 32_000_000);
    assert_eq!(slow, 2_560_000_000_000);
}

#[test]
fn check_tolerances_must_be_finite_and_non_negative() {
    let with =
        |t: &str| SAXPY_RUN.replace("fill = 1.0\n", &format!("fill = 1.0\ntolerance = {t}\n"));
    assert!(parse("s.toml", &with("1e-6"), &Mem).is_ok());
    assert!(parse("s.toml", &with("0.0"), &Mem).is_ok());
    // The check is on line 34, its tolerance on line 37.
    for bad in ["inf", "nan", "-1e-6", "-inf", "+inf"] {
        let e = error(&with(bad));
        assert!(
            e.starts_with("s.toml:37:13:")
                && e.contains("process[0].check[0].tolerance")
                && e.contains("finite and non-negative"),
            "{bad}: {e}"
        );
    }
}

#[test]
fn an_infinite_tolerance_cannot_pass_a_wrong_result() {
    // Before the fix, `tolerance = inf` parsed and the check passed 63 wrong values.
    let r = run(SAXPY_RUN).unwrap();
    let verdict = format!("{:?}", r.processes[0].verdict);
    assert!(verdict.contains("y[1]"), "{verdict}");
    assert!(parse(
        "s.toml",
        &SAXPY_RUN.replace("fill = 1.0\n", "fill = 1.0\ntolerance = inf\n"),
        &Mem
    )
    .is_err());
}
