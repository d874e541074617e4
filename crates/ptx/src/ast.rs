//! The PTX abstract syntax tree.
//!
//! The tree is deliberately *syntactic*: an instruction is its opcode, its dot-modifiers and
//! its operands, exactly as written. Deciding what `ld.global.nc.v4.f32` means — and whether
//! Switchyard can execute it — is the job of the lowering in the `kir` crate, which reports an
//! unsupported construct with the span kept here. Identifiers are not resolved either: `%r1`,
//! `$L__BB0_2` and `_Z3fooPf_param_0` are all [`OperandKind::Ident`] until lowering looks them
//! up in the right scope.
//!
//! Every node that a diagnostic may point at carries a [`Span`] (byte offsets into the source).

use crate::span::Span;

/// A value with the source range it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

/// A whole `.ptx` file.
#[derive(Clone, Debug, PartialEq)]
pub struct Module {
    /// `.version 8.5` → `(8, 5)`.
    pub version: (u32, u32),
    /// `.target sm_90a, texmode_independent` → `["sm_90a", "texmode_independent"]`.
    pub target: Vec<String>,
    /// `.address_size 64`; 64 when the directive is absent (the PTX default is 32, but
    /// Switchyard only executes 64-bit modules: lowering rejects 32).
    pub address_size: u32,
    /// Module-scope variables and functions, in source order.
    pub items: Vec<Item>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    Var(VarDecl),
    Function(Function),
}

/// State spaces a variable, parameter or memory instruction may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StateSpace {
    Reg,
    Sreg,
    Const,
    Global,
    Local,
    Param,
    Shared,
    Tex,
}

/// Linkage / visibility directives in front of a declaration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Linkage {
    Visible,
    Extern,
    Weak,
    Common,
}

/// A fundamental PTX type (`.u32`, `.f64`, `.pred`, `.b8`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarType {
    Pred,
    B8,
    B16,
    B32,
    B64,
    B128,
    U8,
    U16,
    U32,
    U64,
    S8,
    S16,
    S32,
    S64,
    F16,
    F16x2,
    Bf16,
    Bf16x2,
    F32,
    F64,
    /// Two 16-bit integers packed in 32 bits (`add`/`sub`/`min`/`max`, PTX ISA 8.0, sm_90).
    U16x2,
    S16x2,
}

impl ScalarType {
    /// Parses a type name without its dot (`"u32"`).
    pub fn from_name(name: &str) -> Option<Self> {
        use ScalarType::*;
        Some(match name {
            "pred" => Pred,
            "b8" => B8,
            "b16" => B16,
            "b32" => B32,
            "b64" => B64,
            "b128" => B128,
            "u8" => U8,
            "u16" => U16,
            "u32" => U32,
            "u64" => U64,
            "s8" => S8,
            "s16" => S16,
            "s32" => S32,
            "s64" => S64,
            "f16" => F16,
            "f16x2" => F16x2,
            "bf16" => Bf16,
            "bf16x2" => Bf16x2,
            "f32" => F32,
            "f64" => F64,
            "u16x2" => U16x2,
            "s16x2" => S16x2,
            _ => return None,
        })
    }

    /// Width in bits of the value (`.pred` is 1).
    #[inline]
    pub fn bits(self) -> u32 {
        if self == ScalarType::Pred {
            1
        } else {
            self.size() * 8
        }
    }

    /// All-ones mask of the value's width.
    #[inline]
    pub fn mask(self) -> u64 {
        match self.bits() {
            64.. => u64::MAX,
            b => (1u64 << b) - 1,
        }
    }

    #[inline]
    pub fn is_float(self) -> bool {
        use ScalarType::*;
        matches!(self, F16 | F16x2 | Bf16 | Bf16x2 | F32 | F64)
    }

    #[inline]
    pub fn is_signed(self) -> bool {
        use ScalarType::*;
        matches!(self, S8 | S16 | S32 | S64)
    }

    /// Sign- or zero-extends the low `bits()` of `v` to 64 bits according to the type.
    #[inline]
    pub fn extend(self, v: u64) -> u64 {
        let b = self.bits();
        if b >= 64 {
            v
        } else if self.is_signed() {
            (((v << (64 - b)) as i64) >> (64 - b)) as u64
        } else {
            v & self.mask()
        }
    }

    /// Size in bytes (`.pred` counts as 1 for layout purposes).
    pub fn size(self) -> u32 {
        use ScalarType::*;
        match self {
            Pred | B8 | U8 | S8 => 1,
            B16 | U16 | S16 | F16 | Bf16 => 2,
            B32 | U32 | S32 | F32 | F16x2 | Bf16x2 | U16x2 | S16x2 => 4,
            B64 | U64 | S64 | F64 => 8,
            B128 => 16,
        }
    }
}

/// A variable declaration: module scope (`.global`, `.const`, `.shared`) or function scope
/// (`.local`, `.shared`, `.param` inside a body).
///
/// `.extern .shared .align 16 .b8 smem[];` has `array_dims == [None]`.
#[derive(Clone, Debug, PartialEq)]
pub struct VarDecl {
    pub linkage: Option<Linkage>,
    pub space: StateSpace,
    pub align: Option<u32>,
    /// `.v2` / `.v4` element vectors (`.global .v4 .f32 x;`), 1 otherwise.
    pub vector: u32,
    pub ty: ScalarType,
    pub name: Spanned<String>,
    /// One entry per `[...]`; `None` for an empty `[]`.
    pub array_dims: Vec<Option<u64>>,
    pub init: Option<Initializer>,
    pub span: Span,
}

/// An initializer: a scalar expression or a brace list (nested for multi-dimensional arrays).
#[derive(Clone, Debug, PartialEq)]
pub enum Initializer {
    Expr(Spanned<InitExpr>),
    List(Vec<Initializer>),
}

/// A constant expression in an initializer.
#[derive(Clone, Debug, PartialEq)]
pub enum InitExpr {
    Int(i128),
    /// A float literal, as the bits of an f64 (`0d...`, decimal) or an f32 (`0f...`).
    Float(FloatLit),
    /// The address of a symbol, optionally wrapped in `generic(...)`, plus a byte offset.
    SymbolAddr {
        name: String,
        generic: bool,
        offset: i64,
    },
}

/// A floating-point literal exactly as written: `0f3F800000` is `F32(0x3F800000)`, `0d...`
/// is `F64(bits)`, and a decimal literal such as `1.5` is `F64(1.5f64.to_bits())`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloatLit {
    F32(u32),
    F64(u64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FunctionKind {
    /// `.entry`: a kernel.
    Entry,
    /// `.func`: a device function.
    Func,
}

/// Performance-tuning directives after a function's parameter list.
#[derive(Clone, Debug, PartialEq)]
pub enum Performance {
    MaxNtid(Vec<u32>),
    ReqNtid(Vec<u32>),
    MinNctaPerSm(u32),
    MaxNctaPerSm(u32),
    MaxNreg(u32),
    /// `.noreturn`, `.pragma "..."` and other attributes that do not change semantics.
    Other(String),
}

/// `.entry` or `.func`, with or without a body (a prototype declaration has none).
#[derive(Clone, Debug, PartialEq)]
pub struct Function {
    pub linkage: Option<Linkage>,
    pub kind: FunctionKind,
    pub name: Spanned<String>,
    /// `.func (.param .b32 func_retval0) name(...)`: the return parameters.
    pub returns: Vec<ParamDecl>,
    pub params: Vec<ParamDecl>,
    pub performance: Vec<Spanned<Performance>>,
    pub body: Option<Block>,
    pub span: Span,
}

/// A parameter of a function: `.param .u64 .ptr .global .align 8 name`, `.param .align 4 .b8
/// name[12]`, or `.reg .b32 name` (register parameters of `.func`).
#[derive(Clone, Debug, PartialEq)]
pub struct ParamDecl {
    pub space: StateSpace,
    pub align: Option<u32>,
    pub ty: ScalarType,
    pub name: Spanned<String>,
    /// `name[12]` → `Some(12)`.
    pub array_len: Option<u64>,
    /// `.ptr .global` / `.ptr .shared` etc.: the space the pointer points into, if declared.
    pub ptr_space: Option<StateSpace>,
    pub span: Span,
}

/// A brace-delimited sequence of statements (a function body or a nested `{ ... }` scope).
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    pub statements: Vec<Statement>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Statement {
    /// `.reg .b32 %r<10>;` or `.reg .f32 %f1, %f2;`.
    Reg(RegDecl),
    /// `.local`, `.shared` or `.param` declared inside a body.
    Var(VarDecl),
    /// `$L__BB0_2:`.
    Label(Spanned<String>),
    Instruction(Instruction),
    /// A nested `{ ... }` scope.
    Block(Block),
    /// `.pragma "nounroll";` and similar; kept for completeness.
    Pragma(Spanned<String>),
    /// `ts: .branchtargets L1, L2;` or `ct: .calltargets f, g;`: a named list of labels
    /// (for `brx.idx`) or functions (for an indirect `call`).
    Targets(TargetList),
    /// `proto: .callprototype (.param .b32 _) _ (.param .b32 _);`: the signature an
    /// indirect `call` names when its possible callees are not listed.
    CallPrototype(CallPrototype),
}

/// Whether a [`TargetList`] names branch targets or call targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetKind {
    Branch,
    Call,
}

/// `name: .branchtargets L1, L2, ...;` or `name: .calltargets f, g, ...;`.
#[derive(Clone, Debug, PartialEq)]
pub struct TargetList {
    pub kind: TargetKind,
    pub name: Spanned<String>,
    pub targets: Vec<Spanned<String>>,
    pub span: Span,
}

/// `name: .callprototype (returns) _ (params);` (parameter names are the placeholder `_`).
#[derive(Clone, Debug, PartialEq)]
pub struct CallPrototype {
    pub name: Spanned<String>,
    pub returns: Vec<ParamDecl>,
    pub params: Vec<ParamDecl>,
    pub span: Span,
}

/// A register declaration. `.reg .b32 %r<10>;` declares `%r0` … `%r9`.
#[derive(Clone, Debug, PartialEq)]
pub struct RegDecl {
    pub ty: ScalarType,
    /// `.reg .v4 .f32 %v;` → 4; 1 otherwise.
    pub vector: u32,
    pub names: Vec<RegName>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct RegName {
    pub name: Spanned<String>,
    /// `%r<10>` → `Some(10)`: the declaration stands for `%r0` … `%r9`.
    pub range: Option<u32>,
}

/// `@%p1` or `@!%p1` in front of an instruction.
#[derive(Clone, Debug, PartialEq)]
pub struct Guard {
    pub negated: bool,
    pub pred: Spanned<String>,
}

/// One instruction, syntactically: `@!%p1 ld.global.nc.v2.f32 {%f1, %f2}, [%rd3+8];` is
/// guard `!%p1`, opcode `ld`, modifiers `[global, nc, v2, f32]` and two operands.
#[derive(Clone, Debug, PartialEq)]
pub struct Instruction {
    pub guard: Option<Guard>,
    pub opcode: Spanned<String>,
    /// The dot-separated modifiers after the opcode, without their dots, in source order.
    pub modifiers: Vec<Spanned<String>>,
    pub operands: Vec<Operand>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Operand {
    pub kind: OperandKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum OperandKind {
    /// A register, special register, label, variable, parameter or function name. A trailing
    /// component selector is split off: `%tid.x` is `Ident { name: "%tid", component: Some('x') }`.
    /// Components are `x y z w` and `r g b a`.
    Ident {
        name: String,
        component: Option<char>,
    },
    /// An integer literal (decimal, `0x` hex, `0` octal, `0b` binary, optional `U` suffix),
    /// with a leading `-` folded in.
    Int(i128),
    Float(FloatLit),
    /// `[base]`, `[base+imm]`, `[base+-imm]`, `[imm]`.
    Address {
        base: Option<AddressBase>,
        offset: i64,
    },
    /// `{%f1, %f2, _, %f4}`.
    Vector(Vec<Operand>),
    /// `(retval0)` or `(param0, param1)` in a `call`.
    List(Vec<Operand>),
    /// The sink `_`.
    Sink,
    /// `!%p2` as a source operand (the `c` operand of `setp.*.and`, etc.).
    Not(Box<Operand>),
    /// `%p1|%p2`: the two destinations of `setp` / the `p|q` of some instructions.
    PredPair(Spanned<String>, Spanned<String>),
    /// `[%rd4, {%f1, %f2}]`: a bracketed list of several operands, as texture, surface and
    /// tensor-map instructions write them (`tex.2d`, `suld.b.2d`, `cp.async.bulk.tensor`).
    /// The first element is the handle (`Ident`, or `Int` for a literal address), the rest
    /// are written as they appear (usually a `Vector` of coordinates). (Added by the parser.)
    AddressTuple(Vec<Operand>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct AddressBase {
    pub name: String,
    pub span: Span,
}
