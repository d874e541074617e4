//! Launch specs (`switchyard run FILE.ptx --spec`): a scenario of one process, parsed by the
//! scenario parser on the PTX file `run` is given; texture objects over a process's
//! buffers, checked against the buffer and the sampler's rules when the file loads.

use std::path::Path;

use gpu::texture::AddressMode;
use workload::scenario::{parse_spec, Arg, CmdKind, Program, ScenarioError};
use workload::Files;

/// `shift(cudaTextureObject_t img, float *out, int w)`: does nothing; its first parameter
/// is a texture object's 64-bit handle.
const SHIFT: &str = r#".version 7.0
.target sm_70
.address_size 64

.visible .entry shift(
    .param .u64 shift_param_0,
    .param .u64 shift_param_1,
    .param .u32 shift_param_2
)
{
    ret;
}
"#;

struct NoFiles;

impl Files for NoFiles {
    fn read(&self, path: &Path) -> Result<Vec<u8>, String> {
        Err(format!("{}: no such file", path.display()))
    }
}

/// A spec with texture `t` (its keys plus `extra`) over a 16-float buffer, passed first.
fn spec(extra: &str) -> String {
    format!(
        r#"[[process]]
name = "p"

[[process.buffer]]
name = "x"
type = "f32"
len = 16

[[process.texture]]
name = "t"
buffer = "x"
width = 2
height = 2
{extra}

[[process.command]]
launch = "shift"
grid = [1]
block = [32]
args = [{{ texture = "t" }}, {{ buffer = "x" }}, {{ u32 = 2 }}]
"#
    )
}

fn load(text: &str) -> Result<workload::Scenario, ScenarioError> {
    parse_spec("spec.toml", text, &NoFiles, ("shift.ptx", SHIFT))
}

#[test]
fn a_spec_runs_the_given_ptx_and_passes_its_texture_by_handle() {
    let s = load(&spec(
        "address = [\"border\", \"clamp\"]\nfilter = \"linear\"",
    ))
    .unwrap();
    let Program::Commands(p) = &s.processes[0].program else {
        panic!("a command program")
    };
    assert_eq!(p.ptx_file, "shift.ptx");
    assert_eq!(p.textures.len(), 1);
    let d = &p.textures[0].desc;
    assert_eq!(
        d.address,
        [AddressMode::Border, AddressMode::Clamp, AddressMode::Clamp]
    );
    // Four f32 texels from the start of `x` (the buffer's address is added when made).
    assert_eq!((p.textures[0].buffer, d.base, d.bytes()), (0, 0, 16));
    let CmdKind::Launch { args, .. } = &p.commands[0].kind else {
        panic!("a launch")
    };
    assert!(matches!(args[0], Arg::Texture(0)), "{:?}", args[0]);
    // The PTX the spec names is replaced by the one `run` was given.
    let named = spec("").replace("name = \"p\"\n", "name = \"p\"\nptx = \"other.ptx\"\n");
    assert!(load(&named).is_ok());
}

#[test]
fn textures_are_checked_against_their_buffer_and_sampler_rules() {
    for (extra, field) in [
        ("channels = 3", "process[0].texture[0].channels"),
        ("depth = 5", "process[0].texture[0]`"),
        ("offset = 52", "process[0].texture[0]`"),
        ("address = \"wrap\"", "process[0].texture[0].address"),
        (
            "format = \"u32\"\nfilter = \"linear\"",
            "process[0].texture[0].filter",
        ),
        ("read = \"normalized-float\"", "process[0].texture[0].read"),
        ("address = []", "process[0].texture[0].address"),
    ] {
        let e = load(&spec(extra)).unwrap_err().to_string();
        assert!(
            e.contains(field) && e.starts_with("spec.toml:9:1"),
            "{extra}: {e}"
        );
    }
    let e = load(&spec("").replace("buffer = \"x\"\nwidth", "buffer = \"y\"\nwidth"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("process[0].texture[0].buffer") && e.contains("no buffer `y`"));
    let e = load(&spec("").replace("{ texture = \"t\" }", "{ texture = \"u\" }"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("args[0].texture") && e.contains("no texture `u`"),
        "{e}"
    );
    // A texture handle is 64 bits: not for the 32-bit parameter.
    let e = load(&spec("").replace("{ u32 = 2 }", "{ texture = \"t\" }"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("a texture (a 64-bit handle) for parameter 2"),
        "{e}"
    );
    let twice = spec("").replace(
        "[[process.command]]",
        "[[process.texture]]\nname = \"t\"\nbuffer = \"x\"\nwidth = 1\n\n[[process.command]]",
    );
    let e = load(&twice).unwrap_err().to_string();
    assert!(e.contains("a texture `t` already exists"), "{e}");
}

#[test]
fn what_only_a_scenario_gives_meaning_to_is_an_error_naming_the_key() {
    for (text, field, at) in [
        (
            "[scheduler]\npolicy = \"npq\"\n",
            "`scheduler`",
            "spec.toml:1:1",
        ),
        ("replay = 3\n", "`replay`", "spec.toml:1:10"),
        ("gpu = \"a100\"\n", "`gpu`", "spec.toml:1:7"),
    ] {
        let e = load(&format!("{text}{}", spec("")))
            .unwrap_err()
            .to_string();
        assert!(e.contains(field) && e.contains(at), "{text}: {e}");
    }
    for key in ["arrival_us = 1.0", "priority = 2", "requests = 3"] {
        let e = load(&spec("").replace("name = \"p\"\n", &format!("name = \"p\"\n{key}\n")))
            .unwrap_err()
            .to_string();
        let name = key.split(' ').next().unwrap();
        assert!(
            e.contains(&format!("`process[0].{name}`")) && e.contains("spec.toml:3:"),
            "{key}: {e}"
        );
    }
    let e = load("description = \"none\"\n").unwrap_err().to_string();
    assert!(
        e.contains("exactly one [[process]] (this one has 0)"),
        "{e}"
    );
}
