//! Lowering and CFG tests on small PTX programs.

use kir::cfg::PostDom;
use kir::inst::{Op, Operand, Space};
use kir::lower::{lower_module, LowerError};
use kir::{BlockId, InstId, Module};

fn lower(src: &str) -> Result<Module, Vec<LowerError>> {
    lower_module(&ptx::parse(src).expect("parses"), "t.ptx")
}

const HEADER: &str = ".version 8.0\n.target sm_70\n.address_size 64\n";

#[test]
fn if_else_reconverges_at_the_join_and_loops_at_the_exit() {
    // bb0: branch to ELSE or fall into THEN; both reach JOIN (bb3), which loops to itself.
    let src = format!(
        "{HEADER}.visible .entry k(.param .u32 n)
{{
    .reg .pred %p<3>;
    .reg .b32 %r<4>;
    ld.param.u32 %r1, [n];
    setp.eq.u32 %p1, %r1, 0;
    @%p1 bra ELSE;
    add.s32 %r2, %r1, 1;
    bra.uni JOIN;
ELSE:
    add.s32 %r2, %r1, 2;
JOIN:
    sub.s32 %r2, %r2, 1;
    setp.ne.u32 %p2, %r2, 0;
    @%p2 bra JOIN;
    ret;
}}"
    );
    let m = lower(&src).unwrap();
    let k = &m.kernels[kir::KernelId(0)];
    let cfg = &k.cfg;
    // Blocks: [0..3) entry, [3..5) then, [5..6) else, [6..9) join/loop, [9..10) ret.
    let starts: Vec<u32> = cfg.blocks.values().map(|b| b.start.0).collect();
    assert_eq!(starts, vec![0, 3, 5, 6, 9]);
    assert_eq!(cfg.ipdom[0], Some(PostDom::Block(BlockId(3))));
    // The divergent branch at pc 2 reconverges at JOIN (pc 6); the loop branch at pc 8
    // reconverges after the loop (pc 9).
    assert_eq!(cfg.reconvergence[2], InstId(6));
    assert_eq!(cfg.reconvergence[8], InstId(9));
    assert_eq!(cfg.idom[3], Some(BlockId(0)));
    assert!(cfg.blocks[BlockId(4)].exits);
    assert_eq!(cfg.blocks[BlockId(3)].succs.len(), 2);
}

#[test]
fn shared_memory_holds_only_reachable_variables_then_dynamic_memory() {
    let src = format!(
        "{HEADER}.shared .align 4 .b8 unused[4096];
.shared .align 8 .b8 tile[100];
.extern .shared .align 16 .b8 dyn[];
.visible .entry k()
{{
    .reg .b32 %r<3>;
    mov.u32 %r1, tile;
    mov.u32 %r2, dyn;
    ret;
}}"
    );
    let m = lower(&src).unwrap();
    let k = &m.kernels[kir::KernelId(0)];
    assert_eq!(
        k.static_smem, 100,
        "`unused` is not referenced by the kernel"
    );
    assert!(k.uses_dynamic_smem);
    assert_eq!(k.insts[InstId(0)].srcs[0], Operand::Imm(0));
    assert_eq!(
        k.insts[InstId(1)].srcs[0],
        Operand::Imm(112),
        "16-aligned after 100 bytes"
    );
}

#[test]
fn calls_are_inlined_with_params_in_local_memory() {
    let src = format!(
        "{HEADER}.func (.param .b32 ret) twice(.param .b32 x)
{{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [x];
    add.s32 %r2, %r1, %r1;
    st.param.b32 [ret], %r2;
    ret;
}}
.visible .entry k()
{{
    .reg .b32 %r<3>;
    mov.u32 %r1, 21;
    {{
    .param .b32 a;
    st.param.b32 [a], %r1;
    .param .b32 r;
    call.uni (r), twice, (a);
    ld.param.b32 %r2, [r];
    }}
    ret;
}}"
    );
    let m = lower(&src).unwrap();
    let k = &m.kernels[kir::KernelId(0)];
    let ops: Vec<&Op> = k.insts.values().map(|i| &i.op).collect();
    // mov, st a, [inlined: ld x, add, st ret, bra to return], ld r, exit
    assert_eq!(ops.len(), 8, "{ops:#?}");
    let local_offsets: Vec<(i32, Operand)> = k
        .insts
        .values()
        .filter_map(|i| match i.op {
            Op::Ld {
                space: Space::Local,
                offset,
                ..
            }
            | Op::St {
                space: Space::Local,
                offset,
                ..
            } => Some((offset, i.srcs[0])),
            _ => None,
        })
        .collect();
    // The callee's `x` is the caller's `a` (offset 0); `ret` is `r` (offset 4).
    assert_eq!(
        local_offsets,
        vec![
            (0, Operand::Imm(0)),
            (0, Operand::Imm(0)),
            (0, Operand::Imm(4)),
            (0, Operand::Imm(4))
        ]
    );
    assert_eq!(k.local_size, 8);
    assert!(matches!(
        k.insts[InstId(5)].op,
        Op::Bra {
            target: InstId(6),
            ..
        }
    ));
    assert!(k.regs.values().any(|r| r.name.starts_with("twice#1::")));
}

#[test]
fn every_problem_is_reported_with_its_span() {
    let src = format!(
        "{HEADER}.visible .entry k()
{{
    .reg .b32 %r<3>;
    frobnicate.b32 %r1, %r2;
    add.s32 %r1, %r9, 1;
    bra NOWHERE;
    mul.s32 %r1, %r1, 2;
    ret;
}}"
    );
    let errs = lower(&src).unwrap_err();
    let text: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
    assert_eq!(text.len(), 4, "{text:#?}");
    assert!(text[0].contains("unsupported instruction `frobnicate.b32`"));
    assert!(text[1].contains("unknown identifier `%r9`"));
    assert!(text[2].contains("unknown label `NOWHERE`"));
    assert!(text[3].contains("`mul` needs `.lo`, `.hi` or `.wide`"));
    let f = ptx::SourceFile::new("t.ptx", src.as_str());
    assert_eq!(f.line_col(errs[0].span().start), (7, 5));
    assert_eq!(f.line_col(errs[1].span().start).0, 8);
}

#[test]
fn recursion_is_an_error() {
    let src = format!(
        "{HEADER}.func f()
{{
    call.uni f, ();
    ret;
}}
.visible .entry k()
{{
    call.uni f, ();
    ret;
}}"
    );
    let errs = lower(&src).unwrap_err();
    assert!(
        errs.iter()
            .any(|e| matches!(e, LowerError::Recursion { name, .. } if name == "f")),
        "{errs:?}"
    );
}
