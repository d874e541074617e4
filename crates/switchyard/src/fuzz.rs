//! Fuzzing entry points. Each takes arbitrary bytes and must return without panicking or
//! aborting, whatever the bytes: malformed input is an error value, never a crash.
//!
//! The cargo-fuzz targets in `fuzz/` call these for long, coverage-guided runs (see
//! CONTRIBUTING.md); `tests/fuzz.rs` runs each on seeded mutations of real inputs for a few
//! seconds in every test run.
//!
//! [`functional`] goes further than "no panic": it builds a valid but odd kernel from the
//! bytes and runs it on both engines; the functional core and the timed machine must agree
//! on whether it fails and, when neither does, on every byte of memory.

use std::fmt::Write as _;
use std::path::Path;

use gpu::timing::TimedGpu;
use gpu::{Gpu, KernelArg};

use crate::input::{decode, Utf8};

/// The example saxpy kernel: the GPU-configuration and launch-spec targets run on it.
const SAXPY_PTX: &str = include_str!("../../../examples/saxpy/saxpy.ptx");

/// PTX text: parse, lower, type-check and validate, as `switchyard check` does.
pub fn ptx(data: &[u8]) {
    let Ok(text) = decode(data, Utf8::Lenient) else {
        return;
    };
    let _ = Gpu::new().load_ptx("fuzz.ptx", &text);
}

/// A GPU configuration file; one that loads must also build a machine, and that machine
/// must run one warp of saxpy (no shared memory, few registers: a configuration that
/// loads can hold it) to the right answer, or stop at the cycle limit. Panics (a finding)
/// on a wrong answer or any other error: the loader accepted a machine that cannot work.
pub fn gpu_config(data: &[u8]) {
    let Ok(text) = decode(data, Utf8::Strict) else {
        return;
    };
    if let Ok(config) = gpu::config::GpuConfig::from_toml("fuzz.toml", &text) {
        if let Err(e) = one_warp_of_saxpy(config) {
            panic!("a configuration that loads cannot run one warp: {e}\n{text}");
        }
    }
}

/// Core cycles [`gpu_config`] lets its warp take: a configuration with huge latencies
/// stops here, which is a correct outcome.
const CONFIG_MAX_CYCLES: u64 = 200_000;

/// One warp of saxpy on `config`: `Ok` when it computed `y = 2x + y` or stopped at the
/// cycle limit, else what went wrong.
fn one_warp_of_saxpy(config: gpu::config::GpuConfig) -> Result<(), String> {
    const N: u32 = 32;
    let mut timed = TimedGpu::new(config);
    timed.options.max_cycles = Some(CONFIG_MAX_CYCLES);
    let mut gpu = Gpu::timed(timed).map_err(|e| e.to_string())?;
    let module = gpu
        .load_ptx("saxpy.ptx", SAXPY_PTX)
        .map_err(|e| e.to_string())?;
    let (x, y) = (gpu.alloc(4 * u64::from(N)), gpu.alloc(4 * u64::from(N)));
    let words =
        |f: &dyn Fn(u32) -> f32| -> Vec<u8> { (0..N).flat_map(|i| f(i).to_le_bytes()).collect() };
    gpu.copy_to_device(x, &words(&|i| i as f32))
        .map_err(|e| e.to_string())?;
    gpu.copy_to_device(y, &words(&|_| 1.0))
        .map_err(|e| e.to_string())?;
    let args = [
        KernelArg::Ptr(x),
        KernelArg::Ptr(y),
        KernelArg::F32(2.0),
        KernelArg::U32(N),
    ];
    match gpu.launch_timed(module, "saxpy", [1, 1, 1], [N, 1, 1], 0, &args, &mut |_| {}) {
        Ok(_) => {}
        Err(e)
            if e.to_string()
                .contains(&format!("within {CONFIG_MAX_CYCLES} cycles")) =>
        {
            return Ok(())
        }
        Err(e) => return Err(e.to_string()),
    }
    let got = gpu
        .copy_from_device(y, 4 * u64::from(N))
        .map_err(|e| e.to_string())?;
    if got != words(&|i| 2.0 * i as f32 + 1.0) {
        return Err("a wrong result".into());
    }
    Ok(())
}

/// A launch spec (a one-process scenario, run on saxpy's PTX), and the same text as a
/// scenario (the files it names do not exist).
pub fn spec(data: &[u8]) {
    let Ok(text) = decode(data, Utf8::Strict) else {
        return;
    };
    let _ = workload::scenario::parse_spec("fuzz.toml", &text, &NoFiles, ("saxpy.ptx", SAXPY_PTX));
    let _ = workload::scenario::parse("fuzz.toml", &text, &NoFiles);
}

/// Files of a scenario under fuzzing: none exist.
struct NoFiles;

impl workload::scenario::Files for NoFiles {
    fn read(&self, path: &Path) -> Result<Vec<u8>, String> {
        Err(format!("{}: no files while fuzzing", path.display()))
    }
}

/// Warp instructions a generated kernel may execute: enough for every loop the generator
/// can write to run a few times, small enough that a runaway ends at once.
const ODD_INSTRUCTION_LIMIT: u64 = 20_000;

/// A generated kernel run on the functional core and on the timed `gtx480`: both must fail,
/// or both finish with the same memory. Panics (a finding) when they disagree.
///
/// The timed engine runs the kernel as written (`allocate = false`), the program the
/// functional core runs, and, when the kernel has no `shfl`, also after register
/// allocation. A shuffle in divergent code may read a register of an inactive lane, which
/// the PTX ISA leaves undefined: after allocation that lane's physical register may hold
/// another value than its virtual one, and the engines may rightly differ
/// (fuzz/regressions/functional-divergent-shfl).
pub fn functional(data: &[u8]) {
    let _ = engines_agree(data);
}

/// [`functional`], returning how the kernel ended: `Ok` with the memory both engines left,
/// or the functional core's error (the timed engine failed too).
pub fn engines_agree(data: &[u8]) -> Result<Vec<u8>, String> {
    let odd = OddKernel::from_bytes(data);
    let functional = odd.run(None);
    let timed = |allocate: bool| {
        let mut t =
            TimedGpu::new(gpu::config::GpuConfig::preset("gtx480").expect("a built-in preset"));
        t.options.allocate = allocate;
        odd.run(Some(t))
    };
    let mut runs = vec![("as written", timed(false))];
    if !odd.ptx.contains("shfl") {
        runs.push(("allocated", timed(true)));
    }
    for (how, timed) in &runs {
        match (&functional, timed) {
            (Ok(a), Ok(b)) => assert!(
                a == b,
                "the engines disagree on memory (timed {how}) for\n{}",
                odd.ptx
            ),
            (Err(_), Err(_)) => {}
            (a, b) => panic!(
                "one engine failed: functional {:?}, timed {how} {:?}\n{}",
                a.as_ref().err(),
                b.as_ref().err(),
                odd.ptx
            ),
        }
    }
    functional
}

/// A valid-but-odd kernel: every line is valid PTX, the combination is arbitrary (loops that
/// may never end, divisions by zero, shifts past the width, loads outside the input, warp
/// collectives and barriers in divergent code). It has no data race, so both engines must
/// end with the same memory: threads store only to their own words, atomics only add.
pub struct OddKernel {
    pub ptx: String,
    pub grid: u32,
    pub block: u32,
}

/// 32-bit registers a generated kernel computes with (%r0 .. %r7).
const REGS: u8 = 8;
/// Words of the read-only input buffer.
const INPUT_WORDS: u32 = 64;
/// Words each thread owns in the output buffer.
const OWN_WORDS: u32 = 4;

impl OddKernel {
    pub fn from_bytes(data: &[u8]) -> OddKernel {
        let mut bytes = data.iter().copied();
        let mut next = move || bytes.next().unwrap_or(0);
        let grid = u32::from(next() % 3) + 1;
        let block = u32::from(next() % 96) + 1;
        let r = |b: u8| b % REGS;
        let mut body = String::new();
        for i in 0..REGS {
            let _ = writeln!(
                body,
                "\tmov.u32 %r{i}, {};",
                u32::from(next()) * 0x0101_0101
            );
        }
        body.push_str("\tmov.u32 %r0, %tid.x;\n");
        let labels = 4;
        let mut placed = 0;
        let len = 8 + usize::from(next() % 24);
        for _ in 0..len {
            let (op, a, b, c) = (next(), next(), next(), next());
            let (a, b, c) = (r(a), r(b), r(c));
            let line = match op % 20 {
                0 => format!("add.s32 %r{a}, %r{b}, %r{c};"),
                1 => format!("sub.s32 %r{a}, %r{b}, %r{c};"),
                2 => format!("mul.lo.s32 %r{a}, %r{b}, %r{c};"),
                3 => format!("div.s32 %r{a}, %r{b}, %r{c};"),
                4 => format!("rem.u32 %r{a}, %r{b}, %r{c};"),
                5 => format!("shl.b32 %r{a}, %r{b}, %r{c};"),
                6 => format!("shr.s32 %r{a}, %r{b}, %r{c};"),
                7 => format!("xor.b32 %r{a}, %r{b}, %r{c};"),
                8 => format!("max.u32 %r{a}, %r{b}, %r{c};"),
                9 => format!("setp.lt.s32 %p{}, %r{b}, %r{c};", a % 2),
                10 => format!("selp.b32 %r{a}, %r{b}, %r{c}, %p{};", a % 2),
                11 => format!("@%p{} bra L{};", a % 2, b % labels),
                12 => format!("shfl.sync.bfly.b32 %r{a}, %r{b}, {}, 31, -1;", c % 32),
                13 => format!("vote.sync.ballot.b32 %r{a}, %p{}, -1;", b % 2),
                14 => format!(
                    "and.b32 %r8, %r{b}, {};\n\tmul.wide.u32 %rd2, %r8, 4;\n\tadd.s64 %rd2, %rd1, %rd2;\n\tld.global.u32 %r{a}, [%rd2];",
                    // Mostly inside the input, sometimes just past it (a fault).
                    if c % 8 == 0 { 127 } else { INPUT_WORDS - 1 }
                ),
                15 => format!(
                    "and.b32 %r8, %r{b}, {};\n\tadd.s32 %r8, %r8, %r9;\n\tmul.wide.u32 %rd2, %r8, 4;\n\tadd.s64 %rd2, %rd3, %rd2;\n\tst.global.u32 [%rd2], %r{a};",
                    OWN_WORDS - 1
                ),
                16 => format!("red.global.add.u32 [%rd4], %r{a};"),
                17 => "bar.sync 0;".to_string(),
                18 => format!(
                    "cvt.rn.f32.s32 %f1, %r{b};\n\tsqrt.rn.f32 %f1, %f1;\n\tdiv.rn.f32 %f1, %f1, %f1;\n\tcvt.rzi.s32.f32 %r{a}, %f1;"
                ),
                _ => {
                    if placed < labels {
                        placed += 1;
                        format!("L{}:", placed - 1)
                    } else {
                        format!("popc.b32 %r{a}, %r{b};")
                    }
                }
            };
            let _ = writeln!(body, "\t{line}");
        }
        for l in placed..labels {
            let _ = writeln!(body, "L{l}:");
        }
        let mut ptx = String::from(
            ".version 7.0\n.target sm_70\n.address_size 64\n\n\
             .visible .entry odd(\n\t.param .u64 input,\n\t.param .u64 output\n)\n{\n\
             \t.reg .pred %p<2>;\n\t.reg .b32 %r<10>;\n\t.reg .f32 %f<2>;\n\t.reg .b64 %rd<5>;\n\
             \tld.param.u64 %rd1, [input];\n\tcvta.to.global.u64 %rd1, %rd1;\n\
             \tld.param.u64 %rd3, [output];\n\tcvta.to.global.u64 %rd3, %rd3;\n\
             \tmov.u32 %r9, %ctaid.x;\n\tmov.u32 %r8, %ntid.x;\n\tmov.u32 %r7, %tid.x;\n\
             \tmad.lo.s32 %r9, %r9, %r8, %r7;\n\tadd.s32 %r9, %r9, 1;\n",
        );
        let _ = writeln!(ptx, "\tshl.b32 %r9, %r9, {};", OWN_WORDS.trailing_zeros());
        ptx.push_str(
            "\tmov.u64 %rd4, %rd3;\n\tsetp.ne.s32 %p0, %r0, 0;\n\tsetp.ne.s32 %p1, %r1, 0;\n",
        );
        ptx.push_str(&body);
        // Every thread leaves its registers in its own words.
        for i in 0..OWN_WORDS {
            let _ = writeln!(
                ptx,
                "\tmul.wide.u32 %rd2, %r9, 4;\n\tadd.s64 %rd2, %rd3, %rd2;\n\tst.global.u32 [%rd2+{}], %r{};",
                4 * i,
                i
            );
        }
        ptx.push_str("\tret;\n}\n");
        OddKernel { ptx, grid, block }
    }

    /// Runs the kernel on a fresh device (timed on `timed`, else functional); the output
    /// buffer, or the error as text.
    pub fn run(&self, timed: Option<TimedGpu>) -> Result<Vec<u8>, String> {
        let mut gpu = match timed {
            None => Gpu::new(),
            Some(mut t) => {
                t.options.instruction_limit = Some(ODD_INSTRUCTION_LIMIT);
                Gpu::timed(t).map_err(|e| e.to_string())?
            }
        };
        gpu.limits.instruction_limit = Some(ODD_INSTRUCTION_LIMIT);
        let module = gpu
            .load_ptx("odd.ptx", &self.ptx)
            .map_err(|e| e.to_string())?;
        let input: Vec<u8> = (0..INPUT_WORDS)
            .flat_map(|i| (i.wrapping_mul(2_654_435_761) >> 7).to_le_bytes())
            .collect();
        let threads = u64::from(self.grid * self.block);
        // Word 0 is the atomic counter; thread t owns words (t + 1) * OWN_WORDS ..
        let out_bytes = (threads + 1) * u64::from(OWN_WORDS) * 4;
        let (inp, out) = (gpu.alloc(input.len() as u64), gpu.alloc(out_bytes));
        gpu.copy_to_device(inp, &input).map_err(|e| e.to_string())?;
        let args = [KernelArg::Ptr(inp), KernelArg::Ptr(out)];
        let (grid, block) = ([self.grid, 1, 1], [self.block, 1, 1]);
        if gpu.machine().is_some() {
            gpu.launch_timed(module, "odd", grid, block, 0, &args, &mut |_| {})
                .map_err(|e| e.to_string())?;
        } else {
            gpu.launch(module, "odd", grid, block, 0, &args)
                .map_err(|e| e.to_string())?;
        }
        gpu.copy_from_device(out, out_bytes)
            .map_err(|e| e.to_string())
    }
}

/// Fragments that steer byte mutations towards interesting parser and loader states.
const FRAGMENTS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ";",
    ",",
    "=",
    "\"",
    "\n",
    " = 4294967295",
    " = -1",
    " = 1e309",
    " = 0",
    "%r1",
    "%rd1",
    "%p1",
    ".b32",
    ".u64",
    ".f16x2",
    ".s8",
    "<1000000>",
    "[4000000000]",
    "add.s32 ",
    "ld.global.u32 ",
    "bra ",
    "bar.sync 0;",
    ".reg ",
    ".local ",
    ".shared ",
    ".func ",
    ".entry ",
    "[[process.buffer]]\n",
    "len = ",
    "grid = [",
    "0x",
    "0f7f800000",
    "\u{FEFF}",
    "\u{FFFD}",
    "//",
    "/*",
];

/// A seeded mutation of `input`: bytes flipped, fragments inserted, ranges deleted or
/// duplicated, or the text cut short; `state` is an xorshift state the caller carries.
pub fn mutate(input: &[u8], state: &mut u64) -> Vec<u8> {
    let mut next = || {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    };
    let mut out = input.to_vec();
    for _ in 0..1 + next() % 4 {
        let at = |n: u64, len: usize| (n % (len as u64 + 1)) as usize;
        match next() % 6 {
            0 if !out.is_empty() => {
                let i = at(next(), out.len() - 1);
                out[i] ^= 1 << (next() % 8);
            }
            1 => {
                let i = at(next(), out.len());
                let f = FRAGMENTS[(next() % FRAGMENTS.len() as u64) as usize];
                out.splice(i..i, f.bytes());
            }
            2 => {
                let i = at(next(), out.len());
                let j = (i + (next() % 64) as usize).min(out.len());
                out.drain(i..j);
            }
            3 => {
                let i = at(next(), out.len());
                let j = (i + (next() % 128) as usize).min(out.len());
                let piece = out[i..j].to_vec();
                let k = at(next(), out.len());
                out.splice(k..k, piece);
            }
            4 => {
                // A number replaced by an extreme one.
                if let Some(i) =
                    (0..out.len()).find(|&i| out[i].is_ascii_digit() && next() % 16 == 0)
                {
                    let big = ["4294967295", "18446744073709551615", "0", "2147483648"];
                    out.splice(i..i + 1, big[(next() % 4) as usize].bytes());
                }
            }
            _ => {
                let cut = at(next(), out.len());
                out.truncate(cut);
            }
        }
    }
    out
}
