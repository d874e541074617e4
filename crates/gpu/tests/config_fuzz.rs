//! A seeded, structured fuzz test of the GPU configuration loader (issue 21): every preset
//! with one to three of its numbers replaced by an extreme or odd value (zero, one, powers of
//! two and their neighbours, the largest integers TOML holds, negative numbers, NaN and
//! infinities). Each configuration must be refused with an error naming a field, or load
//! and run a small kernel on the timed machine (under a cycle limit) to the right answer or
//! an error: never a panic, and never a wrong result. The kernel's values do not depend on
//! timing, so the expected memory is known whatever the configuration says.
//!
//! The byte-level mutations of `switchyard/tests/fuzz.rs` rarely produce a well-formed number
//! in a chosen field; this test aims at the numbers themselves, and runs what loads.

mod timing_common;

use std::panic::{catch_unwind, AssertUnwindSafe};

use gpu::config::{GpuConfig, PRESETS};
use gpu::timing::TimedGpu;
use timing_common::{kernel, u32_arg, u64_arg, Device, Engine};

/// How many configurations the test tries.
const CASES: usize = 500;
/// Core cycles a launch may take before the run stops it (a configuration with huge
/// latencies ends with the limit's error, which is a correct answer).
const MAX_CYCLES: u64 = 400_000;

/// Xorshift: the same cases on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Replacement integers: edges of every width and of the simulator's ceilings.
const INTEGERS: &[i64] = &[
    0,
    1,
    2,
    3,
    5,
    7,
    31,
    33,
    100,
    1023,
    1024,
    65535,
    65536,
    1 << 20,
    (1 << 20) + 1,
    1 << 28,
    1_000_000,
    4_294_967_295,
    4_294_967_296,
    i64::MAX,
    -1,
    i64::MIN,
];

/// Replacement floats.
const FLOATS: &[f64] = &[
    0.0,
    -0.0,
    1e-300,
    1e-9,
    0.5,
    1.0,
    3.0,
    1e5,
    1e6,
    1e300,
    -1.0,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
];

/// The dotted path of every number in `v` (array elements by index).
fn numbers(v: &toml::Value, path: &str, out: &mut Vec<String>) {
    match v {
        toml::Value::Integer(_) | toml::Value::Float(_) => out.push(path.to_string()),
        toml::Value::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                numbers(x, &format!("{path}.{i}"), out);
            }
        }
        toml::Value::Table(t) => {
            for (k, x) in t {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                numbers(x, &p, out);
            }
        }
        _ => {}
    }
}

fn at<'a>(v: &'a mut toml::Value, path: &str) -> &'a mut toml::Value {
    path.split('.').fold(v, |v, key| match v {
        toml::Value::Array(items) => &mut items[key.parse::<usize>().unwrap()],
        toml::Value::Table(t) => t.get_mut(key).unwrap(),
        _ => unreachable!("{path}"),
    })
}

/// A preset's text with one to three of its numbers replaced; returns the text and what was
/// changed.
fn mutated(r: &mut Rng) -> (String, String) {
    let (name, text) = PRESETS[r.below(PRESETS.len())];
    let mut v: toml::Value = toml::from_str(text).unwrap();
    let mut paths = Vec::new();
    numbers(&v, "", &mut paths);
    let mut changes = format!("{name}:");
    for _ in 0..=r.below(3) {
        let path = &paths[r.below(paths.len())];
        let slot = at(&mut v, path);
        // Mostly a value of the field's own kind; now and then the other kind.
        let integer = matches!(slot, toml::Value::Integer(_)) != r.below(8).eq(&0);
        *slot = if integer {
            toml::Value::Integer(INTEGERS[r.below(INTEGERS.len())])
        } else {
            toml::Value::Float(FLOATS[r.below(FLOATS.len())])
        };
        changes += &format!(" {path} = {slot}");
    }
    (toml::to_string(&v).unwrap(), changes)
}

/// Each thread of 4 × 32 (one warp a TB, so that every configuration that loads can hold a
/// TB) writes `3 × aux[i] + i` to `out[i]`, through shared memory and a
/// barrier, and thread 0 of each block adds its block's size to `out[384]` atomically.
const DECLS: &str = "    .shared .align 4 .b32 tile[32];";
const BODY: &str = "    mul.wide.u32 %rd5, %r2, 4;
    add.s64 %rd6, %rd1, %rd5;
    ld.global.u32 %r10, [%rd6];
    mul.lo.u32 %r10, %r10, 3;
    add.u32 %r10, %r10, %r2;
    mov.u32 %r11, tile;
    mul.lo.u32 %r12, %r1, 4;
    add.u32 %r11, %r11, %r12;
    st.shared.u32 [%r11], %r10;
    bar.sync 0;
    ld.shared.u32 %r13, [%r11];
    add.s64 %rd7, %rd0, %rd5;
    st.global.u32 [%rd7], %r13;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra DONE;
    add.s64 %rd8, %rd0, 512;
    atom.global.add.u32 %r14, [%rd8], %r4;
DONE:
";

const THREADS: u32 = 32;
const BLOCKS: u32 = 4;

/// Runs the kernel on `config`: Ok(out's words) or the run's error.
fn run(config: GpuConfig) -> Result<Vec<u32>, String> {
    let mut t = TimedGpu::new(config);
    t.options.max_cycles = Some(MAX_CYCLES);
    let gpu = gpu::Gpu::timed(t.clone()).map_err(|e| e.to_string())?;
    drop(gpu);
    let mut d = Device::new("fuzz.ptx", &kernel(DECLS, BODY), Engine::Timed(Box::new(t)));
    let n = (THREADS * BLOCKS) as usize;
    let out = d.alloc(4 * (n as u64 + 1));
    let aux = d.alloc(4 * n as u64);
    let input: Vec<u8> = (0..n as u32)
        .flat_map(|i| (i * 7 + 1).to_le_bytes())
        .collect();
    d.write(aux, &input);
    d.launch(
        "k",
        [BLOCKS, 1, 1],
        [THREADS, 1, 1],
        0,
        &[u64_arg(out), u64_arg(aux), u32_arg(n as u32)],
    )?;
    Ok(d.read(out, 4 * (n as u64 + 1))
        .chunks(4)
        .map(|w| u32::from_le_bytes(w.try_into().unwrap()))
        .collect())
}

fn expected() -> Vec<u32> {
    let n = THREADS * BLOCKS;
    let mut v: Vec<u32> = (0..n).map(|i| 3 * (i * 7 + 1) + i).collect();
    v.push(THREADS * BLOCKS);
    v
}

#[test]
fn extreme_gpu_configurations_are_refused_by_field_or_run_right() {
    let want = expected();
    let mut r = Rng(0x5eed_c0f1);
    let (mut refused, mut ran, mut stopped) = (0, 0, 0);
    for i in 0..CASES {
        let (text, changes) = mutated(&mut r);
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            match GpuConfig::from_toml("fuzz.toml", &text) {
                Err(e) => {
                    let e = e.to_string();
                    assert!(e.contains("fuzz.toml"), "case {i} ({changes}): {e}");
                    Err(e)
                }
                Ok(c) => Ok(run(c)),
            }
        }));
        match outcome {
            Err(_) => panic!("case {i} ({changes}) panicked"),
            Ok(Err(_)) => refused += 1,
            Ok(Ok(Ok(got))) => {
                assert!(got == want, "case {i} ({changes}): a wrong result");
                ran += 1;
            }
            Ok(Ok(Err(e))) => {
                // A configuration that loads holds a warp of threads and of registers, and
                // its allocation units keep it so (they used to be checked only for zero);
                // only a shared memory too small for the TB's 128 bytes can turn it away.
                let c = GpuConfig::from_toml("fuzz.toml", &text).unwrap();
                let smem = c.sm.resources.shared_memory.last().copied().unwrap_or(0);
                assert!(
                    !e.contains("does not fit") || smem < 256,
                    "case {i} ({changes}): a configuration that loads cannot hold one warp: {e}"
                );
                eprintln!("case {i} ({changes}): {e}");
                stopped += 1;
            }
        }
    }
    eprintln!("{refused} refused, {ran} ran right, {stopped} stopped with an error");
}

/// Allocation units the fuzz test found accepted although no TB could then be placed: a
/// register unit past what a warp at `max_registers_per_thread` may take of the register
/// file, a shared-memory unit past the largest carve-out. Each must be refused by its field.
#[test]
fn allocation_units_that_leave_no_room_are_refused_by_field() {
    let gtx480 = PRESETS.iter().find(|(n, _)| *n == "gtx480").unwrap().1;
    for (from, to, field) in [
        (
            "unit = 4 }",
            "unit = 1025 }",
            "sm.resources.register_allocation.unit",
        ),
        (
            "granularity = \"thread\", unit = 4 }",
            "granularity = \"warp\", unit = 65536 }",
            "sm.resources.register_allocation.unit",
        ),
        (
            "shared_allocation_unit = 1 ",
            "shared_allocation_unit = 65535 ",
            "sm.resources.shared_allocation_unit",
        ),
    ] {
        assert!(gtx480.contains(from), "{from}");
        let e = GpuConfig::from_toml("g.toml", &gtx480.replace(from, to))
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(e.contains("g.toml") && e.contains(field), "{to}: {e}");
    }
    // The largest units that still leave room load: a warp of 63 registers per thread
    // rounded to 1024 registers a thread (32 × 1024 = the whole file), the whole of shared
    // memory as one unit.
    for (from, to) in [
        ("unit = 4 }", "unit = 1024 }"),
        (
            "shared_allocation_unit = 1 ",
            "shared_allocation_unit = 49152 ",
        ),
    ] {
        GpuConfig::from_toml("g.toml", &gtx480.replace(from, to))
            .unwrap_or_else(|e| panic!("{to}: {e}"));
    }
}
