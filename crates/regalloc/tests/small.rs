//! Allocation of small programs that isolate one rule each: predicate pressure beyond the
//! predicate file, guarded definitions, pack/unpack, loops and minimal register counts.

mod common;

use kir::{Id, Kernel, Op};
use regalloc::{allocate, verify, AllocConfig, AllocError};

fn kernel(body: &str) -> Kernel {
    let text = format!(
        r#"
.version 7.0
.target sm_70
.address_size 64
.visible .entry k(.param .u64 k_p0, .param .u32 k_n)
{{
  .reg .pred %p<16>;
  .reg .b16 %rs<8>;
  .reg .b32 %r<40>;
  .reg .b64 %rd<16>;
  ld.param.u64 %rd1, [k_p0];
  ld.param.u32 %r1, [k_n];
  mov.u32 %r2, %tid.x;
{body}
  ret;
}}
"#
    );
    common::lower(&text)
        .kernels
        .values()
        .next()
        .unwrap()
        .clone()
}

#[test]
fn predicates_beyond_the_file_live_in_gprs() {
    // Ten predicates live at once; seven predicate registers.
    let mut body = String::new();
    for i in 1..=10 {
        body += &format!("  setp.lt.s32 %p{i}, %r2, {i};\n");
    }
    for i in 1..=10 {
        body += &format!(
            "  selp.u32 %r{}, 1, 0, %p{i};\n  add.s32 %r1, %r1, %r{};\n",
            10 + i,
            10 + i
        );
    }
    body += "  st.global.u32 [%rd1], %r1;\n";
    let k = kernel(&body);
    let a = allocate(&k, &AllocConfig::default()).unwrap();
    verify(&k, &a).unwrap();
    assert!(a.pred_count <= 7);
    assert_eq!(a.spilled_values, 0, "predicates go to GPRs, not memory");
    assert!(a
        .kernel
        .insts
        .values()
        .any(|i| matches!(i.op, Op::Selp(kir::Ty::U32))));
}

#[test]
fn guarded_definition_keeps_the_old_value_in_place() {
    let k = kernel(
        "  setp.lt.s32 %p1, %r2, 4;\n  mov.u32 %r3, 7;\n  @%p1 add.s32 %r3, %r1, 1;\n  st.global.u32 [%rd1], %r3;\n",
    );
    for max_registers in [16, 255] {
        let a = allocate(
            &k,
            &AllocConfig {
                max_registers,
                ..AllocConfig::default()
            },
        )
        .unwrap();
        verify(&k, &a).unwrap();
    }
}

#[test]
fn pack_and_unpack_use_aligned_pairs() {
    let k = kernel(
        "  mov.b64 {%r3, %r4}, %rd1;\n  add.s32 %r3, %r3, %r2;\n  mov.b64 %rd2, {%r3, %r4};\n  st.global.u32 [%rd2], %r4;\n",
    );
    let a = allocate(&k, &AllocConfig::default()).unwrap();
    verify(&k, &a).unwrap();
    for (v, info) in k.regs.iter() {
        if info.ty.size() == 8 {
            if let Some(p) = a.assignment[v.index()] {
                assert_eq!(p.0 % 2, 0, "{} in {p}", info.name);
            }
        }
    }
}

#[test]
fn loop_carried_values_spill_and_verify() {
    // Twenty values live around a loop: more than 16 registers.
    let mut body = String::new();
    for i in 3..23 {
        body += &format!("  add.s32 %r{i}, %r2, {i};\n");
    }
    body += "  mov.u32 %r30, 0;\nL1:\n";
    for i in 3..23 {
        body += &format!("  add.s32 %r{i}, %r{i}, %r30;\n");
    }
    body += "  add.s32 %r30, %r30, 1;\n  setp.lt.s32 %p1, %r30, %r1;\n  @%p1 bra L1;\n";
    for i in 3..23 {
        body += &format!("  add.s32 %r31, %r31, %r{i};\n");
    }
    body += "  st.global.u32 [%rd1], %r31;\n";
    let k = kernel(&body);
    let a = allocate(
        &k,
        &AllocConfig {
            max_registers: 16,
            ..AllocConfig::default()
        },
    )
    .unwrap();
    verify(&k, &a).unwrap();
    assert!(a.gpr_count <= 16);
    assert!(a.spilled_values > 0 && a.spill_bytes >= 4 * a.spilled_values);
    let roomy = allocate(&k, &AllocConfig::default()).unwrap();
    verify(&k, &roomy).unwrap();
    // 20 loop values, %r30, %r31, the 64-bit pointer (2) and %r1, %r2 at most.
    assert!(roomy.gpr_count <= 27, "{}", roomy.gpr_count);
}

#[test]
fn coalesced_copies_are_removed() {
    let k = kernel("  mov.u32 %r3, %r2;\n  add.s32 %r4, %r3, 1;\n  st.global.u32 [%rd1], %r4;\n");
    let a = allocate(&k, &AllocConfig::default()).unwrap();
    verify(&k, &a).unwrap();
    assert!(a.kernel.len() < k.len());
}

#[test]
fn too_small_budgets_are_errors() {
    let k = kernel("");
    assert!(matches!(
        allocate(
            &k,
            &AllocConfig {
                max_registers: 8,
                ..AllocConfig::default()
            }
        ),
        Err(AllocError::TooFewRegisters { .. })
    ));
    assert!(matches!(
        allocate(
            &k,
            &AllocConfig {
                predicate_registers: 2,
                ..AllocConfig::default()
            }
        ),
        Err(AllocError::TooFewPredicates { .. })
    ));
}
