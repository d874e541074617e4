//! Every entry of CTXBack's reversible-instruction table (`analysis::ctxback::revert`,
//! papers/ji-ctxback §III-C) round-trips exactly under the simulator's per-lane semantics
//! (`gpu::alu::arith`): running an instruction and then its reverting instruction gives back
//! the overwritten register, for random values including the edge cases.

use std::collections::HashMap;

use analysis::ctxback::revert_of;
use kir::inst::{Op, Operand};
use kir::{Inst, Kernel, Reg};

fn kernel(body: &str) -> Kernel {
    let text = format!(
        ".version 7.0\n.target sm_70\n.address_size 64\n.visible .entry k()\n{{\n\
         .reg .b32 %r<4>;\n.reg .b64 %rd<4>;\n.reg .pred %p<4>;\n{body}\n}}\n"
    );
    let ast = ptx::parse(&text).unwrap_or_else(|e| panic!("parse: {e}\n{text}"));
    let m = kir::lower::lower_module(&ast, "t.ptx").unwrap_or_else(|e| panic!("{e:?}"));
    m.kernels.values().next().unwrap().clone()
}

/// Evaluates an arithmetic instruction on a register file.
fn eval(inst: &Inst, regs: &mut HashMap<Reg, u64>) {
    let Op::Arith { op, ty, mode } = inst.op else {
        panic!("not arithmetic: {inst:?}")
    };
    if let Some(g) = inst.guard {
        if (regs[&g.reg] != 0) == g.negated {
            return;
        }
    }
    let mut v = [0u64; 4];
    for (slot, o) in inst.srcs().iter().enumerate() {
        v[slot] = match *o {
            Operand::Reg(r) => regs[&r],
            Operand::NotReg(r) => (regs[&r] == 0) as u64,
            Operand::Imm(x) => x,
            ref other => panic!("operand {other:?}"),
        };
    }
    let out = gpu::alu::arith(op, ty, mode, v[0], v[1], v[2], v[3]).expect("supported");
    regs.insert(inst.dsts[0].unwrap(), out);
}

const EDGES: [u64; 6] = [0, 1, 0x7fff_ffff, 0x8000_0000, 0xffff_ffff, u64::MAX];

/// Instructions of the table (each is reversible) in every operand position.
const REVERSIBLE: &[&str] = &[
    "add.u32 %r1, %r1, %r2;",
    "add.s32 %r1, %r2, %r1;",
    "add.u32 %r1, %r1, 12345;",
    "add.s64 %rd1, %rd1, %rd2;",
    "add.u64 %rd1, %rd1, -8;",
    "sub.u32 %r1, %r1, %r2;",
    "sub.s32 %r1, %r2, %r1;",
    "sub.s64 %rd1, %rd1, %rd2;",
    "sub.u64 %rd1, %rd2, %rd1;",
    "xor.b32 %r1, %r1, %r2;",
    "xor.b32 %r1, %r2, %r1;",
    "xor.b64 %rd1, %rd1, 0xff00ff00ff00ff00;",
    "xor.pred %p1, %p1, %p2;",
    "not.b32 %r1, %r1;",
    "not.b64 %rd1, %rd1;",
    "not.pred %p1, %p1;",
    "neg.s32 %r1, %r1;",
    "neg.s64 %rd1, %rd1;",
    "mul.lo.u32 %r1, %r1, 7;",
    "mul.lo.s32 %r1, %r1, -3;",
    "mul.lo.u64 %rd1, %rd1, 0x5851f42d4c957f2d;",
    "@%p3 add.u32 %r1, %r1, %r2;",
    "@!%p3 xor.b32 %r1, %r1, %r2;",
];

/// Instructions the table must reject.
const IRREVERSIBLE: &[&str] = &[
    "add.u32 %r1, %r1, %r1;",
    "add.u32 %r1, %r2, %r3;",
    "add.sat.s32 %r1, %r1, %r2;",
    "add.f32 %r1, %r1, %r2;",
    "sub.f64 %rd1, %rd1, %rd2;",
    "mul.lo.u32 %r1, %r1, %r2;",
    "mul.lo.u32 %r1, %r1, 8;",
    "mul.hi.u32 %r1, %r1, 7;",
    "shl.b32 %r1, %r1, 1;",
    "shr.u32 %r1, %r1, 1;",
    "and.b32 %r1, %r1, %r2;",
    "or.b32 %r1, %r1, 2;",
    "mov.u32 %r1, %r2;",
    "neg.f32 %r1, %r1;",
    "abs.s32 %r1, %r1;",
    "xor.b32 %r1, %r1, %r1;",
];

#[test]
fn table_entries_round_trip_exactly() {
    let mut rng = suite::Rng::new(0x5eed);
    for text in REVERSIBLE {
        let k = kernel(text);
        let inst = &k.insts.values().next().expect("one instruction").clone();
        let rv = revert_of(inst).unwrap_or_else(|| panic!("`{text}` should be reversible"));
        let Op::Arith { ty, .. } = inst.op else {
            unreachable!()
        };
        let regs: Vec<Reg> = k.regs.ids().collect();
        for round in 0..2000 {
            let mut file: HashMap<Reg, u64> = HashMap::new();
            for &r in &regs {
                let v = if round < EDGES.len() * EDGES.len() {
                    EDGES[(round + r.0 as usize) % EDGES.len()]
                } else {
                    rng.next_u64()
                };
                let rty = k.regs[r].ty;
                let v = if rty == kir::Ty::Pred {
                    v & 1
                } else {
                    v & rty.mask()
                };
                file.insert(r, v);
            }
            // The overwritten register held a value of the instruction's type.
            let before = file[&rv.shared] & ty.mask();
            file.insert(rv.shared, before);
            let snapshot = file.clone();
            eval(inst, &mut file);
            eval(&rv.inst, &mut file);
            assert_eq!(
                file[&rv.shared], before,
                "`{text}` with {snapshot:?}: reverted to {:#x}",
                file[&rv.shared]
            );
            for (r, v) in &snapshot {
                assert_eq!(file[r], *v, "`{text}` changed {r}");
            }
        }
    }
}

#[test]
fn table_rejects_inexact_inverses() {
    for text in IRREVERSIBLE {
        let k = kernel(text);
        let inst = k.insts.values().next().expect("one instruction");
        assert_eq!(revert_of(inst), None, "`{text}` must not be reversible");
    }
}
