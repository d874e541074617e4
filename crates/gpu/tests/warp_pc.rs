//! `Warp::pc` names the instruction `step` executes next, also when the top of the SIMT stack
//! has reached its reconvergence point and is about to be popped.

use gpu::exec::{step, LaunchCtx, Step, TbView, Warp};
use gpu::memory::DeviceMemory;
use kir::InstId;

#[test]
fn pc_skips_entries_that_are_about_to_reconverge() {
    // Lanes 0-15 take the branch to T (one instruction, then the join); lanes 16-31 fall
    // through to F (two instructions).
    let src = r#".version 8.0
.target sm_70
.address_size 64
.visible .entry k()
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    mov.u32 %r1, %tid.x;
    setp.lt.u32 %p1, %r1, 16;
    @%p1 bra T;
    add.s32 %r2, %r1, 1;
    add.s32 %r2, %r2, 1;
    bra.uni J;
T:
    add.s32 %r2, %r1, 5;
J:
    add.s32 %r3, %r2, %r2;
    ret;
}"#;
    let file = ptx::SourceFile::new("t.ptx", src);
    let module = kir::lower::lower_module(&ptx::parse(src).unwrap(), "t.ptx").unwrap();
    let kernel = &module.kernels[kir::KernelId(0)];
    let ctx = LaunchCtx::new(
        std::sync::Arc::new(kernel.clone()),
        std::sync::Arc::new(file),
        std::sync::Arc::new([]),
        [1, 1, 1],
        [32, 1, 1],
        0,
        Vec::new(),
        1,
        1,
    );
    let mut shared = Vec::new();
    let mut tb = TbView {
        ctaid: [0, 0, 0],
        shared: &mut shared,
        sm: 0,
        clock: None,
        local_base: 0,
    };
    let mut mem = DeviceMemory::new();
    let mut warp = Warp::new(&ctx, 0);
    let join = InstId(7);
    assert_eq!(kernel.cfg.reconvergence[2], join);
    // Step until the taken side (pushed last, so run first) has reached the join: then the
    // top entry sits at its reconvergence PC, and the next instruction is the fall-through.
    loop {
        if warp.stack.last().map(|e| e.pc) == Some(join.0) && warp.stack.len() == 3 {
            break;
        }
        assert_eq!(
            step(&ctx, &mut tb, &mut warp, &mut mem).unwrap(),
            Step::Executed
        );
    }
    assert_eq!(
        warp.pc(),
        Some(InstId(3)),
        "the fall-through side runs next, not the join"
    );
    assert_eq!(warp.next_entry().unwrap().mask, 0xffff_0000);
    // And `step` agrees: it executes pc 3 with the upper half-warp.
    step(&ctx, &mut tb, &mut warp, &mut mem).unwrap();
    assert_eq!(warp.pc(), Some(InstId(4)));
}
