//! Scenarios end to end: processes running suite host programs and command lists share the
//! timed GTX480, and every one of them verifies.

use std::path::Path;

use gpu::config::GpuConfig;
use gpu::timing::TimedGpu;
use workload::{parse, Files, Setup, System};

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

fn setup(s: &workload::Scenario) -> Setup {
    let gpu = GpuConfig::preset("gtx480").unwrap();
    Setup {
        host: s.host_spec(&gpu.host),
        timing: TimedGpu::new(gpu),
        framework: s.framework.clone(),
        policy: s.policy,
        max_cycles: s.max_cycles.unwrap_or(1 << 30),
    }
}

const MIX: &str = r#"
[scheduler]
policy = "fcfs"

[[process]]
name = "bfs"
suite = "bfs"

[[process]]
name = "saxpy"
ptx = "saxpy.ptx"
arrival_us = 3.0

[[process.buffer]]
name = "x"
type = "f32"
len = 500
init = "iota"

[[process.buffer]]
name = "y"
type = "f32"
len = 500
init = "fill"
value = 1.0

[[process.command]]
copy = "x"

[[process.command]]
repeat = 3
[[process.command.body]]
launch = "saxpy"
grid = [4]
block = [128]
args = [{ buffer = "x" }, { buffer = "y" }, { f32 = 2.0 }, { u32 = 500 }]

[[process.command]]
copy = "y"
direction = "to_host"

[[process.check]]
buffer = "y"
values = [1.0, 7.0, 13.0]

[[process]]
name = "hotspot"
suite = "hotspot"
arrival_us = 10.0
"#;

#[test]
fn suite_and_command_processes_share_the_gpu_and_verify() {
    let s = parse("mix.toml", MIX, &Mem).unwrap();
    let r = System::new(setup(&s), &s.processes)
        .unwrap()
        .run(&mut |_| {})
        .unwrap();
    for p in &r.processes {
        let v = p.verdict.as_ref().unwrap();
        assert!(v.verified, "{}: {}", p.name, v.detail);
        assert!(p.finished_fs.unwrap() > p.arrival_fs);
    }
    let saxpy: Vec<_> = r.kernels.iter().filter(|k| k.process == "saxpy").collect();
    assert_eq!(saxpy.len(), 3);
    // Stream order: each launch of the loop starts after the previous one finished, and
    // reaches the GPU no earlier than the launch latency after its call.
    for w in saxpy.windows(2) {
        assert!(w[1].arrived_fs.unwrap() >= w[0].finished_fs.unwrap());
    }
    for k in &r.kernels {
        assert!(k.arrived_fs.unwrap() >= k.called_fs + 5 * workload::system::FS_PER_US);
        assert!(k.started_fs.unwrap() >= k.arrived_fs.unwrap());
        assert!(k.finished_fs.unwrap() > k.started_fs.unwrap());
    }
    assert!(r
        .copies
        .iter()
        .any(|c| c.process == "saxpy" && !c.to_device));
    eprintln!(
        "{} kernels, {} copies, {} cycles",
        r.kernels.len(),
        r.copies.len(),
        r.cycles
    );
}
