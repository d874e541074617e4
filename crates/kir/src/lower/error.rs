//! Lowering errors: everything Switchyard cannot execute, found before execution starts.

use ptx::Span;

/// One problem found while lowering; every variant carries the span it is about.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LowerError {
    #[error("unsupported instruction `{name}`")]
    UnsupportedInstruction { name: String, span: Span },
    #[error("unsupported modifier `.{modifier}` on `{inst}`")]
    UnsupportedModifier {
        inst: String,
        modifier: String,
        span: Span,
    },
    #[error("`{inst}` needs {what}")]
    MissingModifier {
        inst: String,
        what: &'static str,
        span: Span,
    },
    #[error("`{inst}` expects {expected} operands, found {found}")]
    OperandCount {
        inst: String,
        expected: String,
        found: usize,
        span: Span,
    },
    #[error("bad operand for `{inst}`: expected {expected}")]
    BadOperand {
        inst: String,
        expected: &'static str,
        span: Span,
    },
    #[error("unknown identifier `{name}`")]
    UnknownIdentifier { name: String, span: Span },
    #[error("unknown label `{name}`")]
    UnknownLabel { name: String, span: Span },
    #[error("call to unknown or bodiless function `{name}`")]
    UnknownFunction { name: String, span: Span },
    #[error("recursive call to `{name}` cannot be inlined")]
    Recursion { name: String, span: Span },
    #[error("`{name}` is declared twice in the same scope")]
    Redeclared { name: String, span: Span },
    #[error("unsupported declaration: {what}")]
    UnsupportedDeclaration { what: String, span: Span },
    /// A register, special register or literal that the instruction's type rules reject.
    #[error("operand {index} of `{inst}` is `{operand}`, {found}; expected {expected}")]
    OperandType {
        inst: String,
        /// 1-based, destinations first, as written.
        index: usize,
        operand: String,
        /// What the operand is (`a .b64 register`).
        found: String,
        expected: String,
        span: Span,
    },
    #[error("`.{ty}` is not a valid type for `{inst}` (expected one of {allowed})")]
    InstructionType {
        inst: String,
        ty: String,
        allowed: String,
        span: Span,
    },
    #[error("integer literal {value} does not fit `.{ty}` in `{inst}`")]
    ImmediateRange {
        inst: String,
        value: i128,
        ty: String,
        span: Span,
    },
    /// What the PTX ISA forbids and `ptxas` rejects (a guard that is not a predicate, a
    /// store to `.const`, an alignment that is not a power of two, ...).
    #[error("{what}")]
    Invalid { what: String, span: Span },
    #[error("unsupported `.address_size {size}`: Switchyard executes 64-bit PTX only")]
    AddressSize { size: u32, span: Span },
    #[error("too large: {size} {what}; the limit is {limit}")]
    TooLarge {
        what: &'static str,
        size: u64,
        limit: u64,
        span: Span,
    },
}

impl LowerError {
    /// The source range the error is about.
    pub fn span(&self) -> Span {
        use LowerError::*;
        match self {
            UnsupportedInstruction { span, .. }
            | UnsupportedModifier { span, .. }
            | MissingModifier { span, .. }
            | OperandCount { span, .. }
            | BadOperand { span, .. }
            | UnknownIdentifier { span, .. }
            | UnknownLabel { span, .. }
            | UnknownFunction { span, .. }
            | Recursion { span, .. }
            | Redeclared { span, .. }
            | UnsupportedDeclaration { span, .. }
            | OperandType { span, .. }
            | InstructionType { span, .. }
            | ImmediateRange { span, .. }
            | Invalid { span, .. }
            | AddressSize { span, .. }
            | TooLarge { span, .. } => *span,
        }
    }
}

/// Something `ptxas` accepts and Switchyard takes as `ptxas` does, but that is likely a
/// mistake: an integer literal that does not fit its type, wrapped to it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what}")]
pub struct LowerWarning {
    pub what: String,
    pub span: Span,
}

/// The warning for integer literal `value` that does not fit `ty` in `inst`, wrapped to
/// `bits`; `None` when it is too large for even that (it stays an error).
pub(super) fn wrapped_literal(
    inst: &str,
    value: i128,
    ty: &str,
    bits: u64,
    span: Span,
) -> Option<LowerWarning> {
    // ptxas wraps a literal to its type; beyond 64 bits it reports an overflow (from about
    // 2^67), and Switchyard refuses anything that does not fit 64 bits.
    if !(-(1i128 << 64) < value && value < (1i128 << 64)) {
        return None;
    }
    Some(LowerWarning {
        what: format!(
            "integer literal {value} does not fit `.{ty}` in `{inst}`: taken as {bits:#x} (wrapped to the type, as ptxas does)"
        ),
        span,
    })
}
