//! Kernels and modules of the IR.

use crate::cfg::Cfg;
use crate::ids::{GlobalId, IdVec, InstId, KernelId, Reg};
use crate::inst::{Inst, Ty};
use ptx::Span;

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
