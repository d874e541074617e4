//! The value-pattern analysis (`regalloc::patterns`) on small PTX programs.

mod common;

use kir::inst::Op;
use kir::{InstId, Kernel, Reg};
use regalloc::patterns::{ValuePattern::*, ValuePatterns};

fn kernel(body: &str) -> Kernel {
    let src = format!(
        ".version 7.0\n.target sm_70\n.address_size 64\n.visible .entry k(.param .u64 p, .param .u32 n)\n{{\n{body}\n}}\n"
    );
    common::lower(&src).kernels.values().next().unwrap().clone()
}

fn reg(k: &Kernel, name: &str) -> Reg {
    k.regs
        .iter()
        .find(|(_, r)| r.name == name)
        .map(|(id, _)| id)
        .unwrap_or_else(|| panic!("no {name}"))
}

const BODY: &str = "
    .reg .u32 %r<10>; .reg .u64 %rd<6>; .reg .pred %p<3>; .reg .f32 %f<3>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mad.lo.u32 %r5, %r3, %r4, %r2;
    mul.wide.u32 %rd2, %r5, 4;
    add.u64 %rd3, %rd1, %rd2;
    ld.global.u32 %r6, [%rd3];
    mul.lo.u32 %r7, %r5, %r5;
    mov.u32 %r8, %tid.y;
    shr.u32 %r9, %r2, 1;
    setp.lt.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    add.u32 %r1, %r1, %r2;
DONE:
    st.global.u32 [%rd3], %r1;
    ret;";

#[test]
fn thread_indices_stay_strided_through_affine_arithmetic() {
    let k = kernel(BODY);
    let v = ValuePatterns::compute(&k, 128);
    let end = InstId(k.insts.len() as u32 - 1);
    let at = |name| v.before(end, reg(&k, name));
    // Parameters and block indices: uniform; tid.x and ctaid * ntid + tid.x: strided,
    // also widened and added to a pointer; a load, a square and a shift: random; tid.y
    // is uniform in a warp of a 128-wide TB.
    assert_eq!(at("%rd1"), Uniform);
    assert_eq!(at("%r3"), Uniform);
    assert_eq!(at("%r2"), Strided);
    assert_eq!(at("%r5"), Strided);
    assert_eq!(at("%rd2"), Strided);
    assert_eq!(at("%rd3"), Strided);
    assert_eq!(at("%r6"), Random);
    assert_eq!(at("%r7"), Random);
    assert_eq!(at("%r9"), Random);
    assert_eq!(at("%r8"), Uniform);
    // n is uniform until the divergent branch's region adds tid.x to it in some lanes.
    let branch = (0..k.insts.len() as u32)
        .map(InstId)
        .find(|&i| matches!(k.insts[i].op, Op::Bra { .. }))
        .unwrap();
    assert_eq!(v.before(branch, reg(&k, "%r1")), Uniform);
    assert_eq!(at("%r1"), Random);
}

#[test]
fn rows_that_split_a_group_make_thread_indices_random() {
    // 48 threads wide: a warp holds the end of one row and the start of the next, so
    // neither tid.x nor tid.y is uniform or strided over its 32 lanes.
    let k = kernel(BODY);
    let v = ValuePatterns::compute(&k, 48);
    let end = InstId(k.insts.len() as u32 - 1);
    assert_eq!(v.before(end, reg(&k, "%r2")), Random);
    assert_eq!(v.before(end, reg(&k, "%r8")), Random);
    // 16 wide: groups of 16 lanes, each one row.
    let v = ValuePatterns::compute(&k, 16);
    assert_eq!(v.before(end, reg(&k, "%r2")), Strided);
    assert_eq!(v.before(end, reg(&k, "%r8")), Uniform);
}

#[test]
fn an_allocated_pair_holds_each_half_of_a_wide_value() {
    let k = kernel(
        "
    .reg .u32 %r<3>; .reg .u64 %rd<6>;
    ld.param.u64 %rd1, [p];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 8;
    add.u64 %rd3, %rd1, %rd2;
    ld.global.u64 %rd4, [%rd3];
    st.global.u64 [%rd3], %rd4;
    ret;",
    );
    let a = regalloc::allocate(&k, &regalloc::AllocConfig::default()).unwrap();
    let v = ValuePatterns::compute(&a.kernel, 256);
    let store = (0..a.kernel.insts.len() as u32)
        .map(InstId)
        .find(|&i| matches!(a.kernel.insts[i].op, Op::St { .. }))
        .unwrap();
    let phys = |name| a.assignment[reg(&k, name).0 as usize].unwrap();
    // The strided address: its low register strided, its high one uniform (no carry
    // between lanes assumed); the loaded value: random in both halves.
    let (lo, hi) = (phys("%rd3"), Reg(phys("%rd3").0 + 1));
    assert_eq!(
        (v.before(store, lo), v.before(store, hi)),
        (Strided, Uniform)
    );
    let (lo, hi) = (phys("%rd4"), Reg(phys("%rd4").0 + 1));
    assert_eq!((v.before(store, lo), v.before(store, hi)), (Random, Random));
}
