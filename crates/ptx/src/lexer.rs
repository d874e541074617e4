//! PTX text → a flat list of tokens with spans.
//!
//! The lexer works on bytes: everything PTX means outside comments and string literals is
//! ASCII, so any other byte there is an [`ParseError::UnexpectedChar`]. Tokens keep no text
//! of their own; the parser slices it out of the source with the token's span, which keeps
//! lexing allocation-free apart from the token vector.
//!
//! Two layout facts survive lexing because PTX grammar depends on them:
//! * [`Token::adjacent`] — no whitespace or comment separates the token from the previous one.
//!   It tells `%tid.x` (a register and its component) from `%tid .x`.
//! * [`Token::line_start`] — a newline separates the token from the previous one. `.loc` and
//!   `.file` have no terminating `;`, so the parser skips them up to the end of their line.

use crate::ast::FloatLit;
use crate::error::ParseError;
use crate::span::Span;

/// What a token is. Identifier, directive and string tokens get their text from the source.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TokenKind {
    /// `%r1`, `$L__BB0_2`, `_Z3fooPf_param_0`, `ld`, `_`.
    Ident,
    /// `.version`, `.u32`, `.x`, `.shared::cta`, `.2d`: a dot immediately followed by a word.
    /// The token's text includes the dot.
    Directive,
    /// An integer literal, any base, optional `U` suffix; the sign is a separate `-` token.
    /// [`Token::int_value`] gives its value.
    Int,
    /// `0f...`, `0d...` or a decimal float such as `1.5` / `1e-5`; [`Token::float_value`]
    /// gives its value.
    Float,
    /// `"..."`; the token's text includes the quotes.
    Str,
    Comma,
    Semicolon,
    Colon,
    LBrace,
    RBrace,
    LBracket,
    RBracket,
    LParen,
    RParen,
    Lt,
    Gt,
    Plus,
    Minus,
    Bang,
    At,
    Pipe,
    Eq,
    /// End of input; always the last token, with an empty span at the end of the source.
    Eof,
}

/// One token of PTX text. Deliberately small (12 bytes, no payload): a megabyte of PTX is a
/// quarter of a million tokens, and numbers are re-read from their text when the parser
/// consumes them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Token {
    pub kind: TokenKind,
    pub span: Span,
    /// Nothing (no whitespace, no comment) between this token and the previous one.
    pub adjacent: bool,
    /// A newline lies between this token and the previous one (true for the first token).
    pub line_start: bool,
}

impl Token {
    /// The token's text in `source` (empty for [`TokenKind::Eof`]).
    pub fn text<'a>(&self, source: &'a str) -> &'a str {
        source
            .get(self.span.start as usize..self.span.end as usize)
            .unwrap_or("")
    }

    /// The value of an [`TokenKind::Int`] token (`None` for any other token).
    pub fn int_value(&self, source: &str) -> Option<u128> {
        match (self.kind, number_value(self.text(source))) {
            (TokenKind::Int, Some(Number::Int(v))) => Some(v),
            _ => None,
        }
    }

    /// The value of a [`TokenKind::Float`] token (`None` for any other token).
    pub fn float_value(&self, source: &str) -> Option<FloatLit> {
        match (self.kind, number_value(self.text(source))) {
            (TokenKind::Float, Some(Number::Float(f))) => Some(f),
            _ => None,
        }
    }
}

/// The value of a numeric literal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Number {
    Int(u128),
    Float(FloatLit),
}

/// Reads `text` as one numeric literal; `None` unless all of it is a valid number.
pub fn number_value(text: &str) -> Option<Number> {
    if !text.as_bytes().first()?.is_ascii_digit() {
        return None;
    }
    let mut lexer = Lexer {
        src: text,
        bytes: text.as_bytes(),
        pos: 0,
    };
    let n = lexer.number().ok()?;
    (lexer.pos == text.len()).then_some(n)
}

/// Characters that may continue an identifier (and the word of a directive).
fn is_ident_continue(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$'
}

/// Splits `source` into tokens, ending with one [`TokenKind::Eof`].
pub fn tokenize(source: &str) -> Result<Vec<Token>, ParseError> {
    Lexer {
        src: source,
        bytes: source.as_bytes(),
        pos: 0,
    }
    .run()
}

struct Lexer<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl Lexer<'_> {
    fn at(&self, i: usize) -> u8 {
        self.bytes.get(i).copied().unwrap_or(0)
    }

    fn run(mut self) -> Result<Vec<Token>, ParseError> {
        // NVRTC output averages well over 4 bytes per token; reserve to avoid regrowth.
        let mut tokens = Vec::with_capacity(self.bytes.len() / 4 + 1);
        let mut line_start = true;
        let mut adjacent = false;
        loop {
            // Whitespace and comments.
            let b = self.at(self.pos);
            match b {
                b'\n' => {
                    line_start = true;
                    adjacent = false;
                    self.pos += 1;
                    continue;
                }
                b' ' | b'\t' | b'\r' | 0x0b | 0x0c => {
                    adjacent = false;
                    self.pos += 1;
                    continue;
                }
                b'/' if self.at(self.pos + 1) == b'/' => {
                    while self.pos < self.bytes.len() && self.at(self.pos) != b'\n' {
                        self.pos += 1;
                    }
                    adjacent = false;
                    continue;
                }
                b'/' if self.at(self.pos + 1) == b'*' => {
                    let start = self.pos;
                    let body = self.bytes.get(start + 2..).unwrap_or(&[]);
                    match body.windows(2).position(|w| w == b"*/") {
                        Some(i) => {
                            let comment = &body[..i];
                            if comment.contains(&b'\n') {
                                line_start = true;
                            }
                            self.pos = start + 2 + i + 2;
                        }
                        None => {
                            return Err(ParseError::UnterminatedComment {
                                span: Span::new(start, start + 2),
                            })
                        }
                    }
                    adjacent = false;
                    continue;
                }
                _ => {}
            }
            if self.pos >= self.bytes.len() {
                let end = self.bytes.len();
                tokens.push(Token {
                    kind: TokenKind::Eof,
                    span: Span::new(end, end),
                    adjacent,
                    line_start,
                });
                return Ok(tokens);
            }
            let start = self.pos;
            let kind = self.token(b)?;
            tokens.push(Token {
                kind,
                span: Span::new(start, self.pos),
                adjacent: adjacent && !tokens.is_empty(),
                line_start,
            });
            line_start = false;
            adjacent = true;
        }
    }

    /// Lexes the token starting at `self.pos` (whose first byte is `b`), advancing past it.
    fn token(&mut self, b: u8) -> Result<TokenKind, ParseError> {
        let start = self.pos;
        let punct = match b {
            b',' => Some(TokenKind::Comma),
            b';' => Some(TokenKind::Semicolon),
            b':' => Some(TokenKind::Colon),
            b'{' => Some(TokenKind::LBrace),
            b'}' => Some(TokenKind::RBrace),
            b'[' => Some(TokenKind::LBracket),
            b']' => Some(TokenKind::RBracket),
            b'(' => Some(TokenKind::LParen),
            b')' => Some(TokenKind::RParen),
            b'<' => Some(TokenKind::Lt),
            b'>' => Some(TokenKind::Gt),
            b'+' => Some(TokenKind::Plus),
            b'-' => Some(TokenKind::Minus),
            b'!' => Some(TokenKind::Bang),
            b'@' => Some(TokenKind::At),
            b'|' => Some(TokenKind::Pipe),
            b'=' => Some(TokenKind::Eq),
            _ => None,
        };
        if let Some(kind) = punct {
            self.pos += 1;
            return Ok(kind);
        }
        match b {
            b'a'..=b'z' | b'A'..=b'Z' => {
                self.skip_ident_continue();
                Ok(TokenKind::Ident)
            }
            b'_' | b'$' | b'%' => {
                self.pos += 1;
                let rest = self.pos;
                self.skip_ident_continue();
                // `_` alone is the sink operand; `%` and `$` alone start nothing.
                if self.pos == rest && b != b'_' {
                    return Err(self.unexpected_char(start));
                }
                Ok(TokenKind::Ident)
            }
            b'.' if is_ident_continue(self.at(self.pos + 1)) => {
                self.pos += 1;
                self.skip_ident_continue();
                // `.shared::cta`, `.L2::128B`: scoped modifiers are one token.
                while self.at(self.pos) == b':'
                    && self.at(self.pos + 1) == b':'
                    && is_ident_continue(self.at(self.pos + 2))
                {
                    self.pos += 2;
                    self.skip_ident_continue();
                }
                Ok(TokenKind::Directive)
            }
            b'0'..=b'9' => Ok(match self.number()? {
                Number::Int(_) => TokenKind::Int,
                Number::Float(_) => TokenKind::Float,
            }),
            b'"' => self.string(),
            _ => Err(self.unexpected_char(start)),
        }
    }

    fn skip_ident_continue(&mut self) {
        while is_ident_continue(self.at(self.pos)) {
            self.pos += 1;
        }
    }

    fn unexpected_char(&self, at: usize) -> ParseError {
        let ch = self
            .src
            .get(at..)
            .and_then(|s| s.chars().next())
            .unwrap_or('\u{fffd}');
        ParseError::UnexpectedChar {
            ch,
            span: Span::new(at, at + ch.len_utf8()),
        }
    }

    fn string(&mut self) -> Result<TokenKind, ParseError> {
        let start = self.pos;
        self.pos += 1;
        loop {
            match self.at(self.pos) {
                b'"' => {
                    self.pos += 1;
                    return Ok(TokenKind::Str);
                }
                b'\\' if self.pos + 1 < self.bytes.len() && self.at(self.pos + 1) != b'\n' => {
                    self.pos += 2
                }
                b'\n' => break,
                _ if self.pos >= self.bytes.len() => break,
                _ => self.pos += 1,
            }
        }
        Err(ParseError::UnterminatedString {
            span: Span::new(start, self.pos),
        })
    }

    /// A numeric literal. The whole alphanumeric run is consumed either way, so that `12ab`
    /// is one invalid number rather than `12` followed by an identifier.
    fn number(&mut self) -> Result<Number, ParseError> {
        let start = self.pos;
        let first = self.at(start);
        let second = self.at(start + 1);
        let kind = if first == b'0' && matches!(second, b'f' | b'F' | b'd' | b'D') {
            self.pos += 2;
            let digits = self.pos;
            self.skip_ident_continue();
            let hex = self.src.get(digits..self.pos).unwrap_or("");
            let want = if matches!(second, b'f' | b'F') { 8 } else { 16 };
            if hex.len() != want || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(self.invalid_number(start));
            }
            if want == 8 {
                u32::from_str_radix(hex, 16)
                    .ok()
                    .map(|v| Number::Float(FloatLit::F32(v)))
            } else {
                u64::from_str_radix(hex, 16)
                    .ok()
                    .map(|v| Number::Float(FloatLit::F64(v)))
            }
        } else if first == b'0' && matches!(second, b'x' | b'X' | b'b' | b'B') {
            self.pos += 2;
            let radix = if matches!(second, b'x' | b'X') { 16 } else { 2 };
            let digits = self.pos;
            while (self.at(self.pos) as char).is_digit(radix) {
                self.pos += 1;
            }
            let end = self.pos;
            if matches!(self.at(self.pos), b'U' | b'u') {
                self.pos += 1;
            }
            if end == digits || is_ident_continue(self.at(self.pos)) {
                None
            } else {
                self.parse_int(digits, end, radix)
            }
        } else {
            while self.at(self.pos).is_ascii_digit() {
                self.pos += 1;
            }
            let int_end = self.pos;
            let mut is_float = false;
            if self.at(self.pos) == b'.' && self.at(self.pos + 1).is_ascii_digit() {
                is_float = true;
                self.pos += 1;
                while self.at(self.pos).is_ascii_digit() {
                    self.pos += 1;
                }
            }
            if matches!(self.at(self.pos), b'e' | b'E') {
                let sign = usize::from(matches!(self.at(self.pos + 1), b'+' | b'-'));
                if self.at(self.pos + 1 + sign).is_ascii_digit() {
                    is_float = true;
                    self.pos += 1 + sign;
                    while self.at(self.pos).is_ascii_digit() {
                        self.pos += 1;
                    }
                }
            }
            if is_float {
                if is_ident_continue(self.at(self.pos)) {
                    None
                } else {
                    self.src
                        .get(start..self.pos)
                        .and_then(|t| t.parse::<f64>().ok())
                        .map(|v| Number::Float(FloatLit::F64(v.to_bits())))
                }
            } else {
                if matches!(self.at(self.pos), b'U' | b'u') {
                    self.pos += 1;
                }
                if is_ident_continue(self.at(self.pos)) {
                    None
                } else if first == b'0' && int_end > start + 1 {
                    // A leading zero means octal, as in C.
                    self.parse_int(start + 1, int_end, 8)
                } else {
                    self.parse_int(start, int_end, 10)
                }
            }
        };
        match kind {
            Some(k) => Ok(k),
            None => Err(self.invalid_number(start)),
        }
    }

    fn parse_int(&self, from: usize, to: usize, radix: u32) -> Option<Number> {
        let digits = self.src.get(from..to)?;
        u128::from_str_radix(digits, radix).ok().map(Number::Int)
    }

    fn invalid_number(&mut self, start: usize) -> ParseError {
        // Take the rest of the word so the error shows the whole malformed literal.
        while is_ident_continue(self.at(self.pos)) || self.at(self.pos) == b'.' {
            self.pos += 1;
        }
        ParseError::InvalidNumber {
            text: self.src.get(start..self.pos).unwrap_or("").to_string(),
            span: Span::new(start, self.pos),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbers(src: &str) -> Vec<Number> {
        tokenize(src)
            .unwrap()
            .iter()
            .filter(|t| t.kind != TokenKind::Eof)
            .map(|t| {
                let n = number_value(t.text(src)).unwrap();
                match n {
                    Number::Int(v) => assert_eq!(t.int_value(src), Some(v)),
                    Number::Float(f) => assert_eq!(t.float_value(src), Some(f)),
                }
                n
            })
            .collect()
    }

    fn texts(src: &str) -> Vec<String> {
        tokenize(src)
            .unwrap()
            .iter()
            .map(|t| t.text(src).to_string())
            .collect()
    }

    #[test]
    fn identifiers_and_directives() {
        let src = "ld.global.nc.v4.f32 %tid.x $L__BB0_2 _Z3fooPf_param_0 _ .shared::cta .2d";
        assert_eq!(
            texts(src),
            [
                "ld",
                ".global",
                ".nc",
                ".v4",
                ".f32",
                "%tid",
                ".x",
                "$L__BB0_2",
                "_Z3fooPf_param_0",
                "_",
                ".shared::cta",
                ".2d",
                ""
            ]
        );
        let toks = tokenize(src).unwrap();
        let adj: Vec<bool> = toks.iter().map(|t| t.adjacent).collect();
        assert_eq!(
            adj,
            [false, true, true, true, true, false, true, false, false, false, false, false, true]
        );
        assert_eq!(toks[0].kind, TokenKind::Ident);
        assert_eq!(toks[1].kind, TokenKind::Directive);
    }

    #[test]
    fn integers_in_every_base() {
        use Number::Int;
        assert_eq!(
            numbers("0 42 0x1F 0XffU 017 0b101 7U 18446744073709551615"),
            [
                Int(0),
                Int(42),
                Int(31),
                Int(255),
                Int(15),
                Int(5),
                Int(7),
                Int(u64::MAX as u128),
            ]
        );
    }

    #[test]
    fn floats() {
        use Number::Float;
        assert_eq!(
            numbers("0f3F800000 0dBFF0000000000000 1.5 1e-5 2.0E+3"),
            [
                Float(FloatLit::F32(0x3F80_0000)),
                Float(FloatLit::F64(0xBFF0_0000_0000_0000)),
                Float(FloatLit::F64(1.5f64.to_bits())),
                Float(FloatLit::F64(1e-5f64.to_bits())),
                Float(FloatLit::F64(2000f64.to_bits())),
            ]
        );
    }

    #[test]
    fn bad_numbers() {
        for (src, text) in [
            ("0x", "0x"),
            ("09", "09"),
            ("0f3F80", "0f3F80"),
            ("0f3F8000001", "0f3F8000001"),
            ("12ab", "12ab"),
            ("0d00", "0d00"),
            ("1.5f", "1.5f"),
            ("0b2", "0b2"),
            (
                "999999999999999999999999999999999999999999",
                "999999999999999999999999999999999999999999",
            ),
        ] {
            match tokenize(src) {
                Err(ParseError::InvalidNumber { text: t, span }) => {
                    assert_eq!(t, text, "{src}");
                    assert_eq!(span, Span::new(0, text.len()));
                }
                other => panic!("{src}: {other:?}"),
            }
        }
    }

    #[test]
    fn comments_and_line_starts() {
        let src = "a // x\n/* multi\nline */ b /* c */c\n\"s\\\"x\" ";
        let toks = tokenize(src).unwrap();
        let t: Vec<_> = toks
            .iter()
            .map(|t| (t.text(src), t.line_start, t.adjacent))
            .collect();
        assert_eq!(
            t,
            [
                ("a", true, false),
                ("b", true, false),
                ("c", false, false),
                ("\"s\\\"x\"", true, false),
                ("", false, false)
            ]
        );
    }

    #[test]
    fn lexical_errors() {
        assert_eq!(
            tokenize("a /* never closed"),
            Err(ParseError::UnterminatedComment {
                span: Span::new(2, 4)
            })
        );
        assert_eq!(
            tokenize("x \"abc\n\""),
            Err(ParseError::UnterminatedString {
                span: Span::new(2, 6)
            })
        );
        assert_eq!(
            tokenize("a # b"),
            Err(ParseError::UnexpectedChar {
                ch: '#',
                span: Span::new(2, 3)
            })
        );
        assert_eq!(
            tokenize("a é"),
            Err(ParseError::UnexpectedChar {
                ch: 'é',
                span: Span::new(2, 4)
            })
        );
        assert!(matches!(
            tokenize("% x"),
            Err(ParseError::UnexpectedChar { ch: '%', .. })
        ));
        assert!(matches!(
            tokenize(". x"),
            Err(ParseError::UnexpectedChar { ch: '.', .. })
        ));
    }
}
