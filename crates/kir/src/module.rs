//! Kernels and modules of the IR.

use crate::cfg::Cfg;
use crate::ids::{GlobalId, Id, IdVec, InstId, KernelId, Reg};
use crate::inst::{Inst, Ty};
use ptx::Span;

/// Code address of a module's first function (`mov.u64 %rd, f` and call tables read it):
/// function `k` in declaration order is at `FUNCTION_ADDRESS_BASE + k *
/// FUNCTION_ADDRESS_STRIDE`. The window lies outside global memory and the generic windows
/// of shared, local and parameter memory, so a function pointer used as a data address
/// faults.
pub const FUNCTION_ADDRESS_BASE: u64 = 0x0000_7c00_0000_0000;
/// Distance between two functions' addresses.
pub const FUNCTION_ADDRESS_STRIDE: u64 = 0x100;

/// A lowered PTX module: its kernels and module-scope variables.
#[derive(Clone, Debug)]
pub struct Module {
    /// The file the module came from (for diagnostics).
    pub source_name: String,
    /// `.version`.
    pub version: (u32, u32),
    /// `.target` entries.
    pub target: Vec<String>,
    pub kernels: IdVec<KernelId, Kernel>,
    pub globals: IdVec<GlobalId, GlobalVar>,
    /// What lowering accepted but warns about (integer literals wrapped to their type), in
    /// source order.
    pub warnings: Vec<crate::lower::LowerWarning>,
}

impl Module {
    pub fn kernel(&self, name: &str) -> Option<(KernelId, &Kernel)> {
        self.kernels.iter().find(|(_, k)| k.name == name)
    }
}

/// Where a module-scope variable lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GlobalSpace {
    Global,
    Const,
}

/// A module-scope `.global` or `.const` variable.
#[derive(Clone, Debug)]
pub struct GlobalVar {
    pub name: String,
    pub space: GlobalSpace,
    pub size: u64,
    pub align: u32,
    /// Initial bytes (zeros when the variable has no initializer); `size` bytes long.
    pub init: Vec<u8>,
    /// Initializer entries holding the address of another variable: at `offset`, write the
    /// 64-bit (or 32-bit, per `width`) address of `target` plus `addend`.
    pub relocations: Vec<Relocation>,
    pub span: Span,
}

#[derive(Clone, Copy, Debug)]
pub struct Relocation {
    pub offset: u64,
    pub width: u8,
    pub target: GlobalId,
    pub addend: i64,
}

/// A kernel parameter in the parameter buffer.
#[derive(Clone, Debug)]
pub struct Param {
    pub name: String,
    pub ty: Ty,
    pub offset: u32,
    pub size: u32,
    pub align: u32,
}

/// A register of the kernel (virtual until register allocation).
#[derive(Clone, Debug)]
pub struct RegInfo {
    /// The PTX name (`%r12`); inlined callees get `callee::%r3`.
    pub name: String,
    pub ty: Ty,
}

/// Launch-shape directives.
#[derive(Clone, Debug, Default)]
pub struct LaunchBounds {
    pub max_ntid: Option<[u32; 3]>,
    pub req_ntid: Option<[u32; 3]>,
    pub min_ctas_per_sm: Option<u32>,
}

/// A lowered kernel (`.entry`): instructions in program order, with calls to `.func`s
/// inlined, so the CFG is the whole kernel.
#[derive(Clone, Debug)]
pub struct Kernel {
    pub name: String,
    pub params: Vec<Param>,
    /// Bytes of the parameter buffer.
    pub param_size: u32,
    pub regs: IdVec<Reg, RegInfo>,
    pub insts: IdVec<InstId, Inst>,
    /// Bytes of static `.shared` variables (module- and kernel-scope ones used by the kernel).
    pub static_smem: u32,
    /// Whether the kernel declares `.extern .shared` (dynamic shared memory, placed after
    /// the static variables at offset `static_smem`).
    pub uses_dynamic_smem: bool,
    /// Bytes of per-thread local memory (`.local` variables and call-site `.param` space).
    pub local_size: u32,
    /// Bytes of shared memory each warp owns, after the TB's static and dynamic shared
    /// memory and addressed through [`Special::WarpSmem`](crate::inst::Special::WarpSmem).
    /// 0 for kernels from PTX; on-chip scalar register backup (papers/ji-ctxback §III-D)
    /// keeps its last-resort backups there.
    pub warp_smem: u32,
    pub launch_bounds: LaunchBounds,
    pub cfg: Cfg,
    pub span: Span,
}

impl Kernel {
    /// Number of instructions (also one past the last program counter).
    pub fn len(&self) -> usize {
        self.insts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.insts.is_empty()
    }
}

/// A kernel with instructions inserted before some of its instructions
/// ([`Kernel::insert_before`]).
#[derive(Clone, Debug)]
pub struct Inserted {
    pub kernel: Kernel,
    /// For every old PC (and the old length), the new PC of the first instruction of its
    /// group: the first instruction inserted before it, else the instruction itself.
    pub group_start: Vec<InstId>,
    /// For every old PC (and the old length), the new PC of the old instruction itself.
    pub new_pc: Vec<InstId>,
}

impl Kernel {
    /// A copy of the kernel with each `(pc, inst)` of `inserts` placed just before old
    /// instruction `pc` (several before the same `pc` keep their order; `pc` may be the
    /// kernel's length, to append). Branches to `pc` go to the first instruction inserted
    /// before it, so inserted code runs on every path into `pc`; the CFG is rebuilt.
    ///
    /// # Panics
    ///
    /// If an insertion point lies beyond the kernel's length.
    pub fn insert_before(&self, inserts: &[(InstId, Inst)]) -> Inserted {
        let n = self.insts.len();
        let mut before: Vec<Vec<&Inst>> = vec![Vec::new(); n + 1];
        for (pc, inst) in inserts {
            assert!(pc.index() <= n, "insertion at {pc} beyond {n} instructions");
            before[pc.index()].push(inst);
        }
        let mut insts: IdVec<InstId, Inst> = IdVec::new();
        let mut group_start = Vec::with_capacity(n + 1);
        let mut new_pc = Vec::with_capacity(n + 1);
        for (pc, group) in before.iter().enumerate() {
            group_start.push(InstId::new(insts.len()));
            for &inst in group {
                insts.push(inst.clone());
            }
            new_pc.push(InstId::new(insts.len()));
            if pc < n {
                insts.push(self.insts[InstId::new(pc)].clone());
            }
        }
        for pc in insts.ids() {
            if let crate::inst::Op::Bra { ref mut target, .. } = insts[pc].op {
                *target = group_start[target.index()];
            }
        }
        let mut kernel = self.clone();
        kernel.cfg = Cfg::build(&insts);
        kernel.insts = insts;
        Inserted {
            kernel,
            group_start,
            new_pc,
        }
    }
}
