//! A scenario's `[translation]` (issue 26: "Managed buffers, fault costs and the pipeline
//! organisation are settable in presets and scenarios"): each field reaches the GPU the
//! run uses, a run changes as the field says, and a bad value — on its own, against
//! another field of the scenario, or against the GPU's own fields — names the scenario's
//! file, line and field.

use gpu::config::GpuConfig;
use gpu::timing::TimedGpu;
use memsys::{FaultStats, Handler, Link, Pipeline, TbSwitch};
use workload::{parse, RunRecord, Setup, System};

/// hist with every allocation managed, on fault-study, with `translation` as its table.
fn scenario(translation: &str) -> String {
    format!(
        r#"[limits]
max_cycles = 50_000_000

[translation]
{translation}

[[process]]
name = "hist"
suite = "hist"
managed = true
"#
    )
}

fn setup(text: &str) -> Result<(workload::Scenario, Setup), String> {
    let s = parse("t.toml", text, &workload::Disk).map_err(|e| e.to_string())?;
    let gpu = GpuConfig::preset("fault-study").unwrap();
    let setup = Setup::for_scenario(&s, TimedGpu::new(gpu), s.max_cycles.unwrap())
        .map_err(|e| e.to_string())?;
    Ok((s, setup))
}

fn run(text: &str) -> RunRecord {
    let (s, setup) = setup(text).unwrap_or_else(|e| panic!("{e}"));
    let r = System::new(setup, &s.processes)
        .unwrap()
        .run(&mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(r.processes[0].verdict.as_ref().unwrap().verified);
    r
}

fn faults(r: &RunRecord) -> FaultStats {
    let mut sum = FaultStats::default();
    for k in &r.kernels {
        let t = k.stats.as_ref().unwrap().memory.translation.clone();
        let f = t.and_then(|t| t.faults).unwrap_or_default();
        sum.far_faults += f.far_faults;
        sum.regions_allocated += f.regions_allocated;
        sum.regions_allocated_locally += f.regions_allocated_locally;
        sum.busy_cycles += f.busy_cycles;
    }
    sum
}

#[test]
fn every_field_reaches_the_gpu_the_run_uses() {
    let (_, s) = setup(&scenario(
        r#"pipeline = "replay-queue"
tb_switch = "ideal"
tb_switch_extra = 2
page_kb = 64
walkers = 8
walk_latency = 100

[translation.faults]
link = "nvlink"
granularity_kb = 128
batch_size = 16
handler = "gpu"
gpu_handler_us = 5.0
pcie = { alloc_us = 3.0 }
nvlink = { transfer_us = 7.0, alloc_us = 6.0 }"#,
    ))
    .unwrap();
    let t = s.timing.gpu.memory.translation.as_ref().unwrap();
    assert_eq!(
        (t.pipeline, t.tb_switch, t.tb_switch_extra),
        (Pipeline::ReplayQueue, TbSwitch::Ideal, 2)
    );
    assert_eq!((t.page_kb, t.walkers, t.walk_latency), (64, 8, 100));
    let f = t.faults.as_ref().unwrap();
    assert_eq!(
        (f.link, f.granularity_kb, f.batch_size, f.handler),
        (Link::Nvlink, 128, 16, Handler::Gpu)
    );
    assert_eq!(f.gpu_handler_us, 5.0);
    // A key left out keeps the GPU's (fault-study's PCIe transfer is 25 µs).
    assert_eq!((f.pcie.transfer_us, f.pcie.alloc_us), (25.0, 3.0));
    assert_eq!((f.nvlink.transfer_us, f.nvlink.alloc_us), (7.0, 6.0));
}

/// The handler and the link change the run as the GPU file's fields would: under
/// `handler = "gpu"` the GPU allocates what the CPU did, and over NVLink the CPU's
/// handler is busy for fewer cycles than over PCIe (its costs are lower).
#[test]
fn the_scenario_picks_the_handler_and_the_link() {
    let pcie = faults(&run(&scenario("pipeline = \"operand-log\"")));
    let local = faults(&run(&scenario(
        "pipeline = \"operand-log\"\n[translation.faults]\nhandler = \"gpu\"",
    )));
    let nvlink = faults(&run(&scenario(
        "pipeline = \"operand-log\"\n[translation.faults]\nlink = \"nvlink\"",
    )));
    assert!(pcie.regions_allocated > 0, "{pcie:?}");
    assert_eq!(pcie.regions_allocated_locally, 0);
    assert_eq!(
        (local.regions_allocated, local.regions_allocated_locally),
        (0, pcie.regions_allocated),
        "{local:?}"
    );
    assert_eq!(nvlink.far_faults, pcie.far_faults);
    assert!(nvlink.busy_cycles < pcie.busy_cycles, "{nvlink:?} {pcie:?}");
}

fn error(text: &str) -> String {
    match setup(text) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e,
    }
}

#[test]
fn bad_values_name_the_file_line_and_field() {
    // A value that is not one: the deserializer's error, at its line.
    let e = error(&scenario("tb_switch = \"sometimes\""));
    assert!(e.contains("t.toml:5") && e.contains("sometimes"), "{e}");
    // Out of range on its own.
    let e = error(&scenario("[translation.faults]\nbatch_size = 0"));
    assert!(
        e.starts_with("t.toml:6:")
            && e.contains("translation.faults.batch_size")
            && e.contains("any GPU"),
        "{e}"
    );
    let e = error(&scenario("tb_switch_extra = 65"));
    assert!(
        e.starts_with("t.toml:5:") && e.contains("translation.tb_switch_extra"),
        "{e}"
    );
    // Against another field of the scenario: switching needs a pipeline that squashes.
    let e = error(&scenario("pipeline = \"stall\"\ntb_switch = \"save\""));
    assert!(
        e.starts_with("t.toml:6:") && e.contains("translation.tb_switch") && e.contains("stall"),
        "{e}"
    );
    // Against the GPU's own fields: fault-study stalls on a fault, so switching alone is
    // refused when the run is set up, at the scenario's line, naming the GPU.
    let e = error(&scenario("tb_switch = \"save\""));
    assert!(
        e.starts_with("t.toml:5:")
            && e.contains("translation.tb_switch")
            && e.contains("fault-study"),
        "{e}"
    );
    // The top-level `pipeline` is the table's: not both.
    let e = error(&format!(
        "pipeline = \"wd-commit\"\n{}",
        scenario("pipeline = \"stall\"")
    ));
    assert!(
        e.starts_with("t.toml:6:") && e.contains("translation.pipeline"),
        "{e}"
    );
    // A key the table does not have.
    let e = error(&scenario("l1_tlb = 4"));
    assert!(e.contains("t.toml:5") && e.contains("l1_tlb"), "{e}");
}

/// Without translation (gtx480) nothing can fault: the table changes nothing, as the
/// top-level `pipeline` never did.
#[test]
fn without_translation_the_table_changes_nothing() {
    let s = parse(
        "t.toml",
        &scenario("pipeline = \"operand-log\"\ntb_switch = \"save\""),
        &workload::Disk,
    )
    .unwrap();
    let gpu = GpuConfig::preset("gtx480").unwrap();
    let setup = Setup::for_scenario(&s, TimedGpu::new(gpu.clone()), 1 << 30).unwrap();
    assert_eq!(setup.timing.gpu, gpu);
}
