//! A process's host program, as the host model sees it: a sequence of requests (allocate,
//! copy, launch, synchronise), each answered when the host model has carried it out.
//!
//! Two kinds exist. A [`Commands`] program interprets a scenario's command list over the
//! process's buffers. A [`SuiteHost`] runs a suite kernel's own Rust host program (input
//! generation, its launches and copies, the check against its CPU reference) on a thread of
//! its own, talking to the host model through channels: the thread runs only while the model
//! waits for its next request, so the two take turns and every run is deterministic.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;

use gpu::memory::DeviceMemory;
use gpu::{DevPtr, KernelArg};

use crate::scenario::{Check, Cmd, CmdKind, CommandProgram, Expect, Managed, ValueError};

/// What a program asks of the host model.
#[derive(Debug)]
pub enum Request {
    /// Device memory, holding `init` (or zeros); answered at once with [`Reply::Ptr`].
    /// `managed`: a managed allocation and whether the host wrote it (scenario buffers
    /// with `managed = true`).
    Alloc {
        bytes: u64,
        init: Option<Vec<u8>>,
        managed: Option<memsys::Populate>,
    },
    /// A texture object (`cudaCreateTextureObject`) over texels already in device memory;
    /// answered at once with its handle as [`Reply::Ptr`].
    Texture(gpu::texture::TextureDesc),
    /// A copy on `stream`; a device→host copy's bytes arrive through
    /// [`HostProgram::copied`] with `token`. With `wait`, the program continues when it is
    /// done (cudaMemcpy), else at once (cudaMemcpyAsync).
    Copy {
        to_device: bool,
        dev: u64,
        data: Vec<u8>,
        len: u64,
        stream: u32,
        wait: bool,
        token: u64,
    },
    /// A kernel launch on `stream`; with `wait`, the program continues when it has finished.
    Launch {
        kernel: String,
        grid: [u32; 3],
        block: [u32; 3],
        dynamic_smem: u32,
        args: Vec<KernelArg>,
        stream: u32,
        wait: bool,
        /// Where it is written, for errors.
        at: String,
    },
    /// Wait until `stream` (or every stream) has nothing left.
    Sync { stream: Option<u32> },
    /// A blocking device→host copy of `len` bytes at `dev` on `stream`, as [`Request::Copy`]
    /// takes one, whose bytes go to the run's dumps ([`crate::system::Dumped`]), not to
    /// the program.
    Dump {
        dev: u64,
        len: u64,
        stream: u32,
        file: DumpFile,
    },
    /// The program has ended.
    Done,
}

/// Where a dump goes and what the `.npy` file declares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DumpFile {
    pub path: std::path::PathBuf,
    pub buffer: String,
    pub ty: crate::data::ElemType,
    pub shape: Vec<u64>,
    /// The command (`file:line:col (field)`).
    pub at: String,
}

/// The answer to the last request.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    /// The first call.
    Start,
    Ptr(u64),
    Done,
}

/// Whether a finished program's results were right.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Verdict {
    pub verified: bool,
    /// What was checked, or the first mismatch.
    pub detail: String,
}

/// A host program.
pub trait HostProgram {
    /// The next request, given the answer to the previous one.
    fn next(&mut self, reply: Reply) -> Result<Request, String>;
    /// The bytes of a finished device→host copy.
    fn copied(&mut self, token: u64, data: &[u8]);
    /// Checks the results once the program is done (device memory as it is then).
    fn finish(&mut self, mem: &DeviceMemory) -> Verdict;
    /// Where the program is (the command it is at), for messages.
    fn position(&self) -> Option<String> {
        None
    }
    /// Whether it begins with a setup that runs once before it serves requests
    /// (`[[process.setup]]`, a suite program's warm-up): each request then runs its body
    /// again on the same memory ([`HostProgram::again`]) instead of starting afresh.
    fn has_setup(&self) -> bool {
        false
    }
    /// Its setup, or the request before, has ended (`mem`: device memory then): the next
    /// run is one more pass of its body on the same memory. An error when the setup went
    /// wrong (a suite program whose results do not match its CPU reference).
    fn again(&mut self, _mem: &DeviceMemory) -> Result<(), String> {
        Err("internal: the program has no setup to serve requests after".into())
    }
}

/// The most commands a command list runs between two requests to the host (loop
/// bookkeeping and host-side `set`s): a loop over `set`s alone longer than this is an error.
pub const MAX_STEPS_PER_CALL: u32 = 1 << 22;

/// A scenario's command list over the process's buffers.
pub struct Commands {
    program: Arc<CommandProgram>,
    ptrs: Vec<u64>,
    /// The texture objects' handles, made once every buffer is allocated.
    textures: Vec<u64>,
    /// Host copies of the buffers, made when the program first changes one (a `set`, a
    /// copy back); until then a buffer's host copy is its initial contents in the program,
    /// which every run of the program shares. (A buffer no command changes on the host is
    /// then held twice, here and in device memory, not three times.)
    mirrors: Vec<Option<Vec<u8>>>,
    frames: Vec<Frame>,
    /// The check of a `repeat_until_zero` whose word is being copied back.
    checking: bool,
}

struct Frame {
    cmds: Arc<[Cmd]>,
    pc: usize,
    kind: FrameKind,
}

enum FrameKind {
    Top,
    Repeat {
        left: u64,
        times: u64,
    },
    Until {
        buffer: usize,
        offset: u64,
        width: u32,
        iterations: u64,
        max: u64,
        at: String,
    },
}

/// Copies carry their buffer and offset in the token.
fn token(buffer: usize, offset: u64) -> u64 {
    ((buffer as u64) << 40) | offset
}

impl Commands {
    pub fn new(program: Arc<CommandProgram>) -> Commands {
        let mirrors = program.buffers.iter().map(|_| None).collect();
        // With a setup, the first run is the setup alone; the commands are each request's.
        let first = if program.setup.is_empty() {
            &program.commands
        } else {
            &program.setup
        };
        Commands {
            frames: vec![Frame {
                cmds: first.clone().into(),
                pc: 0,
                kind: FrameKind::Top,
            }],
            program,
            ptrs: Vec::new(),
            textures: Vec::new(),
            mirrors,
            checking: false,
        }
    }

    /// The host's copy of `buffer`.
    fn host(&self, buffer: usize) -> &[u8] {
        self.mirrors[buffer]
            .as_deref()
            .unwrap_or(&self.program.buffers[buffer].init)
    }

    /// The host's copy of `buffer`, to change: made from the initial contents the first
    /// time.
    fn host_mut(&mut self, buffer: usize) -> &mut [u8] {
        let program = &self.program;
        self.mirrors[buffer].get_or_insert_with(|| program.buffers[buffer].init.clone())
    }

    /// The iteration (from 0) of every enclosing loop, outermost first.
    fn loops(&self) -> Vec<Option<i64>> {
        self.frames
            .iter()
            .filter_map(|f| match f.kind {
                FrameKind::Repeat { left, times } => Some(Some((times - left) as i64)),
                FrameKind::Until { iterations, .. } => Some(Some(iterations as i64 - 1)),
                FrameKind::Top => None,
            })
            .collect()
    }
}

/// A value's error as the run reports it (every loop index is known when it runs).
fn bad(e: ValueError) -> String {
    match e {
        ValueError::Bad(e) => e.to_string(),
        ValueError::Unknown => unreachable!("every loop index is known while running"),
    }
}

impl HostProgram for Commands {
    fn next(&mut self, reply: Reply) -> Result<Request, String> {
        if let Reply::Ptr(p) = reply {
            if self.ptrs.len() < self.program.buffers.len() {
                self.ptrs.push(p);
            } else {
                self.textures.push(p);
            }
        }
        // Every buffer is allocated first, holding its initial contents; then the texture
        // objects over them are made.
        if self.ptrs.len() < self.program.buffers.len() {
            let b = &self.program.buffers[self.ptrs.len()];
            return Ok(Request::Alloc {
                bytes: b.init.len() as u64,
                init: Some(b.init.clone()),
                managed: b.managed,
            });
        }
        if let Some(t) = self.program.textures.get(self.textures.len()) {
            let mut desc = t.desc.clone();
            desc.base += self.ptrs[t.buffer];
            return Ok(Request::Texture(desc));
        }
        if self.checking {
            self.checking = false;
            let frame = self.frames.last_mut().expect("the loop's frame");
            let FrameKind::Until {
                buffer,
                offset,
                width,
                iterations,
                max,
                ref at,
            } = frame.kind
            else {
                unreachable!("only a repeat_until_zero checks");
            };
            // Fields, not `host`: `frame` borrows `self.frames`.
            let host = self.mirrors[buffer]
                .as_deref()
                .unwrap_or(&self.program.buffers[buffer].init);
            let word = &host[offset as usize..(offset + u64::from(width)) as usize];
            if word.iter().all(|&b| b == 0) {
                self.frames.pop();
            } else if iterations >= max {
                return Err(format!(
                    "{at}: repeat_until_zero did not end within {max} iterations (max_iterations)"
                ));
            } else {
                frame.pc = 0;
                if let FrameKind::Until { iterations, .. } = &mut frame.kind {
                    *iterations += 1;
                }
            }
        }
        let mut steps = 0u32;
        loop {
            // Loops are run lazily, one command at a time, but a loop of host-side `set`s
            // asks the host for nothing: bounded, or it would never give time a chance.
            steps += 1;
            if steps > MAX_STEPS_PER_CALL {
                return Err(format!(
                    "{}: more than {MAX_STEPS_PER_CALL} commands without a copy, launch or sync (an endless loop of sets?)",
                    self.position().unwrap_or_default()
                ));
            }
            let Some(frame) = self.frames.last_mut() else {
                return Ok(Request::Done);
            };
            if frame.pc == frame.cmds.len() {
                match &mut frame.kind {
                    FrameKind::Top => {
                        self.frames.pop();
                    }
                    FrameKind::Repeat { left, .. } => {
                        *left -= 1;
                        if *left == 0 {
                            self.frames.pop();
                        } else {
                            frame.pc = 0;
                        }
                    }
                    FrameKind::Until {
                        buffer,
                        offset,
                        width,
                        ..
                    } => {
                        // The host reads the word back (a blocking copy) and decides.
                        self.checking = true;
                        return Ok(Request::Copy {
                            to_device: false,
                            dev: self.ptrs[*buffer] + *offset,
                            data: Vec::new(),
                            len: u64::from(*width),
                            stream: 0,
                            wait: true,
                            token: token(*buffer, *offset),
                        });
                    }
                }
                continue;
            }
            // The list is shared: the command is read in place, not copied.
            let cmds = frame.cmds.clone();
            let cmd = &cmds[frame.pc];
            frame.pc += 1;
            match cmd.kind {
                CmdKind::Copy {
                    buffer,
                    to_device,
                    ref offset,
                    ref bytes,
                    stream,
                    blocking,
                } => {
                    let buf = (
                        self.program.buffers[buffer].name.as_str(),
                        self.host(buffer).len() as u64,
                    );
                    let (offset, bytes) =
                        CmdKind::copy_range(offset, bytes, buf, &self.loops()).map_err(bad)?;
                    let data = if to_device {
                        self.host(buffer)[offset as usize..(offset + bytes) as usize].to_vec()
                    } else {
                        Vec::new()
                    };
                    return Ok(Request::Copy {
                        to_device,
                        dev: self.ptrs[buffer] + offset,
                        data,
                        len: bytes,
                        stream,
                        wait: blocking,
                        token: token(buffer, offset),
                    });
                }
                CmdKind::Launch {
                    ref kernel,
                    ref grid,
                    ref block,
                    ref dynamic_smem,
                    ref args,
                    stream,
                } => {
                    let lens = |b: usize| self.host(b).len() as u64;
                    let ptr = |b: usize| self.ptrs[b];
                    let tex = |t: usize| self.textures[t];
                    let loops = self.loops();
                    let v = CmdKind::launch_values(
                        grid,
                        block,
                        dynamic_smem,
                        args,
                        &lens,
                        &ptr,
                        &tex,
                        &loops,
                    )
                    .map_err(bad)?;
                    return Ok(Request::Launch {
                        kernel: kernel.clone(),
                        grid: v.grid,
                        block: v.block,
                        dynamic_smem: v.dynamic_smem,
                        args: v.args,
                        stream,
                        wait: false,
                        at: format!("{} ({})", cmd.at, cmd.field),
                    });
                }
                CmdKind::Repeat {
                    ref times,
                    ref body,
                } => {
                    let times = CmdKind::times(times, &self.loops()).map_err(bad)?;
                    let body = body.clone();
                    if times > 0 {
                        self.frames.push(Frame {
                            cmds: body,
                            pc: 0,
                            kind: FrameKind::Repeat { left: times, times },
                        });
                    }
                }
                CmdKind::RepeatUntilZero {
                    buffer,
                    offset,
                    width,
                    max_iterations,
                    ref body,
                } => self.frames.push(Frame {
                    cmds: body.clone(),
                    pc: 0,
                    kind: FrameKind::Until {
                        buffer,
                        offset,
                        width,
                        iterations: 1,
                        max: max_iterations,
                        at: format!("{} ({})", cmd.at, cmd.field),
                    },
                }),
                CmdKind::Sync { stream } => return Ok(Request::Sync { stream }),
                CmdKind::Dump {
                    buffer,
                    ty,
                    ref shape,
                    ref file,
                    stream,
                } => {
                    return Ok(Request::Dump {
                        dev: self.ptrs[buffer],
                        len: self.host(buffer).len() as u64,
                        stream,
                        file: DumpFile {
                            path: self.program.dump_path(file),
                            buffer: self.program.buffers[buffer].name.clone(),
                            ty,
                            shape: shape.clone(),
                            at: format!("{} ({})", cmd.at, cmd.field),
                        },
                    });
                }
                CmdKind::Set {
                    buffer,
                    ref index,
                    ref bytes,
                } => {
                    let ty = self.program.buffers[buffer].ty;
                    let elems = (self.host(buffer).len() / ty.size()) as u64;
                    let values = bytes.len() / ty.size();
                    let loops = self.loops();
                    let at = CmdKind::set_offset(index, values, elems, ty.size(), &loops)
                        .map_err(bad)? as usize;
                    self.host_mut(buffer)[at..at + bytes.len()].copy_from_slice(bytes);
                }
            }
        }
    }

    fn position(&self) -> Option<String> {
        // The command that ran last (the one the program waits in, or the loop it is in).
        self.frames.iter().rev().find_map(|f| {
            let c = f.cmds.get(f.pc.checked_sub(1)?)?;
            Some(format!("{} ({})", c.at, c.field))
        })
    }

    fn copied(&mut self, token: u64, data: &[u8]) {
        let (buffer, offset) = ((token >> 40) as usize, (token & ((1 << 40) - 1)) as usize);
        if offset == 0 && data.len() == self.host(buffer).len() {
            // The whole buffer: no need to copy the initial contents first.
            self.mirrors[buffer] = Some(data.to_vec());
        } else {
            self.host_mut(buffer)[offset..offset + data.len()].copy_from_slice(data);
        }
    }

    fn has_setup(&self) -> bool {
        !self.program.setup.is_empty()
    }

    fn again(&mut self, _: &DeviceMemory) -> Result<(), String> {
        // The buffers stay allocated (`ptrs`) and their host copies as they are.
        self.frames = vec![Frame {
            cmds: self.program.commands.clone().into(),
            pc: 0,
            kind: FrameKind::Top,
        }];
        self.checking = false;
        Ok(())
    }

    fn finish(&mut self, mem: &DeviceMemory) -> Verdict {
        if self.program.checks.is_empty() {
            return Verdict {
                verified: true,
                detail: "ran; no [[process.check]]".into(),
            };
        }
        let mut checked = 0usize;
        for c in self.check_all(mem) {
            checked += c.checked;
            if let Some(d) = c.failure() {
                return Verdict {
                    verified: false,
                    detail: d,
                };
            }
        }
        Verdict {
            verified: true,
            detail: format!("{checked} values match"),
        }
    }
}

/// What one `[[process.check]]` found.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct CheckOutcome {
    pub buffer: String,
    /// Values compared.
    pub checked: usize,
    pub mismatches: usize,
    /// The first mismatch (`y[3]: got 1, want 2`), or why nothing could be compared.
    pub first: Option<String>,
}

impl CheckOutcome {
    /// What went wrong, as a verdict says it; `None` if it passed.
    pub fn failure(&self) -> Option<String> {
        let first = self.first.as_ref()?;
        Some(if self.mismatches == 0 {
            first.clone()
        } else {
            format!("{} mismatches; first {first}", self.mismatches)
        })
    }
}

impl Commands {
    /// Every check of the program against device memory `mem`, in order (after the
    /// program has ended).
    pub fn check_all(&self, mem: &DeviceMemory) -> Vec<CheckOutcome> {
        self.program
            .checks
            .iter()
            .map(|c| {
                let b = &self.program.buffers[c.buffer];
                match mem.read_bytes(self.ptrs[c.buffer], b.init.len() as u64) {
                    Ok(bytes) => check(c, &b.name, b.ty, bytes),
                    Err(_) => CheckOutcome {
                        buffer: b.name.clone(),
                        checked: 0,
                        mismatches: 0,
                        first: Some(format!("buffer `{}` is no longer allocated", b.name)),
                    },
                }
            })
            .collect()
    }
}

/// How many representable values of `ty` (f32 or f64) lie between `a` and `b`, counting one
/// end (`None` if either is NaN). Both are taken as values of `ty` (an f32 buffer's values
/// are f32s widened).
fn ulps_apart(ty: crate::data::ElemType, a: f64, b: f64) -> Option<u64> {
    if a.is_nan() || b.is_nan() {
        return None;
    }
    // The bit patterns, ordered as the values are (negative floats count down from zero).
    let ordered = |x: f64| -> i128 {
        if ty == crate::data::ElemType::F32 {
            let i = i128::from((x as f32).to_bits() as i32);
            if i < 0 {
                i128::from(i32::MIN) - i
            } else {
                i
            }
        } else {
            let i = i128::from(x.to_bits() as i64);
            if i < 0 {
                i128::from(i64::MIN) - i
            } else {
                i
            }
        }
    };
    u64::try_from((ordered(a) - ordered(b)).unsigned_abs()).ok()
}

/// Compares a buffer with a check.
fn check(c: &Check, name: &str, ty: crate::data::ElemType, bytes: &[u8]) -> CheckOutcome {
    let n = bytes.len() / ty.size();
    let (count, want): (usize, Box<dyn Fn(usize) -> f64 + '_>) = match &c.expect {
        Expect::Values(v) => (v.len(), Box::new(|i| v[i])),
        Expect::Fill(f) => (n, Box::new(move |_| *f)),
        Expect::Bytes(b) => (n, Box::new(move |i| ty.decode(b, i))),
    };
    let mut mismatches = 0;
    let mut first = None;
    for i in 0..count {
        let (got, want) = (ty.decode(bytes, i), want(i));
        let ok = if ty.is_float() {
            got == want
                || (got - want).abs() <= c.tolerance * want.abs().max(f64::MIN_POSITIVE)
                || (got - want).abs() <= c.abs_tolerance
                || (c.ulps > 0 && ulps_apart(ty, got, want).is_some_and(|u| u <= c.ulps))
                || (got.is_nan() && want.is_nan())
        } else {
            got == want
        };
        if !ok {
            mismatches += 1;
            first.get_or_insert(format!("{name}[{i}]: got {got}, want {want}"));
        }
    }
    CheckOutcome {
        buffer: name.to_string(),
        checked: count,
        mismatches,
        first,
    }
}

/// What the host program's thread asks for.
enum FromThread {
    /// Bytes, and whether the program zeroes the allocation and never writes it
    /// (`suite::Device::alloc_zeroed`).
    Alloc(u64, bool),
    Write(u64, Vec<u8>),
    Read(u64, u64),
    Launch {
        entry: String,
        grid: [u32; 3],
        block: [u32; 3],
        dynamic_smem: u32,
        args: Vec<KernelArg>,
    },
    Finished(Result<suite::Verification, suite::DeviceError>),
}

/// What the host model answers.
enum ToThread {
    Ptr(u64),
    Done,
    Data(Vec<u8>),
}

/// The `suite::Device` the thread's host program drives.
struct Proxy {
    tx: Sender<FromThread>,
    rx: Receiver<ToThread>,
    /// [`SuiteHost::managed`]: a zeroed allocation is managed memory the host never
    /// writes (under [`Managed::All`] and [`Managed::Unwritten`]).
    managed: Managed,
}

impl Proxy {
    fn ask(&mut self, r: FromThread) -> Result<ToThread, suite::DeviceError> {
        let gone = || suite::DeviceError("the scenario stopped".into());
        self.tx.send(r).map_err(|_| gone())?;
        self.rx.recv().map_err(|_| gone())
    }
}

fn unexpected() -> suite::DeviceError {
    suite::DeviceError("unexpected answer from the host model".into())
}

impl suite::Device for Proxy {
    fn alloc(&mut self, bytes: u64) -> Result<suite::DevPtr, suite::DeviceError> {
        match self.ask(FromThread::Alloc(bytes, false))? {
            ToThread::Ptr(p) => Ok(suite::DevPtr(p)),
            _ => Err(unexpected()),
        }
    }

    fn alloc_zeroed(&mut self, bytes: u64) -> Result<suite::DevPtr, suite::DeviceError> {
        let ptr = match self.ask(FromThread::Alloc(bytes, true))? {
            ToThread::Ptr(p) => suite::DevPtr(p),
            _ => return Err(unexpected()),
        };
        // Managed memory the host never writes reads as zeros (the UVM driver zeroes the
        // pages it populates): no copy, so its faults allocate without migrating.
        if self.managed == Managed::Off {
            self.write(ptr, &vec![0u8; bytes as usize])?;
        }
        Ok(ptr)
    }

    fn write(&mut self, dst: suite::DevPtr, data: &[u8]) -> Result<(), suite::DeviceError> {
        match self.ask(FromThread::Write(dst.0, data.to_vec()))? {
            ToThread::Done => Ok(()),
            _ => Err(unexpected()),
        }
    }

    fn read(&mut self, src: suite::DevPtr, len: u64) -> Result<Vec<u8>, suite::DeviceError> {
        match self.ask(FromThread::Read(src.0, len))? {
            ToThread::Data(d) => Ok(d),
            _ => Err(unexpected()),
        }
    }

    fn launch(&mut self, l: &suite::Launch<'_>) -> Result<(), suite::DeviceError> {
        let args = l
            .args
            .iter()
            .map(|a| match *a {
                suite::Arg::Ptr(p) => KernelArg::Ptr(DevPtr(p.0)),
                suite::Arg::U32(v) => KernelArg::U32(v),
                suite::Arg::I32(v) => KernelArg::I32(v),
                suite::Arg::U64(v) => KernelArg::U64(v),
                suite::Arg::F32(v) => KernelArg::F32(v),
                suite::Arg::F64(v) => KernelArg::F64(v),
            })
            .collect();
        match self.ask(FromThread::Launch {
            entry: l.entry.to_string(),
            grid: [l.grid.x, l.grid.y, l.grid.z],
            block: [l.block.x, l.block.y, l.block.z],
            dynamic_smem: l.dynamic_smem,
            args,
        })? {
            ToThread::Done => Ok(()),
            _ => Err(unexpected()),
        }
    }
}

/// A suite kernel's host program on its own thread, started when the process first runs
/// (not when the scenario is loaded) and ended when the program finishes, so a scenario of
/// many processes holds threads only for those between their arrival and their end.
pub struct SuiteHost {
    /// What to start; `None` once started.
    start: Option<(&'static dyn suite::Kernel, suite::Size, u64)>,
    /// Which allocations are managed (`cudaMallocManaged`), each starting unpopulated: the
    /// system marks what the host then writes as host data.
    managed: Managed,
    tx: Option<Sender<ToThread>>,
    rx: Option<Receiver<FromThread>>,
    /// What the thread waits for: the kind of answer its last request needs.
    waiting: Option<Pending>,
    data: Vec<u8>,
    outcome: Option<Result<suite::Verification, suite::DeviceError>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

enum Pending {
    Ptr,
    Done,
    Data,
}

impl SuiteHost {
    pub fn start(kernel: &'static dyn suite::Kernel, size: suite::Size, seed: u64) -> SuiteHost {
        SuiteHost {
            start: Some((kernel, size, seed)),
            managed: Managed::Off,
            tx: None,
            rx: None,
            waiting: None,
            data: Vec::new(),
            outcome: None,
            thread: None,
        }
    }

    /// The program with its allocations managed (`cudaMallocManaged`) as `managed` says:
    /// each starts unpopulated, and what the host writes into it becomes host data that a
    /// GPU fault migrates (papers/tanasic-thesis §6.4.2: pages the host never wrote — the
    /// kernel's outputs, its own heap — are only allocated and mapped).
    pub fn managed(mut self, managed: Managed) -> SuiteHost {
        self.managed = managed;
        self
    }

    /// Starts the thread; the system refusing one (too many threads, no address space) is
    /// an error of the process, not a panic.
    fn spawn(&mut self) -> Result<(), String> {
        let Some((kernel, size, seed)) = self.start.take() else {
            return Ok(());
        };
        let (to_model, from_thread) = channel();
        let (to_thread, from_model) = channel();
        let managed = self.managed;
        let thread = std::thread::Builder::new()
            .name(format!("host:{}", kernel.name()))
            .spawn(move || {
                let mut proxy = Proxy {
                    tx: to_model,
                    rx: from_model,
                    managed,
                };
                let r = kernel.run(&mut proxy, size, seed);
                let _ = proxy.tx.send(FromThread::Finished(r));
            })
            .map_err(|e| format!("cannot start the host program's thread: {e}"))?;
        self.tx = Some(to_thread);
        self.rx = Some(from_thread);
        self.thread = Some(thread);
        Ok(())
    }
}

impl HostProgram for SuiteHost {
    fn next(&mut self, reply: Reply) -> Result<Request, String> {
        self.spawn()?;
        let (Some(tx), Some(rx)) = (&self.tx, &self.rx) else {
            return Err("the host program has finished".into());
        };
        if let Some(p) = self.waiting.take() {
            let answer = match (p, reply) {
                (Pending::Ptr, Reply::Ptr(x)) => ToThread::Ptr(x),
                (Pending::Done, Reply::Done) => ToThread::Done,
                (Pending::Data, Reply::Done) => ToThread::Data(std::mem::take(&mut self.data)),
                _ => return Err("internal: an answer of the wrong kind".into()),
            };
            tx.send(answer)
                .map_err(|_| "the host program's thread stopped".to_string())?;
        }
        let r = rx
            .recv()
            .map_err(|_| "the host program's thread stopped (it panicked?)".to_string())?;
        Ok(match r {
            FromThread::Alloc(bytes, zeroed) => {
                self.waiting = Some(Pending::Ptr);
                let managed = match self.managed {
                    Managed::Off => false,
                    Managed::All => true,
                    Managed::Unwritten => zeroed,
                };
                Request::Alloc {
                    bytes,
                    init: None,
                    managed: managed.then_some(memsys::Populate::Unpopulated),
                }
            }
            FromThread::Write(dev, data) => {
                self.waiting = Some(Pending::Done);
                Request::Copy {
                    to_device: true,
                    dev,
                    len: data.len() as u64,
                    data,
                    stream: 0,
                    wait: true,
                    token: 0,
                }
            }
            FromThread::Read(dev, len) => {
                self.waiting = Some(Pending::Data);
                Request::Copy {
                    to_device: false,
                    dev,
                    data: Vec::new(),
                    len,
                    stream: 0,
                    wait: true,
                    token: 0,
                }
            }
            FromThread::Launch {
                entry,
                grid,
                block,
                dynamic_smem,
                args,
            } => {
                self.waiting = Some(Pending::Done);
                Request::Launch {
                    at: format!("host program of `{entry}`"),
                    kernel: entry,
                    grid,
                    block,
                    dynamic_smem,
                    args,
                    stream: 0,
                    wait: true,
                }
            }
            FromThread::Finished(r) => {
                self.outcome = Some(r);
                if let Some(t) = self.thread.take() {
                    let _ = t.join();
                }
                Request::Done
            }
        })
    }

    fn copied(&mut self, _: u64, data: &[u8]) {
        self.data = data.to_vec();
    }

    fn finish(&mut self, _: &DeviceMemory) -> Verdict {
        match &self.outcome {
            Some(Ok(suite::Verification::Passed { checked })) => Verdict {
                verified: true,
                detail: format!("{checked} values match the CPU reference"),
            },
            Some(Ok(suite::Verification::Failed { mismatches, first })) => Verdict {
                verified: false,
                detail: format!("{mismatches} mismatches with the CPU reference: {first}"),
            },
            Some(Err(e)) => Verdict {
                verified: false,
                detail: e.to_string(),
            },
            None => Verdict {
                verified: false,
                detail: "the host program did not finish".into(),
            },
        }
    }
}

/// A suite host program serving requests after a warm-up (`warm_up = true`): its first run
/// is the whole program (allocations, input copies, launches, read-backs, the check
/// against its CPU reference), the process's setup; each request then runs the launches
/// that run made, in order and with the same arguments, on the same buffers, and is checked
/// to leave every buffer byte for byte as the setup did. So a request costs its kernels
/// alone, as an inference server's does once its inputs are resident; a program whose
/// launches do not give the same results when run again on their own outputs (one that
/// updates its inputs in place) fails that check rather than passing unverified.
pub struct ServedSuite {
    host: SuiteHost,
    /// The setup's launches, as requests to make again.
    launches: Vec<Replay>,
    /// The setup's allocations (address, bytes), and their contents when it ended.
    allocs: Vec<(u64, u64)>,
    expected: Vec<Vec<u8>>,
    /// The size of an allocation asked for and not yet answered.
    asked: Option<u64>,
    /// Serving requests (the setup has ended), and the next launch of this request.
    serving: bool,
    next: usize,
}

/// A launch of the setup, to make again.
struct Replay {
    kernel: String,
    grid: [u32; 3],
    block: [u32; 3],
    dynamic_smem: u32,
    args: Vec<KernelArg>,
    stream: u32,
    wait: bool,
    at: String,
}

impl ServedSuite {
    pub fn start(kernel: &'static dyn suite::Kernel, size: suite::Size, seed: u64) -> ServedSuite {
        ServedSuite::with_host(SuiteHost::start(kernel, size, seed))
    }

    /// Serves requests with `host` as its setup.
    pub fn with_host(host: SuiteHost) -> ServedSuite {
        ServedSuite {
            host,
            launches: Vec::new(),
            allocs: Vec::new(),
            expected: Vec::new(),
            asked: None,
            serving: false,
            next: 0,
        }
    }
}

impl HostProgram for ServedSuite {
    fn next(&mut self, reply: Reply) -> Result<Request, String> {
        if self.serving {
            let Some(l) = self.launches.get(self.next) else {
                return Ok(Request::Done);
            };
            self.next += 1;
            return Ok(Request::Launch {
                kernel: l.kernel.clone(),
                grid: l.grid,
                block: l.block,
                dynamic_smem: l.dynamic_smem,
                args: l.args.clone(),
                stream: l.stream,
                wait: l.wait,
                at: format!("{} (request)", l.at),
            });
        }
        if let (Some(bytes), Reply::Ptr(p)) = (self.asked.take(), &reply) {
            self.allocs.push((*p, bytes));
        }
        let r = self.host.next(reply)?;
        match &r {
            Request::Alloc { bytes, .. } => self.asked = Some(*bytes),
            Request::Launch {
                kernel,
                grid,
                block,
                dynamic_smem,
                args,
                stream,
                wait,
                at,
            } => self.launches.push(Replay {
                kernel: kernel.clone(),
                grid: *grid,
                block: *block,
                dynamic_smem: *dynamic_smem,
                args: args.clone(),
                stream: *stream,
                wait: *wait,
                at: at.clone(),
            }),
            _ => {}
        }
        Ok(r)
    }

    fn copied(&mut self, token: u64, data: &[u8]) {
        if !self.serving {
            self.host.copied(token, data);
        }
    }

    fn finish(&mut self, mem: &DeviceMemory) -> Verdict {
        if !self.serving {
            return self.host.finish(mem);
        }
        for (i, (&(a, n), want)) in self.allocs.iter().zip(&self.expected).enumerate() {
            let same = mem.read_bytes(a, n).is_ok_and(|got| got == want.as_slice());
            if !same {
                return Verdict {
                    verified: false,
                    detail: format!(
                        "allocation {i} ({n} bytes) differs from the verified warm-up run's"
                    ),
                };
            }
        }
        Verdict {
            verified: true,
            detail: format!(
                "{} allocations as the verified warm-up run left them",
                self.allocs.len()
            ),
        }
    }

    fn has_setup(&self) -> bool {
        true
    }

    fn again(&mut self, mem: &DeviceMemory) -> Result<(), String> {
        if !self.serving {
            let v = self.host.finish(mem);
            if !v.verified {
                return Err(format!("its warm-up run did not verify: {}", v.detail));
            }
            self.expected = self
                .allocs
                .iter()
                .map(|&(a, n)| mem.read_bytes(a, n).map(<[u8]>::to_vec))
                .collect::<Result<_, _>>()
                .map_err(|e| format!("internal: a warm-up allocation is gone: {e:?}"))?;
            self.serving = true;
        }
        self.next = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::ElemType;
    use crate::scenario::{Check, Expect};

    fn f32_bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn passes(c: &Check, ty: ElemType, bytes: &[u8]) -> bool {
        check(c, "b", ty, bytes).first.is_none()
    }

    fn want(v: f64, tolerance: f64, abs_tolerance: f64, ulps: u64) -> Check {
        Check {
            buffer: 0,
            expect: Expect::Fill(v),
            tolerance,
            abs_tolerance,
            ulps,
        }
    }

    #[test]
    fn a_float_passes_within_any_one_tolerance() {
        // 1 and the next f32 above it, 2^-23 ≈ 1.19e-7 apart: one ULP.
        let next = f32::from_bits(1.0f32.to_bits() + 1);
        let got = f32_bytes(&[next]);
        assert!(!passes(&want(1.0, 0.0, 0.0, 0), ElemType::F32, &got));
        assert!(passes(&want(1.0, 0.0, 0.0, 1), ElemType::F32, &got));
        assert!(passes(&want(1.0, 0.0, 2e-7, 0), ElemType::F32, &got));
        assert!(!passes(&want(1.0, 0.0, 1e-7, 0), ElemType::F32, &got));
        assert!(passes(&want(1.0, 2e-7, 0.0, 0), ElemType::F32, &got));
        // Two ULPs away needs two.
        let two = f32_bytes(&[f32::from_bits(1.0f32.to_bits() + 2)]);
        assert!(!passes(&want(1.0, 0.0, 0.0, 1), ElemType::F32, &two));
        assert!(passes(&want(1.0, 0.0, 0.0, 2), ElemType::F32, &two));
    }

    #[test]
    fn ulps_count_the_buffer_types_values_across_zero() {
        // The smallest positive and negative f32 are two ULPs apart (±0 between them).
        let tiny = f32::from_bits(1);
        let got = f32_bytes(&[-tiny]);
        assert!(!passes(
            &want(f64::from(tiny), 0.0, 0.0, 1),
            ElemType::F32,
            &got
        ));
        assert!(passes(
            &want(f64::from(tiny), 0.0, 0.0, 2),
            ElemType::F32,
            &got
        ));
        // In an f64 buffer, one f64 ULP of 1.0 is far below one f32 ULP.
        let next = f64::from_bits(1.0f64.to_bits() + 1);
        let got = next.to_le_bytes().to_vec();
        assert!(passes(&want(1.0, 0.0, 0.0, 1), ElemType::F64, &got));
        assert_eq!(ulps_apart(ElemType::F64, 1.0, next), Some(1));
        assert_eq!(ulps_apart(ElemType::F32, 1.0, f64::NAN), None);
    }

    #[test]
    fn integers_must_be_equal_whatever_the_tolerances() {
        let got = 5u32.to_le_bytes().to_vec();
        assert!(!passes(&want(4.0, 1.0, 10.0, 100), ElemType::U32, &got));
        assert!(passes(&want(5.0, 0.0, 0.0, 0), ElemType::U32, &got));
    }
}
