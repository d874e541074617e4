//! End-to-end tests of the `switchyard` command: each bad input gives a clear error naming its
//! location and a non-zero exit status — never a panic (exit status 101).

use std::path::PathBuf;
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn data(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
        .display()
        .to_string()
}

/// Runs the command in the repository root. `run` is given `--no-stats` unless the test
/// names a statistics file, so tests never write into the tree.
fn switchyard(args: &[&str]) -> Output {
    let mut args: Vec<&str> = args.to_vec();
    if args.first() == Some(&"run") && !args.iter().any(|a| a.starts_with("--stats")) {
        args.push("--no-stats");
    }
    Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(&args)
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

/// Failed cleanly: exit status 1 (2 is clap's usage error; 101 would be a panic).
fn assert_clean_failure(o: &Output) {
    assert_eq!(o.status.code(), Some(1), "{}", text(o));
    assert!(!text(o).contains("panicked"), "{}", text(o));
}

#[test]
fn kernels_json_lists_the_suite() {
    let o = switchyard(&["kernels", "--json"]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    assert!(names.len() >= 14);
    for required in ["gemm", "bfs", "hist", "reduce", "hotspot"] {
        assert!(names.contains(&required), "{names:?}");
    }
}

#[test]
fn run_one_suite_kernel_as_json() {
    let o = switchyard(&["run", "hist", "--target", "sm_90", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["kernel"], "hist");
    assert_eq!(rows[0]["target"], "sm_90");
    assert_eq!(rows[0]["verified"], true);
    assert!(rows[0]["thread_instructions"].as_u64().unwrap() > 0);
}

#[test]
fn run_a_ptx_file_from_a_spec_and_verify_it() {
    let o = switchyard(&[
        "run",
        "examples/saxpy/saxpy.ptx",
        "--spec",
        "examples/saxpy/saxpy.toml",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("PASS (6 values match)"), "{}", text(&o));
}

#[test]
fn a_texture_declared_in_the_spec_is_sampled_by_the_kernel() {
    // NVRTC's `tex2D<float>` on a texture object with linear filtering; the expected values
    // are derived in the spec's comments.
    let o = switchyard(&[
        "run",
        "examples/texture/shift.ptx",
        "--spec",
        "examples/texture/shift.toml",
        "--gpu",
        "a100",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("PASS (32 values match)"), "{}", text(&o));
}

#[test]
fn a_spec_is_a_scenario_of_one_process_run_command_by_command() {
    // saxpy three times in a loop, y += 2x each time, then y dumped: y[i] = 6i + 1. The
    // same file runs under `switchyard scenario` (with its texture example, which makes a
    // texture object through the host model).
    let example = std::fs::read_to_string(root().join("examples/saxpy/saxpy.toml")).unwrap();
    let npy = temp("looped-y.npy");
    let looped = example
        .replace(
            "[[process.command]]\nlaunch",
            "[[process.command]]\nrepeat = 3\n[[process.command.body]]\nlaunch",
        )
        .replace(
            "# y[i] = 2 * i + 1",
            &format!(
                "[[process.command]]\ndump = \"y\"\nfile = \"{}\"\n",
                npy.display()
            ),
        )
        .replace("values = [1, 3, 5, 7, 9, 11]", "values = [1, 7, 13, 19]");
    let spec = temp("looped.toml");
    std::fs::write(&spec, &looped).unwrap();
    let o = switchyard(&[
        "run",
        "examples/saxpy/saxpy.ptx",
        "--spec",
        spec.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v[0]["verified"].as_bool(), v[0]["launches"].as_u64()),
        (Some(true), Some(3))
    );
    assert_eq!(v[0]["detail"], "4 values match");
    let bytes = std::fs::read(&npy).unwrap();
    let y: Vec<f32> = bytes[bytes.len() - 4 * 500..]
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert!(y
        .iter()
        .enumerate()
        .all(|(i, &y)| y == 6.0 * i as f32 + 1.0));
    for (spec, gpu, values) in [
        (
            "examples/saxpy/saxpy.toml",
            "gtx480",
            "PASS (6 values match)",
        ),
        (
            "examples/texture/shift.toml",
            "a100",
            "PASS (32 values match)",
        ),
    ] {
        let o = switchyard(&["scenario", spec, "--gpu", gpu]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(text(&o).contains(values), "{}", text(&o));
    }
}

#[test]
fn a_failed_check_exits_non_zero() {
    let spec = std::env::temp_dir().join("switchyard-wrong-check.toml");
    let good = std::fs::read_to_string(root().join("examples/saxpy/saxpy.toml")).unwrap();
    std::fs::write(
        &spec,
        good.replace("values = [1, 3, 5", "values = [1, 4, 5"),
    )
    .unwrap();
    let o = switchyard(&[
        "run",
        "examples/saxpy/saxpy.ptx",
        "--spec",
        spec.to_str().unwrap(),
    ]);
    assert_clean_failure(&o);
    assert!(text(&o).contains("y[1]: got 3, want 4"), "{}", text(&o));
}

#[test]
fn a_rerun_whose_check_fails_keeps_the_previous_statistics() {
    // README: a failed rerun never loses the previous complete file. A failed *check* used
    // to replace it (and exit 1).
    let path = temp("checked.json");
    let partial = temp("checked.partial.json");
    let stats = path.to_str().unwrap();
    let good = std::fs::read_to_string(root().join("examples/saxpy/saxpy.toml")).unwrap();
    let spec = temp("checked-spec.toml");
    std::fs::write(&spec, &good).unwrap();
    let run = |spec: &std::path::Path| {
        switchyard(&[
            "run",
            "examples/saxpy/saxpy.ptx",
            "--spec",
            spec.to_str().unwrap(),
            "--stats",
            stats,
        ])
    };
    let o = run(&spec);
    assert!(o.status.success(), "{}", text(&o));
    let complete = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &spec,
        good.replace("values = [1, 3, 5", "values = [1, 4, 5"),
    )
    .unwrap();
    let o = run(&spec);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), complete);
    let v = read_json(&partial);
    assert_eq!(v["complete"], false);
    let t = text(&o);
    assert!(
        t.contains("verification failed") && t.contains("checked.json is unchanged"),
        "{t}"
    );
    for p in [&path, &partial, &spec] {
        let _ = std::fs::remove_file(p);
    }
}

#[test]
fn check_warns_of_a_literal_wrapped_to_its_type() {
    let ptx = temp("wrapped.ptx");
    std::fs::write(
        &ptx,
        ".version 8.0\n.target sm_70\n.address_size 64\n.visible .entry k()\n{\n.reg .b16 %rs<2>;\nmov.u16 %rs1, 70000;\nret;\n}\n",
    )
    .unwrap();
    let o = switchyard(&["check", ptx.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains(&format!(
            "{}:7:15: warning: integer literal 70000 does not fit `.u16` in `mov.u16`: taken as 0x1170",
            ptx.display()
        )) && t.contains("ok, 1 kernel(s)"),
        "{t}"
    );
    let _ = std::fs::remove_file(&ptx);
}

#[test]
fn check_lists_kernels_of_every_committed_ptx_file() {
    let mut files: Vec<String> = Vec::new();
    for dir in std::fs::read_dir(root().join("kernels")).unwrap() {
        let dir = dir.unwrap().path();
        if dir.is_dir() {
            for f in std::fs::read_dir(&dir).unwrap() {
                let f = f.unwrap().path();
                if f.extension().is_some_and(|e| e == "ptx") {
                    files.push(f.display().to_string());
                }
            }
        }
    }
    assert!(files.len() >= 28, "{} PTX files", files.len());
    let mut args = vec!["check", "--json"];
    args.extend(files.iter().map(String::as_str));
    let o = switchyard(&args);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for report in v.as_array().unwrap() {
        assert_eq!(report["ok"], true, "{report}");
        let kernels = report["kernels"].as_array().unwrap();
        assert!(!kernels.is_empty(), "{report}");
        for k in kernels {
            assert!(k["instructions"].as_u64().unwrap() > 0);
        }
    }
}

#[test]
fn malformed_ptx_names_file_line_and_column() {
    let o = switchyard(&["check", &data("malformed.ptx")]);
    assert_clean_failure(&o);
    let t = text(&o);
    assert!(t.contains("malformed.ptx:34:"), "{t}");
    assert!(t.contains("%rd4"), "the source line is shown: {t}");
}

#[test]
fn unknown_instructions_and_modifiers_are_all_reported_with_locations() {
    let o = switchyard(&["check", &data("unknown_instruction.ptx")]);
    assert_clean_failure(&o);
    let t = text(&o);
    assert!(t.contains("unsupported instruction `fmx.rn.f32`"), "{t}");
    assert!(t.contains("unknown_instruction.ptx:39:2"), "{t}");
    assert!(t.contains("unsupported modifier `.zz` on `ld`"), "{t}");
    assert!(t.contains("unknown_instruction.ptx:38:"), "{t}");
    assert!(t.contains("2 problem(s)"), "{t}");
    // Running it fails the same way, before anything executes.
    let o = switchyard(&[
        "run",
        &data("unknown_instruction.ptx"),
        "--spec",
        "examples/saxpy/saxpy.toml",
    ]);
    assert_clean_failure(&o);
    assert!(text(&o).contains("fmx.rn.f32"), "{}", text(&o));
}

#[test]
fn bad_launch_dimensions_are_rejected() {
    let o = switchyard(&[
        "run",
        "examples/saxpy/saxpy.ptx",
        "--spec",
        &data("bad_launch.toml"),
    ]);
    assert_clean_failure(&o);
    let t = text(&o);
    assert!(t.contains("bad launch of `saxpy`"), "{t}");
    assert!(t.contains("block.x = 2048"), "{t}");
    // Located: the command in the spec that made the launch.
    assert!(
        t.contains("bad_launch.toml:19:10 (process[0].command[0]): the launch: "),
        "{t}"
    );
}

#[test]
fn a_launch_is_checked_against_the_gpu_that_runs_it() {
    // 60 KiB of dynamic shared memory: within the H100's 227 KiB per block, beyond the
    // GTX480's 48 KiB. The limit printed used to be the H100's whatever the GPU.
    let spec = std::env::temp_dir().join(format!("switchyard-smem-{}.toml", std::process::id()));
    std::fs::write(
        &spec,
        "[[process]]\nname = \"scan\"\n\
         [[process.buffer]]\nname = \"a\"\ntype = \"u32\"\nlen = 256\n\
         [[process.command]]\nlaunch = \"scan_blocks\"\ngrid = [1]\nblock = [256]\n\
         dynamic_smem = 61440\n\
         args = [{ buffer = \"a\" }, { buffer = \"a\" }, { buffer = \"a\" }, { u32 = 256 }]\n",
    )
    .unwrap();
    let o = switchyard(&[
        "run",
        "kernels/scan/scan.sm_70.ptx",
        "--spec",
        spec.to_str().unwrap(),
        "--gpu",
        "gtx480",
    ]);
    assert_clean_failure(&o);
    let t = text(&o);
    assert!(
        t.contains("bad launch of `scan_blocks`")
            && t.contains("exceed the limit of 49152")
            && t.contains(&format!(
                "{}:8:10 (process[0].command[0]): the launch",
                spec.display()
            )),
        "{t}"
    );
    std::fs::remove_file(&spec).unwrap();
}

#[test]
fn out_of_bounds_access_names_kernel_pc_thread_and_address() {
    let o = switchyard(&["run", &data("oob.ptx"), "--spec", &data("oob.toml")]);
    assert_clean_failure(&o);
    let t = text(&o);
    assert!(t.contains("kernel `saxpy` faulted"), "{t}");
    // Thread 500 is the first past the 500-element buffers: TB 3 (128 threads), tid 116.
    assert!(t.contains("TB (3, 0, 0) thread (116, 0, 0)"), "{t}");
    assert!(t.contains("oob.ptx:35:2"), "the ld.global of x: {t}");
    assert!(t.contains("Global access of 4 bytes at 0x"), "{t}");
    assert!(
        t.contains("runs past the end") || t.contains("not in any allocation"),
        "{t}"
    );
}

#[test]
fn a_barrier_that_can_never_complete_is_a_deadlock_error() {
    let o = switchyard(&[
        "run",
        &data("deadlock.ptx"),
        "--spec",
        &data("deadlock.toml"),
    ]);
    assert_clean_failure(&o);
    let t = text(&o);
    assert!(
        t.contains("kernel `split_barrier` deadlocked in TB (0, 0, 0)"),
        "{t}"
    );
    assert!(t.contains("warp 0 at barrier 0"), "{t}");
    assert!(t.contains("warp 1 at barrier 1"), "{t}");
    assert!(t.contains("deadlock.ptx:17:"), "{t}");
}

#[test]
fn a_bad_spec_names_the_field() {
    let spec = std::env::temp_dir().join("switchyard-bad-spec.toml");
    let launch = "[[process.command]]\nlaunch = \"saxpy\"\ngrid = [1]\nblock = [32]\n";
    let run = |spec_text: &str| {
        std::fs::write(&spec, spec_text).unwrap();
        let o = switchyard(&[
            "run",
            "examples/saxpy/saxpy.ptx",
            "--spec",
            spec.to_str().unwrap(),
        ]);
        assert_clean_failure(&o);
        text(&o)
    };
    let t = run(&format!("[[process]]\nname = \"s\"\n{launch}blok = 3\n"));
    assert!(
        t.contains("switchyard-bad-spec.toml:7:1") && t.contains("blok"),
        "{t}"
    );
    // What only a scenario's host and scheduler give meaning to is named, not ignored.
    let t = run(&format!(
        "[[process]]\nname = \"s\"\narrival_us = 5.0\n{launch}"
    ));
    assert!(
        t.contains("switchyard-bad-spec.toml:3:14: `process[0].arrival_us`: a launch spec runs one process's commands"),
        "{t}"
    );
    let t = run(&format!(
        "gpu = \"a100\"\n[[process]]\nname = \"s\"\n{launch}"
    ));
    assert!(t.contains("`gpu`") && t.contains("--gpu"), "{t}");
    let t = run(&format!(
        "[[process]]\nname = \"s\"\n{launch}[[process]]\nname = \"t\"\n{launch}"
    ));
    assert!(
        t.contains("exactly one [[process]] (this one has 2)"),
        "{t}"
    );
    // A kernel parameter the argument cannot fill is an error when the spec loads.
    let t = run(&format!(
        "[[process]]\nname = \"s\"\n{launch}args = [{{ f32 = 1.0 }}, {{ u64 = 0 }}, {{ f32 = 2.0 }}, {{ u32 = 1 }}]\n"
    ));
    assert!(t.contains("an f32 argument for parameter 0"), "{t}");
}

#[test]
fn an_unknown_kernel_name_lists_the_suite() {
    let o = switchyard(&["run", "nosuchkernel"]);
    assert_clean_failure(&o);
    assert!(text(&o).contains("gemm"), "{}", text(&o));
}

/// A suite kernel compiled only for newer targets is analysed on its own oldest one, as
/// `run` picks it; asking for a target it lacks is still an error naming its targets.
#[test]
fn analyze_defaults_to_each_kernels_own_target() {
    let o = switchyard(&["analyze", "wgemm", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        v[0]["file"].as_str().unwrap().ends_with("wgemm.sm_80.ptx"),
        "{}",
        v[0]
    );
    let o = switchyard(&["analyze", "wgemm", "--target", "sm_70"]);
    assert_clean_failure(&o);
    assert!(
        text(&o).contains("compiled for sm_80, sm_90"),
        "{}",
        text(&o)
    );
}

#[test]
fn analyze_reports_registers_occupancy_points_and_context() {
    let o = switchyard(&["analyze", "gemm", "--gpu", "gtx480", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let k = &v[0]["kernel"];
    assert_eq!(k["name"], "gemm_tiled");
    let allocated = k["registers"]["allocated"].as_u64().unwrap();
    assert!((8..=64).contains(&allocated), "{k}");
    // The k-loop of the tiled GEMM has barriers: its point is a bar.pp.
    let points = k["preemption_points"].as_array().unwrap();
    assert!(points.iter().any(|p| p["kind"] == "bar.pp"), "{k}");
    let c = &k["context"];
    let baseline = c["baseline_bytes_per_warp"].as_f64().unwrap();
    let live = c["live_bytes_per_warp"].as_f64().unwrap();
    let divergent = c["live_divergent_bytes_per_warp"].as_f64().unwrap();
    assert!(live > 0.0 && live < baseline, "{c}");
    assert!(divergent >= live, "{c}");
    assert_eq!(
        baseline,
        (allocated * 128 + k["registers"]["predicates"].as_u64().unwrap() * 4) as f64
    );
    assert!(k["occupancy"]["tbs_per_sm"].as_u64().unwrap() >= 1);
    // Per-instruction techniques of ji-ctxback §V-A, in 32-bit words per thread: CTXBack
    // never saves more than LIVE, and LIVE never more than every allocated register.
    let w = &c["words_per_thread"];
    let (b, l, x) = (
        w["baseline"].as_f64().unwrap(),
        w["live"].as_f64().unwrap(),
        w["ctxback"].as_f64().unwrap(),
    );
    assert_eq!(b, allocated as f64, "{w}");
    assert!(x <= l && l < b, "{w}");
    assert!(w["flashed_back_instructions"].as_u64().unwrap() > 0, "{w}");
}

/// `--per-instruction` and `--osrb` on papers/ji-ctxback Fig. 5 as a kernel: one scalar
/// backup, whose copy-back the table shows, and a smaller CTXBack context with it.
#[test]
fn analyze_per_instruction_table_and_scalar_backup() {
    let file = data("fig5_osrb.ptx");
    let args = [
        "analyze",
        file.as_str(),
        "--uniform-registers",
        "63",
        "--osrb",
        "--per-instruction",
    ];
    let o = switchyard(&[&args[..], &["--json"]].concat());
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let k = &v[0]["kernel"];
    assert_eq!(k["osrb"]["backups"], 1, "{}", k["osrb"]);
    assert!(k["registers"]["uniform"].as_u64().unwrap() >= 1);
    let rows = k["per_instruction"].as_array().unwrap();
    assert_eq!(rows.iter().filter(|r| r["backup_copy"] == true).count(), 1);
    for (n, r) in rows.iter().enumerate() {
        assert_eq!(r["pc"], n as u64);
        let x = &r["ctxback"];
        assert!(x["point"].as_u64().unwrap() <= n as u64, "{r}");
        assert!(
            r["combined"] == "ctxback" || r["combined"] == "cs-defer",
            "{r}"
        );
        assert!(
            r["location"].as_str().unwrap().contains("fig5_osrb.ptx:"),
            "{r}"
        );
    }
    assert!(rows
        .iter()
        .any(|r| !r["ctxback"]["copied_back"].as_array().unwrap().is_empty()));
    let w = &k["context"]["words_per_thread"];
    assert!(
        w["ctxback_osrb"].as_f64().unwrap() < w["ctxback"].as_f64().unwrap(),
        "{w}"
    );
    // The text table marks the copy and prints every plan.
    let o = switchyard(&args);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("[OSRB copy]") && t.contains("on-chip scalar register backup"),
        "{t}"
    );
    assert_eq!(t.matches(" <- pc").count(), rows.len(), "{t}");
}

/// OSRB's destinations from the command line: with every uniform register the warp has in
/// use (the kernel needs 9), the backup goes to the warp's shared memory; with one more it
/// takes the spare uniform register; with no shared word either, it finds no place.
#[test]
fn analyze_scalar_backup_destinations() {
    let file = data("fig5_osrb_shared.ptx");
    let osrb = |extra: &[&str]| {
        let args = [&["analyze", file.as_str(), "--osrb", "--json"][..], extra].concat();
        let o = switchyard(&args);
        assert!(o.status.success(), "{}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let o = &v[0]["kernel"]["osrb"];
        let n = |f: &str| o[f].as_u64().unwrap();
        (
            n("shared"),
            n("unused_uniform"),
            n("unplaced"),
            n("warp_smem"),
        )
    };
    assert_eq!(osrb(&["--uniform-registers", "9"]), (1, 0, 0, 4));
    assert_eq!(osrb(&["--uniform-registers", "10"]), (0, 1, 0, 0));
    assert_eq!(
        osrb(&["--uniform-registers", "9", "--osrb-shared-words", "0"]),
        (0, 0, 1, 0)
    );
    // Shared words without OSRB is a usage error.
    let o = switchyard(&["analyze", file.as_str(), "--osrb-shared-words", "4"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--osrb"), "{}", text(&o));
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("switchyard-{}-{name}", std::process::id()))
}

fn read_json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn timed_run_prints_cycles_and_writes_deterministic_statistics() {
    let (a, b) = (temp("a.json"), temp("b.json"));
    let mut outs = Vec::new();
    for path in [&a, &b] {
        let o = switchyard(&[
            "run",
            "gemm",
            "--target",
            "sm_70",
            "--gpu",
            "gtx480",
            "--stats",
            path.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", text(&o));
        outs.push(text(&o));
    }
    let t = &outs[0];
    assert!(
        t.contains("cycles") && t.contains("IPC") && t.contains("TBs/SM"),
        "{t}"
    );
    assert!(t.contains("timed on gtx480"), "{t}");
    let v = read_json(&a);
    assert_eq!(v["complete"], true);
    assert_eq!(v["gpu"]["name"], "gtx480");
    let launch = &v["runs"][0]["launches"][0];
    assert_eq!(v["runs"][0]["verified"], true);
    let cycles = launch["cycles"].as_u64().unwrap();
    let insts = launch["warp_instructions"].as_u64().unwrap();
    assert!(cycles > 0 && insts > 0);
    // Each scheduler cycle after the launch's arrival, up to the cycle the last TB finished
    // (the store drain after it has no scheduler cycles), is an issue or exactly one stall.
    let to_last_tb = launch["cycles_to_last_tb"].as_u64().unwrap();
    let s = &launch["schedulers"];
    let sum: u64 = [
        "issued",
        "no_warp",
        "fetch",
        "barrier",
        "memory",
        "scoreboard",
        "pipeline_busy",
    ]
    .iter()
    .map(|k| s[k].as_u64().unwrap())
    .sum();
    assert_eq!(sum, to_last_tb * 15 * 2, "15 SMs × 2 schedulers");
    assert_eq!(s["issued"].as_u64().unwrap(), insts);
    let class = launch["utilisation"]["class"].as_str().unwrap();
    assert!(["underutilised", "moderate", "saturated"].contains(&class));
    // Same inputs, same statistics.
    assert_eq!(
        std::fs::read_to_string(&a).unwrap(),
        std::fs::read_to_string(&b).unwrap()
    );
    let detail = switchyard(&["run", "gemm", "--target", "sm_70", "--detail"]);
    assert!(
        text(&detail).contains("utilisation (lin-thesis §3.4)"),
        "{}",
        text(&detail)
    );
}

#[test]
fn functional_runs_skip_the_timing_model() {
    let o = switchyard(&["run", "hist", "--target", "sm_70", "--functional", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v[0]["cycles"].is_null());
    assert_eq!(v[0]["verified"], true);
}

#[test]
fn a_scheduler_override_and_a_gpu_file_are_accepted() {
    let o = switchyard(&[
        "run",
        "reduce",
        "--target",
        "sm_70",
        "--gpu",
        "configs/maxwell16.toml",
        "--scheduler",
        "two-level",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v[0]["cycles"].as_u64().unwrap() > 0);
}

#[test]
fn bad_gpu_configurations_name_the_preset_or_field() {
    let o = switchyard(&["run", "gemm", "--gpu", "gtx4800"]);
    assert_clean_failure(&o);
    assert!(text(&o).contains("no GPU preset `gtx4800`") && text(&o).contains("maxwell16"));
    let bad = temp("bad-gpu.toml");
    let good = std::fs::read_to_string(root().join("configs/gtx480.toml")).unwrap();
    std::fs::write(&bad, good.replace("t_cl = 12", "t_cl = 12\ntcl = 3")).unwrap();
    let o = switchyard(&["run", "gemm", "--gpu", bad.to_str().unwrap()]);
    assert_clean_failure(&o);
    assert!(text(&o).contains("tcl"), "{}", text(&o));
}

#[test]
fn a_failed_rerun_keeps_the_complete_statistics_and_marks_its_own_partial() {
    let path = temp("kept.json");
    let partial = temp("kept.partial.json");
    let stats = path.to_str().unwrap();
    let o = switchyard(&["run", "reduce", "--target", "sm_70", "--stats", stats]);
    assert!(o.status.success(), "{}", text(&o));
    let complete = std::fs::read_to_string(&path).unwrap();
    assert_eq!(read_json(&path)["complete"], true);
    assert!(!partial.exists(), "a complete run leaves no partial file");

    let o = switchyard(&[
        "run",
        "hist",
        "no-such-kernel",
        "--target",
        "sm_70",
        "--stats",
        stats,
    ]);
    assert_clean_failure(&o);
    // The earlier complete file is untouched; what the failed run finished is kept apart,
    // marked incomplete, and the message says where.
    assert_eq!(std::fs::read_to_string(&path).unwrap(), complete);
    let v = read_json(&partial);
    assert_eq!(v["complete"], false);
    assert_eq!(v["runs"].as_array().unwrap().len(), 1);
    assert_eq!(v["runs"][0]["kernel"], "hist");
    let t = text(&o);
    assert!(
        t.contains("kept.partial.json") && t.contains("unchanged"),
        "{t}"
    );
    // The finished run's row is still printed.
    assert!(t.contains("hist"), "{t}");
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&partial);
}

/// Runs `args` and asserts a clean failure whose output contains every one of `needles`
/// and never a doubled `error: error:` prefix.
fn fails_saying(args: &[&str], needles: &[&str]) -> String {
    let o = switchyard(args);
    assert_clean_failure(&o);
    let t = text(&o);
    for n in needles {
        assert!(t.contains(n), "`{n}` missing from:\n{t}");
    }
    assert!(!t.contains("error: error"), "{t}");
    t
}

#[test]
fn huge_declarations_are_errors_naming_line_and_limit() {
    let file = data("huge_declarations.ptx");
    for cmd in ["check", "analyze"] {
        let t = fails_saying(
            &[cmd, &file],
            &[
                "huge_declarations.ptx:11:2",
                "1000000 declared registers; the limit is 262144",
                "huge_declarations.ptx:18:2",
                "2147483648 declared registers",
                "huge_declarations.ptx:24:2",
                "4000000000 bytes of local memory per thread; the limit is 524288",
                "huge_declarations.ptx:30:2",
                "4000000000 bytes of static shared memory; the limit is 1048576",
            ],
        );
        // `mov.u32 %r1, 0` after the rejected `%r<1000000>` is not reported again.
        assert!(!t.contains("unknown identifier"), "{t}");
    }
}

#[test]
fn huge_buffers_are_rejected_before_allocation() {
    let ptx = data("spin.ptx");
    for spec in ["huge_buffer.toml", "huger_buffer.toml"] {
        fails_saying(
            &["run", &ptx, "--spec", &data(spec), "--functional"],
            &[spec, "`process[0].buffer[0].len`", "bytes"],
        );
    }
}

#[test]
fn runaway_kernels_stop_at_the_limits_the_command_line_sets() {
    let (ptx, spec) = (data("spin.ptx"), data("spin.toml"));
    let base = ["run", ptx.as_str(), "--spec", spec.as_str()];
    fails_saying(
        &[&base[..], &["--functional", "--instruction-limit", "20000"]].concat(),
        &[
            "kernel `spin` exceeded the limit of 20000 warp instructions",
            "--instruction-limit",
        ],
    );
    fails_saying(
        &[&base[..], &["--instruction-limit", "20000"]].concat(),
        &[
            "kernel `spin` exceeded the limit of 20000 warp instructions",
            "--instruction-limit",
        ],
    );
    fails_saying(
        &[&base[..], &["--max-cycles", "30000"]].concat(),
        &[
            "kernel `spin` did not finish within 30000 cycles",
            "--max-cycles",
        ],
    );
    // Every command that runs kernels takes both limits.
    for cmd in [
        &["run"][..],
        &["study"],
        &["scenario"],
        &["experiment", "periodic-preemption"],
        &["experiment", "multiprogram"],
        &["experiment", "per-instruction"],
        &["experiment", "corun"],
    ] {
        let o = switchyard(&[cmd, &["--help"]].concat());
        let t = text(&o);
        assert!(
            t.contains("--instruction-limit") && t.contains("--max-cycles"),
            "{cmd:?}: {t}"
        );
    }
}

#[test]
fn per_instruction_experiment_prints_normalised_table_json_and_csv() {
    let dir = temp("per-instruction");
    let o = switchyard(&[
        "experiment",
        "per-instruction",
        "hotspot",
        "--samples",
        "2",
        "--mechanisms",
        "ctxback",
        "--csv",
        dir.to_str().unwrap(),
        "--plots",
        dir.join("plots").to_str().unwrap(),
    ]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    for fig in ["fig7", "fig8", "fig9", "fig10"] {
        let svg = std::fs::read_to_string(dir.join("plots").join(format!("{fig}.svg")));
        assert!(svg.unwrap().starts_with("<svg"), "{fig}");
        let csv = std::fs::read_to_string(dir.join(format!("{fig}.csv"))).unwrap();
        assert!(csv.contains("\nhotspot,baseline,"), "{fig}: {csv}");
    }
    // BASELINE is added as the normaliser; the runtime overhead is reported.
    assert!(
        t.contains("baseline") && t.contains("ctxback") && t.contains("overhead"),
        "{t}"
    );
    let kernels = std::fs::read_to_string(dir.join("kernels.csv")).unwrap();
    assert!(kernels.contains("\nhotspot,baseline,2,"), "{kernels}");
    let requests = std::fs::read_to_string(dir.join("requests.csv")).unwrap();
    assert_eq!(requests.lines().count(), 1 + 2 * 2, "{requests}");
    let o = switchyard(&[
        "experiment",
        "per-instruction",
        "hotspot",
        "--samples",
        "1",
        "--mechanisms",
        "live",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["runs"][0]["normalised"]["context"], 1.0);
    assert_eq!(v["mechanisms"], serde_json::json!(["baseline", "live"]));
    fails_saying(
        &["experiment", "per-instruction", "--samples", "0"],
        &["--samples must be at least 1"],
    );
}

#[test]
fn messages_name_arguments_and_encodings_plainly() {
    let ptx = data("spin.ptx");
    fails_saying(
        &["run", &ptx, "--spec", &data("wrong_argument.toml")],
        &[
            "wrong_argument.toml:14:9",
            "an f32 argument for parameter 0",
            "(.u64)",
        ],
    );
    // A byte-order mark and a Latin-1 byte inside a comment are accepted, as ptxas does.
    let o = switchyard(&["check", &data("bom.ptx")]);
    assert!(o.status.success(), "{}", text(&o));
    // A bad byte in a TOML file is an error naming its line and column.
    let spec = temp("latin1.toml");
    let mut bytes = std::fs::read(data("spin.toml")).unwrap();
    bytes.extend_from_slice(b"# caf\xe9\n");
    std::fs::write(&spec, bytes).unwrap();
    fails_saying(
        &["run", &ptx, "--spec", spec.to_str().unwrap()],
        &["latin1.toml:15:6: the file is not UTF-8 text (byte 0xe9)"],
    );
    // Rendered diagnostics carry one `error:` heading, not two.
    fails_saying(
        &["run", &data("malformed.ptx"), "--spec", &data("oob.toml")],
        &["malformed.ptx"],
    );
}

#[test]
fn a_module_of_many_kernels_is_named_in_a_short_message() {
    let mut ptx = String::from(".version 7.0\n.target sm_70\n.address_size 64\n");
    for i in 0..5000 {
        ptx.push_str(&format!(".visible .entry k{i}()\n{{\n\tret;\n}}\n"));
    }
    let file = temp("many.ptx");
    std::fs::write(&file, ptx).unwrap();
    let spec = temp("many.toml");
    std::fs::write(
        &spec,
        "[[process]]\nname = \"m\"\n[[process.command]]\nlaunch = \"nope\"\ngrid = [1]\nblock = [32]\n",
    )
    .unwrap();
    let t = fails_saying(
        &[
            "run",
            file.to_str().unwrap(),
            "--spec",
            spec.to_str().unwrap(),
        ],
        &["no kernel `nope`", "(it has: k0, k1,", "and 4988 more)"],
    );
    assert!(t.len() < 1000, "{} bytes", t.len());
}

#[test]
fn out_of_range_gpu_values_name_the_field() {
    let good = std::fs::read_to_string(root().join("configs/gtx480.toml")).unwrap();
    for (from, to, field) in [
        ("count = 15", "count = 4294967295", "`sm.count`"),
        (
            "register_banks = 16",
            "register_banks = 4294967295",
            "`pipeline.register_banks`",
        ),
        ("t_rp = 12", "t_rp = 4294967295", "`memory.dram.t_rp`"),
    ] {
        let bad = temp("range.toml");
        assert!(good.contains(from));
        std::fs::write(&bad, good.replace(from, to)).unwrap();
        fails_saying(
            &["run", "gemm", "--gpu", bad.to_str().unwrap()],
            &[field, "is out of range: at most"],
        );
    }
}

#[test]
fn the_preemption_study_compares_mechanisms_and_verifies_every_run() {
    let o = switchyard(&[
        "study",
        "--low-size",
        "small",
        "--mechanisms",
        "drain,flush-relaxed,lightweight",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["mechanism"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "npq (no preemption)",
            "drain",
            "flush-relaxed",
            "lightweight"
        ]
    );
    for r in rows {
        assert_eq!(r["verified"], true, "{r}");
        assert_eq!(r["bit_exact"], true, "{r}");
    }
    let p = |i: usize, f: &str| rows[i]["preemption"][f].as_u64().unwrap();
    // Nothing is preempted in the reference; each mechanism takes the same TBs its own way.
    assert_eq!(p(0, "requests"), 0);
    let tbs = p(1, "drained");
    assert!(tbs > 0);
    assert_eq!(p(2, "flushed"), tbs);
    assert_eq!(p(3, "switched"), tbs);
    assert!(
        rows[3]["preemption"]["context"]["registers"]
            .as_u64()
            .unwrap()
            > 0
    );
    // Draining waits for the TBs to finish; flushing frees the SM at once.
    let lat = |i: usize| rows[i]["preemption"]["mean_latency_us"].as_f64().unwrap();
    assert!(lat(1) > lat(3) && lat(3) > lat(2), "{}", text(&o));
}

#[test]
fn help_names_the_default_study_and_a_bad_kernel_fails_cleanly() {
    let o = switchyard(&["--help"]);
    assert!(text(&o).contains("preemption study"), "{}", text(&o));
    let o = switchyard(&["study", "--low", "nope"]);
    assert_clean_failure(&o);
    assert!(text(&o).contains("unknown kernel `nope`"), "{}", text(&o));
}

/// A run killed at seeded random moments, by SIGKILL or SIGTERM, never leaves a corrupt or
/// silently partial result file, and never loses the previous complete one.
#[cfg(unix)]
#[test]
fn killed_runs_never_corrupt_or_lose_results() {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let path = temp("killed.json");
    let partial = temp("killed.partial.json");
    let stats = path.to_str().unwrap();
    let args = [
        "run", "reduce", "hist", "gemm", "--target", "sm_70", "--stats", stats,
    ];
    let start = Instant::now();
    let o = switchyard(&args);
    assert!(o.status.success(), "{}", text(&o));
    let whole_run = start.elapsed();
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    for trial in 0..8 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let delay = whole_run.mul_f64((seed % 1000) as f64 / 1000.0 * 1.1);
        let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .args(args)
            .current_dir(root())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the binary starts");
        std::thread::sleep(delay);
        let term = trial % 2 == 1;
        if term {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
        } else {
            let _ = child.kill();
        }
        let status = child.wait().unwrap();
        if term {
            // Exited by the handler (130), finished first (0), or killed before the
            // handler was installed (no code).
            assert!(
                matches!(status.code(), None | Some(0) | Some(130)),
                "trial {trial}: {status:?}"
            );
        }
        let v = read_json(&path);
        assert_eq!(v["complete"], true, "trial {trial} after {delay:?}");
        assert_eq!(v["runs"].as_array().unwrap().len(), 3, "trial {trial}");
        if partial.exists() {
            let p = read_json(&partial);
            assert_eq!(p["complete"], false, "trial {trial}");
            // A run killed after its last kernel but before the final write leaves all
            // three runs here, still marked incomplete.
            assert!(p["runs"].as_array().unwrap().len() <= 3, "trial {trial}");
        }
    }
    std::thread::sleep(Duration::from_millis(10));
    // One more complete run removes the partial file and every temporary a killed run left.
    let o = switchyard(&args);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!partial.exists());
    let prefix = format!(".{}", path.file_name().unwrap().to_string_lossy());
    let left: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "temporaries left: {left:?}");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn both_engines_name_the_same_thread_for_a_fault() {
    // 64 TBs, of which 61 fault: the timed machine meets a fault of a later TB first (TBs
    // run concurrently), the functional core the first TB's; both must name the latter.
    let (ptx, spec) = (data("oob.ptx"), data("oob_many.toml"));
    let mut named = Vec::new();
    for engine in [&["--functional"][..], &[], &["--gpu", "h100"]] {
        let t = fails_saying(
            &[&["run", ptx.as_str(), "--spec", spec.as_str()][..], engine].concat(),
            &["faulted at pc13 in TB (3, 0, 0) thread (116, 0, 0)"],
        );
        named.push(t.lines().last().unwrap_or_default().to_string());
    }
    assert!(named.windows(2).all(|w| w[0] == w[1]), "{named:#?}");
}

#[test]
fn a_spec_without_checks_runs_but_is_not_reported_verified() {
    let spec = temp("unchecked.toml");
    let example = std::fs::read_to_string(root().join("examples/saxpy/saxpy.toml")).unwrap();
    let unchecked = &example[..example
        .find("[[process.check]]")
        .expect("the example has checks")];
    std::fs::write(&spec, unchecked).unwrap();
    let ptx = root().join("examples/saxpy/saxpy.ptx");
    let o = switchyard(&[
        "run",
        ptx.to_str().unwrap(),
        "--spec",
        spec.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["verified"], false);
    assert_eq!(v[0]["checked"], false);
    assert!(v[0]["detail"].as_str().unwrap().contains("not verified"));
    let o = switchyard(&[
        "run",
        ptx.to_str().unwrap(),
        "--spec",
        spec.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("0 passed, 0 failed, 1 not verified"),
        "{}",
        text(&o)
    );
}

#[test]
fn reads_just_outside_a_buffer_run_under_page_checks_and_fault_under_strict() {
    let (ptx, spec) = (data("outside.ptx"), data("outside.toml"));
    for engine in [&["--functional"][..], &[]] {
        let run = |check: &str| {
            switchyard(
                &[
                    &[
                        "run",
                        ptx.as_str(),
                        "--spec",
                        spec.as_str(),
                        "--memory-check",
                        check,
                    ][..],
                    engine,
                ]
                .concat(),
            )
        };
        let o = run("page");
        assert!(o.status.success(), "{}", text(&o));
        assert!(text(&o).contains("PASS (8 values match)"), "{}", text(&o));
        let o = run("strict");
        assert_clean_failure(&o);
        let t = text(&o);
        assert!(
            t.contains("outside.ptx:27:2")
                && t.contains("thread (0, 0, 0)")
                && t.contains(
                    "address is not in any allocation; the nearest is the 32-byte allocation at"
                )
                && t.contains("8 bytes before its start"),
            "{t}"
        );
    }
}

/// A reader that stops early (`switchyard check ... | head -1`) ends the process quietly with
/// SIGPIPE's status, not a panic and a backtrace.
#[test]
fn a_closed_stdout_ends_the_run_quietly() {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let files: Vec<_> = std::fs::read_dir(root.join("kernels"))
        .unwrap()
        .map(|d| d.unwrap().path())
        .filter(|d| d.is_dir())
        .flat_map(|d| std::fs::read_dir(d).unwrap())
        .map(|f| f.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ptx"))
        .collect();
    assert!(files.len() > 20);
    // Each file ten times: a report of about 180 KB, more than a pipe buffers, so the
    // process is still writing when the reader goes away.
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .arg("check")
        .args(files.iter().cycle().take(10 * files.len()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read one byte, then close the pipe while the report is still being written.
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 1];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(141), "{stderr}");
}

#[test]
fn corun_experiment_tries_every_combination_and_scheme_deterministically() {
    let dir = temp("corun");
    let base = [
        "experiment",
        "corun",
        "layernorm",
        "softmax",
        "--max-tbs",
        "2",
        "--schemes",
        "spatial,smk:epoch=200",
        "--gpu",
        "gtx980",
    ];
    let o = switchyard(
        &[
            &base[..],
            &[
                "--csv",
                dir.to_str().unwrap(),
                "--plots",
                dir.to_str().unwrap(),
            ],
        ]
        .concat(),
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("best HS") && t.contains("best WS"), "{t}");
    let csv = std::fs::read_to_string(dir.join("corun.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    assert!(
        rows[0].starts_with("kind,label,tbs_layernorm,tbs_softmax,"),
        "{csv}"
    );
    // Every combination of 1 and 2 TBs each fits on a gtx980 SM, then the two schemes,
    // SMK with its quotas from the programs alone.
    let labels: Vec<String> = rows[1..]
        .iter()
        .map(|r| r.split(',').take(2).collect::<Vec<_>>().join(","))
        .collect();
    assert_eq!(
        labels[..5],
        [
            "combination,1+1",
            "combination,1+2",
            "combination,2+1",
            "combination,2+2",
            "scheme,spatial"
        ]
    );
    // SMK's label holds commas: quoted. Then Warped-Slicer's combination from the curves
    // of each program alone at 1 and 2 TBs per SM.
    assert!(rows[6].starts_with("scheme,\"smk:epoch=200,ipc="), "{csv}");
    assert!(rows[7].starts_with("scheme,ws-offline ("), "{csv}");
    // CCBP's choice: on the gtx980 both programs at 2 TBs per SM alone move more
    // interconnect flits than half the sustainable NoC bandwidth, so both are NoC
    // intensive and limited (checked in the JSON below). Its label holds a comma: quoted.
    assert!(
        rows[8].starts_with("scheme,\"ccbp-offline (2+2, noc "),
        "{csv}"
    );
    // Maestro-style search: a hill climb over the combinations from SMK's DRF one.
    assert!(rows[9].starts_with("scheme,\"maestro-offline ("), "{csv}");
    assert_eq!(rows.len(), 10, "{csv}");
    assert!(t.contains("IPC at 1, 2, ... TBs/SM"), "{t}");
    for r in &rows[1..] {
        assert!(r.ends_with(",true"), "not verified: {r}");
    }
    assert!(std::fs::read_to_string(dir.join("corun.svg"))
        .unwrap()
        .starts_with("<svg"));
    // The same results on one thread as on two.
    let json = |threads: &str| {
        let o = switchyard(&[&base[..], &["--json", "--threads", threads]].concat());
        assert!(o.status.success(), "{}", text(&o));
        String::from_utf8(o.stdout).unwrap()
    };
    let one = json("1");
    assert_eq!(one, json("2"));
    // CCBP classified both by their curves, granted them no more than the sustainable
    // bandwidth together, and their issue rate controllers held them to their quotas in
    // the co-run, below what each sends alone at the same TB count.
    let v: serde_json::Value = serde_json::from_str(&one).unwrap();
    let c = &v["ccbp"];
    let sustainable = c["sustainable"]["noc"].as_f64().unwrap();
    let shares = c["shares"].as_array().unwrap();
    let granted: f64 = shares.iter().map(|s| s["noc"].as_f64().unwrap()).sum();
    assert!(granted <= sustainable, "{c}");
    let ccbp = v["schemes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["label"].as_str().unwrap().starts_with("ccbp-offline"))
        .expect("a CCBP run");
    for (i, s) in shares.iter().enumerate() {
        assert_eq!(s["kind"], "noc-intensive", "{c}");
        assert_eq!(s["tbs"], 2, "{c}");
        let quota = s["quota"].as_f64().expect("a quota");
        let alone = &v["alone"][i]["bandwidth"];
        assert!(
            alone["noc"][1].as_f64().unwrap() >= sustainable / 2.0,
            "{c}"
        );
        let alone = alone["requests"][1].as_f64().unwrap();
        assert!(alone > quota, "program {i}: alone {alone}, quota {quota}");
        let sent = ccbp["requests"][i].as_f64().unwrap();
        assert!(
            sent <= quota,
            "program {i} sent {sent} requests per window per SM over its quota {quota}"
        );
    }
    // A bad priority names the flag.
    let o = switchyard(&[&base[..6], &["--prior-lsk", "0"]].concat());
    assert!(!o.status.success());
    assert!(text(&o).contains("--prior-lsk"), "{}", text(&o));
    // A bad scheme names itself.
    let o = switchyard(&[&base[..6], &["--schemes", "smk:epoch=0"]].concat());
    assert!(!o.status.success());
    assert!(
        text(&o).contains("`epoch` = 0 is out of range"),
        "{}",
        text(&o)
    );
}

#[test]
fn corun_all_pairs_sums_up_every_scheme_against_the_oracle() {
    let dir = temp("corun-pairs");
    let o = switchyard(&[
        "experiment",
        "corun",
        "--all-pairs",
        "--programs",
        "layernorm,softmax,blackscholes",
        "--max-tbs",
        "2",
        "--schemes",
        "spatial",
        "--json",
        "--csv",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // Three programs, three unordered pairs in list order.
    let pairs = v["pairs"].as_array().unwrap();
    let names: Vec<String> = pairs
        .iter()
        .map(|p| format!("{}+{}", p["alone"][0]["program"], p["alone"][1]["program"]))
        .collect();
    assert_eq!(
        names,
        [
            "\"layernorm\"+\"softmax\"",
            "\"layernorm\"+\"blackscholes\"",
            "\"softmax\"+\"blackscholes\""
        ]
    );
    // The summary recomputed from the pairs: each scheme's harmonic speedup over the best
    // combination's of its pair, averaged; the oracle is 1 against itself.
    let summary = v["summary"].as_array().unwrap();
    let scheme = |name: &str| {
        summary
            .iter()
            .find(|s| s["scheme"] == name)
            .unwrap_or_else(|| panic!("no {name} in {summary:?}"))
    };
    assert_eq!(scheme("oracle")["mean_harmonic_vs_oracle"], 1.0);
    for name in ["spatial", "ws-offline", "ccbp-offline", "maestro-offline"] {
        let mut ratios = Vec::new();
        for p in pairs {
            let best = p["best_harmonic"].as_u64().unwrap() as usize;
            let oracle = p["combinations"][best]["metrics"]["harmonic_speedup"]
                .as_f64()
                .unwrap();
            let x = p["schemes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["label"].as_str().unwrap().starts_with(name))
                .unwrap();
            ratios.push(x["metrics"]["harmonic_speedup"].as_f64().unwrap() / oracle);
        }
        let s = scheme(name);
        assert_eq!(s["pairs"], 3, "{s}");
        let mean = ratios.iter().sum::<f64>() / 3.0;
        let got = s["mean_harmonic_vs_oracle"].as_f64().unwrap();
        assert!((got - mean).abs() < 1e-12, "{name}: {got} against {mean}");
    }
    let csv = std::fs::read_to_string(dir.join("corun-pairs.csv")).unwrap();
    assert!(
        csv.starts_with("program_a,program_b,scheme,label,"),
        "{csv}"
    );
    // Three pairs, each with spatial, Warped-Slicer offline, CCBP offline, Maestro and the
    // oracle.
    assert_eq!(csv.lines().count(), 1 + 3 * 5, "{csv}");
    // `--programs` needs `--all-pairs`; one program makes no pair.
    let o = switchyard(&["experiment", "corun", "--programs", "layernorm,softmax"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--all-pairs"), "{}", text(&o));
    let o = switchyard(&[
        "experiment",
        "corun",
        "--all-pairs",
        "--programs",
        "layernorm",
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("at least two programs"), "{}", text(&o));
}

#[test]
fn multiprogram_names_a_bad_run_request_count_or_inference_setting() {
    let o = switchyard(&["experiment", "multiprogram", "--runs", "fcfs,nope"]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(
        t.contains("--runs: no run `nope`") && t.contains("stream-priority"),
        "{t}"
    );
    let o = switchyard(&["experiment", "multiprogram", "--requests", "0"]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("--requests 0 is out of 1..="),
        "{}",
        text(&o)
    );
    // The inference GPU cannot be cut to more SMs than it has, and the requests need a
    // positive mean gap: both named before anything runs.
    let o = switchyard(&[
        "experiment",
        "multiprogram",
        "--inference-only",
        "--inference-sms",
        "100",
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains(
            "--inference-sms: the inference GPU's SMs: 100 is out of 1..=80 (v100 has 80)"
        ),
        "{}",
        text(&o)
    );
    let o = switchyard(&[
        "experiment",
        "multiprogram",
        "--inference-only",
        "--mean-gap",
        "0",
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("--mean-gap 0 must be a positive number of µs"),
        "{}",
        text(&o)
    );
}

/// `experiment faults`: a figure it does not know, a GPU without translation and a kernel the
/// GPU cannot run are clean errors naming what is wrong; one figure on one kernel runs and
/// prints its table beside the thesis's geomean.
#[test]
fn experiment_faults_runs_a_figure_and_refuses_bad_input() {
    let o = switchyard(&["experiment", "faults", "--figures", "6.99"]);
    assert_clean_failure(&o);
    assert!(
        text(&o).contains("--figures") && text(&o).contains("6.13 (tb-switching)"),
        "{}",
        text(&o)
    );
    let o = switchyard(&["experiment", "faults", "hist", "--gpu", "gtx480"]);
    assert_clean_failure(&o);
    assert!(
        text(&o).contains("does not translate addresses"),
        "{}",
        text(&o)
    );
    let o = switchyard(&["experiment", "faults", "wgemm"]);
    assert_clean_failure(&o);
    assert!(text(&o).contains("needs tensor cores"), "{}", text(&o));
    let o = switchyard(&[
        "experiment",
        "faults",
        "hist",
        "--figures",
        "organisations",
        "--threads",
        "1",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(
        out.contains("Figure 6.11") && !out.contains("Figure 6.12"),
        "{out}"
    );
    assert!(out.contains("hist") && out.contains("thesis"), "{out}");
}

/// `experiment tlp` on one kernel of a one-SM `maxwell16` (so the small grid gives the SM
/// more TBs than it holds): every variant runs and verifies, its JSON gives each kernel's
/// speedup and TLP per variant, and GPUDuet keeps more TBs resident on the shared-memory
/// limited conv2d than Virtual Thread (which cannot help it); `run --tlp` refuses a bad
/// scheme or parameter naming it (and the flag). A setting the GPU refuses beside another
/// (TB switching on fault) fails as a run's error, naming the field.
#[test]
fn experiment_tlp_runs_every_variant_and_run_tlp_refuses_bad_values() {
    let dir = std::env::temp_dir().join(format!("sy-tlp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let gpu = dir.join("maxwell1.toml");
    let preset = std::fs::read_to_string(root().join("configs/maxwell16.toml")).unwrap();
    std::fs::write(&gpu, preset.replacen("count = 16", "count = 1", 1)).unwrap();
    let csv = dir.join("csv");
    let o = switchyard(&[
        "experiment",
        "tlp",
        "conv2d",
        "--size",
        "small",
        "--gpu",
        gpu.to_str().unwrap(),
        "--threads",
        "2",
        "--json",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["runs"].as_array().unwrap().len(), 10);
    assert!(v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["verified"] == true));
    let tlp = |variant: &str| {
        v["kernels"][0]["tlp"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p[0] == variant)
            .unwrap()[1]
            .as_f64()
            .unwrap()
    };
    assert_eq!(tlp("vt"), 1.0);
    assert!(tlp("gpuduet-me1") > 1.0);
    for f in ["runs.csv", "figure-3-12.csv", "figure-3-15.csv"] {
        assert!(csv.join(f).is_file(), "{f}");
    }
    for (bad, says) in [
        ("duet", "duet"),
        ("gpuduet:max_extra_tbs=0", "sm.tlp.max_extra_tbs"),
        ("vt:port_bytes", "key=value"),
        ("vt:ports=2", "ports"),
        ("gpuduet:compression=maybe", "expected a boolean"),
    ] {
        // A value clap's parser refuses: its usage error, 2.
        let o = switchyard(&["run", "gemm", "--gpu", "maxwell16", "--tlp", bad]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", text(&o));
        assert!(
            text(&o).contains(says) && text(&o).contains("--tlp"),
            "{bad}: {}",
            text(&o)
        );
    }
    let fault = dir.join("fault.toml");
    let preset = std::fs::read_to_string(root().join("configs/fault-study.toml")).unwrap();
    std::fs::write(
        &fault,
        preset.replacen(
            "pipeline = \"stall\"",
            "pipeline = \"replay-queue\"\ntb_switch = \"save\"",
            1,
        ),
    )
    .unwrap();
    let o = switchyard(&[
        "run",
        "gemm",
        "--gpu",
        fault.to_str().unwrap(),
        "--tlp",
        "vt",
    ]);
    assert_clean_failure(&o);
    assert!(text(&o).contains("sm.tlp.scheme"), "{}", text(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `experiment corun --mix`: three programs under every scheme, each verified, with the
/// co-running metrics over three kernels; a mix of one program, or of five, is refused
/// naming the flag.
#[test]
fn experiment_corun_mix_runs_three_programs_under_every_scheme() {
    let o = switchyard(&[
        "experiment",
        "corun",
        "--mix",
        "hotspot,kmeans,softmax",
        "--threads",
        "2",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["programs"].as_array().unwrap().len(), 3);
    let schemes = v["schemes"].as_array().unwrap();
    let names: Vec<&str> = schemes
        .iter()
        .map(|s| s["label"].as_str().unwrap().split(':').next().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "spatial",
            "left-over",
            "smk",
            "warped-slicer",
            "maestro",
            "ccbp"
        ]
    );
    for s in schemes {
        assert_eq!(s["verified"], true, "{s}");
        assert_eq!(
            s["metrics"]["slowdowns"].as_array().unwrap().len(),
            3,
            "{s}"
        );
    }
    for bad in ["hotspot", "hotspot,kmeans,softmax,scan,srad"] {
        let o = switchyard(&["experiment", "corun", "--mix", bad]);
        assert_clean_failure(&o);
        assert!(
            text(&o).contains("--mix") && text(&o).contains("2 to 4 programs"),
            "{bad}: {}",
            text(&o)
        );
    }
}
