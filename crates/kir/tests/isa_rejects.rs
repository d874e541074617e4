//! PTX the ISA forbids and `ptxas` rejects, which the checker used to accept (issue 21,
//! found by mutation): each is refused with an error at its line, whether the parser
//! (`.version`, `.target`, `.align`) or lowering (the rest) finds it. A correct variant of
//! each is accepted, so the check is no broader than the rule.

use kir::lower::lower_module;
use ptx::SourceFile;

/// The location (`t.ptx:line:col`) and message of the first error in `src`, or `None`.
fn first_error(src: &str) -> Option<(String, String)> {
    let file = SourceFile::new("t.ptx", src);
    let module = match ptx::parse(src) {
        Ok(m) => m,
        Err(e) => return Some((file.location(e.span()), e.to_string())),
    };
    match lower_module(&module, "t.ptx") {
        Ok(_) => None,
        Err(errors) => errors
            .first()
            .map(|e| (file.location(e.span()), e.to_string())),
    }
}

/// A module: `.version`, `.target`, then one kernel `k` with `params` and `body`.
fn module(version: &str, target: &str, params: &str, body: &str) -> String {
    format!(
        ".version {version}\n.target {target}\n.address_size 64\n\n.visible .entry k({params})\n{{\n    .reg .pred %p<2>;\n    .reg .b32 %r<4>;\n    .reg .b64 %rd<4>;\n{body}\n    ret;\n}}\n"
    )
}

fn kernel(body: &str) -> String {
    module("8.0", "sm_70", ".param .u64 out", body)
}

#[track_caller]
fn rejected(src: &str, at: &str, what: &str) {
    match first_error(src) {
        Some((loc, msg)) => assert!(
            loc == at && msg.contains(what),
            "expected `{what}` at {at}, got `{msg}` at {loc}\n{src}"
        ),
        None => panic!("accepted, expected `{what}` at {at}:\n{src}"),
    }
}

#[track_caller]
fn accepted(src: &str) {
    if let Some((loc, msg)) = first_error(src) {
        panic!("{loc}: {msg}\n{src}");
    }
}

#[test]
fn a_guard_must_be_a_predicate() {
    let body = "    mov.u32 %r1, 1;\n    @%r1 add.u32 %r2, %r1, 1;";
    rejected(
        &kernel(body),
        "t.ptx:11:6",
        "the guard `%r1` is a .b32 register; a guard must be a .pred register",
    );
    accepted(&kernel(
        "    mov.u32 %r1, 1;\n    setp.ne.u32 %p1, %r1, 0;\n    @%p1 add.u32 %r2, %r1, 1;",
    ));
}

#[test]
fn the_ptx_version_must_exist() {
    for v in ["65.0", "0.5", "10.0"] {
        rejected(
            &module(v, "sm_70", "", ""),
            "t.ptx:1:10",
            "a PTX ISA version (1.0 to 9.x)",
        );
    }
    for v in ["6.4", "8.8", "9.0"] {
        accepted(&module(v, "sm_70", "", ""));
    }
}

#[test]
fn the_target_must_be_an_architecture_that_exists() {
    for t in ["sm_99", "sm_0", "sm_", "sm_a", "gfx90a"] {
        rejected(
            &module("8.0", t, "", ""),
            "t.ptx:2:9",
            &format!("found `{t}`"),
        );
    }
    rejected(
        &module("8.0", "sm_70, texmode_weird", "", ""),
        "t.ptx:2:16",
        "found `texmode_weird`",
    );
    for t in [
        "sm_52",
        "sm_070",  // `sm_70` to ptxas
        "sm_90ab", // ptxas 13.0 ignores the suffix letters
        "sm_90a",
        "sm_100f",
        "sm_70, debug",
        "sm_90a, texmode_independent",
    ] {
        accepted(&module("8.0", t, "", ""));
    }
}

#[test]
fn an_alignment_must_be_a_power_of_two() {
    for a in ["3", "0", "12"] {
        let global = format!(
            ".version 8.0\n.target sm_70\n.address_size 64\n.global .align {a} .b8 g[16];\n"
        );
        rejected(&global, "t.ptx:4:16", "an alignment (a power of two)");
        let param = module("8.0", "sm_70", &format!(".param .align {a} .b8 p[16]"), "");
        rejected(&param, "t.ptx:5:33", "an alignment (a power of two)");
        let local = kernel(&format!("    .local .align {a} .b8 buf[16];"));
        rejected(&local, "t.ptx:10:19", "an alignment (a power of two)");
    }
    accepted(".version 8.0\n.target sm_70\n.address_size 64\n.global .align 16 .b8 g[16];\n");
}

#[test]
fn a_kernel_is_defined_once() {
    let one = kernel("");
    let two = format!("{one}\n.visible .entry k(.param .u64 out)\n{{\n    ret;\n}}\n");
    rejected(&two, "t.ptx:14:17", "`k` is declared twice");
    // A prototype and then the definition is not a second definition.
    let proto =
        ".version 8.0\n.target sm_70\n.address_size 64\n.func f();\n.func f()\n{\n    ret;\n}\n";
    accepted(proto);
}

#[test]
fn parameter_names_are_distinct() {
    let src = module("8.0", "sm_70", ".param .u64 a, .param .u32 a", "");
    rejected(&src, "t.ptx:5:46", "`a` is declared twice");
}

#[test]
fn the_constant_bank_is_read_only() {
    let src = kernel("    .reg .b64 %rc;\n    mov.u64 %rc, 0;\n    st.const.u32 [%rc], 1;");
    rejected(&src, "t.ptx:12:7", "`st.const`");
    accepted(&kernel(
        "    ld.param.u64 %rd1, [out];\n    st.global.u32 [%rd1], 1;",
    ));
}

#[test]
fn a_cta_has_sixteen_barriers() {
    rejected(
        &kernel("    bar.sync 16;"),
        "t.ptx:10:14",
        "barrier 16 does not exist",
    );
    rejected(
        &kernel("    barrier.sync 99, 64;"),
        "t.ptx:10:18",
        "barrier 99",
    );
    accepted(&kernel("    bar.sync 15;"));
    accepted(&kernel("    bar.sync 0;"));
}

#[test]
fn a_required_block_has_threads() {
    let with = |d: &str| {
        format!(
            ".version 8.0\n.target sm_70\n.address_size 64\n.visible .entry k()\n{d}\n{{\n    ret;\n}}\n"
        )
    };
    for d in ["0", "0, 1, 1", "32, 0"] {
        rejected(
            &with(&format!(".reqntid {d}")),
            "t.ptx:5:1",
            &format!("`.reqntid {d}`: every dimension must be at least 1"),
        );
        rejected(&with(&format!(".maxntid {d}")), "t.ptx:5:1", "`.maxntid");
    }
    // ptxas leaves a block too large for the device to the launch.
    for d in [".reqntid 32, 4", ".reqntid 2048", ".maxntid 64, 32"] {
        accepted(&with(d));
    }
}
