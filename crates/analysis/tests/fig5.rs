//! Golden test: papers/lin-lightweight Fig. 5 ("possible thread locations when a preemption
//! point is reached"), §III-B.
//!
//! T1 and T2 of one warp diverge at the end of block A; T1 takes path B, T2 path C. When T2
//! reaches the preemption point in C, T1 is either still at the divergence point (it has not
//! started B) or waiting at the reconvergence point, the start of D. The registers to save
//! are the union of the liveness at the three locations. Each register below is live at
//! exactly one of them, so the union is visible register by register:
//!
//! * `%r2` is read only in B, `%r3` only in C (before the point), `%r4` and `%rd1` only in D;
//! * `%r6` is written by both B and C and read in D: lanes waiting at D hold it;
//! * `%r7` is live at the point itself.

use analysis::{Liveness, RegSet};
use expect_test::expect;
use kir::{Id, InstId, Kernel};

const FIG5: &str = r#"
.version 7.0
.target sm_70
.address_size 64
.visible .entry fig5(.param .u64 fig5_out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<4>;
    // A
    ld.param.u64 %rd1, [fig5_out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, 10;
    mov.u32 %r3, 20;
    mov.u32 %r4, 30;
    and.b32 %r5, %r1, 1;
    setp.eq.u32 %p1, %r5, 0;
    @%p1 bra C;
    // B
    add.u32 %r6, %r2, %r1;
    bra.uni D;
C:
    add.u32 %r7, %r3, %r1;
    mov.u32 %r8, %r7;           // the preemption point (pc11)
    add.u32 %r6, %r8, 1;
D:
    add.u32 %r9, %r6, %r4;
    st.global.u32 [%rd1], %r9;
    exit;
}
"#;

fn kernel() -> Kernel {
    let ast = ptx::parse(FIG5).expect("parses");
    let m = kir::lower::lower_module(&ast, "fig5.ptx").expect("lowers");
    m.kernel("fig5").expect("kernel").1.clone()
}

fn names(k: &Kernel, s: &RegSet) -> String {
    let mut v: Vec<&str> = s.iter().map(|r| k.regs[r].name.as_str()).collect();
    v.sort();
    v.join(" ")
}

/// Every instruction: its block, plain live-in, SIMT-aware set and the parked PCs.
fn table(k: &Kernel, lv: &Liveness) -> String {
    let mut out = String::new();
    for pc in k.insts.ids() {
        let parked: Vec<String> = lv
            .enclosing_branches(k, pc)
            .map(|b| {
                let p: Vec<String> = b.parked_pcs().iter().map(|p| p.to_string()).collect();
                format!("{}:[{}]", b.branch.branch, p.join(" "))
            })
            .collect();
        out.push_str(&format!(
            "{pc:<5} {:<4} live=[{}] divergent=[{}] parked={}\n",
            k.cfg.block_of[pc.index()].to_string(),
            names(k, lv.live_in(pc)),
            names(k, lv.divergent_live(pc)),
            parked.join(","),
        ));
    }
    out
}

#[test]
fn figure5_union_of_point_divergence_and_reconvergence() {
    let k = kernel();
    let mut lv = Liveness::new();
    lv.compute(&k);
    expect![[r#"
        pc0 bb0  live=[] divergent=[] parked=
        pc1 bb0  live=[%rd1] divergent=[%rd1] parked=
        pc2 bb0  live=[%r1 %rd1] divergent=[%r1 %rd1] parked=
        pc3 bb0  live=[%r1 %r2 %rd1] divergent=[%r1 %r2 %rd1] parked=
        pc4 bb0  live=[%r1 %r2 %r3 %rd1] divergent=[%r1 %r2 %r3 %rd1] parked=
        pc5 bb0  live=[%r1 %r2 %r3 %r4 %rd1] divergent=[%r1 %r2 %r3 %r4 %rd1] parked=
        pc6 bb0  live=[%r1 %r2 %r3 %r4 %r5 %rd1] divergent=[%r1 %r2 %r3 %r4 %r5 %rd1] parked=
        pc7 bb0  live=[%p1 %r1 %r2 %r3 %r4 %rd1] divergent=[%p1 %r1 %r2 %r3 %r4 %rd1] parked=
        pc8 bb1  live=[%r1 %r2 %r4 %rd1] divergent=[%r1 %r2 %r3 %r4 %r6 %rd1] parked=pc7:[pc10 pc13]
        pc9 bb1  live=[%r4 %r6 %rd1] divergent=[%r1 %r3 %r4 %r6 %rd1] parked=pc7:[pc10 pc13]
        pc10 bb2  live=[%r1 %r3 %r4 %rd1] divergent=[%r1 %r2 %r3 %r4 %r6 %rd1] parked=pc7:[pc8 pc13]
        pc11 bb2  live=[%r4 %r7 %rd1] divergent=[%r1 %r2 %r4 %r6 %r7 %rd1] parked=pc7:[pc8 pc13]
        pc12 bb2  live=[%r4 %r8 %rd1] divergent=[%r1 %r2 %r4 %r6 %r8 %rd1] parked=pc7:[pc8 pc13]
        pc13 bb3  live=[%r4 %r6 %rd1] divergent=[%r4 %r6 %rd1] parked=
        pc14 bb3  live=[%r9 %rd1] divergent=[%r9 %rd1] parked=
        pc15 bb3  live=[] divergent=[] parked=
    "#]]
    .assert_eq(&table(&k, &lv));

    // The point in C: its own liveness, T1 not yet in B (pc8), T1 waiting at D (pc12).
    let (point, b_start, d_start) = (InstId(11), InstId(8), InstId(13));
    let mut union = lv.live_in(point).clone();
    union.union_with(lv.live_in(b_start));
    union.union_with(lv.live_in(d_start));
    assert_eq!(lv.divergent_live(point), &union);
    assert_eq!(names(&k, lv.live_in(point)), "%r4 %r7 %rd1");
    assert_eq!(
        names(&k, lv.divergent_live(point)),
        "%r1 %r2 %r4 %r6 %r7 %rd1"
    );
    // Outside the divergent region the two versions agree.
    for pc in [0, 7, 13, 14, 15] {
        assert_eq!(
            lv.live_in(InstId(pc)),
            lv.divergent_live(InstId(pc)),
            "pc{pc}"
        );
    }
}
