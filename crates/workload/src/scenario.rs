//! The scenario format: processes (GPU contexts) with their arrival times and priorities,
//! each running either a suite kernel's own host program or a list of commands over buffers
//! of its own, in TOML.
//!
//! ```toml
//! description = "BFS against a saxpy loop"
//! gpu = "gtx480"                  # a preset or a GPU file (the command line may override)
//!
//! [scheduler]
//! policy = "fcfs"                 # fcfs | npq | ppq | time-slice | dss | mps
//! time_slice_us = 50.0            # the time-slice policy's slice unless it names one
//! intra_sm_sharing = false        # may TBs of different kernels share an SM?
//! # active_kernels = 15           # active-queue entries (default: one per SM; 1..=4096)
//! copy_engine = "fcfs"            # fcfs | priority: the order copies wait in
//! mechanism = "drain"             # how a reserved SM is emptied: drain | flush-strict |
//!                                 # flush-relaxed | baseline | live | points-live |
//!                                 # lightweight | lightweight-tb |
//!                                 # lightweight-in-place | chimera
//! # mechanism = { kind = "chimera", deadline_us = 10.0 }   # with parameters (below)
//! # policy = { kind = "time-slice", slice_us = 100.0 }
//!
//! [host]                          # optional: overrides of the GPU file's [host]
//! launch_latency_us = 5.0         # also pcie_gbps, copy_latency_us, copy_engines
//!
//! [limits]
//! max_cycles = 100_000_000        # the whole scenario, in core cycles
//!
//! # replay = 3                    # restart each program when it completes, until every
//!                                 # process has completed 3 runs (tanasic-thesis §5.3.1);
//!                                 # the metrics average the completed runs
//!
//! [[process]]
//! name = "bfs"
//! suite = "bfs"                   # a suite kernel's host program, verified by its reference
//! size = "small"                  # small | large | huge (suite::Size)
//! seed = 1
//! target = "sm_70"                # sm_70 | sm_80 | sm_90 (default: the kernel's oldest)
//! arrival_us = 0.0
//! priority = 0                    # larger is more important (NPQ)
//!
//! [[process]]
//! name = "saxpy"
//! ptx = "../examples/saxpy/saxpy.ptx"   # relative to this file; "suite:bfs" is the suite
//!                                       # kernel's committed PTX for `target`
//! arrival_us = 20.0
//!
//! [[process.buffer]]
//! name = "x"
//! type = "f32"                    # u8 u16 u32 u64 s32 s64 f32 f64
//! len = 500                       # at most 1 GiB; 4 GiB for all processes together
//! init = "random"                 # zero | iota | fill (value) | values | random (min, max, seed)
//! min = 0.0                       #   | file (a .npy file, or raw little-endian bytes)
//! max = 1.0
//!
//! [[process.command]]             # copies are blocking (cudaMemcpy) unless blocking = false
//! copy = "x"                      # direction = "to_device" (default) | "to_host"
//!
//! [[process.command]]
//! launch = "saxpy"                # a kernel of the process's PTX file
//! grid = [4]
//! block = [128]
//! args = [{ buffer = "x" }, { buffer = "y", offset = 16 }, { f32 = 2.0 }, { u32 = 500 }]
//! stream = 0                      # streams run in order; different streams overlap
//! # { loop_index = "s32" }: the iteration (from 0) of the innermost enclosing repeat
//!
//! [[process.command]]
//! repeat = 10                     # the body, 10 times (run lazily: at most 1024 copies
//!                                 # and launches of a process wait unfinished, then
//!                                 # the host blocks as on a full CUDA launch queue)
//! [[process.command.body]]
//! launch = "saxpy"
//! # ...
//!
//! [[process.command]]
//! repeat_until_zero = { buffer = "changed", index = 0 }  # BFS's host loop: the body, then
//! max_iterations = 10000                                 # a 1-element device→host copy
//!
//! [[process.command]]
//! set = "changed"                 # host-side: write elements of a buffer's host copy
//! index = 0                       # from this element (then `copy` it to the device)
//! values = [0]
//!
//! [[process.command]]
//! sync = true                     # wait for every stream (or sync_stream = 1)
//!
//! [[process.check]]               # compared with device memory when the process ends
//! buffer = "y"
//! values = [1.0, 3.0]             # a prefix; or fill = 2.0; or file = "y.npy"
//! tolerance = 1e-6                # relative, floats only; finite, >= 0
//! ```
//!
//! **Policies and mechanisms** are written as on the command line's `--policy` and
//! `--mechanism`, in kebab-case ([`crate::choice`]): the name alone takes every parameter's
//! default; a table tagged by `kind` (inline as above, or a `[scheduler.mechanism]`
//! section) sets parameters, and a parameter the choice does not have, or a value out of
//! range, is an error naming it. The parameters:
//!
//! | choice | parameter | default |
//! | --- | --- | --- |
//! | `chimera` | `deadline_us`: the preemption deadline, µs (papers/li-pep §4 uses 5, 10, 15) | 15 |
//! | `lightweight`, `lightweight-tb`, `lightweight-in-place` | `compressor_latency`: core cycles through the register compressor | 2 |
//! | `time-slice` | `slice_us`: each context's turn, µs | `time_slice_us` |
//! | `ppq` | `access`: `shared` (idle SMs go to lower priorities too) or `exclusive` (not while a higher priority is active), papers/tanasic-thesis §5.3.3 | `shared` |
//! | `dss` | `tokens`: every process's SM budget, 1 to 65536 (papers/tanasic-thesis §5.2.4) | by priority: ⌊SMs × w / W⌋ for weight w = 1 + max(priority, 0) (⌊SMs / processes⌋ when the priorities are equal), the SMs left over one each to the first processes to become active |
//! | `mps` | `percentage`: every client's active-thread percentage, (0, 100]: each process holds at most that share of the SMs, rounded up | 100 |
//!
//! The snake_case spellings of earlier scenario files (`flush_strict`, `points_live`,
//! `lightweight_tb`, `lightweight_in_place`, `time_slice`) are deprecated aliases: still
//! read, never written.
//!
//! Launches go through the kernel management path of the host model ([`crate::system`]):
//! a launch call reaches the GPU after the launch latency (and after the work before it in
//! its stream), copies cross the PCIe link through the copy engines first come, first
//! served. Every problem found is an error naming the file, line and column and the field
//! (`process[1].command[2].launch`).

use std::path::{Path, PathBuf};

use gpu::config::HostSpec;
use sched::{FrameworkConfig, PolicyKind};
use serde::Deserialize;
use toml::Spanned;

use crate::data::{ElemType, Init};

/// A problem with a scenario file: where, which field, and what.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{location}: `{field}`: {what}")]
pub struct ScenarioError {
    /// `file:line:col`, or the file alone when the position is not known.
    pub location: String,
    pub field: String,
    pub what: String,
}

/// A scenario as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    #[serde(default)]
    pub description: String,
    /// A GPU preset name or configuration file (relative to the scenario).
    pub gpu: Option<Spanned<String>>,
    #[serde(default = "SchedulerSection::default")]
    pub scheduler: SchedulerSection,
    #[serde(default)]
    pub host: HostOverrides,
    #[serde(default)]
    pub limits: Limits,
    /// Replay (papers/tanasic-thesis §5.3.1): every process's program starts again when it
    /// completes, until each has completed this many runs (1..=[`MAX_REPLAY`]).
    pub replay: Option<Spanned<u32>>,
    #[serde(default, rename = "process")]
    pub processes: Vec<ProcessSpec>,
}

/// The most runs `replay` may ask of every process.
pub const MAX_REPLAY: u32 = 1000;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerSection {
    /// The scheduling policy: its name, or a table with its `kind` and parameters
    /// ([`crate::choice`]; read when the scenario is resolved, to name the field).
    pub policy: Option<Spanned<toml::Value>>,
    #[serde(default)]
    pub intra_sm_sharing: bool,
    /// Entries of the active queue, 1 to [`sched::MAX_ACTIVE_KERNELS`].
    pub active_kernels: Option<Spanned<u32>>,
    /// How the copy engines pick the next copy.
    #[serde(default)]
    pub copy_engine: CopyPolicy,
    /// How a reserved SM is emptied: the mechanism's name, or a table with its `kind` and
    /// parameters (as `policy`).
    pub mechanism: Option<Spanned<toml::Value>>,
    /// Time slice of the `time-slice` policy unless it names its own (`slice_us`), µs.
    #[serde(default = "default_slice")]
    pub time_slice_us: f64,
}

fn default_slice() -> f64 {
    DEFAULT_TIME_SLICE_US
}

/// The time slice of the `time-slice` policy unless a scenario gives one, µs: short enough
/// that the project's small kernels see several turns (NVIDIA's drivers use milliseconds).
pub const DEFAULT_TIME_SLICE_US: f64 = 50.0;

impl Default for SchedulerSection {
    fn default() -> Self {
        SchedulerSection {
            policy: None,
            intra_sm_sharing: false,
            active_kernels: None,
            copy_engine: CopyPolicy::default(),
            mechanism: None,
            time_slice_us: DEFAULT_TIME_SLICE_US,
        }
    }
}

/// How the copy engines order waiting copies.
#[derive(Clone, Copy, Debug, Default, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CopyPolicy {
    /// First come, first served (papers/tanasic-thesis §5.3.1).
    #[default]
    Fcfs,
    /// The waiting copy of the highest-priority process first, then first come (the thesis
    /// runs its priority experiments with this, §5.3.2).
    Priority,
}

/// Fields of the GPU file's `[host]` a scenario may change.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostOverrides {
    pub pcie_gbps: Option<f64>,
    pub copy_latency_us: Option<f64>,
    pub launch_latency_us: Option<f64>,
    pub copy_engines: Option<u32>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Core cycles the whole scenario may take.
    pub max_cycles: Option<u64>,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SizeName {
    #[default]
    Small,
    Large,
    Huge,
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
pub enum TargetName {
    #[serde(rename = "sm_70")]
    Sm70,
    #[serde(rename = "sm_80")]
    Sm80,
    #[serde(rename = "sm_90")]
    Sm90,
}

impl TargetName {
    fn target(self) -> suite::Target {
        match self {
            TargetName::Sm70 => suite::Target::Sm70,
            TargetName::Sm80 => suite::Target::Sm80,
            TargetName::Sm90 => suite::Target::Sm90,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessSpec {
    pub name: Spanned<String>,
    #[serde(default)]
    pub arrival_us: f64,
    #[serde(default)]
    pub priority: i32,
    pub suite: Option<Spanned<String>>,
    #[serde(default)]
    pub size: SizeName,
    #[serde(default = "one")]
    pub seed: u64,
    #[serde(default)]
    pub target: Option<TargetName>,
    pub ptx: Option<Spanned<String>>,
    #[serde(default, rename = "buffer")]
    pub buffers: Vec<BufferSpec>,
    #[serde(default, rename = "command")]
    pub commands: Vec<CommandSpec>,
    #[serde(default, rename = "check")]
    pub checks: Vec<CheckSpec>,
}

fn one() -> u64 {
    1
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BufferSpec {
    pub name: Spanned<String>,
    #[serde(rename = "type")]
    pub ty: ElemType,
    /// Elements (for `init = "file"`, taken from the file when left out).
    pub len: Option<Spanned<u64>>,
    #[serde(default)]
    pub init: Init,
    #[serde(default)]
    pub value: f64,
    #[serde(default)]
    pub values: Vec<f64>,
    #[serde(default)]
    pub min: f64,
    #[serde(default = "unit")]
    pub max: f64,
    #[serde(default)]
    pub seed: u64,
    pub file: Option<Spanned<String>>,
}

fn unit() -> f64 {
    1.0
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    #[default]
    ToDevice,
    ToHost,
}

/// One kernel argument: exactly one of the fields.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgSpec {
    pub buffer: Option<Spanned<String>>,
    /// Bytes added to the buffer's address.
    #[serde(default)]
    pub offset: u64,
    pub u32: Option<u32>,
    pub s32: Option<i32>,
    pub u64: Option<u64>,
    pub s64: Option<i64>,
    pub f32: Option<f32>,
    pub f64: Option<f64>,
    /// The iteration (from 0) of the innermost enclosing repeat, as this type.
    pub loop_index: Option<IndexType>,
}

/// The integer type of a `loop_index` argument.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum IndexType {
    U32,
    S32,
    U64,
    S64,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WordRef {
    pub buffer: Spanned<String>,
    #[serde(default)]
    pub index: u64,
}

/// One command: exactly one of `copy`, `set`, `launch`, `repeat`, `repeat_until_zero`,
/// `sync`, `sync_stream`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandSpec {
    pub copy: Option<Spanned<String>>,
    /// Host-side writes of `values` into a buffer's host copy, from element `index`.
    pub set: Option<Spanned<String>>,
    #[serde(default)]
    pub index: u64,
    #[serde(default)]
    pub values: Vec<f64>,
    #[serde(default)]
    pub direction: Direction,
    /// Bytes into the buffer, and how many (default: the rest of it).
    #[serde(default)]
    pub offset: u64,
    pub bytes: Option<u64>,
    /// Copies: wait for completion (cudaMemcpy) or not (cudaMemcpyAsync).
    #[serde(default = "yes")]
    pub blocking: bool,
    pub launch: Option<Spanned<String>>,
    #[serde(default)]
    pub grid: Vec<u32>,
    #[serde(default)]
    pub block: Vec<u32>,
    #[serde(default)]
    pub dynamic_smem: u32,
    #[serde(default)]
    pub args: Vec<ArgSpec>,
    pub repeat: Option<u64>,
    pub repeat_until_zero: Option<WordRef>,
    pub max_iterations: Option<u64>,
    #[serde(default)]
    pub body: Vec<CommandSpec>,
    pub sync: Option<bool>,
    pub sync_stream: Option<u32>,
    #[serde(default)]
    pub stream: u32,
}

fn yes() -> bool {
    true
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckSpec {
    pub buffer: Spanned<String>,
    #[serde(default)]
    pub values: Vec<f64>,
    pub fill: Option<f64>,
    pub file: Option<Spanned<String>>,
    /// Relative, for floats: finite and non-negative (0 when left out).
    pub tolerance: Option<Spanned<f64>>,
}

/// Reads files a scenario names (the command line gives the real file system; tests give
/// their own).
pub trait Files {
    fn read(&self, path: &Path) -> Result<Vec<u8>, String>;

    /// [`Files::read`], refusing a file of more than `limit` bytes. The real file system
    /// refuses it, and anything that is not a regular file (a directory, a device such as
    /// `/dev/zero`, a FIFO), before reading a byte; this default, for files already in
    /// memory, after.
    fn read_at_most(&self, path: &Path, limit: u64) -> Result<Vec<u8>, String> {
        let bytes = self.read(path)?;
        if bytes.len() as u64 > limit {
            return Err(too_long(bytes.len() as u64, limit));
        }
        Ok(bytes)
    }
}

fn too_long(len: u64, limit: u64) -> String {
    format!("{len} bytes, more than the {limit} this input may have")
}

/// The real file system.
pub struct Disk;

impl Files for Disk {
    fn read(&self, path: &Path) -> Result<Vec<u8>, String> {
        self.read_at_most(path, u64::MAX)
    }

    fn read_at_most(&self, path: &Path, limit: u64) -> Result<Vec<u8>, String> {
        use std::io::Read;
        // `stat` first: opening a FIFO would block, and reading a device need never end.
        let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
        if !meta.is_file() {
            let kind = if meta.is_dir() {
                "a directory"
            } else {
                "a device, FIFO or socket"
            };
            return Err(format!("not a regular file ({kind})"));
        }
        if meta.len() > limit {
            return Err(too_long(meta.len(), limit));
        }
        // The file may grow between `stat` and the read: never read past the limit.
        let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.take(limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| e.to_string())?;
        if bytes.len() as u64 > limit {
            return Err(too_long(bytes.len() as u64, limit));
        }
        Ok(bytes)
    }
}

/// A scenario checked and resolved: every name found, every input read.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The file (for messages) and its directory (for relative paths).
    pub file: String,
    pub description: String,
    /// The GPU named by the file, resolved against its directory: a preset that exists, or
    /// a GPU file that was read and is valid.
    pub gpu: Option<String>,
    /// Where the file names its GPU (`file:line:col`), for errors about it.
    pub gpu_at: Option<String>,
    pub framework: FrameworkConfig,
    pub policy: PolicyKind,
    /// The slice of [`PolicyKind::TimeSlice`] when it names none, µs.
    pub time_slice_us: f64,
    pub mechanism: preempt::MechanismKind,
    pub copy_policy: CopyPolicy,
    pub host: HostOverrides,
    pub max_cycles: Option<u64>,
    /// Runs every process completes under replay (`None`: each runs once).
    pub replay: Option<u32>,
    pub processes: Vec<Process>,
    /// What loading accepted but warns about (`file:line:col: warning: what`): integer
    /// literals in a process's PTX wrapped to their type.
    pub warnings: Vec<String>,
}

/// A process of a scenario.
#[derive(Clone, Debug)]
pub struct Process {
    pub name: String,
    pub arrival_us: f64,
    pub priority: i32,
    pub program: Program,
}

#[derive(Clone)]
pub enum Program {
    /// A suite kernel's own host program, verified against its CPU reference.
    Suite {
        kernel: &'static dyn suite::Kernel,
        size: suite::Size,
        seed: u64,
        target: suite::Target,
    },
    /// Commands over buffers, on a PTX module.
    Commands(CommandProgram),
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Program::Suite {
                kernel,
                size,
                seed,
                target,
            } => f
                .debug_struct("Suite")
                .field("kernel", &kernel.name())
                .field("size", size)
                .field("seed", seed)
                .field("target", target)
                .finish(),
            Program::Commands(c) => f.debug_tuple("Commands").field(c).finish(),
        }
    }
}

/// A PTX module, its buffers, commands and checks.
#[derive(Clone, Debug)]
pub struct CommandProgram {
    pub ptx_file: String,
    pub ptx: String,
    pub buffers: Vec<Buffer>,
    pub commands: Vec<Cmd>,
    pub checks: Vec<Check>,
}

/// A buffer with its initial contents.
#[derive(Clone, Debug)]
pub struct Buffer {
    pub name: String,
    pub ty: ElemType,
    pub init: Vec<u8>,
}

/// A resolved command; `at` is where it is written (`file:line:col`, field path).
#[derive(Clone, Debug)]
pub struct Cmd {
    pub at: String,
    pub field: String,
    pub kind: CmdKind,
}

#[derive(Clone, Debug)]
pub enum CmdKind {
    Copy {
        buffer: usize,
        to_device: bool,
        offset: u64,
        bytes: u64,
        stream: u32,
        blocking: bool,
    },
    /// Writes encoded values into a buffer's host copy at a byte offset.
    Set {
        buffer: usize,
        offset: u64,
        bytes: Vec<u8>,
    },
    Launch {
        kernel: String,
        grid: [u32; 3],
        block: [u32; 3],
        dynamic_smem: u32,
        args: Vec<Arg>,
        stream: u32,
    },
    Repeat {
        times: u64,
        body: std::sync::Arc<[Cmd]>,
    },
    RepeatUntilZero {
        buffer: usize,
        /// Byte offset and width of the word.
        offset: u64,
        width: u32,
        max_iterations: u64,
        body: std::sync::Arc<[Cmd]>,
    },
    Sync {
        stream: Option<u32>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    Buffer { buffer: usize, offset: u64 },
    U32(u32),
    S32(i32),
    U64(u64),
    S64(i64),
    F32(f32),
    F64(f64),
    LoopIndex(IndexType),
}

#[derive(Clone, Debug)]
pub struct Check {
    pub buffer: usize,
    pub expect: Expect,
    pub tolerance: f64,
}

#[derive(Clone, Debug)]
pub enum Expect {
    /// A prefix of the buffer.
    Values(Vec<f64>),
    Fill(f64),
    /// Exactly these bytes (from a file).
    Bytes(Vec<u8>),
}

/// The longest buffer a scenario may declare, in bytes (1 GiB): checked before anything is
/// allocated.
pub const MAX_BUFFER_BYTES: u64 = 1 << 30;
/// The most bytes of buffers one process (or launch spec) may declare in all (4 GiB).
pub const MAX_TOTAL_BUFFER_BYTES: u64 = 1 << 32;
/// The most bytes of buffers all the processes of a scenario may declare together (4 GiB;
/// a run holds several copies of each: the scenario's, the host program's, device memory).
pub const MAX_SCENARIO_BUFFER_BYTES: u64 = 1 << 32;
/// The longest GPU configuration file a scenario may name (1 MiB).
pub const MAX_GPU_FILE_BYTES: u64 = 1 << 20;
/// The longest PTX file a scenario may name (64 MiB).
pub const MAX_PTX_BYTES: u64 = 1 << 26;
/// The longest input or expected-output file (`.npy` or raw): a largest buffer and a
/// header.
pub const MAX_DATA_FILE_BYTES: u64 = MAX_BUFFER_BYTES + (1 << 16);

/// Parses and resolves the scenario `text` of file `file`, reading the files it names
/// through `files` (paths relative to the scenario's directory).
pub fn parse(file: &str, text: &str, files: &dyn Files) -> Result<Scenario, ScenarioError> {
    let lines = LineIndex::new(text);
    let raw: ScenarioFile = toml::from_str(text).map_err(|e| {
        let at = e
            .span()
            .map(|s| lines.at(file, s.start))
            .unwrap_or_else(|| file.to_string());
        ScenarioError {
            location: at,
            field: "scenario".into(),
            what: e.message().to_string(),
        }
    })?;
    let dir = Path::new(file)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let cx = Cx {
        file,
        lines: &lines,
        dir: &dir,
        files,
        buffer_bytes: std::cell::Cell::new(0),
        warnings: std::cell::RefCell::new(Vec::new()),
    };
    cx.resolve(raw)
}

/// Byte offsets to `line:col`.
struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    fn new(text: &str) -> LineIndex {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { starts }
    }

    fn at(&self, file: &str, offset: usize) -> String {
        let line = self.starts.partition_point(|&s| s <= offset);
        let col = offset - self.starts[line - 1] + 1;
        format!("{file}:{line}:{col}")
    }
}

/// What resolution needs.
struct Cx<'a> {
    file: &'a str,
    lines: &'a LineIndex,
    dir: &'a Path,
    files: &'a dyn Files,
    /// Bytes of buffers the processes resolved so far declare ([`MAX_SCENARIO_BUFFER_BYTES`]).
    buffer_bytes: std::cell::Cell<u64>,
    warnings: std::cell::RefCell<Vec<String>>,
}

impl Cx<'_> {
    fn err<T>(
        &self,
        span: Option<std::ops::Range<usize>>,
        field: &str,
        what: String,
    ) -> Result<T, ScenarioError> {
        Err(ScenarioError {
            location: span
                .map(|s| self.lines.at(self.file, s.start))
                .unwrap_or_else(|| self.file.to_string()),
            field: field.to_string(),
            what,
        })
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.join(p)
    }

    /// The file `p` names, of at most `limit` bytes.
    fn read(&self, p: &Spanned<String>, field: &str, limit: u64) -> Result<Vec<u8>, ScenarioError> {
        let path = self.path(p.get_ref());
        self.files.read_at_most(&path, limit).or_else(|e| {
            self.err(
                Some(p.span()),
                field,
                format!("cannot read `{}`: {e}", path.display()),
            )
        })
    }

    fn resolve(&self, raw: ScenarioFile) -> Result<Scenario, ScenarioError> {
        if raw.processes.is_empty() {
            return self.err(
                None,
                "process",
                "a scenario needs at least one [[process]]".into(),
            );
        }
        let h = &raw.host;
        for (field, v) in [
            ("host.pcie_gbps", h.pcie_gbps),
            ("host.copy_latency_us", h.copy_latency_us),
            ("host.launch_latency_us", h.launch_latency_us),
        ] {
            if let Some(v) = v {
                if !(v.is_finite() && (0.0..=1.0e6).contains(&v))
                    || (field == "host.pcie_gbps" && v == 0.0)
                {
                    return self.err(None, field, format!("{v} is out of range"));
                }
            }
        }
        if h.copy_engines.is_some_and(|n| n == 0 || n > 64) {
            return self.err(None, "host.copy_engines", "must be in 1..=64".into());
        }
        let slice = raw.scheduler.time_slice_us;
        if !(slice.is_finite() && sched::SLICE_US_RANGE.contains(&slice)) {
            return self.err(
                None,
                "scheduler.time_slice_us",
                format!("{slice} is out of 0.01..=10^7"),
            );
        }
        if let Some(n) = &raw.scheduler.active_kernels {
            let max = sched::MAX_ACTIVE_KERNELS;
            if !(1..=max).contains(n.get_ref()) {
                return self.err(
                    Some(n.span()),
                    "scheduler.active_kernels",
                    format!("{} is out of 1..={max}", n.get_ref()),
                );
            }
        }
        if let Some(n) = &raw.replay {
            if !(1..=MAX_REPLAY).contains(n.get_ref()) {
                return self.err(
                    Some(n.span()),
                    "replay",
                    format!("{} is out of 1..={MAX_REPLAY}", n.get_ref()),
                );
            }
        }
        // The whole scenario's declared buffers, before any is filled (a file's size is
        // counted when it is read).
        let mut total = 0u64;
        for (i, p) in raw.processes.iter().enumerate() {
            for (b, spec) in p.buffers.iter().enumerate() {
                let bytes = spec
                    .len
                    .as_ref()
                    .map_or(0, |n| n.get_ref().saturating_mul(spec.ty.size() as u64));
                total = total.saturating_add(bytes);
                let f = format!("process[{i}].buffer[{b}]");
                self.budget(total, bytes, spec, &f, p.name.get_ref())?;
            }
        }
        if let Some(g) = &raw.gpu {
            self.gpu(g)?;
        }
        let policy = self.choice(&raw.scheduler.policy, "scheduler.policy")?;
        let mechanism = self.choice(&raw.scheduler.mechanism, "scheduler.mechanism")?;
        let mut processes = Vec::new();
        for (i, p) in raw.processes.into_iter().enumerate() {
            let field = format!("process[{i}]");
            if processes
                .iter()
                .any(|q: &Process| q.name == *p.name.get_ref())
            {
                return self.err(
                    Some(p.name.span()),
                    &format!("{field}.name"),
                    format!("a process `{}` already exists", p.name.get_ref()),
                );
            }
            processes.push(self.process(p, &field)?);
        }
        Ok(Scenario {
            file: self.file.to_string(),
            description: raw.description,
            gpu_at: raw
                .gpu
                .as_ref()
                .map(|g| self.lines.at(self.file, g.span().start)),
            gpu: raw.gpu.map(|g| {
                let g = g.into_inner();
                if g.ends_with(".toml") {
                    self.path(&g).display().to_string()
                } else {
                    g
                }
            }),
            framework: FrameworkConfig {
                intra_sm_sharing: raw.scheduler.intra_sm_sharing,
                active_kernels: raw.scheduler.active_kernels.map(Spanned::into_inner),
            },
            policy,
            time_slice_us: raw.scheduler.time_slice_us,
            mechanism,
            copy_policy: raw.scheduler.copy_engine,
            host: raw.host,
            max_cycles: raw.limits.max_cycles,
            replay: raw.replay.map(Spanned::into_inner),
            processes,
            warnings: self.warnings.take(),
        })
    }

    /// Checks the GPU the file names: a preset that exists, or a GPU file (relative to the
    /// scenario) that can be read and is valid, so a mistake is located here rather than
    /// reported without a place when the run starts.
    fn gpu(&self, g: &Spanned<String>) -> Result<(), ScenarioError> {
        let name = g.get_ref();
        if !name.ends_with(".toml") {
            if gpu::config::PRESETS.iter().any(|(n, _)| n == name) {
                return Ok(());
            }
            let presets: Vec<&str> = gpu::config::PRESETS.iter().map(|(n, _)| *n).collect();
            return self.err(
                Some(g.span()),
                "gpu",
                format!(
                    "no GPU preset `{name}` (presets: {}; a GPU file ends in .toml)",
                    presets.join(", ")
                ),
            );
        }
        let bytes = self.read(g, "gpu", MAX_GPU_FILE_BYTES)?;
        let path = self.path(name).display().to_string();
        let text = String::from_utf8(bytes)
            .or_else(|_| self.err(Some(g.span()), "gpu", format!("`{path}` is not UTF-8 text")))?;
        gpu::config::GpuConfig::from_toml(&path, &text)
            .map(|_| ())
            .or_else(|e| self.err(Some(g.span()), "gpu", e.to_string()))
    }

    /// A policy or mechanism as written ([`crate::choice`]), or its default when left out.
    fn choice<T: serde::de::DeserializeOwned + Default>(
        &self,
        written: &Option<Spanned<toml::Value>>,
        field: &str,
    ) -> Result<T, ScenarioError> {
        match written {
            None => Ok(T::default()),
            Some(v) => crate::choice::from_value(v.get_ref().clone())
                .or_else(|e| self.err(Some(v.span()), field, e.to_string())),
        }
    }

    fn process(&self, p: ProcessSpec, field: &str) -> Result<Process, ScenarioError> {
        if !(p.arrival_us.is_finite() && (0.0..=1.0e9).contains(&p.arrival_us)) {
            return self.err(
                Some(p.name.span()),
                &format!("{field}.arrival_us"),
                format!("{} is not a time in 0..=10^9 µs", p.arrival_us),
            );
        }
        let program = match (&p.suite, &p.ptx) {
            (Some(s), None) => {
                let Some(kernel) = suite::by_name(s.get_ref()) else {
                    return self.err(
                        Some(s.span()),
                        &format!("{field}.suite"),
                        format!(
                            "no suite kernel `{}` (there are: {})",
                            s.get_ref(),
                            suite::all().iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
                        ),
                    );
                };
                if !p.buffers.is_empty() || !p.commands.is_empty() || !p.checks.is_empty() {
                    return self.err(
                        Some(s.span()),
                        field,
                        "a suite process runs the kernel's own host program: it takes no buffer, command or check".into(),
                    );
                }
                Program::Suite {
                    kernel,
                    size: match p.size {
                        SizeName::Small => suite::Size::Small,
                        SizeName::Large => suite::Size::Large,
                        SizeName::Huge => suite::Size::Huge,
                    },
                    seed: p.seed,
                    target: self.target(kernel, p.target, field, s.span())?,
                }
            }
            (None, Some(ptx)) => Program::Commands(self.commands(&p, ptx, field)?),
            _ => {
                return self.err(
                    Some(p.name.span()),
                    field,
                    "needs exactly one of `suite` (a suite kernel's host program) or `ptx` (a PTX file with buffers and commands)".into(),
                )
            }
        };
        Ok(Process {
            name: p.name.into_inner(),
            arrival_us: p.arrival_us,
            priority: p.priority,
            program,
        })
    }

    /// The committed PTX target of a suite kernel: the one named, which the kernel must be
    /// compiled for, else the kernel's oldest.
    fn target(
        &self,
        k: &dyn suite::Kernel,
        name: Option<TargetName>,
        field: &str,
        span: std::ops::Range<usize>,
    ) -> Result<suite::Target, ScenarioError> {
        let Some(name) = name else {
            return Ok(k.default_target());
        };
        let t = name.target();
        if k.ptx(t).is_some() {
            return Ok(t);
        }
        let own: Vec<&str> = k.sources().iter().map(|(t, _)| t.name()).collect();
        self.err(
            Some(span),
            &format!("{field}.target"),
            format!(
                "suite kernel `{}` has no {} PTX (it is compiled for {})",
                k.name(),
                t.name(),
                own.join(", ")
            ),
        )
    }

    fn commands(
        &self,
        p: &ProcessSpec,
        ptx: &Spanned<String>,
        field: &str,
    ) -> Result<CommandProgram, ScenarioError> {
        let (ptx_file, text) = if let Some(name) = ptx.get_ref().strip_prefix("suite:") {
            let Some(k) = suite::by_name(name) else {
                return self.err(
                    Some(ptx.span()),
                    &format!("{field}.ptx"),
                    format!("no suite kernel `{name}`"),
                );
            };
            let target = self.target(k, p.target, field, ptx.span())?;
            (
                format!("kernels/{0}/{0}.{1}.ptx", k.name(), target.name()),
                k.ptx(target).unwrap_or_default().to_string(),
            )
        } else {
            let bytes = self.read(ptx, &format!("{field}.ptx"), MAX_PTX_BYTES)?;
            let text = String::from_utf8(bytes).or_else(|e| {
                self.err(
                    Some(ptx.span()),
                    &format!("{field}.ptx"),
                    format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
                )
            })?;
            (self.path(ptx.get_ref()).display().to_string(), text)
        };
        let ir = gpu::lower_ptx(&ptx_file, &text)
            .or_else(|e| self.err(Some(ptx.span()), &format!("{field}.ptx"), e.to_string()))?;
        self.warnings
            .borrow_mut()
            .extend(gpu::render_warnings(&ir, &ptx_file, &text));
        let kernels: Vec<String> = ir.kernels.values().map(|k| k.name.clone()).collect();
        let mut buffers: Vec<Buffer> = Vec::new();
        let mut declared = 0u64;
        for (b, spec) in p.buffers.iter().enumerate() {
            let bytes = spec
                .len
                .as_ref()
                .map_or(0, |n| n.get_ref().saturating_mul(spec.ty.size() as u64));
            declared = declared.saturating_add(bytes);
            if declared > MAX_TOTAL_BUFFER_BYTES {
                return self.err(
                    spec.len.as_ref().map(|n| n.span()),
                    &format!("{field}.buffer[{b}].len"),
                    format!(
                        "the process's buffers add up to more than {MAX_TOTAL_BUFFER_BYTES} bytes"
                    ),
                );
            }
        }
        for (b, spec) in p.buffers.iter().enumerate() {
            let f = format!("{field}.buffer[{b}]");
            if buffers.iter().any(|x| x.name == *spec.name.get_ref()) {
                return self.err(
                    Some(spec.name.span()),
                    &format!("{f}.name"),
                    format!("a buffer `{}` already exists", spec.name.get_ref()),
                );
            }
            buffers.push(self.buffer(spec, &f, p.name.get_ref())?);
        }
        let names = Names {
            buffers: &buffers,
            kernels: &kernels,
            ptx_file: ptx.get_ref(),
            loops: 0,
        };
        let commands = self.command_list(&p.commands, &format!("{field}.command"), &names)?;
        let mut checks = Vec::new();
        for (c, spec) in p.checks.iter().enumerate() {
            let f = format!("{field}.check[{c}]");
            let b = names.buffer(self, &spec.buffer, &format!("{f}.buffer"))?;
            let buf = &buffers[b];
            let elems = buf.init.len() / buf.ty.size();
            let set = [
                !spec.values.is_empty(),
                spec.fill.is_some(),
                spec.file.is_some(),
            ];
            if set.iter().filter(|x| **x).count() != 1 {
                return self.err(
                    Some(spec.buffer.span()),
                    &f,
                    "needs exactly one of `values`, `fill` or `file`".into(),
                );
            }
            let expect = if let Some(file) = &spec.file {
                let bytes = self.read(file, &format!("{f}.file"), MAX_DATA_FILE_BYTES)?;
                let npy = file.get_ref().ends_with(".npy");
                let (data, _) = crate::data::from_file(buf.ty, &bytes, npy).or_else(|e| {
                    self.err(Some(file.span()), &format!("{f}.file"), e.to_string())
                })?;
                if data.len() != buf.init.len() {
                    return self.err(
                        Some(file.span()),
                        &format!("{f}.file"),
                        format!(
                            "{} bytes, but buffer `{}` has {}",
                            data.len(),
                            buf.name,
                            buf.init.len()
                        ),
                    );
                }
                Expect::Bytes(data)
            } else if let Some(v) = spec.fill {
                Expect::Fill(v)
            } else {
                if spec.values.len() > elems {
                    return self.err(
                        Some(spec.buffer.span()),
                        &format!("{f}.values"),
                        format!(
                            "{} values for a buffer of {elems} elements",
                            spec.values.len()
                        ),
                    );
                }
                Expect::Values(spec.values.clone())
            };
            let tolerance = match &spec.tolerance {
                None => 0.0,
                Some(t) => {
                    let v = *t.get_ref();
                    // An infinite tolerance passes every value, a NaN one fails every value
                    // that is not exact: neither checks anything.
                    if !(v.is_finite() && v >= 0.0) {
                        return self.err(
                            Some(t.span()),
                            &format!("{f}.tolerance"),
                            format!("{v} is not a tolerance: it must be finite and non-negative"),
                        );
                    }
                    v
                }
            };
            checks.push(Check {
                buffer: b,
                expect,
                tolerance,
            });
        }
        Ok(CommandProgram {
            ptx_file,
            ptx: text,
            buffers,
            commands,
            checks,
        })
    }

    /// Counts `bytes` of buffer `spec` of `process` against the scenario's budget, before
    /// they are allocated.
    fn claim(
        &self,
        bytes: u64,
        spec: &BufferSpec,
        f: &str,
        process: &str,
    ) -> Result<(), ScenarioError> {
        let total = self.buffer_bytes.get().saturating_add(bytes);
        self.budget(total, bytes, spec, f, process)?;
        self.buffer_bytes.set(total);
        Ok(())
    }

    /// An error if `total`, the scenario's buffer bytes up to buffer `spec` of `process`
    /// (`bytes` of them), exceeds [`MAX_SCENARIO_BUFFER_BYTES`].
    fn budget(
        &self,
        total: u64,
        bytes: u64,
        spec: &BufferSpec,
        f: &str,
        process: &str,
    ) -> Result<(), ScenarioError> {
        if total <= MAX_SCENARIO_BUFFER_BYTES {
            return Ok(());
        }
        let at = spec.len.as_ref().map_or(spec.name.span(), |n| n.span());
        self.err(
            Some(at),
            &format!("{f}.len"),
            format!(
                "buffer `{}` of process `{process}` ({bytes} bytes) brings the scenario's buffers to {total} bytes, more than the {MAX_SCENARIO_BUFFER_BYTES} all processes may have together",
                spec.name.get_ref()
            ),
        )
    }

    fn buffer(&self, spec: &BufferSpec, f: &str, process: &str) -> Result<Buffer, ScenarioError> {
        let at = Some(spec.name.span());
        let size = spec.ty.size() as u64;
        let init = if spec.init == Init::File {
            let Some(file) = &spec.file else {
                return self.err(
                    at,
                    &format!("{f}.file"),
                    "init = \"file\" needs a `file`".into(),
                );
            };
            let bytes = self.read(file, &format!("{f}.file"), MAX_DATA_FILE_BYTES)?;
            let npy = file.get_ref().ends_with(".npy");
            let (data, elems) = crate::data::from_file(spec.ty, &bytes, npy)
                .or_else(|e| self.err(Some(file.span()), &format!("{f}.file"), e.to_string()))?;
            if let Some(len) = &spec.len {
                if *len.get_ref() != elems {
                    return self.err(
                        Some(len.span()),
                        &format!("{f}.len"),
                        format!("{} elements declared, the file has {elems}", len.get_ref()),
                    );
                }
            }
            if elems == 0 {
                return self.err(
                    Some(file.span()),
                    &format!("{f}.file"),
                    "the file is empty".into(),
                );
            }
            if data.len() as u64 > MAX_BUFFER_BYTES {
                return self.err(
                    Some(file.span()),
                    &format!("{f}.file"),
                    format!(
                        "{} bytes of data: a buffer may have at most {MAX_BUFFER_BYTES}",
                        data.len()
                    ),
                );
            }
            self.claim(data.len() as u64, spec, f, process)?;
            data
        } else {
            if spec.file.is_some() {
                return self.err(
                    at,
                    &format!("{f}.file"),
                    "a `file` needs init = \"file\"".into(),
                );
            }
            let Some(len) = &spec.len else {
                return self.err(at, &format!("{f}.len"), "missing (elements)".into());
            };
            let n = *len.get_ref();
            if n == 0 || n.saturating_mul(size) > MAX_BUFFER_BYTES {
                return self.err(
                    Some(len.span()),
                    &format!("{f}.len"),
                    format!(
                        "{n} elements of {size} bytes: must be 1 to {} bytes",
                        MAX_BUFFER_BYTES
                    ),
                );
            }
            if spec.init == Init::Random
                && !(spec.min.is_finite() && spec.max.is_finite() && spec.min < spec.max)
            {
                return self.err(
                    at,
                    &format!("{f}.min"),
                    format!(
                        "random values need min < max (got {} and {})",
                        spec.min, spec.max
                    ),
                );
            }
            if spec.init == Init::Values && spec.values.len() as u64 > n {
                return self.err(
                    at,
                    &format!("{f}.values"),
                    format!("{} values for {n} elements", spec.values.len()),
                );
            }
            self.claim(n * size, spec, f, process)?;
            crate::data::generate(
                spec.ty,
                n as usize,
                spec.init,
                spec.value,
                &spec.values,
                (spec.min, spec.max),
                spec.seed,
            )
        };
        Ok(Buffer {
            name: spec.name.get_ref().clone(),
            ty: spec.ty,
            init,
        })
    }

    fn command_list(
        &self,
        specs: &[CommandSpec],
        field: &str,
        names: &Names,
    ) -> Result<Vec<Cmd>, ScenarioError> {
        specs
            .iter()
            .enumerate()
            .map(|(i, c)| self.command(c, &format!("{field}[{i}]"), names))
            .collect()
    }

    fn command(&self, c: &CommandSpec, f: &str, names: &Names) -> Result<Cmd, ScenarioError> {
        let kinds = [
            c.copy.is_some(),
            c.set.is_some(),
            c.launch.is_some(),
            c.repeat.is_some(),
            c.repeat_until_zero.is_some(),
            c.sync.is_some(),
            c.sync_stream.is_some(),
        ];
        let span = c
            .copy
            .as_ref()
            .or(c.set.as_ref())
            .map(|s| s.span())
            .or_else(|| c.launch.as_ref().map(|s| s.span()))
            .or_else(|| c.repeat_until_zero.as_ref().map(|w| w.buffer.span()));
        if kinds.iter().filter(|k| **k).count() != 1 {
            return self.err(
                span,
                f,
                "needs exactly one of copy, set, launch, repeat, repeat_until_zero, sync, sync_stream"
                    .into(),
            );
        }
        let at = span
            .clone()
            .map(|s| self.lines.at(self.file, s.start))
            .unwrap_or_else(|| self.file.to_string());
        let body_needed = c.repeat.is_some() || c.repeat_until_zero.is_some();
        if body_needed == c.body.is_empty() {
            return self.err(
                span,
                &format!("{f}.body"),
                if body_needed {
                    "a repeat needs a body ([[...command.body]])".into()
                } else {
                    "only repeat and repeat_until_zero take a body".into()
                },
            );
        }
        let kind = if let Some(b) = &c.copy {
            let buffer = names.buffer(self, b, &format!("{f}.copy"))?;
            let total = names.buffers[buffer].init.len() as u64;
            let bytes = c.bytes.unwrap_or(total.saturating_sub(c.offset));
            if c.offset.checked_add(bytes).is_none_or(|end| end > total) || bytes == 0 {
                return self.err(
                    Some(b.span()),
                    &format!("{f}.bytes"),
                    format!(
                        "{bytes} bytes at offset {} do not fit buffer `{}` of {total} bytes",
                        c.offset,
                        b.get_ref()
                    ),
                );
            }
            CmdKind::Copy {
                buffer,
                to_device: c.direction == Direction::ToDevice,
                offset: c.offset,
                bytes,
                stream: c.stream,
                blocking: c.blocking,
            }
        } else if let Some(b) = &c.set {
            let buffer = names.buffer(self, b, &format!("{f}.set"))?;
            let buf = &names.buffers[buffer];
            let elems = (buf.init.len() / buf.ty.size()) as u64;
            if c.values.is_empty() || c.index.saturating_add(c.values.len() as u64) > elems {
                return self.err(
                    Some(b.span()),
                    &format!("{f}.values"),
                    format!(
                        "{} values from element {} do not fit buffer `{}` of {elems} elements",
                        c.values.len(),
                        c.index,
                        b.get_ref()
                    ),
                );
            }
            let mut bytes = Vec::new();
            for &v in &c.values {
                buf.ty.encode(v, &mut bytes);
            }
            CmdKind::Set {
                buffer,
                offset: c.index * buf.ty.size() as u64,
                bytes,
            }
        } else if let Some(k) = &c.launch {
            if !names.kernels.contains(k.get_ref()) {
                return self.err(
                    Some(k.span()),
                    &format!("{f}.launch"),
                    format!(
                        "no kernel `{}` in `{}` (it has: {})",
                        k.get_ref(),
                        names.ptx_file,
                        names.kernels.join(", ")
                    ),
                );
            }
            let dims = |v: &[u32], name: &str| -> Result<[u32; 3], ScenarioError> {
                if v.is_empty() || v.len() > 3 {
                    return self.err(
                        Some(k.span()),
                        &format!("{f}.{name}"),
                        "needs 1 to 3 dimensions".into(),
                    );
                }
                let mut d = [1; 3];
                d[..v.len()].copy_from_slice(v);
                Ok(d)
            };
            let mut args = Vec::new();
            for (j, a) in c.args.iter().enumerate() {
                let arg = self.arg(a, &format!("{f}.args[{j}]"), k, names)?;
                if matches!(arg, Arg::LoopIndex(_)) && names.loops == 0 {
                    return self.err(
                        Some(k.span()),
                        &format!("{f}.args[{j}].loop_index"),
                        "not inside a repeat or repeat_until_zero".into(),
                    );
                }
                args.push(arg);
            }
            CmdKind::Launch {
                kernel: k.get_ref().clone(),
                grid: dims(&c.grid, "grid")?,
                block: dims(&c.block, "block")?,
                dynamic_smem: c.dynamic_smem,
                args,
                stream: c.stream,
            }
        } else if let Some(times) = c.repeat {
            CmdKind::Repeat {
                times,
                body: self
                    .command_list(&c.body, &format!("{f}.body"), &names.inner())?
                    .into(),
            }
        } else if let Some(w) = &c.repeat_until_zero {
            let buffer = names.buffer(self, &w.buffer, &format!("{f}.repeat_until_zero.buffer"))?;
            let b = &names.buffers[buffer];
            let width = b.ty.size() as u32;
            let elems = b.init.len() as u64 / u64::from(width);
            if w.index >= elems {
                return self.err(
                    Some(w.buffer.span()),
                    &format!("{f}.repeat_until_zero.index"),
                    format!("element {} of a buffer of {elems}", w.index),
                );
            }
            let max_iterations = c.max_iterations.unwrap_or(1_000_000);
            if max_iterations == 0 {
                return self.err(
                    span,
                    &format!("{f}.max_iterations"),
                    "must be at least 1".into(),
                );
            }
            CmdKind::RepeatUntilZero {
                buffer,
                offset: w.index * u64::from(width),
                width,
                max_iterations,
                body: self
                    .command_list(&c.body, &format!("{f}.body"), &names.inner())?
                    .into(),
            }
        } else if let Some(s) = c.sync_stream {
            CmdKind::Sync { stream: Some(s) }
        } else {
            if c.sync != Some(true) {
                return self.err(span, &format!("{f}.sync"), "write sync = true".into());
            }
            CmdKind::Sync { stream: None }
        };
        Ok(Cmd {
            at,
            field: f.to_string(),
            kind,
        })
    }

    fn arg(
        &self,
        a: &ArgSpec,
        f: &str,
        k: &Spanned<String>,
        names: &Names,
    ) -> Result<Arg, ScenarioError> {
        let set = [
            a.buffer.is_some(),
            a.u32.is_some(),
            a.s32.is_some(),
            a.u64.is_some(),
            a.s64.is_some(),
            a.f32.is_some(),
            a.f64.is_some(),
            a.loop_index.is_some(),
        ];
        if set.iter().filter(|x| **x).count() != 1 {
            return self.err(
                Some(k.span()),
                f,
                "needs exactly one of buffer, u32, s32, u64, s64, f32, f64, loop_index".into(),
            );
        }
        Ok(if let Some(b) = &a.buffer {
            let buffer = names.buffer(self, b, &format!("{f}.buffer"))?;
            let len = names.buffers[buffer].init.len() as u64;
            if a.offset > len {
                return self.err(
                    Some(b.span()),
                    &format!("{f}.offset"),
                    format!("{} bytes past the start of a {len}-byte buffer", a.offset),
                );
            }
            Arg::Buffer {
                buffer,
                offset: a.offset,
            }
        } else if let Some(v) = a.u32 {
            Arg::U32(v)
        } else if let Some(v) = a.s32 {
            Arg::S32(v)
        } else if let Some(v) = a.u64 {
            Arg::U64(v)
        } else if let Some(v) = a.s64 {
            Arg::S64(v)
        } else if let Some(v) = a.f32 {
            Arg::F32(v)
        } else if let Some(t) = a.loop_index {
            Arg::LoopIndex(t)
        } else {
            Arg::F64(a.f64.expect("exactly one is set"))
        })
    }
}

/// Names a command list may refer to.
struct Names<'a> {
    buffers: &'a [Buffer],
    kernels: &'a [String],
    ptx_file: &'a str,
    /// Loops around the list.
    loops: u32,
}

impl<'a> Names<'a> {
    /// The names inside one more loop.
    fn inner(&self) -> Names<'a> {
        Names {
            loops: self.loops + 1,
            ..*self
        }
    }

    fn buffer(&self, cx: &Cx, name: &Spanned<String>, field: &str) -> Result<usize, ScenarioError> {
        match self.buffers.iter().position(|b| b.name == *name.get_ref()) {
            Some(i) => Ok(i),
            None => cx.err(
                Some(name.span()),
                field,
                format!(
                    "no buffer `{}` (this process has: {})",
                    name.get_ref(),
                    if self.buffers.is_empty() {
                        "none".to_string()
                    } else {
                        self.buffers
                            .iter()
                            .map(|b| b.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                ),
            ),
        }
    }
}

impl Scenario {
    /// The host model: the GPU's `[host]` with the scenario's overrides.
    pub fn host_spec(&self, gpu: &HostSpec) -> HostSpec {
        let h = &self.host;
        HostSpec {
            pcie_gbps: h.pcie_gbps.unwrap_or(gpu.pcie_gbps),
            copy_latency_us: h.copy_latency_us.unwrap_or(gpu.copy_latency_us),
            launch_latency_us: h.launch_latency_us.unwrap_or(gpu.launch_latency_us),
            copy_engines: h.copy_engines.unwrap_or(gpu.copy_engines),
        }
    }
}
