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
//! * [`start`], [`Recorder`], [`run_point`]: the pieces every executor is made of (the
//!   database opened and the points to run chosen; a point run anywhere; its result recorded
//!   as it arrives). [`run`] puts them together on threads of this process; the Python
//!   package's Ray backend (`python/switchyard/_ray.py`) on the tasks of a Ray cluster.
//!
//! Invariants: a point whose key has a row in the database is never run again (a failed one
//! only with `retry_failed`), and a result delivered twice writes one row; each finished
//! point is committed in its own transaction as soon as it finishes, so killing a sweep loses
//! only the points still running; the points run side by side on `jobs` threads (or Ray
//! tasks), each simulation on the sweep's `threads` (1 by default), and a point's result
//! does not depend on either. This crate keeps rusqlite out of
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
    /// Results that came for a key already recorded (a foreign executor delivering one
    /// point twice), not written again.
    pub duplicates: usize,
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
    /// A point number past the sweep's points (from a foreign executor).
    #[error("point {index}: the sweep has {points} points (0 to {})", points.saturating_sub(1))]
    NoSuchPoint { index: usize, points: usize },
}

/// How a recorded result went into the database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// Its row was written.
    Written,
    /// The key already had its row (this run's, or an `ok` one): nothing was written.
    Duplicate,
}

/// A sweep started on its database: every point prepared (its key computed), the points to
/// run chosen, the points that could not be prepared already recorded as failed, and the
/// database open to record the others as they finish.
///
/// The one path of every executor: [`run`] runs `pending` on threads of this process; a
/// foreign executor (the Python package's Ray backend) sends each pending point's number to
/// a worker that calls [`run_point`] and hands the result back to [`Recorder::record_from`].
pub struct Started {
    /// Every point of the sweep, in its order.
    pub prepared: Vec<point::Prepared>,
    /// The points to run: the first point of each key the database lacks (or holds as
    /// failed, with `retry_failed`), each ready to run, in the sweep's order.
    pub pending: Vec<usize>,
    pub recorder: Recorder,
}

/// Writes a started sweep's results into its database, one transaction per point, and
/// keeps its count.
pub struct Recorder {
    db: Db,
    file: String,
    /// Each point's key and fields, by point number.
    points: Vec<(String, serde_json::Value)>,
    state: Progress,
    reused: usize,
    duplicates: usize,
    database: Duration,
}

impl Recorder {
    /// Records point `index`'s outcome (at most once per key: see [`Db::record`]).
    pub fn record(&mut self, index: usize, o: &Outcome) -> Result<Recorded, SweepError> {
        let (key, params) = self.points.get(index).ok_or(SweepError::NoSuchPoint {
            index,
            points: self.points.len(),
        })?;
        let t = Instant::now();
        let wrote = self.db.record(key, &self.file, index, params, o)?;
        self.database += t.elapsed();
        if !wrote {
            self.duplicates += 1;
            return Ok(Recorded::Duplicate);
        }
        self.state.done += 1;
        self.state.computed += 1;
        self.state.failed += usize::from(!o.ok);
        Ok(Recorded::Written)
    }

    /// Records point `index`'s outcome as computed elsewhere, with the key that process
    /// computed: a key other than this one's (the worker read other files, or runs another
    /// Switchyard version) records the point as failed, saying so, rather than filing a
    /// result under a key it does not belong to.
    pub fn record_from(
        &mut self,
        index: usize,
        key: &str,
        o: &Outcome,
    ) -> Result<Recorded, SweepError> {
        match self.points.get(index) {
            Some((ours, _)) if ours != key => {
                let ours = ours.clone();
                self.record(
                    index,
                    &Outcome::failed(format!(
                        "the worker that ran point {index} computed its key as {key}, not \
                         {ours}: its Switchyard version or the files it read differ from \
                         this machine's"
                    )),
                )
            }
            _ => self.record(index, o),
        }
    }

    /// Where the sweep stands.
    pub fn progress(&self) -> Progress {
        self.state
    }

    /// What the sweep did so far.
    pub fn summary(&self) -> Summary {
        Summary {
            run: self.db.run,
            points: self.state.total,
            reused: self.reused,
            computed: self.state.computed,
            failed: self.state.failed,
            duplicates: self.duplicates,
            database: self.database,
            keys: self.points.iter().map(|(k, _)| k.clone()).collect(),
        }
    }
}

/// Starts `sweep` on the database at `path` (created if missing): a new `runs` row, every
/// point prepared, the points that could not be prepared recorded as failed.
pub fn start(sweep: &Sweep, path: &Path, retry_failed: bool) -> Result<Started, SweepError> {
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
    let db = Db::open(path, &sweep.file, prepared.len(), &fields)?;
    // One run per distinct key; those the database has are done.
    let mut seen = std::collections::HashSet::new();
    let mut pending: Vec<usize> = Vec::new();
    let mut reused = 0;
    let mut failed = 0;
    for p in &prepared {
        if !seen.insert(p.key.as_str()) {
            continue;
        }
        match db.status(&p.key)?.as_deref() {
            Some("ok") => reused += 1,
            Some(_) if !retry_failed => {
                reused += 1;
                failed += 1;
            }
            _ => pending.push(p.index),
        }
    }
    let mut recorder = Recorder {
        db,
        file: sweep.file.clone(),
        points: prepared
            .iter()
            .map(|p| (p.key.clone(), p.params.clone()))
            .collect(),
        state: Progress {
            done: reused,
            total: seen.len(),
            computed: 0,
            failed,
        },
        reused,
        duplicates: 0,
        database: Duration::ZERO,
    };
    // Points that could not be prepared are recorded at once: there is nothing to run.
    let mut ready = Vec::with_capacity(pending.len());
    for i in pending {
        match &prepared[i].job {
            Ok(_) => ready.push(i),
            Err(e) => {
                recorder.record(i, &Outcome::failed(e.clone()))?;
            }
        }
    }
    Ok(Started {
        prepared,
        pending: ready,
        recorder,
    })
}

/// Prepares and runs point `index` of `sweep`: what a worker of a foreign executor does.
/// Returns the point's key (which [`Recorder::record_from`] checks) and its outcome; a point
/// that cannot be prepared gives a failed outcome, as in [`start`].
pub fn run_point(
    sweep: &Sweep,
    index: usize,
    kernels: &KernelRunner<'_>,
) -> Result<(String, Outcome), SweepError> {
    if index >= sweep.points.len() {
        return Err(SweepError::NoSuchPoint {
            index,
            points: sweep.points.len(),
        });
    }
    let p = point::prepare(sweep, index);
    let o = match &p.job {
        Ok(job) => point::run(job, kernels),
        Err(e) => Outcome::failed(e.clone()),
    };
    Ok((p.key, o))
}

/// Runs every point of `sweep` that the database at `path` does not hold yet, `options.jobs`
/// at a time on threads of this process.
pub fn run(
    sweep: &Sweep,
    path: &Path,
    options: Options,
    kernels: &KernelRunner<'_>,
    progress: &mut dyn FnMut(Progress),
) -> Result<Summary, SweepError> {
    let Started {
        prepared,
        pending,
        mut recorder,
    } = start(sweep, path, options.retry_failed)?;
    progress(recorder.progress());
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let jobs = options.jobs.max(1).min(pending.len().max(1));
    std::thread::scope(|scope| {
        let (tx, rx) = channel::<(usize, Outcome)>();
        for _ in 0..jobs {
            let tx = tx.clone();
            let (prepared, pending, next, stop) = (&prepared, &pending, &next, &stop);
            scope.spawn(move || loop {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let Some(&i) = pending.get(next.fetch_add(1, Ordering::Relaxed)) else {
                    break;
                };
                let Ok(job) = &prepared[i].job else {
                    continue; // `start` keeps only ready points in `pending`.
                };
                if tx.send((i, point::run(job, kernels))).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        for (i, o) in rx {
            if let Err(e) = recorder.record(i, &o) {
                stop.store(true, Ordering::Relaxed);
                return Err(e);
            }
            progress(recorder.progress());
        }
        Ok(())
    })?;
    Ok(recorder.summary())
}
