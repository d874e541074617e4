//! `%warp_smem` ([`kir::inst::Special::WarpSmem`]): each warp owns `Kernel::warp_smem` bytes
//! of its TB's shared memory, after the TB's own shared variables, that no other warp's
//! `%warp_smem` reaches. On-chip scalar register backup keeps its last-resort backups there
//! (papers/ji-ctxback §III-D), so two warps' words must never overlap, nor overlap the
//! kernel's shared variables. Checked in the functional core and the timing model, where warps
//! interleave: every warp stores its own value, all wait at a barrier, and every warp reads
//! its word back.

use gpu::config::GpuConfig;
use gpu::exec::{LaunchCtx, SharedLayout};
use gpu::memory::DeviceMemory;
use gpu::timing::{run_timed, TimingOptions};
use kir::inst::{Op, Operand, Space};
use kir::{Inst, Kernel};

const THREADS: u32 = 128;

/// The kernel, with its placeholder `[own+4]` accesses turned into `%warp_smem` ones.
fn kernel() -> Kernel {
    let src = r#".version 8.0
.target sm_70
.address_size 64
.visible .entry k(.param .u64 k_out)
{
    .shared .align 4 .b32 own[2];
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd0, [k_out];
    mov.u32 %r5, 5;
    st.shared.u32 [own], %r5;
    mov.u32 %r0, %warpid;
    mad.lo.u32 %r1, %r0, 7, 100;
    st.shared.u32 [own+4], %r1;
    bar.sync 0;
    ld.shared.u32 %r2, [own+4];
    ld.shared.u32 %r6, [own];
    mad.lo.u32 %r2, %r2, 1000, %r6;
    mov.u32 %r3, %tid.x;
    mul.wide.u32 %rd1, %r3, 4;
    add.s64 %rd2, %rd0, %rd1;
    st.global.u32 [%rd2], %r2;
    exit;
}"#;
    let module = kir::lower::lower_module(&ptx::parse(src).unwrap(), "t.ptx").unwrap();
    let mut k = module.kernels[kir::KernelId(0)].clone();
    let placeholders: Vec<_> = k
        .insts
        .iter()
        .filter(|(_, i)| match (i.op, i.srcs[0]) {
            (
                Op::St {
                    space: Space::Shared,
                    offset,
                    ..
                }
                | Op::Ld {
                    space: Space::Shared,
                    offset,
                    ..
                },
                Operand::Imm(a),
            ) => a as i64 + i64::from(offset) == 4,
            _ => false,
        })
        .map(|(pc, _)| pc)
        .collect();
    assert_eq!(placeholders.len(), 2, "the two `[own+4]` accesses");
    for pc in placeholders {
        let i = &k.insts[pc];
        k.insts[pc] = match i.op {
            Op::St { .. } => {
                let Operand::Reg(r) = i.srcs[1] else {
                    panic!("a register is stored")
                };
                Inst::warp_smem_store(0, r, i.span)
            }
            _ => Inst::warp_smem_load(i.dsts[0].unwrap(), 0, i.span),
        };
    }
    k.warp_smem = 4;
    k
}

/// Thread `t` of warp `w` must read `w`'s own value, and the kernel's variable intact.
fn expected() -> Vec<u8> {
    (0..THREADS)
        .flat_map(|t| ((t / 32 * 7 + 100) * 1000 + 5).to_le_bytes())
        .collect()
}

fn launch(k: &Kernel, source: &ptx::SourceFile, out: u64) -> LaunchCtx {
    let block = [THREADS, 1, 1];
    let layout = SharedLayout::of(k, block, 0);
    assert_eq!(layout.warp_base, 8, "after `own`");
    assert_eq!(layout.size, 8 + 4 * 4, "4 warps, one word each");
    let ctx = LaunchCtx::new(
        std::sync::Arc::new(k.clone()),
        std::sync::Arc::new(source.clone()),
        std::sync::Arc::new([]),
        [2, 1, 1],
        block,
        0,
        out.to_le_bytes().to_vec(),
        1,
        1,
    );
    assert_eq!(
        (ctx.smem_size, ctx.warp_smem_base),
        (layout.size, layout.warp_base)
    );
    ctx
}

#[test]
fn every_warp_reads_back_its_own_word_functional() {
    let k = kernel();
    let source = ptx::SourceFile::new("t.ptx", "");
    let mut mem = DeviceMemory::new();
    let out = mem.alloc(u64::from(THREADS) * 4);
    gpu::func::run(&launch(&k, &source, out), &mut mem, 1 << 20).expect("runs");
    let got = mem.read_bytes(out, u64::from(THREADS) * 4).unwrap();
    assert_eq!(got, expected());
}

#[test]
fn every_warp_reads_back_its_own_word_timed() {
    let k = kernel();
    let source = ptx::SourceFile::new("t.ptx", "");
    let mut mem = DeviceMemory::new();
    let out = mem.alloc(u64::from(THREADS) * 4);
    let gpu = GpuConfig::preset("gtx480").unwrap();
    run_timed(
        &launch(&k, &source, out),
        &mut mem,
        &gpu,
        &TimingOptions::default(),
        &mut |_| {},
    )
    .expect("runs");
    let got = mem.read_bytes(out, u64::from(THREADS) * 4).unwrap();
    assert_eq!(got, expected());
}
