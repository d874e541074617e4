//! Demand paging of managed buffers (issue 26 item 2, papers/tanasic-thesis §6.4–6.5): a
//! scenario's `managed = true` buffer starts on the host where the GPU translates with
//! `[memory.translation.faults]` (the `fault-study` preset), and the GPU stalls on each
//! 64 KiB region's first touch. Expected fault counts are computed here from the buffers'
//! addresses, not read from the simulator.

use std::collections::BTreeSet;
use std::path::Path;

use gpu::config::GpuConfig;
use gpu::memory::DeviceMemory;
use gpu::timing::TimedGpu;
use memsys::FaultStats;
use workload::{parse, RunRecord, Setup, System};

/// Elements of `x` and `y` (256 KiB each: four regions' worth).
const N: u64 = 65536;

/// `y = 2 x + y` with saxpy, launched `launches` times; `managed` is written into both
/// buffers' tables (`x` holds host data, `y` starts zero).
fn scenario(managed: &str, launches: u32) -> String {
    let ptx = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/saxpy/saxpy.ptx");
    let expected = (0..launches).fold(0.0, |y, _| 2.0 + y);
    format!(
        r#"
[limits]
max_cycles = 50_000_000

[[process]]
name = "p"
ptx = "{ptx}"

[[process.buffer]]
name = "x"
type = "f32"
len = {N}
init = "fill"
value = 1.0
{managed}
[[process.buffer]]
name = "y"
type = "f32"
len = {N}
{managed}
[[process.command]]
repeat = {launches}
[[process.command.body]]
launch = "saxpy"
grid = [{blocks}]
block = [256]
args = [{{ buffer = "x" }}, {{ buffer = "y" }}, {{ f32 = 2.0 }}, {{ u32 = {N} }}]
[[process.command]]
sync = true

[[process.check]]
buffer = "y"
fill = {expected:?}
"#,
        ptx = ptx.display(),
        blocks = N / 256,
    )
}

fn run_on(gpu: GpuConfig, text: &str) -> RunRecord {
    let s = parse("paging.toml", text, &workload::Disk).unwrap_or_else(|e| panic!("{e}"));
    let mut setup = Setup::for_scenario(&s, TimedGpu::new(gpu), s.max_cycles.unwrap()).unwrap();
    setup.snapshot = true;
    let r = System::new(setup, &s.processes)
        .unwrap()
        .run(&mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    let v = r.processes[0].verdict.as_ref().expect("finished");
    assert!(v.verified, "{}", v.detail);
    r
}

fn preset(name: &str) -> GpuConfig {
    GpuConfig::preset(name).unwrap()
}

/// Every kernel's demand-paging counters, summed.
fn faults(r: &RunRecord) -> FaultStats {
    let mut sum = FaultStats::default();
    for k in &r.kernels {
        let t = k.stats.as_ref().expect("stats").memory.translation.clone();
        let f = t.and_then(|t| t.faults).unwrap_or_default();
        sum.far_faults += f.far_faults;
        sum.batches += f.batches;
        sum.regions_migrated += f.regions_migrated;
        sum.regions_allocated += f.regions_allocated;
        sum.merged += f.merged;
        sum.fault_cycles += f.fault_cycles;
        sum.busy_cycles += f.busy_cycles;
        sum.faulted_accesses += f.faulted_accesses;
    }
    sum
}

/// The 64 KiB regions `x` and `y` lie in: the process allocates them first, in order, on a
/// fresh device memory, each managed allocation at a region's start (so they share none).
fn regions() -> (BTreeSet<u64>, BTreeSet<u64>) {
    let mut m = DeviceMemory::new();
    let bytes = N * 4;
    let span = |base: u64| (base >> 16..=(base + bytes - 1) >> 16).collect::<BTreeSet<u64>>();
    let x = span(m.alloc_aligned(bytes, 1 << 16));
    let y = span(m.alloc_aligned(bytes, 1 << 16));
    assert!(x.is_disjoint(&y));
    (x, y)
}

/// fault-study with TLBs of 8 entries, so the second launch walks its pages again (with
/// Table 6.1's TLBs every page of these buffers would stay cached, and a resident region
/// that faulted again would go unnoticed).
fn small_tlbs() -> GpuConfig {
    let mut gpu = preset("fault-study");
    let t = gpu.memory.translation.as_mut().unwrap();
    for tlb in [&mut t.l1_tlb, &mut t.l2_tlb] {
        tlb.entries = 8;
        tlb.assoc = 8;
    }
    gpu
}

#[test]
fn first_touch_faults_once_per_region_and_results_are_identical() {
    let plain = run_on(small_tlbs(), &scenario("", 2));
    let managed = run_on(small_tlbs(), &scenario("managed = true", 2));
    // Results identical to the run on device memory.
    assert_eq!(managed.memory, plain.memory);
    let (x, y) = regions();
    let all: BTreeSet<u64> = x.union(&y).copied().collect();
    let f = faults(&managed);
    // One fault per region over both launches: the second launch finds everything resident.
    assert_eq!(f.far_faults, all.len() as u64, "{f:?}");
    let second = managed.kernels[1].stats.as_ref().unwrap();
    let t2 = second.memory.translation.as_ref().unwrap();
    let f2 = t2.faults.unwrap();
    assert!(t2.walks > 0, "the second launch walks again");
    assert_eq!(f2.far_faults, 0, "later touches do not fault: {f2:?}");
    // x holds host data (migrated); y's regions not shared with x have none (allocated).
    assert_eq!(f.regions_migrated, x.len() as u64);
    assert_eq!(f.regions_allocated, y.difference(&x).count() as u64);
    assert!(f.batches >= 1 && f.batches <= f.far_faults);
    // Stalling on the faults costs at least one fault's time.
    let transfer = (25.0 * small_tlbs().sm.clock_mhz) as u64;
    assert!(
        managed.cycles >= plain.cycles + transfer,
        "{} vs {}",
        managed.cycles,
        plain.cycles
    );
    eprintln!(
        "saxpy N={N} twice on fault-study with 8-entry TLBs: {} cycles on device memory, {} managed; {f:?}",
        plain.cycles, managed.cycles
    );
    assert!(faults(&plain).far_faults == 0);
}

/// Without translation (gtx480) a managed buffer is device memory: the same cycles. With
/// translation and no managed buffer, the demand-paging section changes nothing: the same
/// cycles as the GPU without it.
#[test]
fn without_translation_or_managed_buffers_nothing_changes() {
    let plain = run_on(preset("gtx480"), &scenario("", 1));
    let managed = run_on(preset("gtx480"), &scenario("managed = true", 1));
    assert_eq!(managed.cycles, plain.cycles);
    assert_eq!(managed.memory, plain.memory);
    let mut no_paging = preset("fault-study");
    no_paging.memory.translation.as_mut().unwrap().faults = None;
    let with = run_on(preset("fault-study"), &scenario("", 1));
    let without = run_on(no_paging, &scenario("", 1));
    assert_eq!(with.cycles, without.cycles);
}

#[test]
fn bad_managed_values_name_file_line_and_field() {
    let text = scenario("managed = \"yes\"", 1);
    let e = parse("paging.toml", &text, &workload::Disk)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("paging.toml:15:") && e.contains("buffer[0].managed"),
        "{e}"
    );
    eprintln!("{e}");
    // A GPU that translates without demand paging cannot hold managed memory.
    let mut no_paging = preset("fault-study");
    no_paging.memory.translation.as_mut().unwrap().faults = None;
    let s = parse(
        "paging.toml",
        &scenario("managed = true", 1),
        &workload::Disk,
    )
    .unwrap();
    let setup = Setup::for_scenario(&s, TimedGpu::new(no_paging), s.max_cycles.unwrap()).unwrap();
    let e = System::new(setup, &s.processes)
        .unwrap()
        .run(&mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("managed") && e.contains("[memory.translation.faults]"),
        "{e}"
    );
}

/// `scenarios/managed.toml` runs, verifies, and pages both buffers in on its first launch.
#[test]
fn the_example_scenario_pages_on_demand() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/managed.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let s = parse(&path.display().to_string(), &text, &workload::Disk)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.gpu.as_deref(), Some("fault-study"));
    let setup = Setup::for_scenario(&s, TimedGpu::new(preset("fault-study")), 50_000_000).unwrap();
    let r = System::new(setup, &s.processes)
        .unwrap()
        .run(&mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(r.processes[0].verdict.as_ref().unwrap().verified);
    let (x, y) = regions();
    let f = faults(&r);
    assert_eq!(f.far_faults, x.union(&y).count() as u64);
    assert_eq!(f.regions_migrated, x.len() as u64);
}

/// The engine's sleep shortcuts stay exact while SMs stall on faults and are refused for
/// L1 TLB MSHRs held by them (two MSHRs per SM): every launch's statistics are the same
/// with the shortcuts off.
#[test]
fn shortcuts_stay_exact_under_faults() {
    let mut gpu = small_tlbs();
    gpu.memory.translation.as_mut().unwrap().l1_tlb.mshrs = 2;
    let text = scenario("managed = true", 2);
    let run = |shortcuts: bool| {
        let s = parse("paging.toml", &text, &workload::Disk).unwrap();
        let mut timed = TimedGpu::new(gpu.clone());
        timed.options.shortcuts = shortcuts;
        let r = System::new(
            Setup::for_scenario(&s, timed, 50_000_000).unwrap(),
            &s.processes,
        )
        .unwrap()
        .run(&mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(r.processes[0].verdict.as_ref().unwrap().verified);
        r
    };
    let (fast, exact) = (run(true), run(false));
    let stats = |r: &RunRecord| -> Vec<String> {
        r.kernels.iter().map(|k| format!("{:?}", k.stats)).collect()
    };
    assert_eq!(fast.cycles, exact.cycles);
    assert_eq!(stats(&fast), stats(&exact));
    let f = faults(&fast);
    assert!(f.far_faults > 0);
    let refused: u64 = fast
        .kernels
        .iter()
        .map(|k| {
            k.stats
                .as_ref()
                .unwrap()
                .memory
                .translation
                .as_ref()
                .unwrap()
                .stall_cycles
        })
        .sum();
    assert!(refused > 0, "no offer was refused for L1 TLB MSHRs");
}

/// The pipeline organisations of §6.3 (`[memory.translation]`'s `pipeline`) under demand
/// paging: the same final memory and the same faults as stall on fault; every faulting
/// access squashed and replayed; a warp-disable variant holds the faulting warp (only)
/// until the fault is serviced, so its warps spend at least one fault's transfer
/// disabled; the replay queue holds sources instead; the shortcuts stay exact. (The
/// operand log's faults: `gpu/tests/timing_replay.rs`.)
#[test]
fn every_pipeline_organisation_pages_to_the_same_memory() {
    let text = scenario("managed = true", 1);
    let run = |pipeline: memsys::Pipeline, shortcuts: bool| {
        let mut gpu = small_tlbs();
        gpu.memory.translation.as_mut().unwrap().pipeline = pipeline;
        let s = parse("paging.toml", &text, &workload::Disk).unwrap();
        let mut timed = TimedGpu::new(gpu);
        timed.options.shortcuts = shortcuts;
        let mut setup = Setup::for_scenario(&s, timed, 50_000_000).unwrap();
        setup.snapshot = true;
        let r = System::new(setup, &s.processes)
            .unwrap()
            .run(&mut |_| {})
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(r.processes[0].verdict.as_ref().unwrap().verified);
        r
    };
    let stall = run(memsys::Pipeline::Stall, true);
    let (x, y) = regions();
    let transfer = (25.0 * small_tlbs().sm.clock_mhz) as u64;
    for p in [
        memsys::Pipeline::WdCommit,
        memsys::Pipeline::WdLastcheck,
        memsys::Pipeline::ReplayQueue,
    ] {
        let r = run(p, true);
        assert_eq!(r.memory, stall.memory, "{p:?}: final memory");
        let f = faults(&r);
        assert_eq!(f.far_faults, x.union(&y).count() as u64, "{p:?}: {f:?}");
        let fe = &r.kernels[0].stats.as_ref().unwrap().frontend;
        eprintln!(
            "{p:?}: {} cycles (stall {}), {fe:?}",
            r.cycles, stall.cycles
        );
        // Every faulting access was squashed and replayed (an instruction may fault in
        // more than one part: at least one replay per region's first touch).
        assert!(fe.replays > 0, "{p:?}: {fe:?}");
        assert!(fe.replayed_instructions >= f.far_faults, "{p:?}: {fe:?}");
        if p == memsys::Pipeline::ReplayQueue {
            // The warps go on; the faulting accesses' sources are held.
            assert!(fe.source_holds > 0 && fe.warp_disables == 0, "{fe:?}");
            continue;
        }
        assert!(fe.disabled_cycles >= transfer, "{p:?}: {fe:?}");
        if p != memsys::Pipeline::WdLastcheck {
            continue;
        }
        let exact = run(p, false);
        assert_eq!(exact.cycles, r.cycles, "{p:?}: shortcuts");
        assert_eq!(
            format!("{:?}", exact.kernels[0].stats),
            format!("{:?}", r.kernels[0].stats)
        );
    }
    assert_eq!(
        stall.kernels[0]
            .stats
            .as_ref()
            .unwrap()
            .frontend
            .disabled_cycles,
        0
    );
}

/// A scenario's `pipeline` overrides the GPU's, and a bad one names the file, line and field.
#[test]
fn a_scenario_picks_the_pipeline_organisation() {
    let text = format!("pipeline = \"wd-commit\"\n{}", scenario("", 1));
    let r = run_on(small_tlbs(), &text);
    let fe = &r.kernels[0].stats.as_ref().unwrap().frontend;
    assert!(fe.warp_disables > 0, "{fe:?}");
    let plain = run_on(small_tlbs(), &scenario("", 1));
    assert_eq!(
        plain.kernels[0]
            .stats
            .as_ref()
            .unwrap()
            .frontend
            .warp_disables,
        0
    );
    assert_eq!(r.memory, plain.memory);
    let bad = format!("pipeline = \"replay\"\n{}", scenario("", 1));
    let e = parse("paging.toml", &bad, &workload::Disk)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("paging.toml:1:") && e.contains("pipeline") && e.contains("wd-lastcheck"),
        "{e}"
    );
    // The operand log and its size; a size out of 8..=32 KiB names the file, line and field.
    let text = format!(
        "pipeline = \"operand-log\"\noperand_log_bytes = 8192\n{}",
        scenario("", 1)
    );
    let s = parse("paging.toml", &text, &workload::Disk).unwrap();
    assert_eq!(
        (s.translation.pipeline, s.translation.operand_log_bytes),
        (Some(memsys::Pipeline::OperandLog), Some(8192))
    );
    let r = run_on(small_tlbs(), &text);
    let fe = &r.kernels[0].stats.as_ref().unwrap().frontend;
    assert!(fe.log_peak_bytes > 0 && fe.log_peak_bytes <= 8192, "{fe:?}");
    assert_eq!(r.memory, plain.memory);
    let bad = format!(
        "pipeline = \"operand-log\"\noperand_log_bytes = 4096\n{}",
        scenario("", 1)
    );
    let e = parse("paging.toml", &bad, &workload::Disk)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("paging.toml:2:") && e.contains("operand_log_bytes"),
        "{e}"
    );
}

/// A suite process's `managed = true` scenario text (`suite` at small inputs).
fn managed_suite(suite: &str, pipeline: &str) -> String {
    format!(
        r#"
pipeline = "{pipeline}"
[limits]
max_cycles = 20_000_000
[[process]]
name = "{suite}"
suite = "{suite}"
size = "small"
managed = true
"#
    )
}

/// fault-study with `link` and `handler` for its faults.
fn fault_study_with(link: memsys::Link, handler: memsys::Handler) -> GpuConfig {
    let mut gpu = preset("fault-study");
    let f = gpu
        .memory
        .translation
        .as_mut()
        .unwrap()
        .faults
        .as_mut()
        .unwrap();
    f.link = link;
    f.handler = handler;
    gpu
}

/// A managed suite program (every allocation `cudaMallocManaged`): what its host wrote
/// (hist's input) migrates on the first touch, what it only zeroed (hist's bins) is
/// allocated without a transfer; each managed allocation starts a region of its own; the
/// results equal the unmanaged run's.
#[test]
fn a_managed_suite_program_migrates_what_its_host_wrote_and_allocates_the_rest() {
    let gpu = || fault_study_with(memsys::Link::Pcie, memsys::Handler::Cpu);
    let managed = run_on(gpu(), &managed_suite("hist", "stall"));
    let plain = run_on(
        gpu(),
        &managed_suite("hist", "stall").replace("managed = true", ""),
    );
    assert_eq!(managed.memory, plain.memory);
    assert_eq!(faults(&plain).far_faults, 0);
    let f = faults(&managed);
    assert!(f.regions_migrated > 0 && f.regions_allocated > 0, "{f:?}");
    assert_eq!(
        f.far_faults,
        f.regions_migrated + f.regions_allocated,
        "{f:?}"
    );
    assert!(managed.cycles > plain.cycles);
}

/// `managed = "unwritten"` makes only what the host never writes managed: hist's input is
/// copied to device memory and nothing migrates, its bins are allocated on the first touch
/// as under `managed = true`; the results equal the unmanaged run's. A value that is not
/// a setting names the file, line and field.
#[test]
fn a_suite_program_may_manage_only_what_its_host_never_writes() {
    let gpu = || fault_study_with(memsys::Link::Pcie, memsys::Handler::Cpu);
    let text = managed_suite("hist", "stall");
    let all = run_on(gpu(), &text.replace("managed = true", "managed = \"all\""));
    let unwritten = run_on(
        gpu(),
        &text.replace("managed = true", "managed = \"unwritten\""),
    );
    let plain = run_on(gpu(), &text.replace("managed = true", ""));
    assert_eq!(unwritten.memory, plain.memory);
    let (a, u) = (faults(&all), faults(&unwritten));
    assert!(a.regions_migrated > 0, "{a:?}");
    assert_eq!(u.regions_migrated, 0, "{u:?}");
    assert_eq!(u.regions_allocated, a.regions_allocated, "{u:?}");
    assert_eq!(u.far_faults, u.regions_allocated, "{u:?}");

    let bad = text.replace("managed = true", "managed = \"some\"");
    let e = parse("suite.toml", &bad, &workload::Disk)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("suite.toml:9:") && e.contains("process[0].managed") && e.contains("unwritten"),
        "{e}"
    );
}

/// Local handling (papers/tanasic-thesis §6.4.2): under `handler = "gpu"` the faults to
/// pages the host never wrote are handled on the GPU, none by the CPU, and those with host
/// data still by the CPU; the final memory is the same.
#[test]
fn the_gpu_handles_the_faults_to_pages_the_host_never_wrote() {
    let text = managed_suite("hist", "operand-log");
    let cpu = run_on(
        fault_study_with(memsys::Link::Nvlink, memsys::Handler::Cpu),
        &text,
    );
    let gpu = run_on(
        fault_study_with(memsys::Link::Nvlink, memsys::Handler::Gpu),
        &text,
    );
    assert_eq!(cpu.memory, gpu.memory);
    let kernel = |r: &RunRecord| {
        r.kernels
            .iter()
            .map(|k| {
                let t = k.stats.as_ref().unwrap().memory.translation.clone();
                t.and_then(|t| t.faults).unwrap_or_default()
            })
            .fold((0, 0, 0), |(m, a, l), f| {
                (
                    m + f.regions_migrated,
                    a + f.regions_allocated,
                    l + f.regions_allocated_locally,
                )
            })
    };
    let (cm, ca, cl) = kernel(&cpu);
    let (gm, ga, gl) = kernel(&gpu);
    assert!(
        ca > 0 && cl == 0,
        "CPU handler: {ca} allocated, {cl} locally"
    );
    assert_eq!((gm, ga, gl), (cm, 0, ca), "GPU handler");
}

/// Under the operand log a memory instruction that finds the log full waits at issue; the
/// replays of squashed accesses, which free the log, must still reach the LD/ST unit, and
/// the SM must wake when an entry frees. mulword's stores at an 8 KiB log over NVLink once
/// starved the replays forever (the log-full warp blocked the LD/ST unit every cycle), and
/// then slept through the log's release.
#[test]
fn a_full_operand_log_never_starves_the_replays_that_free_it() {
    let text = managed_suite("mulword", "operand-log").replace(
        "pipeline = \"operand-log\"",
        "pipeline = \"operand-log\"\noperand_log_bytes = 8192",
    );
    let run = |shortcuts: bool| {
        let s = parse("paging.toml", &text, &workload::Disk).unwrap();
        let mut timed = TimedGpu::new(fault_study_with(memsys::Link::Nvlink, memsys::Handler::Cpu));
        timed.options.shortcuts = shortcuts;
        let mut setup = Setup::for_scenario(&s, timed, s.max_cycles.unwrap()).unwrap();
        setup.snapshot = true;
        let r = System::new(setup, &s.processes)
            .unwrap()
            .run(&mut |_| {})
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(r.processes[0].verdict.as_ref().unwrap().verified);
        r
    };
    let r = run(true);
    let stalls: u64 = r
        .kernels
        .iter()
        .map(|k| k.stats.as_ref().unwrap().frontend.log_full_stalls)
        .sum();
    let replays: u64 = r
        .kernels
        .iter()
        .map(|k| k.stats.as_ref().unwrap().frontend.replays)
        .sum();
    assert!(
        stalls > 0 && replays > 0,
        "{stalls} log-full stalls, {replays} replays"
    );
    let exact = run(false);
    assert_eq!(exact.cycles, r.cycles, "shortcuts");
}

/// A preempting scheduler over TBs whose accesses are squashed for faults: `low` pages
/// its managed buffers in (every organisation that squashes, TB switching on fault on),
/// and `high`, arriving while `low` waits for its faults, takes SMs under PPQ by flushing
/// `low`'s TBs or switching their contexts. A flushed TB's squashed access is never
/// replayed; before the fix its old tag kept `low`'s launch in flight forever and the run
/// hung. Both processes must verify, and TBs must have been flushed or switched with
/// faults outstanding.
#[test]
fn preempting_tbs_with_squashed_accesses_ends_and_verifies() {
    let ptx = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/saxpy/saxpy.ptx");
    let text = |pipeline: &str, mechanism: &str| {
        let low = scenario("managed = true", 1)
            .replace("[limits]\nmax_cycles = 50_000_000\n", "")
            .replace("name = \"p\"", "name = \"low\"\npriority = 0");
        format!(
            r#"
[translation]
pipeline = "{pipeline}"
tb_switch = "save"

[scheduler]
policy = "ppq"
mechanism = "{mechanism}"

[limits]
max_cycles = 2_000_000
{low}
[[process]]
name = "high"
priority = 1
arrival_us = 10.0
ptx = "{ptx}"

[[process.buffer]]
name = "x"
type = "f32"
len = 8192
init = "fill"
value = 1.0
[[process.buffer]]
name = "y"
type = "f32"
len = 8192
[[process.command]]
launch = "saxpy"
grid = [32]
block = [256]
args = [{{ buffer = "x" }}, {{ buffer = "y" }}, {{ f32 = 2.0 }}, {{ u32 = 8192 }}]
[[process.command]]
sync = true
[[process.check]]
buffer = "y"
fill = 2.0
"#,
            ptx = ptx.display()
        )
    };
    let runs = [
        ("wd-commit", "flush-relaxed"),
        ("replay-queue", "flush-relaxed"),
        ("operand-log", "flush-relaxed"),
        ("operand-log", "baseline"),
    ];
    for (pipeline, mechanism) in runs {
        {
            let s = parse("preempt.toml", &text(pipeline, mechanism), &workload::Disk)
                .unwrap_or_else(|e| panic!("{e}"));
            let setup = Setup::for_scenario(
                &s,
                TimedGpu::new(preset("fault-study")),
                s.max_cycles.unwrap(),
            )
            .unwrap();
            let r = System::new(setup, &s.processes)
                .unwrap()
                .run(&mut |_| {})
                .unwrap_or_else(|e| panic!("{pipeline} {mechanism}: {e}"));
            for p in &r.processes {
                let v = p.verdict.as_ref().expect("finished");
                assert!(
                    v.verified,
                    "{pipeline} {mechanism} {}: {}",
                    p.name, v.detail
                );
            }
            let taken = r
                .preemptions
                .iter()
                .filter(|p| matches!(p, preempt::Record::Preempted { .. }))
                .count();
            assert!(taken > 0, "{pipeline} {mechanism}: nothing preempted");
            assert!(faults(&r).far_faults > 0, "{pipeline} {mechanism}");
        }
    }
}
