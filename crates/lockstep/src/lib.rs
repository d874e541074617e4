//! Rounds of work in lock step: a leader (the caller) and a fixed team of workers run one
//! job per round, one contiguous chunk of the work each. The timing model steps its SMs on
//! it, one round per simulated cycle (ARCHITECTURE.md, "Parallel stepping").
//!
//! Why not a general pool. A cycle's parallel part is short — tens of microseconds on a
//! 132-SM GPU — and alternates with a serial part about as long (writes applied in SM order,
//! retirement, the control, the memory back end). A work-stealing pool's idle workers go to
//! sleep after a few dozen yields, so every cycle had to wake every worker through the
//! operating system; on a 16-core virtual machine that wake-up, not the SMs, bounded the
//! speed-up at about 2× from 4 threads on (BENCHMARKS.md, "On a 16-core machine"). Here a
//! worker keeps waiting between rounds for a while (`SPIN`: a short busy spin, then
//! yields), so back-to-back cycles never sleep, and parks only when the leader is away
//! longer (between kernels, say). Each worker
//! always takes the same chunk, so an SM's state stays in one core's cache.
//!
//! No lock: a round is published by one atomic counter and finished by another. A waiting
//! thread yields after a microsecond of busy spinning, and a worker parks as soon as a yield
//! shows other threads want its core (it came back late), so on a machine with more runnable
//! threads than cores the team behaves like a sleeping pool; when the teams of the process
//! together have more threads than the machine has cores, a worker parks at once.
//!
//! This is the one crate of the workspace allowed `unsafe`, for the one thing the borrow
//! checker cannot see:
//! a job borrowed from the leader's stack is run by the workers while the leader waits for
//! them (the same contract as `std::thread::scope`), and chunk `i` of the items and result
//! slot `i` are touched by thread `i` alone.

use std::cell::UnsafeCell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How long an idle worker waits actively (spins, then yields) for the next round before it
/// parks, while the live teams of the process fit the cores ([`LIVE_THREADS`]). Longer than
/// a cycle's serial part on the largest preset, far shorter than anything a user would
/// notice.
const SPIN: Duration = Duration::from_millis(2);

/// Busy spins (`spin_loop`) before a waiting thread starts yielding instead.
const BUSY_SPINS: u32 = 256;

/// A yield that returns later than this gave the core to another thread: the machine is
/// oversubscribed, and a waiting worker parks rather than keep competing for it.
const CONTENDED: Duration = Duration::from_micros(50);

/// A round's work: called with the index of the thread running it (0 is the leader).
type Job = dyn Fn(usize) + Sync;

struct Shared {
    /// Bumped by the leader to start a round; a worker runs one job per bump.
    round: AtomicU64,
    /// Workers that have not finished the current round.
    running: AtomicUsize,
    /// The current round's job, with its lifetime erased (see [`Team::run`]). Written by the
    /// leader only while no round runs; read by workers only inside a round.
    job: UnsafeCell<Option<*const Job>>,
    /// Some worker's job panicked this round; the leader panics in turn.
    panic: UnsafeCell<Option<Box<dyn std::any::Any + Send>>>,
    panicked: AtomicBool,
    quit: AtomicBool,
    /// Per worker: parked, or about to park, so the leader must unpark it.
    asleep: Vec<AtomicBool>,
    /// The machine's cores: workers wait actively only while the threads of every live
    /// team of the process ([`LIVE_THREADS`]) fit them.
    cores: usize,
}

// SAFETY: `job` and `panic` are accessed under the round protocol documented on each field
// (writes and reads ordered by `round` and `running`); everything else is atomic.
unsafe impl Sync for Shared {}
// SAFETY: as for `Sync`; the raw job pointer is only dereferenced inside a round.
unsafe impl Send for Shared {}

/// A leader and `threads - 1` workers.
pub struct Team {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Its threads as counted in [`LIVE_THREADS`].
    counted: usize,
}

/// Threads of every live team of the process, leaders included. Teams side by side (tests
/// running at once, several simulations in one program) that together outnumber the cores
/// must not wait actively: each spinning worker would take a core from another team's
/// leader. Only waiting depends on it, never a result.
static LIVE_THREADS: AtomicUsize = AtomicUsize::new(0);

impl Team {
    /// A team of `threads` threads in all (the caller is one of them); `None` for one
    /// thread, or when the operating system gives no threads (the machine then steps on
    /// one).
    pub fn new(threads: usize) -> Option<Team> {
        if threads <= 1 {
            return None;
        }
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        let shared = Arc::new(Shared {
            round: AtomicU64::new(0),
            running: AtomicUsize::new(0),
            job: UnsafeCell::new(None),
            panic: UnsafeCell::new(None),
            panicked: AtomicBool::new(false),
            quit: AtomicBool::new(false),
            asleep: (1..threads).map(|_| AtomicBool::new(false)).collect(),
            cores,
        });
        LIVE_THREADS.fetch_add(threads, Ordering::Relaxed);
        let mut team = Team {
            shared,
            workers: Vec::with_capacity(threads - 1),
            counted: threads,
        };
        for index in 1..threads {
            let shared = Arc::clone(&team.shared);
            let spawned = thread::Builder::new()
                .name(format!("switchyard-sm-{index}"))
                .spawn(move || work(&shared, index));
            match spawned {
                Ok(handle) => team.workers.push(handle),
                // Dropping the team stops the workers already started.
                Err(_) => return None,
            }
        }
        Some(team)
    }

    /// Threads in the team, the leader included.
    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Cuts `items` into one contiguous chunk per thread (the last ones may be empty), runs
    /// `f` on every chunk at once, and returns the chunks' results in order.
    pub fn for_chunks<T, R, F>(&self, items: &mut [T], f: F) -> Vec<R>
    where
        T: Send,
        R: Send,
        F: Fn(&mut [T]) -> R + Sync,
    {
        let threads = self.threads();
        let len = items.len();
        let chunk = len.div_ceil(threads).max(1);
        let mut results: Vec<Option<R>> = (0..threads).map(|_| None).collect();
        let items_at = SendPtr(items.as_mut_ptr());
        let results_at = SendPtr(results.as_mut_ptr());
        let job = |i: usize| {
            let start = (i * chunk).min(len);
            let end = ((i + 1) * chunk).min(len);
            // SAFETY: thread `i` alone runs job `i` in a round, so chunks `[start, end)` of
            // `items` and slot `i` of `results` are disjoint between threads; both outlive
            // the round, since `run` returns only after every thread has finished it.
            let chunk =
                unsafe { std::slice::from_raw_parts_mut(items_at.get().add(start), end - start) };
            let r = f(chunk);
            // SAFETY: as above, slot `i` is this thread's alone during the round.
            unsafe { *results_at.get().add(i) = Some(r) };
        };
        self.run(&job);
        results
            .into_iter()
            .map(|r| r.expect("every thread ran its chunk"))
            .collect()
    }

    /// Runs `job(i)` on every thread `i` of the team (the caller runs `job(0)`), and
    /// returns when all have finished. A panic in any of them is raised here.
    fn run<'a>(&self, job: &'a (dyn Fn(usize) + Sync + 'a)) {
        let shared = &*self.shared;
        // SAFETY: the job's lifetime is erased so the workers can hold it; they call it only
        // inside this round, and this function does not return (nor unwind, see `Finish`)
        // before every worker has finished the round.
        let erased: *const Job =
            unsafe { std::mem::transmute::<&'a (dyn Fn(usize) + Sync + 'a), &'static Job>(job) };
        // SAFETY: no round runs, so no worker reads `job` now; the bump of `round` below
        // publishes it.
        unsafe { *shared.job.get() = Some(erased) };
        shared.running.store(self.workers.len(), Ordering::Relaxed);
        // SeqCst: ordered against each worker's `asleep` store (see `work`).
        shared.round.fetch_add(1, Ordering::SeqCst);
        for (worker, handle) in shared.asleep.iter().zip(&self.workers) {
            if worker.load(Ordering::SeqCst) {
                handle.thread().unpark();
            }
        }
        /// Waits for the workers when the leader's own part finishes — or unwinds.
        struct Finish<'a>(&'a Shared);
        impl Drop for Finish<'_> {
            fn drop(&mut self) {
                let mut spins = 0u32;
                while self.0.running.load(Ordering::Acquire) != 0 {
                    spins = spins.saturating_add(1);
                    if spins < BUSY_SPINS {
                        std::hint::spin_loop();
                    } else {
                        thread::yield_now();
                    }
                }
                // SAFETY: no worker is inside the round any more.
                unsafe { *self.0.job.get() = None };
            }
        }
        let finish = Finish(shared);
        job(0);
        drop(finish);
        if shared.panicked.swap(false, Ordering::Acquire) {
            // SAFETY: written by the panicking worker before it left the round.
            let payload = unsafe { (*shared.panic.get()).take() };
            resume_unwind(payload.unwrap_or_else(|| Box::new("an SM thread panicked")));
        }
    }
}

impl Drop for Team {
    fn drop(&mut self) {
        LIVE_THREADS.fetch_sub(self.counted, Ordering::Relaxed);
        self.shared.quit.store(true, Ordering::SeqCst);
        for handle in &self.workers {
            handle.thread().unpark();
        }
        for handle in self.workers.drain(..) {
            // A worker never panics outside a job, and a job's panic is caught.
            let _ = handle.join();
        }
    }
}

/// A worker: waits for each round, runs its part, says it has finished.
fn work(shared: &Shared, index: usize) {
    let mut seen = 0u64;
    loop {
        let mut idle_since = Instant::now();
        let mut spins = 0u32;
        loop {
            if shared.round.load(Ordering::Acquire) != seen {
                break;
            }
            if shared.quit.load(Ordering::Acquire) {
                return;
            }
            // A few hundred busy spins (about a microsecond), then yields: a yield costs
            // a core that has nothing else to run little more than a spin, and gives the
            // core away when the machine is oversubscribed (tests side by side, other
            // programs), where a busy spin would starve the very thread it waits for.
            let active = LIVE_THREADS.load(Ordering::Relaxed) <= shared.cores;
            spins = spins.saturating_add(1);
            if active && spins < BUSY_SPINS {
                std::hint::spin_loop();
                continue;
            }
            if active && idle_since.elapsed() < SPIN {
                let before = Instant::now();
                thread::yield_now();
                // A yield that gave the core away for long says other threads want it:
                // stop waiting actively and park.
                if before.elapsed() < CONTENDED {
                    continue;
                }
            }
            // Park. SeqCst pairs with the leader's bump of `round` and its read of
            // `asleep`: either this thread sees the new round, or the leader sees it asleep
            // and unparks it (an unpark before the park is kept).
            let asleep = &shared.asleep[index - 1];
            asleep.store(true, Ordering::SeqCst);
            if shared.round.load(Ordering::SeqCst) == seen && !shared.quit.load(Ordering::SeqCst) {
                thread::park();
            }
            asleep.store(false, Ordering::Relaxed);
            idle_since = Instant::now();
        }
        seen = seen.wrapping_add(1);
        // SAFETY: inside a round the job is set and outlives it (see `Team::run`).
        let job = unsafe { (*shared.job.get()).expect("a round has a job") };
        // SAFETY: the job outlives the round (`Team::run` waits for this thread).
        let run = || unsafe { (*job)(index) };
        if let Err(payload) = catch_unwind(AssertUnwindSafe(run)) {
            if !shared.panicked.swap(true, Ordering::Relaxed) {
                // SAFETY: the first panicking worker alone writes it, before leaving the
                // round; the leader reads it after the round.
                unsafe { *shared.panic.get() = Some(payload) };
            }
        }
        shared.running.fetch_sub(1, Ordering::Release);
    }
}

/// A raw pointer that may cross threads: `for_chunks` hands disjoint parts of what it
/// points to to different threads.
struct SendPtr<T>(*mut T);

impl<T> SendPtr<T> {
    /// The pointer (a method, so closures capture the whole `Sync` wrapper, not the field).
    fn get(&self) -> *mut T {
        self.0
    }
}

// SAFETY: see `Team::for_chunks`: each thread dereferences its own disjoint part.
unsafe impl<T: Send> Sync for SendPtr<T> {}
// SAFETY: as for `Sync`.
unsafe impl<T: Send> Send for SendPtr<T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_is_visited_once_per_round_and_results_keep_chunk_order() {
        for threads in [2, 3, 8] {
            let team = Team::new(threads).expect("threads");
            assert_eq!(team.threads(), threads);
            let mut items: Vec<u64> = (0..133).collect();
            for round in 0..500u64 {
                let sums = team.for_chunks(&mut items, |chunk| {
                    for x in chunk.iter_mut() {
                        *x += 1;
                    }
                    chunk.first().copied()
                });
                // Chunks are contiguous, in order, and cover every item once.
                let firsts: Vec<u64> = sums.into_iter().flatten().collect();
                let chunk = 133usize.div_ceil(threads) as u64;
                let expected: Vec<u64> = (0..133u64)
                    .step_by(chunk as usize)
                    .map(|i| i + round + 1)
                    .collect();
                assert_eq!(firsts, expected, "{threads} threads, round {round}");
            }
            assert!(
                items.iter().enumerate().all(|(i, &x)| x == i as u64 + 500),
                "{threads} threads: some item was not stepped exactly once per round"
            );
        }
    }

    #[test]
    fn fewer_items_than_threads_leaves_the_last_chunks_empty() {
        let team = Team::new(4).expect("threads");
        let mut items = vec![1u32, 2];
        let lens = team.for_chunks(&mut items, |chunk| chunk.len());
        assert_eq!(lens, vec![1, 1, 0, 0]);
    }

    #[test]
    fn a_parked_worker_is_woken_for_the_next_round() {
        let team = Team::new(2).expect("threads");
        let mut items = vec![0u32; 2];
        team.for_chunks(&mut items, |c| c[0] += 1);
        // Longer than the spin: the worker parks, and the next round must still reach it.
        thread::sleep(SPIN * 5);
        team.for_chunks(&mut items, |c| c[0] += 1);
        assert_eq!(items, vec![2, 2]);
    }

    #[test]
    fn a_worker_panic_is_raised_by_the_leader_and_the_team_goes_on() {
        let team = Team::new(3).expect("threads");
        let mut items: Vec<u32> = (0..3).collect();
        let r = catch_unwind(AssertUnwindSafe(|| {
            team.for_chunks(&mut items, |c| {
                if c[0] == 2 {
                    panic!("chunk two");
                }
            })
        }));
        let payload = r.expect_err("the worker's panic reaches the leader");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"chunk two"));
        let lens = team.for_chunks(&mut items, |c| c.len());
        assert_eq!(lens, vec![1, 1, 1]);
    }
}
