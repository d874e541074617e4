//! The fixed description of the SM pipeline: which functional unit executes each operation
//! class, its dependent-issue latency and its initiation interval.
//!
//! Defaults are the GTX480 (Fermi) numbers of GPGPU-Sim 3.2.2's `GTX480` configuration, the
//! simulator papers/lin-lightweight (Table I) and papers/li-pep evaluated with:
//!
//! | class | latency | interval | GPGPU-Sim option (entry) |
//! | --- | --- | --- | --- |
//! | `alu` (int add/logic/compare/move/branch) | 4 | 1 | `ptx_opcode_latency_int` ADD = 4, `initiation_int` ADD = 1 |
//! | `imul` (int mul/mad/sad) | 5 | 2 | MAD latency 5; MUL initiation 2 (the larger of MUL and MAD) |
//! | `idiv` (int div/rem) | 145 | 8 | int DIV |
//! | `fp32` (f32/f16 add/mul/fma/min/max, f32 compares and conversions) | 4 | 1 | `ptx_opcode_latency_fp` ADD = 4, `initiation_fp` ADD = 1 |
//! | `fdiv` (f32 div) | 39 | 4 | fp DIV |
//! | `fp64` (f64 add/mul/fma, compares, conversions) | 8 | 8 | `ptx_opcode_latency_dp` ADD = 8, `initiation_dp` ADD = 8 |
//! | `ddiv` (f64 div/rcp/sqrt) | 330 | 130 | dp DIV |
//! | `sfu` (rcp, sqrt, rsqrt, sin, cos, ex2, lg2, tanh on f32) | 20 | 8 | assumption: Fermi has 4 SFUs per SM, so a 32-lane warp occupies them 8 cycles (NVIDIA Fermi white paper); latency as GPGPU-Sim's SFU default order of magnitude |
//!
//! Units: every warp scheduler owns one SP unit (Fermi's two 16-lane SP groups, one per
//! scheduler, each taking a warp per core cycle as GPGPU-Sim models it) that executes the
//! `alu`, `imul`, `fp32` and `fp64` classes; the SM has one SFU (transcendentals and all
//! divisions, as GPGPU-Sim 4 routes divisions) and one LD/ST unit shared by the schedulers.
//! The memory classes take their latencies from the memory system ([`memsys::MemConfig`]):
//! global/local/const accesses complete when `memsys` says so, shared-memory accesses take
//! `shared.latency + passes - 1` and hold the LD/ST unit `passes` cycles, parameter loads take
//! the constant cache's hit latency.
//!
//! **Tensor cores** ([`TensorSpec`], Volta and later; `None` before): one unit per warp
//! scheduler (sub-core), rated in multiply-adds per core cycle for each multiplicand type.
//! An `mma` of shape M×N×K holds its scheduler's unit `ceil(MNK / rate)` cycles and its
//! result is ready `latency` cycles later; a `wmma.mma` is two `mma.m16n8k16`. The rates are
//! the vendors' dense peak figures divided by SMs, sub-cores and clock (see the presets); a
//! type the preset's tensor cores do not support is an error when the kernel is loaded.
//! `ldmatrix`, `stmatrix`, `wmma.load`/`wmma.store` and `cp.async` are memory instructions:
//! every element's address goes to the coalescer (global) or the bank-conflict count
//! (shared); a `cp.async` is a global load that writes no register, and a warp at
//! `cp.async.wait_group n` waits until at most `n` of its committed groups have loads in
//! flight.
//!
//! **Front end** ([`FetchSpec`]): each warp has an instruction buffer of `ibuffer_entries`
//! instructions, filled by one fetch of that many sequential instructions through the SM's
//! instruction cache. As in GPGPU-Sim, a warp fetches only when its buffer is empty (it has
//! issued what the buffer held) or after its next PC left the sequence (a taken branch,
//! divergence or reconvergence flushes the buffer); the SM fetches for one warp per cycle.
//! GTX480 values are GPGPU-Sim 3.2.2's (`gpgpu_cache:il1 4:128:4`: 2 KB, 128 B lines,
//! 4-way; two-instruction buffers; one fetch per cycle); an i-cache miss costs a fixed
//! `miss_latency` (about the unloaded L2 hit latency of the preset's memory system) instead of
//! travelling through the memory system.
//!
//! **Operand collector** ([`PipelineSpec::register_banks`]): the register file has that many
//! single-ported banks (GPGPU-Sim GTX480: `gpgpu_num_reg_banks 16`, `reg_bank_use_warp_id 0`);
//! register `r` lives in bank `r mod banks`. An issued instruction reads each distinct source
//! register through its bank, one read per bank per cycle across the SM; reads that must wait
//! for a bank delay the instruction's result by as many cycles (conflict-free reads cost
//! nothing beyond the class latency, which already contains the operand-read stage). Banks
//! are indexed by the timed kernel's registers: physical ones, since the machine times the
//! kernel after register allocation (virtual ones with `TimingOptions::allocate` off).
//! Writebacks do not take bank ports, and memory instructions' address reads are charged to
//! the banks but do not delay the access.
//!
//! **Sub-cores** ([`PipelineSpec::sub_cores`], Volta and later: the SM is four partitions,
//! each with its own L0 instruction cache, fetch and register file, NVIDIA Tesla V100 white
//! paper): every scheduler has its own fetch unit and i-cache of the `fetch` description and
//! its own `register_banks` banks, and a warp whose next instruction reads a bank still busy
//! with an earlier instruction's read does not issue that cycle (the operand collector stalls
//! issue rather than letting reads queue without bound). Without it the SM has one fetch port,
//! one i-cache and one set of banks whose conflicts delay results (GPGPU-Sim's GTX480).

use kir::inst::{ArithOp, Inst, MbarrierOp, Op, Ty};
use kir::matrix::MmaElem;
use serde::{Deserialize, Serialize};

/// Latency and initiation interval of one operation class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpTiming {
    /// Core cycles from issue until a dependent instruction may issue.
    pub latency: u32,
    /// Core cycles the unit is busy before it accepts the next warp instruction.
    pub interval: u32,
}

const fn t(latency: u32, interval: u32) -> OpTiming {
    OpTiming { latency, interval }
}

/// The SM pipeline description. Every field has a default (the table in the module
/// documentation), so a TOML file may give only the fields it changes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PipelineSpec {
    pub alu: OpTiming,
    pub imul: OpTiming,
    pub idiv: OpTiming,
    pub fp32: OpTiming,
    pub fdiv: OpTiming,
    pub fp64: OpTiming,
    pub ddiv: OpTiming,
    pub sfu: OpTiming,
    /// Core cycles the LD/ST unit is busy per global/local/const/param instruction (shared
    /// accesses hold it one cycle per bank-conflict pass).
    pub ldst_interval: u32,
    /// Warps in the active set of the two-level scheduler (Narasiman et al., MICRO 2011;
    /// GPGPU-Sim `two_level_active:8`).
    pub two_level_active: u32,
    /// Instruction fetch and the instruction cache.
    pub fetch: FetchSpec,
    /// Single-ported register-file banks per SM read by the operand collector (at least 1);
    /// per scheduler with `sub_cores`.
    pub register_banks: u32,
    /// Each scheduler is a sub-core with its own fetch, i-cache and register file.
    pub sub_cores: bool,
    /// `.f16`, `.bf16`, `.f16x2` and `.bf16x2` arithmetic (the `fp32` class's timing unless
    /// a preset gives the half-precision units their own rate).
    pub fp16: OpTiming,
    /// The tensor cores, if the SM has them.
    pub tensor: Option<TensorSpec>,
}

/// One sub-core's tensor core: dense multiply-adds per core cycle for each multiplicand type
/// (0: the type is not supported), and the cycles from the end of its work to its result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TensorSpec {
    pub f16: u32,
    pub bf16: u32,
    pub tf32: u32,
    pub int8: u32,
    pub f64: u32,
    pub latency: u32,
}

impl Default for TensorSpec {
    fn default() -> Self {
        TensorSpec {
            f16: 0,
            bf16: 0,
            tf32: 0,
            int8: 0,
            f64: 0,
            latency: 16,
        }
    }
}

impl TensorSpec {
    /// Multiply-adds per cycle for multiplicands of type `e` (0 if unsupported).
    pub fn rate(&self, e: MmaElem) -> u32 {
        match e {
            MmaElem::F16 => self.f16,
            MmaElem::Bf16 => self.bf16,
            MmaElem::Tf32 => self.tf32,
            MmaElem::S8 | MmaElem::U8 => self.int8,
            MmaElem::F64 => self.f64,
            MmaElem::F32 | MmaElem::S32 => 0,
        }
    }

    /// Latency and interval of an `mma` instruction (`None` for any other, or a type the
    /// unit does not support).
    pub fn timing(&self, inst: &Inst) -> Option<OpTiming> {
        let Op::Mma { shape, a, .. } = inst.op else {
            return None;
        };
        let rate = self.rate(a);
        if rate == 0 {
            return None;
        }
        let fmas = u32::from(shape.m) * u32::from(shape.n) * u32::from(shape.k);
        let interval = fmas.div_ceil(rate);
        Some(t(interval + self.latency, interval))
    }
}

/// The front end: instruction buffers and the instruction cache (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FetchSpec {
    /// Bytes of one instruction in the i-cache (8 for the 64-bit SASS of Fermi to Maxwell,
    /// 16 from Volta on).
    pub inst_bytes: u32,
    /// Instructions one fetch brings into a warp's instruction buffer.
    pub ibuffer_entries: u32,
    /// Instruction cache per SM: bytes, line bytes and ways.
    pub icache_bytes: u32,
    pub icache_line_bytes: u32,
    pub icache_assoc: u32,
    /// Core cycles from the start of a fetch that hits until its instructions can issue
    /// (fetch and decode).
    pub hit_latency: u32,
    /// Extra core cycles of a fetch that misses the i-cache.
    pub miss_latency: u32,
}

impl Default for FetchSpec {
    fn default() -> Self {
        FetchSpec {
            inst_bytes: 8,
            ibuffer_entries: 2,
            icache_bytes: 2048,
            icache_line_bytes: 128,
            icache_assoc: 4,
            hit_latency: 2,
            miss_latency: 140,
        }
    }
}

impl Default for PipelineSpec {
    fn default() -> Self {
        PipelineSpec {
            alu: t(4, 1),
            imul: t(5, 2),
            idiv: t(145, 8),
            fp32: t(4, 1),
            fdiv: t(39, 4),
            fp64: t(8, 8),
            ddiv: t(330, 130),
            sfu: t(20, 8),
            ldst_interval: 1,
            two_level_active: 8,
            fetch: FetchSpec::default(),
            register_banks: 16,
            sub_cores: false,
            fp16: t(4, 1),
            tensor: None,
        }
    }
}

/// Execution units of an SM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// The issuing scheduler's SP unit.
    Sp,
    /// The SM's special-function unit.
    Sfu,
    /// The SM's load/store unit.
    LdSt,
    /// The issuing scheduler's tensor core.
    Tensor,
}

/// Operation classes, each with its own [`OpTiming`] (memory: see [`PipelineSpec`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpClass {
    Alu,
    IntMul,
    IntDiv,
    Fp32,
    /// Half-precision arithmetic (scalar and packed pairs).
    Fp16,
    Fp32Div,
    Fp64,
    Fp64Div,
    Sfu,
    /// `ld`, `st`, `atom`, `red`, and the matrix loads and stores and `cp.async`.
    Mem,
    /// `mma` (and the two halves of `wmma.mma`).
    Tensor,
}

impl OpClass {
    /// The class of an instruction, from its operation and types.
    pub fn of(inst: &Inst) -> OpClass {
        let float = |ty: Ty| matches!(ty, Ty::F16 | Ty::F16x2 | Ty::Bf16 | Ty::Bf16x2 | Ty::F32);
        let half = |ty: Ty| matches!(ty, Ty::F16 | Ty::F16x2 | Ty::Bf16 | Ty::Bf16x2);
        match inst.op {
            Op::Ld { .. } | Op::St { .. } | Op::Atom { .. } | Op::Red { .. } => OpClass::Mem,
            Op::WmmaLoad { .. }
            | Op::WmmaStore { .. }
            | Op::Ldmatrix { .. }
            | Op::Stmatrix { .. }
            | Op::CpAsync { .. }
            | Op::Tex { .. } => OpClass::Mem,
            Op::Mma { .. } => OpClass::Tensor,
            Op::Mbarrier {
                op: MbarrierOp::PendingCount,
                ..
            } => OpClass::Alu,
            Op::Mbarrier { .. } => OpClass::Mem,
            Op::CvtPack { .. } | Op::CvtTf32 { .. } | Op::CvtFp8 { .. } => OpClass::Fp32,
            Op::Arith { op, ty, .. } => {
                use ArithOp::*;
                if ty == Ty::F64 {
                    match op {
                        Div | Rcp | Sqrt | Rsqrt => OpClass::Fp64Div,
                        _ => OpClass::Fp64,
                    }
                } else if float(ty) {
                    match op {
                        Div => OpClass::Fp32Div,
                        Rcp | Sqrt | Rsqrt | Sin | Cos | Ex2 | Lg2 | Tanh => OpClass::Sfu,
                        _ if half(ty) => OpClass::Fp16,
                        _ => OpClass::Fp32,
                    }
                } else {
                    match op {
                        MulLo
                        | MulHi
                        | MulWide
                        | Mul24Lo
                        | Mul24Hi
                        | MadLo
                        | MadHi
                        | MadWide
                        | Mad24Lo
                        | Mad24Hi
                        | Sad
                        | Dp4a { .. }
                        | Dp2a { .. }
                        | MadC { .. } => OpClass::IntMul,
                        Div | Rem => OpClass::IntDiv,
                        _ => OpClass::Alu,
                    }
                }
            }
            Op::Setp { ty, .. } | Op::Testp { ty, .. } => Self::by_type(ty, float(ty)),
            Op::Set { sty, .. } => Self::by_type(sty, float(sty)),
            Op::Cvt { dty, sty, .. } => {
                if dty == Ty::F64 || sty == Ty::F64 {
                    OpClass::Fp64
                } else if float(dty) || float(sty) {
                    OpClass::Fp32
                } else {
                    OpClass::Alu
                }
            }
            _ => OpClass::Alu,
        }
    }

    fn by_type(ty: Ty, float: bool) -> OpClass {
        if ty == Ty::F64 {
            OpClass::Fp64
        } else if float {
            OpClass::Fp32
        } else {
            OpClass::Alu
        }
    }

    /// The unit that executes the class.
    pub fn unit(self) -> Unit {
        match self {
            OpClass::Alu | OpClass::IntMul | OpClass::Fp32 | OpClass::Fp16 | OpClass::Fp64 => {
                Unit::Sp
            }
            OpClass::IntDiv | OpClass::Fp32Div | OpClass::Fp64Div | OpClass::Sfu => Unit::Sfu,
            OpClass::Mem => Unit::LdSt,
            OpClass::Tensor => Unit::Tensor,
        }
    }
}

impl PipelineSpec {
    /// Latency and interval of a non-memory class (`Mem` gives the LD/ST interval and a zero
    /// latency: the memory path decides when its results are ready).
    pub fn timing(&self, class: OpClass) -> OpTiming {
        match class {
            OpClass::Alu => self.alu,
            OpClass::IntMul => self.imul,
            OpClass::IntDiv => self.idiv,
            OpClass::Fp32 => self.fp32,
            OpClass::Fp16 => self.fp16,
            OpClass::Fp32Div => self.fdiv,
            OpClass::Fp64 => self.fp64,
            OpClass::Fp64Div => self.ddiv,
            OpClass::Sfu => self.sfu,
            OpClass::Mem => t(0, self.ldst_interval),
            // Per instruction: `TensorSpec::timing` (a kernel with `mma` loads only where the
            // preset has tensor cores for its types).
            OpClass::Tensor => t(1, 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_toml_keeps_defaults_and_unknown_fields_fail() {
        let s: PipelineSpec = toml::from_str("alu = { latency = 6, interval = 1 }").unwrap();
        assert_eq!(s.alu, t(6, 1));
        assert_eq!(s.fp64, PipelineSpec::default().fp64);
        let e = toml::from_str::<PipelineSpec>("alu_latency = 6").unwrap_err();
        assert!(e.to_string().contains("alu_latency"), "{e}");
    }

    #[test]
    fn classes_follow_types() {
        let span = ptx::Span::new(0, 0);
        let arith = |op, ty| {
            OpClass::of(&Inst::new(
                Op::Arith {
                    op,
                    ty,
                    mode: Default::default(),
                },
                span,
            ))
        };
        assert_eq!(arith(ArithOp::Add, Ty::S32), OpClass::Alu);
        assert_eq!(arith(ArithOp::MadLo, Ty::S32), OpClass::IntMul);
        assert_eq!(arith(ArithOp::Div, Ty::U32), OpClass::IntDiv);
        assert_eq!(arith(ArithOp::Fma, Ty::F32), OpClass::Fp32);
        assert_eq!(arith(ArithOp::Fma, Ty::F16x2), OpClass::Fp16);
        assert_eq!(arith(ArithOp::Add, Ty::Bf16), OpClass::Fp16);
        assert_eq!(arith(ArithOp::Ex2, Ty::F16x2), OpClass::Sfu);
        assert_eq!(arith(ArithOp::Div, Ty::F32), OpClass::Fp32Div);
        assert_eq!(arith(ArithOp::Ex2, Ty::F32), OpClass::Sfu);
        assert_eq!(arith(ArithOp::Fma, Ty::F64), OpClass::Fp64);
        assert_eq!(arith(ArithOp::Sqrt, Ty::F64), OpClass::Fp64Div);
        // Every class's unit: the SP pipeline runs the simple arithmetic of every width,
        // the SFU the divisions and transcendentals.
        use OpClass as C;
        let units = [
            (C::Alu, Unit::Sp),
            (C::IntMul, Unit::Sp),
            (C::IntDiv, Unit::Sfu),
            (C::Fp32, Unit::Sp),
            (C::Fp16, Unit::Sp),
            (C::Fp32Div, Unit::Sfu),
            (C::Fp64, Unit::Sp),
            (C::Fp64Div, Unit::Sfu),
            (C::Sfu, Unit::Sfu),
            (C::Mem, Unit::LdSt),
            (C::Tensor, Unit::Tensor),
        ];
        for (class, unit) in units {
            assert_eq!(class.unit(), unit, "{class:?}");
        }
    }
}
