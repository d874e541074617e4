//! What a scenario's buffers cost in host memory (issue 21: one process with 2 GiB of
//! buffers peaked at 9.4 GB, four to five copies of each). Measured as the process's peak
//! resident memory (Linux's `VmHWM`, reset through `/proc/self/clear_refs` before the run);
//! the buffers are large enough that the allocator maps and unmaps each one on its own, so
//! the peak follows the copies alive at once. This file holds one test, so nothing else in
//! the process allocates while it runs.

use std::path::Path;

use gpu::config::GpuConfig;
use gpu::timing::TimedGpu;
use workload::{parse, Files, Setup, System};

/// A field of `/proc/self/status`, in bytes.
fn status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

const SAXPY: &str = include_str!("../../../examples/saxpy/saxpy.ptx");

struct Mem;

impl Files for Mem {
    fn read(&self, path: &Path) -> Result<Vec<u8>, String> {
        match path.file_name().and_then(|f| f.to_str()) {
            Some("saxpy.ptx") => Ok(SAXPY.as_bytes().to_vec()),
            _ => Err("no such file".into()),
        }
    }
}

/// Elements of each of the two buffers: 2 × 128 MiB, large enough that the machine's own
/// state is a few hundredths of them.
const LEN: u64 = 32 << 20;

#[test]
fn a_scenario_holds_its_buffers_twice_and_one_in_transit() {
    let text = format!(
        r#"
[[process]]
name = "big"
ptx = "saxpy.ptx"
[[process.buffer]]
name = "x"
type = "f32"
len = {LEN}
init = "iota"
[[process.buffer]]
name = "y"
type = "f32"
len = {LEN}
init = "fill"
value = 1.0
[[process.command]]
copy = "x"
[[process.command]]
copy = "y"
[[process.command]]
launch = "saxpy"
grid = [16]
block = [256]
args = [{{ buffer = "x" }}, {{ buffer = "y" }}, {{ f32 = 2.0 }}, {{ u32 = 4096 }}]
[[process.command]]
copy = "y"
direction = "to_host"
[[process.check]]
buffer = "y"
values = [1.0, 3.0, 5.0, 7.0]
"#
    );
    let buffers = 2 * 4 * LEN;
    // Reset the peak to the memory in use now ("5": Linux 4.0 and later).
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let Some(before) = status_bytes("VmRSS:").filter(|_| reset) else {
        eprintln!("no /proc/self peak resident memory to measure here");
        return;
    };
    let s = parse("t.toml", &text, &Mem).unwrap_or_else(|e| panic!("{e}"));
    let gpu = GpuConfig::preset("gtx480").unwrap();
    let setup = Setup::for_scenario(&s, TimedGpu::new(gpu), 1 << 30).unwrap();
    let r = System::new(setup, &s.processes)
        .unwrap()
        .run(&mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    let verdict = r.processes[0]
        .verdict
        .as_ref()
        .expect("the process finished");
    assert!(verdict.verified, "{}", verdict.detail);
    let peak = status_bytes("VmHWM:").unwrap().saturating_sub(before);
    let copies = peak as f64 / buffers as f64;
    eprintln!("peak {peak} bytes: {copies:.2} times the buffers' {buffers}");
    // The initial contents the program holds (every run of it, replays and the run alone
    // start from them), device memory, and one buffer in transit (half of them here): the
    // bytes of a copy in flight, or of a buffer being written to device memory when it is
    // allocated. The machine itself (caches, queues) is a few MB, about 0.03 here. It was
    // 4.5: the scenario's program, the system's own copy of it, the host's copy of every
    // buffer, device memory and a buffer in transit.
    assert!(copies < 2.6, "{copies:.2} copies of the buffers");
}
