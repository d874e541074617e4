//! Host programs with arithmetic: integer expressions over constants and loop indices in
//! arguments, grid and block sizes, copies and repeat counts; nested loops; arguments
//! checked against the kernel's parameters when the file is loaded; kernels named by their
//! C++ names. Every error names the file, line and field.

use std::path::Path;

use gpu::config::GpuConfig;
use gpu::timing::TimedGpu;
use workload::scenario::{CmdKind, Program};
use workload::{parse, Files, Setup, System};

/// `store(unsigned *out, unsigned i, unsigned v)`: thread 0 writes `out[i] = v`.
const STORE: &str = r#".version 7.0
.target sm_70
.address_size 64

.visible .entry _Z5storePjjj(
    .param .u64 _Z5storePjjj_param_0,
    .param .u32 _Z5storePjjj_param_1,
    .param .u32 _Z5storePjjj_param_2
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [_Z5storePjjj_param_0];
    ld.param.u32 %r1, [_Z5storePjjj_param_1];
    ld.param.u32 %r2, [_Z5storePjjj_param_2];
    mov.u32 %r3, %tid.x;
    setp.ne.u32 %p1, %r3, 0;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r2;
DONE:
    ret;
}
"#;

/// `scale(float *p, float f, unsigned bits)`: takes a float and a .b32 parameter (does
/// nothing).
const SCALE: &str = r#"
.visible .entry _Z5scalePffj(
    .param .u64 _Z5scalePffj_param_0,
    .param .f32 _Z5scalePffj_param_1,
    .param .b32 _Z5scalePffj_param_2
)
{
    ret;
}
"#;

/// `store` beside `ns::store`, two overloads of `fill` and `scale`.
fn overloaded() -> String {
    let ns = STORE
        .split(".visible")
        .nth(1)
        .unwrap()
        .replace("_Z5storePjjj", "_ZN2ns5storeEPjjj");
    let fill = |m: &str| {
        format!(".visible .entry {m}(\n    .param .u64 {m}_param_0\n)\n{{\n    ret;\n}}\n")
    };
    format!(
        "{STORE}\n.visible{ns}\n{}\n{}\n{SCALE}",
        fill("_Z4fillPf"),
        fill("_Z4fillPi")
    )
}

struct Mem;

impl Files for Mem {
    fn read(&self, path: &Path) -> Result<Vec<u8>, String> {
        match path.file_name().and_then(|f| f.to_str()) {
            Some("store.ptx") => Ok(STORE.as_bytes().to_vec()),
            Some("two.ptx") => Ok(overloaded().into_bytes()),
            _ => Err("No such file or directory".into()),
        }
    }
}

fn error(text: &str) -> String {
    match parse("s.toml", text, &Mem) {
        Ok(_) => panic!("loaded:\n{text}"),
        Err(e) => e.to_string(),
    }
}

fn assert_error(text: &str, at: &str, field: &str, what: &[&str]) {
    let e = error(text);
    assert!(
        e.starts_with(&format!("s.toml:{at}:"))
            && (e.contains(&format!("`{field}`")) || e.contains(&format!(".{field}`"))),
        "want {at} `{field}`, got: {e}"
    );
    for w in what {
        assert!(e.contains(w), "want `{w}` in: {e}");
    }
}

/// Runs a scenario; the error, or the process's verdict.
fn run(text: &str) -> Result<workload::program::Verdict, String> {
    let s = parse("s.toml", text, &Mem).unwrap_or_else(|e| panic!("{e}"));
    let gpu = GpuConfig::preset("gtx480").unwrap();
    let setup = Setup::for_scenario(&s, TimedGpu::new(gpu), 1 << 30).unwrap();
    let r = System::new(setup, &s.processes)
        .unwrap()
        .run(&mut |_| {})
        .map_err(|e| e.to_string())?;
    Ok(r.processes[0].verdict.clone().unwrap())
}

/// A process over `store.ptx` with a 64-element `out` buffer, then `body`.
fn program(body: &str) -> String {
    format!(
        r#"[constants]
N = 8
M = "N / 2"

[[process]]
name = "p"
ptx = "store.ptx"
constants = {{ LEN = "N * M * 2" }}

[[process.buffer]]
name = "out"
type = "u32"
len = "LEN"
{body}"#
    )
}

/// Nested loops, each index named; the inner reads the outer's; the outer's count is a
/// constant expression and the inner's depends on the outer index (a triangle).
const NESTED: &str = r#"
[[process.command]]
repeat = { times = "M", as = "i" }
[[process.command.body]]
repeat = { times = "i + 1", as = "j" }
[[process.command.body.body]]
launch = "_Z5storePjjj"
grid = ["(N + 31) / 32"]
block = ["N * 4"]
args = [{ buffer = "out" }, { u32 = "i * N + j" }, { u32 = "100 * i + j + 1" }]

[[process.command]]
repeat = 2
[[process.command.body]]
launch = "store"
grid = [1]
block = [32]
args = [{ buffer = "out", offset = "4 * (LEN - 2)" }, { loop_index = "u32" }, { u32 = 7 }]

[[process.command]]
copy = "out"
direction = "to_host"
offset = "4 * (LEN - 8)"
bytes = "4 * 8"
"#;

#[test]
fn nested_loops_with_named_indices_run_their_arithmetic() {
    let mut text = program(NESTED);
    // out[i * 8 + j] = 100 i + j + 1 for j <= i < 4; the last two elements are 7.
    let mut want = [0.0; 64];
    for i in 0..4 {
        for j in 0..=i {
            want[i * 8 + j] = (100 * i + j + 1) as f64;
        }
    }
    want[62] = 7.0;
    want[63] = 7.0;
    let values: Vec<String> = want.iter().map(|v| v.to_string()).collect();
    text += &format!(
        "\n[[process.check]]\nbuffer = \"out\"\nvalues = [{}]\n",
        values.join(", ")
    );
    let v = run(&text).unwrap();
    assert!(v.verified, "{}", v.detail);
    assert_eq!(v.detail, "64 values match");

    // The inner loop reads the outer index: with `j` in place of `i` in the inner count,
    // it would be a square, and the check fails.
    let square = text.replace("times = \"i + 1\"", "times = \"M\"");
    let v = run(&square).unwrap();
    assert!(!v.verified, "a square passed: {}", v.detail);
}

#[test]
fn values_are_resolved_as_written_and_constants_are_folded() {
    let s = parse("s.toml", &program(NESTED), &Mem).unwrap();
    let Program::Commands(c) = &s.processes[0].program else {
        panic!("commands")
    };
    assert_eq!(c.buffers[0].init.len(), 64 * 4, "len = N * M * 2 elements");
    let CmdKind::Repeat { times, body } = &c.commands[0].kind else {
        panic!("repeat")
    };
    assert_eq!(times.expr.constant(), Some(4));
    let CmdKind::Repeat { body, .. } = &body[0].kind else {
        panic!("repeat")
    };
    let CmdKind::Launch {
        kernel,
        grid,
        block,
        dynamic_smem,
        args,
        ..
    } = &body[0].kind
    else {
        panic!("launch")
    };
    assert_eq!(kernel, "_Z5storePjjj");
    let lens = |_| 256;
    let ptr = |_| 0x1000;
    let v = CmdKind::launch_values(
        grid,
        block,
        dynamic_smem,
        args,
        &lens,
        &ptr,
        &|_| 0,
        &[Some(3), Some(2)],
    )
    .unwrap();
    assert_eq!((v.grid, v.block), ([1, 1, 1], [32, 1, 1]));
    let args: Vec<String> = v.args.iter().map(|a| a.to_string()).collect();
    assert_eq!(args, ["pointer 0x1000", "u32 26", "u32 303"]);
    // The kernel named by its C++ name resolves to its PTX name.
    let CmdKind::Repeat { body, .. } = &c.commands[1].kind else {
        panic!("repeat")
    };
    let CmdKind::Launch { kernel, args, .. } = &body[0].kind else {
        panic!("launch")
    };
    assert_eq!(kernel, "_Z5storePjjj");
    let v = CmdKind::launch_values(
        grid,
        block,
        dynamic_smem,
        args,
        &lens,
        &ptr,
        &|_| 0,
        &[Some(1)],
    )
    .unwrap();
    let args: Vec<String> = v.args.iter().map(|a| a.to_string()).collect();
    assert_eq!(args, ["pointer 0x10f8", "u32 1", "u32 7"], "offset 4 * 62");
}

fn launch(args: &str, grid: &str) -> String {
    program(&format!(
        r#"
[[process.command]]
repeat = {{ times = 4, as = "t" }}
[[process.command.body]]
launch = "store"
grid = [{grid}]
block = [32]
args = {args}
"#
    ))
}

const ARGS: &str = r#"[{ buffer = "out" }, { u32 = "t" }, { u32 = 1 }]"#;

#[test]
fn the_good_launch_loads() {
    parse("s.toml", &launch(ARGS, "1"), &Mem).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn overflow_division_by_zero_and_unknown_names_are_located() {
    // Among constants: at load time, where the constant is written.
    let text = program("").replace("M = \"N / 2\"", "M = \"N * 9223372036854775807\"");
    assert_error(
        &text,
        "3:5",
        "constants.M",
        &["8 * 9223372036854775807 overflows"],
    );
    let text = program("").replace("M = \"N / 2\"", "M = \"N / (N - 8)\"");
    assert_error(&text, "3:5", "constants.M", &["8 / 0 divides by zero"]);
    // A constant may use only the ones before it.
    let text = program("").replace("M = \"N / 2\"", "M = \"K\"\nK = 1");
    assert_error(
        &text,
        "3:5",
        "constants.M",
        &["no constant or loop index `K`", "N"],
    );
    // In a loop: found at load time by following the loop, naming the index's value.
    let text = launch(ARGS, "\"8 / (3 - t)\"");
    assert_error(
        &text,
        "19:9",
        "process[0].command[0].body[0].grid[0]",
        &["`8 / (3 - t)` (with t = 3): 8 / 0 divides by zero"],
    );
    let text = launch(r#"[{ buffer = "out" }, { u32 = "tt" }, { u32 = 1 }]"#, "1");
    assert_error(
        &text,
        "21:37",
        "process[0].command[0].body[0].args[1].u32",
        &["`tt`: no constant or loop index `tt` here", "LEN, M, N, t"],
    );
    // A loop's index is not known after it.
    let text = launch(ARGS, "1") + "[[process.command]]\ncopy = \"out\"\nbytes = \"t\"\n";
    assert_error(
        &text,
        "24:9",
        "process[0].command[1].bytes",
        &["no constant or loop index `t`"],
    );
    let text = launch(ARGS, "\"(N +\"");
    assert_error(
        &text,
        "19:9",
        "grid[0]",
        &["`(N +`: expected", "at the end"],
    );
    let text = launch(ARGS, "1.5");
    assert_error(
        &text,
        "19:9",
        "grid[0]",
        &["expected an integer", "found a float"],
    );
}

#[test]
fn negative_and_out_of_range_values_are_errors() {
    let text = launch(ARGS, "\"2 - t\"");
    assert_error(
        &text,
        "19:9",
        "process[0].command[0].body[0].grid[0]",
        &["`2 - t` (with t = 2) is 0: a grid dimension must be in 1..=4294967295"],
    );
    let text = launch(ARGS, "1").replace("block = [32]", "block = [\"N - 9\"]");
    assert_error(
        &text,
        "20:10",
        "process[0].command[0].body[0].block[0]",
        &["`N - 9` is -1: a block dimension must be in 1..=4294967295"],
    );
    let text = launch(
        r#"[{ buffer = "out" }, { u32 = "t - 1" }, { u32 = 1 }]"#,
        "1",
    );
    assert_error(
        &text,
        "21:37",
        "args[1].u32",
        &["`t - 1` (with t = 0) is -1: a u32 argument must be in 0..=4294967295"],
    );
    let text = launch(
        r#"[{ buffer = "out", offset = "LEN * 4 + t" }, { u32 = 0 }, { u32 = 1 }]"#,
        "1",
    );
    assert_error(
        &text,
        "21:36",
        "args[0].offset",
        &["(with t = 1) is 257: an offset into the buffer must be in 0..=256"],
    );
    let text = program(
        "\n[[process.command]]\nrepeat = \"N - 9\"\n[[process.command.body]]\nsync = true\n",
    );
    assert_error(
        &text,
        "16:10",
        "process[0].command[0].repeat",
        &["is -1: a repeat count must be at least 0"],
    );
    let text =
        program("\n[[process.command]]\ncopy = \"out\"\noffset = \"LEN * 4 - 4\"\nbytes = 8\n");
    assert_error(
        &text,
        "18:9",
        "process[0].command[0].bytes",
        &["8 bytes at offset 252 do not fit buffer `out` of 256 bytes"],
    );
    let text =
        program("\n[[process.command]]\nset = \"out\"\nindex = \"LEN - 1\"\nvalues = [1, 2]\n");
    assert_error(
        &text,
        "17:9",
        "process[0].command[0].index",
        &["`LEN - 1` is 63: the first of 2 elements set in a buffer of 64 must be in 0..=62"],
    );
    let text = program("").replace("len = \"LEN\"", "len = \"N - LEN\"");
    assert_error(
        &text,
        "13:7",
        "process[0].buffer[0].len",
        &["is -56: a length must be at least 0"],
    );
}

/// A `repeat_until_zero`'s index counts its iterations from 0, named by `as` or read as
/// `loop_index`.
#[test]
fn the_index_of_a_repeat_until_zero_counts_from_zero() {
    // Iteration k writes out[k] = 10 + k and the flag 2 - k: three iterations.
    let text = program(
        r#"
[[process.buffer]]
name = "flag"
type = "u32"
len = 1
init = "fill"
value = 1

[[process.command]]
repeat_until_zero = { buffer = "flag", as = "k" }
max_iterations = 10
[[process.command.body]]
launch = "store"
grid = [1]
block = [32]
args = [{ buffer = "out" }, { loop_index = "u32" }, { u32 = "10 + k" }]
[[process.command.body]]
launch = "store"
grid = [1]
block = [32]
args = [{ buffer = "flag" }, { u32 = 0 }, { u32 = "2 - k" }]

[[process.check]]
buffer = "out"
values = [10, 11, 12, 0]
"#,
    );
    let v = run(&text).unwrap();
    assert!(v.verified, "{}", v.detail);
}

#[test]
fn a_value_known_only_while_running_is_an_error_naming_the_command() {
    // The index of a repeat_until_zero is known only as it runs: its third launch has a
    // grid of 0. The flag is never cleared.
    let text = program(
        r#"
[[process.buffer]]
name = "flag"
type = "u32"
len = 1
init = "fill"
value = 1

[[process.command]]
copy = "flag"
[[process.command]]
repeat_until_zero = { buffer = "flag", as = "k" }
max_iterations = 10
[[process.command.body]]
launch = "store"
grid = ["2 - k"]
block = [32]
args = [{ buffer = "out" }, { u32 = "k" }, { u32 = 1 }]
"#,
    );
    let e = run(&text).unwrap_err();
    assert!(
        e.contains("s.toml:29:9: `process[0].command[1].body[0].grid[0]`: `2 - k` (with k = 2) is 0: a grid dimension must be in 1..=4294967295"),
        "{e}"
    );
    // Loaded, its first iteration is checked: `0 - k` fails at k = 0, before anything runs.
    assert_error(
        &text.replace("2 - k", "0 - k"),
        "29:9",
        "process[0].command[1].body[0].grid[0]",
        &["(with k = 0) is 0"],
    );
}

#[test]
fn arguments_must_suit_the_kernels_parameters() {
    let f = "process[0].command[0].body[0].args";
    // An f32 for a .u32 parameter (it used to run, and fault far away).
    assert_error(
        &launch(r#"[{ buffer = "out" }, { f32 = 1.0 }, { u32 = 1 }]"#, "1"),
        "21:29",
        &format!("{f}[1]"),
        &["an f32 argument for parameter 1 `_Z5storePjjj_param_1` (.u32) of kernel `store`: it needs a .f32 or .b32 parameter"],
    );
    assert_error(
        &launch(r#"[{ buffer = "out" }, { u64 = 1 }, { u32 = 1 }]"#, "1"),
        "21:29",
        &format!("{f}[1]"),
        &[
            "a u64 argument for parameter 1",
            "it needs a .u64, .s64 or .b64 parameter",
        ],
    );
    assert_error(
        &launch(r#"[{ u32 = 0 }, { u32 = 1 }, { u32 = 1 }]"#, "1"),
        "21:9",
        &format!("{f}[0]"),
        &["a u32 argument for parameter 0 `_Z5storePjjj_param_0` (.u64)"],
    );
    assert_error(
        &launch(
            r#"[{ buffer = "out" }, { buffer = "out" }, { u32 = 1 }]"#,
            "1",
        ),
        "21:29",
        &format!("{f}[1]"),
        &["a buffer (a 64-bit pointer) for parameter 1 `_Z5storePjjj_param_1` (.u32)"],
    );
    assert_error(
        &launch(
            r#"[{ buffer = "out" }, { loop_index = "s64" }, { u32 = 1 }]"#,
            "1",
        ),
        "21:29",
        &format!("{f}[1]"),
        &["a loop_index argument for parameter 1"],
    );
    // A wrong count (it used to be reported only when the launch ran).
    assert_error(
        &launch(r#"[{ buffer = "out" }, { u32 = 1 }]"#, "1"),
        "21:8",
        f,
        &["2 arguments for kernel `store`, which takes 3: (.u64 _Z5storePjjj_param_0, .u32 _Z5storePjjj_param_1, .u32 _Z5storePjjj_param_2)"],
    );
    // Values must fit the argument's own type too.
    assert_error(
        &launch(r#"[{ buffer = "out" }, { u32 = -1 }, { u32 = 1 }]"#, "1"),
        "21:37",
        &format!("{f}[1].u32"),
        &["-1: a u32 argument must be in 0..=4294967295"],
    );
    assert_error(
        &launch(
            r#"[{ buffer = "out" }, { s32 = 2147483648 }, { u32 = 1 }]"#,
            "1",
        ),
        "21:37",
        &format!("{f}[1].s32"),
        &["2147483648: an s32 argument must be in -2147483648..=2147483647"],
    );
    // An integer for a float parameter; a float or an integer for a .b32 one.
    let scale = |args: &str| {
        format!(
            "[[process]]\nname = \"p\"\nptx = \"two.ptx\"\n\n[[process.buffer]]\nname = \"out\"\ntype = \"f32\"\nlen = 4\n\n[[process.command]]\nlaunch = \"scale\"\ngrid = [1]\nblock = [32]\nargs = {args}\n"
        )
    };
    assert_error(
        &scale(r#"[{ buffer = "out" }, { u32 = 2 }, { u32 = 1 }]"#),
        "14:29",
        "process[0].command[0].args[1]",
        &["a u32 argument for parameter 1 `_Z5scalePffj_param_1` (.f32) of kernel `scale`: it needs a .u32, .s32 or .b32 parameter"],
    );
    assert_error(
        &scale(r#"[{ buffer = "out" }, { f64 = 2.0 }, { u32 = 1 }]"#),
        "14:29",
        "process[0].command[0].args[1]",
        &[
            "an f64 argument for parameter 1",
            "it needs a .f64 or .b64 parameter",
        ],
    );
    for good in [
        r#"[{ buffer = "out" }, { f32 = 2.0 }, { u32 = 1 }]"#,
        r#"[{ buffer = "out" }, { f32 = 2.0 }, { f32 = 1.0 }]"#,
    ] {
        parse("s.toml", &scale(good), &Mem).unwrap_or_else(|e| panic!("{e}"));
    }
    // A signed argument for an unsigned parameter of its width is what C does (NVRTC
    // declares `int` parameters .u32).
    parse(
        "s.toml",
        &launch(r#"[{ buffer = "out" }, { s32 = "t" }, { u32 = 1 }]"#, "1"),
        &Mem,
    )
    .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_key_an_argument_or_command_does_not_take_is_an_error() {
    // `loop_index` with an offset was run with the offset ignored.
    assert_error(
        &launch(
            r#"[{ buffer = "out" }, { loop_index = "u32", offset = 4 }, { u32 = 1 }]"#,
            "1",
        ),
        "21:60",
        "process[0].command[0].body[0].args[1].offset",
        &["a loop_index argument takes no offset (only a buffer does)"],
    );
    assert_error(
        &launch(
            r#"[{ buffer = "out" }, { u32 = 1, offset = 4 }, { u32 = 1 }]"#,
            "1",
        ),
        "21:49",
        "args[1].offset",
        &["a u32 argument takes no offset"],
    );
    assert_error(
        &launch(ARGS, "1").replace("block = [32]", "block = [32]\noffset = 4"),
        "21:10",
        "process[0].command[0].body[0].offset",
        &["a launch command takes no `offset` (it takes: grid, block, dynamic_smem, args, stream)"],
    );
    assert_error(
        &program("\n[[process.command]]\ncopy = \"out\"\nvalues = [1]\n"),
        "17:10",
        "process[0].command[0].values",
        &["a copy command takes no `values`"],
    );
    assert_error(
        &program("\n[[process.command]]\nsync = true\nstream = 1\n"),
        "17:10",
        "process[0].command[0].stream",
        &["a sync command takes no `stream` (it takes: nothing else)"],
    );
    assert_error(
        &program("\n[[process.command]]\nrepeat = { times = 2, index = \"t\" }\n[[process.command.body]]\nsync = true\n"),
        "16:10",
        "process[0].command[0].repeat.index",
        &["a repeat table takes `times` and `as`"],
    );
}

#[test]
fn loop_and_constant_names_must_be_new() {
    let nested = |outer: &str, inner: &str| {
        program(&format!(
            "\n[[process.command]]\nrepeat = {{ times = 2, as = \"{outer}\" }}\n[[process.command.body]]\nrepeat = {{ times = 2, as = \"{inner}\" }}\n[[process.command.body.body]]\nsync = true\n"
        ))
    };
    assert_error(
        &nested("i", "i"),
        "18:10",
        "process[0].command[0].body[0].repeat.as",
        &["`i` is already the index of an enclosing loop"],
    );
    assert_error(
        &nested("N", "i"),
        "16:10",
        "process[0].command[0].repeat.as",
        &["`N` is already a constant"],
    );
    assert_error(
        &nested("min", "i"),
        "16:10",
        "repeat.as",
        &["`min` is a function's name"],
    );
    assert_error(
        &nested("2x", "i"),
        "16:10",
        "repeat.as",
        &["`2x` is not a name"],
    );
    // Sibling loops may reuse a name.
    let text = nested("i", "j").replace("sync = true", "sync = true\n[[process.command]]\nrepeat = { times = 2, as = \"i\" }\n[[process.command.body]]\nsync = true");
    parse("s.toml", &text, &Mem).unwrap_or_else(|e| panic!("{e}"));
    assert_error(
        &program("").replace("constants = { LEN", "constants = { N = 1, LEN"),
        "8:19",
        "process[0].constants.N",
        &["`N` is already a constant"],
    );
}

#[test]
fn kernels_are_named_by_their_cxx_names_unless_ambiguous() {
    let text = |name: &str, args: &str| {
        format!(
            "[[process]]\nname = \"p\"\nptx = \"two.ptx\"\n\n[[process.buffer]]\nname = \"out\"\ntype = \"u32\"\nlen = 4\n\n[[process.command]]\nlaunch = \"{name}\"\ngrid = [1]\nblock = [32]\nargs = {args}\n"
        )
    };
    let three = r#"[{ buffer = "out" }, { u32 = 0 }, { u32 = 1 }]"#;
    for (name, mangled) in [
        ("ns::store", "_ZN2ns5storeEPjjj"),
        ("_Z5storePjjj", "_Z5storePjjj"),
        ("_Z4fillPi", "_Z4fillPi"),
    ] {
        let args = if name.contains("fill") {
            r#"[{ buffer = "out" }]"#
        } else {
            three
        };
        let s = parse("s.toml", &text(name, args), &Mem).unwrap_or_else(|e| panic!("{e}"));
        let Program::Commands(c) = &s.processes[0].program else {
            panic!()
        };
        let CmdKind::Launch { kernel, .. } = &c.commands[0].kind else {
            panic!()
        };
        assert_eq!(kernel, mangled);
    }
    assert_error(
        &text("store", three),
        "11:10",
        "process[0].command[0].launch",
        &[
            "`store` is ambiguous in `two.ptx`: it names _Z5storePjjj (",
            "_ZN2ns5storeEPjjj (",
        ],
    );
    assert_error(
        &text("fill", r#"[{ buffer = "out" }]"#),
        "11:10",
        "launch",
        &[
            "`fill` is ambiguous",
            "_Z4fillPf (.u64 _Z4fillPf_param_0)",
            "_Z4fillPi",
        ],
    );
    assert_error(
        &text("stor", three),
        "11:10",
        "launch",
        &[
            "no kernel `stor` in `two.ptx`",
            "_Z5storePjjj (store)",
            "_ZN2ns5storeEPjjj (ns::store)",
        ],
    );
}

/// The Rodinia-style whole programs of `scenarios/` run as one process each, launch the
/// grids their loop arithmetic gives, and verify against their CPU references (and so does
/// the BFS command stream).
#[test]
fn the_lud_nw_and_bfs_programs_run_their_grids_and_verify() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let run = |file: &str| {
        let path = dir.join(file).display().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        let s = parse(&path, &text, &workload::Disk).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.processes.len(), 1);
        let gpu = GpuConfig::preset("gtx480").unwrap();
        let setup = Setup::for_scenario(&s, TimedGpu::new(gpu), 1 << 30).unwrap();
        let r = System::new(setup, &s.processes)
            .unwrap()
            .run(&mut |_| {})
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let v = r.processes[0].verdict.clone().unwrap();
        assert!(v.verified, "{file}: {}", v.detail);
        r.kernels
            .iter()
            .map(|k| (k.kernel.clone(), k.tbs))
            .collect::<Vec<_>>()
    };
    let named = |k: &str, tbs: u64| (k.to_string(), tbs);

    // LU: per step t of 7, one diagonal tile, 2 (7 - t) panel tiles, (7 - t)^2 updates.
    let mut want = Vec::new();
    for t in 0..7 {
        want.push(named("_Z11lu_diagonalPfii", 1));
        want.push(named("_Z8lu_panelPfii", 2 * (7 - t)));
        want.push(named("_Z9lu_updatePfii", (7 - t) * (7 - t)));
    }
    want.push(named("_Z11lu_diagonalPfii", 1));
    assert_eq!(run("lud.toml"), want);

    // NW: the borders (129 cells in blocks of 128), then the 15 anti-diagonals of 8 x 8
    // tiles, 1, 2, .., 8, .., 2, 1 blocks.
    let mut want = vec![named("_Z10nw_bordersPiii", 2)];
    for d in 0..15u64 {
        want.push(named("_Z11nw_diagonalPiPKiS1_S1_iii", (d + 1).min(15 - d)));
    }
    assert_eq!(run("nw.toml"), want);

    // BFS's level argument is `loop_index` in a repeat_until_zero (from 0): 14 levels.
    let levels = run("bfs-commands.toml");
    assert_eq!(levels, vec![named("bfs_level", 16); 14]);
}
