//! Unit tests of CTXBack's parts: context sizes, CS-Defer, routine generation.

use analysis::ctxback::{
    generate_routines, ContextSize, CtxBack, CtxBackConfig, RegClass, Technique,
};
use kir::inst::{ArithOp, Op, Operand, Space};
use kir::{InstId, Kernel};

fn kernel(params: &str, body: &str) -> Kernel {
    let text = format!(
        ".version 7.0\n.target sm_70\n.address_size 64\n.visible .entry k({params})\n{{\n{body}\n}}\n"
    );
    let ast = ptx::parse(&text).unwrap_or_else(|e| panic!("parse: {e}\n{text}"));
    let m = kir::lower::lower_module(&ast, "t.ptx").unwrap_or_else(|e| panic!("{e:?}"));
    m.kernels.values().next().unwrap().clone()
}

const STRAIGHT: &str = "
    .reg .b32 %r<6>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd0, [k_in];      // pc0  live {}
    ld.global.u32 %r1, [%rd0];      // pc1  live {rd0}            2 words
    ld.global.u32 %r2, [%rd0+4];    // pc2  live {rd0 r1}         3
    ld.global.u32 %r3, [%rd0+8];    // pc3  live {rd0 r1 r2}      4
    add.u32 %r4, %r1, %r2;          // pc4  live {r1 r2 r3}       3
    add.u32 %r5, %r4, %r3;          // pc5  live {r3 r4}          2
    ld.param.u64 %rd1, [k_out];     // pc6  live {r5}             1
    st.global.u32 [%rd1], %r5;      // pc7  live {rd1 r5}         3
    exit;                           // pc8  live {}
";

const PARAMS: &str = ".param .u64 k_in, .param .u64 k_out";

#[test]
fn context_sizes_count_64_bit_values_twice() {
    let k = kernel(PARAMS, STRAIGHT);
    let ctx = CtxBack::compute(&k, &CtxBackConfig::default());
    let words: Vec<u32> = k.insts.ids().map(|pc| ctx.live(pc).words()).collect();
    assert_eq!(words, [0, 2, 3, 4, 3, 2, 1, 3, 0]);
    // BASELINE: every register (r0..r5 and the two 64-bit rd registers).
    assert_eq!(
        ctx.baseline(),
        ContextSize {
            vector: 10,
            uniform: 0,
            predicates: 0
        }
    );
    assert_eq!(ctx.baseline().bytes_per_warp(32), 10 * 128);
}

#[test]
fn cs_defer_nearest_smaller_and_cheapest() {
    let k = kernel(PARAMS, STRAIGHT);
    let ctx = CtxBack::compute(&k, &CtxBackConfig::default());
    let near = |pc: u32| {
        ctx.next_smaller(InstId(pc))
            .map(|d| (d.target.0, d.deferred))
    };
    assert_eq!(near(3), Some((4, 1)));
    assert_eq!(near(2), Some((5, 3)));
    assert_eq!(near(7), Some((8, 1)));
    assert_eq!(near(0), None, "nothing is smaller than an empty context");
    // Ranked by latency (deferral × 1 + 8 per saved register), pc3 defers to the `exit`:
    // five instructions and an empty context beat saving four registers now.
    let d = ctx.cs_defer(InstId(3));
    assert_eq!((d.target.0, d.deferred, d.latency), (8, 5, 5));
    // With a deferred instruction as expensive as saving a register, it switches at once.
    let costly = CtxBackConfig {
        cost: analysis::ctxback::CostModel {
            alu: 100,
            ..Default::default()
        },
        ..CtxBackConfig::default()
    };
    let ctx2 = CtxBack::compute(&k, &costly);
    assert_eq!(ctx2.cs_defer(InstId(3)).target, InstId(3));
}

#[test]
fn cs_defer_stops_at_barriers_and_data_dependent_branches() {
    let k = kernel(
        ".param .u32 k_n",
        "
    .reg .b32 %r<4>;
    .reg .pred %p<2>;
    ld.param.u32 %r1, [k_n];        // pc0
    add.u32 %r2, %r1, 1;            // pc1
    bar.sync 0;                     // pc2: CS-Defer may stop here, not past it
    add.u32 %r3, %r2, %r1;          // pc3
    setp.eq.u32 %p1, %r3, 0;        // pc4
    @%p1 bra DONE;                  // pc5: data-dependent: the path ends here
    add.u32 %r3, %r3, 1;            // pc6
DONE:
    exit;                           // pc7
",
    );
    let ctx = CtxBack::compute(&k, &CtxBackConfig::default());
    for pc in 0..=2 {
        assert!(ctx.cs_defer(InstId(pc)).target.0 <= 2, "pc{pc}");
    }
    for pc in 3..=5 {
        assert!(ctx.cs_defer(InstId(pc)).target.0 <= 5, "pc{pc}");
    }
    // An unguarded branch is followed: pc6 falls into `exit`.
    assert_eq!(ctx.cs_defer(InstId(6)).target, InstId(7));
}

/// A diverged warp's top stack entry pops at its reconvergence point and the parked lanes run
/// next, so CS-Defer's path from inside a divergent region ends there.
#[test]
fn cs_defer_stops_at_the_reconvergence_point_of_an_enclosing_branch() {
    let k = kernel(
        PARAMS,
        "
    .reg .b32 %r<8>;
    .reg .b64 %rd<2>;
    .reg .pred %p<2>;
    mov.u32 %r0, %tid.x;
    mov.u32 %r5, 3;
    setp.lt.u32 %p0, %r0, 5;
    @%p0 bra SKIP;
    add.u32 %r1, %r0, 1;
    mul.lo.u32 %r2, %r1, %r5;
    add.u32 %r5, %r2, %r0;
SKIP:
    add.u32 %r6, %r5, 1;
    ld.param.u64 %rd0, [k_out];
    st.global.u32 [%rd0], %r6;
    exit;
",
    );
    let ctx = CtxBack::compute(&k, &CtxBackConfig::default());
    // pc4..=pc6 are the not-taken side of pc3, which reconverges at SKIP (pc7).
    for pc in 4..=6 {
        let pc = InstId(pc);
        assert!(ctx.cs_defer(pc).target <= InstId(7), "{pc}");
        assert!(ctx.combined_deferral(pc).target <= InstId(7), "{pc}");
        assert!(ctx.next_smaller(pc).is_none_or(|d| d.target <= InstId(7)));
    }
    assert_eq!(
        ctx.next_smaller(InstId(6)).map(|d| d.target),
        Some(InstId(7))
    );
    // From the reconvergence point on, the path goes on to the exit, whose context is empty.
    assert_eq!(
        ctx.next_smaller(InstId(7)).map(|d| d.target),
        Some(InstId(10))
    );
}

#[test]
fn combined_picks_the_lower_latency() {
    let k = kernel(PARAMS, STRAIGHT);
    let ctx = CtxBack::compute(&k, &CtxBackConfig::default());
    for pc in k.insts.ids() {
        let (fb, d) = (ctx.flashback(pc), ctx.combined_deferral(pc));
        let expect = if d.latency < fb.cost.preempt {
            Technique::CsDefer
        } else {
            Technique::CtxBack
        };
        assert_eq!(ctx.combined(pc), expect, "{pc}");
        // Within the combination a switch saves at least the live-in, and CS-Defer alone
        // takes the same path.
        let alone = ctx.cs_defer(pc);
        assert!(d.context.words() >= ctx.live(d.target).words());
        assert!(alone.latency <= d.latency);
    }
}

/// Fig. 3 of papers/ji-ctxback: the preemption routine is `SUB r0, r0, r3; GST r0; GST r2;
/// EXIT`, the resume routine `GLD r0; GLD r2; JUMP I0`.
#[test]
fn routines_of_fig3() {
    let k = kernel(
        PARAMS,
        "
    .reg .b32 %r<4>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd0, [k_in];
    ld.global.u32 %r0, [%rd0];
    ld.global.u32 %r2, [%rd0+4];
    bar.sync 0;                     // pc3
    xor.b32 %r1, %r0, %r2;          // pc4 = I0
    mul.lo.u32 %r3, %r1, %r2;       // I1
    add.u32 %r0, %r0, %r3;          // I2
    mov.u32 %r1, 0xF;               // I3
    ld.param.u64 %rd1, [k_out];     // pc8 = I4
    st.global.u32 [%rd1], %r0;
    st.global.u32 [%rd1+4], %r1;
    st.global.u32 [%rd1+8], %r2;
    st.global.u32 [%rd1+12], %r3;
    exit;
",
    );
    let ctx = CtxBack::compute(&k, &CtxBackConfig::default());
    let r = generate_routines(&k, &ctx).expect("routines");
    assert_eq!(r.context_base, 0);
    let pre = r.preempt_code(InstId(8));
    let res = r.resume_code(InstId(8));
    let reg = |n: &str| k.regs.ids().find(|&x| k.regs[x].name == n).unwrap();
    let (r0, r2, r3) = (reg("%r0"), reg("%r2"), reg("%r3"));
    assert_eq!(pre.len(), 4);
    assert!(matches!(
        pre[0].op,
        Op::Arith {
            op: ArithOp::Sub,
            ..
        }
    ));
    assert_eq!(pre[0].dsts[0], Some(r0));
    assert_eq!(pre[0].srcs(), [Operand::Reg(r0), Operand::Reg(r3)]);
    let stored: Vec<_> = pre[1..3]
        .iter()
        .map(|i| match i.op {
            Op::St {
                space: Space::Local,
                offset,
                ..
            } => (i.srcs[1], offset),
            ref o => panic!("{o:?}"),
        })
        .collect();
    assert_eq!(stored, [(Operand::Reg(r0), 0), (Operand::Reg(r2), 4)]);
    assert!(matches!(pre[3].op, Op::Exit));
    let loaded: Vec<_> = res[..2]
        .iter()
        .map(|i| match i.op {
            Op::Ld {
                space: Space::Local,
                offset,
                ..
            } => (i.dsts[0], offset),
            ref o => panic!("{o:?}"),
        })
        .collect();
    assert_eq!(loaded, [(Some(r0), 0), (Some(r2), 4)]);
    assert!(matches!(
        res[2].op,
        Op::Bra {
            target: InstId(4),
            ..
        }
    ));
    assert_eq!(res.len(), 3);
    assert_eq!(r.context_bytes, ctx_bytes(&ctx));
}

fn ctx_bytes(ctx: &CtxBack) -> u32 {
    ctx.flashbacks()
        .iter()
        .map(|f| {
            f.saved
                .iter()
                .map(|s| if s.wide { 8 } else { 4 })
                .sum::<u32>()
        })
        .max()
        .unwrap_or(0)
}

/// Predicates go through a scratch register; 64-bit registers take 8-byte slots first.
/// (A window of 0 is plain LIVE switching: CTXBack would rather re-execute the `setp`.)
#[test]
fn routines_save_predicates_and_pairs() {
    let k = kernel(
        PARAMS,
        "
    .reg .b32 %r<4>;
    .reg .b64 %rd<3>;
    .reg .pred %p<2>;
    ld.param.u64 %rd0, [k_in];
    ld.global.u32 %r1, [%rd0];
    setp.eq.u32 %p1, %r1, 0;
    ld.param.u64 %rd1, [k_out];     // pc3
    @%p1 st.global.u32 [%rd1], %r1;
    exit;
",
    );
    let a = regalloc::allocate(&k, &regalloc::AllocConfig::default()).expect("allocates");
    let k = a.kernel;
    let live_only = CtxBackConfig {
        window: 0,
        ..CtxBackConfig::default()
    };
    let ctx = CtxBack::compute(&k, &live_only);
    let pc = InstId(4);
    let fb = ctx.flashback(pc);
    assert!(fb.saved.iter().any(|s| s.class == RegClass::Predicate));
    assert!(fb.saved.iter().any(|s| s.wide), "{}", fb.describe(&k));
    let r = generate_routines(&k, &ctx).expect("routines");
    let pre = r.preempt_code(pc);
    assert!(pre.iter().any(|i| matches!(i.op, Op::Selp(_))));
    let res = r.resume_code(pc);
    assert!(matches!(res[0].op, Op::Ld { .. }));
    assert!(matches!(res[1].op, Op::Setp { .. }), "predicates first");
    // The 64-bit address is at the start of the context area.
    assert!(res.iter().any(|i| matches!(
        i.op,
        Op::Ld {
            ty: kir::Ty::B64,
            offset: 0,
            ..
        }
    )));
}
