//! The PTX type checker: every example of issue 14 is an error naming its place, and every
//! committed PTX file is still accepted.

use std::path::{Path, PathBuf};

use kir::lower::{lower_module, LowerError};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn lower(src: &str) -> Result<kir::Module, Vec<LowerError>> {
    lower_module(&ptx::parse(src).expect("parses"), "t.ptx")
}

/// The suite's PTX and the parser's sample files.
fn committed_ptx() -> Vec<PathBuf> {
    let mut files = Vec::new();
    let kernels = root().join("kernels");
    for dir in std::fs::read_dir(&kernels).expect("kernels/") {
        let dir = dir.expect("entry").path();
        if dir.is_dir() {
            for f in std::fs::read_dir(&dir).expect("kernel dir") {
                let f = f.expect("entry").path();
                if f.extension().is_some_and(|e| e == "ptx") {
                    files.push(f);
                }
            }
        }
    }
    let mut dirs = vec![
        root().join("crates/ptx/tests/data"),
        root().join("crates/gpu/tests/data"),
    ];
    for ex in std::fs::read_dir(root().join("examples")).expect("examples/") {
        dirs.push(ex.expect("entry").path());
    }
    for dir in dirs.iter().filter(|d| d.is_dir()) {
        for f in std::fs::read_dir(dir).expect("a data directory") {
            let f = f.expect("entry").path();
            if f.extension().is_some_and(|e| e == "ptx") {
                files.push(f);
            }
        }
    }
    files.sort();
    files
}

/// The suite's kernels lower without error; the parser's samples (some use instructions
/// Switchyard does not execute, such as `tex` and `mma`) have no type error.
#[test]
fn every_committed_ptx_file_is_accepted() {
    let files = committed_ptx();
    assert!(files.len() > 30, "found {} files", files.len());
    let mut failures = Vec::new();
    for f in &files {
        let sample = f.starts_with(root().join("crates"));
        let text = std::fs::read_to_string(f).expect("readable");
        let source = ptx::SourceFile::new(f.display().to_string(), text.as_str());
        match ptx::parse(&text) {
            Err(e) => failures.push(format!("{}: {e}", source.location(e.span()))),
            Ok(ast) => {
                if let Err(errs) = lower_module(&ast, "t.ptx") {
                    for e in errs {
                        let type_error = matches!(
                            e,
                            LowerError::OperandType { .. }
                                | LowerError::InstructionType { .. }
                                | LowerError::ImmediateRange { .. }
                        );
                        if !sample || type_error {
                            failures.push(format!("{}: {e}", source.location(e.span())));
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

const HEADER: &str = ".version 8.0\n.target sm_70\n.address_size 64\n";

/// Lowers a kernel whose body is `decls` then `line`, expecting exactly one error; returns
/// it as `line:col: message`.
fn error_of(line: &str) -> String {
    let src = format!(
        "{HEADER}.visible .entry k(.param .u64 p)\n{{\n\
         .reg .pred %p<3>;\n.reg .b32 %r<4>;\n.reg .b64 %rd<4>;\n\
         .reg .f32 %f<4>;\n.reg .f64 %fd<4>;\n\
         {line}\nret;\n}}\n"
    );
    let errs = lower(&src).expect_err("rejected");
    assert_eq!(errs.len(), 1, "{errs:?}");
    let source = ptx::SourceFile::new("t.ptx", src.as_str());
    let (l, c) = source.line_col(errs[0].span().start);
    format!("{l}:{c}: {}", errs[0])
}

/// The instruction sits on line 11 of the kernel `error_of` builds.
#[test]
fn register_class_and_width_must_match_the_instruction() {
    let cases = [
        (
            "add.s32 %r1, %p1, %r2;",
            "11:14: operand 2 of `add.s32` is `%p1`, a .pred register; \
             expected a 32-bit integer or bit-size register",
        ),
        (
            "add.s32 %r1, %rd1, %r2;",
            "11:14: operand 2 of `add.s32` is `%rd1`, a .b64 register; expected a 32-bit register",
        ),
        (
            "sub.f64 %fd1, %f1, %f2;",
            "11:15: operand 2 of `sub.f64` is `%f1`, a .f32 register; \
             expected a .f64 or 64-bit bit-size register",
        ),
        (
            "ld.param.u64 %r1, [p];",
            "11:14: operand 1 of `ld.param.u64` is `%r1`, a .b32 register; \
             expected a register of at least 64 bits",
        ),
        (
            "mov.pred %rd1, %rd2;",
            "11:10: operand 1 of `mov.pred` is `%rd1`, a .b64 register; expected a .pred register",
        ),
        (
            "xor.pred %r1, %p1, %p2;",
            "11:10: operand 1 of `xor.pred` is `%r1`, a .b32 register; expected a .pred register",
        ),
    ];
    for (line, want) in cases {
        assert_eq!(error_of(line), want, "{line}");
    }
}

#[test]
fn instructions_allow_only_their_types() {
    let cases = [
        (
            "add.s8 %r1, %r2, %r3;",
            "11:4: `.s8` is not a valid type for `add`",
        ),
        (
            "shl.s32 %r1, %r2, 1;",
            "11:4: `.s32` is not a valid type for `shl`",
        ),
        (
            "selp.b8 %r1, %r2, %r3, %p1;",
            "11:5: `.b8` is not a valid type for `selp`",
        ),
        (
            "activemask.f16x2 %r1;",
            "11:11: `.f16x2` is not a valid type for `activemask`",
        ),
        (
            "shfl.sync.bfly.s64 %rd1, %rd2, 1, 31, -1;",
            "11:15: `.s64` is not a valid type for `shfl`",
        ),
    ];
    for (line, want) in cases {
        let got = error_of(line);
        assert!(got.starts_with(want), "{line}: {got}");
    }
}

#[test]
fn fence_needs_a_scope() {
    assert_eq!(
        error_of("fence;"),
        "11:1: `fence` needs a scope (`.cta`, `.cluster`, `.gpu` or `.sys`)"
    );
    assert_eq!(
        error_of("membar;"),
        "11:1: `membar` needs a level (`.cta`, `.gl` or `.sys`)"
    );
    assert!(lower(&format!(
        "{HEADER}.entry k()\n{{\nfence.sc.cta;\nfence.acq_rel.gpu;\nmembar.gl;\nret;\n}}"
    ))
    .is_ok());
}

/// The warnings of a kernel whose body is `line`, as `line:col: what`.
fn warnings_of(line: &str) -> Vec<String> {
    let src = format!(
        "{HEADER}.visible .entry k(.param .u64 p)\n{{\n\
         .reg .pred %p<3>;\n.reg .b16 %rs<4>;\n.reg .b32 %r<4>;\n.reg .b64 %rd<4>;\n\
         {line}\nret;\n}}\n"
    );
    let m = lower(&src).unwrap_or_else(|e| panic!("{e:?}"));
    let source = ptx::SourceFile::new("t.ptx", src.as_str());
    m.warnings
        .iter()
        .map(|w| {
            let (l, c) = source.line_col(w.span.start);
            format!("{l}:{c}: {w}")
        })
        .collect()
}

#[test]
fn integer_immediates_that_do_not_fit_are_wrapped_with_a_warning() {
    // ptxas takes a literal that does not fit its type, wrapped to it; so does Switchyard,
    // and it says so (issue 21: the error was a deliberate disagreement with ptxas).
    assert_eq!(
        warnings_of("mov.u16 %rs1, 70000;"),
        ["10:15: integer literal 70000 does not fit `.u16` in `mov.u16`: taken as 0x1170 (wrapped to the type, as ptxas does)"]
    );
    assert_eq!(
        warnings_of("add.u32 %r1, %r2, 4294967296;"),
        ["10:19: integer literal 4294967296 does not fit `.u32` in `add.u32`: taken as 0x0 (wrapped to the type, as ptxas does)"]
    );
    assert_eq!(warnings_of("mov.b32 %r1, -2147483649;").len(), 1);
    // Both readings of a 32-bit pattern are fine, without a warning.
    assert!(warnings_of("add.u32 %r1, %r2, -1;\nadd.s32 %r1, %r2, 0xffffffff;").is_empty());
    // Beyond 64 bits it stays an error (ptxas reports an overflow there too).
    assert_eq!(
        error_of("mov.u64 %rd1, 147573952589676412928;"),
        "11:15: integer literal 147573952589676412928 does not fit `.u64` in `mov.u64`"
    );
}

#[test]
fn initializers_that_do_not_fit_are_wrapped_with_a_warning() {
    let m = lower(&format!(
        "{HEADER}.global .u8 x[2] = {{255, 256}};\n.global .s16 y = -32768;\n"
    ))
    .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(m.warnings.len(), 1, "{:?}", m.warnings);
    assert!(
        m.warnings[0]
            .to_string()
            .starts_with("integer literal 256 does not fit `.u8` in `x`: taken as 0x0"),
        "{}",
        m.warnings[0]
    );
    let (_, x) = m.globals.iter().find(|(_, g)| g.name == "x").unwrap();
    assert_eq!(x.init, [255, 0]);
}

#[test]
fn functions_no_kernel_calls_are_checked_too() {
    let src = format!(
        "{HEADER}.func (.param .b32 r) unused(.param .b32 a, .reg .b32 b)
{{
    .reg .b32 %r<3>;
    .reg .b64 %rd<2>;
    ld.param.b32 %r1, [a];
    add.s32 %r2, %r1, %rd1;
    add.s32 %r2, %r2, b;
    st.param.b32 [r], %r2;
    ret;
}}
.func selfish()
{{
    call.uni selfish, ();
    ret;
}}
.visible .entry k()
{{
    ret;
}}"
    );
    let errs = lower(&src).expect_err("rejected");
    let source = ptx::SourceFile::new("t.ptx", src.as_str());
    let got: Vec<String> = errs
        .iter()
        .map(|e| format!("{}: {e}", source.location(e.span())))
        .collect();
    assert_eq!(
        got,
        ["t.ptx:9:23: operand 3 of `add.s32` is `%rd1`, a .b64 register; expected a 32-bit register"]
    );
}

#[test]
fn an_error_in_a_function_inlined_twice_is_reported_once() {
    let src = format!(
        "{HEADER}.func f()
{{
    .reg .b64 %rd<2>;
    .reg .b32 %r<2>;
    add.s32 %r1, %rd1, 1;
    ret;
}}
.visible .entry k()
{{
    call.uni f, ();
    call.uni f, ();
    ret;
}}"
    );
    let errs = lower(&src).expect_err("rejected");
    assert_eq!(errs.len(), 1, "{errs:?}");
}

#[test]
fn a_loc_does_not_swallow_the_statement_after_it() {
    let src = format!(
        "{HEADER}.visible .entry k(.param .u64 p)
{{
    .reg .b32 %r<2>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [p];
    .loc 1 5 3 mov.u32 %r1, 7;
    .loc 1 6 3 st.global.u32 [%rd1], %r1;
    ret;
}}"
    );
    let m = lower(&src).expect("accepted");
    let ops: Vec<String> = m.kernels[kir::KernelId(0)]
        .insts
        .values()
        .map(|i| {
            format!("{:?}", i.op)
                .split([' ', '('])
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(ops, ["Ld", "Mov", "St", "Exit"]);
}

#[test]
fn packed_sixteen_bit_integers_type_instructions_not_registers() {
    let k = |body: &str| {
        format!(".version 8.0\n.target sm_90\n.address_size 64\n.entry k()\n{{\n.reg .b32 %r<4>;\n{body}\nret;\n}}")
    };
    for ok in [
        "add.u16x2 %r0, %r1, %r2;",
        "sub.s16x2 %r0, %r1, %r2;",
        "min.relu.s16x2 %r0, %r1, %r2;",
        "max.u16x2 %r0, %r1, %r2, %r3;",
    ] {
        assert!(lower(&k(ok)).is_ok(), "{ok}");
    }
    for bad in [
        "mul.lo.u16x2 %r0, %r1, %r2;",
        "min.relu.u16x2 %r0, %r1, %r2;",
    ] {
        let e = lower(&k(bad)).expect_err(bad);
        assert!(e[0].to_string().contains("u16x2"), "{bad}: {}", e[0]);
    }
    // Not a register or variable type.
    assert!(ptx::parse(&k(".reg .u16x2 %x;")).is_err());
}

#[test]
fn half_precision_set_pairs_result_and_source_types() {
    let k = |body: &str| {
        format!(".version 8.0\n.target sm_90\n.address_size 64\n.entry k()\n{{\n.reg .b16 %h<4>;\n.reg .b32 %r<4>;\n.reg .f32 %f<4>;\n{body}\nret;\n}}")
    };
    for ok in [
        "set.lt.f16x2.f16x2 %r0, %r1, %r2;",
        "set.lt.u32.bf16x2 %r0, %r1, %r2;",
        "set.ge.u16.f16 %h0, %h1, %h2;",
        "set.eq.f16.f32 %h0, %f1, %f2;",
        "rcp.approx.ftz.f64 %fd0, %fd1;",
    ] {
        let text = k(ok).replace(".reg .f32", ".reg .f64 %fd<2>;\n.reg .f32");
        assert!(lower(&text).is_ok(), "{ok}: {:?}", lower(&text).err());
    }
    for (bad, needle) in [
        ("set.lt.f16x2.f32 %r0, %f1, %f2;", "with .f32 sources"),
        ("set.lt.u16.f32 %h0, %f1, %f2;", "with .f32 sources"),
        ("set.lt.bf16x2.f16x2 %r0, %r1, %r2;", "with .f16x2 sources"),
    ] {
        let e = lower(&k(bad)).expect_err(bad);
        assert!(e[0].to_string().contains(needle), "{bad}: {}", e[0]);
    }
}
