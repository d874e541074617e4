//! Recursive-descent parser: tokens from [`crate::lexer`] → [`crate::ast::Module`].
//!
//! The parser accepts what NVRTC and nvcc emit (PTX ISA 6.0–9.x) and keeps instructions in
//! their written form: any identifier is an opcode and any dot-word a modifier, because
//! deciding what they mean is the lowering's job. Debug information (`.file`, `.loc`,
//! `.section .debug_*`) is parsed to its exact syntax and dropped (a `.loc` ends with its
//! last operand, not at the end of the line); so are the few body directives the tree has no place for
//! (`.callprototype`, `.branchtargets`, `.calltargets`).
//!
//! It never panics: tokens are read through a bounds-checked cursor that sticks at the final
//! `Eof`, and recursion (nested blocks, vector operands, initializer lists) is capped at
//! [`MAX_DEPTH`] so that hostile input cannot overflow the stack.

use crate::ast::*;
use crate::error::ParseError;
use crate::lexer::{tokenize, Token, TokenKind};
use crate::span::Span;

/// Deepest nesting of blocks, vector operands and initializer lists. Real PTX stays below 5.
pub const MAX_DEPTH: u32 = 64;

/// Parses a whole PTX module.
pub fn parse(source: &str) -> std::result::Result<Module, ParseError> {
    let toks = tokenize(source)?;
    let end = source.len();
    let eof = toks.last().copied().unwrap_or(Token {
        kind: TokenKind::Eof,
        span: Span::new(end, end),
        adjacent: false,
        line_start: true,
    });
    let mut p = Parser {
        src: source,
        toks,
        pos: 0,
        eof,
        depth: 0,
    };
    p.module()
}

type Result<T> = std::result::Result<T, ParseError>;

struct Parser<'a> {
    src: &'a str,
    toks: Vec<Token>,
    pos: usize,
    eof: Token,
    depth: u32,
}

/// The highest PTX ISA major version that exists.
const MAX_PTX_MAJOR: u32 = 9;

/// The architectures a `.target` may name (`sm_90` and, with suffix letters, `sm_90a`,
/// `sm_100f`), as the PTX ISA lists them.
const SM_ARCHITECTURES: &[u32] = &[
    10, 11, 12, 13, 20, 21, 30, 32, 35, 37, 50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 88, 89,
    90, 100, 101, 103, 110, 120, 121,
];

/// The options a `.target` may give besides the architecture.
const TARGET_OPTIONS: &[&str] = &[
    "texmode_unified",
    "texmode_independent",
    "debug",
    "map_f64_to_f32",
];

fn is_target_name(name: &str) -> bool {
    if TARGET_OPTIONS.contains(&name) {
        return true;
    }
    let Some(arch) = name.strip_prefix("sm_") else {
        return false;
    };
    // ptxas reads the number and ignores the suffix letters (`sm_90a`, `sm_100f`; it takes
    // `sm_90ab` too), and `sm_070` is `sm_70` to it.
    let digits = arch.trim_end_matches(|c: char| c.is_ascii_lowercase());
    digits
        .parse::<u32>()
        .is_ok_and(|n| SM_ARCHITECTURES.contains(&n))
}

/// Describes a token for "found ..." in error messages.
fn describe(src: &str, tok: &Token) -> String {
    if tok.kind == TokenKind::Eof {
        return "end of file".to_string();
    }
    let text = tok.text(src);
    if text.chars().count() > 40 {
        let short: String = text.chars().take(40).collect();
        format!("`{short}...`")
    } else {
        format!("`{text}`")
    }
}

fn space_from_name(name: &str) -> Option<StateSpace> {
    Some(match name {
        "reg" => StateSpace::Reg,
        "sreg" => StateSpace::Sreg,
        "const" => StateSpace::Const,
        "global" => StateSpace::Global,
        "local" => StateSpace::Local,
        "param" => StateSpace::Param,
        "shared" => StateSpace::Shared,
        "tex" => StateSpace::Tex,
        _ => return None,
    })
}

fn linkage_from_name(name: &str) -> Option<Linkage> {
    Some(match name {
        "visible" => Linkage::Visible,
        "extern" => Linkage::Extern,
        "weak" => Linkage::Weak,
        "common" => Linkage::Common,
        _ => return None,
    })
}

fn vector_from_name(name: &str) -> Option<u32> {
    match name {
        "v2" => Some(2),
        "v4" => Some(4),
        "v8" => Some(8),
        _ => None,
    }
}

fn negate_float(f: FloatLit) -> FloatLit {
    match f {
        FloatLit::F32(bits) => FloatLit::F32(bits ^ 0x8000_0000),
        FloatLit::F64(bits) => FloatLit::F64(bits ^ 0x8000_0000_0000_0000),
    }
}

impl<'a> Parser<'a> {
    // ---------------------------------------------------------------- cursor

    fn peek(&self) -> Token {
        self.toks.get(self.pos).copied().unwrap_or(self.eof)
    }

    fn peek_at(&self, n: usize) -> Token {
        self.toks.get(self.pos + n).copied().unwrap_or(self.eof)
    }

    fn bump(&mut self) -> Token {
        let t = self.peek();
        if t.kind != TokenKind::Eof {
            self.pos += 1;
        }
        t
    }

    fn text(&self, tok: &Token) -> &'a str {
        tok.text(self.src)
    }

    /// The word of a directive token, without its dot (`""` for other tokens).
    fn dir_name(&self, tok: &Token) -> &'a str {
        if tok.kind == TokenKind::Directive {
            self.text(tok).get(1..).unwrap_or("")
        } else {
            ""
        }
    }

    fn at_dir(&self, name: &str) -> bool {
        let t = self.peek();
        t.kind == TokenKind::Directive && self.dir_name(&t) == name
    }

    fn at(&self, kind: TokenKind) -> bool {
        self.peek().kind == kind
    }

    fn eat(&mut self, kind: TokenKind) -> Option<Token> {
        if self.at(kind) {
            Some(self.bump())
        } else {
            None
        }
    }

    /// The error for "expected `expected`" at the current token.
    fn expected(&self, expected: &str) -> ParseError {
        let t = self.peek();
        if t.kind == TokenKind::Eof {
            ParseError::UnexpectedEof {
                expected: expected.to_string(),
                span: t.span,
            }
        } else {
            ParseError::UnexpectedToken {
                expected: expected.to_string(),
                found: describe(self.src, &t),
                span: t.span,
            }
        }
    }

    fn expect(&mut self, kind: TokenKind, expected: &str) -> Result<Token> {
        if self.at(kind) {
            Ok(self.bump())
        } else {
            Err(self.expected(expected))
        }
    }

    fn spanned(&self, tok: &Token) -> Spanned<String> {
        Spanned {
            value: self.text(tok).to_string(),
            span: tok.span,
        }
    }

    fn ident(&mut self, expected: &str) -> Result<Spanned<String>> {
        let t = self.expect(TokenKind::Ident, expected)?;
        Ok(self.spanned(&t))
    }

    /// End of the previously consumed token (for spans that stop before a `;`).
    fn prev_end(&self) -> u32 {
        self.pos
            .checked_sub(1)
            .and_then(|i| self.toks.get(i))
            .map_or(0, |t| t.span.end)
    }

    fn span_from(&self, start: Span) -> Span {
        Span {
            start: start.start,
            end: self.prev_end().max(start.start),
        }
    }

    fn enter(&mut self, span: Span) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ParseError::NestingTooDeep {
                limit: MAX_DEPTH,
                span,
            });
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    // ---------------------------------------------------------------- numbers

    fn int_token(&mut self, expected: &str) -> Result<(u128, Token)> {
        let t = self.peek();
        match t.kind {
            TokenKind::Int => {
                self.bump();
                match t.int_value(self.src) {
                    Some(v) => Ok((v, t)),
                    None => Err(ParseError::InvalidNumber {
                        text: self.text(&t).to_string(),
                        span: t.span,
                    }),
                }
            }
            _ => Err(self.expected(expected)),
        }
    }

    /// Consumes a float token (the caller checked the kind) and returns its value.
    fn float(&mut self) -> Result<FloatLit> {
        let t = self.bump();
        t.float_value(self.src)
            .ok_or_else(|| ParseError::InvalidNumber {
                text: self.text(&t).to_string(),
                span: t.span,
            })
    }

    fn out_of_range(&self, text: String, context: &str, span: Span) -> ParseError {
        ParseError::NumberOutOfRange {
            text,
            context: context.to_string(),
            span,
        }
    }

    fn u32_lit(&mut self, expected: &str, context: &str) -> Result<u32> {
        let (v, t) = self.int_token(expected)?;
        u32::try_from(v).map_err(|_| self.out_of_range(self.text(&t).to_string(), context, t.span))
    }

    /// The number after `.align`: a power of two (PTX ISA §5.4.5; `ptxas` rejects 0 and 3).
    fn align_lit(&mut self) -> Result<u32> {
        let (v, t) = self.int_token("an alignment after `.align`")?;
        match u32::try_from(v) {
            Ok(a) if a.is_power_of_two() => Ok(a),
            _ => Err(self.out_of_range(
                self.text(&t).to_string(),
                "an alignment (a power of two)",
                t.span,
            )),
        }
    }

    fn u64_lit(&mut self, expected: &str, context: &str) -> Result<u64> {
        let (v, t) = self.int_token(expected)?;
        u64::try_from(v).map_err(|_| self.out_of_range(self.text(&t).to_string(), context, t.span))
    }

    /// An integer with an optional leading `-`, as i128.
    fn signed_int(&mut self, expected: &str, context: &str) -> Result<(i128, Span)> {
        let minus = self.eat(TokenKind::Minus);
        let (v, t) = self.int_token(expected)?;
        let span = minus.map_or(t.span, |m| m.span.to(t.span));
        let text = self
            .src
            .get(span.start as usize..span.end as usize)
            .unwrap_or("");
        let v =
            i128::try_from(v).map_err(|_| self.out_of_range(text.to_string(), context, span))?;
        Ok((if minus.is_some() { -v } else { v }, span))
    }

    /// `+ N`, `+ -N` or `- N` after a symbol or register; 0 when absent.
    fn offset(&mut self, context: &str) -> Result<i64> {
        // `+N`, `+-N` and `-N`: signed_int folds the `-` in.
        if self.eat(TokenKind::Plus).is_none() && !self.at(TokenKind::Minus) {
            return Ok(0);
        }
        let (v, span) = self.signed_int("an integer offset", context)?;
        i64::try_from(v).map_err(|_| {
            let text = self
                .src
                .get(span.start as usize..span.end as usize)
                .unwrap_or("");
            self.out_of_range(text.to_string(), context, span)
        })
    }

    // ---------------------------------------------------------------- skipping

    /// Parses and drops a debug-line directive, exactly its own syntax (a directive has no
    /// `;`, and the next statement may follow on the same line):
    /// `.loc file line column [, function_name label [+ offset], inlined_at file line column]`
    /// or `.file index "name" [, timestamp, size]`.
    fn debug_line(&mut self) -> Result<()> {
        let t = self.bump();
        if self.dir_name(&t) == "file" {
            self.int_token("a file index after `.file`")?;
            self.expect(TokenKind::Str, "a file name after the `.file` index")?;
            if self.eat(TokenKind::Comma).is_some() {
                self.int_token("a timestamp in `.file`")?;
                self.expect(TokenKind::Comma, "`,` before the file size in `.file`")?;
                self.int_token("a file size in `.file`")?;
            }
            return Ok(());
        }
        for what in ["a file index", "a line number", "a column"] {
            self.int_token(&format!("{what} in `.loc`"))?;
        }
        while self.eat(TokenKind::Comma).is_some() {
            let key = self.peek();
            let keyword = if key.kind == TokenKind::Ident {
                self.text(&key)
            } else {
                ""
            };
            match keyword {
                "function_name" => {
                    self.bump();
                    self.ident("a label after `function_name`")?;
                    self.offset("`function_name`")?;
                }
                "inlined_at" => {
                    self.bump();
                    for what in ["a file index", "a line number", "a column"] {
                        self.int_token(&format!("{what} after `inlined_at`"))?;
                    }
                }
                _ => return Err(self.expected("`function_name` or `inlined_at` in `.loc`")),
            }
        }
        Ok(())
    }

    /// Skips up to and including the next `;`.
    fn skip_to_semicolon(&mut self, what: &str) -> Result<()> {
        loop {
            match self.peek().kind {
                TokenKind::Semicolon => {
                    self.bump();
                    return Ok(());
                }
                TokenKind::Eof => return Err(self.expected(&format!("`;` after {what}"))),
                _ => {
                    self.bump();
                }
            }
        }
    }

    /// Skips `.section .debug_xxx { ... }`, braces balanced.
    fn skip_section(&mut self) -> Result<()> {
        self.bump();
        self.expect(TokenKind::Directive, "a section name such as `.debug_info`")?;
        if !self.at(TokenKind::LBrace) {
            return Err(self.expected("`{` to open the section"));
        }
        let mut depth = 0u32;
        loop {
            match self.bump().kind {
                TokenKind::LBrace => depth += 1,
                TokenKind::RBrace => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return Ok(());
                    }
                }
                TokenKind::Eof => return Err(self.expected("`}` to close the section")),
                _ => {}
            }
        }
    }

    // ---------------------------------------------------------------- module

    fn module(&mut self) -> Result<Module> {
        while self.at_dir("file") || self.at_dir("loc") {
            self.debug_line()?;
        }
        if !self.at_dir("version") {
            return Err(self.expected("`.version` directive at the start of the module"));
        }
        self.bump();
        let version = self.version()?;
        let mut module = Module {
            version,
            target: Vec::new(),
            address_size: 64,
            items: Vec::new(),
        };
        loop {
            let t = self.peek();
            match t.kind {
                TokenKind::Eof => return Ok(module),
                TokenKind::Directive => {}
                _ => return Err(self.expected("a directive at module scope")),
            }
            match self.dir_name(&t) {
                "version" => {
                    self.bump();
                    module.version = self.version()?;
                }
                "target" => {
                    self.bump();
                    module.target.push(self.target_name()?);
                    while self.eat(TokenKind::Comma).is_some() {
                        module.target.push(self.target_name()?);
                    }
                }
                "address_size" => {
                    self.bump();
                    module.address_size =
                        self.u32_lit("an address size after `.address_size`", "an address size")?;
                }
                "file" | "loc" => self.debug_line()?,
                "section" => self.skip_section()?,
                "pragma" => {
                    self.bump();
                    self.expect(TokenKind::Str, "a string after `.pragma`")?;
                    self.expect(TokenKind::Semicolon, "`;` after `.pragma`")?;
                }
                "alias" => {
                    self.bump();
                    self.skip_to_semicolon("`.alias`")?;
                }
                _ => module.items.push(self.item()?),
            }
        }
    }

    /// A name after `.target`: an architecture that exists (`sm_90a`) or a target option.
    fn target_name(&mut self) -> Result<String> {
        let name = self.ident("a target name")?;
        if is_target_name(&name.value) {
            return Ok(name.value);
        }
        Err(ParseError::UnexpectedToken {
            expected: format!(
                "an architecture such as `sm_90` ({}) or a target option ({})",
                SM_ARCHITECTURES
                    .iter()
                    .map(|n| format!("sm_{n}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                TARGET_OPTIONS.join(", ")
            ),
            found: format!("`{}`", name.value),
            span: name.span,
        })
    }

    fn version(&mut self) -> Result<(u32, u32)> {
        let t = self.peek();
        if !matches!(t.kind, TokenKind::Float | TokenKind::Int) {
            return Err(self.expected("a version number such as `8.5` after `.version`"));
        }
        self.bump();
        let text = self.text(&t);
        let (major, minor) = text.split_once('.').unwrap_or((text, "0"));
        match (major.parse::<u32>(), minor.parse::<u32>()) {
            // PTX ISA versions run from 1.0; none has a major number above 9 yet, and
            // `ptxas` refuses a version it does not know.
            (Ok(a), Ok(_)) if !(1..=MAX_PTX_MAJOR).contains(&a) => Err(self.out_of_range(
                text.to_string(),
                &format!("a PTX ISA version (1.0 to {MAX_PTX_MAJOR}.x)"),
                t.span,
            )),
            (Ok(a), Ok(b)) => Ok((a, b)),
            _ => Err(ParseError::InvalidNumber {
                text: text.to_string(),
                span: t.span,
            }),
        }
    }

    fn item(&mut self) -> Result<Item> {
        let start = self.peek().span;
        let mut linkage = None;
        while let Some(l) = linkage_from_name(self.dir_name(&self.peek())) {
            linkage = Some(l);
            self.bump();
        }
        let t = self.peek();
        let name = self.dir_name(&t);
        match name {
            "entry" | "func" => Ok(Item::Function(self.function(linkage, start)?)),
            _ => match space_from_name(name) {
                Some(space) => {
                    self.bump();
                    Ok(Item::Var(self.var_decl(linkage, space, start)?))
                }
                None if t.kind == TokenKind::Directive => Err(ParseError::UnexpectedDirective {
                    name: name.to_string(),
                    context: "at module scope".to_string(),
                    span: t.span,
                }),
                None => Err(self.expected("`.entry`, `.func` or a variable declaration")),
            },
        }
    }

    // ---------------------------------------------------------------- declarations

    /// Skips `.attribute(...)`-style parenthesised arguments of a directive.
    fn skip_parens(&mut self) -> Result<()> {
        if self.eat(TokenKind::LParen).is_none() {
            return Ok(());
        }
        loop {
            match self.bump().kind {
                TokenKind::RParen => return Ok(()),
                TokenKind::Eof | TokenKind::Semicolon | TokenKind::LBrace => {
                    self.pos = self.pos.saturating_sub(1);
                    return Err(self.expected("`)`"));
                }
                _ => {}
            }
        }
    }

    /// The type of a declaration, with `.align`, `.vN` and attributes before it.
    /// Returns (align, vector, type).
    fn decl_type(&mut self, what: &str) -> Result<(Option<u32>, u32, ScalarType)> {
        let mut align = None;
        let mut vector = 1;
        loop {
            let t = self.peek();
            if t.kind != TokenKind::Directive {
                return Err(self.expected(&format!("a type such as `.b32` in {what}")));
            }
            let name = self.dir_name(&t);
            self.bump();
            if name == "align" {
                align = Some(self.align_lit()?);
            } else if let Some(v) = vector_from_name(name) {
                vector = v;
            } else if name == "attribute" || name == "unified" {
                self.skip_parens()?;
            } else if name == "ptr" {
                // `.ptr` only means something on parameters; tolerated elsewhere.
            } else if let Some(ty) = ScalarType::from_name(name)
                // The packed 16-bit integer types type instructions, not variables.
                .filter(|t| !matches!(t, ScalarType::U16x2 | ScalarType::S16x2))
            {
                return Ok((align, vector, ty));
            } else {
                return Err(ParseError::UnknownType {
                    name: name.to_string(),
                    span: t.span,
                });
            }
        }
    }

    /// The rest of a variable declaration after its state space.
    fn var_decl(
        &mut self,
        linkage: Option<Linkage>,
        space: StateSpace,
        start: Span,
    ) -> Result<VarDecl> {
        let (mut align, vector, ty) = self.decl_type("a variable declaration")?;
        // `.global .b8 .align 4 x;` is not what NVRTC writes, but ptxas accepts it.
        if self.at_dir("align") {
            self.bump();
            align = Some(self.align_lit()?);
        }
        let name = self.ident("a variable name")?;
        let mut array_dims = Vec::new();
        while self.eat(TokenKind::LBracket).is_some() {
            if self.eat(TokenKind::RBracket).is_some() {
                array_dims.push(None);
            } else {
                array_dims.push(Some(self.u64_lit("an array size", "an array size")?));
                self.expect(TokenKind::RBracket, "`]` after the array size")?;
            }
        }
        let init = if self.eat(TokenKind::Eq).is_some() {
            Some(self.initializer()?)
        } else {
            None
        };
        let span = self.span_from(start);
        self.expect(TokenKind::Semicolon, "`;` after variable declaration")?;
        Ok(VarDecl {
            linkage,
            space,
            align,
            vector,
            ty,
            name,
            array_dims,
            init,
            span,
        })
    }

    fn initializer(&mut self) -> Result<Initializer> {
        if let Some(open) = self.eat(TokenKind::LBrace) {
            self.enter(open.span)?;
            let mut items = Vec::new();
            if self.eat(TokenKind::RBrace).is_none() {
                loop {
                    items.push(self.initializer()?);
                    if self.eat(TokenKind::Comma).is_some() {
                        continue;
                    }
                    self.expect(TokenKind::RBrace, "`,` or `}` in initializer list")?;
                    break;
                }
            }
            self.leave();
            return Ok(Initializer::List(items));
        }
        let start = self.peek().span;
        let value = match self.peek().kind {
            TokenKind::Minus if self.peek_at(1).kind == TokenKind::Float => {
                self.bump();
                InitExpr::Float(negate_float(self.float()?))
            }
            TokenKind::Minus | TokenKind::Int => {
                InitExpr::Int(self.signed_int("a constant", "an initializer")?.0)
            }
            TokenKind::Float => InitExpr::Float(self.float()?),
            TokenKind::Ident => {
                let t = self.bump();
                let (name, generic) = if self.text(&t) == "generic" && self.at(TokenKind::LParen) {
                    self.bump();
                    let name = self.ident("a symbol inside `generic(...)`")?.value;
                    self.expect(TokenKind::RParen, "`)` after the symbol")?;
                    (name, true)
                } else {
                    (self.text(&t).to_string(), false)
                };
                let offset = self.offset("an address offset")?;
                InitExpr::SymbolAddr {
                    name,
                    generic,
                    offset,
                }
            }
            _ => return Err(self.expected("a constant or `{` in initializer")),
        };
        Ok(Initializer::Expr(Spanned {
            value,
            span: self.span_from(start),
        }))
    }

    // ---------------------------------------------------------------- functions

    fn function(&mut self, linkage: Option<Linkage>, start: Span) -> Result<Function> {
        let kw = self.bump();
        let kind = if self.dir_name(&kw) == "entry" {
            FunctionKind::Entry
        } else {
            FunctionKind::Func
        };
        let returns = if self.at(TokenKind::LParen) {
            self.param_list()?
        } else {
            Vec::new()
        };
        let name = self.ident("a function name")?;
        let params = if self.at(TokenKind::LParen) {
            self.param_list()?
        } else {
            Vec::new()
        };
        let mut performance = Vec::new();
        while self.at(TokenKind::Directive) && !self.at_item_start() {
            performance.push(self.performance()?);
            // `.pragma "...";` in a header ends with its own `;`: a `{` after it still opens
            // the body.
            if self.at(TokenKind::Semicolon) && self.peek_at(1).kind == TokenKind::LBrace {
                self.bump();
            }
        }
        let body = if self.at(TokenKind::LBrace) {
            Some(self.block()?)
        } else if self.at(TokenKind::Semicolon) {
            None
        } else {
            return Err(self.expected("`{` or `;` after the function header"));
        };
        let span = self.span_from(start);
        if body.is_none() {
            self.bump();
        }
        Ok(Function {
            linkage,
            kind,
            name,
            returns,
            params,
            performance,
            body,
            span,
        })
    }

    /// Whether the current directive starts a new module item (so a function header without
    /// `;` or body cannot swallow it as a performance directive).
    fn at_item_start(&self) -> bool {
        let name = self.dir_name(&self.peek());
        linkage_from_name(name).is_some()
            || space_from_name(name).is_some()
            || matches!(
                name,
                "entry"
                    | "func"
                    | "version"
                    | "target"
                    | "address_size"
                    | "file"
                    | "loc"
                    | "section"
            )
    }

    fn performance(&mut self) -> Result<Spanned<Performance>> {
        let t = self.bump();
        let name = self.dir_name(&t);
        let value = match name {
            "maxntid" | "reqntid" => {
                let mut dims = vec![self.u32_lit("a thread count", "a thread count")?];
                while self.eat(TokenKind::Comma).is_some() {
                    dims.push(self.u32_lit("a thread count", "a thread count")?);
                }
                if name == "maxntid" {
                    Performance::MaxNtid(dims)
                } else {
                    Performance::ReqNtid(dims)
                }
            }
            "minnctapersm" => {
                Performance::MinNctaPerSm(self.u32_lit("a CTA count", "a CTA count")?)
            }
            "maxnctapersm" => {
                Performance::MaxNctaPerSm(self.u32_lit("a CTA count", "a CTA count")?)
            }
            "maxnreg" => {
                Performance::MaxNreg(self.u32_lit("a register count", "a register count")?)
            }
            "pragma" => {
                let s = self.expect(TokenKind::Str, "a string after `.pragma`")?;
                Performance::Other(format!("pragma {}", self.text(&s)))
            }
            _ => {
                // `.noreturn`, `.explicitcluster`, `.reqnctapercluster 2, 1, 1`, `.abi_preserve 8`,
                // `.attribute(...)`: kept as text, they do not change what the code does.
                let mut text = name.to_string();
                if self.at(TokenKind::LParen) {
                    let from = self.peek().span;
                    self.skip_parens()?;
                    let span = self.span_from(from);
                    text.push_str(
                        self.src
                            .get(span.start as usize..span.end as usize)
                            .unwrap_or(""),
                    );
                } else {
                    let mut first = true;
                    while self.at(TokenKind::Int) {
                        let n = self.bump();
                        text.push_str(if first { " " } else { ", " });
                        text.push_str(self.text(&n));
                        first = false;
                        if self.peek_at(1).kind != TokenKind::Int
                            || self.eat(TokenKind::Comma).is_none()
                        {
                            break;
                        }
                    }
                }
                Performance::Other(text)
            }
        };
        Ok(Spanned {
            value,
            span: self.span_from(t.span),
        })
    }

    fn param_list(&mut self) -> Result<Vec<ParamDecl>> {
        self.bump();
        let mut params = Vec::new();
        if self.eat(TokenKind::RParen).is_some() {
            return Ok(params);
        }
        loop {
            params.push(self.param_decl()?);
            if self.eat(TokenKind::Comma).is_some() {
                continue;
            }
            self.expect(TokenKind::RParen, "`,` or `)` after parameter")?;
            return Ok(params);
        }
    }

    fn param_decl(&mut self) -> Result<ParamDecl> {
        let start = self.peek().span;
        let space = match self.dir_name(&self.peek()) {
            "param" => StateSpace::Param,
            "reg" => StateSpace::Reg,
            _ => return Err(self.expected("`.param` or `.reg` parameter")),
        };
        self.bump();
        let mut align = None;
        let mut ty = None;
        let mut ptr_space = None;
        while self.at(TokenKind::Directive) {
            let t = self.bump();
            let name = self.dir_name(&t);
            if name == "align" {
                align = Some(self.align_lit()?);
            } else if name == "ptr" {
                if let Some(s) = space_from_name(self.dir_name(&self.peek())) {
                    self.bump();
                    ptr_space = Some(s);
                }
            } else if name == "attribute" {
                self.skip_parens()?;
            } else if let Some(s) = ScalarType::from_name(name) {
                if ty.is_some() {
                    return Err(ParseError::UnexpectedDirective {
                        name: name.to_string(),
                        context: "after the parameter's type".to_string(),
                        span: t.span,
                    });
                }
                ty = Some(s);
            } else if vector_from_name(name).is_some() || space_from_name(name).is_some() {
                // The tree has no vector parameters, and `.param .global` is no PTX.
                return Err(ParseError::UnexpectedDirective {
                    name: name.to_string(),
                    context: "in a parameter declaration".to_string(),
                    span: t.span,
                });
            } else {
                return Err(ParseError::UnknownType {
                    name: name.to_string(),
                    span: t.span,
                });
            }
        }
        let Some(ty) = ty else {
            return Err(self.expected("a type such as `.b32` in parameter"));
        };
        let name = self.ident("a parameter name")?;
        let array_len = if self.eat(TokenKind::LBracket).is_some() {
            let n = self.u64_lit("an array size", "an array size")?;
            self.expect(TokenKind::RBracket, "`]` after the array size")?;
            Some(n)
        } else {
            None
        };
        Ok(ParamDecl {
            space,
            align,
            ty,
            name,
            array_len,
            ptr_space,
            span: self.span_from(start),
        })
    }

    // ---------------------------------------------------------------- bodies

    /// `{ statements }`; the current token is the `{`.
    fn block(&mut self) -> Result<Block> {
        let open = self.bump();
        self.enter(open.span)?;
        let mut statements = Vec::new();
        loop {
            let t = self.peek();
            match t.kind {
                TokenKind::RBrace => {
                    self.bump();
                    break;
                }
                TokenKind::Eof => return Err(self.expected("`}` to close the block")),
                TokenKind::Semicolon => {
                    // An empty statement: harmless, so tolerated.
                    self.bump();
                }
                _ => {
                    if let Some(s) = self.statement()? {
                        statements.push(s);
                    }
                }
            }
        }
        self.leave();
        Ok(Block {
            statements,
            span: self.span_from(open.span),
        })
    }

    fn statement(&mut self) -> Result<Option<Statement>> {
        let t = self.peek();
        match t.kind {
            TokenKind::LBrace => Ok(Some(Statement::Block(self.block()?))),
            TokenKind::At => Ok(Some(Statement::Instruction(self.instruction()?))),
            TokenKind::Ident => {
                if self.peek_at(1).kind == TokenKind::Colon {
                    self.bump();
                    self.bump();
                    let name = self.spanned(&t);
                    match self.dir_name(&self.peek()) {
                        "branchtargets" | "calltargets" => {
                            Ok(Some(Statement::Targets(self.target_list(name)?)))
                        }
                        "callprototype" => {
                            Ok(Some(Statement::CallPrototype(self.call_prototype(name)?)))
                        }
                        _ => Ok(Some(Statement::Label(name))),
                    }
                } else {
                    Ok(Some(Statement::Instruction(self.instruction()?)))
                }
            }
            TokenKind::Directive => self.body_directive(t),
            _ => Err(self.expected("an instruction, label or declaration")),
        }
    }

    fn body_directive(&mut self, t: Token) -> Result<Option<Statement>> {
        let name = self.dir_name(&t);
        match name {
            "reg" => Ok(Some(Statement::Reg(self.reg_decl()?))),
            "loc" | "file" => {
                self.debug_line()?;
                Ok(None)
            }
            "pragma" => {
                self.bump();
                let s = self.expect(TokenKind::Str, "a string after `.pragma`")?;
                let text = self.text(&s);
                let value = text
                    .strip_prefix('"')
                    .and_then(|x| x.strip_suffix('"'))
                    .unwrap_or(text)
                    .to_string();
                let span = self.span_from(t.span);
                self.expect(TokenKind::Semicolon, "`;` after `.pragma`")?;
                Ok(Some(Statement::Pragma(Spanned { value, span })))
            }
            // These name what they declare with a label in front (`ts: .branchtargets ...`).
            "callprototype" | "branchtargets" | "calltargets" => {
                Err(ParseError::UnexpectedDirective {
                    name: name.to_string(),
                    context: "without a label naming it".to_string(),
                    span: t.span,
                })
            }
            _ => {
                let mut linkage = None;
                while let Some(l) = linkage_from_name(self.dir_name(&self.peek())) {
                    linkage = Some(l);
                    self.bump();
                }
                let d = self.peek();
                match space_from_name(self.dir_name(&d)).filter(|s| *s != StateSpace::Reg) {
                    Some(space) => {
                        self.bump();
                        Ok(Some(Statement::Var(self.var_decl(linkage, space, t.span)?)))
                    }
                    None if d.kind == TokenKind::Directive => {
                        Err(ParseError::UnexpectedDirective {
                            name: self.dir_name(&d).to_string(),
                            context: "in a function body".to_string(),
                            span: d.span,
                        })
                    }
                    None => Err(self.expected("a state space such as `.shared`")),
                }
            }
        }
    }

    /// `.branchtargets L1, L2;` / `.calltargets f, g;` after `name:`; the current token is
    /// the directive.
    fn target_list(&mut self, name: Spanned<String>) -> Result<TargetList> {
        let d = self.bump();
        let kind = if self.dir_name(&d) == "branchtargets" {
            TargetKind::Branch
        } else {
            TargetKind::Call
        };
        let what = format!("a name in `.{}`", self.dir_name(&d));
        let mut targets = vec![self.ident(&what)?];
        while self.eat(TokenKind::Comma).is_some() {
            targets.push(self.ident(&what)?);
        }
        self.expect(TokenKind::Semicolon, "`,` or `;` in a target list")?;
        Ok(TargetList {
            kind,
            span: self.span_from(name.span),
            name,
            targets,
        })
    }

    /// `.callprototype (returns) _ (params);` after `name:`; the current token is the
    /// directive. Either list may be missing; `.noreturn` may follow.
    fn call_prototype(&mut self, name: Spanned<String>) -> Result<CallPrototype> {
        self.bump();
        let returns = if self.at(TokenKind::LParen) {
            self.param_list()?
        } else {
            Vec::new()
        };
        if self.text(&self.peek()) != "_" {
            return Err(self.expected("`_` in `.callprototype`"));
        }
        self.bump();
        let params = if self.at(TokenKind::LParen) {
            self.param_list()?
        } else {
            Vec::new()
        };
        if self.dir_name(&self.peek()) == "noreturn" {
            self.bump();
        }
        self.expect(TokenKind::Semicolon, "`;` after `.callprototype`")?;
        Ok(CallPrototype {
            span: self.span_from(name.span),
            name,
            returns,
            params,
        })
    }

    fn reg_decl(&mut self) -> Result<RegDecl> {
        let start = self.bump().span;
        let (_, vector, ty) = self.decl_type("a register declaration")?;
        let mut names = Vec::new();
        loop {
            let name = self.ident("a register name")?;
            let range = if self.eat(TokenKind::Lt).is_some() {
                let n = self.u32_lit("a register count", "a register count")?;
                self.expect(TokenKind::Gt, "`>` after the register count")?;
                Some(n)
            } else {
                None
            };
            names.push(RegName { name, range });
            if self.eat(TokenKind::Comma).is_none() {
                break;
            }
        }
        let span = self.span_from(start);
        self.expect(TokenKind::Semicolon, "`;` after register declaration")?;
        Ok(RegDecl {
            ty,
            vector,
            names,
            span,
        })
    }

    fn instruction(&mut self) -> Result<Instruction> {
        let start = self.peek().span;
        let guard = if self.eat(TokenKind::At).is_some() {
            let negated = self.eat(TokenKind::Bang).is_some();
            let pred = self.ident("a predicate register after `@`")?;
            Some(Guard { negated, pred })
        } else {
            None
        };
        let opcode = self.ident("an instruction opcode")?;
        let mut modifiers = Vec::new();
        while self.at(TokenKind::Directive) {
            let t = self.bump();
            modifiers.push(Spanned {
                value: self.dir_name(&t).to_string(),
                span: t.span,
            });
        }
        let mut operands = Vec::new();
        // Only a token that can start an operand begins the operand list; anything else
        // (`}` after a forgotten `;`, say) is reported as the missing `;`.
        let starts_operand = matches!(
            self.peek().kind,
            TokenKind::Bang
                | TokenKind::Minus
                | TokenKind::Int
                | TokenKind::Float
                | TokenKind::Ident
                | TokenKind::LBracket
                | TokenKind::LBrace
                | TokenKind::LParen
        );
        if starts_operand {
            loop {
                operands.push(self.operand()?);
                if self.eat(TokenKind::Comma).is_none() {
                    break;
                }
            }
        }
        let span = self.span_from(start);
        self.expect(TokenKind::Semicolon, "`;` after instruction")?;
        Ok(Instruction {
            guard,
            opcode,
            modifiers,
            operands,
            span,
        })
    }

    /// Operands separated by commas up to `close` (which is consumed).
    fn operand_list(&mut self, close: TokenKind, expected: &str) -> Result<Vec<Operand>> {
        let mut items = Vec::new();
        if self.eat(close).is_some() {
            return Ok(items);
        }
        loop {
            items.push(self.operand()?);
            if self.eat(TokenKind::Comma).is_some() {
                continue;
            }
            self.expect(close, expected)?;
            return Ok(items);
        }
    }

    fn operand(&mut self) -> Result<Operand> {
        let t = self.peek();
        let kind = match t.kind {
            TokenKind::Bang => {
                self.bump();
                self.enter(t.span)?;
                let inner = self.operand()?;
                self.leave();
                OperandKind::Not(Box::new(inner))
            }
            TokenKind::Minus if self.peek_at(1).kind == TokenKind::Float => {
                self.bump();
                OperandKind::Float(negate_float(self.float()?))
            }
            TokenKind::Minus | TokenKind::Int => {
                OperandKind::Int(self.signed_int("a number", "an immediate")?.0)
            }
            TokenKind::Float => OperandKind::Float(self.float()?),
            TokenKind::Ident => {
                self.bump();
                let name = self.text(&t);
                if name == "_" {
                    OperandKind::Sink
                } else if self.at(TokenKind::Pipe) {
                    self.bump();
                    let second = self.ident("a predicate register after `|`")?;
                    OperandKind::PredPair(self.spanned(&t), second)
                } else {
                    let next = self.peek();
                    let component = match self.dir_name(&next).as_bytes() {
                        [c @ (b'x' | b'y' | b'z' | b'w' | b'r' | b'g' | b'b' | b'a')]
                            if next.adjacent =>
                        {
                            self.bump();
                            Some(*c as char)
                        }
                        _ => None,
                    };
                    OperandKind::Ident {
                        name: name.to_string(),
                        component,
                    }
                }
            }
            TokenKind::LBracket => {
                self.bump();
                let base = if self.at(TokenKind::Ident) {
                    let b = self.bump();
                    Some(AddressBase {
                        name: self.text(&b).to_string(),
                        span: b.span,
                    })
                } else {
                    None
                };
                let offset = if base.is_some() {
                    self.offset("an address offset")?
                } else {
                    let (v, span) =
                        self.signed_int("a register, symbol or address", "an address")?;
                    i64::try_from(v).map_err(|_| {
                        let text = self.src.get(span.start as usize..span.end as usize);
                        self.out_of_range(text.unwrap_or("").to_string(), "an address", span)
                    })?
                };
                if self.at(TokenKind::Comma) {
                    self.address_tuple(t.span, base, offset)?
                } else {
                    self.expect(TokenKind::RBracket, "`]` to close the address")?;
                    OperandKind::Address { base, offset }
                }
            }
            TokenKind::LBrace => {
                self.bump();
                self.enter(t.span)?;
                let items = self.operand_list(TokenKind::RBrace, "`,` or `}` in vector operand")?;
                self.leave();
                OperandKind::Vector(items)
            }
            TokenKind::LParen => {
                self.bump();
                self.enter(t.span)?;
                let items = self.operand_list(TokenKind::RParen, "`,` or `)` in operand list")?;
                self.leave();
                OperandKind::List(items)
            }
            _ => return Err(self.expected("an operand")),
        };
        Ok(Operand {
            kind,
            span: self.span_from(t.span),
        })
    }

    /// The rest of `[handle, a, b...]` after `handle` (already read as `base`/`offset`).
    fn address_tuple(
        &mut self,
        open: Span,
        base: Option<AddressBase>,
        offset: i64,
    ) -> Result<OperandKind> {
        let first_span = self.span_from(open);
        let first_span = Span {
            start: first_span.start.saturating_add(1),
            end: first_span.end,
        };
        let first = match base {
            Some(b) if offset == 0 => OperandKind::Ident {
                name: b.name,
                component: None,
            },
            None => OperandKind::Int(i128::from(offset)),
            Some(_) => return Err(self.expected("`]` after an address with an offset")),
        };
        let mut items = vec![Operand {
            kind: first,
            span: first_span,
        }];
        self.enter(open)?;
        while self.eat(TokenKind::Comma).is_some() {
            items.push(self.operand()?);
        }
        self.leave();
        self.expect(TokenKind::RBracket, "`,` or `]` in bracketed operand list")?;
        Ok(OperandKind::AddressTuple(items))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = ".version 8.5\n.target sm_90\n.address_size 64\n";

    /// (type, vector width, [(name, range)]) of a `.reg` line.
    type RegRow = (ScalarType, u32, Vec<(String, Option<u32>)>);
    /// (space, align, type, name, array length, pointer space) of a parameter.
    type ParamRow<'a> = (
        StateSpace,
        Option<u32>,
        ScalarType,
        &'a str,
        Option<u64>,
        Option<StateSpace>,
    );

    fn module(items: &str) -> Module {
        let src = format!("{HEADER}{items}");
        parse(&src).unwrap_or_else(|e| panic!("{e} at {:?} in {src}", e.span()))
    }

    /// The statements of `.entry k() { body }`.
    fn body(body: &str) -> Vec<Statement> {
        let m = module(&format!(".entry k()\n{{\n{body}\n}}"));
        match m.items.into_iter().next() {
            Some(Item::Function(Function { body: Some(b), .. })) => b.statements,
            other => panic!("{other:?}"),
        }
    }

    fn instr(text: &str) -> Instruction {
        match body(text).into_iter().next() {
            Some(Statement::Instruction(i)) => i,
            other => panic!("{other:?}"),
        }
    }

    fn kinds(text: &str) -> Vec<OperandKind> {
        instr(text).operands.into_iter().map(|o| o.kind).collect()
    }

    fn id(name: &str) -> OperandKind {
        OperandKind::Ident {
            name: name.into(),
            component: None,
        }
    }

    fn first_var(items: &str) -> VarDecl {
        match module(items).items.into_iter().next() {
            Some(Item::Var(v)) => v,
            other => panic!("{other:?}"),
        }
    }

    fn init_expr(items: &str) -> InitExpr {
        match first_var(items).init {
            Some(Initializer::Expr(e)) => e.value,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn module_header() {
        let m = parse(
            ".version 7.0\n.target sm_90a, texmode_independent\n.file 1 \"a.cu\", 1700000000, 42\n",
        )
        .unwrap();
        assert_eq!(m.version, (7, 0));
        assert_eq!(m.target, ["sm_90a", "texmode_independent"]);
        assert_eq!(m.address_size, 64, "default when absent");
        assert!(m.items.is_empty());
        let m = parse(".version 6.4 .target sm_52 .address_size 32").unwrap();
        assert_eq!((m.version, m.address_size), ((6, 4), 32));
    }

    #[test]
    fn opcode_and_modifiers() {
        let i = instr("bar.sync 0;");
        assert_eq!(i.opcode.value, "bar");
        assert_eq!(i.modifiers.len(), 1);
        assert_eq!(i.modifiers[0].value, "sync");
        let i = instr("mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], %r2;");
        let m: Vec<&str> = i.modifiers.iter().map(|m| m.value.as_str()).collect();
        assert_eq!(m, ["try_wait", "parity", "shared::cta", "b64"]);
        let i = instr("ret;");
        assert!(i.modifiers.is_empty() && i.operands.is_empty() && i.guard.is_none());
    }

    #[test]
    fn immediates() {
        assert_eq!(
            kinds("add.s32 %r1, -5, 0x10, 010, 0b11, 7U, -0x8000000000000000;"),
            [
                id("%r1"),
                OperandKind::Int(-5),
                OperandKind::Int(16),
                OperandKind::Int(8),
                OperandKind::Int(3),
                OperandKind::Int(7),
                OperandKind::Int(-0x8000_0000_0000_0000)
            ]
        );
        assert_eq!(
            kinds("mov.f32 %f1, 0f3F800000, -0f3F800000, -1.5, 0d4000000000000000;")[1..],
            [
                OperandKind::Float(FloatLit::F32(0x3F80_0000)),
                OperandKind::Float(FloatLit::F32(0xBF80_0000)),
                OperandKind::Float(FloatLit::F64((-1.5f64).to_bits())),
                OperandKind::Float(FloatLit::F64(2f64.to_bits())),
            ]
        );
    }

    #[test]
    fn components_only_when_adjacent() {
        let k = kinds("mov.u32 %r1, %tid.y, %ctaid.z, %nctaid.w, %x.r, %x.g, %x.b, %x.a;");
        let comps: Vec<Option<char>> = k
            .iter()
            .map(|k| match k {
                OperandKind::Ident { component, .. } => *component,
                _ => panic!(),
            })
            .collect();
        assert_eq!(
            comps,
            [
                None,
                Some('y'),
                Some('z'),
                Some('w'),
                Some('r'),
                Some('g'),
                Some('b'),
                Some('a')
            ]
        );
        // `%tid .x` is not a component: the stray directive ends the operand list.
        let e = parse(&format!("{HEADER}.entry k() {{ mov.u32 %r1, %tid .x; }}")).unwrap_err();
        assert!(matches!(e, ParseError::UnexpectedToken { .. }), "{e}");
        let e = parse(&format!("{HEADER}.entry k() {{ mov.u32 %r1, %tid.q; }}")).unwrap_err();
        assert_eq!(e.to_string(), "expected `;` after instruction, found `.q`");
    }

    #[test]
    fn addresses() {
        let a = |base: Option<&str>, offset: i64| (base.map(str::to_string), offset);
        let got: Vec<(Option<String>, i64)> = kinds(
            "ld.u32 %r1, [%rd1], [%rd1+16], [%rd1+-16], [%rd1-16], [sym], [sym+4], [0x100], [-8];",
        )
        .into_iter()
        .skip(1)
        .map(|k| match k {
            OperandKind::Address { base, offset } => (base.map(|b| b.name), offset),
            other => panic!("{other:?}"),
        })
        .collect();
        assert_eq!(
            got,
            [
                a(Some("%rd1"), 0),
                a(Some("%rd1"), 16),
                a(Some("%rd1"), -16),
                a(Some("%rd1"), -16),
                a(Some("sym"), 0),
                a(Some("sym"), 4),
                a(None, 256),
                a(None, -8),
            ]
        );
    }

    #[test]
    fn address_tuples() {
        let k = kinds("tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd4, {%f5, %f6}];");
        let OperandKind::AddressTuple(items) = &k[1] else {
            panic!("{k:?}")
        };
        assert_eq!(items[0].kind, id("%rd4"));
        assert!(matches!(&items[1].kind, OperandKind::Vector(v) if v.len() == 2));
        let e = parse(&format!(
            "{HEADER}.entry k() {{ tex.2d [%rd1+4, {{%f1}}]; }}"
        ))
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "expected `]` after an address with an offset, found `,`"
        );
    }

    #[test]
    fn vectors_sinks_lists_negation_and_pairs() {
        let OperandKind::Vector(v) = &kinds("mov.b32 {%f1, _, %f4}, %r1;")[0] else {
            panic!()
        };
        let v: Vec<&OperandKind> = v.iter().map(|o| &o.kind).collect();
        assert_eq!(v, [&id("%f1"), &OperandKind::Sink, &id("%f4")]);
        let k = kinds("call.uni (retval0), foo, (param0, param1);");
        assert!(matches!(&k[0], OperandKind::List(v) if v.len() == 1));
        assert_eq!(k[1], id("foo"));
        assert!(matches!(&k[2], OperandKind::List(v) if v.len() == 2));
        let k = kinds("call foo, (param0);");
        assert_eq!(k.len(), 2);
        let k = kinds("call.uni foo;");
        assert_eq!(k, [id("foo")]);
        let k = kinds("setp.lt.and.s32 %p1|%p2, %r1, 0, !%p3;");
        assert!(
            matches!(&k[0], OperandKind::PredPair(a, b) if a.value == "%p1" && b.value == "%p2")
        );
        assert!(matches!(&k[3], OperandKind::Not(inner) if inner.kind == id("%p3")));
        assert_eq!(kinds("st.u32 [%rd1], _;")[1], OperandKind::Sink);
    }

    #[test]
    fn guards() {
        let i = instr("@!%p1 bra.uni $L__BB0_2;");
        let g = i.guard.unwrap();
        assert!(g.negated);
        assert_eq!(g.pred.value, "%p1");
        assert_eq!(i.opcode.value, "bra");
        assert_eq!(i.operands[0].kind, id("$L__BB0_2"));
    }

    #[test]
    fn register_declarations() {
        let s = body(".reg .b32 %r<10>;\n.reg .f32 %f1, %f2;\n.reg .v4 .f32 %v;\n.reg .pred p;");
        let regs: Vec<RegRow> = s
            .into_iter()
            .map(|s| match s {
                Statement::Reg(r) => (
                    r.ty,
                    r.vector,
                    r.names
                        .into_iter()
                        .map(|n| (n.name.value, n.range))
                        .collect(),
                ),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            regs,
            [
                (ScalarType::B32, 1, vec![("%r".into(), Some(10))]),
                (
                    ScalarType::F32,
                    1,
                    vec![("%f1".into(), None), ("%f2".into(), None)]
                ),
                (ScalarType::F32, 4, vec![("%v".into(), None)]),
                (ScalarType::Pred, 1, vec![("p".into(), None)]),
            ]
        );
    }

    #[test]
    fn body_variables_labels_pragmas_and_debug() {
        let s = body(
            ".local .align 4 .b8 __local_depot0[32];\n\
             .shared .align 8 .f64 tile[4][8];\n\
             .loc 1 23 4, function_name $L__info_string0, inlined_at 1 10 5\n\
             $L__BB0_1:\n\
             .pragma \"nounroll\";\n\
             .loc 1 24 4\n\
             ret;",
        );
        assert_eq!(s.len(), 5);
        let Statement::Var(v) = &s[0] else { panic!() };
        assert_eq!(
            (v.space, v.align, v.ty, v.array_dims.clone()),
            (StateSpace::Local, Some(4), ScalarType::B8, vec![Some(32)])
        );
        let Statement::Var(v) = &s[1] else { panic!() };
        assert_eq!(v.array_dims, [Some(4), Some(8)]);
        assert!(matches!(&s[2], Statement::Label(l) if l.value == "$L__BB0_1"));
        assert!(matches!(&s[3], Statement::Pragma(p) if p.value == "nounroll"));
        assert!(matches!(&s[4], Statement::Instruction(i) if i.opcode.value == "ret"));
    }

    #[test]
    fn debug_directives_end_with_their_own_operands() {
        // A `.loc` has no `;`: what follows it on the same line is the next statement.
        let s = body(
            ".loc 1 23 4 add.s32 %r1, %r2, 1;\n\
             .loc 1 24 4, function_name $L__info_string0+8, inlined_at 1 10 5 ret;",
        );
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(matches!(&s[0], Statement::Instruction(i) if i.opcode.value == "add"));
        assert!(matches!(&s[1], Statement::Instruction(i) if i.opcode.value == "ret"));
        let m = module(".version 7.0\n.target sm_70\n.file 1 \"a.cu\" .global .u32 x;");
        assert_eq!(m.items.len(), 1);
        for bad in [
            ".loc 1 23\nret;",
            ".loc 1 23 4, inlined 1 2 3\nret;",
            ".loc 1 2 3, function_name 5\nret;",
        ] {
            let text = format!(".version 7.0\n.target sm_70\n.entry k() {{ {bad} }}");
            assert!(parse(&text).is_err(), "{bad}");
        }
        assert!(parse(".version 7.0\n.target sm_70\n.file \"a.cu\"\n").is_err());
        assert!(parse(".version 7.0\n.target sm_70\n.section {}\n").is_err());
        assert!(parse(".version 7.0\n.target sm_70\n.pragma nounroll;\n").is_err());
    }

    #[test]
    fn target_lists_and_prototypes() {
        let s = body(
            "prototype_0 : .callprototype (.param .b32 _) _ (.param .b32 _, .param .align 8 .b8 _[16]);\n\
             proto_1: .callprototype _ ();\n\
             $L_brx_0: .branchtargets $L__BB0_1, $L__BB0_2;\n\
             ct: .calltargets f, g;\n\
             ret;",
        );
        assert_eq!(s.len(), 5);
        let Statement::CallPrototype(p) = &s[0] else {
            panic!("{:?}", s[0])
        };
        assert_eq!(p.name.value, "prototype_0");
        assert_eq!((p.returns.len(), p.params.len()), (1, 2));
        assert_eq!(
            (p.params[1].ty, p.params[1].align, p.params[1].array_len),
            (ScalarType::B8, Some(8), Some(16))
        );
        let Statement::CallPrototype(p) = &s[1] else {
            panic!("{:?}", s[1])
        };
        assert!(p.returns.is_empty() && p.params.is_empty());
        let Statement::Targets(t) = &s[2] else {
            panic!("{:?}", s[2])
        };
        assert_eq!(
            (t.kind, t.name.value.as_str()),
            (TargetKind::Branch, "$L_brx_0")
        );
        let names: Vec<_> = t.targets.iter().map(|x| x.value.as_str()).collect();
        assert_eq!(names, ["$L__BB0_1", "$L__BB0_2"]);
        let Statement::Targets(t) = &s[3] else {
            panic!("{:?}", s[3])
        };
        assert_eq!((t.kind, t.targets.len()), (TargetKind::Call, 2));
        for bad in [
            ".branchtargets L1;",
            "ts: .branchtargets ;",
            "ts: .branchtargets L1 L2;",
            "p: .callprototype (.param .b32 _) f (.param .b32 _);",
        ] {
            let text = format!(".version 7.0\n.target sm_70\n.entry k() {{ {bad} ret; }}");
            assert!(parse(&text).is_err(), "{bad}");
        }
    }

    #[test]
    fn function_headers() {
        let m = module(
            ".visible .func (.param .align 16 .b8 func_retval0[16]) f(\n\
             \t.param .u64 .ptr .global .align 16 a,\n\
             \t.param .align 4 .b8 b[12],\n\
             \t.reg .b32 c\n\
             ) .noreturn .pragma \"abi\";\n\
             .weak .entry e .maxntid 32 .maxnreg 40 .maxnctapersm 2 { ret; }\n\
             .extern .func g;",
        );
        let fs: Vec<&Function> = m
            .items
            .iter()
            .map(|i| match i {
                Item::Function(f) => f,
                other => panic!("{other:?}"),
            })
            .collect();
        let f = fs[0];
        assert_eq!(
            (f.linkage, f.kind),
            (Some(Linkage::Visible), FunctionKind::Func)
        );
        assert_eq!(f.returns[0].align, Some(16));
        assert_eq!(f.returns[0].array_len, Some(16));
        let p: Vec<ParamRow> = f
            .params
            .iter()
            .map(|p| {
                (
                    p.space,
                    p.align,
                    p.ty,
                    p.name.value.as_str(),
                    p.array_len,
                    p.ptr_space,
                )
            })
            .collect();
        assert_eq!(
            p,
            [
                (
                    StateSpace::Param,
                    Some(16),
                    ScalarType::U64,
                    "a",
                    None,
                    Some(StateSpace::Global)
                ),
                (
                    StateSpace::Param,
                    Some(4),
                    ScalarType::B8,
                    "b",
                    Some(12),
                    None
                ),
                (StateSpace::Reg, None, ScalarType::B32, "c", None, None),
            ]
        );
        let perf: Vec<Performance> = f.performance.iter().map(|p| p.value.clone()).collect();
        assert_eq!(
            perf,
            [
                Performance::Other("noreturn".into()),
                Performance::Other("pragma \"abi\"".into())
            ]
        );
        assert!(f.body.is_none());
        let e = fs[1];
        assert_eq!(
            (e.linkage, e.kind),
            (Some(Linkage::Weak), FunctionKind::Entry)
        );
        assert!(e.params.is_empty());
        let perf: Vec<Performance> = e.performance.iter().map(|p| p.value.clone()).collect();
        assert_eq!(
            perf,
            [
                Performance::MaxNtid(vec![32]),
                Performance::MaxNreg(40),
                Performance::MaxNctaPerSm(2)
            ]
        );
        assert_eq!(fs[2].name.value, "g");
        assert!(fs[2].body.is_none() && fs[2].params.is_empty());
    }

    #[test]
    fn header_pragma_before_body() {
        let m = module(".entry k() .pragma \"nounroll\"; { ret; }\n.global .u32 x;");
        assert_eq!(m.items.len(), 2);
        let Some(Item::Function(f)) = m.items.first() else {
            panic!()
        };
        assert_eq!(
            f.performance[0].value,
            Performance::Other("pragma \"nounroll\"".into())
        );
        assert!(f.body.is_some());
    }

    #[test]
    fn module_variables() {
        let v = first_var(".common .global .align 16 .v4 .f32 x;");
        assert_eq!(
            (v.linkage, v.space, v.align, v.vector, v.ty),
            (
                Some(Linkage::Common),
                StateSpace::Global,
                Some(16),
                4,
                ScalarType::F32
            )
        );
        let v = first_var(".global .attribute(.managed) .align 4 .u32 m;");
        assert_eq!((v.align, v.ty), (Some(4), ScalarType::U32));
        let v = first_var(".shared .b8 a[][4];");
        assert_eq!(v.array_dims, [None, Some(4)]);
        assert_eq!(
            init_expr(".global .f32 f = -1.5;"),
            InitExpr::Float(FloatLit::F64((-1.5f64).to_bits()))
        );
        assert_eq!(
            init_expr(".global .f32 f = -0f3F800000;"),
            InitExpr::Float(FloatLit::F32(0xBF80_0000))
        );
        assert_eq!(
            init_expr(".global .u64 p = sym-4;"),
            InitExpr::SymbolAddr {
                name: "sym".into(),
                generic: false,
                offset: -4
            }
        );
        assert_eq!(
            init_expr(".global .u64 p = generic(sym);"),
            InitExpr::SymbolAddr {
                name: "sym".into(),
                generic: true,
                offset: 0
            }
        );
        let v = first_var(".global .u32 e[2] = {};");
        assert_eq!(v.init, Some(Initializer::List(vec![])));
    }

    #[test]
    fn sections_are_skipped() {
        let m = module(
            ".section .debug_info\n{\n.b32 822\n.b8 2 // c\n.b64 $L__func_begin0\n\
             .b32 $L__func_end0-$L__func_begin0\n{ }\n}\n.global .u32 x;",
        );
        assert_eq!(m.items.len(), 1);
    }

    #[test]
    fn spans_of_declarations() {
        let src = format!("{HEADER}.global .align 4 .u32 x[2] = {{1, 2}};\n");
        let m = parse(&src).unwrap();
        let Some(Item::Var(v)) = m.items.first() else {
            panic!()
        };
        let text = |s: Span| &src[s.start as usize..s.end as usize];
        assert_eq!(text(v.span), ".global .align 4 .u32 x[2] = {1, 2}");
        assert_eq!(text(v.name.span), "x");
    }
}
