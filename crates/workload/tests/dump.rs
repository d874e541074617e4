//! `dump` commands: a buffer's device contents at that point of the program, as a `.npy`
//! file's bytes, checked against a CPU reference of the kernel; and the mistakes a dump can
//! hold, refused when the file is loaded with its line and field.

use std::path::Path;

use gpu::config::GpuConfig;
use gpu::timing::TimedGpu;
use workload::data::{parse_npy, ElemType};
use workload::scenario::Program;
use workload::{parse, Files, Setup, System};

const SAXPY: &str = include_str!("../../../examples/saxpy/saxpy.ptx");

struct Mem;

impl Files for Mem {
    fn read(&self, path: &Path) -> Result<Vec<u8>, String> {
        match path.file_name().and_then(|f| f.to_str()) {
            Some("saxpy.ptx") => Ok(SAXPY.as_bytes().to_vec()),
            _ => Err("No such file or directory".into()),
        }
    }
}

/// y = 3x + y over random x and y, with y dumped before and after, and x dumped as bytes in
/// three dimensions.
const SCENARIO: &str = r#"[constants]
N = 1000

[[process]]
name = "p"
ptx = "saxpy.ptx"

[[process.buffer]]
name = "x"
type = "f32"
len = "N"
init = "random"
min = -4.0
max = 4.0
seed = 7

[[process.buffer]]
name = "y"
type = "f32"
len = "N"
init = "random"
min = -1.0
max = 1.0
seed = 8

[[process.command]]
copy = "x"
[[process.command]]
copy = "y"

[[process.command]]
dump = "y"
file = "before.npy"

[[process.command]]
launch = "saxpy"
grid = ["(N + 127) / 128"]
block = [128]
args = [{ buffer = "x" }, { buffer = "y" }, { f32 = 3.0 }, { u32 = "N" }]

[[process.command]]
dump = "y"

[[process.command]]
dump = "x"
type = "u8"
shape = [10, "N / 10", 4]
file = "/abs/x-bytes.npy"
"#;

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn a_dump_holds_the_buffer_as_it_is_at_that_point_of_the_program() {
    let s = parse("dir/s.toml", SCENARIO, &Mem).unwrap_or_else(|e| panic!("{e}"));
    let Program::Commands(c) = &s.processes[0].program else {
        panic!("a command program");
    };
    let (x0, y0) = (f32s(&c.buffers[0].init), f32s(&c.buffers[1].init));
    // The CPU reference of the kernel: one fused multiply-add (`fma.rn.f32`).
    let want: Vec<f32> = x0
        .iter()
        .zip(&y0)
        .map(|(x, y)| 3.0f32.mul_add(*x, *y))
        .collect();
    assert!(
        want.iter().zip(&y0).any(|(a, b)| a != b),
        "the kernel changes y"
    );

    let gpu = GpuConfig::preset("gtx480").unwrap();
    let setup = Setup::for_scenario(&s, TimedGpu::new(gpu), 1 << 30).unwrap();
    let r = System::new(setup, &s.processes)
        .unwrap()
        .run(&mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    let paths: Vec<_> = r.dumps.iter().map(|d| d.file.path.clone()).collect();
    assert_eq!(
        paths,
        [
            Path::new("dir/before.npy"),
            Path::new("dir/y.npy"),
            Path::new("/abs/x-bytes.npy")
        ],
        "relative to the scenario's directory, `<buffer>.npy` by default, absolute as written"
    );
    // Each dump's copy ends after the work before it in its stream.
    assert!(r.dumps[0].at_fs < r.kernels[0].finished_fs.unwrap());
    assert!(r.dumps[1].at_fs > r.kernels[0].finished_fs.unwrap());

    let file = |i: usize| parse_npy(&r.dumps[i].npy()).unwrap();
    let before = file(0);
    assert_eq!((before.descr.as_str(), before.elems), ("<f4", 1000));
    assert_eq!(f32s(&before.data), y0, "before the launch: y as copied in");
    let after = file(1);
    assert_eq!((after.descr.as_str(), after.elems), ("<f4", 1000));
    let got = f32s(&after.data);
    let diff = got
        .iter()
        .zip(&want)
        .position(|(g, w)| g.to_bits() != w.to_bits());
    assert_eq!(
        diff, None,
        "y after the launch is the CPU reference's, bit for bit"
    );

    let bytes = r.dumps[2].npy();
    let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(&bytes[10..10 + header_len]).unwrap();
    assert!(header.contains("'descr': '|u1'") && header.contains("'shape': (10, 100, 4)"));
    let raw = file(2);
    assert_eq!(raw.elems, 4000);
    assert_eq!(
        raw.data, c.buffers[0].init,
        "x's bytes, unchanged by the kernel"
    );
    assert_eq!(r.dumps[2].file.ty, ElemType::U8);
}

#[test]
fn a_dump_in_a_loop_keeps_its_latest_contents_and_the_host_copy_is_untouched() {
    // y = 1 + 2 + 2 + 2 after three rounds of y += 2 * 1; dumped each round into one file.
    // The host copy of y is then sent back to the device: it still holds the initial 1s, so
    // the dump did not write into it.
    let text = r#"[[process]]
name = "p"
ptx = "saxpy.ptx"
[[process.buffer]]
name = "x"
type = "f32"
len = 64
init = "fill"
value = 1.0
[[process.buffer]]
name = "y"
type = "f32"
len = 64
init = "fill"
value = 1.0
[[process.command]]
copy = "x"
[[process.command]]
copy = "y"
[[process.command]]
repeat = 3
[[process.command.body]]
launch = "saxpy"
grid = [1]
block = [64]
args = [{ buffer = "x" }, { buffer = "y" }, { f32 = 2.0 }, { u32 = 64 }]
[[process.command.body]]
dump = "y"
file = "rounds.npy"
[[process.command]]
copy = "y"
[[process.check]]
buffer = "y"
fill = 1.0
"#;
    let s = parse("s.toml", text, &Mem).unwrap_or_else(|e| panic!("{e}"));
    let gpu = GpuConfig::preset("gtx480").unwrap();
    let setup = Setup::for_scenario(&s, TimedGpu::new(gpu), 1 << 30).unwrap();
    let r = System::new(setup, &s.processes)
        .unwrap()
        .run(&mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.dumps.len(), 1, "one file");
    assert_eq!(f32s(&r.dumps[0].bytes), vec![7.0; 64]);
    assert!(r.processes[0].verdict.as_ref().unwrap().verified);
    // A dump is a copy the report counts: 2 in, 3 dumps, 1 in again.
    assert_eq!(r.copies.len(), 6);
}

const GOOD: &str = r#"[[process]]
name = "p"
ptx = "saxpy.ptx"

[[process.buffer]]
name = "x"
type = "f32"
len = 16

[[process.command]]
copy = "x"

[[process.command]]
dump = "x"
"#;

fn error(text: &str) -> String {
    parse("s.toml", text, &Mem).unwrap_err().to_string()
}

#[test]
fn the_mistakes_a_dump_can_hold_are_refused_at_load_time() {
    parse("s.toml", GOOD, &Mem).unwrap();
    let e = error(&GOOD.replace("dump = \"x\"", "dump = \"z\""));
    assert!(
        e.starts_with("s.toml:14:8:")
            && e.contains("`process[0].command[1].dump`")
            && e.contains("no buffer `z`"),
        "{e}"
    );
    // A buffer of 10 bytes is not a whole number of u32s.
    let odd = GOOD
        .replace("type = \"f32\"\nlen = 16", "type = \"u8\"\nlen = 10")
        .replace("dump = \"x\"", "dump = \"x\"\ntype = \"u32\"");
    let e = error(&odd);
    assert!(
        e.starts_with("s.toml:15:8:")
            && e.contains("`process[0].command[1].type`")
            && e.contains("10 bytes, not a whole number of 4-byte `<u4` elements"),
        "{e}"
    );
    let e = error(&GOOD.replace("dump = \"x\"", "dump = \"x\"\nshape = [3, 5]"));
    assert!(
        e.starts_with("s.toml:15:9:")
            && e.contains("`process[0].command[1].shape`")
            && e.contains("[3, 5] holds 15 elements, but buffer `x` holds 16 of `<f4`"),
        "{e}"
    );
    // The shape counts elements of the dump's type: 16 f32s are 8 f64s.
    parse(
        "s.toml",
        &GOOD.replace(
            "dump = \"x\"",
            "dump = \"x\"\ntype = \"f64\"\nshape = [2, 4]",
        ),
        &Mem,
    )
    .unwrap();
    let e = error(&GOOD.replace("dump = \"x\"", "dump = \"x\"\nshape = []"));
    assert!(
        e.contains("`process[0].command[1].shape`") && e.contains("1 to 32"),
        "{e}"
    );
    let e = error(&GOOD.replace("dump = \"x\"", "dump = \"x\"\nshape = [\"-4\", -4]"));
    assert!(
        e.contains("`process[0].command[1].shape[0]`") && e.contains("at least 0"),
        "{e}"
    );
    // Loop indices are not constants: a shape is fixed when the file is loaded.
    let e = error(&GOOD.replace(
        "[[process.command]]\ndump = \"x\"",
        "[[process.command]]\nrepeat = { times = 2, as = \"t\" }\n[[process.command.body]]\ndump = \"x\"\nshape = [\"16 + t\"]",
    ));
    assert!(
        e.contains("`process[0].command[1].body[0].shape[0]`") && e.contains("`t`"),
        "{e}"
    );
    // A key of another kind of command.
    let e = error(&GOOD.replace("dump = \"x\"", "dump = \"x\"\noffset = 4"));
    assert!(
        e.contains("`process[0].command[1].offset`")
            && e.contains("a dump command takes no `offset` (it takes: file, type, shape, stream)"),
        "{e}"
    );
    // Two dumps writing one file.
    let e = error(&format!(
        "{GOOD}\n[[process.command]]\ndump = \"x\"\nfile = \"x.npy\"\n"
    ));
    assert!(
        e.starts_with("s.toml:18:8:")
            && e.contains("`process[0].command[2].file`")
            && e.contains("already the file of the dump at process[0].command[1] (s.toml:14:8)"),
        "{e}"
    );
    let e = error(&GOOD.replace("dump = \"x\"", "dump = \"x\"\nfile = \"out/\""));
    assert!(
        e.contains("`process[0].command[1].file`") && e.contains("names no file"),
        "{e}"
    );
    let e = error(&GOOD.replace("dump = \"x\"", "dump = \"x\"\ntype = \"f16\""));
    assert!(e.starts_with("s.toml:15:8:") && e.contains("f16"), "{e}");
}
