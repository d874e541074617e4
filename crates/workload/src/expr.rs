//! Integer expressions of scenario files: kernel arguments, grid and block sizes, copy
//! offsets and sizes, repeat counts written over named constants and loop indices
//! (`"N - t"`, `"(n + 15) / 16"`, `"min(d + 1, 2 * NB - 1 - d)"`).
//!
//! The grammar, loosest binding first:
//!
//! ```text
//! expr  := term (('+' | '-') term)*
//! term  := unary (('*' | '/' | '%') unary)*
//! unary := '-' unary | atom
//! atom  := integer | name | name '(' expr (',' expr)* ')' | '(' expr ')'
//! ```
//!
//! Integers are decimal (`_` may separate digits); names are `[A-Za-z_][A-Za-z0-9_]*`; the
//! functions are `min` and `max` (one or more arguments). Values are `i64`; every operation
//! is checked: an overflow, a division or remainder by zero is an error, never a wrapped
//! value. `/` and `%` truncate toward zero, as C's do.
//!
//! A name is a constant, replaced by its value when the expression is parsed, or the index
//! of an enclosing loop, read when the expression is evaluated. An expression with no loop
//! index is evaluated once, when the file is loaded.

use std::fmt;

/// The deepest nesting of parentheses, unary minus and calls an expression may have.
pub const MAX_DEPTH: u32 = 64;

/// A parsed expression; constants are folded into literals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expr {
    Lit(i64),
    /// The index of the loop `depth` levels in from the outermost (0), named `name`.
    Loop {
        depth: usize,
        name: String,
    },
    Neg(Box<Expr>),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    Call(Func, Vec<Expr>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Func {
    Min,
    Max,
}

/// Why an expression has no value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EvalError {
    /// It reads the index of a loop whose value is not known yet (while checking a file
    /// before it runs, the index of a `repeat_until_zero`).
    Unknown,
    /// Overflow or division by zero: what and where.
    Bad(String),
}

/// What a name means where an expression is written.
pub trait Scope {
    /// A constant's value, or `None`.
    fn constant(&self, name: &str) -> Option<Result<i64, String>>;
    /// The depth of the enclosing loop of this name, or `None`.
    fn loop_depth(&self, name: &str) -> Option<usize>;
    /// Every name, for messages.
    fn names(&self) -> Vec<String>;
}

impl Expr {
    /// Parses `text` in `scope`; the error says what is wrong and where in the text.
    pub fn parse(text: &str, scope: &dyn Scope) -> Result<Expr, String> {
        let mut p = Parser {
            text,
            bytes: text.as_bytes(),
            pos: 0,
            scope,
            depth: 0,
        };
        p.skip();
        if p.pos == p.bytes.len() {
            return Err("an empty expression".into());
        }
        let e = p.expr()?;
        p.skip();
        if p.pos < p.bytes.len() {
            return Err(p.unexpected("an operator"));
        }
        // Fold what reads no loop index (so overflow among constants is found here).
        Ok(match e.eval(&[]) {
            Ok(v) => Expr::Lit(v),
            Err(EvalError::Unknown) => e,
            Err(EvalError::Bad(what)) => return Err(what),
        })
    }

    /// The value when it reads no loop index.
    pub fn constant(&self) -> Option<i64> {
        match self {
            Expr::Lit(v) => Some(*v),
            _ => None,
        }
    }

    /// The value, with `loops[d]` the index of the loop at depth `d` (`None`: not known).
    pub fn eval(&self, loops: &[Option<i64>]) -> Result<i64, EvalError> {
        match self {
            Expr::Lit(v) => Ok(*v),
            Expr::Loop { depth, .. } => loops
                .get(*depth)
                .copied()
                .flatten()
                .ok_or(EvalError::Unknown),
            Expr::Neg(e) => {
                let v = e.eval(loops)?;
                v.checked_neg()
                    .ok_or_else(|| EvalError::Bad(format!("-({v}) overflows 64 bits")))
            }
            Expr::Bin(op, a, b) => {
                let (x, y) = (a.eval(loops)?, b.eval(loops)?);
                let (r, sign) = match op {
                    BinOp::Add => (x.checked_add(y), "+"),
                    BinOp::Sub => (x.checked_sub(y), "-"),
                    BinOp::Mul => (x.checked_mul(y), "*"),
                    BinOp::Div | BinOp::Rem if y == 0 => {
                        return Err(EvalError::Bad(format!(
                            "{x} {} 0 divides by zero",
                            if *op == BinOp::Div { "/" } else { "%" }
                        )))
                    }
                    BinOp::Div => (x.checked_div(y), "/"),
                    BinOp::Rem => (x.checked_rem(y), "%"),
                };
                r.ok_or_else(|| EvalError::Bad(format!("{x} {sign} {y} overflows 64 bits")))
            }
            Expr::Call(f, args) => {
                let mut v: Option<i64> = None;
                for a in args {
                    let x = a.eval(loops)?;
                    v = Some(match (v, f) {
                        (None, _) => x,
                        (Some(v), Func::Min) => v.min(x),
                        (Some(v), Func::Max) => v.max(x),
                    });
                }
                Ok(v.expect("a call has an argument"))
            }
        }
    }

    /// The loops it reads, outermost first, as `(depth, name)`.
    pub fn loops(&self) -> Vec<(usize, &str)> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out.sort();
        out.dedup();
        out
    }

    fn collect<'a>(&'a self, out: &mut Vec<(usize, &'a str)>) {
        match self {
            Expr::Lit(_) => {}
            Expr::Loop { depth, name } => out.push((*depth, name)),
            Expr::Neg(e) => e.collect(out),
            Expr::Bin(_, a, b) => {
                a.collect(out);
                b.collect(out);
            }
            Expr::Call(_, args) => args.iter().for_each(|a| a.collect(out)),
        }
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Lit(v) => write!(f, "{v}"),
            Expr::Loop { name, .. } => f.write_str(name),
            Expr::Neg(e) => write!(f, "-({e})"),
            Expr::Bin(op, a, b) => {
                let s = match op {
                    BinOp::Add => "+",
                    BinOp::Sub => "-",
                    BinOp::Mul => "*",
                    BinOp::Div => "/",
                    BinOp::Rem => "%",
                };
                write!(f, "({a} {s} {b})")
            }
            Expr::Call(func, args) => {
                f.write_str(match func {
                    Func::Min => "min(",
                    Func::Max => "max(",
                })?;
                for (i, a) in args.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{a}")?;
                }
                f.write_str(")")
            }
        }
    }
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    scope: &'a dyn Scope,
    depth: u32,
}

impl Parser<'_> {
    fn skip(&mut self) {
        while self.pos < self.bytes.len() && self.bytes[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip();
        self.bytes.get(self.pos).copied()
    }

    fn unexpected(&self, wanted: &str) -> String {
        match self.text[self.pos..].chars().next() {
            None => format!("expected {wanted} at the end"),
            Some(c) => format!("expected {wanted} at `{c}` (character {})", self.pos + 1),
        }
    }

    fn nest(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!("nested more than {MAX_DEPTH} deep"));
        }
        Ok(())
    }

    fn expr(&mut self) -> Result<Expr, String> {
        let mut e = self.term()?;
        while let Some(c @ (b'+' | b'-')) = self.peek() {
            self.pos += 1;
            let op = if c == b'+' { BinOp::Add } else { BinOp::Sub };
            e = Expr::Bin(op, Box::new(e), Box::new(self.term()?));
        }
        Ok(e)
    }

    fn term(&mut self) -> Result<Expr, String> {
        let mut e = self.unary()?;
        while let Some(c @ (b'*' | b'/' | b'%')) = self.peek() {
            self.pos += 1;
            let op = match c {
                b'*' => BinOp::Mul,
                b'/' => BinOp::Div,
                _ => BinOp::Rem,
            };
            e = Expr::Bin(op, Box::new(e), Box::new(self.unary()?));
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.peek() == Some(b'-') {
            self.pos += 1;
            // `-9223372036854775808` is i64::MIN, though 2^63 alone is not a value.
            self.skip();
            let rest = &self.bytes[self.pos..];
            let min = b"9223372036854775808";
            if rest.starts_with(min)
                && !rest
                    .get(min.len())
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
            {
                self.pos += min.len();
                return Ok(Expr::Lit(i64::MIN));
            }
            self.nest()?;
            let e = self.unary()?;
            self.depth -= 1;
            return Ok(match e {
                Expr::Lit(v) if v != i64::MIN => Expr::Lit(-v),
                e => Expr::Neg(Box::new(e)),
            });
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<Expr, String> {
        match self.peek() {
            Some(b'(') => {
                self.pos += 1;
                self.nest()?;
                let e = self.expr()?;
                self.depth -= 1;
                if self.peek() != Some(b')') {
                    return Err(self.unexpected("`)`"));
                }
                self.pos += 1;
                Ok(e)
            }
            Some(c) if c.is_ascii_digit() => {
                let from = self.pos;
                while self
                    .bytes
                    .get(self.pos)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
                {
                    self.pos += 1;
                }
                let digits: String = self.text[from..self.pos].replace('_', "");
                if !digits.bytes().all(|c| c.is_ascii_digit()) {
                    return Err(format!(
                        "`{}` is not a decimal integer (character {})",
                        &self.text[from..self.pos],
                        from + 1
                    ));
                }
                match digits.parse::<i64>() {
                    Ok(v) => Ok(Expr::Lit(v)),
                    Err(_) => Err(format!(
                        "{} does not fit 64 bits (character {})",
                        &self.text[from..self.pos],
                        from + 1
                    )),
                }
            }
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                let from = self.pos;
                while self
                    .bytes
                    .get(self.pos)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
                {
                    self.pos += 1;
                }
                let name = &self.text[from..self.pos];
                if self.peek() == Some(b'(') {
                    let func = match name {
                        "min" => Func::Min,
                        "max" => Func::Max,
                        _ => {
                            return Err(format!(
                                "no function `{name}` (there are min and max; character {})",
                                from + 1
                            ))
                        }
                    };
                    self.pos += 1;
                    self.nest()?;
                    let mut args = vec![self.expr()?];
                    while self.peek() == Some(b',') {
                        self.pos += 1;
                        args.push(self.expr()?);
                    }
                    self.depth -= 1;
                    if self.peek() != Some(b')') {
                        return Err(self.unexpected("`,` or `)`"));
                    }
                    self.pos += 1;
                    return Ok(Expr::Call(func, args));
                }
                if let Some(depth) = self.scope.loop_depth(name) {
                    return Ok(Expr::Loop {
                        depth,
                        name: name.to_string(),
                    });
                }
                match self.scope.constant(name) {
                    Some(Ok(v)) => Ok(Expr::Lit(v)),
                    Some(Err(e)) => Err(e),
                    None => {
                        let mut names = self.scope.names();
                        names.sort();
                        Err(format!(
                            "no constant or loop index `{name}` here ({})",
                            if names.is_empty() {
                                "none is declared".to_string()
                            } else {
                                format!("there are: {}", names.join(", "))
                            }
                        ))
                    }
                }
            }
            _ => Err(self.unexpected("a number, a name or `(`")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct S;
    impl Scope for S {
        fn constant(&self, name: &str) -> Option<Result<i64, String>> {
            match name {
                "N" => Some(Ok(64)),
                "BIG" => Some(Ok(i64::MAX)),
                _ => None,
            }
        }
        fn loop_depth(&self, name: &str) -> Option<usize> {
            match name {
                "i" => Some(0),
                "t" => Some(1),
                _ => None,
            }
        }
        fn names(&self) -> Vec<String> {
            ["N", "BIG", "i", "t"].map(String::from).to_vec()
        }
    }

    fn value(text: &str, loops: &[i64]) -> Result<i64, String> {
        let e = Expr::parse(text, &S)?;
        let loops: Vec<Option<i64>> = loops.iter().map(|&v| Some(v)).collect();
        e.eval(&loops).map_err(|e| match e {
            EvalError::Unknown => "unknown".into(),
            EvalError::Bad(s) => s,
        })
    }

    #[test]
    fn precedence_associativity_and_c_division() {
        assert_eq!(value("(N + 15) / 16", &[]), Ok(4));
        assert_eq!(value("N - 1 - 2", &[]), Ok(61));
        assert_eq!(value("2 + 3 * 4 % 5", &[]), Ok(4));
        assert_eq!(value("-7 / 2", &[]), Ok(-3));
        assert_eq!(value("-7 % 2", &[]), Ok(-1));
        assert_eq!(value("- -3", &[]), Ok(3));
        assert_eq!(value("1_000 * 2", &[]), Ok(2000));
        assert_eq!(value("min(i + 1, 2 * N - 1 - i)", &[100, 0]), Ok(27));
        assert_eq!(value("max(i, t, 3)", &[1, 2]), Ok(3));
        assert_eq!(value("N - t", &[0, 5]), Ok(59));
        assert_eq!(value("-9223372036854775808", &[]), Ok(i64::MIN));
    }

    #[test]
    fn constants_fold_and_loops_stay() {
        assert_eq!(Expr::parse("N * 2 + 1", &S), Ok(Expr::Lit(129)));
        let e = Expr::parse("N - t", &S).unwrap();
        assert_eq!(e.constant(), None);
        assert_eq!(e.loops(), vec![(1, "t")]);
        assert_eq!(e.eval(&[Some(0)]), Err(EvalError::Unknown));
    }

    #[test]
    fn overflow_division_by_zero_and_bad_text_are_errors() {
        let e = value("BIG + 1", &[]).unwrap_err();
        assert!(e.contains("overflows"), "{e}");
        let e = value("N / (t - 2)", &[0, 2]).unwrap_err();
        assert!(e.contains("64 / 0 divides by zero"), "{e}");
        let e = value("N % 0", &[]).unwrap_err();
        assert!(e.contains("divides by zero"), "{e}");
        let e = value("-BIG - 2", &[]).unwrap_err();
        assert!(e.contains("overflows"), "{e}");
        let e = value("i * BIG", &[2, 0]).unwrap_err();
        assert!(e.contains("2 * 9223372036854775807 overflows"), "{e}");
        let e = value("N - k", &[]).unwrap_err();
        assert!(
            e.contains("no constant or loop index `k`") && e.contains("N, i, t"),
            "{e}"
        );
        let e = value("N +", &[]).unwrap_err();
        assert!(e.contains("at the end"), "{e}");
        let e = value("N ) ", &[]).unwrap_err();
        assert!(e.contains("character 3"), "{e}");
        assert!(value("", &[]).unwrap_err().contains("empty"));
        assert!(value("12ab", &[]).unwrap_err().contains("not a decimal"));
        assert!(value("99999999999999999999", &[])
            .unwrap_err()
            .contains("64 bits"));
        assert!(value("1 - 9223372036854775808", &[])
            .unwrap_err()
            .contains("64 bits"));
        assert!(value("9223372036854775808", &[])
            .unwrap_err()
            .contains("64 bits"));
        assert!(value("sqrt(4)", &[])
            .unwrap_err()
            .contains("no function `sqrt`"));
        let deep = format!("{}1{}", "(".repeat(100), ")".repeat(100));
        assert!(value(&deep, &[]).unwrap_err().contains("nested"));
        let deep = format!("{}1", "-".repeat(100));
        assert!(value(&deep, &[]).unwrap_err().contains("nested"));
    }
}
