//! Instruction decoding: opcode + modifiers + operands → [`Op`] and resolved operands.
//!
//! Decoding is strict: every modifier must be understood (cache hints and memory-order
//! qualifiers that do not change a sequentially consistent functional result are accepted
//! explicitly), and anything left over is an [`LowerError::UnsupportedModifier`].

use ptx::ast::{self, FloatLit, OperandKind as K};
use ptx::Span;

use super::tensor;
use super::typecheck::{self, types, Rule};
use super::{KernelLowerer, LowerError, Sym};
use crate::ids::{InstId, Reg};
use crate::inst::{
    ArithOp, AtomOp, BarKind, BoolOp, Cmp, FloatMode, Inst, Op, Operand, PrmtMode, ReduxOp,
    Rounding, ShflMode, Space, Special, TestpKind, Ty, VoteMode, MAX_DSTS,
};

/// Bits of an integer literal for an operand of type `ty` (floats take the numeric value).
pub(super) fn int_literal_bits(v: i128, ty: Ty) -> u64 {
    match ty {
        Ty::F32 => (v as f32).to_bits() as u64,
        Ty::F64 => (v as f64).to_bits(),
        _ => (v as u64) & ty.mask(),
    }
}

/// Bits of a float literal for an operand of type `ty`.
pub(super) fn float_literal_bits(f: FloatLit, ty: Ty) -> u64 {
    match (f, ty) {
        (FloatLit::F32(b), Ty::F64) => (f32::from_bits(b) as f64).to_bits(),
        (FloatLit::F32(b), _) => b as u64,
        (FloatLit::F64(b), Ty::F32) => (f64::from_bits(b) as f32).to_bits() as u64,
        (FloatLit::F64(b), _) => b,
    }
}

/// The double-width type of `mul.wide` / `mad.wide` results.
fn wide(ty: Ty) -> Ty {
    match ty {
        Ty::S16 => Ty::S32,
        Ty::U16 => Ty::U32,
        Ty::S32 => Ty::S64,
        Ty::U32 => Ty::U64,
        Ty::B16 => Ty::B32,
        Ty::B32 => Ty::B64,
        t => t,
    }
}

/// Number of source operands of an arithmetic op.
pub fn arity(op: ArithOp) -> usize {
    use ArithOp::*;
    match op {
        Abs
        | Neg
        | Not
        | CNot
        | Popc
        | Clz
        | Brev
        | Rcp
        | Sqrt
        | Rsqrt
        | Sin
        | Cos
        | Ex2
        | Lg2
        | Tanh
        | Bfind { .. } => 1,
        Fns => 3,
        Add
        | Sub
        | Mul
        | MulLo
        | MulHi
        | MulWide
        | Mul24Lo
        | Mul24Hi
        | Div
        | Rem
        | Min
        | Max
        | And
        | Or
        | Xor
        | Shl
        | Shr
        | Copysign
        | Bmsk { .. }
        | Szext { .. } => 2,
        AddC { carry_in } | SubC { carry_in } => 2 + carry_in as usize,
        MinMax { three, .. } => 2 + three as usize,
        MadC { carry_in, .. } => 3 + carry_in as usize,
        MadLo
        | MadHi
        | MadWide
        | Mad24Lo
        | Mad24Hi
        | Fma
        | Bfe
        | Prmt(_)
        | Sad
        | Shf { .. }
        | Dp4a { .. }
        | Dp2a { .. } => 3,
        Bfi | Lop3 => 4,
    }
}

/// Tracks which modifiers of an instruction have been understood.
pub(super) struct Mods<'i> {
    inst: &'i ast::Instruction,
    used: Vec<bool>,
}

impl<'i> Mods<'i> {
    pub(super) fn new(inst: &'i ast::Instruction) -> Self {
        Mods {
            inst,
            used: vec![false; inst.modifiers.len()],
        }
    }

    /// Consumes the modifier `name` if present.
    pub(super) fn has(&mut self, name: &str) -> bool {
        self.one_of(&[(name, ())]).is_some()
    }

    /// Consumes the first not-yet-used modifier found in `table`.
    pub(super) fn one_of<T: Copy>(&mut self, table: &[(&str, T)]) -> Option<T> {
        for (i, m) in self.inst.modifiers.iter().enumerate() {
            if self.used[i] {
                continue;
            }
            if let Some((_, v)) = table.iter().find(|(n, _)| *n == m.value) {
                self.used[i] = true;
                return Some(*v);
            }
        }
        None
    }

    /// Consumes every modifier in `names` (qualifiers with no functional effect).
    pub(super) fn accept(&mut self, names: &[&str]) {
        for (i, m) in self.inst.modifiers.iter().enumerate() {
            if names.contains(&m.value.as_str()) {
                self.used[i] = true;
            }
        }
    }

    /// Consumes the next type modifier, with its span.
    fn ty(&mut self) -> Option<(Ty, Span)> {
        for (i, m) in self.inst.modifiers.iter().enumerate() {
            if !self.used[i] {
                if let Some(t) = Ty::from_name(&m.value) {
                    self.used[i] = true;
                    return Some((t, m.span));
                }
            }
        }
        None
    }

    fn need_ty_spanned(&mut self) -> Result<(Ty, Span), LowerError> {
        self.ty()
            .ok_or_else(|| self.missing("a type such as `.u32`"))
    }

    /// Consumes the next type modifier, which must be one of `allowed`.
    pub(super) fn need_ty(&mut self, allowed: &[Ty]) -> Result<Ty, LowerError> {
        let (t, span) = self.need_ty_spanned()?;
        check_type(self.inst, t, allowed, span)?;
        Ok(t)
    }

    /// Whether a rounding modifier (`.rn` … `.rp`, or the integer `.rni` … `.rpi`) is written.
    fn has_rounding(&self) -> bool {
        self.inst.modifiers.iter().any(|m| {
            matches!(
                m.value.as_str(),
                "rn" | "rz" | "rm" | "rp" | "rni" | "rzi" | "rmi" | "rpi"
            )
        })
    }

    fn written(&self, name: &str) -> bool {
        self.inst.modifiers.iter().any(|m| m.value == name)
    }

    pub(super) fn missing(&self, what: &'static str) -> LowerError {
        LowerError::MissingModifier {
            inst: self.inst.opcode.value.clone(),
            what,
            span: self.inst.span,
        }
    }

    fn rounding(&mut self) -> Option<Rounding> {
        self.one_of(&[
            ("rn", Rounding::Nearest),
            ("rz", Rounding::Zero),
            ("rm", Rounding::Down),
            ("rp", Rounding::Up),
        ])
    }

    fn float_mode(&mut self) -> FloatMode {
        let rounding = self.rounding().unwrap_or_default();
        let ftz = self.has("ftz");
        let sat = self.has("sat");
        let approx = self.has("approx") | self.has("full");
        // `.relu` exists on half-precision `fma` only (checked with the type).
        let relu = self.written("relu") && self.inst.opcode.value == "fma" && self.has("relu");
        FloatMode {
            rounding,
            ftz,
            sat,
            approx,
            relu,
        }
    }

    pub(super) fn finish(self) -> Result<(), LowerError> {
        match self.used.iter().position(|u| !u) {
            None => Ok(()),
            Some(i) => Err(LowerError::UnsupportedModifier {
                inst: self.inst.opcode.value.clone(),
                modifier: self.inst.modifiers[i].value.clone(),
                span: self.inst.modifiers[i].span,
            }),
        }
    }
}

const CACHE_HINTS: &[&str] = &["ca", "cg", "cs", "lu", "cv", "wb", "wt", "nc"];

/// Eviction-priority and prefetch-size hints on loads, stores and prefetches (PTX ISA 7.4+).
/// Accepted with no effect: the cache model has no eviction priorities, and a line is its
/// own fill size. `.L2::cache_hint` also takes a policy operand, read and ignored.
const EVICTION_HINTS: &[&str] = &[
    "L1::evict_normal",
    "L1::evict_unchanged",
    "L1::evict_first",
    "L1::evict_last",
    "L1::no_allocate",
    "L2::evict_normal",
    "L2::evict_first",
    "L2::evict_last",
    "L2::evict_unchanged",
    "L2::64B",
    "L2::128B",
    "L2::256B",
];
const MEMORY_ORDER: &[&str] = &[
    "relaxed", "acquire", "release", "acq_rel", "weak", "sc", "cta", "gpu", "sys", "cluster",
];

const SPACES: &[(&str, Space)] = &[
    ("global", Space::Global),
    ("shared", Space::Shared),
    ("local", Space::Local),
    ("param", Space::Param),
    ("const", Space::Const),
];

const CMPS: &[(&str, Cmp)] = &[
    ("eq", Cmp::Eq),
    ("ne", Cmp::Ne),
    ("lt", Cmp::Lt),
    ("le", Cmp::Le),
    ("gt", Cmp::Gt),
    ("ge", Cmp::Ge),
    ("lo", Cmp::Lo),
    ("ls", Cmp::Ls),
    ("hi", Cmp::Hi),
    ("hs", Cmp::Hs),
    ("num", Cmp::Num),
    ("nan", Cmp::Nan),
    ("equ", Cmp::Equ),
    ("neu", Cmp::Neu),
    ("ltu", Cmp::Ltu),
    ("leu", Cmp::Leu),
    ("gtu", Cmp::Gtu),
    ("geu", Cmp::Geu),
];

const BOOL_OPS: &[(&str, BoolOp)] = &[
    ("and", BoolOp::And),
    ("or", BoolOp::Or),
    ("xor", BoolOp::Xor),
];

impl<'a> KernelLowerer<'a> {
    pub(super) fn instruction(&mut self, i: &'a ast::Instruction) -> Result<(), LowerError> {
        let name = i.opcode.value.as_str();
        if name == "call" {
            return self.call(i);
        }
        let guard = match &i.guard {
            None => None,
            Some(g) => match self.lookup(&g.pred.value) {
                // A guard is a predicate (PTX ISA §9.7.1: `@{!}p`, p a `.pred` register);
                // ptxas rejects any other register.
                Some(Sym::Reg(r)) if self.regs[r].ty != Ty::Pred => {
                    return Err(LowerError::Invalid {
                        what: format!(
                            "the guard `{}` is a .{} register; a guard must be a .pred register",
                            g.pred.value,
                            typecheck::name(self.regs[r].ty)
                        ),
                        span: g.pred.span,
                    })
                }
                Some(Sym::Reg(r)) => Some(crate::inst::Guard {
                    reg: r,
                    negated: g.negated,
                }),
                _ => {
                    return Err(LowerError::UnknownIdentifier {
                        name: g.pred.value.clone(),
                        span: g.pred.span,
                    })
                }
            },
        };
        if name == "brx" {
            return self.brx(i, guard);
        }
        let mut m = Mods::new(i);
        // Carry chains read and write the condition code's carry flag, which lives in a
        // predicate register of the kernel, made on first use.
        let carry = matches!(name, "addc" | "subc" | "madc")
            || (matches!(name, "add" | "sub" | "mad")
                && i.modifiers.iter().any(|x| x.value == "cc"));
        if carry && self.cc.is_none() {
            self.cc = Some(self.regs.push(crate::module::RegInfo {
                name: "%cc".to_string(),
                ty: Ty::Pred,
            }));
        }
        if tensor::handles(i) {
            let insts = self.tensor(i, &mut m)?;
            m.finish()?;
            for mut inst in insts {
                inst.guard = guard;
                self.push(inst);
            }
            return Ok(());
        }
        let mut inst = match name {
            _ if carry => self.carry(i, &mut m)?,
            "min" | "max"
                if i.operands.len() == 4
                    || i.modifiers
                        .iter()
                        .any(|x| x.value == "relu" || x.value == "NaN") =>
            {
                self.min_max(i, &mut m)?
            }
            "mov" => self.mov(i, &mut m)?,
            "add" | "sub" | "mul" | "mad" | "mul24" | "mad24" | "div" | "rem" | "min" | "max"
            | "abs" | "neg" | "and" | "or" | "xor" | "not" | "cnot" | "shl" | "shr" | "popc"
            | "clz" | "brev" | "bfe" | "bfi" | "prmt" | "rcp" | "sqrt" | "rsqrt" | "sin"
            | "cos" | "ex2" | "lg2" | "tanh" | "copysign" | "sad" | "fma" => {
                self.arith(i, &mut m)?
            }
            "tex" | "tld4" => self.tex(i, &mut m)?,
            "lop3" | "shf" | "bmsk" | "szext" | "bfind" | "fns" | "dp4a" | "dp2a" => {
                self.bit_op(i, &mut m)?
            }
            "setp" => self.setp(i, &mut m)?,
            "set" => self.set(i, &mut m)?,
            "selp" => {
                let ty = m.need_ty(types::SELP)?;
                self.simple(i, Op::Selp(ty), Some(ty), &[ty, ty, Ty::Pred], Rule::Exact)?
            }
            "slct" => {
                let ftz = m.has("ftz");
                let dty = m.need_ty(types::SELP)?;
                let cty = m.need_ty(types::SLCT_C)?;
                self.simple(
                    i,
                    Op::Slct { dty, cty, ftz },
                    Some(dty),
                    &[dty, dty, cty],
                    Rule::Exact,
                )?
            }
            "cvt" => {
                let rounding = m.one_of(&[
                    ("rn", Rounding::Nearest),
                    ("rz", Rounding::Zero),
                    ("rm", Rounding::Down),
                    ("rp", Rounding::Up),
                    ("rni", Rounding::Nearest),
                    ("rzi", Rounding::Zero),
                    ("rmi", Rounding::Down),
                    ("rpi", Rounding::Up),
                ]);
                let ftz = m.has("ftz");
                let sat = m.has("sat");
                let dty = m.need_ty(types::CVT)?;
                let sty = m.need_ty(types::CVT)?;
                // Float results other than exact widenings, and integer results of floats,
                // must say how they round.
                let rounds = match (dty.is_float(), sty.is_float()) {
                    (true, true) => dty.size() < sty.size(),
                    (true, false) | (false, true) => true,
                    (false, false) => false,
                };
                if rounds && rounding.is_none() {
                    return Err(m.missing("a rounding modifier such as `.rn` or `.rzi`"));
                }
                self.simple(
                    i,
                    Op::Cvt {
                        dty,
                        sty,
                        rounding,
                        ftz,
                        sat,
                    },
                    Some(dty),
                    &[sty],
                    Rule::Relaxed,
                )?
            }
            "cvta" => {
                let to = m.has("to");
                let space = m.one_of(SPACES).ok_or_else(|| m.missing("a state space"))?;
                let ty = m.need_ty(types::CVTA)?;
                self.simple(
                    i,
                    Op::Cvta {
                        space,
                        to_generic: !to,
                        ty,
                    },
                    Some(ty),
                    &[ty],
                    Rule::Exact,
                )?
            }
            "isspacep" => {
                let space = m.one_of(SPACES).ok_or_else(|| m.missing("a state space"))?;
                // The address may be a 32- or 64-bit register.
                let aty = match &i.operands.get(1).map(|o| &o.kind) {
                    Some(K::Ident { name, .. }) => match self.lookup(name) {
                        Some(Sym::Reg(r)) if self.regs[r].ty.size() == 4 => Ty::U32,
                        _ => Ty::U64,
                    },
                    _ => Ty::U64,
                };
                self.simple(
                    i,
                    Op::IsSpace { space },
                    Some(Ty::Pred),
                    &[aty],
                    Rule::Exact,
                )?
            }
            "testp" => {
                let kind = m
                    .one_of(&[
                        ("finite", TestpKind::Finite),
                        ("infinite", TestpKind::Infinite),
                        ("number", TestpKind::Number),
                        ("notanumber", TestpKind::NotANumber),
                        ("normal", TestpKind::Normal),
                        ("subnormal", TestpKind::Subnormal),
                    ])
                    .ok_or_else(|| m.missing("a property such as `.finite`"))?;
                let ty = m.need_ty(types::F32_64)?;
                self.simple(
                    i,
                    Op::Testp { kind, ty },
                    Some(Ty::Pred),
                    &[ty],
                    Rule::Exact,
                )?
            }
            "ld" | "ldu" | "st" => self.ld_st(i, &mut m)?,
            "atom" | "red" => self.atom(i, &mut m)?,
            "vote" => {
                if !m.has("sync") && self.ctx.sync_required {
                    return Err(m.missing("`.sync` (sm_70 and later)"));
                }
                let mode = m
                    .one_of(&[
                        ("all", VoteMode::All),
                        ("any", VoteMode::Any),
                        ("uni", VoteMode::Uni),
                        ("ballot", VoteMode::Ballot),
                    ])
                    .ok_or_else(|| m.missing("a mode such as `.ballot`"))?;
                let ty = if mode == VoteMode::Ballot {
                    m.need_ty(types::ONLY_B32)?
                } else {
                    m.need_ty(types::PRED)?
                };
                self.with_optional_mask(i, Op::Vote { mode }, ty, &[Ty::Pred], 2)?
            }
            "redux" => {
                if !m.has("sync") {
                    return Err(m.missing("`.sync`"));
                }
                let op = m
                    .one_of(&[
                        ("add", ReduxOp::Add),
                        ("min", ReduxOp::Min),
                        ("max", ReduxOp::Max),
                        ("and", ReduxOp::And),
                        ("or", ReduxOp::Or),
                        ("xor", ReduxOp::Xor),
                    ])
                    .ok_or_else(|| m.missing("an operation such as `.add`"))?;
                let ty = match op {
                    ReduxOp::Add | ReduxOp::Min | ReduxOp::Max => m.need_ty(&[Ty::U32, Ty::S32])?,
                    _ => m.need_ty(types::ONLY_B32)?,
                };
                if i.operands.len() != 3 {
                    return Err(count_error(i, "3"));
                }
                self.with_optional_mask(i, Op::Redux { op, ty }, ty, &[ty], 2)?
            }
            "match" => {
                if !m.has("sync") {
                    return Err(m.missing("`.sync`"));
                }
                let all = m
                    .one_of(&[("any", false), ("all", true)])
                    .ok_or_else(|| m.missing("`.any` or `.all`"))?;
                let ty = m.need_ty(&[Ty::B32, Ty::B64])?;
                if i.operands.len() != 3 {
                    return Err(count_error(i, "3"));
                }
                self.with_optional_mask(i, Op::Match { all, ty }, Ty::B32, &[ty], 2)?
            }
            "elect" => {
                if !m.has("sync") {
                    return Err(m.missing("`.sync`"));
                }
                if !matches!(i.operands.first().map(|o| &o.kind), Some(K::PredPair(..))) {
                    return Err(bad(i, "a destination pair `d|p`", i.span));
                }
                self.with_optional_mask(i, Op::Elect, Ty::U32, &[], 1)?
            }
            "trap" => self.simple(i, Op::Trap, None, &[], Rule::Exact)?,
            "shfl" => {
                if !m.has("sync") && self.ctx.sync_required {
                    return Err(m.missing("`.sync` (sm_70 and later)"));
                }
                let mode = m
                    .one_of(&[
                        ("up", ShflMode::Up),
                        ("down", ShflMode::Down),
                        ("bfly", ShflMode::Bfly),
                        ("idx", ShflMode::Idx),
                    ])
                    .ok_or_else(|| m.missing("a mode such as `.bfly`"))?;
                m.need_ty(types::ONLY_B32)?;
                self.with_optional_mask(
                    i,
                    Op::Shfl { mode },
                    Ty::B32,
                    &[Ty::B32, Ty::U32, Ty::U32],
                    4,
                )?
            }
            "activemask" => {
                m.need_ty(types::ONLY_B32)?;
                self.simple(i, Op::Activemask, Some(Ty::B32), &[], Rule::Exact)?
            }
            "bar" | "barrier" => self.barrier(i, &mut m)?,
            "membar" | "fence" => {
                // `membar` names its level; `fence` its scope, except the proxy fences.
                let (levels, what): (&[&str], _) = if name == "membar" {
                    (&["cta", "gl", "sys"], "a level (`.cta`, `.gl` or `.sys`)")
                } else {
                    (
                        &["cta", "cluster", "gpu", "sys", "proxy"],
                        "a scope (`.cta`, `.cluster`, `.gpu` or `.sys`)",
                    )
                };
                if !levels.iter().any(|l| m.written(l)) {
                    return Err(m.missing(what));
                }
                m.accept(&[
                    "cta", "gl", "sys", "gpu", "cluster", "sc", "acq_rel", "proxy", "alias",
                    "async",
                ]);
                self.simple(i, Op::Fence, None, &[], Rule::Exact)?
            }
            "prefetch" | "prefetchu" => {
                // A cache hint with no architectural effect on values.
                m.accept(&["global", "local", "L1", "L2"]);
                m.accept(EVICTION_HINTS);
                Inst::new(Op::Fence, i.span)
            }
            "applypriority" | "discard" => {
                // L2 eviction priority and discarding an L2 line's data (whose bytes become
                // unspecified: keeping them is one allowed outcome): no effect on values, and
                // the cache model has no priorities.
                m.accept(&["global", "L2", "L2::evict_normal"]);
                let [a, n] = i.operands.as_slice() else {
                    return Err(count_error(i, "2"));
                };
                self.address(i, a, Some(Space::Global))?;
                if !matches!(n.kind, K::Int(128)) {
                    return Err(bad(i, "a size of 128 bytes", n.span));
                }
                Inst::new(Op::Nop, i.span)
            }
            "createpolicy" => {
                // A cache-eviction policy for `.L2::cache_hint` accesses: opaque bits that
                // only those accesses read, and the model ignores; 0 stands for every policy.
                m.accept(&["fractional", "range", "global", "cvt"]);
                m.accept(EVICTION_HINTS);
                m.need_ty(&[Ty::B64])?;
                let Some(d) = i.operands.first() else {
                    return Err(count_error(i, "2 to 5"));
                };
                let mut inst = Inst::new(Op::Mov(Ty::B64), i.span);
                inst.dsts[0] = self.dst(i, d, Ty::B64, Rule::Exact)?;
                inst.n_dsts = 1;
                inst.srcs[0] = Operand::Imm(0);
                inst.n_srcs = 1;
                inst
            }
            "griddepcontrol" => {
                // Programmatic dependent launch: a launch starts only after the one before it
                // in its stream has finished, so `wait` is always satisfied and
                // `launch_dependents` (a hint that dependents may start early) changes nothing.
                m.one_of(&[("wait", ()), ("launch_dependents", ())])
                    .ok_or_else(|| m.missing("`.wait` or `.launch_dependents`"))?;
                self.simple(i, Op::Nop, None, &[], Rule::Exact)?
            }
            "nanosleep" => {
                m.need_ty(&[Ty::U32])?;
                let [t] = i.operands.as_slice() else {
                    return Err(count_error(i, "1"));
                };
                let mut inst = Inst::new(Op::Nanosleep, i.span);
                inst.srcs[0] = self.src(i, t, Ty::U32)?;
                inst.n_srcs = 1;
                inst
            }
            "bra" => {
                let uni = m.has("uni");
                let [target] = i.operands.as_slice() else {
                    return Err(count_error(i, "1"));
                };
                let K::Ident { name: label, .. } = &target.kind else {
                    return Err(bad(i, "a label", target.span));
                };
                let Some(Sym::Label(id)) = self.lookup(label) else {
                    return Err(LowerError::UnknownLabel {
                        name: label.clone(),
                        span: target.span,
                    });
                };
                self.fixups.push((self.insts.len(), id));
                Inst::new(
                    Op::Bra {
                        target: InstId(u32::MAX),
                        uni,
                    },
                    i.span,
                )
            }
            "ret" => {
                m.has("uni");
                match self.frames.last().and_then(|f| f.ret_label) {
                    None => Inst::new(Op::Exit, i.span),
                    Some(label) => {
                        self.fixups.push((self.insts.len(), label));
                        Inst::new(
                            Op::Bra {
                                target: InstId(u32::MAX),
                                uni: false,
                            },
                            i.span,
                        )
                    }
                }
            }
            "exit" => Inst::new(Op::Exit, i.span),
            _ => {
                return Err(LowerError::UnsupportedInstruction {
                    name: full_name(i),
                    span: i.span,
                })
            }
        };
        m.finish()?;
        inst.guard = guard;
        self.push(inst);
        Ok(())
    }

    /// Resolves a destination: a register of a type that agrees with `ty` under `rule`, or
    /// the sink `_`.
    pub(super) fn dst(
        &self,
        i: &ast::Instruction,
        o: &ast::Operand,
        ty: Ty,
        rule: Rule,
    ) -> Result<Option<Reg>, LowerError> {
        match &o.kind {
            K::Sink => Ok(None),
            K::Ident {
                name,
                component: None,
            } => match self.lookup(name) {
                Some(Sym::Reg(r)) => {
                    self.check_reg(i, o.span, name, r, ty, rule)?;
                    Ok(Some(r))
                }
                Some(_) => Err(bad(i, "a register destination", o.span)),
                None => Err(LowerError::UnknownIdentifier {
                    name: name.clone(),
                    span: o.span,
                }),
            },
            _ => Err(bad(i, "a register destination", o.span)),
        }
    }

    /// One register of a `p|q` or `d|p` pair, of type `ty`.
    fn reg_by_name(
        &self,
        i: &ast::Instruction,
        name: &ast::Spanned<String>,
        ty: Ty,
    ) -> Result<Reg, LowerError> {
        match self.lookup(&name.value) {
            Some(Sym::Reg(r)) => {
                self.check_reg(i, name.span, &name.value, r, ty, Rule::Exact)?;
                Ok(r)
            }
            Some(_) => Err(bad(i, "a register", name.span)),
            None => Err(LowerError::UnknownIdentifier {
                name: name.value.clone(),
                span: name.span,
            }),
        }
    }

    /// Checks that register `r` (written `name` at `span`) may be an operand of type `ty`.
    fn check_reg(
        &self,
        i: &ast::Instruction,
        span: Span,
        name: &str,
        r: Reg,
        ty: Ty,
        rule: Rule,
    ) -> Result<(), LowerError> {
        let have = self.regs[r].ty;
        if typecheck::conforms(have, ty, rule) {
            return Ok(());
        }
        Err(LowerError::OperandType {
            inst: full_name(i),
            index: operand_index(i, span),
            operand: name.to_string(),
            found: format!("a .{} register", typecheck::name(have)),
            expected: typecheck::mismatch(have, ty, rule),
            span,
        })
    }

    /// Resolves a source operand of type `ty` (exact rule).
    pub(super) fn src(
        &self,
        i: &ast::Instruction,
        o: &ast::Operand,
        ty: Ty,
    ) -> Result<Operand, LowerError> {
        self.src_as(i, o, ty, Rule::Exact)
    }

    /// Resolves a source operand of type `ty`, checking registers under `rule` and literals
    /// against the type.
    pub(super) fn src_as(
        &self,
        i: &ast::Instruction,
        o: &ast::Operand,
        ty: Ty,
        rule: Rule,
    ) -> Result<Operand, LowerError> {
        let literal_error = |found: &str, expected: String| LowerError::OperandType {
            inst: full_name(i),
            index: operand_index(i, o.span),
            operand: literal_text(&o.kind),
            found: found.to_string(),
            expected,
            span: o.span,
        };
        match &o.kind {
            K::Int(v) => {
                if ty.is_float() {
                    return Err(literal_error(
                        "an integer literal",
                        format!(
                            "a .{} value (write floats as `0f…`/`0d…`)",
                            typecheck::name(ty)
                        ),
                    ));
                }
                let bits = int_literal_bits(*v, ty);
                if !typecheck::int_fits(*v, ty) {
                    let (inst, name) = (full_name(i), typecheck::name(ty));
                    match super::error::wrapped_literal(&inst, *v, &name, bits, o.span) {
                        Some(w) => self.ctx.warnings.borrow_mut().push(w),
                        None => {
                            return Err(LowerError::ImmediateRange {
                                inst,
                                value: *v,
                                ty: name,
                                span: o.span,
                            })
                        }
                    }
                }
                Ok(Operand::Imm(bits))
            }
            K::Float(f) => {
                let lit_bits = match f {
                    FloatLit::F32(_) => 32,
                    FloatLit::F64(_) => 64,
                };
                let fits = ty.is_float() || (is_bit(ty) && ty.bits() == lit_bits);
                if !fits {
                    return Err(literal_error(
                        "a float literal",
                        format!("a .{} value", typecheck::name(ty)),
                    ));
                }
                Ok(Operand::Imm(float_literal_bits(*f, ty)))
            }
            K::Not(inner) => match self.src_as(i, inner, Ty::Pred, Rule::Exact)? {
                Operand::Reg(r) => Ok(Operand::NotReg(r)),
                _ => Err(bad(i, "a predicate register after `!`", o.span)),
            },
            K::Ident { name, component } => {
                if let Some(s) = special(name, *component) {
                    self.check_special(i, o, s, ty)?;
                    return Ok(Operand::Special(s));
                }
                if component.is_some() {
                    return Err(bad(i, "a register without a component", o.span));
                }
                match self.lookup(name) {
                    Some(Sym::Reg(r)) => {
                        self.check_reg(i, o.span, name, r, ty, rule)?;
                        Ok(Operand::Reg(r))
                    }
                    // The address of a variable in its own state space.
                    Some(
                        Sym::Local(off)
                        | Sym::ParamVar(off)
                        | Sym::Shared(off)
                        | Sym::KernelParam(off),
                    ) => Ok(Operand::Imm(off as u64)),
                    Some(Sym::Global(g)) => Ok(Operand::GlobalAddr(g, 0)),
                    // A function's address (`mov.u64 %rd, f`).
                    Some(Sym::Function(addr)) => Ok(Operand::Imm(addr)),
                    Some(Sym::Label(_) | Sym::Targets(_) | Sym::Prototype(_)) => {
                        Err(bad(i, "a value, not a label", o.span))
                    }
                    None => Err(LowerError::UnknownIdentifier {
                        name: name.clone(),
                        span: o.span,
                    }),
                }
            }
            _ => Err(bad(i, "a register or immediate", o.span)),
        }
    }

    /// Special registers are read only by `mov` and `cvt`, at their own width (`%tid` and
    /// friends also at 16 bits, for legacy code; `%gridid` also at 32).
    fn check_special(
        &self,
        i: &ast::Instruction,
        o: &ast::Operand,
        s: Special,
        ty: Ty,
    ) -> Result<(), LowerError> {
        let sizes: &[u32] = match s {
            Special::Tid(_) | Special::Ntid(_) | Special::Ctaid(_) | Special::Nctaid(_) => {
                &[16, 32]
            }
            Special::GridId => &[32, 64],
            Special::Clock64 | Special::GlobalTimer => &[64],
            _ => &[32],
        };
        let reader = matches!(i.opcode.value.as_str(), "mov" | "cvt");
        let type_ok = !ty.is_float() && ty != Ty::Pred && sizes.contains(&ty.bits());
        if reader && type_ok {
            return Ok(());
        }
        let widths = sizes
            .iter()
            .map(|b| format!("{b}-bit"))
            .collect::<Vec<_>>()
            .join(" or ");
        Err(LowerError::OperandType {
            inst: full_name(i),
            index: operand_index(i, o.span),
            operand: literal_text(&o.kind),
            found: "a special register".into(),
            expected: if reader {
                format!("a {widths} integer or bit-size operand")
            } else {
                "a register (special registers are read with `mov` or `cvt`)".into()
            },
            span: o.span,
        })
    }

    /// An instruction `op d, a, b, ...` with an optional destination of type `dst` and
    /// sources of the given types, registers checked under `rule`.
    fn simple(
        &self,
        i: &ast::Instruction,
        op: Op,
        dst: Option<Ty>,
        srcs: &[Ty],
        rule: Rule,
    ) -> Result<Inst, LowerError> {
        let want = srcs.len() + dst.is_some() as usize;
        if i.operands.len() != want {
            return Err(count_error(i, &want.to_string()));
        }
        let mut inst = Inst::new(op, i.span);
        let mut ops = i.operands.iter();
        if let Some(dty) = dst {
            inst.dsts[0] = self.dst(i, ops.next().expect("counted"), dty, rule)?;
            inst.n_dsts = 1;
        }
        for (k, (o, ty)) in ops.zip(srcs).enumerate() {
            inst.srcs[k] = self.src_as(i, o, *ty, rule)?;
        }
        inst.n_srcs = srcs.len() as u8;
        Ok(inst)
    }

    /// `vote` and `shfl`: the destination (of type `dty`) may be a `d|p` pair (shfl) and the
    /// last source, the member mask, is optional (absent in the pre-`.sync` forms: then all
    /// lanes).
    fn with_optional_mask(
        &self,
        i: &ast::Instruction,
        op: Op,
        dty: Ty,
        srcs: &[Ty],
        max_srcs: usize,
    ) -> Result<Inst, LowerError> {
        let n = i.operands.len();
        if n != srcs.len() + 1 && n != max_srcs + 1 {
            return Err(count_error(
                i,
                &format!("{} or {}", srcs.len() + 1, max_srcs + 1),
            ));
        }
        let mut inst = Inst::new(op, i.span);
        match &i.operands[0].kind {
            K::PredPair(d, p) => {
                inst.dsts[0] = Some(self.reg_by_name(i, d, dty)?);
                inst.dsts[1] = Some(self.reg_by_name(i, p, Ty::Pred)?);
                inst.n_dsts = 2;
            }
            _ => {
                inst.dsts[0] = self.dst(i, &i.operands[0], dty, Rule::Exact)?;
                inst.n_dsts = 1;
            }
        }
        for (k, o) in i.operands[1..].iter().enumerate() {
            let ty = srcs.get(k).copied().unwrap_or(Ty::B32);
            inst.srcs[k] = self.src(i, o, ty)?;
        }
        if n == srcs.len() + 1 {
            // No member mask: the whole warp.
            inst.srcs[max_srcs - 1] = Operand::Imm(u32::MAX as u64);
        }
        inst.n_srcs = max_srcs as u8;
        Ok(inst)
    }

    fn mov(&self, i: &ast::Instruction, m: &mut Mods) -> Result<Inst, LowerError> {
        let [d, a] = i.operands.as_slice() else {
            m.need_ty(types::MOV)?;
            return Err(count_error(i, "2"));
        };
        let packing = matches!(a.kind, K::Vector(_)) || matches!(d.kind, K::Vector(_));
        let ty = m.need_ty(if packing { types::PACK } else { types::MOV })?;
        let part_of = |count: usize| match ty.size() as usize / count.max(1) {
            1 => Ty::B8,
            2 => Ty::B16,
            4 => Ty::B32,
            _ => Ty::B64,
        };
        match (&d.kind, &a.kind) {
            (_, K::Vector(parts)) => {
                if parts.len() > MAX_DSTS || parts.len() < 2 {
                    return Err(bad(i, "a vector of 2 or 4 registers", a.span));
                }
                let part = part_of(parts.len());
                let mut inst = Inst::new(
                    Op::Pack {
                        part,
                        count: parts.len() as u8,
                    },
                    i.span,
                );
                inst.dsts[0] = self.dst(i, d, ty, Rule::Exact)?;
                inst.n_dsts = 1;
                for (k, p) in parts.iter().enumerate() {
                    inst.srcs[k] = self.src(i, p, part)?;
                }
                inst.n_srcs = parts.len() as u8;
                Ok(inst)
            }
            (K::Vector(parts), _) => {
                if parts.len() > MAX_DSTS || parts.len() < 2 {
                    return Err(bad(i, "a vector of 2 or 4 registers", d.span));
                }
                let part = part_of(parts.len());
                let mut inst = Inst::new(
                    Op::Unpack {
                        part,
                        count: parts.len() as u8,
                    },
                    i.span,
                );
                for (k, p) in parts.iter().enumerate() {
                    inst.dsts[k] = self.dst(i, p, part, Rule::Exact)?;
                }
                inst.n_dsts = parts.len() as u8;
                inst.srcs[0] = self.src(i, a, ty)?;
                inst.n_srcs = 1;
                Ok(inst)
            }
            _ => self.simple(i, Op::Mov(ty), Some(ty), &[ty], Rule::Exact),
        }
    }
    fn arith(&self, i: &ast::Instruction, m: &mut Mods) -> Result<Inst, LowerError> {
        use ArithOp::*;
        let name = i.opcode.value.as_str();
        let mode = m.float_mode();
        let lo = m.has("lo");
        let hi = m.has("hi");
        let wide_mode = m.has("wide");
        let prmt_mode = if name == "prmt" {
            m.one_of(&[
                ("f4e", PrmtMode::F4e),
                ("b4e", PrmtMode::B4e),
                ("rc8", PrmtMode::Rc8),
                ("ecl", PrmtMode::Ecl),
                ("ecr", PrmtMode::Ecr),
                ("rc16", PrmtMode::Rc16),
            ])
            .unwrap_or(PrmtMode::Generic)
        } else {
            PrmtMode::Generic
        };
        let explicit_rounding = m.has_rounding();
        let (ty, ty_span) = m.need_ty_spanned()?;
        if mode.relu {
            check_type(i, ty, &[Ty::F16, Ty::Bf16, Ty::F16x2, Ty::Bf16x2], ty_span)?;
        }
        let float = ty.is_float();
        let int_mul = |lo: bool, hi: bool, wide: bool, l: ArithOp, h: ArithOp, w: ArithOp| {
            if hi {
                Some(h)
            } else if wide {
                Some(w)
            } else if lo {
                Some(l)
            } else {
                None
            }
        };
        let op = match name {
            "add" => Add,
            "sub" => Sub,
            "mul" if float => Mul,
            "mul" => int_mul(lo, hi, wide_mode, MulLo, MulHi, MulWide)
                .ok_or_else(|| m.missing("`.lo`, `.hi` or `.wide`"))?,
            "mad" if float => Fma,
            "mad" => int_mul(lo, hi, wide_mode, MadLo, MadHi, MadWide)
                .ok_or_else(|| m.missing("`.lo`, `.hi` or `.wide`"))?,
            "mul24" => {
                if hi {
                    Mul24Hi
                } else {
                    Mul24Lo
                }
            }
            "mad24" => {
                if hi {
                    Mad24Hi
                } else {
                    Mad24Lo
                }
            }
            "fma" => Fma,
            "div" => Div,
            "rem" => Rem,
            "min" => Min,
            "max" => Max,
            "abs" => Abs,
            "neg" => Neg,
            "and" => And,
            "or" => Or,
            "xor" => Xor,
            "not" => Not,
            "cnot" => CNot,
            "shl" => Shl,
            "shr" => Shr,
            "popc" => Popc,
            "clz" => Clz,
            "brev" => Brev,
            "bfe" => Bfe,
            "bfi" => Bfi,
            "prmt" => Prmt(prmt_mode),
            "rcp" => Rcp,
            "sqrt" => Sqrt,
            "rsqrt" => Rsqrt,
            "sin" => Sin,
            "cos" => Cos,
            "ex2" => Ex2,
            "lg2" => Lg2,
            "tanh" => Tanh,
            "copysign" => Copysign,
            "sad" => Sad,
            _ => unreachable!("dispatched by the caller"),
        };
        if (lo || hi || wide_mode) && float {
            return Err(LowerError::UnsupportedModifier {
                inst: name.into(),
                modifier: "lo/hi/wide on a float type".into(),
                span: i.span,
            });
        }
        use types as T;
        let allowed: &[Ty] = match op {
            Add | Sub | Min | Max => T::ADD_MIN_MAX,
            MulLo | MulHi | MadLo | MadHi | Div | Rem | Sad => T::INT16_64,
            Mul | Fma if name == "mad" => T::F32_64,
            Mul | Fma => T::FLOATS,
            MulWide | MadWide => T::MUL_WIDE,
            Mul24Lo | Mul24Hi | Mad24Lo | Mad24Hi => T::INT32,
            Abs | Neg => T::SIGNED_AND_FLOATS,
            And | Or | Xor | Not => T::LOGIC,
            CNot | Shl => T::BITS16_64,
            Shr => T::SHR,
            Popc | Clz | Brev | Bfi => T::B32_64,
            Bfe => T::INT32_64,
            Prmt(_) => T::ONLY_B32,
            Rcp | Sqrt | Rsqrt | Copysign => T::F32_64,
            Sin | Cos | Lg2 => &[Ty::F32],
            Ex2 | Tanh => T::HALF_AND_F32,
            Lop3
            | Shf { .. }
            | Bmsk { .. }
            | Szext { .. }
            | Bfind { .. }
            | Fns
            | Dp4a { .. }
            | Dp2a { .. } => unreachable!("decoded by `bit_op`"),
            AddC { .. } | SubC { .. } | MadC { .. } => unreachable!("decoded by `carry`"),
            MinMax { .. } => unreachable!("decoded by `min_max`"),
        };
        // `div`/`rem` on floats: only `div` (its integer list is above).
        let allowed = if matches!(op, Div) && float {
            T::F32_64
        } else {
            allowed
        };
        check_type(i, ty, allowed, ty_span)?;
        // IEEE operations that PTX makes state their rounding (or `.approx`).
        let needs_rounding = match op {
            Fma => ty == Ty::F32 || ty == Ty::F64,
            Div | Rcp | Sqrt => float,
            _ => false,
        };
        // `rcp.approx.ftz.f64` too: the fast f64 reciprocal (always flushing subnormals).
        let approx_allowed = (ty == Ty::F32 && matches!(op, Div | Rcp | Sqrt))
            || (ty == Ty::F64 && op == Rcp && mode.ftz);
        if needs_rounding && !explicit_rounding && !(approx_allowed && mode.approx) {
            return Err(m.missing(if approx_allowed {
                "a rounding modifier such as `.rn`, or `.approx`"
            } else {
                "a rounding modifier such as `.rn`"
            }));
        }
        let n = arity(op);
        let mut types = vec![ty; n];
        match op {
            Shl | Shr => types[1] = Ty::U32,
            Bfe => {
                types[1] = Ty::U32;
                types[2] = Ty::U32;
            }
            Bfi => {
                types[2] = Ty::U32;
                types[3] = Ty::U32;
            }
            MadWide => types[2] = wide(ty),
            _ => {}
        }
        let dty = match op {
            MulWide | MadWide => wide(ty),
            Popc | Clz => Ty::U32,
            _ => ty,
        };
        self.simple(
            i,
            Op::Arith { op, ty, mode },
            Some(dty),
            &types,
            Rule::Exact,
        )
    }

    /// Carry chains (PTX ISA "Extended-Precision Integer Arithmetic"): `add.cc`, `addc`,
    /// `sub.cc`, `subc`, `mad.cc`, `madc`, on 32- and 64-bit integers.
    fn carry(&self, i: &ast::Instruction, m: &mut Mods) -> Result<Inst, LowerError> {
        use ArithOp::*;
        let name = i.opcode.value.as_str();
        let carry_in = name.ends_with('c');
        let carry_out = m.has("cc");
        let cc = self.cc.expect("made before decoding a carry instruction");
        let (op, n) = match name {
            "add" | "addc" => (AddC { carry_in }, 2),
            "sub" | "subc" => (SubC { carry_in }, 2),
            _ => {
                let hi = m
                    .one_of(&[("lo", false), ("hi", true)])
                    .ok_or_else(|| m.missing("`.lo` or `.hi`"))?;
                (MadC { hi, carry_in }, 3)
            }
        };
        let ty = m.need_ty(&[Ty::U32, Ty::S32, Ty::U64, Ty::S64])?;
        if i.operands.len() != n + 1 {
            return Err(count_error(i, &(n + 1).to_string()));
        }
        let mut inst = Inst::new(
            Op::Arith {
                op,
                ty,
                mode: FloatMode::default(),
            },
            i.span,
        );
        inst.dsts[0] = self.dst(i, &i.operands[0], ty, Rule::Exact)?;
        inst.n_dsts = 1;
        if carry_out {
            inst.dsts[1] = Some(cc);
            inst.n_dsts = 2;
        }
        for k in 0..n {
            inst.srcs[k] = self.src(i, &i.operands[k + 1], ty)?;
        }
        if carry_in {
            inst.srcs[n] = Operand::Reg(cc);
        }
        inst.n_srcs = (n + carry_in as usize) as u8;
        Ok(inst)
    }

    /// `min`/`max` with `.relu`, `.NaN` or three inputs (PTX ISA "min", "max"): `.relu` on
    /// s32 and the half types, `.NaN` on the float types, three inputs on s32, u32 and the
    /// float types.
    fn min_max(&self, i: &ast::Instruction, m: &mut Mods) -> Result<Inst, LowerError> {
        let max = i.opcode.value == "max";
        let relu = m.has("relu");
        let nan = m.has("NaN");
        let ftz = m.has("ftz");
        let three = i.operands.len() == 4;
        let allowed: &[Ty] = match (relu, nan) {
            (true, _) => &[Ty::S32, Ty::S16x2, Ty::F16, Ty::Bf16, Ty::F16x2, Ty::Bf16x2],
            (false, true) => &[Ty::F16, Ty::Bf16, Ty::F32, Ty::F16x2, Ty::Bf16x2],
            (false, false) => &[Ty::U32, Ty::S32, Ty::U16x2, Ty::S16x2, Ty::F32, Ty::F64],
        };
        let ty = m.need_ty(allowed)?;
        if i.operands.len() != 3 && !three {
            return Err(count_error(i, "3 or 4"));
        }
        let mode = FloatMode {
            ftz,
            ..FloatMode::default()
        };
        let op = ArithOp::MinMax {
            max,
            relu,
            nan,
            three,
        };
        let n = 2 + three as usize;
        self.simple(
            i,
            Op::Arith { op, ty, mode },
            Some(ty),
            &vec![ty; n],
            Rule::Exact,
        )
    }

    /// The integer bit and byte operations compilers emit for bit tricks and int8 dot
    /// products: `lop3`, `shf`, `bmsk`, `szext`, `bfind`, `dp4a`, `dp2a` (PTX ISA "Integer
    /// Arithmetic Instructions" and "Logic and Shift Instructions").
    fn bit_op(&self, i: &ast::Instruction, m: &mut Mods) -> Result<Inst, LowerError> {
        use ArithOp::*;
        let name = i.opcode.value.as_str();
        let clamp = |m: &mut Mods| {
            m.one_of(&[("clamp", true), ("wrap", false)])
                .ok_or_else(|| m.missing("`.clamp` or `.wrap`"))
        };
        let mode = FloatMode::default();
        let (op, ty, types): (ArithOp, Ty, Vec<Ty>) = match name {
            "lop3" => {
                m.need_ty(&[Ty::B32])?;
                if let Some(lut) = i.operands.get(4) {
                    if !matches!(lut.kind, K::Int(v) if (0..=255).contains(&v)) {
                        return Err(bad(i, "an immediate look-up table from 0 to 255", lut.span));
                    }
                }
                (Lop3, Ty::B32, vec![Ty::B32; 4])
            }
            "shf" => {
                let left = m
                    .one_of(&[("l", true), ("r", false)])
                    .ok_or_else(|| m.missing("`.l` or `.r`"))?;
                let clamp = clamp(m)?;
                m.need_ty(&[Ty::B32])?;
                (
                    Shf { left, clamp },
                    Ty::B32,
                    vec![Ty::B32, Ty::B32, Ty::U32],
                )
            }
            "bmsk" => {
                let clamp = clamp(m)?;
                m.need_ty(&[Ty::B32])?;
                (Bmsk { clamp }, Ty::B32, vec![Ty::U32, Ty::U32])
            }
            "fns" => {
                m.need_ty(&[Ty::B32])?;
                (Fns, Ty::B32, vec![Ty::B32, Ty::U32, Ty::S32])
            }
            "szext" => {
                let clamp = clamp(m)?;
                let ty = m.need_ty(&[Ty::S32, Ty::U32])?;
                (Szext { clamp }, ty, vec![ty, Ty::U32])
            }
            "bfind" => {
                let shiftamt = m.has("shiftamt");
                let ty = m.need_ty(&[Ty::U32, Ty::S32, Ty::U64, Ty::S64])?;
                // The result is a u32 position whatever the source width.
                let inst = self.simple(
                    i,
                    Op::Arith {
                        op: Bfind { shiftamt },
                        ty,
                        mode,
                    },
                    Some(Ty::U32),
                    &[ty],
                    Rule::Exact,
                )?;
                return Ok(inst);
            }
            "dp4a" | "dp2a" => {
                let hi = if name == "dp2a" {
                    m.one_of(&[("hi", true), ("lo", false)])
                        .ok_or_else(|| m.missing("`.lo` or `.hi`"))?
                } else {
                    false
                };
                let a = m.need_ty(&[Ty::U32, Ty::S32])?;
                let b = m.need_ty(&[Ty::U32, Ty::S32])?;
                let (a_signed, b_signed) = (a == Ty::S32, b == Ty::S32);
                let ty = if a_signed || b_signed {
                    Ty::S32
                } else {
                    Ty::U32
                };
                let op = if name == "dp4a" {
                    Dp4a { a_signed, b_signed }
                } else {
                    Dp2a {
                        hi,
                        a_signed,
                        b_signed,
                    }
                };
                (op, ty, vec![a, b, ty])
            }
            _ => unreachable!("dispatched by the caller"),
        };
        self.simple(i, Op::Arith { op, ty, mode }, Some(ty), &types, Rule::Exact)
    }

    fn setp(&self, i: &ast::Instruction, m: &mut Mods) -> Result<Inst, LowerError> {
        let cmp = m
            .one_of(CMPS)
            .ok_or_else(|| m.missing("a comparison such as `.lt`"))?;
        let combine = m.one_of(BOOL_OPS);
        let ftz = m.has("ftz");
        let (ty, ty_span) = m.need_ty_spanned()?;
        check_type(i, ty, types::SETP, ty_span)?;
        check_cmp(i, cmp, ty)?;
        let want = if combine.is_some() { 4 } else { 3 };
        if i.operands.len() != want {
            return Err(count_error(i, &want.to_string()));
        }
        let mut inst = Inst::new(
            Op::Setp {
                cmp,
                combine,
                ty,
                ftz,
            },
            i.span,
        );
        match &i.operands[0].kind {
            K::PredPair(p, q) => {
                inst.dsts[0] = Some(self.reg_by_name(i, p, Ty::Pred)?);
                inst.dsts[1] = Some(self.reg_by_name(i, q, Ty::Pred)?);
                inst.n_dsts = 2;
            }
            _ => {
                inst.dsts[0] = self.dst(i, &i.operands[0], Ty::Pred, Rule::Exact)?;
                inst.n_dsts = 1;
            }
        }
        inst.srcs[0] = self.src(i, &i.operands[1], ty)?;
        inst.srcs[1] = self.src(i, &i.operands[2], ty)?;
        if combine.is_some() {
            inst.srcs[2] = self.src(i, &i.operands[3], Ty::Pred)?;
        }
        inst.n_srcs = want as u8 - 1;
        Ok(inst)
    }

    fn set(&self, i: &ast::Instruction, m: &mut Mods) -> Result<Inst, LowerError> {
        let cmp = m
            .one_of(CMPS)
            .ok_or_else(|| m.missing("a comparison such as `.lt`"))?;
        let combine = m.one_of(BOOL_OPS);
        let ftz = m.has("ftz");
        let (dty, dty_span) = m.need_ty_spanned()?;
        check_type(i, dty, types::SET_DST, dty_span)?;
        let sty = m.need_ty(types::SET_SRC)?;
        check_cmp(i, cmp, sty)?;
        // The half-precision forms (PTX ISA §9.7.7.1): a packed source gives packed results
        // (of its own type, or `.u32`/`.s32` halves of all ones); a packed result needs its
        // packed source; 16-bit integer results come from half-precision sources.
        let packed = |t: Ty| matches!(t, Ty::F16x2 | Ty::Bf16x2);
        let half = |t: Ty| matches!(t, Ty::F16 | Ty::Bf16);
        let fits = if packed(sty) {
            dty == sty || matches!(dty, Ty::U32 | Ty::S32)
        } else if packed(dty) {
            false
        } else if matches!(dty, Ty::U16 | Ty::S16) {
            half(sty)
        } else {
            true
        };
        if !fits {
            let allowed: &[Ty] = if packed(sty) {
                &[sty, Ty::U32, Ty::S32]
            } else if half(sty) {
                &[
                    Ty::U32,
                    Ty::S32,
                    Ty::F32,
                    Ty::U16,
                    Ty::S16,
                    Ty::F16,
                    Ty::Bf16,
                ]
            } else {
                &[Ty::U32, Ty::S32, Ty::F32, Ty::F16, Ty::Bf16]
            };
            return Err(LowerError::InstructionType {
                inst: full_name(i),
                ty: typecheck::name(dty),
                allowed: format!(
                    "{} with .{} sources",
                    typecheck::list(allowed),
                    typecheck::name(sty)
                ),
                span: dty_span,
            });
        }
        let op = Op::Set {
            cmp,
            combine,
            dty,
            sty,
            ftz,
        };
        if combine.is_some() {
            self.simple(i, op, Some(dty), &[sty, sty, Ty::Pred], Rule::Exact)
        } else {
            self.simple(i, op, Some(dty), &[sty, sty], Rule::Exact)
        }
    }

    /// Resolves `[base+offset]` for a memory instruction whose written space is `space`.
    pub(super) fn address(
        &self,
        i: &ast::Instruction,
        o: &ast::Operand,
        space: Option<Space>,
    ) -> Result<(Space, Operand, i32), LowerError> {
        let K::Address { base, offset } = &o.kind else {
            return Err(bad(i, "an address `[...]`", o.span));
        };
        let offset =
            i32::try_from(*offset).map_err(|_| bad(i, "an offset that fits in 32 bits", o.span))?;
        let Some(base) = base else {
            return Ok((
                space.unwrap_or(Space::Generic),
                Operand::Imm(offset as u32 as u64),
                0,
            ));
        };
        let sym = self
            .lookup(&base.name)
            .ok_or_else(|| LowerError::UnknownIdentifier {
                name: base.name.clone(),
                span: base.span,
            })?;
        Ok(match sym {
            Sym::Reg(r) => {
                // Any integer or bit-size register may hold an address; not a predicate or a
                // float.
                let have = self.regs[r].ty;
                if have == Ty::Pred || have.is_float() {
                    return Err(LowerError::OperandType {
                        inst: full_name(i),
                        index: operand_index(i, base.span),
                        operand: base.name.clone(),
                        found: format!("a .{} register", typecheck::name(have)),
                        expected: "an integer or bit-size register as the address".into(),
                        span: base.span,
                    });
                }
                // With `.address_size 64` only shared-memory addresses fit in 32 bits.
                if have.size() == 4 && space != Some(Space::Shared) {
                    return Err(LowerError::OperandType {
                        inst: full_name(i),
                        index: operand_index(i, base.span),
                        operand: base.name.clone(),
                        found: format!("a .{} register", typecheck::name(have)),
                        expected: "a 64-bit address register (32-bit addresses are for `.shared`)"
                            .into(),
                        span: base.span,
                    });
                }
                (space.unwrap_or(Space::Generic), Operand::Reg(r), offset)
            }
            Sym::Local(off) => (Space::Local, Operand::Imm(off as u64), offset),
            Sym::Shared(off) => (Space::Shared, Operand::Imm(off as u64), offset),
            // Parameters live in the `.param` space, which has no generic window.
            Sym::ParamVar(_) | Sym::KernelParam(_) if space != Some(Space::Param) => {
                return Err(bad(i, "`.param` for a parameter's address", base.span));
            }
            Sym::ParamVar(off) => (Space::Local, Operand::Imm(off as u64), offset),
            Sym::KernelParam(off) => (Space::Param, Operand::Imm(off as u64), offset),
            Sym::Global(g) => (
                match space {
                    Some(Space::Const) => Space::Const,
                    _ => Space::Global,
                },
                Operand::GlobalAddr(g, 0),
                offset,
            ),
            Sym::Label(_) | Sym::Targets(_) | Sym::Prototype(_) => {
                return Err(bad(i, "an address, not a label", base.span))
            }
            Sym::Function(_) => return Err(bad(i, "a data address, not a function", base.span)),
        })
    }

    fn ld_st(&self, i: &ast::Instruction, m: &mut Mods) -> Result<Inst, LowerError> {
        let store = i.opcode.value == "st";
        let space = m.one_of(SPACES);
        if store && space == Some(Space::Const) {
            // The constant bank is read-only to a kernel: the ISA has no `st.const`.
            let span = i
                .modifiers
                .iter()
                .find(|x| x.value == "const")
                .map_or(i.span, |x| x.span);
            return Err(LowerError::Invalid {
                what: "`st.const`: the `.const` state space is read-only (initialise it in its declaration)".into(),
                span,
            });
        }
        let volatile = m.has("volatile") | m.has("relaxed") | m.has("acquire") | m.has("release");
        if m.written("nc") && (store || space != Some(Space::Global)) {
            return Err(m.missing("`.global` for the non-coherent `.nc` load"));
        }
        m.accept(CACHE_HINTS);
        m.accept(MEMORY_ORDER);
        m.accept(EVICTION_HINTS);
        let cache_hint = m.has("L2::cache_hint");
        let vec = m.one_of(&[("v2", 2u8), ("v4", 4u8)]).unwrap_or(1);
        let ty = m.need_ty(types::LD_ST)?;
        let operands = match (cache_hint, i.operands.as_slice()) {
            (true, [first, second, policy]) => {
                // The policy register is read (so it must exist) and otherwise ignored.
                self.src(i, policy, Ty::B64)?;
                [first, second]
            }
            (false, [first, second]) => [first, second],
            (true, _) => return Err(count_error(i, "3")),
            (false, _) => return Err(count_error(i, "2")),
        };
        let [first, second] = operands;
        let (addr_op, value_op) = if store {
            (first, second)
        } else {
            (second, first)
        };
        let (space, base, offset) = self.address(i, addr_op, space)?;
        let values: &[ast::Operand] = match &value_op.kind {
            K::Vector(v) => v,
            _ => std::slice::from_ref(value_op),
        };
        if values.len() != vec as usize {
            return Err(bad(i, "as many values as the vector width", value_op.span));
        }
        self.check_vector_widths(i, values)?;
        if store {
            let mut inst = Inst::new(
                Op::St {
                    space,
                    ty,
                    vec,
                    offset,
                },
                i.span,
            );
            inst.srcs[0] = base;
            for (k, v) in values.iter().enumerate() {
                inst.srcs[k + 1] = self.src_as(i, v, ty, Rule::Relaxed)?;
            }
            inst.n_srcs = vec + 1;
            Ok(inst)
        } else {
            let mut inst = Inst::new(
                Op::Ld {
                    space,
                    ty,
                    vec,
                    offset,
                    dst_bits: 64,
                    volatile,
                },
                i.span,
            );
            let mut dst_bits = ty.bits();
            for (k, v) in values.iter().enumerate() {
                inst.dsts[k] = self.dst(i, v, ty, Rule::Relaxed)?;
                if let Some(r) = inst.dsts[k] {
                    dst_bits = self.regs[r].ty.bits().max(ty.bits());
                }
            }
            if let Op::Ld { dst_bits: d, .. } = &mut inst.op {
                *d = dst_bits as u8;
            }
            inst.n_dsts = vec;
            inst.srcs[0] = base;
            inst.n_srcs = 1;
            Ok(inst)
        }
    }

    fn atom(&self, i: &ast::Instruction, m: &mut Mods) -> Result<Inst, LowerError> {
        let red = i.opcode.value == "red";
        let space = m.one_of(&[("global", Space::Global), ("shared", Space::Shared)]);
        m.accept(MEMORY_ORDER);
        m.accept(&["noftz"]);
        let op = m
            .one_of(&[
                ("add", AtomOp::Add),
                ("min", AtomOp::Min),
                ("max", AtomOp::Max),
                ("inc", AtomOp::Inc),
                ("dec", AtomOp::Dec),
                ("exch", AtomOp::Exch),
                ("cas", AtomOp::Cas),
                ("and", AtomOp::And),
                ("or", AtomOp::Or),
                ("xor", AtomOp::Xor),
            ])
            .ok_or_else(|| m.missing("an operation such as `.add`"))?;
        let ty = m.need_ty(match op {
            AtomOp::Add => types::ATOM_ADD,
            AtomOp::Min | AtomOp::Max => types::ATOM_MIN_MAX,
            AtomOp::Inc | AtomOp::Dec => types::ONLY_U32,
            AtomOp::And | AtomOp::Or | AtomOp::Xor | AtomOp::Exch => types::B32_64,
            AtomOp::Cas => types::ATOM_CAS,
        })?;
        let n_vals = if op == AtomOp::Cas { 2 } else { 1 };
        let want = n_vals + 1 + !red as usize;
        if i.operands.len() != want {
            return Err(count_error(i, &want.to_string()));
        }
        let mut ops = i.operands.iter();
        let dst = if red {
            None
        } else {
            self.dst(i, ops.next().expect("counted"), ty, Rule::Exact)?
        };
        let (space, base, offset) = self.address(i, ops.next().expect("counted"), space)?;
        let op = if red {
            Op::Red {
                space,
                op,
                ty,
                offset,
            }
        } else {
            Op::Atom {
                space,
                op,
                ty,
                offset,
            }
        };
        let mut inst = Inst::new(op, i.span);
        if !red {
            inst.dsts[0] = dst;
            inst.n_dsts = 1;
        }
        inst.srcs[0] = base;
        for (k, o) in ops.enumerate() {
            inst.srcs[k + 1] = self.src(i, o, ty)?;
        }
        inst.n_srcs = n_vals as u8 + 1;
        Ok(inst)
    }

    fn barrier(&self, i: &ast::Instruction, m: &mut Mods) -> Result<Inst, LowerError> {
        m.accept(&["aligned"]);
        if m.has("warp") {
            // `bar.warp.sync mask` (__syncwarp): the lanes of a warp execute in lockstep in
            // this model, so it only orders memory.
            m.has("sync");
            let mut inst = Inst::new(Op::Fence, i.span);
            if i.operands.len() != 1 {
                return Err(count_error(i, "1"));
            }
            inst.srcs[0] = self.src(i, &i.operands[0], Ty::B32)?;
            inst.n_srcs = 1;
            return Ok(inst);
        }
        let kind = if m.has("sync") {
            BarKind::Sync
        } else if m.has("arrive") {
            BarKind::Arrive
        } else if m.has("red") {
            let k = m
                .one_of(&[
                    ("popc", BarKind::RedPopc),
                    ("and", BarKind::RedAnd),
                    ("or", BarKind::RedOr),
                ])
                .ok_or_else(|| m.missing("`.popc`, `.and` or `.or`"))?;
            m.need_ty(if k == BarKind::RedPopc {
                types::ONLY_U32
            } else {
                types::PRED
            })?;
            k
        } else {
            return Err(m.missing("`.sync`, `.arrive` or `.red`"));
        };
        let is_red = matches!(kind, BarKind::RedPopc | BarKind::RedAnd | BarKind::RedOr);
        let ops = &i.operands;
        let mut inst = Inst::new(Op::Bar { kind, pp: None }, i.span);
        let rest = if is_red {
            if ops.len() != 3 && ops.len() != 4 {
                return Err(count_error(i, "3 or 4"));
            }
            let dty = if kind == BarKind::RedPopc {
                Ty::U32
            } else {
                Ty::Pred
            };
            inst.dsts[0] = self.dst(i, &ops[0], dty, Rule::Exact)?;
            inst.n_dsts = 1;
            &ops[1..]
        } else {
            if ops.is_empty() || ops.len() > 2 {
                return Err(count_error(i, "1 or 2"));
            }
            &ops[..]
        };
        // A CTA has 16 named barriers (PTX ISA §9.7.13.1: a literal id in 0..15).
        if let K::Int(id) = rest[0].kind {
            if !(0..16).contains(&id) {
                return Err(LowerError::Invalid {
                    what: format!("barrier {id} does not exist: a CTA has barriers 0 to 15"),
                    span: rest[0].span,
                });
            }
        }
        inst.srcs[0] = self.src(i, &rest[0], Ty::U32)?;
        let has_count = if is_red {
            rest.len() == 3
        } else {
            rest.len() == 2
        };
        if has_count {
            inst.srcs[1] = self.src(i, &rest[1], Ty::U32)?;
        }
        if is_red {
            inst.srcs[2] = self.src(i, rest.last().expect("counted"), Ty::Pred)?;
        }
        inst.n_srcs = 3;
        Ok(inst)
    }

    /// The registers of a vector operand (`{%f1, %f2}`) must all have the same width.
    fn check_vector_widths(
        &self,
        i: &ast::Instruction,
        values: &[ast::Operand],
    ) -> Result<(), LowerError> {
        let mut first: Option<Ty> = None;
        for v in values {
            let K::Ident { name, .. } = &v.kind else {
                continue;
            };
            let Some(Sym::Reg(r)) = self.lookup(name) else {
                continue;
            };
            let have = self.regs[r].ty;
            match first {
                None => first = Some(have),
                Some(f) if f.size() != have.size() => {
                    return Err(LowerError::OperandType {
                        inst: full_name(i),
                        index: operand_index(i, v.span),
                        operand: name.clone(),
                        found: format!("a .{} register", typecheck::name(have)),
                        expected: format!(
                            "a {}-bit register like the vector's other elements",
                            f.bits()
                        ),
                        span: v.span,
                    });
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

fn special(name: &str, component: Option<char>) -> Option<Special> {
    let dim = |c: Option<char>| match c {
        Some('x') => Some(0u8),
        Some('y') => Some(1),
        Some('z') => Some(2),
        _ => None,
    };
    Some(match name {
        "%tid" => Special::Tid(dim(component)?),
        "%ntid" => Special::Ntid(dim(component)?),
        "%ctaid" => Special::Ctaid(dim(component)?),
        "%nctaid" => Special::Nctaid(dim(component)?),
        _ if component.is_some() => return None,
        "%laneid" => Special::LaneId,
        "%warpid" => Special::WarpId,
        "%nwarpid" => Special::NWarpId,
        "%smid" => Special::SmId,
        "%nsmid" => Special::NSmId,
        "%gridid" => Special::GridId,
        "%clock" => Special::Clock,
        "%clock64" => Special::Clock64,
        "%globaltimer" => Special::GlobalTimer,
        "%lanemask_eq" => Special::LanemaskEq,
        "%lanemask_le" => Special::LanemaskLe,
        "%lanemask_lt" => Special::LanemaskLt,
        "%lanemask_ge" => Special::LanemaskGe,
        "%lanemask_gt" => Special::LanemaskGt,
        "%dynamic_smem_size" => Special::DynamicSmemSize,
        "%total_smem_size" => Special::TotalSmemSize,
        _ => match name.strip_prefix("%envreg").map(str::parse::<u8>) {
            Some(Ok(n)) if n < 32 => Special::EnvReg(n),
            _ => return None,
        },
    })
}

pub(super) fn full_name(i: &ast::Instruction) -> String {
    let mut s = i.opcode.value.clone();
    for m in &i.modifiers {
        s.push('.');
        s.push_str(&m.value);
    }
    s
}

pub(super) fn bad(i: &ast::Instruction, expected: &'static str, span: Span) -> LowerError {
    LowerError::BadOperand {
        inst: full_name(i),
        expected,
        span,
    }
}

pub(super) fn count_error(i: &ast::Instruction, expected: &str) -> LowerError {
    LowerError::OperandCount {
        inst: full_name(i),
        expected: expected.to_string(),
        found: i.operands.len(),
        span: i.span,
    }
}

/// Checks an instruction type against the types the instruction allows.
fn check_type(i: &ast::Instruction, ty: Ty, allowed: &[Ty], span: Span) -> Result<(), LowerError> {
    if allowed.contains(&ty) {
        return Ok(());
    }
    Err(LowerError::InstructionType {
        inst: i.opcode.value.clone(),
        ty: typecheck::name(ty),
        allowed: typecheck::list(allowed),
        span,
    })
}

/// The 1-based position of the written operand that contains `span` (destinations first).
pub(super) fn operand_index(i: &ast::Instruction, span: Span) -> usize {
    i.operands
        .iter()
        .position(|o| o.span.start <= span.start && span.end <= o.span.end)
        .map_or(0, |k| k + 1)
}

/// An operand as written, for messages.
fn literal_text(k: &ast::OperandKind) -> String {
    match k {
        K::Int(v) => v.to_string(),
        K::Float(FloatLit::F32(b)) => format!("0f{b:08X}"),
        K::Float(FloatLit::F64(b)) => format!("0d{b:016X}"),
        K::Ident {
            name,
            component: Some(c),
        } => format!("{name}.{c}"),
        K::Ident { name, .. } => name.clone(),
        _ => "operand".into(),
    }
}

fn is_bit(ty: Ty) -> bool {
    matches!(ty, Ty::B8 | Ty::B16 | Ty::B32 | Ty::B64 | Ty::B128)
}

/// Comparisons by type class: bit-size types compare only for (in)equality, `lo ls hi hs`
/// are for integers, the ordered/unordered tests for floats.
fn check_cmp(i: &ast::Instruction, cmp: Cmp, ty: Ty) -> Result<(), LowerError> {
    use Cmp::*;
    let ok = if ty.is_float() {
        !matches!(cmp, Lo | Ls | Hi | Hs)
    } else if is_bit(ty) {
        matches!(cmp, Eq | Ne)
    } else {
        matches!(cmp, Eq | Ne | Lt | Le | Gt | Ge | Lo | Ls | Hi | Hs)
    };
    if ok {
        return Ok(());
    }
    Err(LowerError::InstructionType {
        inst: full_name(i),
        ty: typecheck::name(ty),
        allowed: "a type its comparison applies to (`.bN`: eq, ne; integers: no unordered \
                  tests; floats: no lo, ls, hi, hs)"
            .into(),
        span: i.span,
    })
}
