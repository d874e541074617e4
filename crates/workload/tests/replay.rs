//! Replay (papers/tanasic-thesis §5.3.1): every program starts again when it completes,
//! until each process has completed its runs; runs in progress then are not recorded.

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

/// A long suite program beside a short command list (one copy in, `launches` launches, one
/// copy out, checked), under FCFS.
fn scenario(replay: &str, launches: u32) -> String {
    format!(
        r#"
{replay}
[[process]]
name = "hotspot"
suite = "hotspot"

[[process]]
name = "saxpy"
ptx = "saxpy.ptx"

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
repeat = {launches}
[[process.command.body]]
launch = "saxpy"
grid = [4]
block = [128]
args = [{{ buffer = "x" }}, {{ buffer = "y" }}, {{ f32 = 2.0 }}, {{ u32 = 500 }}]

[[process.command]]
copy = "y"
direction = "to_host"

[[process.check]]
buffer = "y"
values = [{}]
"#,
        // y = 1 + launches × 2x for x = 0, 1, 2
        (0..3)
            .map(|x| format!("{:.1}", 1.0 + f64::from(launches) * 2.0 * f64::from(x)))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn run(text: &str) -> workload::RunRecord {
    let s = parse("replay.toml", text, &Mem).unwrap_or_else(|e| panic!("{e}"));
    let gpu = GpuConfig::preset("gtx480").unwrap();
    let setup = Setup::for_scenario(&s, TimedGpu::new(gpu), 1 << 30).unwrap();
    System::new(setup, &s.processes)
        .unwrap()
        .run(&mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn replay_reruns_every_program_until_each_has_completed_its_runs() {
    let r = run(&scenario("replay = 3", 2));
    let runs = |name: &str| &r.processes.iter().find(|p| p.name == name).unwrap().runs;
    let (long, short) = (runs("hotspot"), runs("saxpy"));
    // Each completed at least three times; the short program, replayed while the long one
    // runs, many more.
    assert!(long.len() >= 3, "hotspot completed {} runs", long.len());
    assert!(
        short.len() > long.len(),
        "{} vs {}",
        short.len(),
        long.len()
    );
    for p in &r.processes {
        // Each run starts when the one before it ends (the first at the arrival), ends
        // after it starts, and verified (a replayed command list starts from its initial
        // buffers, so its check holds every time).
        assert_eq!(p.runs[0].started_fs, p.arrival_fs);
        for w in p.runs.windows(2) {
            assert_eq!(w[1].started_fs, w[0].finished_fs, "{}", p.name);
        }
        for run in &p.runs {
            assert!(run.finished_fs > run.started_fs);
            assert!(run.verdict.verified, "{}: {}", p.name, run.verdict.detail);
        }
        assert_eq!(p.finished_fs, Some(p.runs.last().unwrap().finished_fs));
    }
    // The run stopped when the last process completed its third run: that moment is the
    // latest completion of all, and it was some process's third.
    let last = r
        .processes
        .iter()
        .flat_map(|p| p.runs.iter().map(|x| x.finished_fs))
        .max()
        .unwrap();
    assert!(r
        .processes
        .iter()
        .any(|p| p.runs.len() == 3 && p.runs[2].finished_fs == last));
    // Every completed run of the command list launched its two kernels; a run in progress
    // when the replay stopped may have launched more.
    let saxpy = r.kernels.iter().filter(|k| k.process == "saxpy").count();
    assert!(
        saxpy >= 2 * short.len(),
        "{saxpy} launches, {} runs",
        short.len()
    );
    assert!(saxpy <= 2 * (short.len() + 1));
    // The mean turnaround is over the completed runs.
    let p = r.processes.iter().find(|p| p.name == "saxpy").unwrap();
    let mean = short
        .iter()
        .map(|x| (x.finished_fs - x.started_fs) as f64)
        .sum::<f64>()
        / short.len() as f64;
    assert_eq!(p.mean_turnaround_fs(), Some(mean));
}

#[test]
fn without_replay_each_program_runs_once() {
    let r = run(&scenario("", 2));
    for p in &r.processes {
        assert_eq!(p.runs.len(), 1, "{}", p.name);
        assert!(p.runs[0].verdict.verified);
    }
}

#[test]
fn a_replay_count_out_of_range_names_its_line() {
    for bad in ["replay = 0", "replay = 1001"] {
        let e = parse("bad.toml", &scenario(bad, 1), &Mem).unwrap_err();
        assert_eq!(e.field, "replay", "{e}");
        assert!(e.location.starts_with("bad.toml:2:"), "{e}");
    }
}
