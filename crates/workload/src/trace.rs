//! The timeline of a run as a Chrome trace-event file (the JSON object format that Perfetto
//! and `chrome://tracing` open), stamped in microseconds of simulated time.
//!
//! Tracks (`pid` / `tid`):
//! * `GPU` (pid 0), one thread per SM: a slice for every interval in which the set of
//!   kernels with TBs on the SM stays the same, named after them (`process:kernel`).
//! * `copy engines` (pid 1), one thread per engine: a slice per copy.
//! * one track per process (pid 2 + its index), one thread per stream: a slice per kernel
//!   (from its arrival at the GPU to its end) and per copy (from the engine taking it to its
//!   end), and an instant event at each launch call.
//!   Two counter tracks, `NoC requests per cycle` and `DRAM bytes per cycle`, give each of
//!   its kernels' interconnect requests (towards the L2) and the DRAM bytes they caused,
//!   per core cycle, per window of [`crate::system::BANDWIDTH_WINDOW_CYCLES`]
//!   ([`RunRecord::bandwidth`]).
//! * `contexts` (the last pid), threads per SM: a slice for every context save (from its
//!   first bytes leaving to the TB's resources released) and restore, with the bytes it
//!   moved; saves and restores overlapping on one SM go on separate threads of it
//!   (`SM 3 · 1`); an instant event for every TB flushed.
//!
//! Events of a track are written in time order and never overlap ([`validate`] checks
//! that, with the format's required fields).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::system::{RunRecord, FS_PER_US};
use gpu::timing::{LaunchId, SmId};

const GPU: u64 = 0;
const ENGINES: u64 = 1;
const FIRST_PROCESS: u64 = 2;

fn us(fs: u64) -> f64 {
    fs as f64 / FS_PER_US as f64
}

/// A complete event (`ph: X`) of a track.
struct Slice {
    pid: u64,
    tid: u64,
    name: String,
    ts: f64,
    dur: f64,
    args: Value,
}

/// The trace of run `r`.
pub fn chrome_trace(r: &RunRecord) -> Value {
    let mut meta = Vec::new();
    let mut slices = Vec::new();
    let mut instants = Vec::new();
    let name = |pid: u64, n: &str| json!({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": n}});
    let thread = |pid: u64, tid: u64, n: String| json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": n}});
    meta.push(name(GPU, "GPU"));
    for sm in 0..r.sm_count {
        meta.push(thread(GPU, u64::from(sm), format!("SM {sm}")));
    }
    // Kernel names by machine launch.
    let label = |l: LaunchId| -> String {
        match r.kernels.iter().find(|k| k.launch == Some(l.0)) {
            Some(k) => format!("{}:{}", k.process, k.kernel),
            None => r
                .launch_names
                .get(l.0 as usize)
                .cloned()
                .unwrap_or_else(|| l.to_string()),
        }
    };
    let cycle_us = |c: u64| us(c * r.core_period_fs);
    // SM tracks: intervals of a constant set of resident kernels.
    let mut resident: BTreeMap<SmId, (BTreeMap<LaunchId, u32>, u64)> = BTreeMap::new();
    for m in &r.residency {
        let (cycle, sm, launch) = (m.cycle, m.sm, m.tb.launch);
        let delta = if m.how.arrives() { 1i64 } else { -1 };
        let (set, since) = resident.entry(sm).or_insert((BTreeMap::new(), cycle));
        let before: Vec<LaunchId> = set.keys().copied().collect();
        let n = set.entry(launch).or_insert(0);
        *n = (*n as i64 + delta) as u32;
        if *n == 0 {
            set.remove(&launch);
        }
        let after: Vec<LaunchId> = set.keys().copied().collect();
        if before != after {
            if !before.is_empty() && cycle > *since {
                slices.push(sm_slice(sm, &before, *since, cycle, &label, &cycle_us));
            }
            *since = cycle;
        }
    }
    for (sm, (set, since)) in resident {
        if !set.is_empty() && r.cycles > since {
            let open: Vec<LaunchId> = set.keys().copied().collect();
            slices.push(sm_slice(sm, &open, since, r.cycles, &label, &cycle_us));
        }
    }
    // Copy engines.
    meta.push(name(ENGINES, "copy engines"));
    let engines = r.copies.iter().map(|c| c.engine).max().map_or(0, |e| e + 1);
    for e in 0..engines {
        meta.push(thread(ENGINES, u64::from(e), format!("engine {e}")));
    }
    for c in &r.copies {
        let dir = if c.to_device { "H2D" } else { "D2H" };
        slices.push(Slice {
            pid: ENGINES,
            tid: u64::from(c.engine),
            name: format!("{dir} {} B ({})", c.bytes, c.process),
            ts: us(c.started_fs),
            dur: us(c.finished_fs - c.started_fs),
            args: json!({"process": c.process, "bytes": c.bytes, "called_us": us(c.called_fs)}),
        });
    }
    // Processes and their streams.
    for (i, p) in r.processes.iter().enumerate() {
        let pid = FIRST_PROCESS + i as u64;
        meta.push(name(pid, &p.name));
        let mut streams: Vec<u32> = r
            .kernels
            .iter()
            .filter(|k| k.process == p.name)
            .map(|k| k.stream)
            .chain(
                r.copies
                    .iter()
                    .filter(|c| c.process == p.name)
                    .map(|c| c.stream),
            )
            .collect();
        streams.sort_unstable();
        streams.dedup();
        for s in streams {
            meta.push(thread(pid, u64::from(s), format!("stream {s}")));
        }
        for k in r.kernels.iter().filter(|k| k.process == p.name) {
            instants.push(json!({
                "name": format!("launch {}", k.kernel), "ph": "i", "s": "t",
                "ts": us(k.called_fs), "pid": pid, "tid": k.stream,
            }));
            if let (Some(a), Some(f)) = (k.arrived_fs, k.finished_fs) {
                slices.push(Slice {
                    pid,
                    tid: u64::from(k.stream),
                    name: k.kernel.clone(),
                    ts: us(a),
                    dur: us(f - a),
                    args: json!({
                        "called_us": us(k.called_fs),
                        "activated_us": k.activated_fs.map(us),
                        "started_us": k.started_fs.map(us),
                        "launch": k.launch,
                    }),
                });
            }
        }
        for c in r.copies.iter().filter(|c| c.process == p.name) {
            let dir = if c.to_device { "H2D" } else { "D2H" };
            slices.push(Slice {
                pid,
                tid: u64::from(c.stream),
                name: format!("{dir} {} B", c.bytes),
                ts: us(c.started_fs),
                dur: us(c.finished_fs - c.started_fs),
                args: json!({"engine": c.engine}),
            });
        }
    }
    contexts(r, &mut meta, &mut slices, &mut instants, &label, &cycle_us);
    slices.sort_by(|a, b| {
        (a.pid, a.tid)
            .cmp(&(b.pid, b.tid))
            .then(a.ts.total_cmp(&b.ts))
    });
    let mut events = meta;
    events.extend(slices.into_iter().map(|s| {
        json!({"name": s.name, "ph": "X", "ts": s.ts, "dur": s.dur, "pid": s.pid, "tid": s.tid, "args": s.args})
    }));
    instants.sort_by(|a, b| {
        a["ts"]
            .as_f64()
            .unwrap_or(0.0)
            .total_cmp(&b["ts"].as_f64().unwrap_or(0.0))
    });
    events.extend(instants);
    events.extend(bandwidth_counters(r));
    json!({"traceEvents": events, "displayTimeUnit": "ns"})
}

/// The process and kernel of machine launch `l` (`None` if no kernel record has it).
fn kernel_of(r: &RunRecord, l: u32) -> Option<(usize, &str)> {
    let k = r.kernels.iter().find(|k| k.launch == Some(l))?;
    let p = r.processes.iter().position(|p| p.name == k.process)?;
    Some((p, k.kernel.as_str()))
}

/// Counter events (`ph: C`) of every process's traffic per core cycle — interconnect
/// requests, and DRAM bytes — one series per kernel (its launches summed), at each
/// window's start; a series drops to 0 at the first window after one in which it caused
/// traffic when the next caused none.
fn bandwidth_counters(r: &RunRecord) -> Vec<Value> {
    use crate::system::BANDWIDTH_WINDOW_CYCLES as W;
    let window_us = |w: u64| us(w * W * r.core_period_fs);
    // Per process: window → kernel → (requests, bytes).
    type Windows<'a> = BTreeMap<u64, BTreeMap<&'a str, (u64, u64)>>;
    let mut per: BTreeMap<usize, Windows> = BTreeMap::new();
    for s in &r.bandwidth {
        if let Some((p, k)) = kernel_of(r, s.launch) {
            let e = per
                .entry(p)
                .or_default()
                .entry(s.window)
                .or_default()
                .entry(k)
                .or_default();
            e.0 += s.noc_requests;
            e.1 += s.dram_bytes;
        }
    }
    let mut out = Vec::new();
    for (p, windows) in per {
        let kernels: std::collections::BTreeSet<&str> =
            windows.values().flat_map(|m| m.keys().copied()).collect();
        let pid = FIRST_PROCESS + p as u64;
        let counter = |name: &str,
                       w: u64,
                       m: Option<&BTreeMap<&str, (u64, u64)>>,
                       pick: fn(&(u64, u64)) -> u64| {
            let mut a = serde_json::Map::new();
            for k in &kernels {
                let n = m.and_then(|m| m.get(k)).map_or(0, pick);
                a.insert(k.to_string(), json!(n as f64 / W as f64));
            }
            json!({"name": name, "ph": "C", "ts": window_us(w), "pid": pid, "tid": 0, "args": a})
        };
        for (&w, m) in &windows {
            let next = !windows.contains_key(&(w + 1));
            for (name, pick) in [
                (
                    "NoC requests per cycle",
                    (|x: &(u64, u64)| x.0) as fn(&(u64, u64)) -> u64,
                ),
                ("DRAM bytes per cycle", |x: &(u64, u64)| x.1),
            ] {
                out.push(counter(name, w, Some(m), pick));
                if next {
                    out.push(counter(name, w + 1, None, pick));
                }
            }
        }
    }
    out
}

/// Every launch's traffic per window ([`RunRecord::bandwidth`]) as CSV: the window's start
/// and end (µs), the process, kernel and machine launch, its interconnect requests, DRAM
/// bytes and interconnect flits (requests and replies), each also per core cycle.
pub fn bandwidth_csv(r: &RunRecord) -> String {
    use crate::system::BANDWIDTH_WINDOW_CYCLES as W;
    let mut out = String::from(
        "window_start_us,window_end_us,process,kernel,launch,noc_requests,noc_requests_per_cycle,dram_bytes,dram_bytes_per_cycle,noc_flits,noc_flits_per_cycle\n",
    );
    let window_us = |w: u64| us(w * W * r.core_period_fs);
    for s in &r.bandwidth {
        let (process, kernel) = match kernel_of(r, s.launch) {
            Some((p, k)) => (r.processes[p].name.as_str(), k),
            None => ("", ""),
        };
        out.push_str(&format!(
            "{:.3},{:.3},{},{},{},{},{:.4},{},{:.4},{},{:.4}\n",
            window_us(s.window),
            window_us(s.window + 1),
            crate::report::csv_field(process),
            crate::report::csv_field(kernel),
            s.launch,
            s.noc_requests,
            s.noc_requests as f64 / W as f64,
            s.dram_bytes,
            s.dram_bytes as f64 / W as f64,
            s.noc_flits,
            s.noc_flits as f64 / W as f64
        ));
    }
    out
}

/// The `contexts` track: saves, restores and flushes of the preemption mechanism.
fn contexts(
    r: &RunRecord,
    meta: &mut Vec<Value>,
    slices: &mut Vec<Slice>,
    instants: &mut Vec<Value>,
    label: &dyn Fn(LaunchId) -> String,
    cycle_us: &dyn Fn(u64) -> f64,
) {
    use preempt::{How, Record as P};
    let pid = FIRST_PROCESS + r.processes.len() as u64;
    // Per SM: the end of the last slice on each of its threads.
    let mut lanes: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    let mut moves: Vec<(u32, u64, u64, String, Value)> = Vec::new();
    for p in &r.preemptions {
        match p {
            P::Preempted {
                sm,
                tb,
                how: How::Switched,
                stopped,
                moving,
                released,
                bytes,
                ..
            } => {
                let from = moving.iter().map(|m| m.0).min().unwrap_or(*stopped);
                moves.push((
                    sm.0,
                    from,
                    *released,
                    format!(
                        "save {} TB {} ({} B)",
                        label(tb.launch),
                        tb.index,
                        bytes.total()
                    ),
                    json!({"registers": bytes.registers, "shared": bytes.shared,
                           "stack_barrier": bytes.stack_barrier, "metadata": bytes.metadata,
                           "stopped_cycle": stopped}),
                ));
            }
            P::Preempted {
                sm,
                tb,
                how: How::Flushed {
                    discarded_instructions,
                },
                released,
                ..
            } => instants.push(json!({
                "name": format!("flush {} TB {}", label(tb.launch), tb.index), "ph": "i", "s": "t",
                "ts": cycle_us(*released), "pid": pid, "tid": u64::from(sm.0) << 8,
                "args": {"discarded_instructions": discarded_instructions},
            })),
            P::Restored {
                sm,
                tb,
                started,
                finished,
                bytes,
            } => moves.push((
                sm.0,
                *started,
                *finished,
                format!(
                    "restore {} TB {} ({} B)",
                    label(tb.launch),
                    tb.index,
                    bytes.total()
                ),
                json!({"bytes": bytes.total()}),
            )),
            _ => {}
        }
    }
    if moves.is_empty() && instants.iter().all(|i| i["pid"] != pid) {
        return;
    }
    meta.push(json!({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "contexts"}}));
    moves.sort_by_key(|m| (m.0, m.1, m.2));
    let mut named: Vec<u64> = Vec::new();
    for (sm, from, to, name, args) in moves {
        let ends = lanes.entry(sm).or_default();
        let lane = match ends.iter().position(|&e| e <= from) {
            Some(l) => l,
            None => {
                ends.push(0);
                ends.len() - 1
            }
        };
        ends[lane] = to;
        let tid = (u64::from(sm) << 8) | lane as u64;
        if !named.contains(&tid) {
            named.push(tid);
            let n = if lane == 0 {
                format!("SM {sm}")
            } else {
                format!("SM {sm} · {lane}")
            };
            meta.push(json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": n}}));
        }
        slices.push(Slice {
            pid,
            tid,
            name,
            ts: cycle_us(from),
            dur: cycle_us(to) - cycle_us(from),
            args,
        });
    }
}

fn sm_slice(
    sm: SmId,
    kernels: &[LaunchId],
    from: u64,
    to: u64,
    label: &dyn Fn(LaunchId) -> String,
    cycle_us: &dyn Fn(u64) -> f64,
) -> Slice {
    Slice {
        pid: GPU,
        tid: u64::from(sm.0),
        name: kernels
            .iter()
            .map(|&l| label(l))
            .collect::<Vec<_>>()
            .join(" + "),
        ts: cycle_us(from),
        dur: cycle_us(to) - cycle_us(from),
        args: json!({"launches": kernels.iter().map(|l| l.0).collect::<Vec<_>>(), "from_cycle": from, "to_cycle": to}),
    }
}

/// Checks a trace against the trace-event format as Perfetto reads it: a `traceEvents`
/// array whose events have a string `name`, a known `ph`, integer `pid` and `tid`, numeric
/// `ts` (and a non-negative `dur` for complete events, a scope for instant events, a name in
/// `args` for metadata); and, per track, complete events in time order without overlap.
pub fn validate(trace: &Value) -> Result<(), String> {
    let events = trace["traceEvents"]
        .as_array()
        .ok_or("no traceEvents array")?;
    let mut last: BTreeMap<(u64, u64), f64> = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        let at = |what: &str| format!("event {i}: {what}: {e}");
        e["name"].as_str().ok_or_else(|| at("no name"))?;
        let pid = e["pid"].as_u64().ok_or_else(|| at("no integer pid"))?;
        let tid = e["tid"].as_u64().ok_or_else(|| at("no integer tid"))?;
        match e["ph"].as_str().ok_or_else(|| at("no ph"))? {
            "M" => {
                e["args"]["name"]
                    .as_str()
                    .ok_or_else(|| at("metadata without args.name"))?;
            }
            "X" => {
                let ts = e["ts"].as_f64().ok_or_else(|| at("no ts"))?;
                let dur = e["dur"].as_f64().ok_or_else(|| at("no dur"))?;
                if !(ts.is_finite() && ts >= 0.0 && dur.is_finite() && dur >= 0.0) {
                    return Err(at("negative or non-finite ts/dur"));
                }
                let end = last.entry((pid, tid)).or_insert(0.0);
                // Microsecond floats: allow rounding in the last place.
                if ts + 1e-9 < *end {
                    return Err(at("starts before the previous event of its track ends"));
                }
                *end = ts + dur;
            }
            "i" => {
                let ts = e["ts"].as_f64().ok_or_else(|| at("no ts"))?;
                if !(ts.is_finite() && ts >= 0.0) {
                    return Err(at("negative ts"));
                }
                if !matches!(e["s"].as_str(), Some("t" | "p" | "g")) {
                    return Err(at("instant without a scope"));
                }
            }
            "C" => {
                let ts = e["ts"].as_f64().ok_or_else(|| at("no ts"))?;
                let args = e["args"]
                    .as_object()
                    .ok_or_else(|| at("counter without args"))?;
                if !(ts.is_finite() && ts >= 0.0) || args.values().any(|v| !v.is_number()) {
                    return Err(at("a counter needs a ts and numeric args"));
                }
            }
            other => return Err(at(&format!("unknown ph `{other}`"))),
        }
    }
    Ok(())
}
