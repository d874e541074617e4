//! Inference beside batch work (issue 23, item 6): a latency-critical process serves
//! requests that arrive on a seeded schedule, one program run a request, beside a long batch
//! kernel; the report gives the requests' latency percentiles.

use std::path::Path;

use gpu::config::GpuConfig;
use gpu::timing::TimedGpu;
use workload::{parse, Report, RunRecord, Scenario, Setup, System};

fn fma() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/throughput/fma.ptx")
        .display()
        .to_string()
}

/// A process named `name` that copies `len` floats of 1.0 in, runs `fma_f32` over them in
/// `len / 256` TBs of `iters` iterations (which writes zeros), waits, and checks the zeros.
fn fma_process(name: &str, priority: i32, len: u32, iters: u32, extra: &str) -> String {
    format!(
        r#"
[[process]]
name = "{name}"
ptx = "{ptx}"
priority = {priority}
{extra}
[[process.buffer]]
name = "out"
type = "f32"
len = {len}
init = "fill"
value = 1.0
[[process.command]]
copy = "out"
[[process.command]]
launch = "fma_f32"
grid = [{tbs}]
block = [256]
args = [{{ buffer = "out" }}, {{ u32 = {iters} }}]
[[process.command]]
sync = true
[[process.check]]
buffer = "out"
fill = 0.0
"#,
        ptx = fma(),
        tbs = len / 256
    )
}

fn load(text: &str) -> Scenario {
    parse("inference.toml", text, &workload::Disk).unwrap_or_else(|e| panic!("{e}"))
}

fn run(s: &Scenario) -> (Report, RunRecord) {
    let gpu = GpuConfig::preset("gtx480").unwrap();
    let setup = Setup::for_scenario(s, TimedGpu::new(gpu), s.max_cycles.unwrap()).unwrap();
    let r = System::new(setup.clone(), &s.processes)
        .unwrap()
        .run(&mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    let report = Report::new(s, "gtx480", &r, None);
    assert!(report.all_verified, "{:?}", report.processes);
    (report, r)
}

/// A batch kernel of 360 long TBs (four waves on the GTX480) arriving first, and an
/// inference process of higher priority whose 8 requests (4 TBs each) arrive as a seeded
/// Poisson stream from 20 µs on. The copy engines take copies first come, first served,
/// under every policy.
fn beside_batch(policy: &str, mechanism: &str) -> String {
    let mut text = format!(
        "[limits]\nmax_cycles = 50_000_000\n[scheduler]\npolicy = \"{policy}\"\nmechanism = \"{mechanism}\"\ncopy_engine = \"fcfs\"\n"
    );
    text += &fma_process("batch", 0, 360 * 256, 200, "");
    text += &fma_process(
        "infer",
        10,
        4 * 256,
        8,
        "arrival_us = 20.0\nrequests = { kind = \"poisson\", mean_us = 40.0, count = 8, seed = 1 }",
    );
    text
}

#[test]
fn ppq_gives_the_inference_requests_a_lower_tail_than_fcfs() {
    let (fcfs, fcfs_run) = run(&load(&beside_batch("fcfs", "baseline")));
    let (ppq, _) = run(&load(&beside_batch("ppq", "baseline")));
    let latency = |r: &Report| {
        r.processes[1]
            .requests
            .clone()
            .expect("infer serves requests")
    };
    let (f, p) = (latency(&fcfs), latency(&ppq));
    eprintln!("fcfs: {f:?}\nppq:  {p:?}");
    eprintln!(
        "batch turnaround µs: fcfs {:.1}, ppq {:.1}",
        fcfs.processes[0].turnaround_us, ppq.processes[0].turnaround_us
    );
    assert_eq!((f.count, p.count), (8, 8));
    assert!(fcfs.processes[0].requests.is_none(), "batch serves none");
    // The requests arrive while the batch kernel holds every SM: under FCFS they wait for
    // its last TB to be placed, under PPQ its SMs are drained for them at once.
    assert!(
        2.0 * p.p99_us < f.p99_us,
        "PPQ's p99 {} should be under half FCFS's {}",
        p.p99_us,
        f.p99_us
    );
    assert!(p.p50_us < f.p50_us);
    // Every request is a run of the program, arriving on the seeded schedule after the
    // process's arrival, started no earlier and not before the one before it ended.
    let infer = &fcfs_run.processes[1];
    assert!(infer.requests);
    assert_eq!(infer.runs.len(), 8);
    let times = workload::arrivals::Arrivals::Poisson {
        mean_us: 40.0,
        count: 8,
        seed: 1,
    }
    .times_us();
    let fs = workload::system::FS_PER_US as f64;
    for (i, run) in infer.runs.iter().enumerate() {
        let want = (20.0 + times[i]) * fs;
        assert!((run.requested_fs as f64 - want).abs() <= 1.0, "request {i}");
        assert!(run.started_fs >= run.requested_fs);
        if i > 0 {
            assert!(run.started_fs >= infer.runs[i - 1].finished_fs);
        }
    }
    // The CSVs carry the same numbers.
    let csv = fcfs.processes_csv();
    let row = csv.lines().find(|l| l.starts_with("infer,")).unwrap();
    assert!(
        row.ends_with(&format!(
            ",8,{:.3},{:.3},{:.3},{:.3},{:.3}",
            f.p50_us, f.p95_us, f.p99_us, f.p999_us, f.max_us
        )),
        "{row}"
    );
    assert_eq!(fcfs.requests_csv().lines().count(), 1 + 8);
    // Seeded: the same scenario gives the same latencies.
    let (again, _) = run(&load(&beside_batch("ppq", "baseline")));
    assert_eq!(latency(&again), p);
}

#[test]
fn requests_that_arrive_while_one_runs_wait_their_turn() {
    // Requests every 0.5 µs, each a kernel that takes longer: each starts when the one
    // before it ends, and its latency counts the wait.
    let text = format!(
        "[limits]\nmax_cycles = 5_000_000\n{}",
        fma_process(
            "infer",
            0,
            4 * 256,
            64,
            "requests = { kind = \"periodic\", every_us = 0.5, count = 4 }"
        )
    );
    let (report, r) = run(&load(&text));
    let runs = &r.processes[0].runs;
    assert_eq!(runs.len(), 4);
    let fs = workload::system::FS_PER_US;
    for (i, run) in runs.iter().enumerate() {
        assert_eq!(run.requested_fs, i as u64 * fs / 2);
        if i > 0 {
            assert_eq!(
                run.started_fs,
                runs[i - 1].finished_fs,
                "request {i} waited"
            );
            assert!(run.started_fs > run.requested_fs);
        }
    }
    let l = report.processes[0].requests.clone().unwrap();
    let lat: Vec<f64> = runs
        .iter()
        .map(|x| (x.finished_fs - x.requested_fs) as f64 / fs as f64)
        .collect();
    // Latencies grow as the queue does; the largest is p99 and max.
    assert!(lat.windows(2).all(|w| w[1] > w[0]), "{lat:?}");
    assert_eq!(l.max_us, lat[3]);
    assert_eq!(l.p99_us, lat[3]);
    assert_eq!(l.p50_us, lat[1]);
}

#[test]
fn nearest_rank_percentiles() {
    let v: Vec<f64> = (1..=200).map(f64::from).collect();
    let l = workload::report::Latency::of(&v).unwrap();
    assert_eq!(
        (l.p50_us, l.p95_us, l.p99_us, l.p999_us, l.max_us),
        (100.0, 190.0, 198.0, 200.0, 200.0)
    );
    assert_eq!(l.mean_us, 100.5);
    assert!(workload::report::Latency::of(&[]).is_none());
}

#[test]
fn requests_are_checked_where_they_are_written() {
    let bad = |requests: &str, replay: &str| {
        let text = format!(
            "{replay}{}",
            fma_process("infer", 0, 256, 1, &format!("requests = {requests}"))
        );
        parse("r.toml", &text, &workload::Disk)
            .unwrap_err()
            .to_string()
    };
    let e = bad(r#"{ kind = "periodic", every_us = -1.0, count = 3 }"#, "");
    // Line 6: the blank line, `[[process]]`, name, ptx, priority, then `requests`.
    assert!(
        e.starts_with("r.toml:6:12: `process[0].requests`: `every_us` = -1 is out of range"),
        "{e}"
    );
    let e = bad(r#"{ kind = "poisson", mean_us = 5.0 }"#, "");
    assert!(
        e.contains("`process[0].requests`: missing field `count`"),
        "{e}"
    );
    let e = bad(
        r#"{ kind = "periodic", every_us = 1.0, count = 2 }"#,
        "replay = 3\n",
    );
    assert!(
        e.contains("`process[0].requests`") && e.contains("cannot also be replayed"),
        "{e}"
    );
    let e = bad("7", "");
    assert!(e.contains("`process[0].requests`"), "{e}");
}

/// `infer` (4 TBs of `fma_f32`, 4 requests 40 µs apart from 0): with `setup`, its input
/// copy is a `[[process.setup]]` command and each request only launches and syncs.
fn served(setup: bool) -> String {
    let text = fma_process(
        "infer",
        0,
        4 * 256,
        8,
        "requests = { kind = \"periodic\", every_us = 40.0, count = 4 }",
    );
    let text = if setup {
        text.replacen("[[process.command]]\ncopy", "[[process.setup]]\ncopy", 1)
    } else {
        text
    };
    format!("[limits]\nmax_cycles = 5_000_000\n{text}")
}

#[test]
fn a_setup_runs_once_and_each_request_runs_only_its_body() {
    let (with, w) = run(&load(&served(true)));
    let (without, wo) = run(&load(&served(false)));
    // One input copy in all with a setup, one a request without.
    assert_eq!(w.copies.len(), 1, "{:?}", w.copies);
    assert_eq!(wo.copies.len(), 4);
    assert_eq!((w.kernels.len(), wo.kernels.len()), (4, 4));
    // The setup starts at the arrival (0) and serves no request: the runs are the requests,
    // each checked (the kernel writes zeros over the ones the setup copied).
    let runs = &w.processes[0].runs;
    assert_eq!(runs.len(), 4);
    assert!(runs.iter().all(|r| r.verdict.verified));
    assert_eq!(w.copies[0].called_fs, 0);
    // So a request costs its kernel, not the copy: each one's latency is shorter. (The
    // first request arrives with the process and waits for the setup's copy, so it costs
    // the same either way.)
    for (a, b) in runs.iter().zip(&wo.processes[0].runs).skip(1) {
        let (la, lb) = (
            a.finished_fs - a.requested_fs,
            b.finished_fs - b.requested_fs,
        );
        assert!(la < lb, "with a setup {la} fs, without {lb} fs");
    }
    let (l, m) = (
        with.processes[0].requests.clone().unwrap(),
        without.processes[0].requests.clone().unwrap(),
    );
    assert!(l.p99_us < m.p99_us, "{l:?} {m:?}");
}

#[test]
fn a_setup_is_checked_where_it_is_written() {
    let bad = |text: &str| {
        parse("s.toml", text, &workload::Disk)
            .unwrap_err()
            .to_string()
    };
    // Setup commands without requests: line 16 holds the setup's `copy`.
    let text = served(true).replace(
        "requests = { kind = \"periodic\", every_us = 40.0, count = 4 }",
        "",
    );
    let e = bad(&text);
    assert!(
        e.starts_with("s.toml:16:8: `process[0].setup[0]`: setup commands run once before the process serves requests: they need `requests`"),
        "{e}"
    );
    // A setup command is resolved as a command is.
    let e = bad(&served(true).replace("copy = \"out\"", "copy = \"nope\""));
    assert!(e.contains("`process[0].setup[0].copy`"), "{e}");
    // `warm_up` is for suite processes, and needs requests.
    let e = bad(&served(true).replace("priority = 0", "priority = 0\nwarm_up = true"));
    assert!(
        e.contains("`process[0].warm_up`: `warm_up` is for a suite process"),
        "{e}"
    );
    let e = bad("[[process]]\nname = \"s\"\nsuite = \"softmax\"\nwarm_up = true\n");
    assert!(
        e.starts_with("s.toml:4:11: `process[0].warm_up`: a warm-up runs once before the process serves requests: it needs `requests`"),
        "{e}"
    );
    let e = bad("[[process]]\nname = \"s\"\nsuite = \"softmax\"\nwarm_up = 1\n");
    assert!(e.contains("s.toml:4"), "{e}");
}

/// A suite process warming up on the GTX480 and serving `count` requests 30 µs apart.
fn warm(kernel: &str, count: u32) -> String {
    format!(
        "[limits]\nmax_cycles = 20_000_000\n[[process]]\nname = \"{kernel}\"\nsuite = \"{kernel}\"\nwarm_up = true\nrequests = {{ kind = \"periodic\", every_us = 30.0, count = {count} }}\n"
    )
}

#[test]
fn a_warmed_up_suite_program_serves_its_launches_again() {
    let s = load(&warm("softmax", 3));
    let gpu = GpuConfig::preset("gtx480").unwrap();
    let setup = Setup::for_scenario(&s, TimedGpu::new(gpu), s.max_cycles.unwrap()).unwrap();
    let r = System::new(setup, &s.processes)
        .unwrap()
        .run(&mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    let p = &r.processes[0];
    assert_eq!(p.runs.len(), 3);
    for run in &p.runs {
        assert!(run.verdict.verified, "{:?}", run.verdict);
        assert!(run
            .verdict
            .detail
            .contains("as the verified warm-up run left them"));
    }
    // Every copy is the warm-up's, before the first request's launches; each request
    // launches what the warm-up launched.
    let per_run = r.kernels.len() / 4;
    assert!(
        per_run >= 1 && r.kernels.len() == 4 * per_run,
        "{}",
        r.kernels.len()
    );
    let first_request = r.kernels[per_run].called_fs;
    assert!(r.copies.iter().all(|c| c.finished_fs <= first_request));
    assert!(r.copies.iter().any(|c| c.to_device) && r.copies.iter().any(|c| !c.to_device));
}

#[test]
fn a_program_whose_launches_do_not_repeat_fails_its_requests() {
    // hist's host program zeroes its bins before its launch: run again without that write,
    // the launch adds to the warm-up's counts, and the request's check must say so.
    let s = load(&warm("hist", 1));
    let gpu = GpuConfig::preset("gtx480").unwrap();
    let setup = Setup::for_scenario(&s, TimedGpu::new(gpu), s.max_cycles.unwrap()).unwrap();
    let r = System::new(setup, &s.processes)
        .unwrap()
        .run(&mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    let v = &r.processes[0].runs[0].verdict;
    assert!(!v.verified, "{v:?}");
    assert!(
        v.detail.contains("differs from the verified warm-up run's"),
        "{v:?}"
    );
}

#[test]
fn one_context_orders_the_processes_by_stream_priority() {
    // The batch and the inference process as threads of one application: the inference's
    // stream has the higher priority, so under FCFS the batch's SMs stop taking its TBs
    // and go to each request's kernel as they drain, where separate contexts wait for the
    // batch's last TB to be placed.
    let s = load(&beside_batch("fcfs", "drain"));
    let gpu = GpuConfig::preset("gtx480").unwrap();
    let latency = |one_context: bool| {
        let mut setup =
            Setup::for_scenario(&s, TimedGpu::new(gpu.clone()), s.max_cycles.unwrap()).unwrap();
        setup.one_context = one_context;
        let r = System::new(setup, &s.processes)
            .unwrap()
            .run(&mut |_| {})
            .unwrap_or_else(|e| panic!("{e}"));
        let report = Report::new(&s, "gtx480", &r, None);
        assert!(report.all_verified);
        (report.processes[1].requests.clone().unwrap(), r)
    };
    let ((apart, _), (together, r)) = (latency(false), latency(true));
    eprintln!("contexts apart: {apart:?}\none context: {together:?}");
    // A yielding SM still waits for its running batch TBs (200 iterations each) to finish,
    // so the gain is bounded by a TB's time: a quarter off the tail at least, not all of it.
    assert!(
        together.p99_us < 0.75 * apart.p99_us && together.p50_us < apart.p50_us,
        "one context's p99 {} should be well under separate contexts' {}",
        together.p99_us,
        apart.p99_us
    );
    // Nothing is preempted: SMs yield by draining.
    assert!(r.preemptions.is_empty(), "{:?}", r.preemptions.len());
    assert!(r
        .records
        .iter()
        .any(|x| matches!(x, sched::Record::SmYielded { .. })));
}
