//! Running a sweep into its database, with a stand-in for the suite's device: every point
//! computed once, failures recorded with their text, keys from what determines a result.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use rusqlite::Connection;
use sweep::{KernelOutcome, Options};

/// A fresh folder of this test's own.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sweep-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Counts the runs of each (kernel, seed); seed 13 errors, seed 7 does not verify.
struct Fake {
    runs: Mutex<Vec<(String, u64)>>,
    calls: AtomicUsize,
}

impl Fake {
    fn new() -> Fake {
        Fake {
            runs: Mutex::new(Vec::new()),
            calls: AtomicUsize::new(0),
        }
    }

    fn run(
        &self,
        k: &'static dyn suite::Kernel,
        _t: suite::Target,
        _s: suite::Size,
        seed: u64,
        _g: &gpu::timing::TimedGpu,
    ) -> Result<KernelOutcome, String> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.runs.lock().unwrap().push((k.name().to_string(), seed));
        match seed {
            13 => Err("device fault at 0x40".into()),
            7 => Ok(KernelOutcome {
                verified: false,
                detail: "2 mismatches".into(),
                launches: vec![],
            }),
            _ => Ok(KernelOutcome {
                verified: true,
                detail: "ok".into(),
                launches: vec![],
            }),
        }
    }
}

fn run(sweep: &sweep::Sweep, db: &Path, fake: &Fake, retry: bool) -> sweep::Summary {
    let runner = |k, t, s, seed, g: &_| fake.run(k, t, s, seed, g);
    let mut last = None;
    let s = sweep::run(
        sweep,
        db,
        Options {
            jobs: 3,
            retry_failed: retry,
        },
        &runner,
        &mut |p| last = Some(p),
    )
    .unwrap();
    let last = last.unwrap();
    assert_eq!((last.done, last.total), (s.points, s.points));
    s
}

fn count(db: &Path, sql: &str) -> i64 {
    Connection::open(db)
        .unwrap()
        .query_row(sql, [], |r| r.get(0))
        .unwrap()
}

#[test]
fn each_point_is_computed_once_and_a_rerun_computes_nothing() {
    let dir = scratch("once");
    let db = dir.join("s.db");
    let s = sweep::parse(
        "s.toml",
        "[grid]\nkernel = [\"reduce\", \"scan\", \"hist\"]\nseed = [1, 2, 3, 4]\n",
    )
    .unwrap();
    let fake = Fake::new();
    let first = run(&s, &db, &fake, false);
    assert_eq!(
        (first.points, first.reused, first.computed, first.failed),
        (12, 0, 12, 0)
    );
    assert_eq!(fake.calls.load(Ordering::SeqCst), 12);
    let mut runs = fake.runs.lock().unwrap().clone();
    runs.sort();
    runs.dedup();
    assert_eq!(runs.len(), 12, "every point once");
    let again = run(&s, &db, &fake, false);
    assert_eq!((again.reused, again.computed), (12, 0));
    assert_eq!(fake.calls.load(Ordering::SeqCst), 12, "nothing recomputed");
    assert_eq!(count(&db, "SELECT COUNT(*) FROM points"), 12);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM computations"), 12);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM runs"), 2);
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM points WHERE run = 1 AND status = 'ok'"
        ),
        12
    );
    // The view has the fields as columns.
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM results WHERE kernel = 'scan' AND seed = 3"
        ),
        1
    );
    // A grown sweep computes only its new points.
    let more = sweep::parse(
        "s.toml",
        "[grid]\nkernel = [\"reduce\", \"scan\", \"hist\"]\nseed = [1, 2, 3, 4, 5]\n",
    )
    .unwrap();
    let grown = run(&more, &db, &fake, false);
    assert_eq!((grown.reused, grown.computed), (12, 3));
    assert_eq!(count(&db, "SELECT COUNT(*) FROM computations"), 15);
    let csv = sweep::query_csv(
        &db,
        Some("SELECT kernel, seed, status FROM results ORDER BY point"),
    )
    .unwrap();
    assert_eq!(csv.lines().next(), Some("kernel,seed,status"));
    assert_eq!(csv.lines().count(), 16);
}

#[test]
fn failed_points_are_recorded_with_their_error_and_retried_only_when_asked() {
    let dir = scratch("failed");
    let db = dir.join("s.db");
    let s = sweep::parse(
        "s.toml",
        "[grid]\nkernel = [\"reduce\"]\nseed = [1, 7, 13]\n",
    )
    .unwrap();
    let fake = Fake::new();
    let first = run(&s, &db, &fake, false);
    assert_eq!((first.computed, first.failed), (3, 2));
    let conn = Connection::open(&db).unwrap();
    let error = |seed: i64| -> (String, Option<String>) {
        conn.query_row(
            "SELECT status, error FROM results WHERE seed = ?1",
            [seed],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    };
    assert_eq!(error(1), ("ok".into(), None));
    assert_eq!(
        error(7),
        ("failed".into(), Some("did not verify: 2 mismatches".into()))
    );
    assert_eq!(
        error(13),
        ("failed".into(), Some("device fault at 0x40".into()))
    );
    // Run again: the failures stand, and are not recomputed.
    let again = run(&s, &db, &fake, false);
    assert_eq!((again.computed, again.failed), (0, 2));
    assert_eq!(fake.calls.load(Ordering::SeqCst), 3);
    // Retried: only they run again, each still one row.
    let retried = run(&s, &db, &fake, true);
    assert_eq!((retried.computed, retried.failed), (2, 2));
    assert_eq!(fake.calls.load(Ordering::SeqCst), 5);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM points"), 3);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM computations"), 5);
}

/// A scenario of one process running saxpy from `saxpy.ptx` beside it.
fn write_scenario(dir: &Path, ptx_extra: &str) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let ptx = std::fs::read_to_string(repo.join("examples/saxpy/saxpy.ptx")).unwrap();
    std::fs::write(dir.join("saxpy.ptx"), format!("{ptx}{ptx_extra}")).unwrap();
    std::fs::write(
        dir.join("one.toml"),
        std::fs::read_to_string(repo.join("crates/sweep/tests/data/one.toml")).unwrap(),
    )
    .unwrap();
}

fn key_of(dir: &Path, fields: &str) -> (String, Result<(), String>) {
    let file = dir.join("s.toml").display().to_string();
    let s = sweep::parse(
        &file,
        &format!("[fixed]\nscenario = \"one.toml\"\n{fields}"),
    )
    .unwrap();
    let p = sweep::point::prepare(&s, 0);
    (p.key, p.job.map(|_| ()))
}

#[test]
fn a_key_is_what_determines_the_result_not_where_the_files_are() {
    let a = scratch("key-a");
    let b = scratch("key-b");
    write_scenario(&a, "");
    write_scenario(&b, "");
    let (ka, ja) = key_of(&a, "");
    let (kb, _) = key_of(&b, "");
    ja.unwrap();
    assert_eq!(ka, kb, "the same files elsewhere: the same key");
    assert_eq!(ka.len(), 64);
    // The PTX the scenario reads is in the key.
    let c = scratch("key-c");
    write_scenario(&c, "\n// one more line\n");
    assert_ne!(key_of(&c, "").0, ka);
    // So are the GPU, the policy and a scenario field.
    assert_ne!(key_of(&a, "gpu = \"k20c\"\n").0, ka);
    assert_ne!(key_of(&a, "policy = \"npq\"\n").0, ka);
    let (kf, jf) = key_of(&a, "\"scenario.process.0.arrival_us\" = 5.0\n");
    jf.unwrap();
    assert_ne!(kf, ka);
    // An override that does not fit the scenario is the point's error, naming the field.
    let (_, bad) = key_of(&a, "\"scenario.process.3.arrival_us\" = 5.0\n");
    let e = bad.unwrap_err();
    assert!(
        e.contains(
            "s.toml:3: `scenario.process.3.arrival_us`: index 3 is past the list's 1 entries"
        ),
        "{e}"
    );
}

#[test]
fn a_point_that_cannot_be_prepared_is_recorded_as_failed() {
    let dir = scratch("unready");
    write_scenario(&dir, "");
    let file = dir.join("s.toml").display().to_string();
    let s = sweep::parse(
        &file,
        "[grid]\nscenario = [\"one.toml\", \"missing.toml\"]\nmax_cycles = [1]\n",
    )
    .unwrap();
    let db = dir.join("s.db");
    let fake = Fake::new();
    let summary = run(&s, &db, &fake, false);
    assert_eq!((summary.computed, summary.failed), (2, 2));
    let conn = Connection::open(&db).unwrap();
    let errors: Vec<String> = conn
        .prepare("SELECT error FROM results ORDER BY point")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(errors[0].contains("cycle"), "{}", errors[0]);
    assert!(
        errors[1].contains("s.toml:2: `scenario`: ") && errors[1].contains("missing.toml"),
        "{}",
        errors[1]
    );
}

#[test]
fn a_kernel_point_without_a_gpu_runs_on_the_gtx480_with_its_scheduler() {
    let s = sweep::parse(
        "s.toml",
        "[fixed]\nkernel = \"reduce\"\nscheduler = \"two-level\"\n",
    )
    .unwrap();
    let p = sweep::point::prepare(&s, 0);
    let Ok(sweep::point::Job::Kernel { timing, .. }) = p.job else {
        panic!("a kernel point")
    };
    assert_eq!(timing.gpu.name, "gtx480");
    assert_eq!(
        timing.gpu.sm.scheduler,
        gpu::config::SchedulerPolicy::TwoLevel
    );
    assert_eq!(timing.options.threads, 1);
}

#[test]
fn a_scenario_point_runs_and_keeps_its_report() {
    let dir = scratch("scenario");
    write_scenario(&dir, "");
    let file = dir.join("s.toml").display().to_string();
    let s = sweep::parse(
        &file,
        "[fixed]\nscenario = \"one.toml\"\n[grid]\npolicy = [\"fcfs\", \"npq\"]\n",
    )
    .unwrap();
    let db = dir.join("s.db");
    let fake = Fake::new();
    let summary = run(&s, &db, &fake, false);
    assert_eq!((summary.computed, summary.failed), (2, 0));
    let conn = Connection::open(&db).unwrap();
    let (policy, cycles, result): (String, i64, String) = conn
        .query_row(
            "SELECT policy, cycles, result FROM results WHERE point = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(policy, "npq");
    assert!(cycles > 0);
    let report: serde_json::Value = serde_json::from_str(&result).unwrap();
    assert_eq!(report["all_verified"], true);
    assert_eq!(report["processes"][0]["name"], "p");
    assert_eq!(report["cycles"].as_i64(), Some(cycles));
}

/// The pieces a foreign executor (the Python package's Ray backend) is made of: `start`,
/// `run_point` in another "process", `Recorder::record_from` as results arrive, in any
/// order, one of them twice.
#[test]
fn a_foreign_executor_records_each_point_once_whatever_arrives_twice() {
    let dir = scratch("foreign");
    let text = "[grid]\nkernel = [\"reduce\", \"scan\"]\nseed = [1, 7, 13]\n";
    let s = sweep::parse("s.toml", text).unwrap();
    let fake = Fake::new();
    let runner = |k, t, sz, seed, g: &_| fake.run(k, t, sz, seed, g);
    let db = dir.join("ray.db");
    let mut started = sweep::start(&s, &db, false).unwrap();
    assert_eq!(started.pending, vec![0, 1, 2, 3, 4, 5]);
    // The worker parses the sweep's text itself, and runs the points last first.
    let worker = sweep::parse("s.toml", text).unwrap();
    let results: Vec<(usize, String, sweep::Outcome)> = started
        .pending
        .iter()
        .rev()
        .map(|&i| {
            let (key, o) = sweep::run_point(&worker, i, &runner).unwrap();
            // Through JSON, as the Python side carries it.
            let o: sweep::Outcome =
                serde_json::from_str(&serde_json::to_string(&o).unwrap()).unwrap();
            (i, key, o)
        })
        .collect();
    let r = &mut started.recorder;
    for (i, key, o) in &results {
        assert_eq!(r.record_from(*i, key, o).unwrap(), sweep::Recorded::Written);
    }
    // Every result delivered again (a retried task whose first attempt did finish): nothing
    // is written, failed points included.
    for (i, key, o) in &results {
        assert_eq!(
            r.record_from(*i, key, o).unwrap(),
            sweep::Recorded::Duplicate
        );
    }
    let summary = r.summary();
    assert_eq!(
        (summary.computed, summary.failed, summary.duplicates),
        (6, 4, 6)
    );
    assert_eq!(count(&db, "SELECT COUNT(*) FROM points"), 6);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM computations"), 6);
    // A point number past the sweep is an error, not a panic.
    assert!(matches!(
        sweep::run_point(&worker, 6, &runner),
        Err(sweep::SweepError::NoSuchPoint {
            index: 6,
            points: 6
        })
    ));
    assert!(r.record(9, &sweep::Outcome::default()).is_err());
    // The same rows as the local executor's.
    let local = dir.join("local.db");
    run(&s, &local, &fake, false);
    let rows = |db: &Path| -> Vec<(String, String, Option<String>, Option<i64>)> {
        Connection::open(db)
            .unwrap()
            .prepare("SELECT key, status, error, verified FROM points ORDER BY point")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(rows(&db), rows(&local));
    // A second start runs nothing.
    assert!(sweep::start(&s, &db, false).unwrap().pending.is_empty());
    // With `retry_failed`, the failed points run again and replace their rows once.
    let mut retry = sweep::start(&s, &db, true).unwrap();
    assert_eq!(retry.pending, vec![1, 2, 4, 5]);
    for &i in &retry.pending.clone() {
        let (key, o) = sweep::run_point(&worker, i, &runner).unwrap();
        assert_eq!(
            retry.recorder.record_from(i, &key, &o).unwrap(),
            sweep::Recorded::Written
        );
        assert_eq!(
            retry.recorder.record_from(i, &key, &o).unwrap(),
            sweep::Recorded::Duplicate
        );
    }
    assert_eq!(count(&db, "SELECT COUNT(*) FROM points"), 6);
    assert_eq!(count(&db, "SELECT COUNT(*) FROM computations"), 10);
}

/// A worker whose key differs (other files, another version) does not file its result under
/// the driver's key.
#[test]
fn a_result_under_another_key_is_recorded_as_failed() {
    let dir = scratch("otherkey");
    let s = sweep::parse("s.toml", "[fixed]\nkernel = \"reduce\"\n").unwrap();
    let db = dir.join("s.db");
    let mut started = sweep::start(&s, &db, false).unwrap();
    let ok = sweep::Outcome {
        ok: true,
        ..sweep::Outcome::default()
    };
    started.recorder.record_from(0, "feed", &ok).unwrap();
    let error: String = Connection::open(&db)
        .unwrap()
        .query_row("SELECT error FROM points", [], |r| r.get(0))
        .unwrap();
    assert!(
        error.contains("computed its key as feed") && error.contains("differ"),
        "{error}"
    );
}
