//! Kernels with selective preemption points inserted (papers/lin-lightweight §IV-A) still
//! execute and verify: `pp` / `pp.divergent` are no-ops and `bar.pp` is a barrier while no
//! preemption is pending, and the rewrite keeps every branch and reconvergence point right.

use analysis::preemption_points::{insert_points, PpConfig, PpKind, PreemptionPlan};
use kir::inst::Op;
use suite::Size;
use switchyard::suite_run::FunctionalDevice;

/// Lowers `ptx`, inserts the points of every kernel, and returns the module with the number
/// of `pp` and `bar.pp` points.
fn with_points(name: &str, ptx: &str, config: &PpConfig) -> (kir::Module, usize, usize) {
    let ast = ptx::parse(ptx).expect("suite PTX parses");
    let mut module = kir::lower::lower_module(&ast, name).expect("suite PTX lowers");
    let (mut pp, mut bar_pp) = (0, 0);
    let ids: Vec<kir::KernelId> = module.kernels.ids().collect();
    for id in ids {
        let kernel = &module.kernels[id];
        let plan = PreemptionPlan::compute(kernel, config);
        pp += plan.points.iter().filter(|p| p.kind == PpKind::Pp).count();
        bar_pp += plan
            .points
            .iter()
            .filter(|p| p.kind == PpKind::BarPp)
            .count();
        let rewritten = insert_points(kernel, &plan.points).expect("points fit the kernel");
        module.kernels[id] = rewritten.kernel;
    }
    (module, pp, bar_pp)
}

#[test]
fn suite_kernels_with_preemption_points_verify() {
    let mut failures = Vec::new();
    let mut total_points = 0;
    // The default K, and a small one so that straight-line points appear too.
    for config in [
        PpConfig::default(),
        PpConfig {
            straight_line_interval: 40,
        },
    ] {
        let interval = config.straight_line_interval;
        for k in suite::all() {
            for &(target, text) in k.sources() {
                let file = format!("kernels/{0}/{0}.{1}.ptx", k.name(), target.name());
                let (module, pp, bar_pp) = with_points(&file, text, &config);
                total_points += pp + bar_pp;
                // A device with the original module, then the rewritten one loaded beside it
                // and made the one that launches use.
                let mut dev = FunctionalDevice::new(&file, text).expect("original loads");
                match dev.gpu.load_module(&file, text, module) {
                    Ok(m) => dev.module = m,
                    Err(e) => {
                        failures.push(format!("{file}: load: {e}"));
                        continue;
                    }
                }
                // The device runs the rewritten code.
                let ops = dev
                    .gpu
                    .module(dev.module)
                    .kernels
                    .values()
                    .flat_map(|k| k.insts.values().map(|i| i.op))
                    .collect::<Vec<_>>();
                let count = |f: fn(&Op) -> bool| ops.iter().filter(|o| f(o)).count();
                assert_eq!(count(|o| matches!(o, Op::Pp { .. })), pp, "{file}");
                assert_eq!(count(|o| matches!(o, Op::PpDivergent { .. })), pp, "{file}");
                assert_eq!(
                    count(|o| matches!(o, Op::Bar { pp: Some(_), .. })),
                    bar_pp,
                    "{file}"
                );
                match k.run(&mut dev, Size::Small, 1) {
                    Ok(v) if v.passed() => {}
                    Ok(v) => failures.push(format!("{file} (K={interval}): {v:?}")),
                    Err(e) => failures.push(format!("{file} (K={interval}): {e}")),
                }
            }
        }
    }
    assert!(total_points > 0);
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
