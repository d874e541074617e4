//! `switchyard scenario` end to end: a report with times, metrics and verification; JSON,
//! CSV and a timeline that validates as a Chrome trace; a bad scenario is refused with its
//! location and a non-zero exit, leaving the outputs of an earlier run as they were.

use std::path::PathBuf;
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn switchyard(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("the binary runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "switchyard-cli-scenario-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_scenario_reports_times_metrics_and_writes_its_outputs() {
    let dir = scratch("ok");
    let trace = dir.join("trace.json");
    let csv = dir.join("csv");
    let o = switchyard(&[
        "scenario",
        "scenarios/saxpy-streams.toml",
        "--trace",
        trace.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    for want in [
        "pipelined",
        "loop",
        "PASS",
        "ANTT",
        "STP",
        "fairness",
        "NTT",
    ] {
        assert!(out.contains(want), "{want}: {out}");
    }
    let t: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    workload::trace::validate(&t).unwrap();
    let kernels = std::fs::read_to_string(csv.join("kernels.csv")).unwrap();
    assert_eq!(kernels.lines().count(), 1 + 4 + 3, "{kernels}");
    assert!(kernels.starts_with("process,kernel,stream,launch,called_us,arrived_us"));
    let copies = std::fs::read_to_string(csv.join("copies.csv")).unwrap();
    assert!(copies.contains("pipelined,1,to_device,262144"), "{copies}");

    // JSON: the same run, machine-readable, and deterministic.
    let j = |extra: &[&str]| {
        let mut args = vec!["scenario", "scenarios/saxpy-streams.toml", "--json"];
        args.extend_from_slice(extra);
        let o = switchyard(&args);
        assert!(o.status.success(), "{}", text(&o));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    let a = j(&[]);
    assert_eq!(a, j(&[]));
    assert_eq!(a["processes"].as_array().unwrap().len(), 2);
    assert!(a["metrics"]["stp"].as_f64().unwrap() > 1.0);
    assert!(a["all_verified"].as_bool().unwrap());
    // Overrides from the command line.
    // The warp scheduler: mix2's kernels run in different cycles under two policies (the
    // GTX480's own is LRR; an ignored flag would give LRR's cycles both times).
    let mix2 = |extra: &[&str]| {
        let mut args = vec!["scenario", "scenarios/mix2.toml", "--json", "--no-alone"];
        args.extend_from_slice(extra);
        let o = switchyard(&args);
        assert!(o.status.success(), "{}", text(&o));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    // Per-kernel counters: the statistics file holds every launch's, the report each
    // kernel's cycles and warp instructions, and they add up to the run's total.
    let stats = dir.join("stats.json");
    let with_stats = mix2(&["--stats", stats.to_str().unwrap()]);
    let file: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap();
    let launches = file["launches"].as_array().unwrap();
    let kernels = with_stats["kernels"].as_array().unwrap();
    assert_eq!(launches.len(), kernels.len());
    assert_eq!(file["gpu"]["name"], "gtx480");
    let mut total = 0;
    for (l, k) in launches.iter().zip(kernels) {
        assert_eq!(l["launch"], k["launch"]);
        assert_eq!(l["stats"]["warp_instructions"], k["warp_instructions"]);
        assert_eq!(l["stats"]["cycles"], k["cycles"]);
        assert!(k["cycles"].as_u64().unwrap() > 0, "{k}");
        total += k["warp_instructions"].as_u64().unwrap();
    }
    assert_eq!(total, with_stats["warp_instructions"].as_u64().unwrap());
    let lrr = mix2(&["--scheduler", "lrr"]);
    let gto = mix2(&["--scheduler", "gto"]);
    assert_eq!(lrr["cycles"], mix2(&[])["cycles"]);
    assert_ne!(lrr["cycles"], gto["cycles"]);
    assert!(gto["all_verified"].as_bool().unwrap());
    let b = j(&["--policy", "npq", "--sharing", "on", "--no-alone"]);
    assert_eq!(b["policy"], "npq");
    assert_eq!(b["intra_sm_sharing"], true);
    assert!(b["metrics"].is_null());
    // A policy and a mechanism with parameters, reported as the command line wrote them.
    let c = j(&[
        "--policy",
        "time-slice:slice_us=20",
        "--mechanism",
        "chimera:deadline_us=5",
        "--no-alone",
    ]);
    assert_eq!(c["policy"], "time-slice:slice_us=20");
    assert_eq!(c["preemption"]["mechanism"], "chimera:deadline_us=5");
    assert!(c["all_verified"].as_bool().unwrap());
}

/// `--policy`, `--mechanism` and `--mechanisms` are read by one parser, which names the
/// parameter or the name that is wrong.
#[test]
fn bad_choices_on_the_command_line_name_what_is_wrong() {
    let cases: [(&[&str], &[&str]); 6] = [
        (
            &["scenario", "scenarios/mix2.toml", "--mechanism", "chimaera"],
            &["--mechanism", "unknown variant `chimaera`", "chimera"],
        ),
        (
            &[
                "scenario",
                "scenarios/mix2.toml",
                "--mechanism",
                "chimera:deadline_us=-1",
            ],
            &["--mechanism", "`deadline_us` = -1 is out of range"],
        ),
        (
            &[
                "scenario",
                "scenarios/mix2.toml",
                "--mechanism",
                "chimera:deadlin_us=5",
            ],
            &["unknown field `deadlin_us`, expected `deadline_us`"],
        ),
        (
            &[
                "scenario",
                "scenarios/mix2.toml",
                "--policy",
                "time-slice:slice_us=soon",
            ],
            &["--policy", "`slice_us`", "\"soon\""],
        ),
        (
            &[
                "scenario",
                "scenarios/mix2.toml",
                "--policy",
                "time_slice:slice_us=10,x=1",
            ],
            &["--policy", "unknown field `x`"],
        ),
        (
            &[
                "study",
                "--mechanisms",
                "drain,lightweight:compressor_latency=2.5",
            ],
            &[
                "--mechanisms",
                "`compressor_latency`",
                "floating point `2.5`",
            ],
        ),
    ];
    for (args, wants) in cases {
        let o = switchyard(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        let e = text(&o);
        for w in wants {
            assert!(e.contains(w), "{args:?}: {w}: {e}");
        }
    }
}

#[test]
fn a_bad_scenario_is_located_and_earlier_outputs_survive() {
    let dir = scratch("bad");
    let trace = dir.join("trace.json");
    let o = switchyard(&[
        "scenario",
        "scenarios/suite/scan.toml",
        "--no-alone",
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let before = std::fs::read(&trace).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "description = \"x\"\n[[process]]\nname = \"a\"\nsuite = \"scna\"\n",
    )
    .unwrap();
    let o = switchyard(&[
        "scenario",
        bad.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let e = text(&o);
    assert!(
        e.contains("bad.toml:4:9") && e.contains("process[0].suite") && e.contains("scna"),
        "{e}"
    );
    assert!(!e.contains("panicked"));
    assert_eq!(
        std::fs::read(&trace).unwrap(),
        before,
        "the earlier trace is intact"
    );
    // A run that fails part-way (the cycle limit) leaves it intact too.
    let o = switchyard(&[
        "scenario",
        "scenarios/suite/scan.toml",
        "--max-cycles",
        "1000",
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("did not finish within 1000 core cycles"),
        "{}",
        text(&o)
    );
    assert_eq!(std::fs::read(&trace).unwrap(), before);
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().contains("tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_scenario_names_where_its_gpu_is_wrong() {
    let dir = scratch("gpu");
    let bad = dir.join("s.toml");
    for (gpu, want) in [
        ("gtx4800", "no GPU preset `gtx4800`"),
        ("missing.toml", "cannot read"),
    ] {
        std::fs::write(
            &bad,
            format!("gpu = \"{gpu}\"\n[[process]]\nname = \"a\"\nsuite = \"scan\"\n"),
        )
        .unwrap();
        let o = switchyard(&["scenario", bad.to_str().unwrap(), "--no-alone"]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let e = text(&o);
        assert!(
            e.contains(&format!("{}:1:7: `gpu`", bad.display())) && e.contains(want),
            "{e}"
        );
        assert!(!e.contains("panicked"));
    }
    // The scenario file itself: a device is refused before it is read.
    let o = switchyard(&["scenario", "/dev/zero"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("/dev/zero: not a regular file"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_rerun_whose_check_fails_leaves_every_output_as_it_was() {
    let dir = scratch("verify");
    let (trace, csv) = (dir.join("trace.json"), dir.join("csv"));
    let saxpy = root().join("examples/saxpy/saxpy.ptx");
    let scenario = |fill: &str| {
        format!(
            "[[process]]\nname = \"p\"\nptx = \"{}\"\n\n[[process.buffer]]\nname = \"x\"\ntype = \"f32\"\nlen = 32\ninit = \"fill\"\nvalue = 1.0\n\n[[process.command]]\ncopy = \"x\"\n\n[[process.command]]\nlaunch = \"saxpy\"\ngrid = [1]\nblock = [32]\nargs = [{{ buffer = \"x\" }}, {{ buffer = \"x\" }}, {{ f32 = 2.0 }}, {{ u32 = 32 }}]\n\n[[process.check]]\nbuffer = \"x\"\nfill = {fill}\n",
            saxpy.display()
        )
    };
    let file = dir.join("s.toml");
    let run = || {
        switchyard(&[
            "scenario",
            file.to_str().unwrap(),
            "--no-alone",
            "--trace",
            trace.to_str().unwrap(),
            "--csv",
            csv.to_str().unwrap(),
        ])
    };
    // x = 2x + x = 3.
    std::fs::write(&file, scenario("3.0")).unwrap();
    let o = run();
    assert!(o.status.success(), "{}", text(&o));
    let before: Vec<Vec<u8>> = [
        trace.clone(),
        csv.join("kernels.csv"),
        csv.join("processes.csv"),
    ]
    .iter()
    .map(|p| std::fs::read(p).unwrap())
    .collect();
    std::fs::write(&file, scenario("4.0")).unwrap();
    let o = run();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("verification failed"), "{}", text(&o));
    let after: Vec<Vec<u8>> = [
        trace.clone(),
        csv.join("kernels.csv"),
        csv.join("processes.csv"),
    ]
    .iter()
    .map(|p| std::fs::read(p).unwrap())
    .collect();
    assert!(before == after, "a failed check replaced the outputs");
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .chain(std::fs::read_dir(&csv).unwrap())
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().contains("tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// A saxpy, y = 1.5 x + y over x = 0, 1, 2, … and y = 0.25, its `y` dumped before and after
/// the launch; the check on y expects `first`.
fn dump_scenario(first: &str) -> String {
    let ptx = root().join("examples/saxpy/saxpy.ptx");
    format!(
        r#"[[process]]
name = "p"
ptx = "{}"
[[process.buffer]]
name = "x"
type = "f32"
len = 300
init = "iota"
[[process.buffer]]
name = "y"
type = "f32"
len = 300
init = "fill"
value = 0.25
[[process.command]]
copy = "x"
[[process.command]]
copy = "y"
[[process.command]]
dump = "y"
file = "y0.npy"
[[process.command]]
launch = "saxpy"
grid = [3]
block = [128]
args = [{{ buffer = "x" }}, {{ buffer = "y" }}, {{ f32 = 1.5 }}, {{ u32 = 300 }}]
[[process.command]]
dump = "y"
file = "out/y1.npy"
[[process.command]]
dump = "x"
type = "s32"
shape = [30, 10]
[[process.check]]
buffer = "y"
values = [{first}]
"#,
        ptx.display()
    )
}

/// The f32 array of a `.npy` file, read by hand (its descr and shape checked).
fn npy_f32(path: &std::path::Path, shape: &str) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
    let start = 10 + u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    assert_eq!(start % 64, 0);
    let header = std::str::from_utf8(&bytes[10..start]).unwrap();
    let want = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    assert_eq!(header.trim_end(), want);
    bytes[start..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn dumps_write_npy_files_of_the_device_contents_where_the_cli_says() {
    let dir = scratch("dump");
    let file = dir.join("dump.toml");
    std::fs::write(&file, dump_scenario("0.25, 1.75")).unwrap();
    let dumps = dir.join("dumps");
    let o = switchyard(&[
        "scenario",
        file.to_str().unwrap(),
        "--dump-dir",
        dumps.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for (f, what) in [
        ("y0.npy", "`y`, <f4 [300]"),
        ("out/y1.npy", "`y`, <f4 [300]"),
        ("x.npy", "`x`, <i4 [30, 10]"),
    ] {
        let line = format!("dump: {} (p {what}", dumps.join(f).display());
        assert!(out.contains(&line), "no `{line}` in:\n{out}");
    }
    // Before the launch y is as copied in; after it, the CPU reference's fma, bit for bit.
    assert_eq!(npy_f32(&dumps.join("y0.npy"), "(300,)"), vec![0.25; 300]);
    let want: Vec<f32> = (0..300).map(|i| 1.5f32.mul_add(i as f32, 0.25)).collect();
    assert_eq!(npy_f32(&dumps.join("out/y1.npy"), "(300,)"), want);
    // x's f32 bits as s32s, in two dimensions.
    let x = std::fs::read(dumps.join("x.npy")).unwrap();
    assert!(String::from_utf8_lossy(&x[..128])
        .contains("'descr': '<i4', 'fortran_order': False, 'shape': (30, 10), }"));
    assert_eq!(&x[128 + 4 * 7..128 + 4 * 8], &7.0f32.to_le_bytes());
    // Without --dump-dir, beside the scenario file.
    let o = switchyard(&["scenario", file.to_str().unwrap(), "--no-alone"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(npy_f32(&dir.join("out/y1.npy"), "(300,)"), want);
    let leftovers: Vec<_> = std::fs::read_dir(dumps.join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().contains("tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_failed_check_still_writes_its_dumps_and_a_bad_dump_is_located() {
    let dir = scratch("dump-fail");
    let file = dir.join("dump.toml");
    std::fs::write(&file, dump_scenario("0.25, 9.0")).unwrap();
    let o = switchyard(&["scenario", file.to_str().unwrap(), "--no-alone"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("FAIL"), "{}", text(&o));
    let want: Vec<f32> = (0..300).map(|i| 1.5f32.mul_add(i as f32, 0.25)).collect();
    assert_eq!(npy_f32(&dir.join("out/y1.npy"), "(300,)"), want);

    std::fs::write(&file, dump_scenario("0.25").replace("[30, 10]", "[30, 11]")).unwrap();
    let o = switchyard(&["scenario", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let e = text(&o);
    assert!(
        e.contains("dump.toml:33:9: `process[0].command[5].shape`: [30, 11] holds 330 elements, but buffer `x` holds 300 of `<i4`"),
        "{e}"
    );
}

#[test]
fn the_inference_scenario_reports_request_latencies_as_json_and_csv() {
    // scenarios/inference.toml as it is (PPQ, baseline switch): 8 seeded Poisson requests
    // of `infer` beside a batch kernel, their latency percentiles in the JSON report, the
    // processes CSV and one row each in requests.csv.
    let dir = scratch("inference");
    let csv = dir.join("csv");
    let o = switchyard(&[
        "scenario",
        "scenarios/inference.toml",
        "--no-alone",
        "--json",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let infer = &report["processes"][1];
    assert_eq!(infer["name"], "infer");
    let l = &infer["requests"];
    assert_eq!(l["count"], 8);
    let (p50, p99, max) = (
        l["p50_us"].as_f64().unwrap(),
        l["p99_us"].as_f64().unwrap(),
        l["max_us"].as_f64().unwrap(),
    );
    assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{l}");
    assert!(
        report["processes"][0]["requests"].is_null(),
        "batch serves none"
    );
    assert_eq!(report["requests"].as_array().unwrap().len(), 8);
    let processes = std::fs::read_to_string(csv.join("processes.csv")).unwrap();
    assert!(processes
        .lines()
        .next()
        .unwrap()
        .ends_with(",requests,p50_us,p95_us,p99_us,p999_us,max_us"));
    let row = processes.lines().find(|l| l.starts_with("infer,")).unwrap();
    assert!(row.contains(&format!(",8,{p50:.3},")), "{row}");
    let requests = std::fs::read_to_string(csv.join("requests.csv")).unwrap();
    assert_eq!(requests.lines().count(), 9, "{requests}");
    assert!(requests
        .lines()
        .skip(1)
        .all(|l| l.starts_with("infer,") && l.ends_with(",true")));
}
