//! The per-instruction experiment end to end on two small kernels: every mechanism is asked
//! at the same moments (cycle, SM, TBs, dynamic instruction), every run is bit-exact (else
//! the experiment fails), BASELINE normalises to 1, LIVE never saves more than BASELINE,
//! and the results do not depend on the number of threads.

use experiment::per_instruction::{self, Measures, PerInstructionConfig, MECHANISMS};
use gpu::config::GpuConfig;
use preempt::MechanismKind;
use suite::Size;

fn config(threads: usize) -> PerInstructionConfig {
    let mut c = PerInstructionConfig::default_on(GpuConfig::preset("gtx480").unwrap());
    c.kernels = vec![
        suite::by_name("gemm").unwrap(),
        suite::by_name("hotspot").unwrap(),
    ];
    c.size = Size::Small;
    c.samples = 3;
    c.threads = threads;
    // These kernels' loops run a few iterations at `small`: CKPT checkpoints every second
    // entry of a block, so that it checkpoints and rolls back here.
    for m in &mut c.mechanisms {
        if let MechanismKind::Ckpt { every, .. } = m {
            *every = 2;
        }
    }
    c
}

#[test]
fn every_mechanism_is_measured_at_the_same_moments_and_stays_bit_exact() {
    let c = config(2);
    let r = per_instruction::run(&c, &|_, _, _| {}).unwrap();
    assert_eq!(r.runs.len(), 2 * MECHANISMS.len());
    let (mut ckpt_rollbacks, mut ckpt_overhead) = (0, 0.0);
    assert!(r.unrequested.is_empty(), "{:?}", r.unrequested);
    for k in &r.kernels {
        let base = r.run(k, "baseline").unwrap();
        assert_eq!(base.requests.len(), 3, "{k}");
        for m in &r.mechanisms {
            let run = r.run(k, m).unwrap();
            let name = format!("{k} with {m}");
            if m.starts_with("ckpt") {
                // Its checkpoints pause TBs before the request: its moments may differ, and
                // it costs time with nothing preempted.
                assert!(
                    run.runtime_overhead >= 0.0,
                    "{name}: {}",
                    run.runtime_overhead
                );
                ckpt_overhead += run.runtime_overhead;
                ckpt_rollbacks += run
                    .requests
                    .iter()
                    .filter(|q| q.discarded_instructions > 0)
                    .count();
                for q in &run.requests {
                    // The discarded work's cycles are part of the resume time.
                    assert!(
                        q.resume >= q.discarded_cycles as f64 / f64::from(q.restored.max(1)),
                        "{name}: {q:?}"
                    );
                }
                continue;
            }
            // The same moments: drawn cycle, request cycle, SM, TBs, warp instructions.
            let moment =
                |q: &per_instruction::Request| (q.drawn, q.cycle, q.sm, q.tbs, q.warp_instructions);
            assert_eq!(
                run.requests.iter().map(moment).collect::<Vec<_>>(),
                base.requests.iter().map(moment).collect::<Vec<_>>(),
                "{name}"
            );
            assert_eq!(
                (run.moments_differ, run.instruction_drift),
                (0, 0.0),
                "{name}"
            );
            // Nothing changes the kernel of BASELINE and LIVE: no overhead at all.
            if m == "baseline" || m == "live" {
                assert_eq!(run.runtime_overhead, 0.0, "{name}");
            }
            for (q, b) in run.requests.iter().zip(&base.requests) {
                assert!(q.tbs > 0 && q.cycle >= q.drawn, "{name}: {q:?}");
                // Every TB switched (none of these kernels is refused) and came back.
                assert_eq!(q.switched, q.tbs, "{name}: {q:?}");
                assert_eq!(q.restored, q.tbs, "{name}: {q:?}");
                assert!(q.preemption > 0 && q.resume > 0.0, "{name}: {q:?}");
                if m == "live" {
                    // LIVE saves a subset of BASELINE's registers, at every sample.
                    assert!(q.context.registers <= b.context.registers, "{name}: {q:?}");
                    assert!(q.context.total() <= b.context.total(), "{name}: {q:?}");
                }
            }
        }
        let n = base.normalised;
        assert_eq!((n.context, n.preemption, n.resume), (1.0, 1.0, 1.0), "{k}");
        // The routines save only what their instruction needs, never every register.
        for m in ["ctxback", "cs-defer", "ctxback-cs-defer"] {
            let run = r.run(k, m).unwrap();
            assert!(
                run.normalised.context < 1.0,
                "{k} with {m}: {:?}",
                run.normalised
            );
        }
    }
    assert!(ckpt_rollbacks > 0, "CKPT never rolled a TB back");
    assert!(ckpt_overhead > 0.0, "CKPT's checkpoints cost nothing");
    let base = r
        .averages
        .iter()
        .find(|a| a.mechanism == "baseline")
        .unwrap();
    assert_eq!(base.arithmetic.context, 1.0);
    assert_eq!(base.geometric.preemption, 1.0);
    // Figures 7-9: a bar per kernel and mechanism, the kernel's normalised measure, then
    // the geometric and the arithmetic mean over the kernels.
    let figs = per_instruction::figures(&r);
    let ids: Vec<&str> = figs.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(ids, ["fig7", "fig8", "fig9", "fig10"]);
    for (f, pick) in figs.iter().zip([
        (|m: &Measures| m.context) as fn(&Measures) -> f64,
        |m| m.preemption,
        |m| m.resume,
    ]) {
        let categories: Vec<&str> = f.rows.iter().map(|r| r.category.as_str()).collect();
        assert_eq!(
            categories,
            ["gemm", "hotspot", "geomean", "mean"],
            "{}",
            f.id
        );
        for (s, m) in f.series.iter().enumerate() {
            for row in &f.rows[..2] {
                let run = r.run(&row.category, m).unwrap();
                assert_eq!(row.values[s], vec![pick(&run.normalised)], "{} {m}", f.id);
            }
            let avg = r.averages.iter().find(|a| &a.mechanism == m).unwrap();
            assert_eq!(
                f.rows[3].values[s],
                vec![pick(&avg.arithmetic)],
                "{} {m}",
                f.id
            );
            let g = f.rows[2].values[s][0];
            assert!((g - pick(&avg.geometric)).abs() < 1e-9, "{} {m}: {g}", f.id);
        }
    }
    // Deterministic, whatever the threads.
    assert_eq!(per_instruction::run(&config(1), &|_, _, _| {}).unwrap(), r);
}

#[test]
fn baseline_is_required() {
    let mut c = config(1);
    c.mechanisms = vec![MechanismKind::Live];
    assert!(matches!(
        per_instruction::run(&c, &|_, _, _| {}),
        Err(per_instruction::ExperimentError::NoBaseline)
    ));
}
