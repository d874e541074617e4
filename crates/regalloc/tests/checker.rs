//! The checker rejects broken allocations: mutated operands, destinations and spill code.
//! (Its acceptance of correct allocations is tested over the whole suite in `suite.rs`.)

mod common;

use kir::inst::{Operand, Space};
use kir::{Id, Op, Reg};
use regalloc::{allocate, verify, AllocConfig, Allocation, Phase};

/// Another register of the same file and parity as `r`, if the file has one.
fn other(a: &Allocation, r: Reg) -> Option<Reg> {
    let (g, p) = (a.gpr_count, a.pred_count);
    let (base, len) = if r.0 < g {
        (0, g)
    } else if r.0 < g + p {
        (g, p)
    } else {
        (g + p, a.uniform_count)
    };
    let step = if r.0 < g || r.0 >= g + p { 2 } else { 1 };
    (len > step).then(|| Reg(base + (r.0 - base + step) % (len - len % step).max(step)))
}

fn mutation_rates(config: &AllocConfig) -> (usize, usize, usize, usize) {
    let (mut src_tried, mut src_caught, mut dst_tried, mut dst_caught) = (0, 0, 0, 0);
    for (label, k) in common::suite_kernels() {
        let a = allocate(&k, config).unwrap();
        verify(&k, &a).unwrap_or_else(|e| panic!("{label}: {e}"));
        for pc in a.kernel.insts.ids().step_by(7) {
            if a.origins[pc.index()].phase != Phase::At {
                continue;
            }
            let inst = &a.kernel.insts[pc];
            if let Some(k_src) = inst
                .srcs()
                .iter()
                .position(|s| matches!(s, Operand::Reg(_)))
            {
                let Operand::Reg(r) = inst.srcs[k_src] else {
                    unreachable!()
                };
                if let Some(o) = other(&a, r) {
                    let mut bad = a.clone();
                    bad.kernel.insts[pc].srcs[k_src] = Operand::Reg(o);
                    src_tried += 1;
                    src_caught += verify(&k, &bad).is_err() as usize;
                }
            }
            if let Some(Some(d)) = inst.dsts().first() {
                if let Some(o) = other(&a, *d) {
                    let mut bad = a.clone();
                    bad.kernel.insts[pc].dsts[0] = Some(o);
                    dst_tried += 1;
                    dst_caught += verify(&k, &bad).is_err() as usize;
                }
            }
        }
    }
    (src_tried, src_caught, dst_tried, dst_caught)
}

#[test]
fn mutated_registers_are_rejected() {
    for config in [
        AllocConfig::default(),
        AllocConfig {
            max_registers: 16,
            ..AllocConfig::default()
        },
    ] {
        let (st, sc, dt, dc) = mutation_rates(&config);
        eprintln!(
            "max_registers {}: sources {sc}/{st}, destinations {dc}/{dt} caught",
            config.max_registers
        );
        assert!(st > 200 && dt > 200, "{st} {dt}");
        // A mutated source reads another value unless that register happens to hold the same
        // one (a coalesced copy); a mutated destination clobbers a live value unless the
        // register was free at that point.
        assert!(sc * 100 >= st * 99, "sources: caught {sc} of {st}");
        assert!(dc * 100 >= dt * 95, "destinations: caught {dc} of {dt}");
    }
}

#[test]
fn removed_spill_code_is_rejected() {
    let config = AllocConfig {
        max_registers: 16,
        ..AllocConfig::default()
    };
    let mut tried = 0;
    for (label, k) in common::suite_kernels() {
        let a = allocate(&k, &config).unwrap();
        let stores: Vec<usize> = a
            .kernel
            .insts
            .iter()
            .filter(|(_, i)| {
                matches!(
                    i.op,
                    Op::St {
                        space: Space::Local,
                        ..
                    }
                )
            })
            .map(|(pc, _)| pc.index())
            .collect();
        for &pc in stores.iter().take(5) {
            // Turning the store into a store to another slot loses the value.
            let mut bad = a.clone();
            if let Op::St { offset, .. } = &mut bad.kernel.insts[kir::InstId(pc as u32)].op {
                *offset = if *offset >= 8 {
                    *offset - 8
                } else {
                    *offset + 8
                };
            }
            tried += 1;
            assert!(
                verify(&k, &bad).is_err(),
                "{label}: moved spill store at pc{pc} accepted"
            );
        }
    }
    assert!(tried > 20);
}

#[test]
fn odd_pairs_are_rejected() {
    for (label, k) in common::suite_kernels() {
        let a = allocate(&k, &AllocConfig::default()).unwrap();
        // Find an instruction defining a 64-bit value and shift it to the odd half.
        let Some(pc) = a.kernel.insts.ids().find(|&pc| {
            let o = a.origins[pc.index()];
            let orig = &k.insts[o.inst];
            o.phase == Phase::At
                && orig
                    .dsts()
                    .first()
                    .copied()
                    .flatten()
                    .is_some_and(|d| k.regs[d].ty.size() == 8 && k.regs[d].ty != kir::Ty::Pred)
        }) else {
            continue;
        };
        let mut bad = a.clone();
        let d = bad.kernel.insts[pc].dsts[0].unwrap();
        bad.kernel.insts[pc].dsts[0] = Some(Reg(d.0 + 1));
        assert!(verify(&k, &bad).is_err(), "{label}");
    }
}
