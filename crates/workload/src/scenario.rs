//! The scenario format: processes (GPU contexts) with their arrival times and priorities,
//! each running either a suite kernel's own host program or a list of commands over buffers
//! of its own, in TOML.
//!
//! ```toml
//! description = "BFS against a saxpy loop"
//! gpu = "gtx480"                  # a preset or a GPU file (the command line may override)
//! # pipeline = "wd-commit"        # stall | wd-commit | wd-lastcheck | replay-queue | operand-log:
//! #                               # the SM pipeline around accesses that may fault (§6.3)
//! # operand_log_bytes = 16384     # with "operand-log": its bytes per SM (8192..=32768)
//! # (both also in [translation], with TB switching and demand paging's link, costs and
//! # handler: see `crate::translation`)
//!
//! [scheduler]
//! policy = "fcfs"                 # fcfs | npq | ppq | time-slice | dss | mps | mig
//! time_slice_us = 50.0            # the time-slice policy's slice unless it names one
//! intra_sm_sharing = false        # may TBs of different kernels share an SM?
//! # active_kernels = 15           # active-queue entries (default: one per SM; 1..=4096)
//! copy_engine = "fcfs"            # fcfs | priority: the order copies wait in
//! mechanism = "drain"             # how a reserved SM is emptied: drain | flush-strict |
//!                                 # flush-relaxed | baseline | live | points-live |
//!                                 # lightweight | lightweight-tb |
//!                                 # lightweight-in-place | chimera |
//!                                 # chimera-dirty | cs-defer | ctxback |
//!                                 # ctxback-cs-defer | pep | pep-in-place
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
//! [constants]                     # named integers for expressions (below); each may use
//! N = 500                         # the ones written before it
//! BLOCKS = "(N + 127) / 128"
//!
//! [[process]]
//! name = "bfs"
//! suite = "bfs"                   # a suite kernel's host program, verified by its reference
//! size = "small"                  # small | large | huge (suite::Size)
//! seed = 1
//! target = "sm_70"                # sm_70 | sm_80 | sm_90 (default: the kernel's oldest)
//! arrival_us = 0.0
//! priority = 0                    # larger is more important (NPQ)
//! # requests = { kind = "poisson", mean_us = 40.0, count = 8, seed = 1 }
//!                                 # serve requests: one run of the program each (below)
//! # managed = true                # every allocation cudaMallocManaged: what the host
//!                                 # writes migrates on the GPU's first touch, the rest
//!                                 # (outputs) is only allocated (demand paging);
//!                                 # "unwritten": only what the host never writes (its
//!                                 # outputs, a kernel's own heap), nothing migrates
//!
//! [[process]]
//! name = "saxpy"
//! ptx = "../examples/saxpy/saxpy.ptx"   # relative to this file; "suite:bfs" is the suite
//!                                       # kernel's committed PTX for `target`
//! arrival_us = 20.0
//! constants = { HALF = "N / 2" }        # this process's own, beside [constants]
//!
//! [[process.stream]]              # a stream's priority (cudaStreamCreateWithPriority)
//! id = 1
//! priority = 5                    # 0 (default) to 5, larger more important (CUDA's -5)
//!
//! [[process.buffer]]
//! name = "x"
//! type = "f32"                    # u8 u16 u32 u64 s32 s64 f32 f64
//! len = "N"                       # at most 1 GiB; 4 GiB for all processes together
//! init = "random"                 # zero | iota | fill (value) | values | random (min, max, seed)
//! min = 0.0                       #   | file (a .npy file, or raw little-endian bytes)
//! max = 1.0
//! # managed = true                # cudaMallocManaged: starts on the host, migrated on the
//!                                 # GPU's first touch (demand paging; below)
//!
//! [[process.texture]]             # a texture object over a buffer (cudaCreateTextureObject)
//! name = "img"                    # passed as { texture = "img" } to a 64-bit parameter
//! buffer = "x"
//! # offset = 0                    # bytes into the buffer where texel (0, 0, 0) starts
//! format = "f32"                  # channel type: f32 f16 u8 s8 u16 s16 u32 s32
//! channels = 1                    # 1, 2 or 4
//! width = 16                      # texels; height, depth (default 1) and layers (0)
//! height = 16
//! # pitch = 0                     # bytes per row, 0 = packed
//! address = "clamp"               # clamp | border | wrap | mirror, or one per dimension
//! filter = "linear"               # point | linear
//! read = "element"                # element | normalized-float
//! normalized = false              # coordinates in [0, 1) span the texture
//!
//! [[process.command]]             # copies are blocking (cudaMemcpy) unless blocking = false
//! copy = "x"                      # direction = "to_device" (default) | "to_host"
//! # offset = "4 * HALF"           # bytes into the buffer, and how many (default: the rest)
//! # bytes = "4 * (N - HALF)"
//!
//! [[process.command]]
//! launch = "saxpy"                # a kernel of the process's PTX file: its PTX name, or
//!                                 # its C++ name (`vecadd` for _Z6vecaddPfS_S_i) when no
//!                                 # other kernel of the file has that name
//! grid = ["BLOCKS"]               # 1 to 3 dimensions, each at least 1
//! block = [128]
//! args = [{ buffer = "x" }, { buffer = "y", offset = 16 }, { f32 = 2.0 }, { u32 = "N" }]
//! stream = 0                      # streams run in order; different streams overlap
//! # dynamic_smem = 0              # bytes of dynamic shared memory
//!
//! [[process.command]]
//! repeat = { times = 10, as = "t" }  # the body, 10 times, its index (from 0) named `t`
//!                                 # (or `repeat = 10`, `repeat = "N / 50"`); run lazily: at
//!                                 # most 1024 copies and launches of a process wait
//!                                 # unfinished, then the host blocks as on a full CUDA
//!                                 # launch queue
//! [[process.command.body]]
//! launch = "saxpy"
//! grid = ["(N - 50 * t + 127) / 128"]
//! block = [128]
//! args = [{ buffer = "x", offset = "200 * t" }, { buffer = "y", offset = "200 * t" },
//!         { f32 = 2.0 }, { u32 = "N - 50 * t" }]
//! # { loop_index = "s32" } is the innermost enclosing loop's index, named or not
//!
//! [[process.command]]
//! repeat_until_zero = { buffer = "changed", index = 0, as = "level" }  # BFS's host loop:
//! max_iterations = 10000          # the body, then a 1-element device→host copy of the
//!                                 # word; `level` counts the iterations from 0
//!
//! [[process.command]]
//! set = "changed"                 # host-side: write elements of a buffer's host copy
//! index = 0                       # from this element (then `copy` it to the device)
//! values = [0]
//!
//! [[process.command]]
//! sync = true                     # wait for every stream (or sync_stream = 1)
//!
//! [[process.command]]
//! dump = "y"                      # y's device contents now, to a NumPy .npy file
//! file = "out/y.npy"              # default "y.npy"; relative to this file (or --dump-dir)
//! # type = "u32"                  # default the buffer's; its size must divide the buffer
//! # shape = ["N / 10", 10]        # default [elements]; constants only; product = elements
//! # stream = 0                    # the stream whose work before it the dump waits for
//!
//! [[process.check]]               # compared with device memory when the process ends
//! buffer = "y"
//! values = [1.0, 3.0]             # a prefix; or fill = 2.0; or file = "y.npy"
//! tolerance = 1e-6                # relative, floats only; finite, >= 0
//! # abs_tolerance = 1e-9          # absolute, floats only; finite, >= 0
//! # ulps = 4                      # units in the last place of the buffer's type
//! ```
//!
//! **Requests** ([`crate::arrivals`]): a process with `requests` serves them, one run of
//! its program a request, in arrival order; a request that arrives while the one before it
//! runs waits, and its latency (arrival to the end of its run) counts the wait. The kinds:
//! `periodic` (`every_us`, `count`; the first at `arrival_us`), `poisson` (`mean_us`,
//! `count`, `seed`: exponential gaps, the first a gap after `arrival_us`) and `trace`
//! (`at_us`, offsets from `arrival_us` in order). Each run starts with fresh memory, as
//! under replay, which it cannot be combined with. The report gives the latencies' p50,
//! p95, p99, p99.9 and maximum, and every request.
//!
//! **A setup** splits a serving process into what it does once and what each request does,
//! as an inference server uploads its weights once: a `ptx` process's `[[process.setup]]`
//! commands (written as `[[process.command]]`s) run once at `arrival_us`, and each request
//! then runs its `[[process.command]]`s on the same buffers, its checks made after each
//! request; a suite process with `warm_up = true` runs its whole host program once at
//! `arrival_us` (input copies, launches, read-back, the check against its CPU reference),
//! and each request then runs the program's launches again on the same buffers and is
//! checked to leave every buffer exactly as that run did. A request that arrives before
//! the setup has ended waits for it, and its latency counts the wait. Both need `requests`.
//!
//! **Stream priorities** order TB dispatch within a process, and preempt nothing (CUDA's
//! driver API, `cuStreamCreateWithPriority`: priorities are a hint to run higher-priority
//! work first "when possible, but do not preempt already-running work"). When a kernel on a
//! stream of higher priority has TBs to issue, every SM running a kernel of the same
//! process on a stream of lower priority that still has TBs to issue stops taking them,
//! lets its running TBs finish (whatever the mechanism) and is then set up for the
//! higher-priority kernel; an SM the policy gives the process goes to its highest-priority
//! kernel with TBs to issue ([`sched::Tables::assign`]). Between processes the policy
//! decides, as before. The model works an SM at a time: the first TB of the preferred
//! kernel starts when the SM's last running TB has finished, where the hardware could
//! start it as soon as enough of them had. Each stream is given a priority once.
//!
//! A float passes a check when it equals the expected value (NaN matching NaN), or is
//! within any one of the tolerances given: `|got − want| ≤ tolerance × |want|`,
//! `|got − want| ≤ abs_tolerance`, or at most `ulps` representable values of the buffer's
//! type (f32 or f64) apart. Integers must be equal.
//!
//! A **dump** is a blocking device→host copy of the whole buffer on its stream (default 0),
//! timed like any copy and counted among the process's copies: it sees what the work before
//! it in that stream (and, after a `sync`, in every stream) left in device memory. Its bytes
//! go to a `.npy` file (format 1.0, C order, little-endian, data 64 bytes aligned), not to
//! the buffer's host copy, so a later `copy` to the device sends what it would have sent
//! without the dump. The files are written when the run ends, whether or not the checks
//! passed (a run that stops with an error writes none), each to a temporary name and then
//! renamed; a dump run again (in a loop, or under replay) leaves its latest contents. An
//! unknown buffer, a `type` whose size does not divide the buffer's bytes, a `shape` whose
//! product is not the element count, or a `file` another dump already writes is an error
//! when the file is loaded, naming the line and field.
//!
//! **Integers** (`len`, a copy's `offset` and `bytes`, a set's `index`, `grid`, `block`,
//! `dynamic_smem`, integer arguments, a repeat's count) are TOML integers or expressions in
//! strings ([`crate::expr`]): `+ - * / %` (C's truncating division), parentheses, `min(..)`
//! and `max(..)`, over the constants and the indices of the enclosing loops, in `i64` with
//! every operation checked. An overflow, a division by zero, an unknown name, a value out of
//! its field's range (a negative or zero grid or block dimension, a negative `u32`, a copy
//! past its buffer) is an error naming the file, line, column and field, and the loop
//! indices at which it happens. It is found when the file is loaded wherever it can be: the
//! loops are followed (up to [`LOAD_CHECK_BUDGET`] commands a process) with their counts,
//! and a `repeat_until_zero`'s first iteration; otherwise when the command runs, naming it.
//! A loop's name (`as`) must not be a constant's or an enclosing loop's.
//!
//! **Arguments** are checked against the kernel's parameters when the file is loaded: one
//! argument a parameter, each of a kind its PTX type takes: `buffer` (a 64-bit pointer) a
//! 64-bit integer parameter (`.u64`, `.s64`, `.b64`), `u32`/`s32` a 32-bit integer one,
//! `u64`/`s64`/`loop_index` of that width, `f32` `.f32` or `.b32`, `f64` `.f64` or `.b64`
//! (signedness is not compared: NVRTC declares `int` parameters `.u32`), `texture` (a
//! texture object's handle, `cudaTextureObject_t`) a 64-bit integer one. An error names the
//! argument's line and the parameter. `offset` belongs to `buffer` arguments only, and a
//! command takes only its own kind's keys: any other is an error.
//!
//! **Policies and mechanisms** are written as on the command line's `--policy` and
//! `--mechanism`, in kebab-case ([`crate::choice`]): the name alone takes every parameter's
//! default; a table tagged by `kind` (inline as above, or a `[scheduler.mechanism]`
//! section) sets parameters, and a parameter the choice does not have, or a value out of
//! range, is an error naming it. The parameters:
//!
//! | choice | parameter | default |
//! | --- | --- | --- |
//! | `chimera`, `chimera-dirty` | `deadline_us`: the preemption deadline, µs (papers/li-pep §4 uses 5, 10, 15) | 15 |
//! | `pep`, `pep-in-place` | `predicted_launch_us`: the time from a launch call to its arrival PEP assumes, µs (papers/li-pep §3.2) | 20 |
//! | `lightweight`, `lightweight-tb`, `lightweight-in-place` | `compressor_latency`: core cycles through the register compressor | 2 |
//! | `time-slice` | `slice_us`: each context's turn, µs | `time_slice_us` |
//! | `ppq` | `access`: `shared` (idle SMs go to lower priorities too) or `exclusive` (not while a higher priority is active), papers/tanasic-thesis §5.3.3 | `shared` |
//! | `dss` | `tokens`: every process's SM budget, 1 to 65536 (papers/tanasic-thesis §5.2.4) | by priority: ⌊SMs × w / W⌋ for weight w = 1 + max(priority, 0) (⌊SMs / processes⌋ when the priorities are equal), the SMs left over one each to the first processes to become active |
//! | `mps` | `percentage`: every client's active-thread percentage, (0, 100]: each process holds at most that share of the SMs, rounded up | 100 |
//! | `smk` | `epoch`: warp instructions per epoch per scheduler, over all kernels; `ipc`: each process's IPC alone, in process order (the quotas' ratio) | 1000; equal quotas |
//! | `warped-slicer` | `warm_up`, `sample`: core cycles of the profile on the SMs before and during its sample | 2000, 5000 |
//! | `maestro` | `epoch`: core cycles each TB combination runs (its second half measured); `ipc`: each process's IPC alone (the search scores harmonic speedup over them) | 10000; summed IPC |
//! | `ccbp` | `warm_up`, `sample`: as `warped-slicer`'s; `prior_lsk`: the priority of latency-sensitive kernels in CCBP's Algorithm 1, (0, 1000] (papers/lin-thesis §4.5.2) | 2000, 5000, 1 |
//! | `fixed` | `tbs` (required): TBs per SM of each process's kernels, in process order; `noc`: requests towards the L2 (misses, stores, atomics) each process's kernels may send per 200 core cycles from each SM (CCBP's issue rate controllers, papers/lin-thesis §4.5.1) | `noc`: not limited |
//! | `mig` | `instances`: equal instances of `⌊SMs / instances⌋` consecutive SMs, 1 to 1024 (at most one an SM); process `i` runs only in instance `i mod instances`; the SMs left over stay idle; each instance gets an equal share of the DRAM channels with their L2 slices ([`sched::mig`]) | one per process |
//!
//! The snake_case spellings of earlier scenario files (`flush_strict`, `points_live`,
//! `lightweight_tb`, `lightweight_in_place`, `time_slice`) are deprecated aliases: still
//! read, never written.
//!
//! **Textures** (`[[process.texture]]`, a `ptx` process's) are texture objects over its
//! buffers, made once the buffers are allocated (holding their initial contents), before
//! the first command. A texture whose texels (from `offset`, `pitch` rows) do not fit its
//! buffer, or whose sampler the hardware does not allow (a format and filter that do not go
//! together, 3 channels, addressing modes for more dimensions than it has), is an error
//! when the file is loaded, naming the field ([`gpu::texture::TextureDesc::validate`]).
//!
//! A **launch spec** (`switchyard run FILE.ptx --spec SPEC.toml`) is a scenario of one
//! `ptx` process, read by [`parse_spec`]: `run` executes its commands one after another on
//! the GPU alone, on the PTX file it is given (which replaces any `ptx` the process names),
//! so its cycles are the launches' own. What only the host model and a scheduler give
//! meaning to (`gpu`, `[scheduler]`, `[host]`, `[limits]`, `replay`, translation, a
//! process's arrival, priority, streams, requests or setup) is an error there naming the
//! key. The same file runs under `switchyard scenario` when its process names its `ptx`.
//!
//! Launches go through the kernel management path of the host model ([`crate::system`]):
//! a launch call reaches the GPU after the launch latency (and after the work before it in
//! its stream), copies cross the PCIe link through the copy engines first come, first
//! served. Every problem found is an error naming the file, line and column and the field
//! (`process[1].command[2].launch`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use gpu::config::HostSpec;
use sched::{FrameworkConfig, PolicyKind};
use serde::Deserialize;
use toml::Spanned;

use crate::data::{ElemType, Init};
use crate::expr::{EvalError, Expr};
use gpu::{DevPtr, KernelArg};

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
    /// The SM pipeline organisation around accesses that may fault (papers/tanasic-thesis
    /// §6.3; `memsys::Pipeline`): overrides the GPU's `[memory.translation]` `pipeline`.
    /// Without translation nothing can fault and it changes nothing.
    pub pipeline: Option<Spanned<String>>,
    /// The operand log's bytes per SM (`pipeline = "operand-log"`, papers/tanasic-thesis
    /// §6.3.3): overrides the GPU's `[memory.translation]` `operand_log_bytes` (8192 to
    /// 32768).
    pub operand_log_bytes: Option<Spanned<u32>>,
    /// `[translation]`: the fields of the GPU's `[memory.translation]` the scenario changes
    /// ([`crate::translation`]); `pipeline` and `operand_log_bytes` may be given here or
    /// at the top level, not both.
    #[serde(default)]
    pub translation: crate::translation::TranslationSection,
    /// Named integers every process's expressions may use ([`crate::expr`]).
    #[serde(default)]
    pub constants: BTreeMap<String, Spanned<toml::Value>>,
    #[serde(default, rename = "process")]
    pub processes: Vec<ProcessSpec>,
}

/// The most dimensions a dump's `shape` may have (NumPy's limit in its older versions).
pub const MAX_DUMP_DIMENSIONS: usize = 32;

/// The most runs `replay` may ask of every process.
pub const MAX_REPLAY: u32 = 1000;

/// The pipeline organisations a scenario may name (`pipeline = "..."`).
const PIPELINES: [memsys::Pipeline; 5] = [
    memsys::Pipeline::Stall,
    memsys::Pipeline::WdCommit,
    memsys::Pipeline::WdLastcheck,
    memsys::Pipeline::ReplayQueue,
    memsys::Pipeline::OperandLog,
];

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
    /// Named integers of this process's expressions (beside the scenario's).
    #[serde(default)]
    pub constants: BTreeMap<String, Spanned<toml::Value>>,
    #[serde(default, rename = "buffer")]
    pub buffers: Vec<BufferSpec>,
    /// Texture objects over its buffers (`cudaCreateTextureObject`), passed to kernels as
    /// `{ texture = "name" }` arguments.
    #[serde(default, rename = "texture")]
    pub textures: Vec<Spanned<TextureSpec>>,
    #[serde(default, rename = "command")]
    pub commands: Vec<CommandSpec>,
    #[serde(default, rename = "check")]
    pub checks: Vec<CheckSpec>,
    /// Priorities of its streams (CUDA's `cudaStreamCreateWithPriority`).
    #[serde(default, rename = "stream")]
    pub streams: Vec<StreamSpec>,
    /// When its requests arrive ([`crate::arrivals`]): each runs its program once.
    pub requests: Option<Spanned<toml::Value>>,
    /// With `requests`, a `ptx` process's commands run once at its arrival, before it
    /// serves requests; its `command`s are then the body each request runs, on the same
    /// buffers ([`CommandProgram::setup`]).
    #[serde(default, rename = "setup")]
    pub setup: Vec<CommandSpec>,
    /// With `requests`, a suite process's host program runs once at its arrival (the
    /// setup: inputs copied, launches run, results checked), and each request runs its
    /// launches again on the same buffers ([`Program::Suite`]'s `warm_up`).
    pub warm_up: Option<Spanned<bool>>,
    /// Which of a suite process's memory is managed (`cudaMallocManaged`): `true`,
    /// `false`, `"all"` or `"unwritten"` ([`Program::Suite`]'s `managed`, [`Managed`]).
    pub managed: Option<Spanned<toml::Value>>,
}

/// A stream with a priority: `[[process.stream]]` with `id` and `priority`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamSpec {
    pub id: Spanned<u32>,
    /// 0 (the default) to [`MAX_STREAM_PRIORITY`], larger more important.
    pub priority: Spanned<i64>,
}

/// The highest stream priority. CUDA numbers stream priorities the other way, from 0 (the
/// default, the least) down to a device's greatest (`cudaDeviceGetStreamPriorityRange`):
/// priority `p` here is CUDA's `-p`.
pub const MAX_STREAM_PRIORITY: i64 = 5;

fn one() -> u64 {
    1
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BufferSpec {
    pub name: Spanned<String>,
    #[serde(rename = "type")]
    pub ty: ElemType,
    /// Elements (for `init = "file"`, taken from the file when left out): an integer or
    /// an expression over constants.
    pub len: Option<Spanned<toml::Value>>,
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
    /// Managed memory (`cudaMallocManaged`), a boolean: see [`Buffer::managed`].
    pub managed: Option<Spanned<toml::Value>>,
}

fn unit() -> f64 {
    1.0
}

/// A texture object over (part of) a buffer, with its sampler: `[[process.texture]]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextureSpec {
    pub name: Spanned<String>,
    pub buffer: Spanned<String>,
    /// Bytes into the buffer where texel (0, 0, 0) starts.
    #[serde(default)]
    pub offset: u64,
    /// The channel type (f32 f16 u8 s8 u16 s16 u32 s32).
    #[serde(default = "f32_texels")]
    pub format: gpu::texture::TexelType,
    #[serde(default = "one_u32")]
    pub channels: u32,
    pub width: u32,
    #[serde(default = "one_u32")]
    pub height: u32,
    #[serde(default = "one_u32")]
    pub depth: u32,
    #[serde(default)]
    pub layers: u32,
    /// Bytes per row; 0 for rows packed one after another.
    #[serde(default)]
    pub pitch: u64,
    #[serde(default)]
    pub address: Addressing,
    #[serde(default)]
    pub filter: gpu::texture::Filter,
    #[serde(default)]
    pub read: gpu::texture::ReadMode,
    /// Coordinates in [0, 1) span the texture (else they are in texels).
    #[serde(default)]
    pub normalized: bool,
}

fn f32_texels() -> gpu::texture::TexelType {
    gpu::texture::TexelType::F32
}

fn one_u32() -> u32 {
    1
}

/// One addressing mode for every dimension, or one per dimension (x, y, z).
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Addressing {
    All(gpu::texture::AddressMode),
    PerDim(Vec<gpu::texture::AddressMode>),
}

impl Default for Addressing {
    fn default() -> Self {
        Addressing::All(gpu::texture::AddressMode::Clamp)
    }
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    #[default]
    ToDevice,
    ToHost,
}

/// One kernel argument: exactly one of the kinds (`buffer`, an integer type, a float type,
/// `loop_index`); integers are TOML integers or expressions ([`crate::expr`]).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgSpec {
    pub buffer: Option<Spanned<String>>,
    /// A texture object's handle (`cudaTextureObject_t`, a 64-bit parameter).
    pub texture: Option<Spanned<String>>,
    /// Bytes added to the buffer's address (buffers only).
    pub offset: Option<Spanned<toml::Value>>,
    pub u32: Option<Spanned<toml::Value>>,
    pub s32: Option<Spanned<toml::Value>>,
    pub u64: Option<Spanned<toml::Value>>,
    pub s64: Option<Spanned<toml::Value>>,
    pub f32: Option<f32>,
    pub f64: Option<f64>,
    /// The iteration (from 0) of the innermost enclosing repeat, as this type.
    pub loop_index: Option<IntType>,
}

/// The integer type of an integer argument.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum IntType {
    U32,
    S32,
    U64,
    S64,
}

impl IntType {
    fn name(self) -> &'static str {
        match self {
            IntType::U32 => "u32",
            IntType::S32 => "s32",
            IntType::U64 => "u64",
            IntType::S64 => "s64",
        }
    }

    fn range(self) -> std::ops::RangeInclusive<i64> {
        match self {
            IntType::U32 => 0..=i64::from(u32::MAX),
            IntType::S32 => i64::from(i32::MIN)..=i64::from(i32::MAX),
            IntType::U64 => 0..=i64::MAX,
            IntType::S64 => i64::MIN..=i64::MAX,
        }
    }

    fn bytes(self) -> u32 {
        match self {
            IntType::U32 | IntType::S32 => 4,
            IntType::U64 | IntType::S64 => 8,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WordRef {
    pub buffer: Spanned<String>,
    #[serde(default)]
    pub index: u64,
    /// The name of the loop's index (from 0) in expressions of its body.
    #[serde(rename = "as")]
    pub as_name: Option<Spanned<String>>,
}

/// One command: exactly one of `copy`, `set`, `launch`, `repeat`, `repeat_until_zero`,
/// `sync`, `sync_stream`, `dump`, with only the keys that kind takes. Integers (`offset`,
/// `bytes`, `index`, `grid`, `block`, `dynamic_smem`, a repeat's count, a dump's `shape`)
/// are TOML integers or expressions ([`crate::expr`]).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandSpec {
    pub copy: Option<Spanned<String>>,
    /// Host-side writes of `values` into a buffer's host copy, from element `index`.
    pub set: Option<Spanned<String>>,
    pub index: Option<Spanned<toml::Value>>,
    pub values: Option<Spanned<Vec<f64>>>,
    pub direction: Option<Spanned<Direction>>,
    /// Bytes into the buffer, and how many (default: the rest of it).
    pub offset: Option<Spanned<toml::Value>>,
    pub bytes: Option<Spanned<toml::Value>>,
    /// Copies: wait for completion (cudaMemcpy) or not (cudaMemcpyAsync); default true.
    pub blocking: Option<Spanned<bool>>,
    pub launch: Option<Spanned<String>>,
    pub grid: Option<Spanned<Vec<Spanned<toml::Value>>>>,
    pub block: Option<Spanned<Vec<Spanned<toml::Value>>>>,
    pub dynamic_smem: Option<Spanned<toml::Value>>,
    pub args: Option<Spanned<Vec<Spanned<ArgSpec>>>>,
    /// A count, an expression, or `{ times = ..., as = "name" }` naming the loop's index.
    pub repeat: Option<Spanned<toml::Value>>,
    pub repeat_until_zero: Option<WordRef>,
    pub max_iterations: Option<Spanned<u64>>,
    pub body: Option<Vec<CommandSpec>>,
    pub sync: Option<Spanned<bool>>,
    pub sync_stream: Option<Spanned<u32>>,
    pub stream: Option<Spanned<u32>>,
    /// Writes a buffer's device contents to a `.npy` file (`file`, default `<buffer>.npy`),
    /// as elements of `type` (default the buffer's) in `shape` (default one dimension).
    pub dump: Option<Spanned<String>>,
    pub file: Option<Spanned<String>>,
    #[serde(rename = "type")]
    pub ty: Option<Spanned<ElemType>>,
    pub shape: Option<Spanned<Vec<Spanned<toml::Value>>>>,
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
    /// Absolute, for floats: finite and non-negative (0 when left out).
    pub abs_tolerance: Option<Spanned<f64>>,
    /// Units in the last place, for floats: 0 to [`MAX_ULPS`] (0 when left out).
    pub ulps: Option<Spanned<i64>>,
}

/// At most this many names in a list inside a message; the rest are counted.
const NAMES_IN_A_MESSAGE: usize = 12;

/// `names` joined by commas for a message: the first dozen, then how many more, so that a
/// module of 58,000 kernels does not make a message of 700 KB.
pub fn name_list<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let mut shown = Vec::new();
    let mut more = 0usize;
    for n in names {
        if shown.len() < NAMES_IN_A_MESSAGE {
            shown.push(n);
        } else {
            more += 1;
        }
    }
    let mut s = shown.join(", ");
    if more > 0 {
        s.push_str(&format!(" and {more} more"));
    }
    s
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
    /// What the scenario changes in the GPU's `[memory.translation]` (its `[translation]`
    /// table and the top-level `pipeline` and `operand_log_bytes`).
    pub translation: crate::translation::TranslationOverrides,
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
    /// The streams given a priority (`(stream, priority)`, larger more important); the
    /// others have 0.
    pub stream_priorities: Vec<(u32, i32)>,
    /// Its requests ([`crate::arrivals`]): `None`, its program runs once (or under replay).
    pub requests: Option<crate::arrivals::Arrivals>,
}

impl Process {
    /// A suite kernel's own host program as a process of its name, arriving at once with
    /// priority 0 and no requests, at the kernel's default target, its memory ordinary.
    pub fn suite(kernel: &'static dyn suite::Kernel, size: suite::Size, seed: u64) -> Process {
        Process {
            name: kernel.name().to_string(),
            arrival_us: 0.0,
            priority: 0,
            program: Program::Suite {
                kernel,
                size,
                seed,
                target: kernel.default_target(),
                warm_up: false,
                managed: Managed::Off,
            },
            stream_priorities: Vec::new(),
            requests: None,
        }
    }
}

#[derive(Clone)]
pub enum Program {
    /// A suite kernel's own host program, verified against its CPU reference.
    Suite {
        kernel: &'static dyn suite::Kernel,
        size: suite::Size,
        seed: u64,
        target: suite::Target,
        /// Serving requests: the program runs once as the process's setup, and each
        /// request replays its launches on the same buffers, checked to leave them as the
        /// setup left them ([`crate::program::ServedSuite`]).
        warm_up: bool,
        /// Which allocations of the program are managed (`cudaMallocManaged`,
        /// [`crate::program::SuiteHost::managed`]): where the GPU pages on demand, what the
        /// host wrote migrates on the GPU's first touch and the rest (its outputs, its own
        /// heap) is only allocated; elsewhere it is ordinary device memory.
        managed: Managed,
    },
    /// Commands over buffers, on a PTX module. Shared: the run, each replay and the run
    /// alone start from the same initial contents, never a copy of them.
    Commands(Arc<CommandProgram>),
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Program::Suite {
                kernel,
                size,
                seed,
                target,
                warm_up,
                managed,
            } => f
                .debug_struct("Suite")
                .field("kernel", &kernel.name())
                .field("size", size)
                .field("seed", seed)
                .field("target", target)
                .field("warm_up", warm_up)
                .field("managed", managed)
                .finish(),
            Program::Commands(c) => f.debug_tuple("Commands").field(c).finish(),
        }
    }
}

/// Which allocations of a suite process's host program are managed memory
/// (`cudaMallocManaged`); a scenario's `managed = true | false | "all" | "unwritten"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Managed {
    /// Ordinary device memory (`managed = false`, the default).
    #[default]
    Off,
    /// Every allocation (`managed = true` or `"all"`): what the host writes migrates on
    /// the GPU's first touch.
    All,
    /// Only what the program allocates zeroed and never writes (`suite::Device::
    /// alloc_zeroed`: its outputs and its own heap); its inputs are copied to device memory
    /// as usual, so nothing migrates (papers/tanasic-thesis §6.5.4's setup for Figure 6.14:
    /// "There is no page migrations in this experiment").
    Unwritten,
}

impl Managed {
    pub const ALL: [Managed; 3] = [Managed::Off, Managed::All, Managed::Unwritten];

    pub fn name(self) -> &'static str {
        match self {
            Managed::Off => "off",
            Managed::All => "all",
            Managed::Unwritten => "unwritten",
        }
    }

    pub fn is_off(self) -> bool {
        self == Managed::Off
    }
}

/// A PTX module, its buffers, commands and checks.
#[derive(Clone, Debug)]
pub struct CommandProgram {
    pub ptx_file: String,
    pub ptx: String,
    pub buffers: Vec<Buffer>,
    /// Texture objects over the buffers, created once they are allocated.
    pub textures: Vec<Texture>,
    /// Run once, before the process serves its first request (`[[process.setup]]`; only
    /// with `requests`): then each request runs `commands` on the same buffers, and the
    /// checks are made after each. Empty: each request runs the whole program afresh.
    pub setup: Vec<Cmd>,
    pub commands: Vec<Cmd>,
    pub checks: Vec<Check>,
    /// Where the relative `file`s of its dumps go: the scenario file's directory, or the
    /// one [`Scenario::set_dump_dir`] names.
    pub dump_dir: PathBuf,
}

impl CommandProgram {
    /// Where a dump of `file` (as written) is written.
    pub fn dump_path(&self, file: &str) -> PathBuf {
        self.dump_dir.join(file)
    }
}

/// A buffer with its initial contents.
#[derive(Clone, Debug)]
pub struct Buffer {
    pub name: String,
    pub ty: ElemType,
    pub init: Vec<u8>,
    /// `managed = true` (`cudaMallocManaged`): where the GPU has demand paging
    /// (`[memory.translation]` enabled with `[memory.translation.faults]`,
    /// `memsys::fault`), the buffer starts on the host and each region migrates on the
    /// GPU's first touch. Its `init` says whether the host wrote it: any but `zero` is host
    /// data, migrated at the per-fault transfer cost; `init = "zero"` (the default) is
    /// memory the host never wrote (an output, say), mapped at the allocation-only cost
    /// (papers/tanasic-thesis §6.4.2, §6.5.3). Copies into it are timed as today and leave
    /// its pages where they are. Without translation it is ordinary device memory.
    pub managed: Option<memsys::Populate>,
}

/// A texture object over a buffer.
#[derive(Clone, Debug)]
pub struct Texture {
    pub name: String,
    pub buffer: usize,
    /// Its descriptor with `base` the byte offset into the buffer (the buffer's address is
    /// added when it is created).
    pub desc: gpu::texture::TextureDesc,
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
        /// Bytes into the buffer, and how many (`None`: the rest of it).
        offset: IntExpr,
        bytes: Option<IntExpr>,
        stream: u32,
        blocking: bool,
    },
    /// Writes encoded values into a buffer's host copy from element `index`.
    Set {
        buffer: usize,
        index: IntExpr,
        bytes: Vec<u8>,
    },
    Launch {
        /// The kernel's name in the PTX (mangled).
        kernel: String,
        grid: Box<[IntExpr; 3]>,
        block: Box<[IntExpr; 3]>,
        dynamic_smem: IntExpr,
        args: Vec<Arg>,
        stream: u32,
    },
    Repeat {
        times: IntExpr,
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
    /// A blocking device→host copy of the whole buffer on `stream`, whose bytes go to a
    /// `.npy` file rather than to the buffer's host copy.
    Dump {
        buffer: usize,
        /// The element type and shape the file declares (their product covers the buffer).
        ty: ElemType,
        shape: Vec<u64>,
        /// The path as written: relative to [`CommandProgram::dump_dir`] unless absolute.
        file: String,
        stream: u32,
    },
}

/// Why a value written in the file has none here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueError {
    /// It reads a loop index not known yet (checking a file before it runs).
    Unknown,
    /// Out of range, an overflow or a division by zero: where and what.
    Bad(ScenarioError),
}

/// An integer written in the file ([`crate::expr`]), with where, for errors.
#[derive(Clone, Debug)]
pub struct IntExpr {
    pub expr: Expr,
    /// As written.
    pub text: String,
    /// `file:line:col` and the field path.
    pub at: String,
    pub field: String,
}

impl IntExpr {
    /// Its value, with `loops[d]` the index of the enclosing loop at depth `d`, which must
    /// be in `range` (`what` says what it is, for the error).
    pub fn value(
        &self,
        loops: &[Option<i64>],
        range: std::ops::RangeInclusive<i64>,
        what: &str,
    ) -> Result<i64, ValueError> {
        let v = self.expr.eval(loops).map_err(|e| match e {
            EvalError::Bad(why) => self.bad(loops, format!(": {why}")),
            EvalError::Unknown => ValueError::Unknown,
        })?;
        if !range.contains(&v) {
            let (lo, hi) = (*range.start(), *range.end());
            let bound = if hi == i64::MAX {
                format!("at least {lo}")
            } else {
                format!("in {lo}..={hi}")
            };
            return Err(self.bad_value(loops, v, format!("{what} must be {bound}")));
        }
        Ok(v)
    }

    /// An error about its value `v` (`why`).
    fn bad_value(&self, loops: &[Option<i64>], v: i64, why: String) -> ValueError {
        if self.text == v.to_string() {
            self.bad(loops, format!(": {why}"))
        } else {
            self.bad(loops, format!(" is {v}: {why}"))
        }
    }

    /// An error about this value where the loops stand (`t = 3, i = 0`).
    fn bad(&self, loops: &[Option<i64>], why: String) -> ValueError {
        let at: Vec<String> = self
            .expr
            .loops()
            .iter()
            .filter_map(|&(d, name)| Some(format!("{name} = {}", loops.get(d).copied()??)))
            .collect();
        let with = if at.is_empty() {
            String::new()
        } else {
            format!(" (with {})", at.join(", "))
        };
        // An integer as it is; an expression quoted.
        let shown = if self.text.parse::<i64>().is_ok() {
            self.text.clone()
        } else {
            format!("`{}`", self.text)
        };
        ValueError::Bad(ScenarioError {
            location: self.at.clone(),
            field: self.field.clone(),
            what: format!("{shown}{with}{why}"),
        })
    }

    fn lit(v: i64, at: &str, field: &str) -> IntExpr {
        IntExpr {
            expr: Expr::Lit(v),
            text: v.to_string(),
            at: at.to_string(),
            field: field.to_string(),
        }
    }
}

#[derive(Clone, Debug)]
pub enum Arg {
    /// A buffer's address plus `offset` bytes.
    Buffer {
        buffer: usize,
        offset: IntExpr,
    },
    Int {
        ty: IntType,
        value: IntExpr,
    },
    F32(f32),
    F64(f64),
    /// A texture object's handle.
    Texture(usize),
}

/// A launch's values where the loops stand.
#[derive(Clone, Debug)]
pub struct LaunchValues {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dynamic_smem: u32,
    pub args: Vec<KernelArg>,
}

impl CmdKind {
    /// A copy's byte offset and length, checked against the buffer's `total` bytes.
    pub fn copy_range(
        offset: &IntExpr,
        bytes: &Option<IntExpr>,
        (name, total): (&str, u64),
        loops: &[Option<i64>],
    ) -> Result<(u64, u64), ValueError> {
        let max = i64::try_from(total).unwrap_or(i64::MAX);
        let off = offset.value(loops, 0..=max, "a copy's offset (bytes)")? as u64;
        let Some(b) = bytes else {
            if off == total {
                return Err(offset.bad_value(
                    loops,
                    off as i64,
                    format!("the end of buffer `{name}`, which leaves nothing to copy"),
                ));
            }
            return Ok((off, total - off));
        };
        let n = b.value(loops, 1..=i64::MAX, "a copy's length (bytes)")? as u64;
        if n > total - off {
            return Err(b.bad_value(
                loops,
                n as i64,
                format!("{n} bytes at offset {off} do not fit buffer `{name}` of {total} bytes"),
            ));
        }
        Ok((off, n))
    }

    /// A set's byte offset into its buffer of `elems` elements of `size` bytes.
    pub fn set_offset(
        index: &IntExpr,
        values: usize,
        elems: u64,
        size: usize,
        loops: &[Option<i64>],
    ) -> Result<u64, ValueError> {
        let last = elems.saturating_sub(values as u64) as i64;
        let what = format!("the first of {values} elements set in a buffer of {elems}");
        Ok(index.value(loops, 0..=last, &what)? as u64 * size as u64)
    }

    /// A repeat's count.
    pub fn times(times: &IntExpr, loops: &[Option<i64>]) -> Result<u64, ValueError> {
        Ok(times.value(loops, 0..=i64::MAX, "a repeat count")? as u64)
    }

    /// A launch's shape and arguments, with `ptr(b)` the address of buffer `b`, `lens[b]`
    /// its bytes and `tex(t)` the handle of texture `t`.
    pub fn launch_values(
        grid: &[IntExpr; 3],
        block: &[IntExpr; 3],
        dynamic_smem: &IntExpr,
        args: &[Arg],
        lens: &dyn Fn(usize) -> u64,
        ptr: &dyn Fn(usize) -> u64,
        tex: &dyn Fn(usize) -> u64,
        loops: &[Option<i64>],
    ) -> Result<LaunchValues, ValueError> {
        let dim = |e: &IntExpr, what| -> Result<u32, ValueError> {
            Ok(e.value(loops, 1..=i64::from(u32::MAX), what)? as u32)
        };
        let mut out = LaunchValues {
            grid: [1; 3],
            block: [1; 3],
            dynamic_smem: dynamic_smem.value(
                loops,
                0..=i64::from(u32::MAX),
                "dynamic shared memory (bytes)",
            )? as u32,
            args: Vec::with_capacity(args.len()),
        };
        for d in 0..3 {
            out.grid[d] = dim(&grid[d], "a grid dimension")?;
            out.block[d] = dim(&block[d], "a block dimension")?;
        }
        for a in args {
            out.args.push(match a {
                Arg::Buffer { buffer, offset } => {
                    let len = i64::try_from(lens(*buffer)).unwrap_or(i64::MAX);
                    let off = offset.value(loops, 0..=len, "an offset into the buffer")?;
                    KernelArg::Ptr(DevPtr(ptr(*buffer) + off as u64))
                }
                Arg::Int { ty, value } => {
                    let what = format!("{} {} argument", article(ty.name()), ty.name());
                    let v = value.value(loops, ty.range(), &what)?;
                    match ty {
                        IntType::U32 => KernelArg::U32(v as u32),
                        IntType::S32 => KernelArg::I32(v as i32),
                        IntType::U64 => KernelArg::U64(v as u64),
                        IntType::S64 => KernelArg::I64(v),
                    }
                }
                Arg::F32(v) => KernelArg::F32(*v),
                Arg::F64(v) => KernelArg::F64(*v),
                Arg::Texture(t) => KernelArg::U64(tex(*t)),
            });
        }
        Ok(out)
    }
}

/// The most ULPs a check may allow (a wider one would check nothing).
pub const MAX_ULPS: u64 = 1 << 20;

#[derive(Clone, Debug)]
pub struct Check {
    pub buffer: usize,
    pub expect: Expect,
    /// Relative, absolute and ULP tolerances for floats (all 0: exact).
    pub tolerance: f64,
    pub abs_tolerance: f64,
    pub ulps: u64,
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
/// a run holds about two and a half copies: the initial contents, which every run of a
/// program shares, device memory, and a buffer in transit; each run alone, for the
/// multiprogram metrics, adds its process's device memory).
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
    parse_with(file, text, files, None)
}

/// The keys a launch spec may have at its top level, and in its one process.
const SPEC_KEYS: [&str; 3] = ["description", "constants", "process"];
const SPEC_PROCESS_KEYS: [&str; 7] = [
    "name",
    "ptx",
    "constants",
    "buffer",
    "texture",
    "command",
    "check",
];

/// Parses the launch spec of `switchyard run FILE.ptx --spec SPEC.toml`: a scenario of
/// one process whose program is a command list, run on `ptx` (file name, text), which
/// replaces any `ptx` the process names. `run` executes its commands one after another on
/// the GPU alone, so what only a scenario's host and scheduler give meaning to (`gpu`,
/// `[scheduler]`, `[host]`, `[limits]`, `replay`, translation, a process's arrival,
/// priority, streams, requests or setup) is an error naming the key.
pub fn parse_spec(
    file: &str,
    text: &str,
    files: &dyn Files,
    ptx: (&str, &str),
) -> Result<Scenario, ScenarioError> {
    #[derive(Deserialize)]
    struct Processes {
        #[serde(default)]
        process: Vec<BTreeMap<String, Spanned<toml::Value>>>,
    }
    let lines = LineIndex::new(text);
    let syntax = |e: toml::de::Error| ScenarioError {
        location: e
            .span()
            .map(|s| lines.at(file, s.start))
            .unwrap_or_else(|| file.to_string()),
        field: "spec".into(),
        what: e.message().to_string(),
    };
    let top: BTreeMap<String, Spanned<toml::Value>> = toml::from_str(text).map_err(syntax)?;
    let scenario_only = |key: &str, at: &Spanned<toml::Value>, what: &str| {
        ScenarioError {
        location: lines.at(file, at.span().start),
        field: key.to_string(),
        what: format!(
            "a launch spec runs one process's commands back to back on the GPU alone: {what} (run a scenario with `switchyard scenario`)"
        ),
    }
    };
    // The first key (in the file) that a spec may not have.
    let first = |keys: &BTreeMap<String, Spanned<toml::Value>>, allowed: &[&str]| {
        keys.iter()
            .filter(|(k, _)| !allowed.contains(&k.as_str()))
            .min_by_key(|(_, v)| v.span().start)
            .map(|(k, v)| (k.clone(), v.clone()))
    };
    if let Some((key, v)) = first(&top, &SPEC_KEYS) {
        let what = if key == "gpu" {
            "its GPU is `run`'s --gpu"
        } else {
            "this key has no meaning there"
        };
        return Err(scenario_only(&key, &v, what));
    }
    let Processes { process } = toml::from_str(text).map_err(syntax)?;
    if process.len() != 1 {
        return Err(ScenarioError {
            location: top
                .get("process")
                .map_or_else(|| file.to_string(), |v| lines.at(file, v.span().start)),
            field: "process".into(),
            what: format!(
                "a launch spec has exactly one [[process]] (this one has {}): its buffers, textures, commands and checks",
                process.len()
            ),
        });
    }
    if let Some((key, v)) = first(&process[0], &SPEC_PROCESS_KEYS) {
        return Err(scenario_only(
            &format!("process[0].{key}"),
            &v,
            "this key has no meaning there",
        ));
    }
    parse_with(file, text, files, Some(ptx))
}

fn parse_with(
    file: &str,
    text: &str,
    files: &dyn Files,
    given_ptx: Option<(&str, &str)>,
) -> Result<Scenario, ScenarioError> {
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
        dumps: std::cell::RefCell::new(Vec::new()),
        given_ptx,
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
    /// The `file` of every dump resolved so far, and where it is written.
    dumps: std::cell::RefCell<Vec<(String, String)>>,
    /// A launch spec's PTX (file name, text): its one process runs it ([`parse_spec`]).
    given_ptx: Option<(&'a str, &'a str)>,
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

    fn resolve(&self, mut raw: ScenarioFile) -> Result<Scenario, ScenarioError> {
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
        let pipeline = match &raw.pipeline {
            None => None,
            Some(p) => match PIPELINES.iter().find(|o| o.name() == p.get_ref().as_str()) {
                Some(&o) => Some(o),
                None => {
                    let names: Vec<&str> = PIPELINES.iter().map(|o| o.name()).collect();
                    return self.err(
                        Some(p.span()),
                        "pipeline",
                        format!(
                            "no pipeline organisation `{}` (organisations: {})",
                            p.get_ref(),
                            names.join(", ")
                        ),
                    );
                }
            },
        };
        if let Some(n) = &raw.operand_log_bytes {
            if !memsys::OPERAND_LOG_RANGE.contains(n.get_ref()) {
                return self.err(
                    Some(n.span()),
                    "operand_log_bytes",
                    format!("{} bytes is not in 8192..=32768 (8 to 32 KiB)", n.get_ref()),
                );
            }
        }
        // The top-level `pipeline` and `operand_log_bytes` are `[translation]`'s own.
        let mut section = std::mem::take(&mut raw.translation);
        if let (Some(p), Some(pipeline)) = (&raw.pipeline, pipeline) {
            if let Some(q) = &section.pipeline {
                return self.err(
                    Some(q.span()),
                    "translation.pipeline",
                    "also given at the top level (`pipeline`): give it once".into(),
                );
            }
            section.pipeline = Some(Spanned::new(p.span(), pipeline));
        }
        if let Some(n) = &raw.operand_log_bytes {
            if let Some(q) = &section.operand_log_bytes {
                return self.err(
                    Some(q.span()),
                    "translation.operand_log_bytes",
                    "also given at the top level (`operand_log_bytes`): give it once".into(),
                );
            }
            section.operand_log_bytes = Some(n.clone());
        }
        let translation = crate::translation::TranslationOverrides::from_section(section, &|at| {
            self.lines.at(self.file, at)
        });
        translation.check(self.file)?;
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
        let constants = self.constants(&raw.constants, &BTreeMap::new(), "constants")?;
        let mut total = 0u64;
        for (i, p) in raw.processes.iter().enumerate() {
            let own =
                self.constants(&p.constants, &constants, &format!("process[{i}].constants"))?;
            for (b, spec) in p.buffers.iter().enumerate() {
                let f = format!("process[{i}].buffer[{b}]");
                let bytes = self
                    .len(spec, &f, &own)?
                    .map_or(0, |(n, _)| n.saturating_mul(spec.ty.size() as u64));
                total = total.saturating_add(bytes);
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
            if let (Some(r), Some(_)) = (&p.requests, &raw.replay) {
                return self.err(
                    Some(r.span()),
                    &format!("{field}.requests"),
                    "a process serving requests runs its program once a request: it cannot also be replayed (`replay`)".into(),
                );
            }
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
            processes.push(self.process(p, &field, &constants)?);
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
            translation,
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

    fn process(
        &self,
        p: ProcessSpec,
        field: &str,
        constants: &BTreeMap<String, i64>,
    ) -> Result<Process, ScenarioError> {
        if !(p.arrival_us.is_finite() && (0.0..=1.0e9).contains(&p.arrival_us)) {
            return self.err(
                Some(p.name.span()),
                &format!("{field}.arrival_us"),
                format!("{} is not a time in 0..=10^9 µs", p.arrival_us),
            );
        }
        // A launch spec's process runs the PTX file `run` was given ([`parse_spec`]).
        let given = self
            .given_ptx
            .map(|(name, _)| Spanned::new(p.name.span(), name.to_string()));
        let program = match (&p.suite, given.as_ref().or(p.ptx.as_ref())) {
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
                if !p.buffers.is_empty()
                    || !p.textures.is_empty()
                    || !p.commands.is_empty()
                    || !p.setup.is_empty()
                    || !p.checks.is_empty()
                    || !p.constants.is_empty()
                {
                    return self.err(
                        Some(s.span()),
                        field,
                        "a suite process runs the kernel's own host program: it takes no buffer, texture, command, setup, check or constant (`warm_up = true` makes its program a setup)".into(),
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
                    warm_up: p.warm_up.as_ref().is_some_and(|w| *w.get_ref()),
                    managed: match p.managed.as_ref().map(|m| (m.get_ref(), m.span())) {
                        None | Some((toml::Value::Boolean(false), _)) => Managed::Off,
                        Some((toml::Value::Boolean(true), _)) => Managed::All,
                        Some((toml::Value::String(s), span)) => {
                            match Managed::ALL.iter().find(|m| m.name() == s) {
                                Some(&m) => m,
                                None => {
                                    return self.err(
                                        Some(span),
                                        &format!("{field}.managed"),
                                        format!(
                                            "no managed setting `{s}` (true, false, \"all\" or \"unwritten\")"
                                        ),
                                    )
                                }
                            }
                        }
                        Some((v, span)) => {
                            return self.err(
                                Some(span),
                                &format!("{field}.managed"),
                                format!(
                                    "{v} is not true, false, \"all\" or \"unwritten\""
                                ),
                            )
                        }
                    },
                }
            }
            (None, Some(ptx)) => {
                if let Some(m) = &p.managed {
                    return self.err(
                        Some(m.span()),
                        &format!("{field}.managed"),
                        "`managed` on a process is for a suite process: a `ptx` process marks each managed buffer (`managed = true` in its [[process.buffer]])".into(),
                    );
                }
                if let Some(w) = &p.warm_up {
                    return self.err(
                        Some(w.span()),
                        &format!("{field}.warm_up"),
                        "`warm_up` is for a suite process: a `ptx` process gives the commands it runs once as [[process.setup]]".into(),
                    );
                }
                let own = self.constants(&p.constants, constants, &format!("{field}.constants"))?;
                Program::Commands(Arc::new(self.commands(&p, ptx, field, &own)?))
            }
            _ => {
                return self.err(
                    Some(p.name.span()),
                    field,
                    "needs exactly one of `suite` (a suite kernel's host program) or `ptx` (a PTX file with buffers and commands)".into(),
                )
            }
        };
        let stream_priorities = self.streams(&p.streams, field)?;
        let requests = match &p.requests {
            None => None,
            Some(v) => Some(
                crate::arrivals::Arrivals::from_value(v.get_ref().clone())
                    .or_else(|e| self.err(Some(v.span()), &format!("{field}.requests"), e))?,
            ),
        };
        // A setup runs once before the requests: without requests it means nothing.
        if requests.is_none() {
            if let Some(w) = p.warm_up.as_ref().filter(|w| *w.get_ref()) {
                return self.err(
                    Some(w.span()),
                    &format!("{field}.warm_up"),
                    "a warm-up runs once before the process serves requests: it needs `requests`"
                        .into(),
                );
            }
            if let Some(c) = p.setup.first() {
                return self.err(
                    self.span_of(c),
                    &format!("{field}.setup[0]"),
                    "setup commands run once before the process serves requests: they need `requests`".into(),
                );
            }
        }
        Ok(Process {
            name: p.name.into_inner(),
            arrival_us: p.arrival_us,
            priority: p.priority,
            program,
            stream_priorities,
            requests,
        })
    }

    /// The `[[process.stream]]` entries: each stream once, each priority in range.
    fn streams(&self, specs: &[StreamSpec], field: &str) -> Result<Vec<(u32, i32)>, ScenarioError> {
        let mut out: Vec<(u32, i32)> = Vec::new();
        for (i, s) in specs.iter().enumerate() {
            let f = format!("{field}.stream[{i}]");
            let id = *s.id.get_ref();
            if out.iter().any(|(x, _)| *x == id) {
                return self.err(
                    Some(s.id.span()),
                    &format!("{f}.id"),
                    format!("stream {id} is given a priority twice"),
                );
            }
            let p = *s.priority.get_ref();
            if !(0..=MAX_STREAM_PRIORITY).contains(&p) {
                return self.err(
                    Some(s.priority.span()),
                    &format!("{f}.priority"),
                    format!(
                        "{p} is out of 0..={MAX_STREAM_PRIORITY} (larger is more important; CUDA's priority -{MAX_STREAM_PRIORITY} is {MAX_STREAM_PRIORITY} here)"
                    ),
                );
            }
            out.push((id, p as i32));
        }
        Ok(out)
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
        constants: &BTreeMap<String, i64>,
    ) -> Result<CommandProgram, ScenarioError> {
        let (ptx_file, text) = if let Some((name, text)) = self.given_ptx {
            (name.to_string(), text.to_string())
        } else if let Some(name) = ptx.get_ref().strip_prefix("suite:") {
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
        let kernels: Vec<KernelSig> = ir
            .kernels
            .values()
            .map(|k| KernelSig {
                name: k.name.clone(),
                cxx: crate::demangle::cxx_name(&k.name),
                params: k.params.clone(),
            })
            .collect();
        let mut buffers: Vec<Buffer> = Vec::new();
        let mut declared = 0u64;
        for (b, spec) in p.buffers.iter().enumerate() {
            let bytes = self
                .len(spec, &format!("{field}.buffer[{b}]"), constants)?
                .map_or(0, |(n, _)| n.saturating_mul(spec.ty.size() as u64));
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
            buffers.push(self.buffer(spec, &f, p.name.get_ref(), constants)?);
        }
        let textures = self.textures(&p.textures, &buffers, field)?;
        let names = Names {
            buffers: &buffers,
            textures: &textures,
            kernels: &kernels,
            ptx_file: ptx.get_ref(),
            constants,
            loops: Vec::new(),
        };
        let commands = self.command_list(&p.commands, &format!("{field}.command"), &names)?;
        let setup = self.command_list(&p.setup, &format!("{field}.setup"), &names)?;
        // Loops whose counts are known are followed, so a value that goes wrong in some
        // iteration is found now.
        for list in [&setup, &commands] {
            check_values(
                list,
                &mut Vec::new(),
                &buffers,
                &mut LOAD_CHECK_BUDGET.clone(),
            )?;
        }
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
            let mut tolerances = [0.0; 2];
            for (slot, (key, t)) in tolerances.iter_mut().zip([
                ("tolerance", &spec.tolerance),
                ("abs_tolerance", &spec.abs_tolerance),
            ]) {
                if let Some(t) = t {
                    let v = *t.get_ref();
                    // An infinite tolerance passes every value, a NaN one fails every value
                    // that is not exact: neither checks anything.
                    if !(v.is_finite() && v >= 0.0) {
                        return self.err(
                            Some(t.span()),
                            &format!("{f}.{key}"),
                            format!("{v} is not a tolerance: it must be finite and non-negative"),
                        );
                    }
                    *slot = v;
                }
            }
            let ulps = match &spec.ulps {
                None => 0,
                // A count beyond MAX_ULPS would pass values far from the expected ones.
                Some(u) => match u64::try_from(*u.get_ref()) {
                    Ok(n) if n <= MAX_ULPS => n,
                    _ => {
                        return self.err(
                            Some(u.span()),
                            &format!("{f}.ulps"),
                            format!("{} is out of range: 0 to at most {MAX_ULPS}", u.get_ref()),
                        );
                    }
                },
            };
            checks.push(Check {
                buffer: b,
                expect,
                tolerance: tolerances[0],
                abs_tolerance: tolerances[1],
                ulps,
            });
        }
        Ok(CommandProgram {
            ptx_file,
            ptx: text,
            buffers,
            textures,
            setup,
            commands,
            checks,
            dump_dir: self.dir.to_path_buf(),
        })
    }

    /// A process's texture objects, each checked against its buffer and the sampler's rules.
    fn textures(
        &self,
        specs: &[Spanned<TextureSpec>],
        buffers: &[Buffer],
        field: &str,
    ) -> Result<Vec<Texture>, ScenarioError> {
        let mut out: Vec<Texture> = Vec::new();
        for (i, spec) in specs.iter().enumerate() {
            let f = format!("{field}.texture[{i}]");
            let span = Some(spec.span());
            let t = spec.get_ref();
            let name = t.name.get_ref();
            if out.iter().any(|x| x.name == *name) {
                return self.err(
                    Some(t.name.span()),
                    &format!("{f}.name"),
                    format!("a texture `{name}` already exists"),
                );
            }
            let Some(buffer) = buffers.iter().position(|b| b.name == *t.buffer.get_ref()) else {
                return self.err(
                    Some(t.buffer.span()),
                    &format!("{f}.buffer"),
                    format!("no buffer `{}`", t.buffer.get_ref()),
                );
            };
            let mut address = [gpu::texture::AddressMode::Clamp; 3];
            match &t.address {
                Addressing::All(a) => address = [*a; 3],
                Addressing::PerDim(v) if (1..=3).contains(&v.len()) => {
                    address[..v.len()].copy_from_slice(v);
                }
                Addressing::PerDim(_) => {
                    return self.err(span, &format!("{f}.address"), "needs 1 to 3 modes".into());
                }
            }
            let desc = gpu::texture::TextureDesc {
                base: t.offset,
                texel: t.format,
                channels: t.channels,
                extent: [t.width, t.height, t.depth],
                layers: t.layers,
                pitch: t.pitch,
                address,
                filter: t.filter,
                read: t.read,
                normalized: t.normalized,
            };
            desc.validate()
                .or_else(|e| self.err(span.clone(), &format!("{f}.{}", e.field), e.what))?;
            let have = buffers[buffer].init.len() as u64;
            let need = t.offset.saturating_add(desc.bytes());
            if need > have {
                return self.err(
                    span,
                    &f,
                    format!(
                        "needs {need} bytes of buffer `{}` (offset {} plus {} of texels), which has {have}",
                        t.buffer.get_ref(),
                        t.offset,
                        desc.bytes()
                    ),
                );
            }
            out.push(Texture {
                name: name.clone(),
                buffer,
                desc,
            });
        }
        Ok(out)
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

    fn buffer(
        &self,
        spec: &BufferSpec,
        f: &str,
        process: &str,
        constants: &BTreeMap<String, i64>,
    ) -> Result<Buffer, ScenarioError> {
        let at = Some(spec.name.span());
        let len = self.len(spec, f, constants)?;
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
            if let Some((n, span)) = len {
                if n != elems {
                    return self.err(
                        Some(span),
                        &format!("{f}.len"),
                        format!("{n} elements declared, the file has {elems}"),
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
            let Some((n, span)) = len else {
                return self.err(at, &format!("{f}.len"), "missing (elements)".into());
            };
            if n == 0 || n.saturating_mul(size) > MAX_BUFFER_BYTES {
                return self.err(
                    Some(span),
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
        let managed = match spec.managed.as_ref().map(|m| (m.get_ref(), m.span())) {
            None | Some((toml::Value::Boolean(false), _)) => false,
            Some((toml::Value::Boolean(true), _)) => true,
            Some((v, span)) => {
                return self.err(
                    Some(span),
                    &format!("{f}.managed"),
                    format!("{v} is not true or false"),
                )
            }
        };
        let managed = managed.then_some(if spec.init == Init::Zero {
            memsys::Populate::Unpopulated
        } else {
            memsys::Populate::HostData
        });
        Ok(Buffer {
            name: spec.name.get_ref().clone(),
            ty: spec.ty,
            init,
            managed,
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

    /// An integer field: a TOML integer, or an expression in a string over the names in
    /// scope ([`crate::expr`]).
    fn int(
        &self,
        v: &Spanned<toml::Value>,
        field: &str,
        scope: &dyn crate::expr::Scope,
    ) -> Result<IntExpr, ScenarioError> {
        let at = self.lines.at(self.file, v.span().start);
        let text = match v.get_ref() {
            toml::Value::Integer(i) => return Ok(IntExpr::lit(*i, &at, field)),
            toml::Value::String(s) => s.clone(),
            other => {
                return self.err(
                    Some(v.span()),
                    field,
                    format!(
                        "expected an integer, or an expression in a string (\"N - t\"), found a {}",
                        other.type_str()
                    ),
                )
            }
        };
        let expr = Expr::parse(&text, scope)
            .or_else(|e| self.err(Some(v.span()), field, format!("`{text}`: {e}")))?;
        Ok(IntExpr {
            expr,
            text,
            at,
            field: field.to_string(),
        })
    }

    /// The named constants of `raw` (in the order written; each may use those before it
    /// and `outer`), added to `outer`.
    fn constants(
        &self,
        raw: &BTreeMap<String, Spanned<toml::Value>>,
        outer: &BTreeMap<String, i64>,
        field: &str,
    ) -> Result<BTreeMap<String, i64>, ScenarioError> {
        let mut items: Vec<_> = raw.iter().collect();
        items.sort_by_key(|(_, v)| v.span().start);
        let mut out = outer.clone();
        for (name, v) in items {
            let f = format!("{field}.{name}");
            self.check_name(name, v.span(), &f, &out, &[])?;
            let scope = NameScope {
                constants: &out,
                loops: &[],
            };
            let e = self.int(v, &f, &scope)?;
            let value = e.expr.constant().expect("no loop is in scope");
            out.insert(name.clone(), value);
        }
        Ok(out)
    }

    /// A name a constant or loop index may have: an identifier, not a function's, not
    /// already a constant or an enclosing loop's index.
    fn check_name(
        &self,
        name: &str,
        span: std::ops::Range<usize>,
        field: &str,
        constants: &BTreeMap<String, i64>,
        loops: &[Option<String>],
    ) -> Result<(), ScenarioError> {
        let ident = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        let what = if !ident {
            "is not a name (a letter or `_`, then letters, digits and `_`)"
        } else if name == "min" || name == "max" {
            "is a function's name"
        } else if constants.contains_key(name) {
            "is already a constant"
        } else if loops.iter().any(|l| l.as_deref() == Some(name)) {
            "is already the index of an enclosing loop"
        } else {
            return Ok(());
        };
        self.err(Some(span), field, format!("`{name}` {what}"))
    }

    /// A buffer's declared length in elements and where it is written, if it declares one.
    fn len(
        &self,
        spec: &BufferSpec,
        f: &str,
        constants: &BTreeMap<String, i64>,
    ) -> Result<Option<(u64, std::ops::Range<usize>)>, ScenarioError> {
        let Some(len) = &spec.len else {
            return Ok(None);
        };
        let scope = NameScope {
            constants,
            loops: &[],
        };
        let e = self.int(len, &format!("{f}.len"), &scope)?;
        let n = e.expr.constant().expect("no loop is in scope");
        if n < 0 {
            return self.err(
                Some(len.span()),
                &format!("{f}.len"),
                format!("`{}` is {n}: a length must be at least 0", e.text),
            );
        }
        Ok(Some((n as u64, len.span())))
    }

    /// Keys of `c` that its kind does not take, as an error naming the first.
    fn unused_keys(&self, c: &CommandSpec, kind: &str, f: &str) -> Result<(), ScenarioError> {
        let takes: &[&str] = match kind {
            "copy" => &["direction", "offset", "bytes", "blocking", "stream"],
            "set" => &["index", "values"],
            "launch" => &["grid", "block", "dynamic_smem", "args", "stream"],
            "repeat" => &["body"],
            "repeat_until_zero" => &["body", "max_iterations"],
            "dump" => &["file", "type", "shape", "stream"],
            _ => &[],
        };
        let present = [
            ("index", c.index.as_ref().map(|v| v.span())),
            ("values", c.values.as_ref().map(|v| v.span())),
            ("direction", c.direction.as_ref().map(|v| v.span())),
            ("offset", c.offset.as_ref().map(|v| v.span())),
            ("bytes", c.bytes.as_ref().map(|v| v.span())),
            ("blocking", c.blocking.as_ref().map(|v| v.span())),
            ("grid", c.grid.as_ref().map(|v| v.span())),
            ("block", c.block.as_ref().map(|v| v.span())),
            ("dynamic_smem", c.dynamic_smem.as_ref().map(|v| v.span())),
            ("args", c.args.as_ref().map(|v| v.span())),
            (
                "max_iterations",
                c.max_iterations.as_ref().map(|v| v.span()),
            ),
            ("body", c.body.as_ref().map(|_| 0..0)),
            ("stream", c.stream.as_ref().map(|v| v.span())),
            ("file", c.file.as_ref().map(|v| v.span())),
            ("type", c.ty.as_ref().map(|v| v.span())),
            ("shape", c.shape.as_ref().map(|v| v.span())),
        ];
        for (key, span) in present {
            if let Some(span) = span {
                if !takes.contains(&key) {
                    let span = Some(span)
                        .filter(|s| !s.is_empty())
                        .or_else(|| self.span_of(c));
                    return self.err(
                        span,
                        &format!("{f}.{key}"),
                        format!(
                            "a {kind} command takes no `{key}` (it takes: {})",
                            if takes.is_empty() {
                                "nothing else".to_string()
                            } else {
                                takes.join(", ")
                            }
                        ),
                    );
                }
            }
        }
        Ok(())
    }

    /// Where a command is written: its kind's key.
    fn span_of(&self, c: &CommandSpec) -> Option<std::ops::Range<usize>> {
        c.copy
            .as_ref()
            .or(c.set.as_ref())
            .or(c.launch.as_ref())
            .or(c.dump.as_ref())
            .map(|s| s.span())
            .or_else(|| c.repeat.as_ref().map(|s| s.span()))
            .or_else(|| c.repeat_until_zero.as_ref().map(|w| w.buffer.span()))
            .or_else(|| c.sync.as_ref().map(|s| s.span()))
            .or_else(|| c.sync_stream.as_ref().map(|s| s.span()))
    }

    /// A loop's count and index name: `repeat = N`, `repeat = "expr"` or
    /// `repeat = { times = ..., as = "name" }`.
    fn repeat(
        &self,
        v: &Spanned<toml::Value>,
        f: &str,
        names: &Names,
    ) -> Result<(IntExpr, Option<String>), ScenarioError> {
        let scope = names.scope();
        let toml::Value::Table(t) = v.get_ref() else {
            return Ok((self.int(v, f, &scope)?, None));
        };
        if let Some(k) = t.keys().find(|k| *k != "times" && *k != "as") {
            return self.err(
                Some(v.span()),
                &format!("{f}.{k}"),
                "unknown key: a repeat table takes `times` and `as`".into(),
            );
        }
        let Some(times) = t.get("times") else {
            return self.err(Some(v.span()), &format!("{f}.times"), "missing".into());
        };
        let times = Spanned::new(v.span(), times.clone());
        let times = self.int(&times, &format!("{f}.times"), &scope)?;
        let name = match t.get("as") {
            None => None,
            Some(toml::Value::String(n)) => {
                self.check_name(
                    n,
                    v.span(),
                    &format!("{f}.as"),
                    names.constants,
                    &names.loops,
                )?;
                Some(n.clone())
            }
            Some(_) => {
                return self.err(
                    Some(v.span()),
                    &format!("{f}.as"),
                    "the loop index's name, a string".into(),
                )
            }
        };
        Ok((times, name))
    }

    fn command(&self, c: &CommandSpec, f: &str, names: &Names) -> Result<Cmd, ScenarioError> {
        let kinds = [
            ("copy", c.copy.is_some()),
            ("set", c.set.is_some()),
            ("launch", c.launch.is_some()),
            ("repeat", c.repeat.is_some()),
            ("repeat_until_zero", c.repeat_until_zero.is_some()),
            ("sync", c.sync.is_some()),
            ("sync_stream", c.sync_stream.is_some()),
            ("dump", c.dump.is_some()),
        ];
        let span = self.span_of(c);
        let mut set = kinds.iter().filter(|k| k.1);
        let (Some(&(kind, _)), None) = (set.next(), set.next()) else {
            return self.err(
                span,
                f,
                "needs exactly one of copy, set, launch, repeat, repeat_until_zero, sync, sync_stream, dump"
                    .into(),
            );
        };
        let at = span
            .clone()
            .map(|s| self.lines.at(self.file, s.start))
            .unwrap_or_else(|| self.file.to_string());
        let body_needed = c.repeat.is_some() || c.repeat_until_zero.is_some();
        if body_needed && c.body.as_ref().is_none_or(|b| b.is_empty()) {
            return self.err(
                span,
                &format!("{f}.body"),
                "a repeat needs a body ([[...command.body]])".into(),
            );
        }
        self.unused_keys(c, kind, f)?;
        let scope = names.scope();
        let kind = if let Some(b) = &c.copy {
            let buffer = names.buffer(self, b, &format!("{f}.copy"))?;
            let offset = match &c.offset {
                Some(v) => self.int(v, &format!("{f}.offset"), &scope)?,
                None => IntExpr::lit(0, &at, &format!("{f}.offset")),
            };
            let bytes = match &c.bytes {
                Some(v) => Some(self.int(v, &format!("{f}.bytes"), &scope)?),
                None => None,
            };
            CmdKind::Copy {
                buffer,
                to_device: c
                    .direction
                    .as_ref()
                    .map_or(Direction::ToDevice, |d| *d.get_ref())
                    == Direction::ToDevice,
                offset,
                bytes,
                stream: c.stream.as_ref().map_or(0, |s| *s.get_ref()),
                blocking: c.blocking.as_ref().is_none_or(|b| *b.get_ref()),
            }
        } else if let Some(b) = &c.set {
            let buffer = names.buffer(self, b, &format!("{f}.set"))?;
            let buf = &names.buffers[buffer];
            let values = c.values.as_ref().map_or(&[][..], |v| v.get_ref());
            if values.is_empty() {
                return self.err(
                    Some(b.span()),
                    &format!("{f}.values"),
                    "a set needs `values`".into(),
                );
            }
            let index = match &c.index {
                Some(v) => self.int(v, &format!("{f}.index"), &scope)?,
                None => IntExpr::lit(0, &at, &format!("{f}.index")),
            };
            let mut bytes = Vec::new();
            for &v in values {
                buf.ty.encode(v, &mut bytes);
            }
            CmdKind::Set {
                buffer,
                index,
                bytes,
            }
        } else if let Some(k) = &c.launch {
            let kernel = names.kernel(self, k, &format!("{f}.launch"))?;
            let dims = |v: &Option<Spanned<Vec<Spanned<toml::Value>>>>,
                        name: &str|
             -> Result<[IntExpr; 3], ScenarioError> {
                let field = format!("{f}.{name}");
                let v = match v {
                    Some(v) if (1..=3).contains(&v.get_ref().len()) => v,
                    _ => {
                        return self.err(
                            v.as_ref().map_or(Some(k.span()), |v| Some(v.span())),
                            &field,
                            "needs 1 to 3 dimensions".into(),
                        )
                    }
                };
                let mut d = std::array::from_fn(|i| IntExpr::lit(1, &at, &format!("{field}[{i}]")));
                for (i, e) in v.get_ref().iter().enumerate() {
                    d[i] = self.int(e, &format!("{field}[{i}]"), &scope)?;
                }
                Ok(d)
            };
            let grid = dims(&c.grid, "grid")?;
            let block = dims(&c.block, "block")?;
            let dynamic_smem = match &c.dynamic_smem {
                Some(v) => self.int(v, &format!("{f}.dynamic_smem"), &scope)?,
                None => IntExpr::lit(0, &at, &format!("{f}.dynamic_smem")),
            };
            let specs = c.args.as_ref().map_or(&[][..], |a| a.get_ref());
            let params = &kernel.params;
            if specs.len() != params.len() {
                let span = c.args.as_ref().map_or(k.span(), |a| a.span());
                return self.err(
                    Some(span),
                    &format!("{f}.args"),
                    format!(
                        "{} arguments for kernel `{}`, which takes {}: {}",
                        specs.len(),
                        k.get_ref(),
                        params.len(),
                        kernel.signature()
                    ),
                );
            }
            let mut args = Vec::new();
            for (j, (a, p)) in specs.iter().zip(params).enumerate() {
                args.push(self.arg(a, &format!("{f}.args[{j}]"), j, p, k.get_ref(), names)?);
            }
            CmdKind::Launch {
                kernel: kernel.name.clone(),
                grid: Box::new(grid),
                block: Box::new(block),
                dynamic_smem,
                args,
                stream: c.stream.as_ref().map_or(0, |s| *s.get_ref()),
            }
        } else if let Some(r) = &c.repeat {
            let (times, name) = self.repeat(r, &format!("{f}.repeat"), names)?;
            CmdKind::Repeat {
                times,
                body: self
                    .command_list(
                        c.body.as_deref().unwrap_or_default(),
                        &format!("{f}.body"),
                        &names.inner(name),
                    )?
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
            let max_iterations = c
                .max_iterations
                .as_ref()
                .map_or(1_000_000, |m| *m.get_ref());
            if max_iterations == 0 {
                return self.err(
                    span,
                    &format!("{f}.max_iterations"),
                    "must be at least 1".into(),
                );
            }
            let name = match &w.as_name {
                Some(n) => {
                    let field = format!("{f}.repeat_until_zero.as");
                    self.check_name(n.get_ref(), n.span(), &field, names.constants, &names.loops)?;
                    Some(n.get_ref().clone())
                }
                None => None,
            };
            CmdKind::RepeatUntilZero {
                buffer,
                offset: w.index * u64::from(width),
                width,
                max_iterations,
                body: self
                    .command_list(
                        c.body.as_deref().unwrap_or_default(),
                        &format!("{f}.body"),
                        &names.inner(name),
                    )?
                    .into(),
            }
        } else if let Some(b) = &c.dump {
            self.dump(c, b, f, names)?
        } else if let Some(s) = &c.sync_stream {
            CmdKind::Sync {
                stream: Some(*s.get_ref()),
            }
        } else {
            if c.sync.as_ref().map(|s| *s.get_ref()) != Some(true) {
                return self.err(span, &format!("{f}.sync"), "write sync = true".into());
            }
            CmdKind::Sync { stream: None }
        };
        let cmd = Cmd {
            at,
            field: f.to_string(),
            kind,
        };
        // What does not depend on a loop index is checked now, wherever it is.
        let unknown = vec![None; names.loops.len()];
        check_values(
            std::slice::from_ref(&cmd),
            &mut unknown.clone(),
            names.buffers,
            &mut 1,
        )?;
        Ok(cmd)
    }

    /// A `dump` of buffer `b`: its file, element type and shape, checked against the
    /// buffer now.
    fn dump(
        &self,
        c: &CommandSpec,
        b: &Spanned<String>,
        f: &str,
        names: &Names,
    ) -> Result<CmdKind, ScenarioError> {
        let buffer = names.buffer(self, b, &format!("{f}.dump"))?;
        let buf = &names.buffers[buffer];
        let bytes = buf.init.len() as u64;
        let file = match &c.file {
            Some(p) => {
                let name = p.get_ref();
                let is_dir = name.is_empty() || name.ends_with('/') || name.ends_with('\\');
                if is_dir {
                    return self.err(
                        Some(p.span()),
                        &format!("{f}.file"),
                        format!("`{name}` names no file"),
                    );
                }
                name.clone()
            }
            // `<buffer>.npy`, when the buffer's name can be a file's.
            None if !buf.name.is_empty()
                && !buf.name.starts_with('.')
                && buf
                    .name
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || "_-+".contains(ch)) =>
            {
                format!("{}.npy", buf.name)
            }
            None => {
                return self.err(
                    Some(b.span()),
                    &format!("{f}.file"),
                    format!(
                        "buffer `{}` cannot name a file: give the dump a `file`",
                        buf.name
                    ),
                )
            }
        };
        let file_at = c.file.as_ref().map_or(b.span(), |p| p.span());
        {
            let mut dumps = self.dumps.borrow_mut();
            if let Some((_, other)) = dumps.iter().find(|(x, _)| *x == file) {
                return self.err(
                    Some(file_at),
                    &format!("{f}.file"),
                    format!("`{file}` is already the file of the dump at {other}"),
                );
            }
            dumps.push((
                file.clone(),
                format!("{f} ({})", self.lines.at(self.file, file_at.start)),
            ));
        }
        let ty = c.ty.as_ref().map_or(buf.ty, |t| *t.get_ref());
        let size = ty.size() as u64;
        if !bytes.is_multiple_of(size) {
            let at = c.ty.as_ref().map_or(b.span(), |t| t.span());
            return self.err(
                Some(at),
                &format!("{f}.type"),
                format!(
                    "buffer `{}` has {bytes} bytes, not a whole number of {size}-byte `{}` elements",
                    buf.name,
                    ty.npy_descr()
                ),
            );
        }
        let elems = bytes / size;
        let shape = match &c.shape {
            None => vec![elems],
            Some(given) => {
                let field = format!("{f}.shape");
                if !(1..=MAX_DUMP_DIMENSIONS).contains(&given.get_ref().len()) {
                    return self.err(
                        Some(given.span()),
                        &field,
                        format!("a shape has 1 to {MAX_DUMP_DIMENSIONS} dimensions"),
                    );
                }
                let scope = NameScope {
                    constants: names.constants,
                    loops: &[],
                };
                let mut shape = Vec::new();
                for (d, v) in given.get_ref().iter().enumerate() {
                    let e = self.int(v, &format!("{field}[{d}]"), &scope)?;
                    let n = e.expr.constant().expect("no loop is in scope");
                    let Ok(n) = u64::try_from(n) else {
                        return self.err(
                            Some(v.span()),
                            &format!("{field}[{d}]"),
                            format!("`{}` is {n}: a dimension is at least 0", e.text),
                        );
                    };
                    shape.push(n);
                }
                let product = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
                if product != Some(elems) {
                    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
                    return self.err(
                        Some(given.span()),
                        &field,
                        format!(
                            "[{}] holds {} elements, but buffer `{}` holds {elems} of `{}`",
                            dims.join(", "),
                            product.map_or("more than 2^64".to_string(), |p| p.to_string()),
                            buf.name,
                            ty.npy_descr()
                        ),
                    );
                }
                shape
            }
        };
        Ok(CmdKind::Dump {
            buffer,
            ty,
            shape,
            file,
            stream: c.stream.as_ref().map_or(0, |s| *s.get_ref()),
        })
    }

    /// Argument `j` of a launch, for parameter `p`: its kind must suit the parameter's type.
    fn arg(
        &self,
        a: &Spanned<ArgSpec>,
        f: &str,
        j: usize,
        p: &kir::module::Param,
        kernel: &str,
        names: &Names,
    ) -> Result<Arg, ScenarioError> {
        let span = Some(a.span());
        let start = a.span().start;
        let a = a.get_ref();
        let kinds = [
            ("buffer", a.buffer.is_some()),
            ("texture", a.texture.is_some()),
            ("u32", a.u32.is_some()),
            ("s32", a.s32.is_some()),
            ("u64", a.u64.is_some()),
            ("s64", a.s64.is_some()),
            ("f32", a.f32.is_some()),
            ("f64", a.f64.is_some()),
            ("loop_index", a.loop_index.is_some()),
        ];
        let mut set = kinds.iter().filter(|k| k.1);
        let (Some(&(kind, _)), None) = (set.next(), set.next()) else {
            return self.err(
                span,
                f,
                "needs exactly one of buffer, texture, u32, s32, u64, s64, f32, f64, loop_index"
                    .into(),
            );
        };
        if kind != "buffer" {
            if let Some(o) = &a.offset {
                return self.err(
                    Some(o.span()),
                    &format!("{f}.offset"),
                    format!("a {kind} argument takes no offset (only a buffer does)"),
                );
            }
        }
        // What the parameter takes: its class and width.
        let pty = format!(".{}", ty_name(p.ty));
        let param = format!("parameter {j} `{}` ({pty})", p.name);
        if p.size != p.ty.size() {
            return self.err(
                span,
                f,
                format!(
                    "{param} is an array of {} bytes: no argument kind can pass it",
                    p.size
                ),
            );
        }
        let (float, bytes) = match kind {
            "buffer" | "texture" => (false, 8),
            "f32" => (true, 4),
            "f64" => (true, 8),
            "loop_index" => (false, a.loop_index.expect("set").bytes()),
            "u32" | "s32" => (false, 4),
            _ => (false, 8),
        };
        let fits = p.size == bytes
            && if float {
                p.ty.is_float() || ty_name(p.ty).starts_with('b')
            } else {
                !p.ty.is_float()
            };
        if !fits {
            let want = match (float, bytes) {
                (true, 4) => ".f32 or .b32",
                (true, _) => ".f64 or .b64",
                (false, 4) => ".u32, .s32 or .b32",
                (false, _) => ".u64, .s64 or .b64",
            };
            let kind = if kind == "buffer" {
                "a buffer (a 64-bit pointer)".to_string()
            } else if kind == "texture" {
                "a texture (a 64-bit handle)".to_string()
            } else {
                format!("{} {kind} argument", article(kind))
            };
            return self.err(
                span,
                f,
                format!(
                    "{kind} for {param} of kernel `{}`: it needs a {want} parameter",
                    kernel
                ),
            );
        }
        let scope = names.scope();
        Ok(if let Some(b) = &a.buffer {
            let buffer = names.buffer(self, b, &format!("{f}.buffer"))?;
            let offset = match &a.offset {
                Some(v) => self.int(v, &format!("{f}.offset"), &scope)?,
                None => IntExpr::lit(
                    0,
                    &self.lines.at(self.file, b.span().start),
                    &format!("{f}.offset"),
                ),
            };
            Arg::Buffer { buffer, offset }
        } else if let Some(t) = &a.texture {
            match names.textures.iter().position(|x| x.name == *t.get_ref()) {
                Some(i) => Arg::Texture(i),
                None => {
                    return self.err(
                        Some(t.span()),
                        &format!("{f}.texture"),
                        format!("no texture `{}`", t.get_ref()),
                    )
                }
            }
        } else if let Some(v) = a.f32 {
            Arg::F32(v)
        } else if let Some(v) = a.f64 {
            Arg::F64(v)
        } else if let Some(ty) = a.loop_index {
            let Some(depth) = names.loops.len().checked_sub(1) else {
                return self.err(
                    span,
                    &format!("{f}.loop_index"),
                    "not inside a repeat or repeat_until_zero".into(),
                );
            };
            let name = names.loops[depth]
                .clone()
                .unwrap_or_else(|| "loop_index".into());
            Arg::Int {
                ty,
                value: IntExpr {
                    expr: Expr::Loop { depth, name },
                    text: "loop_index".into(),
                    at: self.lines.at(self.file, start),
                    field: format!("{f}.loop_index"),
                },
            }
        } else {
            let (ty, v) = [
                (IntType::U32, &a.u32),
                (IntType::S32, &a.s32),
                (IntType::U64, &a.u64),
                (IntType::S64, &a.s64),
            ]
            .into_iter()
            .find_map(|(t, v)| Some((t, v.as_ref()?)))
            .expect("exactly one is set");
            Arg::Int {
                ty,
                value: self.int(v, &format!("{f}.{}", ty.name()), &scope)?,
            }
        })
    }
}

/// Checks the values of `cmds` (loops run as they will be where their counts are known),
/// with `loops` the indices of the enclosing loops (`None`: not known before the run), for
/// at most `budget` more commands.
fn check_values(
    cmds: &[Cmd],
    loops: &mut Vec<Option<i64>>,
    buffers: &[Buffer],
    budget: &mut u32,
) -> Result<(), ScenarioError> {
    let known = |r: Result<(), ValueError>| match r {
        Ok(()) | Err(ValueError::Unknown) => Ok(()),
        Err(ValueError::Bad(e)) => Err(e),
    };
    for cmd in cmds {
        if *budget == 0 {
            return Ok(());
        }
        *budget -= 1;
        match &cmd.kind {
            CmdKind::Copy {
                buffer,
                offset,
                bytes,
                ..
            } => {
                let b = &buffers[*buffer];
                let range =
                    CmdKind::copy_range(offset, bytes, (&b.name, b.init.len() as u64), loops);
                known(range.map(|_| ()))?;
            }
            CmdKind::Set {
                buffer,
                index,
                bytes,
            } => {
                let b = &buffers[*buffer];
                let size = b.ty.size();
                let elems = (b.init.len() / size) as u64;
                known(
                    CmdKind::set_offset(index, bytes.len() / size, elems, size, loops).map(|_| ()),
                )?;
            }
            CmdKind::Launch {
                grid,
                block,
                dynamic_smem,
                args,
                ..
            } => {
                let lens = |b: usize| buffers[b].init.len() as u64;
                known(
                    CmdKind::launch_values(
                        grid,
                        block,
                        dynamic_smem,
                        args,
                        &lens,
                        &|_| 0,
                        &|_| 0,
                        loops,
                    )
                    .map(|_| ()),
                )?;
            }
            CmdKind::Repeat { times, body } => match CmdKind::times(times, loops) {
                Ok(n) => {
                    for i in 0..n {
                        if *budget == 0 {
                            break;
                        }
                        loops.push(Some(i as i64));
                        let r = check_values(body, loops, buffers, budget);
                        loops.pop();
                        r?;
                    }
                }
                Err(ValueError::Unknown) => {
                    loops.push(None);
                    let r = check_values(body, loops, buffers, budget);
                    loops.pop();
                    r?;
                }
                Err(ValueError::Bad(e)) => return Err(e),
            },
            CmdKind::RepeatUntilZero { body, .. } => {
                // The first iteration always runs; how many follow is known only then.
                for index in [Some(0), None] {
                    loops.push(index);
                    let r = check_values(body, loops, buffers, budget);
                    loops.pop();
                    r?;
                }
            }
            CmdKind::Sync { .. } | CmdKind::Dump { .. } => {}
        }
    }
    Ok(())
}

/// `a` or `an` before a type's name, as it is read (`an f32`, `a u32`).
fn article(name: &str) -> &'static str {
    if name.starts_with(['f', 's']) {
        "an"
    } else {
        "a"
    }
}

/// A PTX type's name without its dot (`u32`).
fn ty_name(t: kir::Ty) -> String {
    format!("{t:?}").to_lowercase()
}

/// The commands the load-time check follows through the loops of a process when it is loaded.
pub const LOAD_CHECK_BUDGET: u32 = 1 << 16;

/// What names mean in an expression: constants, then the indices of enclosing loops.
struct NameScope<'a> {
    constants: &'a BTreeMap<String, i64>,
    loops: &'a [Option<String>],
}

impl crate::expr::Scope for NameScope<'_> {
    fn constant(&self, name: &str) -> Option<Result<i64, String>> {
        self.constants.get(name).map(|v| Ok(*v))
    }

    fn loop_depth(&self, name: &str) -> Option<usize> {
        self.loops.iter().rposition(|l| l.as_deref() == Some(name))
    }

    fn names(&self) -> Vec<String> {
        self.constants
            .keys()
            .cloned()
            .chain(self.loops.iter().flatten().cloned())
            .collect()
    }
}

/// A kernel of a process's PTX: its name, its C++ name when mangled, its parameters.
#[derive(Clone, Debug)]
struct KernelSig {
    name: String,
    cxx: Option<String>,
    params: Vec<kir::module::Param>,
}

impl KernelSig {
    /// The parameters, for messages: `(.u64 a, .u64 b, .u32 n)`.
    fn signature(&self) -> String {
        let p: Vec<String> = self
            .params
            .iter()
            .map(|p| format!(".{} {}", ty_name(p.ty), p.name))
            .collect();
        format!("({})", p.join(", "))
    }
}

/// Names a command list may refer to.
struct Names<'a> {
    buffers: &'a [Buffer],
    textures: &'a [Texture],
    kernels: &'a [KernelSig],
    ptx_file: &'a str,
    constants: &'a BTreeMap<String, i64>,
    /// The loops around the list, outermost first, with their index's name.
    loops: Vec<Option<String>>,
}

impl<'a> Names<'a> {
    /// The names inside one more loop, whose index is `name`.
    fn inner(&self, name: Option<String>) -> Names<'a> {
        let mut loops = self.loops.clone();
        loops.push(name);
        Names { loops, ..*self }
    }

    fn scope(&self) -> NameScope<'_> {
        NameScope {
            constants: self.constants,
            loops: &self.loops,
        }
    }

    /// The kernel `name` names: its name in the PTX, or its C++ name (`vecadd`,
    /// `ns::vecadd`) when exactly one kernel has it.
    fn kernel(
        &self,
        cx: &Cx,
        name: &Spanned<String>,
        field: &str,
    ) -> Result<&'a KernelSig, ScenarioError> {
        let n = name.get_ref();
        if let Some(k) = self.kernels.iter().find(|k| k.name == *n) {
            return Ok(k);
        }
        let found: Vec<&KernelSig> = self
            .kernels
            .iter()
            .filter(|k| {
                k.cxx
                    .as_deref()
                    .is_some_and(|c| c == n || c.rsplit("::").next() == Some(n.as_str()))
            })
            .collect();
        match found[..] {
            [k] => Ok(k),
            [] => {
                let all: Vec<String> = self
                    .kernels
                    .iter()
                    .map(|k| match &k.cxx {
                        Some(c) => format!("{} ({c})", k.name),
                        None => k.name.clone(),
                    })
                    .collect();
                cx.err(
                    Some(name.span()),
                    field,
                    format!(
                        "no kernel `{n}` in `{}` (it has: {})",
                        self.ptx_file,
                        name_list(all.iter().map(String::as_str))
                    ),
                )
            }
            _ => cx.err(
                Some(name.span()),
                field,
                format!(
                    "`{n}` is ambiguous in `{}`: it names {} (write one of these)",
                    self.ptx_file,
                    found
                        .iter()
                        .map(|k| format!("{} {}", k.name, k.signature()))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
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
    /// Writes the dumps whose `file` is relative under `dir` instead of the scenario file's
    /// directory (absolute `file`s stay as they are).
    pub fn set_dump_dir(&mut self, dir: &Path) {
        for p in &mut self.processes {
            if let Program::Commands(c) = &mut p.program {
                Arc::make_mut(c).dump_dir = dir.to_path_buf();
            }
        }
    }

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
