//! The uniformity analysis on small PTX programs.

mod common;

use kir::Kernel;
use regalloc::Uniformity;

const PROGRAM: &str = r#"
.version 7.0
.target sm_70
.address_size 64
.visible .entry k(.param .u64 k_p0, .param .u32 k_n)
{
  .reg .pred %p<8>;
  .reg .b32 %r<30>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [k_p0];
  ld.param.u32 %r1, [k_n];
  mov.u32 %r2, %tid.x;
  mov.u32 %r3, %ctaid.x;
  mov.u32 %r4, %ntid.x;
  mad.lo.s32 %r5, %r3, %r4, %r2;
  mul.lo.s32 %r6, %r3, %r4;
  add.s32 %r7, %r1, 1;
  setp.lt.s32 %p1, %r2, 16;
  mov.u32 %r8, 0;
  @%p1 bra L1;
  add.s32 %r8, %r7, 2;
  mov.u32 %r9, 5;
L1:
  add.s32 %r10, %r7, %r6;
  setp.lt.s32 %p2, %r7, 3;
  mov.u32 %r11, 0;
L2:
  add.s32 %r11, %r11, 1;
  setp.lt.s32 %p3, %r11, %r2;
  @%p3 bra L2;
  mov.u32 %r13, 0;
L3:
  add.s32 %r13, %r13, 1;
  setp.lt.s32 %p4, %r13, %r1;
  @%p4 bra L3;
  ld.global.u32 %r12, [%rd1];
  cvta.to.global.u64 %rd2, %rd1;
  @%p2 mov.u32 %r14, %r7;
  @%p1 mov.u32 %r15, %r7;
  shfl.sync.idx.b32 %r16, %r7, 0, 31, -1;
  ld.param.u32 %r17, [k_n];
  st.global.u32 [%rd2], %r12;
  ret;
}
"#;

fn kernel() -> Kernel {
    common::lower(PROGRAM)
        .kernels
        .values()
        .next()
        .unwrap()
        .clone()
}

fn uniform(k: &Kernel, u: &Uniformity, name: &str) -> bool {
    let (r, _) = k
        .regs
        .iter()
        .find(|(_, info)| info.name == name)
        .unwrap_or_else(|| panic!("no register {name}"));
    u.is_uniform(r)
}

#[test]
fn sources_of_uniformity_and_divergence() {
    let k = kernel();
    let u = Uniformity::compute(&k);
    for name in [
        "%rd1", "%r1", "%r3", "%r4", "%r6", "%r7", "%r10", "%p2", "%rd2", "%r17",
    ] {
        assert!(uniform(&k, &u, name), "{name} should be uniform");
    }
    for name in ["%r2", "%r5", "%p1", "%r12", "%r16"] {
        assert!(!uniform(&k, &u, name), "{name} should not be uniform");
    }
}

#[test]
fn sync_dependence_makes_values_non_uniform() {
    let k = kernel();
    let u = Uniformity::compute(&k);
    // Defined on one side of a divergent branch (and before it): differs at the join.
    assert!(!uniform(&k, &u, "%r8"));
    // Computed from uniform values, but only in the lanes that took one side.
    assert!(!uniform(&k, &u, "%r9"));
    // A loop with a divergent exit: lanes leave on different iterations.
    assert!(!uniform(&k, &u, "%r11"));
    // The same loop with a uniform exit keeps its counter uniform.
    assert!(uniform(&k, &u, "%r13"));
}

#[test]
fn guards_decide_uniformity_of_guarded_definitions() {
    let k = kernel();
    let u = Uniformity::compute(&k);
    assert!(uniform(&k, &u, "%r14"), "uniform guard, uniform source");
    assert!(!uniform(&k, &u, "%r15"), "divergent guard");
}

#[test]
fn uniform_values_go_to_uniform_registers_and_verify() {
    let k = kernel();
    let config = regalloc::AllocConfig {
        uniform_registers: 8,
        ..regalloc::AllocConfig::default()
    };
    let a = regalloc::allocate(&k, &config).unwrap();
    regalloc::verify(&k, &a).unwrap();
    assert!(a.uniform_count > 0);
    let ur_base = a.gpr_count + a.pred_count;
    for (v, info) in k.regs.iter() {
        if let Some(p) = a.assignment[v.0 as usize] {
            if p.0 >= ur_base {
                assert!(uniform(&k, &Uniformity::compute(&k), &info.name));
            }
        }
    }
}
