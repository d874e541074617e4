//! Stream priorities (issue 23, item 5): within one process, the block scheduler prefers the
//! pending TBs of a kernel on a stream of higher priority, and preempts no running TB.
//!
//! One process, so the copy engines' order cannot differ between the runs compared: the
//! same copies, in the same order, on the same streams, and only the streams' priorities
//! change.

use std::path::Path;

use gpu::config::GpuConfig;
use gpu::timing::{Move, TimedGpu};
use workload::{parse, RunRecord, Setup, System};

/// `batch` (180 TBs of `fma_f32`, two waves on the GTX480's 15 SMs) on stream 1, then a
/// blocking copy that keeps the host busy for a while, then `urgent` (4 TBs) on stream 2;
/// `streams` is the scenario's `[[process.stream]]` tables.
fn scenario(policy: &str, mechanism: &str, streams: &str) -> String {
    let ptx = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/throughput/fma.ptx");
    format!(
        r#"
[limits]
max_cycles = 20_000_000
[scheduler]
policy = "{policy}"
mechanism = "{mechanism}"

[[process]]
name = "p"
ptx = "{ptx}"
{streams}
[[process.buffer]]
name = "big"
type = "f32"
len = 46080
init = "fill"
value = 1.0
[[process.buffer]]
name = "small"
type = "f32"
len = 1024
init = "fill"
value = 1.0
[[process.buffer]]
name = "pad"
type = "u8"
len = 65536

[[process.command]]
copy = "big"
[[process.command]]
copy = "small"
[[process.command]]
launch = "fma_f32"
grid = [180]
block = [256]
args = [{{ buffer = "big" }}, {{ u32 = 200 }}]
stream = 1
[[process.command]]
copy = "pad"
[[process.command]]
launch = "fma_f32"
grid = [4]
block = [256]
args = [{{ buffer = "small" }}, {{ u32 = 4 }}]
stream = 2
[[process.command]]
sync = true

[[process.check]]
buffer = "big"
fill = 0.0
[[process.check]]
buffer = "small"
fill = 0.0
"#,
        ptx = ptx.display()
    )
}

fn run(policy: &str, mechanism: &str, streams: &str) -> RunRecord {
    let text = scenario(policy, mechanism, streams);
    let s = parse("streams.toml", &text, &workload::Disk).unwrap_or_else(|e| panic!("{e}"));
    let gpu = GpuConfig::preset("gtx480").unwrap();
    let setup = Setup::for_scenario(&s, TimedGpu::new(gpu), s.max_cycles.unwrap()).unwrap();
    let r = System::new(setup, &s.processes)
        .unwrap()
        .run(&mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    for p in &r.processes {
        let v = p.verdict.as_ref().expect("finished");
        assert!(v.verified, "{streams}: {}", v.detail);
    }
    r
}

/// The urgent kernel's time from its arrival at the GPU to its end, in core cycles.
fn urgent_wait(r: &RunRecord) -> u64 {
    let k = r.kernels.iter().find(|k| k.stream == 2).expect("urgent");
    (k.finished_fs.unwrap() - k.arrived_fs.unwrap()) / r.core_period_fs
}

const URGENT_HIGH: &str = "[[process.stream]]\nid = 2\npriority = 5\n";
const BATCH_HIGH: &str = "[[process.stream]]\nid = 1\npriority = 5\n";

#[test]
fn a_high_priority_stream_takes_the_sms_as_their_tbs_finish_and_preempts_none() {
    // The same scenario three times, under FCFS with a context-switching mechanism set up:
    // no stream priority, the urgent kernel's stream high, the batch's stream high.
    let plain = run("fcfs", "baseline", "");
    let urgent = run("fcfs", "baseline", URGENT_HIGH);
    let batch = run("fcfs", "baseline", BATCH_HIGH);
    let (w_plain, w_urgent, w_batch) = (
        urgent_wait(&plain),
        urgent_wait(&urgent),
        urgent_wait(&batch),
    );
    eprintln!("urgent kernel, arrival to end: plain {w_plain}, urgent stream high {w_urgent}, batch stream high {w_batch} cycles");
    // The copies are the same in every run: only the priorities differ.
    for r in [&urgent, &batch] {
        let copies = |r: &RunRecord| -> Vec<(u64, u64)> {
            r.copies.iter().map(|c| (c.started_fs, c.bytes)).collect()
        };
        assert_eq!(copies(r)[..3], copies(&plain)[..3]);
    }
    // Without a priority the urgent kernel waits until the batch kernel has placed its last
    // TB (the second wave); with one, the SMs stop taking batch TBs at once and the urgent
    // kernel runs as soon as the first SM empties, a wave earlier.
    assert!(
        w_urgent * 2 < w_plain,
        "a high-priority stream should halve the wait: {w_urgent} vs {w_plain}"
    );
    // The batch stream's priority over a kernel that arrives after it changes nothing.
    assert_eq!(w_batch, w_plain);
    // Stream priorities preempt nothing, whatever the mechanism: no TB is evicted, the
    // mechanism is never asked, and every batch TB is placed once.
    assert_eq!(urgent.preemptions.len(), 0, "the mechanism was asked");
    assert!(!urgent
        .residency
        .iter()
        .any(|m| matches!(m.how, Move::Evicted | Move::Discarded | Move::Restored)));
    let placed = urgent
        .residency
        .iter()
        .filter(|m| m.tb.launch.0 == 0 && m.how == Move::Dispatched)
        .count();
    assert_eq!(placed, 180);
    // The SMs were handed over by yielding, not by the policy's reservations.
    let yielded = urgent
        .records
        .iter()
        .filter(|r| matches!(r, sched::Record::SmYielded { .. }))
        .count();
    assert!(yielded > 0);
    assert!(!urgent
        .records
        .iter()
        .any(|r| matches!(r, sched::Record::SmReserved { .. })));
}
