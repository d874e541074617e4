//! Lowering of `brx.idx` and indirect calls to dispatch chains, and the errors of their
//! malformed forms. (Their execution is tested end to end in `gpu/tests/indirect.rs`.)

use kir::inst::{IndirectKind, Op, Operand};
use kir::lower::{lower_module, LowerError};
use kir::module::{FUNCTION_ADDRESS_BASE, FUNCTION_ADDRESS_STRIDE};
use kir::Module;

const FUNCS: &str = ".func (.param .b32 r) f(.param .b32 a)\n{\n.reg .b32 %t;\n\
     ld.param.b32 %t, [a];\nst.param.b32 [r], %t;\nret;\n}\n\
     .func (.param .b32 r) g(.param .b32 a)\n{\n.reg .b32 %t;\n\
     ld.param.b32 %t, [a];\nadd.s32 %t, %t, 1;\nst.param.b32 [r], %t;\nret;\n}\n\
     .global .align 8 .u64 table[2] = {g, f};\n";

fn lower(body: &str) -> Result<Module, Vec<LowerError>> {
    let src = format!(
        ".version 8.0\n.target sm_80\n.address_size 64\n{FUNCS}.visible .entry k()\n{{\n\
         .reg .pred %p<4>;\n.reg .b32 %r<8>;\n.reg .b64 %rd<8>;\n{body}\nret;\n}}"
    );
    lower_module(&ptx::parse(&src).expect("parses"), "t.ptx")
}

fn ops(body: &str) -> Vec<Op> {
    let m = lower(body).unwrap_or_else(|e| panic!("{body}: {e:?}"));
    let k = m.kernels.values().next().unwrap();
    k.insts.iter().map(|(_, i)| i.op).collect()
}

fn rejects(cases: &[(&str, &str)]) {
    for (body, needle) in cases {
        let text = lower(body)
            .expect_err(body)
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("; ");
        assert!(text.contains(needle), "{body}: {text}");
    }
}

#[test]
fn brx_idx_is_a_compare_and_branch_per_target_then_the_unmatched_end() {
    let got = ops("ts: .branchtargets A, B, C;\nbrx.idx %r1, ts;\nA:\nB:\nC:");
    let setps = got.iter().filter(|o| matches!(o, Op::Setp { .. })).count();
    let bras = got.iter().filter(|o| matches!(o, Op::Bra { .. })).count();
    assert_eq!((setps, bras), (3, 3));
    assert!(got.contains(&Op::UnmatchedTarget(IndirectKind::Branch)));
}

#[test]
fn functions_have_addresses_and_call_tables_hold_them() {
    let m = lower("mov.u64 %rd1, g;").unwrap();
    let k = m.kernels.values().next().unwrap();
    let (_, mov) = k.insts.iter().next().unwrap();
    // `g` is the module's second function.
    let g = FUNCTION_ADDRESS_BASE + FUNCTION_ADDRESS_STRIDE;
    assert_eq!(mov.srcs()[0], Operand::Imm(g));
    let table = m.globals.values().find(|v| v.name == "table").unwrap();
    assert_eq!(table.init[..8], g.to_le_bytes());
    assert_eq!(table.init[8..], FUNCTION_ADDRESS_BASE.to_le_bytes());
}

#[test]
fn an_indirect_call_inlines_each_possible_callee_once() {
    // Through the call table: both functions, each body once.
    let got = ops("{\n.param .b32 x;\n.param .b32 y;\ncall (y), %rd1, (x), table;\n}");
    let setps = got.iter().filter(|o| matches!(o, Op::Setp { .. })).count();
    assert_eq!(setps, 2);
    assert!(got.contains(&Op::UnmatchedTarget(IndirectKind::Call)));
    // `g`'s `add` appears once.
    assert_eq!(
        got.iter().filter(|o| matches!(o, Op::Arith { .. })).count(),
        1
    );
    // Through a prototype, with no function's address taken but the table's: the same two.
    let proto = ops(
        "{\n.param .b32 x;\n.param .b32 y;\np: .callprototype (.param .b32 _) _ (.param .b32 _);\n\
         call (y), %rd1, (x), p;\n}",
    );
    assert_eq!(
        proto
            .iter()
            .filter(|o| matches!(o, Op::Setp { .. }))
            .count(),
        2
    );
    // A prototype no function matches: only the unmatched end.
    let none = ops(
        "{\n.param .b64 x;\n.param .b32 y;\np: .callprototype (.param .b32 _) _ (.param .b64 _);\n\
         call (y), %rd1, (x), p;\n}",
    );
    assert!(!none.iter().any(|o| matches!(o, Op::Setp { .. })));
    assert!(none.contains(&Op::UnmatchedTarget(IndirectKind::Call)));
}

#[test]
fn malformed_indirect_forms_are_errors() {
    rejects(&[
        ("ts: .branchtargets A;\nbrx %r1, ts;\nA:", "`.idx`"),
        ("ts: .branchtargets A;\nbrx.idx %r1, A;\nA:", "`.branchtargets` list"),
        ("ts: .branchtargets A, Z;\nbrx.idx %r1, ts;\nA:", "unknown label `Z`"),
        ("ts: .branchtargets A;\nbrx.idx %rd1, ts;\nA:", "brx"),
        ("ct: .calltargets f;\nbrx.idx %r1, ct;", "`.branchtargets` list"),
        (
            "{\n.param .b32 x;\n.param .b32 y;\nct: .calltargets f, nope;\ncall (y), %rd1, (x), ct;\n}",
            "unknown or bodiless function `nope`",
        ),
        (
            "{\n.param .b32 x;\n.param .b32 y;\np: .callprototype (.param .b32 _) _ ();\ncall (y), %rd1, (x), p;\n}",
            "1 results and 0 arguments",
        ),
        (
            "{\n.param .b32 x;\n.param .b32 y;\ncall (y), %rd1, (x);\n}",
            "`.calltargets` list or `.callprototype`",
        ),
        (
            "{\n.param .b32 x;\n.param .b32 y;\ncall (y), %rd1, (x), %rd2;\n}",
            "a call table",
        ),
        ("ld.u32 %r1, [f];", "not a function"),
    ]);
}
