//! Sweeps: many runs of suite kernels or scenarios over a grid or a list of points (GPU
//! presets, schedulers, sizes, seeds, policies, mechanisms, any scenario field), every
//! point's result kept in a SQLite database, a killed sweep restarted where it stopped.
//!
//! * [`spec`]: the sweep file (`SWEEP.toml`), checked with file, line and field.
//! * [`point`]: a point made ready (its key, the SHA-256 of everything that determines its
//!   result) and its run, with the same library calls as `switchyard run` and `switchyard
//!   scenario`.
//! * [`db`]: the results database (`points`, `runs`, `computations`, the `results` view).
//!
//! Invariants: a point whose key has a row in the database is never run again (a failed one
//! only with `retry_failed`); each finished point is committed in its own transaction as
//! soon as it finishes, so killing a sweep loses only the points still running; the points
//! run side by side on `jobs` threads, each simulation on the sweep's `threads` (1 by
//! default), and a point's result does not depend on either. This crate keeps rusqlite out of
//! the simulator's core crates: only the command (`crates/switchyard`) and the Python
//! package depend on it.

pub mod db;
pub mod point;
pub mod spec;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

pub use db::{query_csv, Db, DbError};
pub use point::{KernelOutcome, KernelRunner, Outcome};
pub use spec::{parse, Point, SpecError, Sweep};

/// How a sweep runs.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Points run side by side.
    pub jobs: usize,
    /// Run again the points recorded as failed.
    pub retry_failed: bool,
}

/// Where a sweep stands, after each point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Points of the sweep with a row (finished before this run or in it).
    pub done: usize,
    pub total: usize,
    /// Points run in this run so far.
    pub computed: usize,
    pub failed: usize,
}

/// What a sweep did.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub run: i64,
    /// Distinct points (keys) of the sweep.
    pub points: usize,
    /// Points that had a row before this run and were not run.
    pub reused: usize,
    /// Points run now.
    pub computed: usize,
    /// Points of the sweep whose row says `failed` (from this run or an earlier one).
    pub failed: usize,
    /// Wall-clock time spent writing the database (information only).
    pub database: Duration,
    /// Each point's key, in the sweep's order (a key twice where two points are the same).
    pub keys: Vec<String>,
}

/// A sweep that could not run (a point that failed is not this: it is recorded).
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error(transparent)]
    Db(#[from] DbError),
}

/// Runs every point of `sweep` that the database at `path` does not hold yet.
pub fn run(
    sweep: &Sweep,
    path: &Path,
    options: Options,
    kernels: &KernelRunner<'_>,
    progress: &mut dyn FnMut(Progress),
) -> Result<Summary, SweepError> {
    let prepared: Vec<point::Prepared> = (0..sweep.points.len())
        .map(|i| point::prepare(sweep, i))
        .collect();
    let mut fields: Vec<String> = sweep
        .points
        .iter()
        .flat_map(|p| p.fields.keys().cloned())
        .collect();
    fields.sort();
    fields.dedup();
    let mut db = Db::open(path, &sweep.file, prepared.len(), &fields)?;
    // One run per distinct key; those the database has are done.
    let mut seen = std::collections::HashSet::new();
    let mut pending: Vec<&point::Prepared> = Vec::new();
    let mut reused = 0;
    let mut failed = 0;
    for p in &prepared {
        if !seen.insert(p.key.as_str()) {
            continue;
        }
        match db.status(&p.key)?.as_deref() {
            Some("ok") => reused += 1,
            Some(_) if !options.retry_failed => {
                reused += 1;
                failed += 1;
            }
            _ => pending.push(p),
        }
    }
    let total = seen.len();
    let mut state = Progress {
        done: reused,
        total,
        computed: 0,
        failed,
    };
    progress(state);
    let mut database = Duration::ZERO;
    // Points that could not be prepared are recorded at once, without a thread.
    let (ready, unready): (Vec<&point::Prepared>, Vec<&point::Prepared>) =
        pending.into_iter().partition(|p| p.job.is_ok());
    for p in unready {
        let o = Outcome::failed(p.job.as_ref().err().cloned().unwrap_or_default());
        let t = Instant::now();
        db.record(&p.key, &sweep.file, p.index, &p.params, &o)?;
        database += t.elapsed();
        state.done += 1;
        state.computed += 1;
        state.failed += 1;
        progress(state);
    }
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let jobs = options.jobs.max(1).min(ready.len().max(1));
    let result: Result<(), SweepError> = std::thread::scope(|scope| {
        let (tx, rx) = channel::<(usize, Outcome)>();
        for _ in 0..jobs {
            let tx = tx.clone();
            let (ready, next, stop) = (&ready, &next, &stop);
            scope.spawn(move || loop {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(p) = ready.get(i) else { break };
                let job = p.job.as_ref().expect("only ready points");
                let o = point::run(job, kernels);
                if tx.send((i, o)).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        for (i, o) in rx {
            let p = ready[i];
            let t = Instant::now();
            if let Err(e) = db.record(&p.key, &sweep.file, p.index, &p.params, &o) {
                stop.store(true, Ordering::Relaxed);
                return Err(e.into());
            }
            database += t.elapsed();
            state.done += 1;
            state.computed += 1;
            state.failed += usize::from(!o.ok);
            progress(state);
        }
        Ok(())
    });
    result?;
    Ok(Summary {
        run: db.run,
        points: total,
        reused,
        computed: state.computed,
        failed: state.failed,
        database,
        keys: prepared.iter().map(|p| p.key.clone()).collect(),
    })
}
