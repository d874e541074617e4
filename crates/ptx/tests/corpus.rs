//! Parses every committed `.ptx` file: the workspace's `kernels/` tree and this crate's
//! `tests/data/`. A failure names the file and the `file:line:col` of the error.

use std::path::{Path, PathBuf};

use ptx::SourceFile;

/// All `*.ptx` files under `dir`, recursively, sorted for stable output. A missing directory
/// yields none.
fn ptx_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "ptx") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Parses each file and returns how many there were, or a report of every failure.
fn parse_all(dir: &Path) -> Result<usize, String> {
    let files = ptx_files(dir);
    let mut failures = Vec::new();
    for path in &files {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                failures.push(format!("{}: cannot read: {e}", path.display()));
                continue;
            }
        };
        if let Err(e) = ptx::parse(&text) {
            let file = SourceFile::new(path.display().to_string(), text);
            let (line, _) = file.line_col(e.span().start);
            failures.push(format!(
                "{}: {e}\n    {}",
                file.location(e.span()),
                file.line_text(line).trim()
            ));
        }
    }
    if failures.is_empty() {
        Ok(files.len())
    } else {
        Err(failures.join("\n"))
    }
}

#[test]
fn parses_every_committed_ptx() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kernels");
    // Also honour an extra directory, to check a batch of freshly generated PTX by hand.
    let extra = std::env::var_os("PTX_CORPUS_DIR").map(PathBuf::from);
    for d in std::iter::once(dir).chain(extra) {
        match parse_all(&d) {
            Ok(n) => println!("parsed {n} .ptx files under {}", d.display()),
            Err(report) => panic!("PTX files under {} failed to parse:\n{report}", d.display()),
        }
    }
}

#[test]
fn parses_every_test_sample() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    match parse_all(&dir) {
        Ok(n) => assert!(n >= 3, "expected the committed samples, found {n}"),
        Err(report) => panic!("{report}"),
    }
}
