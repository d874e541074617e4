//! The host side in simulated time, around the timing machine and the scheduling framework.
//!
//! **Processes** (GPU contexts) run host programs ([`crate::program`]). A program's requests
//! take no host time unless they wait: a launch or an asynchronous copy is queued on its
//! stream and the program goes on; a blocking copy, a synchronisation or (for a suite
//! kernel's host program, whose launches are synchronous) a launch waits for the work.
//!
//! **Streams** run their work in order; different streams of a process, and different
//! processes, overlap.
//!
//! **Copies** cross the host link through the copy engines (papers/tanasic-thesis §5.3.1):
//! one queue, first come first served (or highest priority first, [`CopyPolicy`]), each
//! engine taking the next copy when free; a copy
//! of `n` bytes takes `copy_latency + n / bandwidth`. Its data moves when it completes
//! (a host→device copy writes device memory then; a device→host copy reads it then).
//!
//! **Launches** reach the GPU — their context's command buffer in the scheduling framework
//! ([`sched::Framework`]) — `launch_latency` after the host's call, and not before the work
//! ahead of them in their stream has finished: both moments are recorded (papers/li-pep §3.1
//! defines preemption latency from the second).
//!
//! **One time line.** Host events are kept in femtoseconds, the unit of the machine's clock;
//! at every core cycle the host first handles what is due, then the machine steps with the
//! framework as its control, then the host learns which kernels finished. While the GPU has
//! nothing to do, the clock jumps to the next host event.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;

use gpu::config::HostSpec;
use gpu::timing::{LaunchId, Machine, Residency, ResidencyLog, TimedGpu, TimingError};
use gpu::{DeviceLimits, GpuError, LoadError, LoadedModule};
use preempt::MechanismKind;
use sched::{Command, ContextId, Framework, FrameworkConfig, PolicyEnv, PolicyKind, Record};

use crate::program::{
    Commands, DumpFile, HostProgram, Reply, Request, ServedSuite, SuiteHost, Verdict,
};
use crate::scenario::{CopyPolicy, Process, Program};

/// Femtoseconds per microsecond.
pub const FS_PER_US: u64 = 1_000_000_000;

/// The latest moment a host event may be set for, fs (2^62 fs, about 77 minutes of
/// simulated time): far beyond any cycle limit, and far enough below `u64::MAX` that the
/// clock can round it up to a core edge. A copy or launch that would end later is an error
/// ([`RunError::Time`]), never a time that wraps around to an early one.
pub const MAX_HOST_TIME_FS: u64 = 1 << 62;

/// The most copies and launches a process may have called and not yet finished; its next
/// call waits for one to finish. Real drivers block the host the same way when the launch
/// queue is full (about a thousand entries); here it keeps what a loop of asynchronous
/// calls costs in memory proportional to the simulated work, which the cycle limit bounds,
/// instead of to the loop's count.
pub const MAX_PENDING_OPS: usize = 1024;

/// The most host calls a process may make at one instant of simulated time (syncs with
/// nothing to wait for, allocations): beyond it the program is an endless loop that never
/// lets time pass, and the run stops with an error naming where it is.
pub const MAX_CALLS_PER_INSTANT: u32 = 1 << 20;

/// `now` plus a whole number of femtoseconds `delay_fs`, or `None` when that is not a
/// time at or before [`MAX_HOST_TIME_FS`] (a delay that is negative, not finite or too
/// long): checked, where a cast and a sum would saturate or wrap.
pub fn later_fs(now: u64, delay_fs: f64) -> Option<u64> {
    if !(delay_fs.is_finite() && (0.0..=MAX_HOST_TIME_FS as f64).contains(&delay_fs)) {
        return None;
    }
    now.checked_add(delay_fs as u64)
        .filter(|&t| t <= MAX_HOST_TIME_FS)
}

/// How a scenario run went wrong.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("process `{process}`: {error}")]
    Load {
        process: String,
        #[source]
        error: Box<LoadError>,
    },
    #[error("process `{process}`: {what}")]
    Process { process: String, what: String },
    #[error("process `{process}`: {at}: {error}")]
    Launch {
        process: String,
        at: String,
        error: Box<GpuError>,
    },
    #[error(transparent)]
    Timing(Box<TimingError>),
    /// A host event would fall after [`MAX_HOST_TIME_FS`].
    #[error("process `{process}`: {what} would end after {} µs of simulated time, the most the host model counts (check [host] pcie_gbps, copy_latency_us, launch_latency_us)", MAX_HOST_TIME_FS / FS_PER_US)]
    Time { process: String, what: String },
    #[error("the scenario did not finish within {limit} core cycles (still running: {running}); raise [limits] max_cycles")]
    CycleLimit { limit: u64, running: String },
}

impl From<TimingError> for RunError {
    fn from(e: TimingError) -> Self {
        RunError::Timing(Box::new(e))
    }
}

/// Everything a run needs besides the processes.
#[derive(Clone, Debug)]
pub struct Setup {
    pub timing: TimedGpu,
    pub host: HostSpec,
    pub framework: FrameworkConfig,
    pub policy: PolicyKind,
    /// The time slice of [`PolicyKind::TimeSlice`] when it names none, µs.
    pub time_slice_us: f64,
    pub mechanism: MechanismKind,
    pub copy_policy: CopyPolicy,
    /// Core cycles the whole run may take.
    pub max_cycles: u64,
    /// Keep a copy of every allocation's final bytes in the record (for comparisons).
    pub snapshot: bool,
    /// Replay (papers/tanasic-thesis §5.3.1): `Some(n)` restarts each process's program
    /// when it completes, until every process has completed at least `n` runs; the run
    /// then stops, and runs still in progress are not recorded. `None`: each program runs
    /// once and the run ends when all have.
    pub replay: Option<u32>,
    /// The processes are host threads of one application, sharing one GPU context
    /// (`ContextId(0)`), as an inference server runs its models beside batch work: each
    /// launches on a stream of its own whose priority is its process's priority, clamped
    /// to 0..=[`crate::scenario::MAX_STREAM_PRIORITY`], so CUDA's stream priorities order
    /// their TBs (and preempt nothing) whatever the policy. `false`: a context each.
    pub one_context: bool,
}

impl Setup {
    /// The setup a scenario describes, on the timed GPU `timing`: the scenario's
    /// `[translation]` applied to the GPU's, an error (at the scenario's line) where the
    /// two together are not a valid GPU.
    pub fn for_scenario(
        s: &crate::Scenario,
        mut timing: TimedGpu,
        max_cycles: u64,
    ) -> Result<Setup, crate::scenario::ScenarioError> {
        s.translation.apply(&mut timing.gpu, &s.file)?;
        Ok(Setup {
            host: s.host_spec(&timing.gpu.host),
            timing,
            framework: s.framework.clone(),
            policy: s.policy,
            time_slice_us: s.time_slice_us,
            mechanism: s.mechanism,
            copy_policy: s.copy_policy,
            max_cycles,
            snapshot: false,
            replay: s.replay,
            one_context: false,
        })
    }
}

/// Something that acts on the framework every cycle from outside the policy: an
/// experiment's preemption requests ([`sched::Framework::preempt_sm`]), a test's.
pub trait Injector {
    /// Called before the machine steps, with the machine as it stands.
    fn before_cycle(&mut self, machine: &Machine, framework: &mut Framework);
}

/// A copy or a launch.
struct Op {
    process: usize,
    stream: u32,
    kind: OpKind,
    /// Host call, earliest start, and completion (fs).
    called: u64,
    ready: u64,
    started: Option<u64>,
    finished: Option<u64>,
}

enum OpKind {
    Copy {
        to_device: bool,
        dev: u64,
        data: Vec<u8>,
        len: u64,
        token: u64,
        /// A dump's copy: its bytes go to [`RunRecord::dumps`].
        dump: Option<Box<DumpFile>>,
    },
    Launch {
        command: Option<Box<Command>>,
        /// Index into the run's kernel records.
        record: usize,
    },
}

/// A copy as the report shows it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct CopyRecord {
    pub process: String,
    pub stream: u32,
    pub to_device: bool,
    pub bytes: u64,
    pub engine: u32,
    pub called_fs: u64,
    pub started_fs: u64,
    pub finished_fs: u64,
}

/// A launch as the report shows it (fs; `None` until it happens).
#[derive(Clone, Debug, serde::Serialize)]
pub struct KernelRecord {
    pub process: String,
    pub kernel: String,
    pub stream: u32,
    /// The host's launch call, and the kernel's arrival at the GPU.
    pub called_fs: u64,
    pub arrived_fs: Option<u64>,
    /// Entered the active queue, first TB dispatched, finished.
    pub activated_fs: Option<u64>,
    pub started_fs: Option<u64>,
    pub finished_fs: Option<u64>,
    /// The machine's launch (index into its launches).
    pub launch: Option<u32>,
    /// Its grid's TBs, and what one TB takes on an SM (after allocation granularity), once
    /// the launch reached the machine.
    pub tbs: u64,
    pub tb: Option<gpu::occupancy::TbDemand>,
    /// The machine's statistics of the launch, once it finished (the counters `run` writes).
    #[serde(skip)]
    pub stats: Option<Box<gpu::timing::TimedStats>>,
}

/// A process as the report shows it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ProcessRecord {
    pub name: String,
    pub priority: i32,
    pub arrival_fs: u64,
    /// The end of its latest completed run (its only run without replay).
    pub finished_fs: Option<u64>,
    /// The first failed run's verdict, or else the latest run's.
    pub verdict: Option<Verdict>,
    /// Every completed run of its program, in order: one without replay; under
    /// [`Setup::replay`] each run starts when the one before it ends; with requests
    /// ([`ProcessRecord::requests`]) one a request.
    pub runs: Vec<CompletedRun>,
    /// Whether it served requests ([`crate::arrivals`]): each run is one, and its latency
    /// is from the request's arrival to its end.
    pub requests: bool,
}

impl ProcessRecord {
    /// The mean turnaround of its completed runs (fs), from when each was asked for (a
    /// request's latency), `None` when none completed.
    pub fn mean_turnaround_fs(&self) -> Option<f64> {
        if self.runs.is_empty() {
            return None;
        }
        let sum: f64 = self
            .runs
            .iter()
            .map(|r| r.finished_fs.saturating_sub(r.requested_fs) as f64)
            .sum();
        Some(sum / self.runs.len() as f64)
    }
}

/// One completed run of a process's program (fs): from its start (the process's arrival,
/// or under replay the end of its previous run) to its end, and whether its results were
/// right.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CompletedRun {
    /// When it was asked for: the process's arrival, under replay the end of the run before
    /// it, or its request's arrival (which may be before its start: a request waits for
    /// the one before it to end).
    pub requested_fs: u64,
    pub started_fs: u64,
    pub finished_fs: u64,
    pub verdict: Verdict,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    Arrival(usize),
    LaunchReady(usize),
    CopyDone(usize),
}

#[derive(Debug, PartialEq, Eq)]
enum Wait {
    /// Not arrived yet.
    Arrival,
    Runnable(ReplyKind),
    Op(usize),
    Streams(Option<u32>),
    /// [`MAX_PENDING_OPS`] of its copies and launches are unfinished: the next call waits
    /// for one to finish, as a full CUDA launch queue blocks the host.
    Room,
    /// The program has ended; its streams still hold work.
    Ending,
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReplyKind {
    Start,
    Done,
}

struct Proc {
    name: String,
    priority: i32,
    /// Its streams' priorities (`(stream, priority)`; the others 0).
    stream_priorities: Vec<(u32, i32)>,
    program: Box<dyn HostProgram>,
    module: Option<LoadedModule>,
    /// Pending ops per stream, oldest first (the head is in progress).
    streams: Vec<(u32, VecDeque<usize>)>,
    wait: Wait,
    record: ProcessRecord,
    /// A reply to give when the program runs next.
    ptr: Option<u64>,
    /// Its allocations: (address, bytes).
    allocs: Vec<(u64, u64)>,
    /// What its program is, to start it again under replay.
    source: Source,
    /// When its current run started (fs), and when it was asked for.
    run_started: u64,
    run_requested: u64,
    /// The arrival of each of its requests (fs, in order; empty: it serves none), and the
    /// one its current run serves.
    requests: Vec<u64>,
    served: usize,
    /// Its program has a setup ([`HostProgram::has_setup`]): each request runs its body
    /// again on the same memory. `in_setup`: the current run is the setup, which serves no
    /// request.
    keeps_memory: bool,
    in_setup: bool,
}

/// A program to start (again).
enum Source {
    /// A suite kernel, size, seed, whether it warms up ([`ServedSuite`]) and which of its
    /// memory is managed ([`SuiteHost::managed`]).
    Suite(
        &'static dyn suite::Kernel,
        suite::Size,
        u64,
        bool,
        crate::scenario::Managed,
    ),
    Commands(Arc<crate::scenario::CommandProgram>),
}

impl Source {
    fn start(&self) -> Box<dyn HostProgram> {
        match self {
            Source::Suite(kernel, size, seed, warm_up, managed) => {
                let host = SuiteHost::start(*kernel, *size, *seed).managed(*managed);
                if *warm_up {
                    Box::new(ServedSuite::with_host(host))
                } else {
                    Box::new(host)
                }
            }
            Source::Commands(c) => Box::new(Commands::new(c.clone())),
        }
    }
}

impl Proc {
    fn stream(&mut self, s: u32) -> &mut VecDeque<usize> {
        if let Some(i) = self.streams.iter().position(|(id, _)| *id == s) {
            return &mut self.streams[i].1;
        }
        self.streams.push((s, VecDeque::new()));
        &mut self.streams.last_mut().expect("pushed").1
    }

    /// Copies and launches called and not finished, on all its streams.
    fn pending(&self) -> usize {
        self.streams.iter().map(|(_, q)| q.len()).sum()
    }

    fn idle(&self, stream: Option<u32>) -> bool {
        self.streams
            .iter()
            .filter(|(s, _)| stream.is_none_or(|x| x == *s))
            .all(|(_, q)| q.is_empty())
    }
}

/// What a run produced.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RunRecord {
    pub processes: Vec<ProcessRecord>,
    pub kernels: Vec<KernelRecord>,
    pub copies: Vec<CopyRecord>,
    /// The framework's records (core cycles), for timelines.
    #[serde(skip)]
    pub records: Vec<Record>,
    /// Every TB arriving on or leaving an SM, in order (the machine's own events, kept by a
    /// [`ResidencyLog`] probe), for timelines.
    #[serde(skip)]
    pub residency: Vec<Residency>,
    /// Core cycles simulated, and femtoseconds per core cycle.
    pub cycles: u64,
    pub core_period_fs: u64,
    pub sm_count: u32,
    /// Warp instructions of every launch.
    pub warp_instructions: u64,
    /// The kernel name of every machine launch, by launch index.
    pub launch_names: Vec<String>,
    /// What the preemption mechanism did.
    pub preemptions: Vec<preempt::Record>,
    /// With [`Setup::snapshot`]: per process, the final bytes of its allocations in order.
    #[serde(skip)]
    pub memory: Vec<Vec<Vec<u8>>>,
    /// The contents of every dump file, as its copy read them: one a file (a dump run
    /// again, in a loop or under replay, keeps its latest), in the order first written.
    #[serde(skip)]
    pub dumps: Vec<Dumped>,
    /// Each launch's interconnect requests (towards the L2) and DRAM bytes per window of
    /// [`BANDWIDTH_WINDOW_CYCLES`], for bandwidth over time (the trace's counter tracks,
    /// `bandwidth.csv`): a sample for every window in which a launch caused any, in window
    /// order, then by launch.
    #[serde(skip)]
    pub bandwidth: Vec<BandwidthSample>,
}

/// The core cycles of one window of [`RunRecord::bandwidth`].
pub const BANDWIDTH_WINDOW_CYCLES: u64 = 1000;

/// What one launch sent in one window, cycles `window × BANDWIDTH_WINDOW_CYCLES` up to the
/// next window's (or up to the run's end, for the last): request packets towards the L2
/// (`Machine::noc_requests`), the interconnect flits of its requests and their replies
/// (`Machine::noc_flits`), and DRAM bytes it caused (`Machine::dram_bytes`: its L2
/// misses' fetches, the write-backs its fills and writes evicted).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct BandwidthSample {
    pub window: u64,
    pub launch: u32,
    pub noc_requests: u64,
    pub noc_flits: u64,
    pub dram_bytes: u64,
}

/// A buffer's device contents, read by a dump command's copy, for its `.npy` file.
#[derive(Clone, Debug)]
pub struct Dumped {
    pub process: String,
    pub file: DumpFile,
    /// When its copy ended (fs).
    pub at_fs: u64,
    pub bytes: Vec<u8>,
}

impl Dumped {
    /// The `.npy` file's bytes.
    pub fn npy(&self) -> Vec<u8> {
        crate::data::write_npy(self.file.ty, &self.file.shape, &self.bytes)
    }
}

/// Where a run stands, for progress bars.
#[derive(Clone, Copy, Debug)]
pub struct RunProgress {
    pub cycle: u64,
    pub processes_done: usize,
    pub processes: usize,
    pub kernels_done: usize,
}

/// A multiprogrammed run in progress.
pub struct System {
    machine: Machine,
    framework: Framework,
    setup: Setup,
    procs: Vec<Proc>,
    ops: Vec<Op>,
    timers: BinaryHeap<Reverse<(u64, u64, Timer)>>,
    seq: u64,
    /// Copy engines: the copy each is busy with.
    engines: Vec<Option<usize>>,
    copy_queue: VecDeque<usize>,
    /// Launches at the head of their stream whose time has come: delivered this cycle.
    deliver: Vec<usize>,
    out: RunRecord,
    launch_ops: Vec<(u32, usize)>,
    /// The launches whose traffic is sampled (active at the last window's end, or
    /// submitted since), with their counts then ([`RunRecord::bandwidth`]), and how many
    /// launches had been submitted then.
    bw_open: Vec<(LaunchId, [u64; 3])>,
    bw_seen: usize,
    /// The window being counted.
    bw_window: u64,
    /// Under replay: every process has completed its runs, and the run stops.
    replayed: bool,
    /// An error found where none can be returned (a setup that went wrong): the run stops
    /// with it.
    failed: Option<RunError>,
}

impl System {
    /// A fresh machine and framework with `processes` (none has arrived yet).
    pub fn new(setup: Setup, processes: &[Process]) -> Result<System, RunError> {
        let mechanism = setup.mechanism.build();
        System::with_mechanism(setup, processes, mechanism)
    }

    /// [`System::new`] with a mechanism of the caller's instead of `setup.mechanism`'s: an
    /// instrumented one, a new design. Its own kernel pass, if any, applies.
    pub fn with_mechanism(
        mut setup: Setup,
        processes: &[Process],
        mechanism: Box<dyn preempt::Mechanism>,
    ) -> Result<System, RunError> {
        // A mechanism that relies on compiler support gets it in every timed kernel.
        if let Some(pass) = mechanism.kernel_pass() {
            setup.timing.options.pass = Some(pass);
        }
        // A kernel of a scenario may wait behind others for as long as the policy decides:
        // its cycles are bounded by the scenario's limit, not by a limit from its size (its
        // warp instructions still are).
        if setup.timing.options.max_cycles.is_none() {
            setup.timing.options.max_cycles = Some(setup.max_cycles);
        }
        let t = &setup.timing;
        let mut machine = Machine::new(
            t.gpu.clone(),
            t.options.clone(),
            gpu::memory::DeviceMemory::new(),
        )?;
        // The timelines' TB moves come from the machine's events, not from copies of them.
        machine.attach(Box::new(ResidencyLog::default()));
        // MIG's instances own their memory as well as their SMs (`sched::mig`).
        if let PolicyKind::Mig { instances } = setup.policy {
            let n = sched::mig::instances_for(instances, processes.len());
            let mig = sched::mig::Mig::new(machine.sm_count(), n);
            let of_sm = mig.instance_of_each_sm(machine.sm_count());
            machine
                .partition_memory(&of_sm, mig.instances())
                .map_err(|e| RunError::Timing(Box::new(e)))?;
        }
        let framework = Framework::with_mechanism(
            setup.framework.clone(),
            setup.policy.build(&PolicyEnv {
                default_slice_us: setup.time_slice_us,
                clock_mhz: t.gpu.sm.clock_mhz,
                sm_count: machine.sm_count(),
                priorities: processes.iter().map(|p| p.priority).collect(),
            }),
            mechanism,
            machine.sm_count(),
        );
        let mut procs = Vec::new();
        let mut timers = BinaryHeap::new();
        let mut seq = 0;
        for (i, p) in processes.iter().enumerate() {
            if p.requests.is_some() && setup.replay.is_some() {
                return Err(RunError::Process {
                    process: p.name.clone(),
                    what: "a process serving requests cannot also be replayed".into(),
                });
            }
            let (source, module) = match &p.program {
                Program::Suite {
                    kernel,
                    size,
                    seed,
                    target,
                    warm_up,
                    managed,
                } => {
                    let file = format!("kernels/{0}/{0}.{1}.ptx", kernel.name(), target.name());
                    let text = kernel.ptx(*target).unwrap_or_default();
                    let m = LoadedModule::load(machine.memory_mut(), &file, text).map_err(|e| {
                        RunError::Load {
                            process: p.name.clone(),
                            error: Box::new(e),
                        }
                    })?;
                    (
                        Source::Suite(*kernel, *size, *seed, *warm_up, *managed),
                        Some(m),
                    )
                }
                Program::Commands(c) => {
                    let m = LoadedModule::load(machine.memory_mut(), &c.ptx_file, &c.ptx).map_err(
                        |e| RunError::Load {
                            process: p.name.clone(),
                            error: Box::new(e),
                        },
                    )?;
                    (Source::Commands(Arc::clone(c)), Some(m))
                }
            };
            let program = source.start();
            let arrival =
                later_fs(0, (p.arrival_us * FS_PER_US as f64).round()).ok_or_else(|| {
                    RunError::Time {
                        process: p.name.clone(),
                        what: format!("an arrival at {} µs", p.arrival_us),
                    }
                })?;
            let requests = match &p.requests {
                None => Vec::new(),
                Some(a) => a
                    .times_us()
                    .iter()
                    .map(|&t| {
                        later_fs(arrival, (t * FS_PER_US as f64).round()).ok_or_else(|| {
                            RunError::Time {
                                process: p.name.clone(),
                                what: format!("a request {t} µs after its arrival"),
                            }
                        })
                    })
                    .collect::<Result<_, _>>()?,
            };
            let keeps_memory = program.has_setup();
            if keeps_memory && requests.is_empty() {
                return Err(RunError::Process {
                    process: p.name.clone(),
                    what: "a setup (`[[process.setup]]`, `warm_up`) runs once before requests: the process serves none".into(),
                });
            }
            // A process serving requests starts with its first, or with its setup at its
            // arrival.
            let first = if keeps_memory {
                arrival
            } else {
                requests.first().copied().unwrap_or(arrival)
            };
            timers.push(Reverse((first, seq, Timer::Arrival(i))));
            seq += 1;
            procs.push(Proc {
                name: p.name.clone(),
                priority: p.priority,
                stream_priorities: p.stream_priorities.clone(),
                program,
                module,
                streams: Vec::new(),
                wait: Wait::Arrival,
                record: ProcessRecord {
                    name: p.name.clone(),
                    priority: p.priority,
                    arrival_fs: arrival,
                    finished_fs: None,
                    verdict: None,
                    runs: Vec::new(),
                    requests: !requests.is_empty(),
                },
                ptr: None,
                allocs: Vec::new(),
                source,
                run_started: first,
                run_requested: first,
                requests,
                served: 0,
                keeps_memory,
                in_setup: keeps_memory,
            });
        }
        let engines = vec![None; setup.host.copy_engines.max(1) as usize];
        let out = RunRecord {
            core_period_fs: machine.core_period_fs(),
            sm_count: machine.sm_count(),
            ..RunRecord::default()
        };
        Ok(System {
            machine,
            framework,
            setup,
            procs,
            ops: Vec::new(),
            timers,
            seq,
            engines,
            copy_queue: VecDeque::new(),
            deliver: Vec::new(),
            out,
            launch_ops: Vec::new(),
            bw_open: Vec::new(),
            bw_seen: 0,
            bw_window: 0,
            replayed: false,
            failed: None,
        })
    }

    /// Ends the window being counted (at the current cycle): a sample for every launch
    /// that caused traffic in it; the next window is the one the current cycle is in.
    fn sample_bandwidth(&mut self) {
        // Every launch submitted since the last window (one may have come and gone within
        // a window) is sampled at least once; the open ones stay while active.
        for &(l, _) in &self.launch_ops[self.bw_seen..] {
            self.bw_open.push((LaunchId(l), [0; 3]));
        }
        self.bw_seen = self.launch_ops.len();
        self.bw_open.sort_unstable_by_key(|o| o.0);
        let (machine, out, window) = (&self.machine, &mut self.out, self.bw_window);
        self.bw_open.retain_mut(|(id, seen)| {
            let now = [
                machine.noc_requests(*id),
                machine.noc_flits(*id),
                machine.dram_bytes(*id),
            ];
            if now.iter().zip(seen.iter()).any(|(n, s)| n > s) {
                out.bandwidth.push(BandwidthSample {
                    window,
                    launch: id.0,
                    noc_requests: now[0] - seen[0],
                    noc_flits: now[1] - seen[1],
                    dram_bytes: now[2] - seen[2],
                });
                *seen = now;
            }
            machine.active().contains(id)
        });
        self.bw_window = self.machine.cycle() / BANDWIDTH_WINDOW_CYCLES;
    }

    fn timer(&mut self, at: u64, t: Timer) {
        self.timers.push(Reverse((at, self.seq, t)));
        self.seq += 1;
    }

    fn now(&self) -> u64 {
        self.machine.now_fs()
    }

    fn cycle_fs(&self, cycle: u64) -> u64 {
        cycle * self.out.core_period_fs
    }

    /// Runs every process to its end.
    pub fn run(self, progress: &mut dyn FnMut(RunProgress)) -> Result<RunRecord, RunError> {
        self.run_with(progress, None)
    }

    /// [`System::run`], with `injector` acting on the framework every cycle.
    pub fn run_with(
        mut self,
        progress: &mut dyn FnMut(RunProgress),
        mut injector: Option<&mut dyn Injector>,
    ) -> Result<RunRecord, RunError> {
        let mut last_report = 0;
        loop {
            self.host()?;
            if let Some(e) = self.failed.take() {
                return Err(e);
            }
            if self.replayed || self.procs.iter().all(|p| p.wait == Wait::Done) {
                break;
            }
            let cycle = self.machine.cycle();
            if cycle >= self.setup.max_cycles {
                return Err(RunError::CycleLimit {
                    limit: self.setup.max_cycles,
                    running: self
                        .procs
                        .iter()
                        .filter(|p| p.wait != Wait::Done)
                        .map(|p| match p.program.position() {
                            Some(at) => format!("`{}` at {at}", p.name),
                            None => format!("`{}`", p.name),
                        })
                        .collect::<Vec<_>>()
                        .join("; "),
                });
            }
            if self.deliver.is_empty() && self.framework.is_idle() && self.machine.is_idle() {
                // Nothing on the GPU: jump to the next host event.
                let Some(&Reverse((at, _, _))) = self.timers.peek() else {
                    return Err(RunError::Process {
                        process: self
                            .procs
                            .iter()
                            .find(|p| p.wait != Wait::Done)
                            .map(|p| p.name.clone())
                            .unwrap_or_default(),
                        what: "waits for work that can never finish (internal)".into(),
                    });
                };
                if at > self.now() {
                    self.machine.skip_idle_to(at);
                    continue;
                }
            }
            for op in std::mem::take(&mut self.deliver) {
                self.deliver_launch(op);
            }
            if let Some(i) = injector.as_deref_mut() {
                i.before_cycle(&self.machine, &mut self.framework);
            }
            self.machine.step(&mut self.framework)?;
            if self.machine.cycle() >= (self.bw_window + 1) * BANDWIDTH_WINDOW_CYCLES {
                self.sample_bandwidth();
            }
            for r in self.framework.take_records() {
                self.observe(r);
                self.out.records.push(r);
            }
            self.out
                .preemptions
                .append(&mut self.framework.take_preemptions());
            if cycle - last_report >= 1 << 16 {
                last_report = cycle;
                progress(RunProgress {
                    cycle,
                    processes_done: self
                        .procs
                        .iter()
                        .filter(|p| {
                            p.wait == Wait::Done
                                || self
                                    .setup
                                    .replay
                                    .is_some_and(|n| p.record.runs.len() >= n as usize)
                        })
                        .count(),
                    processes: self.procs.len(),
                    kernels_done: self
                        .out
                        .kernels
                        .iter()
                        .filter(|k| k.finished_fs.is_some())
                        .count(),
                });
            }
        }
        self.sample_bandwidth();
        self.out.cycles = self.machine.cycle();
        // Each kernel started when its first TB was placed.
        for &(launch, op) in &self.launch_ops {
            if let OpKind::Launch { record, .. } = self.ops[op].kind {
                let l = self.machine.launch(LaunchId(launch));
                let period = self.out.core_period_fs;
                let k = &mut self.out.kernels[record];
                k.started_fs = l.started_at().map(|c| c * period);
                k.tbs = l.ctx().num_tbs();
                k.tb = Some(*l.demand());
            }
        }
        if let Some(log) = self
            .machine
            .detach()
            .and_then(|p| p.downcast::<ResidencyLog>())
        {
            self.out.residency = log.moves;
        }
        self.out.processes = self.procs.iter().map(|p| p.record.clone()).collect();
        let mut names = Vec::new();
        let mut insts = 0;
        for l in 0.. {
            let id = gpu::timing::LaunchId(l);
            if l as usize >= self.launch_ops.len() {
                break;
            }
            let launch = self.machine.launch(id);
            names.push(launch.ctx().kernel.name.clone());
            insts += launch.stats().map_or(0, |s| s.warp_instructions);
        }
        self.out.launch_names = names;
        self.out.warp_instructions = insts;
        if self.setup.snapshot {
            let mem = self.machine.memory();
            self.out.memory = self
                .procs
                .iter()
                .map(|p| {
                    p.allocs
                        .iter()
                        .map(|&(a, n)| mem.read_bytes(a, n).map(<[u8]>::to_vec).unwrap_or_default())
                        .collect()
                })
                .collect();
        }
        Ok(self.out)
    }

    /// Handles host events that are due, then runs every runnable program until it waits.
    fn host(&mut self) -> Result<(), RunError> {
        let now = self.now();
        while let Some(&Reverse((at, _, t))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            match t {
                Timer::Arrival(p) => {
                    let proc = &mut self.procs[p];
                    proc.wait = Wait::Runnable(ReplyKind::Start);
                    proc.run_started = at;
                    proc.run_requested = at;
                }
                Timer::LaunchReady(op) => self.try_issue_head(op),
                Timer::CopyDone(op) => self.copy_done(op, at),
            }
        }
        for p in 0..self.procs.len() {
            self.run_program(p)?;
        }
        self.start_copies()
    }

    /// Runs program `p` while it is runnable.
    fn run_program(&mut self, p: usize) -> Result<(), RunError> {
        let mut calls = 0u32;
        loop {
            if self.procs[p].wait == Wait::Runnable(ReplyKind::Done)
                && self.procs[p].pending() >= MAX_PENDING_OPS
            {
                self.procs[p].wait = Wait::Room;
            }
            calls += 1;
            if calls > MAX_CALLS_PER_INSTANT {
                let proc = &self.procs[p];
                return Err(RunError::Process {
                    process: proc.name.clone(),
                    what: format!(
                        "{}: more than {MAX_CALLS_PER_INSTANT} host calls without simulated time passing (an endless loop of syncs?)",
                        proc.program.position().unwrap_or_default()
                    ),
                });
            }
            let reply = match self.procs[p].wait {
                Wait::Runnable(ReplyKind::Start) => Reply::Start,
                Wait::Runnable(ReplyKind::Done) => match self.procs[p].ptr.take() {
                    Some(x) => Reply::Ptr(x),
                    None => Reply::Done,
                },
                _ => return Ok(()),
            };
            let name = self.procs[p].name.clone();
            let request = self.procs[p]
                .program
                .next(reply)
                .map_err(|what| RunError::Process {
                    process: name.clone(),
                    what,
                })?;
            let now = self.now();
            match request {
                Request::Alloc {
                    bytes,
                    init,
                    managed,
                } => {
                    if bytes > crate::scenario::MAX_BUFFER_BYTES {
                        return Err(RunError::Process {
                            process: name,
                            what: format!(
                                "an allocation of {bytes} bytes exceeds the limit of {} bytes",
                                crate::scenario::MAX_BUFFER_BYTES
                            ),
                        });
                    }
                    // A managed allocation starts at a fault region's boundary, so that no
                    // other allocation shares its regions (one buffer's host data would
                    // decide what a fault on its neighbour costs). An assumption: CUDA
                    // aligns allocations to at least a page, the UVM driver manages them in
                    // 2 MiB blocks.
                    let region = managed
                        .and(self.machine.hierarchy_mut().fault_region_bytes())
                        .unwrap_or(1);
                    let mem = self.machine.memory_mut();
                    let ptr = mem.alloc_aligned(bytes, region);
                    if let Some(data) = init {
                        mem.write_bytes(ptr, &data).expect("fresh allocation");
                    }
                    if let Some(populate) = managed {
                        // Managed memory starts on the host where the GPU pages on
                        // demand; without translation it is ordinary device memory.
                        let h = self.machine.hierarchy_mut();
                        if !h.manage(ptr, bytes, populate) && h.config().translating().is_some() {
                            return Err(RunError::Process {
                                process: name,
                                what: "a managed buffer (`managed = true`) needs demand paging, and the GPU translates addresses without [memory.translation.faults]".into(),
                            });
                        }
                    }
                    self.procs[p].ptr = Some(ptr);
                    self.procs[p].allocs.push((ptr, bytes));
                    self.procs[p].wait = Wait::Runnable(ReplyKind::Done);
                }
                Request::Texture(desc) => {
                    let handle = self
                        .machine
                        .memory_mut()
                        .create_texture(desc)
                        .map_err(|e| RunError::Process {
                            process: name.clone(),
                            what: format!("a texture object: `{}`: {}", e.field, e.what),
                        })?;
                    self.procs[p].ptr = Some(handle);
                    self.procs[p].wait = Wait::Runnable(ReplyKind::Done);
                }
                Request::Copy { .. } | Request::Dump { .. } => {
                    let (to_device, dev, data, len, stream, wait, token, dump) = match request {
                        Request::Copy {
                            to_device,
                            dev,
                            data,
                            len,
                            stream,
                            wait,
                            token,
                        } => (to_device, dev, data, len, stream, wait, token, None),
                        Request::Dump {
                            dev,
                            len,
                            stream,
                            file,
                        } => (
                            false,
                            dev,
                            Vec::new(),
                            len,
                            stream,
                            true,
                            0,
                            Some(Box::new(file)),
                        ),
                        _ => unreachable!("copies only"),
                    };
                    if self.machine.memory().read_bytes(dev, len).is_err() {
                        return Err(RunError::Process {
                            process: name,
                            what: format!(
                                "a copy of {len} bytes at {dev:#x} does not fit its allocation"
                            ),
                        });
                    }
                    if to_device {
                        // The host wrote a managed allocation: its data is on the host,
                        // so a GPU fault on it migrates it (nothing moves now).
                        self.machine.hierarchy_mut().populate(dev, len);
                    }
                    let op = self.push_op(
                        p,
                        stream,
                        OpKind::Copy {
                            to_device,
                            dev,
                            data,
                            len,
                            token,
                            dump,
                        },
                        now,
                        now,
                    );
                    self.procs[p].wait = if wait {
                        Wait::Op(op)
                    } else {
                        Wait::Runnable(ReplyKind::Done)
                    };
                }
                Request::Launch {
                    kernel,
                    grid,
                    block,
                    dynamic_smem,
                    args,
                    stream,
                    wait,
                    at,
                } => {
                    let command =
                        self.command(p, &kernel, [grid, block], dynamic_smem, &args, stream, &at)?;
                    // `cudaLaunch`: a mechanism may prepare for the preemption the launch
                    // may bring once it arrives (papers/li-pep §3.3).
                    self.framework
                        .launch_called(command.context, command.priority);
                    let ready = later_fs(
                        now,
                        (self.setup.host.launch_latency_us * FS_PER_US as f64).trunc(),
                    )
                    .ok_or_else(|| RunError::Time {
                        process: self.procs[p].name.clone(),
                        what: format!("the launch of `{kernel}` at {at}"),
                    })?;
                    let record = self.out.kernels.len();
                    self.out.kernels.push(KernelRecord {
                        process: name,
                        kernel,
                        stream,
                        called_fs: now,
                        arrived_fs: None,
                        activated_fs: None,
                        started_fs: None,
                        finished_fs: None,
                        launch: None,
                        tbs: 0,
                        tb: None,
                        stats: None,
                    });
                    let op = self.push_op(
                        p,
                        stream,
                        OpKind::Launch {
                            command: Some(Box::new(command)),
                            record,
                        },
                        now,
                        ready,
                    );
                    self.timer(ready, Timer::LaunchReady(op));
                    self.procs[p].wait = if wait {
                        Wait::Op(op)
                    } else {
                        Wait::Runnable(ReplyKind::Done)
                    };
                }
                Request::Sync { stream } => {
                    self.procs[p].wait = Wait::Streams(stream);
                    self.wake(p);
                }
                Request::Done => {
                    // Work still queued on its streams belongs to the process: it ends when
                    // that is done too.
                    self.procs[p].wait = Wait::Ending;
                    self.wake(p);
                    // A run that ended at once may start the next (a request already
                    // waiting, or replay): it runs now, as a new run with its own calls.
                    if self.procs[p].wait != Wait::Runnable(ReplyKind::Start) {
                        return Ok(());
                    }
                    calls = 0;
                }
            }
        }
    }

    /// The process's program has ended: its results are checked now. Under replay it
    /// starts again at once, unless this was the last run the replay waited for; serving
    /// requests, it starts again for the next request, at once if it has arrived.
    fn end(&mut self, p: usize, now: u64) {
        let proc = &mut self.procs[p];
        if proc.in_setup {
            // The setup serves no request: the first request runs next, on its memory.
            proc.in_setup = false;
            self.serve_next(p, now);
            return;
        }
        let verdict = proc.program.finish(self.machine.memory());
        proc.record.runs.push(CompletedRun {
            requested_fs: proc.run_requested,
            started_fs: proc.run_started,
            finished_fs: now,
            verdict: verdict.clone(),
        });
        if proc.record.verdict.as_ref().is_none_or(|v| v.verified) {
            proc.record.verdict = Some(verdict);
        }
        proc.record.finished_fs = Some(now);
        proc.wait = Wait::Done;
        if !proc.requests.is_empty() {
            proc.served += 1;
            self.serve_next(p, now);
            return;
        }
        let Some(n) = self.setup.replay else {
            return;
        };
        if self.procs.iter().all(|q| q.record.runs.len() >= n as usize) {
            self.replayed = true;
            return;
        }
        self.restart(p, now);
    }

    /// Process `p` serves its next request, if any: at once if it has arrived, else when
    /// it does. With a setup its program runs its body again on its memory (a setup that
    /// went wrong is the run's error, [`System::failed`]).
    fn serve_next(&mut self, p: usize, now: u64) {
        let proc = &mut self.procs[p];
        let Some(&next) = proc.requests.get(proc.served) else {
            proc.wait = Wait::Done;
            return;
        };
        if proc.keeps_memory {
            if let Err(what) = proc.program.again(self.machine.memory()) {
                proc.wait = Wait::Done;
                self.failed.get_or_insert(RunError::Process {
                    process: proc.name.clone(),
                    what,
                });
                return;
            }
            proc.run_started = now;
            proc.ptr = None;
            proc.wait = Wait::Runnable(ReplyKind::Start);
        } else {
            self.restart(p, now);
        }
        let proc = &mut self.procs[p];
        proc.run_requested = next;
        if next > now {
            // Idle until the next request arrives.
            proc.wait = Wait::Arrival;
            self.timer(next, Timer::Arrival(p));
        }
    }

    /// Starts process `p`'s program again at `now`, as a new run.
    fn restart(&mut self, p: usize, now: u64) {
        // Its streams are idle (it ended), so its memory is no longer used: the next run
        // allocates its own, as a new launch of the application would.
        let proc = &mut self.procs[p];
        let mem = self.machine.memory_mut();
        for (a, _) in proc.allocs.drain(..) {
            mem.free(a);
        }
        proc.program = proc.source.start();
        proc.run_started = now;
        proc.run_requested = now;
        proc.ptr = None;
        proc.wait = Wait::Runnable(ReplyKind::Start);
    }

    /// Builds the command of a launch of `kernel` by process `p` on `stream`.
    #[allow(clippy::too_many_arguments)]
    fn command(
        &mut self,
        p: usize,
        kernel: &str,
        [grid, block]: [[u32; 3]; 2],
        dynamic_smem: u32,
        args: &[gpu::KernelArg],
        stream: u32,
        at: &str,
    ) -> Result<Command, RunError> {
        // Checked against the GPU that runs the launch, not a default one.
        let limits = DeviceLimits::for_gpu(&self.setup.timing.gpu);
        let grid_id = self.out.kernels.len() as u64 + 1;
        let timing = &self.setup.timing;
        let proc = &mut self.procs[p];
        let fail = |error: GpuError| RunError::Launch {
            process: proc.name.clone(),
            at: at.to_string(),
            error: Box::new(error),
        };
        let module = proc.module.as_mut().expect("every process has a module");
        let k = module.kernel(kernel).map_err(fail)?;
        let launch = module
            .launch_ctx(&limits, k, grid, block, dynamic_smem, args, grid_id)
            .map_err(fail)?;
        let timed = module.timed_kernel(k, timing);
        if let Err(e) = self.machine.occupancy(&launch, &timed) {
            return Err(RunError::Launch {
                process: proc.name.clone(),
                at: at.to_string(),
                error: Box::new(e.into()),
            });
        }
        let (context, stream_priority) = if self.setup.one_context {
            let top = crate::scenario::MAX_STREAM_PRIORITY as i32;
            (ContextId(0), proc.priority.clamp(0, top))
        } else {
            let sp = proc
                .stream_priorities
                .iter()
                .find(|(s, _)| *s == stream)
                .map_or(0, |&(_, sp)| sp);
            (ContextId(p as u32), sp)
        };
        Ok(Command {
            context,
            priority: proc.priority,
            stream_priority,
            launch,
            timed,
            tag: 0,
        })
    }

    fn push_op(&mut self, p: usize, stream: u32, kind: OpKind, called: u64, ready: u64) -> usize {
        let id = self.ops.len();
        self.ops.push(Op {
            process: p,
            stream,
            kind,
            called,
            ready,
            started: None,
            finished: None,
        });
        let q = self.procs[p].stream(stream);
        q.push_back(id);
        if q.len() == 1 {
            self.issue(id);
        }
        id
    }

    /// Op `id` has reached the head of its stream.
    fn issue(&mut self, id: usize) {
        match self.ops[id].kind {
            OpKind::Copy { .. } => self.copy_queue.push_back(id),
            OpKind::Launch { .. } => {
                if self.ops[id].ready <= self.now() {
                    self.queue_delivery(id);
                }
            }
        }
    }

    /// Delivers launch `id` this cycle, once: with no launch latency it reaches the head of
    /// its stream and its latency timer fires at the same moment, and each would deliver it.
    fn queue_delivery(&mut self, id: usize) {
        if self.ops[id].started.is_none() && !self.deliver.contains(&id) {
            self.deliver.push(id);
        }
    }

    /// A launch's latency has passed: deliver it if it heads its stream.
    fn try_issue_head(&mut self, id: usize) {
        let (p, s) = (self.ops[id].process, self.ops[id].stream);
        if self.procs[p].stream(s).front() == Some(&id) {
            self.queue_delivery(id);
        }
    }

    fn deliver_launch(&mut self, id: usize) {
        let now = self.now();
        let cycle = self.machine.cycle();
        let OpKind::Launch {
            command, record, ..
        } = &mut self.ops[id].kind
        else {
            unreachable!("only launches are delivered");
        };
        let mut command = *command.take().expect("delivered once");
        command.tag = id as u64;
        let record = *record;
        self.ops[id].started = Some(now);
        self.out.kernels[record].arrived_fs = Some(now);
        self.framework.deliver(command, cycle);
    }

    /// Gives free engines the next copies, first come first served.
    fn start_copies(&mut self) -> Result<(), RunError> {
        let now = self.now();
        let (gbps, latency_us) = (self.setup.host.pcie_gbps, self.setup.host.copy_latency_us);
        for e in 0..self.engines.len() {
            if self.engines[e].is_some() {
                continue;
            }
            let pick = match self.setup.copy_policy {
                CopyPolicy::Fcfs => 0,
                CopyPolicy::Priority => {
                    let prio = |&op: &usize| self.procs[self.ops[op].process].priority;
                    let best = self.copy_queue.iter().map(prio).max();
                    self.copy_queue
                        .iter()
                        .position(|op| Some(prio(op)) == best)
                        .unwrap_or(0)
                }
            };
            let Some(id) = self.copy_queue.remove(pick) else {
                return Ok(());
            };
            let OpKind::Copy { len, .. } = self.ops[id].kind else {
                unreachable!("the copy queue holds copies");
            };
            // bytes / (GB/s) = ns; a copy's time in fs, at least one. Checked: a slow link
            // must give a late time or an error, never a sum that wraps to an early one.
            let transfer = (len as f64 / gbps * 1.0e6).round().max(1.0);
            let latency = (latency_us * FS_PER_US as f64).round();
            let Some(done) = later_fs(now, latency).and_then(|t| later_fs(t, transfer)) else {
                let op = &self.ops[id];
                return Err(RunError::Time {
                    process: self.procs[op.process].name.clone(),
                    what: format!(
                        "a copy of {len} bytes on stream {} ({latency_us} µs + {len} bytes at {gbps} GB/s)",
                        op.stream
                    ),
                });
            };
            self.engines[e] = Some(id);
            self.ops[id].started = Some(now);
            self.timer(done, Timer::CopyDone(id));
        }
        Ok(())
    }

    fn copy_done(&mut self, id: usize, at: u64) {
        let engine = self
            .engines
            .iter()
            .position(|&e| e == Some(id))
            .expect("a running copy has an engine");
        self.engines[engine] = None;
        let op = &mut self.ops[id];
        let OpKind::Copy {
            to_device,
            dev,
            ref mut data,
            len,
            token,
            ref mut dump,
        } = op.kind
        else {
            unreachable!("copies only");
        };
        let p = op.process;
        if to_device {
            self.machine
                .memory_mut()
                .write_bytes(dev, data)
                .expect("checked when the copy was asked for");
            *data = Vec::new();
        } else {
            let bytes = self
                .machine
                .memory()
                .read_bytes(dev, len)
                .expect("checked when the copy was asked for");
            if let Some(file) = dump.take() {
                let bytes = bytes.to_vec();
                let d = Dumped {
                    process: self.procs[p].name.clone(),
                    file: *file,
                    at_fs: at,
                    bytes,
                };
                match self
                    .out
                    .dumps
                    .iter_mut()
                    .find(|x| x.file.path == d.file.path)
                {
                    Some(x) => *x = d,
                    None => self.out.dumps.push(d),
                }
            } else {
                // Straight from device memory: no third copy of the buffer.
                self.procs[p].program.copied(token, bytes);
            }
        }
        let op = &self.ops[id];
        self.out.copies.push(CopyRecord {
            process: self.procs[p].name.clone(),
            stream: op.stream,
            to_device,
            bytes: len,
            engine: engine as u32,
            called_fs: op.called,
            started_fs: op.started.unwrap_or(at),
            finished_fs: at,
        });
        self.finish_op(id, at);
    }

    /// Op `id` finished at `at`: the next in its stream starts; its process may wake.
    fn finish_op(&mut self, id: usize, at: u64) {
        self.ops[id].finished = Some(at);
        let (p, s) = (self.ops[id].process, self.ops[id].stream);
        let q = self.procs[p].stream(s);
        debug_assert_eq!(q.front(), Some(&id));
        q.pop_front();
        if let Some(&next) = q.front() {
            self.issue(next);
        }
        self.wake(p);
    }

    /// Process `p` continues if what it waits for is done.
    fn wake(&mut self, p: usize) {
        let proc = &self.procs[p];
        match proc.wait {
            Wait::Op(op) if self.ops[op].finished.is_some() => {}
            Wait::Streams(s) if proc.idle(s) => {}
            Wait::Room if proc.pending() < MAX_PENDING_OPS => {}
            Wait::Ending if proc.idle(None) => {
                let now = self.now();
                self.end(p, now);
                return;
            }
            _ => return,
        }
        self.procs[p].wait = Wait::Runnable(ReplyKind::Done);
    }

    /// A framework record: kernels' progress.
    fn observe(&mut self, r: Record) {
        match r {
            Record::KernelActivated { cycle, tag, launch } => {
                let fs = self.cycle_fs(cycle);
                if let OpKind::Launch { record, .. } = self.ops[tag as usize].kind {
                    let k = &mut self.out.kernels[record];
                    k.activated_fs = Some(fs);
                    k.launch = Some(launch.0);
                    self.launch_ops.push((launch.0, tag as usize));
                }
            }
            Record::KernelFinished { cycle, tag, launch } => {
                let fs = self.cycle_fs(cycle);
                if let OpKind::Launch { record, .. } = self.ops[tag as usize].kind {
                    let k = &mut self.out.kernels[record];
                    k.finished_fs = Some(fs);
                    k.stats = self.machine.launch(launch).stats().cloned().map(Box::new);
                }
                self.finish_op(tag as usize, fs);
            }
            _ => {}
        }
    }

    /// The machine (after [`System::run`], its statistics).
    pub fn machine(&self) -> &Machine {
        &self.machine
    }
}
