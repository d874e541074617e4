//! Malformed input: each case checks the error variant, the message and the `line:col` its
//! span points at.

use ptx::{ParseError, SourceFile};

const HEADER: &str = ".version 8.4\n.target sm_70\n.address_size 64\n";

/// Parses `src`, expects an error, and returns it with the 1-based line and column of its
/// span start and the text the span covers.
fn fail(src: &str) -> (ParseError, (u32, u32), String) {
    let e = ptx::parse(src).expect_err("malformed input parsed");
    let f = SourceFile::new("t.ptx", src);
    let s = e.span();
    let covered = src[s.start as usize..s.end as usize].to_string();
    (e, f.line_col(s.start), covered)
}

/// A kernel whose body is `body`, starting on line 5.
fn kernel(body: &str) -> String {
    format!("{HEADER}.visible .entry k(\n{body}")
}

#[test]
fn missing_semicolon_before_brace() {
    let src = format!("{HEADER}.visible .entry k()\n{{\n\tret\n}}\n");
    let (e, pos, covered) = fail(&src);
    assert_eq!(e.to_string(), "expected `;` after instruction, found `}`");
    assert!(matches!(e, ParseError::UnexpectedToken { .. }));
    assert_eq!(pos, (7, 1));
    assert_eq!(covered, "}");
}

#[test]
fn missing_semicolon_between_instructions() {
    let src = kernel(")\n{\n\tmov.u32 %r1, %r2\n\tret;\n}\n");
    let (e, pos, covered) = fail(&src);
    assert_eq!(
        e,
        ParseError::UnexpectedToken {
            expected: "`;` after instruction".into(),
            found: "`ret`".into(),
            span: e.span()
        }
    );
    assert_eq!(pos, (8, 2));
    assert_eq!(covered, "ret");
}

#[test]
fn unterminated_block_comment() {
    let src = format!("{HEADER}\t/* header\n never closed");
    let (e, pos, covered) = fail(&src);
    assert!(matches!(e, ParseError::UnterminatedComment { .. }));
    assert_eq!(e.to_string(), "unterminated block comment");
    assert_eq!(pos, (4, 2));
    assert_eq!(covered, "/*");
}

#[test]
fn unterminated_string() {
    let src = kernel(")\n{\n\t.pragma \"nounroll;\n}\n");
    let (e, pos, covered) = fail(&src);
    assert!(matches!(e, ParseError::UnterminatedString { .. }));
    assert_eq!(pos, (7, 10));
    assert_eq!(covered, "\"nounroll;");
}

#[test]
fn invalid_numbers() {
    for (lit, col) in [
        ("0x", 15),
        ("0f3F80", 15),
        ("09", 15),
        ("12ab", 15),
        ("0dZZ", 15),
    ] {
        let src = kernel(&format!(")\n{{\n\tmov.u32 %r1, {lit};\n}}\n"));
        let (e, pos, covered) = fail(&src);
        assert_eq!(
            e,
            ParseError::InvalidNumber {
                text: lit.into(),
                span: e.span()
            },
            "{lit}"
        );
        assert_eq!(e.to_string(), format!("invalid number `{lit}`"));
        assert_eq!(pos, (7, col), "{lit}");
        assert_eq!(covered, lit);
    }
}

#[test]
fn number_out_of_range() {
    let src = kernel(")\n{\n\t.reg .b32 %r<99999999999>;\n}\n");
    let (e, pos, covered) = fail(&src);
    assert!(matches!(e, ParseError::NumberOutOfRange { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "number `99999999999` is out of range for a register count"
    );
    assert_eq!(pos, (7, 15));
    assert_eq!(covered, "99999999999");

    let src = kernel(")\n{\n\tld.u32 %r1, [%rd1+99999999999999999999];\n}\n");
    let (e, pos, _) = fail(&src);
    assert!(matches!(e, ParseError::NumberOutOfRange { .. }), "{e:?}");
    assert_eq!(pos, (7, 20));
}

#[test]
fn unclosed_body_is_unexpected_eof() {
    let src = kernel(")\n{\n\tret;\n");
    let (e, pos, covered) = fail(&src);
    assert_eq!(
        e,
        ParseError::UnexpectedEof {
            expected: "`}` to close the block".into(),
            span: e.span()
        }
    );
    assert_eq!(
        e.to_string(),
        "expected `}` to close the block, found end of file"
    );
    assert_eq!(pos, (8, 1));
    assert_eq!(covered, "");
}

#[test]
fn unclosed_parameter_list() {
    let src = kernel("\t.param .u64 p0\n{\n\tret;\n}\n");
    let (e, pos, covered) = fail(&src);
    assert_eq!(
        e.to_string(),
        "expected `,` or `)` after parameter, found `{`"
    );
    assert_eq!(pos, (6, 1));
    assert_eq!(covered, "{");
}

#[test]
fn unknown_type() {
    let src = kernel(")\n{\n\t.reg .u33 %r<2>;\n}\n");
    let (e, pos, covered) = fail(&src);
    assert_eq!(
        e,
        ParseError::UnknownType {
            name: "u33".into(),
            span: e.span()
        }
    );
    assert_eq!(e.to_string(), "unknown type `.u33`");
    assert_eq!(pos, (7, 7));
    assert_eq!(covered, ".u33");
}

#[test]
fn unexpected_directives() {
    let (e, pos, covered) = fail(&format!("{HEADER}.maxnreg 4\n"));
    assert!(matches!(e, ParseError::UnexpectedDirective { .. }));
    assert_eq!(
        e.to_string(),
        "unexpected directive `.maxnreg` at module scope"
    );
    assert_eq!(pos, (4, 1));
    assert_eq!(covered, ".maxnreg");

    let (e, pos, _) = fail(&kernel(")\n{\n\t.maxnreg 4;\n}\n"));
    assert_eq!(
        e.to_string(),
        "unexpected directive `.maxnreg` in a function body"
    );
    assert_eq!(pos, (7, 2));
}

#[test]
fn missing_version() {
    let (e, pos, covered) = fail("// comment\n.target sm_70\n");
    assert_eq!(
        e.to_string(),
        "expected `.version` directive at the start of the module, found `.target`"
    );
    assert_eq!(pos, (2, 1));
    assert_eq!(covered, ".target");
    let (e, _, _) = fail("");
    assert!(matches!(e, ParseError::UnexpectedEof { .. }));
}

#[test]
fn unexpected_character() {
    let (e, pos, covered) = fail(&kernel(")\n{\n\tadd.s32 %r1, %r2, #3;\n}\n"));
    assert_eq!(
        e,
        ParseError::UnexpectedChar {
            ch: '#',
            span: e.span()
        }
    );
    assert_eq!(e.to_string(), "unexpected character `#`");
    assert_eq!(pos, (7, 20));
    assert_eq!(covered, "#");
}

#[test]
fn unclosed_address() {
    let (e, pos, covered) = fail(&kernel(")\n{\n\tld.global.u32 %r1, [%rd1;\n}\n"));
    assert_eq!(
        e.to_string(),
        "expected `]` to close the address, found `;`"
    );
    assert_eq!(pos, (7, 26));
    assert_eq!(covered, ";");
}

#[test]
fn missing_operand() {
    let (e, pos, _) = fail(&kernel(")\n{\n\tadd.s32 %r1, , %r2;\n}\n"));
    assert_eq!(e.to_string(), "expected an operand, found `,`");
    assert_eq!(pos, (7, 15));
}

#[test]
fn guard_without_instruction() {
    let (e, pos, _) = fail(&kernel(")\n{\n\t@%p1;\n}\n"));
    assert_eq!(e.to_string(), "expected an instruction opcode, found `;`");
    assert_eq!(pos, (7, 6));
    let (e, pos, _) = fail(&kernel(")\n{\n\t@!;\n}\n"));
    assert_eq!(
        e.to_string(),
        "expected a predicate register after `@`, found `;`"
    );
    assert_eq!(pos, (7, 4));
}

#[test]
fn statement_cannot_start_with_a_number() {
    let (e, pos, _) = fail(&kernel(")\n{\n\t123: ret;\n}\n"));
    assert_eq!(
        e.to_string(),
        "expected an instruction, label or declaration, found `123`"
    );
    assert_eq!(pos, (7, 2));
}

#[test]
fn bad_initializer_and_declarations() {
    let (e, pos, _) = fail(&format!("{HEADER}.global .u32 x[2] = {{1 2}};\n"));
    assert_eq!(
        e.to_string(),
        "expected `,` or `}` in initializer list, found `2`"
    );
    assert_eq!(pos, (4, 24));

    let (e, pos, _) = fail(&format!("{HEADER}.global .u32 x = 1\n.global .u32 y;\n"));
    assert_eq!(
        e.to_string(),
        "expected `;` after variable declaration, found `.global`"
    );
    assert_eq!(pos, (5, 1));

    let (e, pos, _) = fail(&format!("{HEADER}.global .align .u32 x;\n"));
    assert_eq!(
        e.to_string(),
        "expected an alignment after `.align`, found `.u32`"
    );
    assert_eq!(pos, (4, 16));

    let (e, _, _) = fail(&format!("{HEADER}.global .texref t;\n"));
    assert_eq!(e.to_string(), "unknown type `.texref`");
}

#[test]
fn unterminated_section() {
    let (e, pos, _) = fail(&format!("{HEADER}.section .debug_abbrev\n{{\n.b8 1\n"));
    assert_eq!(
        e.to_string(),
        "expected `}` to close the section, found end of file"
    );
    assert_eq!(pos, (7, 1));
}

#[test]
fn long_tokens_are_shortened_in_messages() {
    let long = "x".repeat(100);
    let (e, _, _) = fail(&format!("{HEADER}.entry k() {{ mov.u32 %r1 {long} }}"));
    assert_eq!(
        e.to_string(),
        format!(
            "expected `;` after instruction, found `{}...`",
            "x".repeat(40)
        )
    );
}

#[test]
fn bad_parameters() {
    let (e, pos, _) = fail(&kernel("\t.param .v2 .f32 p0\n)\n{\n\tret;\n}\n"));
    assert_eq!(
        e.to_string(),
        "unexpected directive `.v2` in a parameter declaration"
    );
    assert_eq!(pos, (5, 9));
    let (e, _, _) = fail(&kernel("\t.param .u32 .u64 p0\n)\n{\n\tret;\n}\n"));
    assert_eq!(
        e.to_string(),
        "unexpected directive `.u64` after the parameter's type"
    );
    let (e, pos, _) = fail(&kernel("\t.param p0\n)\n{\n\tret;\n}\n"));
    assert_eq!(
        e.to_string(),
        "expected a type such as `.b32` in parameter, found `p0`"
    );
    assert_eq!(pos, (5, 9));
    let (e, _, _) = fail(&kernel("\t.local .u32 p0\n)\n{\n\tret;\n}\n"));
    assert_eq!(
        e.to_string(),
        "expected `.param` or `.reg` parameter, found `.local`"
    );
}
