//! Every suite kernel, on both targets, allocates and passes the checker — with the default
//! budget, under pressure (spilling), and with uniform registers.

mod common;

use kir::{Id, Ty};
use regalloc::{allocate, verify, AllocConfig, Allocation};

fn check_properties(label: &str, a: &Allocation, config: &AllocConfig) {
    assert!(
        a.gpr_count <= config.max_registers,
        "{label}: {} GPRs",
        a.gpr_count
    );
    assert!(
        a.pred_count <= config.predicate_registers,
        "{label}: {} preds",
        a.pred_count
    );
    assert!(
        a.uniform_count <= config.uniform_registers,
        "{label}: {} URs",
        a.uniform_count
    );
    // Every register an instruction names exists, and 64-bit registers are even.
    for inst in a.kernel.insts.values() {
        for r in inst.uses().chain(inst.defs()) {
            assert!(r.index() < a.kernel.regs.len(), "{label}: {r} out of range");
        }
    }
    assert_eq!(a.spill_bytes == 0, a.spilled_values == 0, "{label}");
}

fn check_all(config: &AllocConfig) -> Vec<(String, Allocation)> {
    let mut failures = Vec::new();
    let mut out = Vec::new();
    for (label, k) in common::suite_kernels() {
        match allocate(&k, config) {
            Ok(a) => {
                check_properties(&label, &a, config);
                if let Err(e) = verify(&k, &a) {
                    failures.push(format!("{label}: {e}"));
                }
                // Pairs: every 64-bit original register got an even GPR or UR.
                for (v, info) in k.regs.iter() {
                    if let Some(p) = a.assignment[v.index()] {
                        if info.ty != Ty::Pred && info.ty.size() == 8 {
                            let (g, pr) = (a.gpr_count as usize, a.pred_count as usize);
                            let idx = p.index();
                            let rel = if idx < g { idx } else { idx - g - pr };
                            assert_eq!(rel % 2, 0, "{label}: {v} in {p}");
                        }
                    }
                }
                out.push((label, a));
            }
            Err(e) => failures.push(format!("{label}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    out
}

#[test]
fn suite_allocates_and_verifies_with_default_budget() {
    let all = check_all(&AllocConfig::default());
    assert!(all.len() >= 28);
    for (label, a) in &all {
        assert_eq!(a.spilled_values, 0, "{label} spilled with 255 registers");
        assert!(a.gpr_count > 0, "{label}");
    }
}

#[test]
fn suite_spills_and_verifies_under_pressure() {
    let config = AllocConfig {
        max_registers: 16,
        predicate_registers: 4,
        ..AllocConfig::default()
    };
    let all = check_all(&config);
    let spilled = all.iter().filter(|(_, a)| a.spilled_values > 0).count();
    assert!(
        spilled >= 5,
        "only {spilled} kernels spilled at 16 registers"
    );
    for (label, a) in &all {
        if a.spilled_values > 0 {
            assert!(a.kernel.local_size >= a.spill_bytes, "{label}");
            let local_ops = a
                .kernel
                .insts
                .values()
                .filter(|i| {
                    matches!(
                        i.op,
                        kir::Op::Ld {
                            space: kir::inst::Space::Local,
                            ..
                        } | kir::Op::St {
                            space: kir::inst::Space::Local,
                            ..
                        }
                    )
                })
                .count();
            assert!(local_ops >= 2, "{label}: spilled without local traffic");
        }
    }
}

#[test]
fn suite_verifies_at_intermediate_budgets() {
    for max_registers in [20, 24, 32] {
        check_all(&AllocConfig {
            max_registers,
            ..AllocConfig::default()
        });
    }
}

#[test]
fn suite_verifies_with_uniform_registers() {
    let config = AllocConfig {
        uniform_registers: 63,
        ..AllocConfig::default()
    };
    let all = check_all(&config);
    let with_ur = all.iter().filter(|(_, a)| a.uniform_count > 0).count();
    assert!(
        with_ur >= all.len() / 2,
        "only {with_ur} kernels use uniform registers"
    );
    // A small uniform file forces values back to GPRs.
    check_all(&AllocConfig {
        uniform_registers: 2,
        max_registers: 24,
        ..AllocConfig::default()
    });
}
