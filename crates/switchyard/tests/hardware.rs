//! The real-GPU device server's protocol, checked against its `--fake` mode (host memory, no
//! GPU, launches that do nothing), and `switchyard hardware` end to end on it.

use std::path::PathBuf;
use std::process::Command;

use suite::{Arg, DevPtr, Device, Dim3, Launch};
use switchyard::hardware::ServerDevice;

fn server(extra: &str) -> String {
    let tool = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tools/cuda_device.py");
    format!("python3 {} --fake {extra}", tool.display())
}

#[test]
fn bytes_written_read_back_and_launches_are_recorded_with_their_arguments() {
    let mut dev = ServerDevice::spawn(&server("--reps 3")).expect("fake server starts");
    assert_eq!(dev.info.device, "fake (no GPU)");
    let a = dev.alloc(1000).unwrap();
    let b = dev.alloc(8).unwrap();
    assert_ne!(a, b);
    assert!(b.0 >= a.0 + 1000, "allocations overlap: {a:?} {b:?}");
    let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
    dev.write(a, &data).unwrap();
    assert_eq!(dev.read(a, 1000).unwrap(), data);
    // A read at an offset inside an allocation, and one of no bytes.
    assert_eq!(dev.read(DevPtr(a.0 + 10), 5).unwrap(), data[10..15]);
    assert_eq!(dev.read(b, 0).unwrap(), Vec::<u8>::new());

    dev.load("k", ".version 8.0\n.target sm_90\n.entry k() { ret; }")
        .unwrap();
    let args = [Arg::Ptr(a), Arg::F32(1.5), Arg::I32(-2)];
    dev.launch(&Launch {
        entry: "k",
        grid: Dim3::xy(4, 2),
        block: Dim3::x(128),
        dynamic_smem: 64,
        args: &args,
    })
    .unwrap();
    let launches = dev.take_launches();
    assert_eq!(launches.len(), 1);
    assert_eq!(launches[0].entry, "k");
    assert_eq!(launches[0].grid, [4, 2, 1]);
    assert_eq!(launches[0].block, [128, 1, 1]);
    assert_eq!(launches[0].ms.len(), 3, "one time per repetition");
    assert!(dev.take_launches().is_empty());
}

#[test]
fn the_servers_errors_reach_the_host_program_and_reset_frees_everything() {
    let mut dev = ServerDevice::spawn(&server("")).unwrap();
    let a = dev.alloc(16).unwrap();
    let e = dev.read(DevPtr(a.0 + 8), 16).unwrap_err();
    assert!(e.0.contains("outside every allocation"), "{e}");
    // The server is still there after an error that is not a launch's.
    dev.write(a, &[1; 16]).unwrap();
    dev.reset().unwrap();
    assert!(dev.read(a, 1).is_err(), "reset freed the allocation");
    let e = dev.load("m", "no entries here").unwrap_err();
    assert!(e.0.contains("no .entry"), "{e}");
}

#[test]
fn a_server_that_cannot_start_is_an_error_naming_it() {
    let e = ServerDevice::spawn("exit 3").err().expect("no server");
    assert!(e.0.contains("exited"), "{e}");
    let e = ServerDevice::spawn("echo not-json")
        .err()
        .expect("no server");
    assert!(e.0.contains("not-json"), "{e}");
}

#[test]
fn hardware_command_runs_the_host_program_and_reports_failure_when_nothing_computes() {
    // The fake server computes nothing, so the suite's CPU reference must reject the result:
    // the command exits non-zero, and the report still records every launch.
    let dir = tempdir();
    let out = dir.join("hw.json");
    let status = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args([
            "hardware",
            "reduce",
            "--server",
            &server("--reps 2"),
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        !status.status.success(),
        "a fake GPU cannot pass verification"
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let run = &report["runs"][0];
    assert_eq!(run["kernel"], "reduce");
    assert_eq!(run["verified"], false);
    let launches = run["launches"].as_array().unwrap();
    assert!(!launches.is_empty());
    assert_eq!(launches[0]["ms"].as_array().unwrap().len(), 2);

    // --report reads it back; --compare against a stats file with other kernels leaves
    // every kernel out and says why (an unverified real run is never compared).
    let stats = dir.join("stats.json");
    std::fs::write(
        &stats,
        r#"{"gpu": {"sm": {"clock_mhz": 1000.0}}, "runs": [{"kernel": "reduce", "launches": [{"cycles": 10}]}]}"#,
    )
    .unwrap();
    let cmp = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["hardware", "--report"])
        .arg(&out)
        .arg("--compare")
        .arg(&stats)
        .args(["--hw-clock-mhz", "1000", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&cmp.stdout).unwrap();
    assert_eq!(v["agreement"]["kernels"], 0, "{v}");
}

fn tempdir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("switchyard-hw-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
