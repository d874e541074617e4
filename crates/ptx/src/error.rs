//! Errors of the lexer and the parser.
//!
//! Every error carries the [`Span`] of the offending text so that a caller holding the
//! [`SourceFile`](crate::SourceFile) can print `file:line:col`. The `Display` text is a plain
//! sentence ("expected `;` after instruction, found `}`") meant to be shown as-is.

use crate::span::Span;

/// Why a PTX text could not be turned into a [`Module`](crate::ast::Module).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// A character that starts no PTX token (`#`, `%` on its own, a non-ASCII letter, ...).
    #[error("unexpected character `{ch}`")]
    UnexpectedChar { ch: char, span: Span },

    /// `/*` without a matching `*/`.
    #[error("unterminated block comment")]
    UnterminatedComment { span: Span },

    /// `"` without a closing `"` on the same line.
    #[error("unterminated string literal")]
    UnterminatedString { span: Span },

    /// A malformed numeric literal: `0x`, `09`, `0f3F80`, `12ab`, ...
    #[error("invalid number `{text}`")]
    InvalidNumber { text: String, span: Span },

    /// A well-formed number too large for where it stands (`.align 99999999999`).
    #[error("number `{text}` is out of range for {context}")]
    NumberOutOfRange {
        text: String,
        context: String,
        span: Span,
    },

    /// The parser needed one thing and found another token.
    #[error("expected {expected}, found {found}")]
    UnexpectedToken {
        expected: String,
        found: String,
        span: Span,
    },

    /// The text ended where more was needed.
    #[error("expected {expected}, found end of file")]
    UnexpectedEof { expected: String, span: Span },

    /// A `.type` that is not a PTX fundamental type (`.reg .u33 %r;`).
    #[error("unknown type `.{name}`")]
    UnknownType { name: String, span: Span },

    /// A directive that is not allowed (or not known) where it stands.
    #[error("unexpected directive `.{name}` {context}")]
    UnexpectedDirective {
        name: String,
        context: String,
        span: Span,
    },

    /// Blocks, vectors or initializer lists nested deeper than the parser allows.
    #[error("nesting deeper than {limit} levels")]
    NestingTooDeep { limit: u32, span: Span },
}

impl ParseError {
    /// The source range the error points at.
    pub fn span(&self) -> Span {
        match self {
            ParseError::UnexpectedChar { span, .. }
            | ParseError::UnterminatedComment { span }
            | ParseError::UnterminatedString { span }
            | ParseError::InvalidNumber { span, .. }
            | ParseError::NumberOutOfRange { span, .. }
            | ParseError::UnexpectedToken { span, .. }
            | ParseError::UnexpectedEof { span, .. }
            | ParseError::UnknownType { span, .. }
            | ParseError::UnexpectedDirective { span, .. }
            | ParseError::NestingTooDeep { span, .. } => *span,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_a_sentence() {
        let e = ParseError::UnexpectedToken {
            expected: "`;` after instruction".into(),
            found: "`}`".into(),
            span: Span::new(3, 4),
        };
        assert_eq!(e.to_string(), "expected `;` after instruction, found `}`");
        assert_eq!(e.span(), Span::new(3, 4));
        let e = ParseError::UnexpectedEof {
            expected: "`}`".into(),
            span: Span::new(9, 9),
        };
        assert_eq!(e.to_string(), "expected `}`, found end of file");
    }
}
