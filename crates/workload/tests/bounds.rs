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
    let setup = Setup::for_scenario(&s, TimedGpu::new(gpu), 1 << 28).unwrap();
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
fn absolute_and_ulp_tolerances_are_bounded_and_located() {
    let with = |line: &str| SAXPY_RUN.replace("fill = 1.0\n", &format!("fill = 1.0\n{line}\n"));
    assert!(parse("s.toml", &with("abs_tolerance = 1e-9"), &Mem).is_ok());
    assert!(parse("s.toml", &with("ulps = 4"), &Mem).is_ok());
    for (line, field, what) in [
        (
            "abs_tolerance = -1.0",
            "check[0].abs_tolerance",
            "finite and non-negative",
        ),
        (
            "abs_tolerance = inf",
            "check[0].abs_tolerance",
            "finite and non-negative",
        ),
        ("ulps = 1099511627776", "check[0].ulps", "at most 1048576"),
        ("ulps = -1", "check[0].ulps", "out of range"),
    ] {
        let e = error(&with(line));
        assert!(
            e.starts_with("s.toml:37:") && e.contains(field) && e.contains(what),
            "{line}: {e}"
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

#[test]
fn the_active_queue_is_bounded_before_it_is_sized() {
    // 4294967295 entries used to abort allocating 343 GB; 10^8 took 7.8 GB.
    for n in ["4294967295", "100000000", "4097", "0"] {
        let e = error(&format!("[scheduler]\nactive_kernels = {n}\n\n{SAXPY_RUN}"));
        assert!(
            e.starts_with("s.toml:2:18:")
                && e.contains("scheduler.active_kernels")
                && e.contains("out of 1..=4096"),
            "{n}: {e}"
        );
    }
    let s = parse(
        "s.toml",
        &format!("[scheduler]\nactive_kernels = 4096\n\n{SAXPY_RUN}"),
        &Mem,
    );
    assert_eq!(
        s.unwrap().framework.active_kernels,
        Some(sched::MAX_ACTIVE_KERNELS)
    );
}

/// SAXPY_RUN with its launch inside `repeat = {times}`.
fn repeated_launch(times: &str) -> String {
    SAXPY_RUN.replace(
        "[[process.command]]\nlaunch = \"saxpy\"",
        &format!(
            "[[process.command]]\nrepeat = {times}\n[[process.command.body]]\nlaunch = \"saxpy\""
        ),
    )
}

#[test]
fn a_loop_of_launches_waits_for_room_instead_of_queueing_every_call() {
    // The 1025th asynchronous launch waits until one of the first 1024 has finished.
    let n = workload::system::MAX_PENDING_OPS;
    let r = run(&repeated_launch(&(n + 8).to_string())).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.kernels.len(), n + 8);
    let first_done = r.kernels[0].finished_fs.unwrap();
    assert!(r.kernels[..n]
        .iter()
        .all(|k| k.called_fs == r.kernels[0].called_fs));
    assert!(
        r.kernels[n].called_fs >= first_done,
        "launch {n} called at {} fs, before the first finished at {first_done} fs",
        r.kernels[n].called_fs
    );
}

#[test]
fn an_endless_loop_of_launches_stops_at_the_cycle_limit() {
    // i64::MAX iterations used to be expanded before time advanced (400 MB/s, whatever the
    // cycle limit said); now the host waits for room and the cycle limit stops the run.
    let text = format!(
        "[limits]\nmax_cycles = 200000\n\n{}",
        repeated_launch("9223372036854775807")
    );
    let s = parse("s.toml", &text, &Mem).unwrap();
    let gpu = GpuConfig::preset("gtx480").unwrap();
    let setup = Setup::for_scenario(&s, TimedGpu::new(gpu), 200_000).unwrap();
    match System::new(setup, &s.processes).unwrap().run(&mut |_| {}) {
        Err(e @ RunError::CycleLimit { .. }) => {
            assert!(
                e.to_string().contains("process[0].command[2].body[0]"),
                "{e}"
            )
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("an endless loop finished"),
    }
}

#[test]
fn an_endless_loop_that_never_lets_time_pass_is_an_error() {
    for body in ["sync = true", "set = \"x\"\nvalues = [1.0]"] {
        let text = SAXPY_RUN.replace(
            "[[process.command]]\nlaunch = \"saxpy\"",
            &format!("[[process.command]]\nrepeat = 9223372036854775807\n[[process.command.body]]\n{body}\n\n[[process.command]]\nlaunch = \"saxpy\""),
        );
        match run(&text) {
            Err(e @ RunError::Process { .. }) => {
                let e = e.to_string();
                assert!(
                    e.contains("process `p`")
                        && e.contains("process[0].command[2].body[0]")
                        && e.contains("without"),
                    "{body}: {e}"
                );
            }
            Err(e) => panic!("{body}: {e}"),
            Ok(_) => panic!("{body}: an endless loop finished"),
        }
    }
}

/// A scenario in `dir` whose buffer `x` is read from `file` (`init = "file"`).
fn from_file(file: &str) -> String {
    format!(
        r#"[[process]]
name = "p"
ptx = "suite:reduce"

[[process.buffer]]
name = "x"
type = "f32"
init = "file"
file = "{file}"
"#
    )
}

#[test]
fn input_files_are_sized_and_typed_before_they_are_read() {
    let dir = std::env::temp_dir().join(format!("switchyard-bounds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let scenario = dir.join("s.toml").display().to_string();
    let parse_disk = |file: &str| {
        workload::parse(&scenario, &from_file(file), &workload::Disk)
            .unwrap_err()
            .to_string()
    };
    // A sparse file of 3 GiB: refused from its size, without reading (or allocating) it.
    let big = dir.join("big.bin");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(3 << 30)
        .unwrap();
    let e = parse_disk(&big.display().to_string());
    assert!(
        e.starts_with(&format!("{scenario}:9:8:"))
            && e.contains("process[0].buffer[0].file")
            && e.contains("big.bin")
            && e.contains("3221225472 bytes, more than"),
        "{e}"
    );
    // Not regular files: a device that never ends, a directory, a FIFO (opening it would
    // block until a writer came).
    let fifo = dir.join("fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    let mut specials = vec!["/dev/zero".to_string(), dir.display().to_string()];
    if made.is_ok_and(|s| s.success()) {
        specials.push(fifo.display().to_string());
    }
    for special in &specials {
        let e = parse_disk(special);
        assert!(
            e.contains("process[0].buffer[0].file") && e.contains("not a regular file"),
            "{special}: {e}"
        );
    }
    // A small regular file is read.
    let small = dir.join("small.bin");
    std::fs::write(&small, [0u8; 16]).unwrap();
    let s = workload::parse(
        &scenario,
        &from_file(&small.display().to_string()),
        &workload::Disk,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let workload::scenario::Program::Commands(c) = &s.processes[0].program else {
        panic!("a command program");
    };
    assert_eq!(c.buffers[0].init.len(), 16);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_scenario_has_a_memory_budget_for_all_its_processes() {
    // Five processes of 1 GiB each pass every per-buffer and per-process limit; together
    // they exceed the scenario's 4 GiB, and the fifth is named before it is allocated.
    let process = |i: usize| {
        format!(
            "[[process]]\nname = \"p{i}\"\nptx = \"saxpy.ptx\"\n\n[[process.buffer]]\nname = \"b{i}\"\ntype = \"f64\"\nlen = {}\ninit = \"fill\"\n\n",
            1u64 << 27
        )
    };
    // Checked against the declared sizes before any buffer is filled.
    let text: String = (0..5).map(process).collect();
    let e = error(&text);
    assert!(
        e.starts_with("s.toml:48:7:")
            && e.contains("process[4].buffer[0].len")
            && e.contains("buffer `b4` of process `p4`")
            && e.contains("more than the 4294967296"),
        "{e}"
    );
}

#[test]
fn a_launch_with_no_latency_is_delivered_once() {
    // Found by the loader fuzz test: with launch_latency_us = 0 (or 1e-300, which rounds to
    // no time) a launch heads its stream and its latency timer fires at the same moment,
    // and both delivered it: the second delivery panicked.
    for latency in ["0.0", "1e-300"] {
        let text = format!(
            "[host]\nlaunch_latency_us = {latency}\n\n{}",
            repeated_launch("3")
        );
        let r = run(&text).unwrap_or_else(|e| panic!("{latency}: {e}"));
        assert_eq!(r.kernels.len(), 3);
        assert!(r.kernels.iter().all(|k| k.finished_fs.is_some()));
        assert_eq!(r.kernels[0].arrived_fs, Some(r.kernels[0].called_fs));
    }
}
