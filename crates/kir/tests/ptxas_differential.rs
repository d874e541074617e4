//! Differential test of the PTX checker against NVIDIA's `ptxas` (docs/ptxas-differential.md).
//!
//! The corpus is the suite's PTX and seeded mutations of it; `tools/ptxas_verdicts.py`
//! records ptxas's verdict for each entry in `tests/data/ptxas_verdicts.tsv`. Switchyard must
//! accept what ptxas accepts and reject what it rejects, except:
//! * entries listed, each with its reason, in the docs page's table of known disagreements;
//! * code ptxas accepts that Switchyard rejects only as *unsupported* (an instruction or
//!   modifier it does not execute): counted apart, since it is not a claim that the code is
//!   invalid.
//!
//! The committed verdicts make the test independent of ptxas; `ptxas_still_gives_the_
//! committed_verdicts` re-runs ptxas when it is installed (`tools/install_ptxas.py`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use kir::lower::{lower_module, LowerError};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Entry {
    id: String,
    file: String,
    line: usize,
    kind: String,
    ptxas_accepts: bool,
    replacement: String,
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('t') => out.push('\t'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn entries() -> Vec<Entry> {
    let path = root().join("crates/kir/tests/data/ptxas_verdicts.tsv");
    let text = std::fs::read_to_string(&path).expect("committed verdicts");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.splitn(6, '\t').collect();
            assert_eq!(f.len(), 6, "malformed line: {l}");
            Entry {
                id: f[0].to_string(),
                file: f[1].to_string(),
                line: f[2].parse().expect("line number"),
                kind: f[3].to_string(),
                ptxas_accepts: match f[4] {
                    "accept" => true,
                    "reject" => false,
                    v => panic!("verdict `{v}` in {l}"),
                },
                replacement: unescape(f[5]),
            }
        })
        .collect()
}

/// The entry's PTX: the committed file with one line replaced.
fn text_of(e: &Entry) -> String {
    let text = std::fs::read_to_string(root().join(&e.file)).expect("committed PTX");
    if e.line == 0 {
        return text;
    }
    let mut lines: Vec<&str> = text.split('\n').collect();
    lines[e.line - 1] = &e.replacement;
    lines.join("\n")
}

#[derive(Debug, PartialEq)]
enum Verdict {
    Accept,
    /// Rejected as invalid, with the first message.
    Invalid(String),
    /// Rejected only because Switchyard does not execute something.
    Unsupported(String),
}

fn switchyard(name: &str, text: &str) -> Verdict {
    let source = ptx::SourceFile::new(name, text);
    let ast = match ptx::parse(text) {
        Ok(a) => a,
        Err(e) => return Verdict::Invalid(format!("{}: {e}", source.location(e.span()))),
    };
    match lower_module(&ast, name) {
        Ok(_) => Verdict::Accept,
        Err(errs) => {
            let first = format!("{}: {}", source.location(errs[0].span()), errs[0]);
            let unsupported = errs.iter().all(|e| {
                matches!(
                    e,
                    LowerError::UnsupportedInstruction { .. }
                        | LowerError::UnsupportedModifier { .. }
                        | LowerError::UnsupportedDeclaration { .. }
                )
            });
            if unsupported {
                Verdict::Unsupported(first)
            } else {
                Verdict::Invalid(first)
            }
        }
    }
}

/// The known disagreements: rows `| m123 | reason |` of the docs page's table.
fn known_disagreements() -> BTreeMap<String, String> {
    let doc = std::fs::read_to_string(root().join("docs/ptxas-differential.md"))
        .expect("docs/ptxas-differential.md");
    doc.lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            match cells.as_slice() {
                ["", id, .., reason, ""]
                    if id.starts_with('m') && id[1..].chars().all(|c| c.is_ascii_digit()) =>
                {
                    assert!(!reason.is_empty(), "{id} needs a reason");
                    Some((id.to_string(), reason.to_string()))
                }
                _ => None,
            }
        })
        .collect()
}

#[test]
fn switchyard_agrees_with_ptxas_on_the_corpus() {
    let entries = entries();
    assert!(entries.len() >= 300, "{} entries", entries.len());
    let known = known_disagreements();
    let (mut agree_accept, mut agree_reject, mut unsupported) = (0, 0, Vec::new());
    let mut listed = 0;
    let mut unlisted = Vec::new();
    let mut stale: Vec<&String> = known.keys().collect();
    for e in &entries {
        let name = format!("{} ({}, line {})", e.file, e.id, e.line);
        let verdict = switchyard(&name, &text_of(e));
        let disagreement = match (&verdict, e.ptxas_accepts) {
            (Verdict::Accept, true) => {
                agree_accept += 1;
                None
            }
            (Verdict::Invalid(_) | Verdict::Unsupported(_), false) => {
                agree_reject += 1;
                None
            }
            (Verdict::Unsupported(why), true) => {
                unsupported.push(format!("{}: {why}", e.id));
                None
            }
            (Verdict::Invalid(why), true) => Some(format!("Switchyard rejects: {why}")),
            (Verdict::Accept, false) => Some("Switchyard accepts, ptxas rejects".to_string()),
        };
        if let Some(what) = disagreement {
            stale.retain(|id| **id != e.id);
            if known.contains_key(&e.id) {
                listed += 1;
            } else {
                unlisted.push(format!(
                    "| {} | {} | {} | {} |",
                    e.id,
                    e.kind,
                    e.replacement.trim(),
                    what
                ));
            }
        }
    }
    println!(
        "ptxas differential: {} entries; ptxas accepts {}, rejects {}; agree on {} accepted and \
         {} rejected; {} unsupported (ptxas accepts, Switchyard does not execute); {} known \
         disagreements",
        entries.len(),
        entries.iter().filter(|e| e.ptxas_accepts).count(),
        entries.iter().filter(|e| !e.ptxas_accepts).count(),
        agree_accept,
        agree_reject,
        unsupported.len(),
        listed
    );
    for u in &unsupported {
        println!("  unsupported: {u}");
    }
    assert!(
        unlisted.is_empty(),
        "disagreements with ptxas not listed in docs/ptxas-differential.md:\n{}",
        unlisted.join("\n")
    );
    assert!(
        stale.is_empty(),
        "listed as disagreements but now agreeing with ptxas: {stale:?}"
    );
}

/// The pinned ptxas binaries `tools/install_ptxas.py` installs, by target (CUDA 12's for
/// sm_70 and sm_80, CUDA 13's for sm_90).
fn installed_ptxas() -> Option<[(String, PathBuf); 3]> {
    let venv = root().join(".venv-ptxas");
    let cu12 = venv.join("cu12/nvidia/cuda_nvcc/bin/ptxas");
    let cu13 = venv.join("cu13/nvidia/cu13/bin/ptxas");
    (cu12.is_file() && cu13.is_file()).then(|| {
        [
            ("sm_70".into(), cu12.clone()),
            ("sm_80".into(), cu12),
            ("sm_90".into(), cu13),
        ]
    })
}

#[test]
fn ptxas_still_gives_the_committed_verdicts() {
    let Some(ptxas) = installed_ptxas() else {
        println!("skipped: ptxas not installed (run python3 tools/install_ptxas.py)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("switchyard-ptxas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut changed = Vec::new();
    let entries = entries();
    for e in &entries {
        let text = text_of(e);
        let target = if text.contains(".target sm_90") {
            "sm_90"
        } else if text.contains(".target sm_80") {
            "sm_80"
        } else {
            "sm_70"
        };
        let bin = &ptxas.iter().find(|(t, _)| t == target).expect("pinned").1;
        let file = dir.join(format!("{}.ptx", e.id));
        std::fs::write(&file, &text).expect("write temp PTX");
        let ok = Command::new(bin)
            .arg(format!("-arch={target}"))
            .arg(&file)
            .args(["-o", "/dev/null"])
            .output()
            .expect("ptxas runs")
            .status
            .success();
        if ok != e.ptxas_accepts {
            changed.push(format!("{} ({} line {})", e.id, e.file, e.line));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("ptxas re-run on {} entries", entries.len());
    assert!(
        changed.is_empty(),
        "ptxas's verdict changed (rerun tools/ptxas_verdicts.py): {changed:?}"
    );
}
