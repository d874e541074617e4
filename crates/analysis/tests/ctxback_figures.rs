//! Golden tests: papers/ji-ctxback Figures 1–6 as small PTX programs.
//!
//! Each figure's instructions `I0..` are written with the paper's register names as PTX
//! virtual registers that are reassigned (the overwriting the figures are about). The figure
//! starts right after a `bar.sync`, which ends the idempotent region, so no flashback point
//! lies before `I0`; the instruction where the signal arrives is an `ld.param` that defines
//! the output address, and the registers the figure names are stored after it so that they
//! are exactly the live-in registers of that instruction (as the paper assumes: "{r0–r4} are
//! live-in registers of I4").
//!
//! Flashbacks are printed in the paper's terms: `save[...]` is Fig. (b)'s `GST`s (`r0@I2`:
//! the value written by I2, reloaded at I2's position; no `@`: the value at the flashback
//! point), `pre[...]` the reverting instructions of the preemption routine, `resume[...]`
//! Fig. (c)'s routine (`ld` = `GLD`, `Ik` = re-execute, `Ik^-1` = revert, `jump Ik` = `JUMP`).

use analysis::ctxback::{
    backup_scalars, BackupSlot, Condition, CtxBack, CtxBackConfig, Flashback, OsrbConfig,
    OsrbKernel, ResumeStep, Version,
};
use kir::inst::Op;
use kir::{Id, InstId, Kernel};

/// A kernel whose figure instructions are `body`; `regs` are the figure's registers (all
/// `.b32`), loaded from memory before the figure and stored after it.
fn figure(regs: &[&str], body: &str) -> (Kernel, u32) {
    figure_io(regs, regs, regs, body)
}

/// [`figure`] with the registers declared, loaded before the figure and stored after it
/// (live at the signal) given separately.
fn figure_io(regs: &[&str], loaded: &[&str], stored: &[&str], body: &str) -> (Kernel, u32) {
    let loads: String = loaded
        .iter()
        .enumerate()
        .map(|(n, r)| format!("    ld.global.u32 %{r}, [%rd0+{}];\n", 4 * n))
        .collect();
    let stores: String = stored
        .iter()
        .enumerate()
        .map(|(n, r)| format!("    st.global.u32 [%rd1+{}], %{r};\n", 4 * n))
        .collect();
    let decls: String = regs
        .iter()
        .map(|r| format!("    .reg .b32 %{r};\n"))
        .collect();
    let text = format!(
        ".version 7.0\n.target sm_70\n.address_size 64\n\
         .visible .entry fig(.param .u64 fig_in, .param .u64 fig_out)\n{{\n\
         {decls}    .reg .b64 %rd<2>;\n\
         ld.param.u64 %rd0, [fig_in];\n{loads}    bar.sync 0;\n{body}\n\
         \x20   ld.param.u64 %rd1, [fig_out];\n{stores}    exit;\n}}\n"
    );
    let ast = ptx::parse(&text).unwrap_or_else(|e| panic!("parse: {e}\n{text}"));
    let m = kir::lower::lower_module(&ast, "fig.ptx").unwrap_or_else(|e| panic!("{e:?}"));
    let k = m.kernels.values().next().unwrap().clone();
    let i0 = k
        .insts
        .iter()
        .find(|(_, i)| matches!(i.op, Op::Bar { .. }))
        .unwrap()
        .0
         .0
        + 1;
    (k, i0)
}

fn config(condition: Condition) -> CtxBackConfig {
    CtxBackConfig {
        condition,
        ..CtxBackConfig::default()
    }
}

/// `I3` for a pc of the figure.
fn name(i0: u32, pc: InstId) -> String {
    format!("I{}", pc.0 - i0)
}

fn reg(k: &Kernel, r: kir::Reg) -> &str {
    k.regs[r].name.trim_start_matches('%')
}

/// The paper's notation for a flashback.
fn paper(k: &Kernel, i0: u32, fb: &Flashback) -> String {
    paper_named(k, &|pc| name(i0, pc), fb)
}

/// [`paper`] with instructions named by `name`.
fn paper_named(k: &Kernel, name: &dyn Fn(InstId) -> String, fb: &Flashback) -> String {
    let saved: Vec<String> = fb
        .saved
        .iter()
        .map(|s| match s.version {
            Version::Initial => reg(k, s.reg).to_string(),
            Version::Def(pc) => format!("{}@{}", reg(k, s.reg), name(pc)),
        })
        .collect();
    let pre: Vec<String> = fb
        .preempt_reverts
        .iter()
        .map(|&pc| format!("{}^-1", name(pc)))
        .collect();
    let resume: Vec<String> = fb
        .resume
        .iter()
        .map(|s| match *s {
            ResumeStep::Load(r) => format!("ld {}", reg(k, r)),
            ResumeStep::Reexecute(pc) => name(pc),
            ResumeStep::Revert(pc) => format!("{}^-1", name(pc)),
            ResumeStep::CopyBack(pc) => format!("cp {}", name(pc)),
            ResumeStep::Jump(pc) => format!("jump {}", name(pc)),
        })
        .collect();
    format!(
        "{} <- {} save[{}] pre[{}] resume[{}]",
        name(fb.pc),
        name(fb.point),
        saved.join(" "),
        pre.join("; "),
        resume.join("; ")
    )
}

/// The flashback points of `I{cur}`, nearest first.
fn points(k: &Kernel, i0: u32, cur: u32, condition: Condition) -> Vec<String> {
    CtxBack::candidates(k, &config(condition), InstId(i0 + cur))
        .iter()
        .map(|fb| name(i0, fb.point))
        .collect()
}

fn best(k: &Kernel, i0: u32, cur: u32, condition: Condition) -> String {
    let ctx = CtxBack::compute(k, &config(condition));
    paper(k, i0, ctx.flashback(InstId(i0 + cur)))
}

const FIG1: &str = "
    xor.b32 %r3, %r4, 0xF;     // I0
    mul.lo.u32 %r1, %r3, 7;    // I1
    shl.b32 %r0, %r0, 2;       // I2 (the paper's RSHL: a shift, not reversible)
    add.u32 %r2, %r0, %r4;     // I3
";

/// Fig. 1: without further mechanisms only instructions whose whole context is still in the
/// registers at I4 are flashback points: I3 and I4. I0–I2 read r0, which I2 overwrote.
#[test]
fn fig1_available_contexts() {
    let (k, i0) = figure(&["r0", "r1", "r2", "r3", "r4"], FIG1);
    assert_eq!(points(&k, i0, 4, Condition::Basic), ["I4", "I3"]);
    // I3 saves its own context {r0, r4} (and r1, r3, which no instruction of [I3, I4)
    // overwrites) and re-executes I3.
    assert_eq!(
        best(&k, i0, 4, Condition::Basic),
        "I4 <- I3 save[r0 r1 r3 r4] pre[] resume[ld r0; ld r1; ld r3; ld r4; jump I3]"
    );
}

/// Fig. 2: combining re-execution with saving/reloading makes every preceding instruction a
/// flashback point. At I0 only r0 (I2's result, reloaded in place of re-executing I2) and r4
/// are saved; I0, I1 and I3 are re-executed.
#[test]
fn fig2_relaxed_condition() {
    let (k, i0) = figure(&["r0", "r1", "r2", "r3", "r4"], FIG1);
    assert_eq!(
        points(&k, i0, 4, Condition::Relaxed),
        ["I4", "I3", "I2", "I1", "I0"]
    );
    let fig2 = "I4 <- I0 save[r0@I2 r4] pre[] resume[ld r4; I0; I1; ld r0; jump I3]";
    assert_eq!(best(&k, i0, 4, Condition::Relaxed), fig2);
    // Reverting changes nothing here: a shift is not reversible.
    assert_eq!(best(&k, i0, 4, Condition::Reverting), fig2);
}

const FIG3: &str = "
    xor.b32 %r1, %r0, %r2;     // I0
    mul.lo.u32 %r3, %r1, %r2;  // I1
    add.u32 %r0, %r0, %r3;     // I2
    mov.u32 %r1, 0xF;          // I3
";

/// Fig. 3: the preemption routine reverts I2 (`SUB r0, r0, r3`), which gives back r0's value
/// at I0; only r0 and r2 are saved and the resume routine jumps to I0.
#[test]
fn fig3_instruction_reverting() {
    let (k, i0) = figure(&["r0", "r1", "r2", "r3"], FIG3);
    assert_eq!(
        best(&k, i0, 4, Condition::Reverting),
        "I4 <- I0 save[r0 r2] pre[I2^-1] resume[ld r0; ld r2; jump I0]"
    );
    // Without reverting, I0 cannot be restored: no flashback point saves fewer than the
    // three registers live at I3. (The paper excludes I0 outright; the demand-driven
    // condition admits it, because nothing needed reads I0's result, but at no gain.)
    let relaxed = CtxBack::compute(&k, &config(Condition::Relaxed));
    assert_eq!(relaxed.flashback(InstId(i0 + 4)).context.words(), 3);
    let fb = relaxed.flashback(InstId(i0 + 4));
    assert!(fb.point.0 >= i0 + 2, "{}", paper(&k, i0, fb));
}

/// Fig. 4: reverting I2 needs r2 as I0 computed it, which I3 overwrote: the revert happens at
/// resume, after re-executing I0. Saved: r0 (I2's result) and r1.
#[test]
fn fig4_revert_at_resume() {
    let (k, i0) = figure(
        &["r0", "r1", "r2", "r3"],
        "
    mul.lo.u32 %r2, %r1, 0xE;  // I0
    xor.b32 %r3, %r0, %r2;     // I1
    add.u32 %r0, %r0, %r2;     // I2
    mov.u32 %r2, 0xFF;         // I3
",
    );
    assert_eq!(
        best(&k, i0, 4, Condition::Reverting),
        "I4 <- I0 save[r0@I2 r1] pre[] resume[ld r0; ld r1; I0; I2^-1; jump I1]"
    );
}

/// Fig. 5 without OSRB: I0 is not re-executable because I1 overwrote the scalar S4 (`or` is
/// not reversible), so every flashback strategy swaps V7.
#[test]
fn fig5_without_scalar_backup_v7_is_swapped() {
    let (k, i0) = figure(&["v2", "v7", "v11", "v12", "s4"], FIG5);
    let cands = CtxBack::candidates(&k, &CtxBackConfig::default(), InstId(i0 + 4));
    assert_eq!(cands.len(), 5);
    for fb in &cands {
        assert!(
            fb.saved.iter().any(|s| reg(&k, s.reg) == "v7"),
            "{}",
            paper(&k, i0, fb)
        );
    }
    let ctx = CtxBack::compute(&k, &CtxBackConfig::default());
    assert_eq!(ctx.flashback(InstId(i0 + 4)).context.words(), 4);
}

const FIG5: &str = "
    add.u32 %v7, %v2, %s4;     // I0
    or.b32 %s4, %s4, 2;        // I1
    mul.lo.u32 %v11, %v11, %v2;// I2
    sub.u32 %v12, %v11, %v7;   // I3
";

/// Fig. 5 as the paper draws it: V7 is dead at I4 (only I3 reads it), and `s4` is a scalar
/// register (renamed `UR4`, the allocator's uniform-register name).
fn fig5_kernel() -> (Kernel, u32) {
    let (mut k, i0) = figure_io(
        &["v2", "v7", "v11", "v12", "s4"],
        &["v2", "v11", "s4"],
        &["v2", "v11", "v12", "s4"],
        FIG5,
    );
    let s4 = k.regs.ids().find(|&r| k.regs[r].name == "%s4").unwrap();
    k.regs[s4].name = "UR4".into();
    (k, i0)
}

fn osrb(uniform_registers: u32) -> CtxBackConfig {
    osrb_shared(uniform_registers, OsrbConfig::default().shared_words)
}

/// OSRB with `uniform_registers` for the warp and `shared_words` of shared memory.
fn osrb_shared(uniform_registers: u32, shared_words: u32) -> CtxBackConfig {
    CtxBackConfig {
        osrb: Some(OsrbConfig {
            uniform_registers,
            shared_words,
            registers: true,
        }),
        ..CtxBackConfig::default()
    }
}

/// Instruction names of a kernel rewritten by OSRB: `Ik` as in the figure, `B` the backup copy.
fn osrb_name(o: &OsrbKernel, i0: u32, pc: InstId) -> String {
    match o.origin[pc.index()] {
        Some(orig) => format!("I{}", orig.0 - i0),
        None => "B".into(),
    }
}

/// Fig. 5 (b): OSRB copies S4 into an unused scalar register (the paper's S11; here the
/// first uniform register the kernel does not use, `UR1`) before I1 overwrites it. I4 then
/// flashes back to I0: the resume routine reloads the backup, copies S4 back, re-executes
/// I0 (V7) and I1 (S4), and V7 is no longer saved.
#[test]
fn fig5_scalar_backup_lets_i0_reexecute() {
    let (k, i0) = fig5_kernel();
    let (o, ctx) = backup_scalars(&k, &osrb(12));
    assert_eq!(o.backups.len(), 1, "{:?}", o.backups);
    let b = o.backups[0];
    assert_eq!(
        b.before,
        InstId(i0 + 1),
        "backed up just before I1 overwrites S4"
    );
    assert_eq!(reg(&o.kernel, b.scalar), "UR4");
    let BackupSlot::UnusedUniform(s11) = b.slot else {
        panic!("{:?}", b.slot)
    };
    assert_eq!(reg(&o.kernel, s11), "UR1");
    assert_eq!(o.origin[b.copy.index()], None);
    // The backup is an ordinary `mov` between I0 and I1.
    let copy = &o.kernel.insts[b.copy];
    assert!(matches!(copy.op, Op::Mov(_)));
    assert_eq!(copy.dsts[0], Some(s11));
    assert_eq!(osrb_name(&o, i0, InstId(b.copy.0 - 1)), "I0");
    assert_eq!(osrb_name(&o, i0, InstId(b.copy.0 + 1)), "I1");

    let i4 = InstId(b.copy.0 + 4);
    assert_eq!(osrb_name(&o, i0, i4), "I4");
    let fb = ctx.flashback(i4);
    assert_eq!(
        paper_named(&o.kernel, &|pc| osrb_name(&o, i0, pc), fb),
        "I4 <- I0 save[v2 v11@I2 UR1@B] pre[] resume[ld v2; ld UR1; cp B; I0; I1; ld v11; jump I3]"
    );
    // Two vector registers and the 4-byte backup, against three vector registers and S4.
    assert_eq!((fb.context.vector, fb.context.uniform), (2, 1));
    let plain = CtxBack::compute(&k, &CtxBackConfig::default());
    let before = plain.flashback(InstId(i0 + 4));
    assert_eq!((before.context.vector, before.context.uniform), (3, 1));
    assert!(fb.cost.preempt < before.cost.preempt);
}

/// Fig. 5 when the warp has no register to spare (§III-D: "CTXBack can also store the
/// backup into unused shared memory if there is no unused register"): the kernel's one
/// uniform register is S4 itself, the file has no other (`uniform_registers: 1`), and every
/// vector register is live over the backup period or written in it (V12 by I3). The backup
/// goes to the warp's first shared word, `st.shared [%warp_smem], S4`, and the resume routine
/// loads it back. Since the TB's shared memory survives the switch, nothing is saved for it:
/// I4 saves V2 and V11 only, against V2, V7, V11 and S4 without OSRB.
#[test]
fn fig5_scalar_backup_in_shared_memory_without_a_free_register() {
    let (k, i0) = fig5_kernel();
    let (o, ctx) = backup_scalars(&k, &osrb_shared(1, 8));
    assert_eq!(o.backups.len(), 1, "{:?}", o.backups);
    let b = o.backups[0];
    assert_eq!(b.before, InstId(i0 + 1));
    assert_eq!(b.slot, BackupSlot::Shared(0));
    assert_eq!(o.kernel.warp_smem, 4, "one word per warp");
    assert_eq!(
        o.kernel.insts[b.copy].as_warp_smem_store(),
        Some((0, b.scalar))
    );
    assert_eq!(reg(&o.kernel, b.scalar), "UR4");
    let i4 = InstId(b.copy.0 + 4);
    let fb = ctx.flashback(i4);
    assert_eq!(
        paper_named(&o.kernel, &|pc| osrb_name(&o, i0, pc), fb),
        "I4 <- I0 save[v2 v11@I2] pre[] resume[ld v2; cp B; I0; I1; ld v11; jump I3]"
    );
    assert_eq!((fb.context.vector, fb.context.uniform), (2, 0));
    // Without a shared word, the site finds no place and the kernel is unchanged.
    let (o, ctx) = backup_scalars(&k, &osrb_shared(1, 0));
    assert_eq!((o.backups.len(), o.unplaced), (0, 1));
    assert_eq!(ctx.flashback(InstId(i0 + 4)).context.words(), 4);
}

/// Two shared-memory backups in one word: the second (`c2`, of S5) overwrites the first's
/// (`c1`, of S4). A flashback whose window holds both must not copy S4 back from the word, as
/// it now holds S5; one whose window ends before `c2` may. (OSRB's placement never gives one
/// word to two backups a window could both span; the planner stays right regardless.)
#[test]
fn a_shared_backup_overwritten_in_the_window_is_not_copied_back() {
    let (mut k, i0) = figure_io(
        &["v2", "v7", "v11", "v12", "s4", "s5"],
        &["v2", "v11", "s4", "s5"],
        &["v2", "v11", "v12", "s4", "s5"],
        "
    add.u32 %v7, %v2, %s4;     // I0
    mov.u32 %v12, 0;           // I1: c1 = st.shared [%warp_smem], S4
    or.b32 %s4, %s4, 2;        // I2
    mov.u32 %v12, 0;           // I3: c2 = st.shared [%warp_smem], S5
    or.b32 %s5, %s5, 3;        // I4
    sub.u32 %v12, %v11, %v7;   // I5
",
    );
    let by_name = |name: &str| k.regs.ids().find(|&r| k.regs[r].name == name).unwrap();
    let (s4, s5) = (by_name("%s4"), by_name("%s5"));
    let (c1, c2) = (InstId(i0 + 1), InstId(i0 + 3));
    k.insts[c1] = kir::Inst::warp_smem_store(0, s4, k.insts[c1].span);
    k.insts[c2] = kir::Inst::warp_smem_store(0, s5, k.insts[c2].span);
    k.warp_smem = 4;
    let config = osrb(63);
    let copies_back_c1 = |i: u32| {
        CtxBack::candidates(&k, &config, InstId(i0 + i))
            .iter()
            .any(|fb| fb.resume.contains(&ResumeStep::CopyBack(c1)))
    };
    assert!(copies_back_c1(3), "before c2, S4 comes back from the word");
    for i in 4..=6 {
        assert!(!copies_back_c1(i), "I{i}: the word holds S5 by then");
    }
}

/// Fig. 6: reverting I4 at preemption recovers r2; re-executing I1 restores r1, which makes
/// I2 reversible at resume; the recovered r0 makes I0 re-executable. Saved: r0 and r2.
#[test]
fn fig6_chained_reverting() {
    let (k, i0) = figure(
        &["r0", "r1", "r2", "r3"],
        "
    xor.b32 %r3, %r0, 0x1;     // I0
    mul.lo.u32 %r1, %r2, 0x1;  // I1
    add.u32 %r0, %r0, %r1;     // I2
    mov.u32 %r1, 0x8;          // I3
    add.u32 %r2, %r2, %r1;     // I4
",
    );
    assert_eq!(
        best(&k, i0, 5, Condition::Reverting),
        "I5 <- I0 save[r0@I2 r2] pre[I4^-1] resume[ld r0; ld r2; I1; I2^-1; I0; jump I2]"
    );
    // Every instruction of the block is a flashback point of I5.
    assert_eq!(points(&k, i0, 5, Condition::Reverting).len(), 6);
}

/// §III-E: flashback points stay inside the basic block and the idempotent region: the
/// `bar.sync` before I0 ends every window.
#[test]
fn windows_stop_at_side_effects() {
    let (k, i0) = figure(&["r0", "r1", "r2", "r3"], FIG3);
    for pc in 0..k.insts.len() as u32 {
        for fb in CtxBack::candidates(&k, &CtxBackConfig::default(), InstId(pc)) {
            let (f, i) = (fb.point.0, fb.pc.0);
            assert!(f <= i);
            if i >= i0 {
                assert!(f >= i0, "pc{i} <- pc{f}");
            }
            let block = |p: u32| k.cfg.block_of[InstId(p).index()];
            assert_eq!(block(f), block(i));
        }
    }
}
