//! Kernel IR instructions.
//!
//! An instruction is an [`Op`] (the operation with its types and modifiers, fully decoded),
//! an optional guard predicate, up to four destination registers and up to four source
//! operands. Memory operands are split into a base operand (`srcs[0]`) and a byte offset held
//! in the op. Register values are held as `u64` bit patterns; an operation reads only the low
//! `ty.size()` bytes of each source and writes its result zero-extended to 64 bits (see
//! `Ty::mask`), so a 32-bit register never carries stale high bits.

use std::fmt;

use crate::ids::{GlobalId, InstId, Reg};
use crate::matrix::{Frag, MmaElem, MmaShape};
use ptx::Span;

/// The PTX fundamental types are the IR's types.
pub use ptx::ast::ScalarType as Ty;

/// IEEE rounding modes (`.rn .rz .rm .rp`); for float→int `cvt` the `.rni .rzi .rmi .rpi`
/// forms map to the same four.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Rounding {
    #[default]
    Nearest,
    Zero,
    Down,
    Up,
}

/// Floating-point modifiers of an arithmetic instruction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FloatMode {
    pub rounding: Rounding,
    /// `.ftz`: subnormal inputs and results are flushed to sign-preserving zero (f32 only).
    pub ftz: bool,
    /// `.sat`: the result is clamped to [0.0, 1.0] (NaN becomes 0.0).
    pub sat: bool,
    /// `.approx`: the hardware approximation (for `div`, `rcp`, `sqrt`, `rsqrt`, `sin`, `cos`,
    /// `ex2`, `lg2`, `tanh`). Without it the IEEE-rounded result is produced.
    pub approx: bool,
    /// `.relu` (half-precision `fma`): negative results become +0; NaN stays NaN.
    pub relu: bool,
}

/// Per-lane arithmetic and logic operations. Source operand count in brackets; all sources
/// and the result have the instruction's type unless noted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArithOp {
    /// [2] integer wrap-around or float add. `.sat` on s32 saturates.
    Add,
    /// [2]
    Sub,
    /// [2] float multiply.
    Mul,
    /// [2] integer: low half of the product.
    MulLo,
    /// [2] integer: high half of the double-width product.
    MulHi,
    /// [2] integer: full product; the result is twice the type's width (`mul.wide.s32` → 64).
    MulWide,
    /// [2] `mul24.lo`: low 32 bits of the 48-bit product of the low 24 bits of each source.
    Mul24Lo,
    /// [2] `mul24.hi`: high 32 bits of that 48-bit product.
    Mul24Hi,
    /// [3] integer `a*b+c`, low half.
    MadLo,
    /// [3] integer, high half of `a*b` plus `c`.
    MadHi,
    /// [3] `c` and the result are twice the type's width.
    MadWide,
    /// [3] `mad24.lo`.
    Mad24Lo,
    /// [3] `mad24.hi`.
    Mad24Hi,
    /// [3] float fused multiply-add (`fma`, and `mad` on floats, which is fused on sm_20+).
    Fma,
    /// [2] integer division truncating toward zero (division by zero gives all ones for
    /// unsigned, and is defined in [`ArithOp::Div`]'s implementation for signed); float
    /// division, IEEE or `.approx`/`.full`.
    Div,
    /// [2] integer remainder (sign of the dividend).
    Rem,
    /// [2] `min` (float: NaN-ignoring as PTX specifies).
    Min,
    /// [2]
    Max,
    /// [1]
    Abs,
    /// [1]
    Neg,
    /// [2] bitwise; on `.pred` logical.
    And,
    /// [2]
    Or,
    /// [2]
    Xor,
    /// [1] bitwise not; on `.pred` logical.
    Not,
    /// [1] `cnot`: 1 if the source is 0, else 0.
    CNot,
    /// [2] shift left; the shift amount (a u32) is clamped to the width.
    Shl,
    /// [2] shift right, arithmetic for signed types; amount clamped.
    Shr,
    /// [1] population count; the result is a u32 whatever the source width.
    Popc,
    /// [1] count leading zeros; result u32.
    Clz,
    /// [1] bit reverse.
    Brev,
    /// [3] bit-field extract `bfe d, a, pos, len` (pos and len are u32).
    Bfe,
    /// [4] bit-field insert `bfi d, f, b, pos, len`.
    Bfi,
    /// [3] byte permute `prmt.b32 d, a, b, c` in the given mode.
    Prmt(PrmtMode),
    /// [2 + carry_in] `add.cc`, `addc`, `addc.cc`: `a + b (+ CC.CF)`. The condition code's
    /// carry flag is an ordinary predicate register of the kernel (`%cc`): read as the last
    /// source when `carry_in`, written as the second destination when the instruction has
    /// `.cc`.
    AddC { carry_in: bool },
    /// [2 + carry_in] `sub.cc`, `subc`, `subc.cc`: `a - (b + CC.CF)`; the carry flag is the
    /// borrow.
    SubC { carry_in: bool },
    /// [3 + carry_in] `mad{c}.{lo,hi}{.cc}`: the low or high half of `a * b`, plus `c` (and
    /// CC.CF).
    MadC { hi: bool, carry_in: bool },
    /// [2 or 3] `min`/`max` with `.relu` (negative results become 0), `.NaN` (a NaN input
    /// gives the canonical NaN instead of the other input) or three inputs; the plain
    /// two-input forms stay `Min`/`Max`.
    MinMax {
        max: bool,
        relu: bool,
        nan: bool,
        three: bool,
    },
    /// [4] `lop3.b32 d, a, b, c, lut`: bit `i` of `d` is bit `4a_i + 2b_i + c_i` of `lut`.
    Lop3,
    /// [3] funnel shift `shf.{l,r}.{wrap,clamp}.b32 d, a, b, n` of the 64-bit `{b, a}`:
    /// left keeps the upper 32 bits, right the lower; `clamp` caps `n` at 32, else `n % 32`.
    Shf { left: bool, clamp: bool },
    /// [2] `bmsk.{wrap,clamp}.b32 d, pos, width`: `width` ones from bit `pos`.
    Bmsk { clamp: bool },
    /// [2] `szext.{wrap,clamp}.{s32,u32} d, a, n`: the low `n` bits of `a`, extended.
    Szext { clamp: bool },
    /// [1] `bfind{.shiftamt}`: the position of the most significant non-sign bit (u32), or
    /// all ones when there is none; `shiftamt` gives `width - 1 - position` instead.
    Bfind { shiftamt: bool },
    /// [3] `fns.b32 d, mask, base, offset`: the position of the `|offset|`-th set bit of
    /// `mask` from bit `base` upward (`offset > 0`) or downward (`< 0`); with `offset == 0`,
    /// `base` if that bit is set; all ones when there is none.
    Fns,
    /// [3] `dp4a.atype.btype d, a, b, c`: `c` plus the dot product of the four bytes of `a`
    /// and of `b`, each signed or not as its type says.
    Dp4a { a_signed: bool, b_signed: bool },
    /// [3] `dp2a.{lo,hi}.atype.btype d, a, b, c`: `c` plus the two 16-bit halves of `a` times
    /// bytes 0-1 (`lo`) or 2-3 (`hi`) of `b`.
    Dp2a {
        hi: bool,
        a_signed: bool,
        b_signed: bool,
    },
    /// [1] reciprocal.
    Rcp,
    /// [1]
    Sqrt,
    /// [1] reciprocal square root (always approximate in PTX).
    Rsqrt,
    /// [1] `sin.approx`.
    Sin,
    /// [1] `cos.approx`.
    Cos,
    /// [1] `ex2.approx`: 2^a.
    Ex2,
    /// [1] `lg2.approx`: log2(a).
    Lg2,
    /// [1] `tanh.approx`.
    Tanh,
    /// [2] `copysign d, a, b`: magnitude of `b`, sign of `a` (PTX operand order).
    Copysign,
    /// [3] sum of absolute differences `sad d, a, b, c` = |a-b| + c.
    Sad,
}

/// `prmt` modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PrmtMode {
    /// The default (no mode): four 4-bit selectors in `c`, each with a sign-replicate bit.
    Generic,
    F4e,
    B4e,
    Rc8,
    Ecl,
    Ecr,
    Rc16,
}

/// Comparison operators of `setp`, `set`, `slct`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// Unsigned comparisons on integer types (`lo ls hi hs`).
    Lo,
    Ls,
    Hi,
    Hs,
    /// Float: ordered (neither is NaN) / unordered (either is NaN).
    Num,
    Nan,
    /// Unordered float comparisons: true if either source is NaN or the relation holds.
    Equ,
    Neu,
    Ltu,
    Leu,
    Gtu,
    Geu,
}

/// The boolean combining operator of `setp.cmp.bool` / `set.cmp.bool`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BoolOp {
    And,
    Or,
    Xor,
}

/// `testp` properties.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TestpKind {
    Finite,
    Infinite,
    Number,
    NotANumber,
    Normal,
    Subnormal,
}

/// State spaces of memory instructions after lowering.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Space {
    Global,
    Shared,
    /// Per-thread memory: `.local` variables, spills and the `.param` variables of call sites.
    Local,
    /// The kernel's parameter buffer (read-only).
    Param,
    Const,
    /// A generic address, resolved to one of the windows at run time.
    Generic,
}

/// Atomic operations (`atom`, `red`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AtomOp {
    Add,
    Min,
    Max,
    /// `inc`: `old >= b ? 0 : old + 1` (unsigned).
    Inc,
    /// `dec`: `old == 0 || old > b ? b : old - 1` (unsigned).
    Dec,
    Exch,
    /// Compare-and-swap: `srcs[2]` is the new value, `srcs[1]` the compare value.
    Cas,
    And,
    Or,
    Xor,
}

/// `redux.sync` operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduxOp {
    Add,
    Min,
    Max,
    And,
    Or,
    Xor,
}

/// `mbarrier` operations. The object is 64 bits of shared memory holding the current phase's
/// parity, the expected and pending arrival counts and the pending transaction count; a
/// phase completes when no arrival and no transaction is pending.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MbarrierOp {
    /// `init [a], count`: phase 0, `count` arrivals expected.
    Init,
    /// `inval [a]`.
    Inval,
    /// `arrive{_drop}{.expect_tx}{.noComplete} state, [a]{, n}`: `srcs[1]` the arrival count
    /// (`count`, default 1) or, with `expect_tx`, the transaction bytes first added (one
    /// arrival); `drop` also lowers the expected count of later phases; `no_complete` may
    /// not complete the phase. `state` is the phase arrived on.
    Arrive {
        drop: bool,
        expect_tx: bool,
        no_complete: bool,
    },
    /// `expect_tx [a], n`: `n` more transaction bytes pending.
    ExpectTx,
    /// `complete_tx [a], n`: `n` transaction bytes done.
    CompleteTx,
    /// `test_wait`/`try_wait{.parity} p, [a], state|parity`: whether that phase completed.
    Wait { parity: bool },
    /// `pending_count d, state`: the pending count a `state` carries (no memory access).
    PendingCount,
    /// `cp.async.mbarrier.arrive{.noinc} [a]`: an arrival once the thread's earlier
    /// `cp.async`s complete (without `.noinc` the pending count is raised first, so the
    /// net count is unchanged).
    CpAsyncArrive { noinc: bool },
}

impl MbarrierOp {
    /// Whether the operation changes the barrier object (all but the waits and
    /// `pending_count`, which only read).
    pub fn writes(self) -> bool {
        !matches!(self, MbarrierOp::Wait { .. } | MbarrierOp::PendingCount)
    }
}

/// `vote` modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VoteMode {
    All,
    Any,
    Uni,
    Ballot,
}

/// `shfl` modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShflMode {
    Up,
    Down,
    Bfly,
    Idx,
}

/// Barrier flavours.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BarKind {
    /// `bar.sync` / `barrier.sync`: wait until the expected threads have arrived.
    Sync,
    /// `bar.arrive`: arrive without waiting.
    Arrive,
    /// `bar.red.popc.u32`: sync, and reduce a predicate over the participating threads.
    RedPopc,
    /// `bar.red.and.pred`.
    RedAnd,
    /// `bar.red.or.pred`.
    RedOr,
}

/// Special (read-only) registers. The dimension selector is 0, 1, 2 for x, y, z.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Special {
    Tid(u8),
    Ntid(u8),
    Ctaid(u8),
    Nctaid(u8),
    LaneId,
    WarpId,
    NWarpId,
    SmId,
    NSmId,
    GridId,
    Clock,
    Clock64,
    GlobalTimer,
    LanemaskEq,
    LanemaskLe,
    LanemaskLt,
    LanemaskGe,
    LanemaskGt,
    DynamicSmemSize,
    TotalSmemSize,
    /// `%envreg0` .. `%envreg31`: driver-defined values, all 0 here (no driver sets them).
    EnvReg(u8),
    /// The byte address, in the TB's shared memory, of this warp's own
    /// [`Kernel::warp_smem`](crate::Kernel::warp_smem) bytes. Not a PTX register: hardware
    /// support for mechanisms that keep per-warp state on chip without a register to address
    /// it (OSRB's shared-memory backups, papers/ji-ctxback §III-D).
    WarpSmem,
}

/// A source operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Operand {
    /// No operand (unused slot).
    #[default]
    None,
    Reg(Reg),
    /// An immediate, already encoded as the bits of the instruction's type (an f32 immediate
    /// holds the f32 bits).
    Imm(u64),
    Special(Special),
    /// The address of a module-scope `.global`/`.const` variable plus a byte offset; the
    /// loader decides where variables live, so this is resolved at run time.
    GlobalAddr(GlobalId, i64),
    /// A predicate register, negated (`!%p` as a source of `setp`/`selp`/`vote`).
    NotReg(Reg),
}

/// The operation of an instruction, fully decoded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    /// `mov d, a` (also `mov` of a symbol address, which lowers to an immediate or
    /// [`Operand::GlobalAddr`]).
    Mov(Ty),
    /// `mov.b64 d, {a, b}` / `mov.b32 d, {a, b}`: packs `srcs` (low part first) into `d`;
    /// `part` is the type of each part.
    Pack { part: Ty, count: u8 },
    /// `mov.b64 {a, b}, d`: splits `srcs[0]` into the destinations (low part first).
    Unpack { part: Ty, count: u8 },
    Arith {
        op: ArithOp,
        ty: Ty,
        mode: FloatMode,
    },
    /// `setp.cmp[.bool].ty p[|q], a, b[, c]`: `p = (a cmp b) bool c`, `q = !(a cmp b) bool c`.
    Setp {
        cmp: Cmp,
        combine: Option<BoolOp>,
        ty: Ty,
        ftz: bool,
    },
    /// `set.cmp[.bool].dty.sty d, a, b[, c]`: `d` is all ones (integer) or 1.0 (float) if true.
    Set {
        cmp: Cmp,
        combine: Option<BoolOp>,
        dty: Ty,
        sty: Ty,
        ftz: bool,
    },
    /// `selp.ty d, a, b, c`: `c ? a : b`, `c` a predicate.
    Selp(Ty),
    /// `slct.dty.cty d, a, b, c`: `c >= 0 ? a : b`, `c` of type `cty` (s32 or f32).
    Slct { dty: Ty, cty: Ty, ftz: bool },
    /// `cvt[.rnd][.ftz][.sat].dty.sty d, a`.
    Cvt {
        dty: Ty,
        sty: Ty,
        rounding: Option<Rounding>,
        ftz: bool,
        sat: bool,
    },
    /// `testp.kind.ty p, a`.
    Testp { kind: TestpKind, ty: Ty },
    /// `ld[.space].ty` / `ldu`: `vec` values into the destinations, from `srcs[0] + offset`.
    /// Sub-word loads are extended to `dst_bits` (sign-extended for signed types).
    Ld {
        space: Space,
        ty: Ty,
        vec: u8,
        offset: i32,
        dst_bits: u8,
        volatile: bool,
    },
    /// `st[.space].ty [srcs[0] + offset], srcs[1..=vec]`.
    St {
        space: Space,
        ty: Ty,
        vec: u8,
        offset: i32,
    },
    /// `atom.space.op.ty d, [srcs[0] + offset], srcs[1] (, srcs[2] for cas)`.
    Atom {
        space: Space,
        op: AtomOp,
        ty: Ty,
        offset: i32,
    },
    /// `red.space.op.ty [srcs[0] + offset], srcs[1]`: an atomic with no result.
    Red {
        space: Space,
        op: AtomOp,
        ty: Ty,
        offset: i32,
    },
    /// `cvta.space.size d, a` (to generic) or `cvta.to.space.size d, a` (from generic).
    Cvta {
        space: Space,
        to_generic: bool,
        ty: Ty,
    },
    /// `isspacep.space p, a`.
    IsSpace { space: Space },
    /// `vote[.sync].mode d, a[, membermask]`.
    Vote { mode: VoteMode },
    /// `shfl.sync.mode.b32 d[|p], a, b, c, membermask`.
    Shfl { mode: ShflMode },
    /// `activemask.b32 d`.
    Activemask,
    /// `redux.sync.op.type d, a, membermask`: `op` over `a` of the mask's lanes, to each.
    Redux { op: ReduxOp, ty: Ty },
    /// `match.{any,all}.sync.type d[|p], a, membermask`: `any` gives each lane the lanes of
    /// the mask holding its value; `all` gives the mask (and `p` true) when every lane holds
    /// the same value, else 0 (and false).
    Match { all: bool, ty: Ty },
    /// `elect.sync d|p, membermask`: `d` the lowest lane of the mask that executes it, `p`
    /// true in that lane only.
    Elect,
    /// `trap`: the kernel stops with an error naming the thread.
    Trap,
    /// `tex.geom.v4.dty.cty d, [a, c]` and, with `gather` = the component (0-3 for
    /// r, g, b, a), `tld4.comp.2d.v4.dty.f32 d, [a, c]`: a fetch from the texture object
    /// whose handle is `srcs[0]`, at the coordinates `srcs[1..]` (a layered geometry's layer
    /// index first); four 32-bit destinations.
    Tex {
        geom: TexGeom,
        dty: Ty,
        cty: Ty,
        gather: Option<u8>,
    },
    /// The end of an indirect branch's or call's dispatch chain (`lower::indirect`):
    /// reached only by a lane whose index or function address (`srcs[0]`) matched no
    /// possible target; the kernel stops with an error naming the thread and the value.
    UnmatchedTarget(IndirectKind),
    /// Barriers: `srcs[0]` the barrier id, `srcs[1]` the thread count (or `None` for all
    /// threads of the TB); `bar.red` has its predicate in `srcs[2]` and a destination.
    /// `pp` is set on a `bar.pp` (lin-lightweight §IV-A): a barrier that is also a
    /// preemption point, with the liveness vector of the point.
    Bar {
        kind: BarKind,
        pp: Option<LiveVector>,
    },
    /// `membar`, `fence`: ordering only (the functional core is sequentially consistent).
    Fence,
    /// Branch to `target`; divergent when guarded by a predicate that differs across the warp.
    Bra { target: InstId, uni: bool },
    /// `exit`, and `ret` from the kernel itself: the active threads finish.
    Exit,
    /// No operation (kept where lowering needed a placeholder, e.g. a label at the very end).
    Nop,
    /// `mma.sync.aligned.shape.row.col.dtype.atype.btype.ctype d, a, b, c`: the warp's
    /// matrix multiply-accumulate D = A·B + C. `srcs` hold A's registers, then B's, then C's
    /// (counts from [`crate::matrix::frag_regs`]); `dsts` D's. A `wmma.mma` lowers to two of
    /// these (one per 8-column half).
    Mma {
        shape: MmaShape,
        a: MmaElem,
        b: MmaElem,
        c: MmaElem,
        d: MmaElem,
        /// `.satfinite`: integer results saturate instead of wrapping.
        satfinite: bool,
    },
    /// One part of `wmma.load.{a,b,c}.sync.aligned.layout.shape.space.type`: registers
    /// `part * 4 ..` of the fragment, from `[srcs[0] + offset]` with the leading dimension
    /// in elements in `srcs[1]` ([`crate::matrix::wmma_layout`]).
    WmmaLoad {
        shape: MmaShape,
        frag: Frag,
        elem: MmaElem,
        row_major: bool,
        space: Space,
        offset: i32,
        part: u8,
    },
    /// One part of `wmma.store.d.sync.aligned.layout.shape.space.type`: `[srcs[0] +
    /// offset]`, leading dimension `srcs[1]`, the part's registers `srcs[2..]`.
    WmmaStore {
        shape: MmaShape,
        elem: MmaElem,
        row_major: bool,
        space: Space,
        offset: i32,
        part: u8,
    },
    /// `ldmatrix.sync.aligned.m8n8.xN{.trans}.space.b16 d, [srcs[0] + offset]`: `count` 8×8
    /// matrices of 16-bit elements, row addresses from lanes `8j..8j+8`
    /// ([`crate::matrix::ldmatrix_element`]).
    Ldmatrix {
        count: u8,
        trans: bool,
        space: Space,
        offset: i32,
    },
    /// `stmatrix.sync.aligned.m8n8.xN{.trans}.space.b16 [srcs[0] + offset], srcs[1..]`.
    Stmatrix {
        count: u8,
        trans: bool,
        space: Space,
        offset: i32,
    },
    /// `cp.async.{ca,cg}.shared.global [srcs[0] + dst_offset], [srcs[1] + src_offset],
    /// bytes{, srcs[2]}`: an asynchronous copy of `bytes` from global to shared memory;
    /// with `src_size`, only the first `srcs[2]` bytes are read and the rest zero-filled
    /// (`ignore_src`: `srcs[2]` is a predicate that, when true, reads nothing).
    CpAsync {
        bytes: u8,
        /// `.cg`: cached in L2 only (bypasses L1).
        bypass_l1: bool,
        dst_offset: i32,
        src_offset: i32,
        src_size: bool,
        ignore_src: bool,
    },
    /// `cvt.rnd{.relu}{.satfinite}.{f16x2,bf16x2}.f32 d, a, b`: `a` rounded into the upper
    /// half of `d`, `b` into the lower.
    CvtPack {
        dty: Ty,
        rounding: Rounding,
        relu: bool,
        satfinite: bool,
    },
    /// The 8-bit float conversions (PTX ISA §9.7.9.21, sm_89+), always round-to-nearest-even
    /// and, towards FP8, saturating to the largest finite value:
    /// `cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.f32 d, a, b` (`from_f16x2` false: `a` to the
    /// upper byte of the 16-bit `d`), `cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.f16x2 d, a`
    /// (`from_f16x2`), and `cvt.rn{.relu}.f16x2.{e4m3x2,e5m2x2} d, a` (`to_f16x2`).
    CvtFp8 {
        format: Fp8,
        to_f16x2: bool,
        from_f16x2: bool,
        relu: bool,
    },
    /// The `mbarrier` family on a barrier object in shared memory (`srcs[0] + offset`; PTX
    /// ISA §9.7.13.15). Operands after the address as [`MbarrierOp`] lists them.
    Mbarrier {
        op: MbarrierOp,
        space: Space,
        offset: i32,
    },
    /// `cvt.{rna,rn,rz}{.relu}{.satfinite}.tf32.f32 d, a`: `a` rounded to TensorFloat-32 (10
    /// mantissa bits), as an f32 bit pattern with the low 13 bits clear; `away` is `.rna`
    /// (ties away from zero).
    CvtTf32 {
        rounding: Rounding,
        away: bool,
        relu: bool,
        satfinite: bool,
    },
    /// `nanosleep.u32 t`: the warp sleeps `t` nanoseconds (`srcs[0]`, at most 1 ms; PTX
    /// allows anything up to 2 t). No effect on values.
    Nanosleep,
    /// `cp.async.commit_group`: the warp's `cp.async`s since the last commit become a group.
    CpAsyncCommit,
    /// `cp.async.wait_group n` (`all`: `cp.async.wait_all`, which also waits for
    /// uncommitted copies): the warp waits until at most `n` of its groups are pending.
    CpAsyncWait { groups: u8, all: bool },
    /// `pp`: a selective preemption point (lin-lightweight §IV-A) carrying the liveness
    /// vector of the registers live here. A no-op unless a preemption is pending.
    Pp { live: LiveVector },
    /// The dummy instruction after a `pp`/`bar.pp` that carries the divergent (SIMT-aware)
    /// liveness vector, used when the warp is diverged at the point (lin-lightweight §III-B).
    /// Always a no-op for execution.
    PpDivergent { live: LiveVector },
}

/// A liveness vector as encoded in a `pp` instruction (lin-lightweight §IV-A): one bit per
/// architectural register for the first 54 registers, and an overflow bit that means
/// "registers beyond the 54th are live too; save all of them".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LiveVector(pub u64);

impl LiveVector {
    /// Registers a `pp` instruction can name individually.
    pub const ENCODABLE: u32 = 54;
    /// The overflow bit.
    pub const OVERFLOW: u64 = 1 << 54;

    pub fn is_live(self, reg: u32) -> bool {
        if reg < Self::ENCODABLE {
            self.0 & (1 << reg) != 0
        } else {
            self.0 & Self::OVERFLOW != 0
        }
    }
}

/// An instruction's guard: `@p` or `@!p`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Guard {
    pub reg: Reg,
    pub negated: bool,
}

/// An 8-bit floating-point format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fp8 {
    /// 4 exponent bits (bias 7), 3 mantissa bits, no infinities; largest finite 448.
    E4m3,
    /// 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like; largest finite 57344.
    E5m2,
}

/// The geometry of a texture fetch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TexGeom {
    D1,
    D2,
    D3,
    /// A layer of a layered 1D texture.
    A1d,
    /// A layer of a layered 2D texture.
    A2d,
}

impl TexGeom {
    /// Dimensions of the coordinates (without the layer).
    pub fn dims(self) -> usize {
        match self {
            TexGeom::D1 | TexGeom::A1d => 1,
            TexGeom::D2 | TexGeom::A2d => 2,
            TexGeom::D3 => 3,
        }
    }

    pub fn layered(self) -> bool {
        matches!(self, TexGeom::A1d | TexGeom::A2d)
    }

    /// Elements of the coordinate vector as PTX writes it: a 3D or layered-2D vector has
    /// four, the last ignored.
    pub fn operands(self) -> usize {
        match self {
            TexGeom::D1 => 1,
            TexGeom::D2 | TexGeom::A1d => 2,
            TexGeom::D3 | TexGeom::A2d => 4,
        }
    }
}

/// What an [`Op::UnmatchedTarget`] ends: a `brx.idx` or an indirect `call`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndirectKind {
    Branch,
    Call,
}

/// Maximum destinations of one instruction (`ld.v4`).
pub const MAX_DSTS: usize = 4;
/// Maximum sources of one instruction (`mma.m16n8k16`: four A, two B and four C registers).
pub const MAX_SRCS: usize = 10;

/// One IR instruction.
#[derive(Clone, Debug, PartialEq)]
pub struct Inst {
    pub op: Op,
    pub guard: Option<Guard>,
    /// Destination registers; `None` for a sink `_` or an unused slot. Only the first
    /// `n_dsts` are meaningful.
    pub dsts: [Option<Reg>; MAX_DSTS],
    pub n_dsts: u8,
    pub srcs: [Operand; MAX_SRCS],
    pub n_srcs: u8,
    /// Where the instruction came from (for diagnostics).
    pub span: Span,
}

impl Inst {
    /// `selp.u32 g, 1, 0, p`: a predicate as 0/1 in a 32-bit register (predicate spills,
    /// context saves).
    pub fn pred_to_word(g: Reg, p: Reg, span: Span) -> Self {
        let mut i = Inst::new(Op::Selp(Ty::U32), span);
        i.dsts[0] = Some(g);
        i.n_dsts = 1;
        i.srcs[..3].copy_from_slice(&[Operand::Imm(1), Operand::Imm(0), Operand::Reg(p)]);
        i.n_srcs = 3;
        i
    }

    /// `setp.ne.u32 p, g, 0`: a predicate back from its 32-bit register.
    pub fn word_to_pred(p: Reg, g: Reg, span: Span) -> Self {
        let mut i = Inst::new(
            Op::Setp {
                cmp: Cmp::Ne,
                combine: None,
                ty: Ty::U32,
                ftz: false,
            },
            span,
        );
        i.dsts[0] = Some(p);
        i.n_dsts = 1;
        i.srcs[..2].copy_from_slice(&[Operand::Reg(g), Operand::Imm(0)]);
        i.n_srcs = 2;
        i
    }

    /// `st.shared.b32 [%warp_smem + offset], r`: a word into the warp's own shared memory
    /// ([`Special::WarpSmem`]).
    pub fn warp_smem_store(offset: i32, r: Reg, span: Span) -> Self {
        let mut i = Inst::new(
            Op::St {
                space: Space::Shared,
                ty: Ty::B32,
                vec: 1,
                offset,
            },
            span,
        );
        i.srcs[..2].copy_from_slice(&[Operand::Special(Special::WarpSmem), Operand::Reg(r)]);
        i.n_srcs = 2;
        i
    }

    /// `ld.shared.b32 r, [%warp_smem + offset]`: a word back from the warp's own shared
    /// memory.
    pub fn warp_smem_load(r: Reg, offset: i32, span: Span) -> Self {
        let mut i = Inst::new(
            Op::Ld {
                space: Space::Shared,
                ty: Ty::B32,
                vec: 1,
                offset,
                dst_bits: 32,
                volatile: false,
            },
            span,
        );
        i.dsts[0] = Some(r);
        i.n_dsts = 1;
        i.srcs[0] = Operand::Special(Special::WarpSmem);
        i.n_srcs = 1;
        i
    }

    /// `(offset, r)` if this is an unguarded [`Inst::warp_smem_store`] of one word: a store
    /// no other warp or TB can see.
    pub fn as_warp_smem_store(&self) -> Option<(i32, Reg)> {
        match (self.op, self.srcs[0], self.srcs[1]) {
            (
                Op::St {
                    space: Space::Shared,
                    ty,
                    vec: 1,
                    offset,
                },
                Operand::Special(Special::WarpSmem),
                Operand::Reg(r),
            ) if self.guard.is_none() && ty.bits() == 32 => Some((offset, r)),
            _ => None,
        }
    }

    pub fn new(op: Op, span: Span) -> Self {
        Inst {
            op,
            guard: None,
            dsts: [None; MAX_DSTS],
            n_dsts: 0,
            srcs: [Operand::None; MAX_SRCS],
            n_srcs: 0,
            span,
        }
    }

    pub fn dsts(&self) -> &[Option<Reg>] {
        &self.dsts[..self.n_dsts as usize]
    }

    pub fn srcs(&self) -> &[Operand] {
        &self.srcs[..self.n_srcs as usize]
    }

    /// Registers this instruction reads (sources, address bases and the guard).
    pub fn uses(&self) -> impl Iterator<Item = Reg> + '_ {
        self.srcs()
            .iter()
            .filter_map(|o| match *o {
                Operand::Reg(r) | Operand::NotReg(r) => Some(r),
                _ => None,
            })
            .chain(self.guard.map(|g| g.reg))
    }

    /// Registers this instruction writes.
    pub fn defs(&self) -> impl Iterator<Item = Reg> + '_ {
        self.dsts().iter().flatten().copied()
    }

    /// Whether control may leave this instruction other than by falling through.
    pub fn is_terminator(&self) -> bool {
        matches!(self.op, Op::Bra { .. } | Op::Exit)
    }
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::None => f.write_str("_"),
            Operand::Reg(r) => write!(f, "{r}"),
            Operand::NotReg(r) => write!(f, "!{r}"),
            Operand::Imm(v) => write!(f, "{v:#x}"),
            Operand::Special(s) => write!(f, "{s:?}"),
            Operand::GlobalAddr(g, off) => write!(f, "&{g}+{off}"),
        }
    }
}
