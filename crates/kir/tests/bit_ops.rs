//! Lowering of the integer bit and byte operations (`lop3`, `shf`, `bmsk`, `szext`, `bfind`,
//! `dp4a`, `dp2a`): the forms NVRTC and hand-written library code emit are accepted with the
//! right operation and types, and malformed ones are errors naming their place.

use kir::inst::{ArithOp, Op, Ty};
use kir::lower::{lower_module, LowerError};
use kir::Module;

fn lower(body: &str) -> Result<Module, Vec<LowerError>> {
    let src = format!(
        ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{{\n\
         .reg .b32 %r<9>;\n.reg .b64 %rd<3>;\n{body}\nret;\n}}"
    );
    lower_module(&ptx::parse(&src).expect("parses"), "t.ptx")
}

/// Each body must fail to lower with an error mentioning its needle.
fn rejects(cases: &[(&str, &str)]) {
    for (body, needle) in cases {
        let errs = lower(body).expect_err(body);
        let text = errs
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("; ");
        assert!(text.contains(needle), "{body}: {text}");
    }
}

/// The operation and type of the only arithmetic instruction of `body`.
fn op_of(body: &str) -> (ArithOp, Ty) {
    let m = lower(body).unwrap_or_else(|e| panic!("{body}: {e:?}"));
    let k = m.kernels.values().next().unwrap();
    let found = k.insts.iter().find_map(|(_, i)| match i.op {
        Op::Arith { op, ty, .. } => Some((op, ty)),
        _ => None,
    });
    found.expect("an arithmetic instruction")
}

#[test]
fn the_emitted_forms_lower_to_their_operations() {
    assert_eq!(
        op_of("lop3.b32 %r1, %r2, %r3, %r4, 0x96;"),
        (ArithOp::Lop3, Ty::B32)
    );
    assert_eq!(
        op_of("shf.l.wrap.b32 %r1, %r2, %r2, %r3;"),
        (
            ArithOp::Shf {
                left: true,
                clamp: false
            },
            Ty::B32
        )
    );
    assert_eq!(
        op_of("shf.r.clamp.b32 %r1, %r2, %r3, %r4;"),
        (
            ArithOp::Shf {
                left: false,
                clamp: true
            },
            Ty::B32
        )
    );
    assert_eq!(
        op_of("bmsk.clamp.b32 %r1, %r2, %r3;"),
        (ArithOp::Bmsk { clamp: true }, Ty::B32)
    );
    assert_eq!(
        op_of("szext.wrap.s32 %r1, %r2, 8;"),
        (ArithOp::Szext { clamp: false }, Ty::S32)
    );
    assert_eq!(
        op_of("bfind.shiftamt.u64 %r1, %rd1;"),
        (ArithOp::Bfind { shiftamt: true }, Ty::U64)
    );
    assert_eq!(
        op_of("dp4a.u32.s32 %r1, %r2, %r3, %r4;"),
        (
            ArithOp::Dp4a {
                a_signed: false,
                b_signed: true
            },
            Ty::S32
        )
    );
    assert_eq!(
        op_of("dp4a.u32.u32 %r1, %r2, %r3, %r4;"),
        (
            ArithOp::Dp4a {
                a_signed: false,
                b_signed: false
            },
            Ty::U32
        )
    );
    assert_eq!(
        op_of("dp2a.hi.s32.s32 %r1, %r2, %r3, %r4;"),
        (
            ArithOp::Dp2a {
                hi: true,
                a_signed: true,
                b_signed: true
            },
            Ty::S32
        )
    );
}

#[test]
fn malformed_forms_are_errors_naming_the_problem() {
    rejects(&[
        ("lop3.b32 %r1, %r2, %r3, %r4, %r5;", "look-up table"),
        ("lop3.b32 %r1, %r2, %r3, %r4, 256;", "look-up table"),
        ("shf.wrap.b32 %r1, %r2, %r3, %r4;", "`.l` or `.r`"),
        ("shf.l.b32 %r1, %r2, %r3, %r4;", "`.clamp` or `.wrap`"),
        ("bmsk.wrap.b64 %rd1, %r2, %r3;", "b64"),
        ("bfind.u32 %rd1, %r2;", "%rd1"),
        ("dp4a.s32 %r1, %r2, %r3, %r4;", "type"),
        ("dp2a.s32.s32 %r1, %r2, %r3, %r4;", "`.lo` or `.hi`"),
    ]);
}

#[test]
fn warp_collectives_and_trap_lower_and_reject_malformed_forms() {
    let ok = |body: &str| {
        let m = lower(&format!(".reg .pred %q<3>;\n{body}"))
            .unwrap_or_else(|e| panic!("{body}: {e:?}"));
        let k = m.kernels.values().next().unwrap();
        let ops: Vec<Op> = k.insts.iter().map(|(_, i)| i.op).collect();
        ops
    };
    assert!(
        ok("redux.sync.add.s32 %r1, %r2, 0xffffffff;").contains(&Op::Redux {
            op: kir::inst::ReduxOp::Add,
            ty: Ty::S32
        })
    );
    assert!(
        ok("match.any.sync.b64 %r1, %rd1, %r2;").contains(&Op::Match {
            all: false,
            ty: Ty::B64
        })
    );
    assert!(
        ok("match.all.sync.b32 %r1|%q1, %r2, -1;").contains(&Op::Match {
            all: true,
            ty: Ty::B32
        })
    );
    assert!(ok("elect.sync %r1|%q1, -1;").contains(&Op::Elect));
    assert!(ok("trap;").contains(&Op::Trap));
    rejects(&[
        ("redux.add.u32 %r1, %r2, -1;", "`.sync`"),
        ("redux.sync.and.u32 %r1, %r2, -1;", "u32"),
        ("redux.sync.add.u32 %r1, %r2;", "3"),
        ("match.sync.b32 %r1, %r2, -1;", "`.any` or `.all`"),
        ("elect.sync %r1, -1;", "d|p"),
    ]);
}

#[test]
fn cache_hints_policies_and_launch_ordering_are_accepted_with_their_operands_checked() {
    let body = "ld.global.L1::no_allocate.u32 %r1, [%rd1];
ld.global.nc.L2::128B.u32 %r2, [%rd1];
ld.global.L1::evict_last.L2::256B.u32 %r3, [%rd1];
st.global.L1::no_allocate.u32 [%rd1], %r1;
createpolicy.fractional.L2::evict_last.b64 %rd2, 1.0;
ld.global.L2::cache_hint.u32 %r4, [%rd1], %rd2;
prefetch.global.L2::evict_last [%rd1];
griddepcontrol.wait;
griddepcontrol.launch_dependents;
mov.u32 %r5, %envreg3;
nanosleep.u32 100;";
    let m = lower(body).unwrap_or_else(|e| panic!("{e:?}"));
    let k = m.kernels.values().next().unwrap();
    let loads = k
        .insts
        .iter()
        .filter(|(_, i)| matches!(i.op, Op::Ld { .. }))
        .count();
    assert_eq!(loads, 4);
    rejects(&[
        ("ld.global.L2::cache_hint.u32 %r4, [%rd1];", "3"),
        ("ld.global.L2::cache_hint.u32 %r4, [%rd1], %r2;", "%r2"),
        ("griddepcontrol;", "`.wait` or `.launch_dependents`"),
        (
            "ld.global.L1::evict_sometimes.u32 %r1, [%rd1];",
            "evict_sometimes",
        ),
        ("mov.u32 %r5, %envreg32;", "envreg32"),
    ]);
}

#[test]
fn carry_chains_read_and_write_one_carry_flag_register() {
    let m = lower(
        "add.cc.u32 %r1, %r2, %r3;\naddc.cc.u32 %r4, %r5, %r6;\nmadc.hi.u64 %rd1, %rd2, %rd2, %rd1;\nsubc.s32 %r7, %r7, 1;",
    )
    .unwrap_or_else(|e| panic!("{e:?}"));
    let k = m.kernels.values().next().unwrap();
    let carry: Vec<_> = k
        .insts
        .iter()
        .filter(|(_, i)| {
            matches!(
                i.op,
                Op::Arith {
                    op: ArithOp::AddC { .. } | ArithOp::SubC { .. } | ArithOp::MadC { .. },
                    ..
                }
            )
        })
        .map(|(_, i)| i)
        .collect();
    assert_eq!(carry.len(), 4);
    // One flag: written by the `.cc` forms (second destination), read by the `c` forms
    // (last source), and a predicate register named `%cc`.
    let cc = carry[0].dsts[1].expect("add.cc writes the carry flag");
    assert_eq!(k.regs[cc].name, "%cc");
    assert_eq!(k.regs[cc].ty, Ty::Pred);
    assert_eq!(carry[1].dsts[1], Some(cc));
    assert_eq!(carry[1].srcs[2], kir::inst::Operand::Reg(cc));
    assert_eq!(carry[2].srcs[3], kir::inst::Operand::Reg(cc));
    assert_eq!(carry[2].n_dsts, 1);
    assert_eq!(carry[3].srcs[2], kir::inst::Operand::Reg(cc));
    rejects(&[
        ("madc.u32 %r1, %r2, %r3, %r4;", "`.lo` or `.hi`"),
        ("addc.f32 %r1, %r2, %r3;", "f32"),
        ("add.cc.u32 %r1, %r2;", "3"),
    ]);
}

#[test]
fn min_max_with_relu_nan_or_three_inputs() {
    let mm = |max, relu, nan, three| ArithOp::MinMax {
        max,
        relu,
        nan,
        three,
    };
    assert_eq!(
        op_of("max.relu.s32 %r1, %r2, %r3;"),
        (mm(true, true, false, false), Ty::S32)
    );
    assert_eq!(
        op_of("min.u32 %r1, %r2, %r3, %r4;"),
        (mm(false, false, false, true), Ty::U32)
    );
    // The plain two-input form keeps its own operation.
    assert_eq!(op_of("min.u32 %r1, %r2, %r3;"), (ArithOp::Min, Ty::U32));
    rejects(&[
        ("max.relu.u32 %r1, %r2, %r3;", "u32"),
        ("max.NaN.s32 %r1, %r2, %r3;", "s32"),
    ]);
}
