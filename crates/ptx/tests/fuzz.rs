//! Seeded, reproducible mutation fuzzing: valid PTX samples are damaged (bytes and PTX
//! fragments inserted, deleted, replaced; lines duplicated; text truncated) and `parse` must
//! return — `Ok` or an error whose span lies inside the text — without panicking.
//!
//! The seed is fixed and failure persistence is off, so every run tries the same inputs and
//! leaves no files behind.

use proptest::prelude::*;
use proptest::test_runner::RngSeed;

const SAMPLES: &[&str] = &[
    include_str!("data/saxpy.ptx"),
    include_str!("data/reduce_shared.ptx"),
    include_str!("data/device_call.ptx"),
    include_str!("data/nvrtc13_sm90_indirect_tex.ptx"),
    include_str!("data/nvrtc13_sm90_cluster.ptx"),
];

/// Fragments that steer mutations towards interesting parser states.
const FRAGMENTS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    "<",
    ">",
    ";",
    ",",
    ":",
    "@",
    "!",
    "-",
    "+",
    "|",
    "=",
    "_",
    "\"",
    "/*",
    "*/",
    "//",
    ".",
    "%",
    "$",
    "0x",
    "0f",
    "0d",
    "0b",
    "1.5e",
    "99999999999999999999999",
    "%r1",
    "%tid.x",
    ".reg",
    ".b32",
    ".u33",
    ".param",
    ".shared",
    ".global",
    ".func",
    ".entry",
    ".loc 1 2 3",
    ".file 1 \"x\"",
    ".section .debug_info {",
    ".pragma \"x\";",
    ".align",
    ".maxntid 1,",
    "call.uni (r), f, (a);",
    "{%f1, _}",
    "[%rd1+-4]",
    "@!%p1 bra L;",
    "L:",
    "generic(",
    "\n",
    "\t",
    "é",
    "\0",
];

#[derive(Clone, Debug)]
enum Mutation {
    DeleteByte(usize),
    DeleteRange(usize, usize),
    InsertByte(usize, u8),
    ReplaceByte(usize, u8),
    InsertFragment(usize, usize),
    ReplaceWithFragment(usize, usize, usize),
    DuplicateLine(usize),
    SwapLines(usize, usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let pos = any::<usize>();
    prop_oneof![
        pos.prop_map(Mutation::DeleteByte),
        (pos, 1usize..64).prop_map(|(p, n)| Mutation::DeleteRange(p, n)),
        (pos, any::<u8>()).prop_map(|(p, b)| Mutation::InsertByte(p, b)),
        (pos, any::<u8>()).prop_map(|(p, b)| Mutation::ReplaceByte(p, b)),
        (pos, any::<usize>()).prop_map(|(p, f)| Mutation::InsertFragment(p, f)),
        (pos, 1usize..16, any::<usize>())
            .prop_map(|(p, n, f)| Mutation::ReplaceWithFragment(p, n, f)),
        pos.prop_map(Mutation::DuplicateLine),
        (pos, pos).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        pos.prop_map(Mutation::Truncate),
    ]
}

fn apply(text: &mut Vec<u8>, m: &Mutation) {
    let len = text.len();
    let at = |p: usize| if len == 0 { 0 } else { p % (len + 1) };
    let frag = |f: usize| FRAGMENTS[f % FRAGMENTS.len()].as_bytes();
    match *m {
        Mutation::DeleteByte(p) => {
            if len > 0 {
                text.remove(p % len);
            }
        }
        Mutation::DeleteRange(p, n) => {
            let s = at(p);
            text.drain(s..(s + n).min(len));
        }
        Mutation::InsertByte(p, b) => text.insert(at(p), b),
        Mutation::ReplaceByte(p, b) => {
            if len > 0 {
                text[p % len] = b;
            }
        }
        Mutation::InsertFragment(p, f) => {
            let s = at(p);
            text.splice(s..s, frag(f).iter().copied());
        }
        Mutation::ReplaceWithFragment(p, n, f) => {
            let s = at(p);
            text.splice(s..(s + n).min(len), frag(f).iter().copied());
        }
        Mutation::DuplicateLine(p) | Mutation::SwapLines(p, _) => {
            let mut lines: Vec<Vec<u8>> = text.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
            let n = lines.len();
            if let Mutation::SwapLines(_, q) = *m {
                lines.swap(p % n, q % n);
            } else {
                let l = lines[p % n].clone();
                lines.insert(p % n, l);
            }
            *text = lines.join(&b'\n');
        }
        Mutation::Truncate(p) => text.truncate(at(p)),
    }
}

fn check(text: &str) {
    if let Err(e) = ptx::parse(text) {
        let span = e.span();
        assert!(
            span.start <= span.end && span.end as usize <= text.len(),
            "span {span:?} outside the text ({} bytes) for {e}",
            text.len()
        );
        // The span must be usable for a diagnostic.
        let f = ptx::SourceFile::new("fuzz.ptx", text);
        let (line, _) = f.line_col(span.start);
        let _ = f.line_text(line);
        assert!(!e.to_string().is_empty());
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2000,
        rng_seed: RngSeed::Fixed(0x5717c4),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutated_samples_never_panic(
        sample in 0..SAMPLES.len(),
        mutations in proptest::collection::vec(mutation(), 1..8),
    ) {
        let mut text = SAMPLES[sample].as_bytes().to_vec();
        for m in &mutations {
            apply(&mut text, m);
        }
        check(&String::from_utf8_lossy(&text));
    }
}

#[test]
fn pathological_nesting_is_an_error_not_a_stack_overflow() {
    let header = ".version 8.0\n.target sm_70\n.address_size 64\n";
    for depth in [65, 1_000, 100_000] {
        let blocks = format!(
            "{header}.entry k() {{{}{}}}",
            "{".repeat(depth),
            "}".repeat(depth)
        );
        assert!(matches!(
            ptx::parse(&blocks),
            Err(ptx::ParseError::NestingTooDeep { .. })
        ));
        let vectors = format!(
            "{header}.entry k() {{ mov.b64 %rd1, {}; }}",
            "{".repeat(depth)
        );
        assert!(matches!(
            ptx::parse(&vectors),
            Err(ptx::ParseError::NestingTooDeep { .. })
        ));
        let nots = format!(
            "{header}.entry k() {{ not.pred %p1, {}%p2; }}",
            "!".repeat(depth)
        );
        assert!(matches!(
            ptx::parse(&nots),
            Err(ptx::ParseError::NestingTooDeep { .. })
        ));
        let lists = format!("{header}.entry k() {{ call f, {}; }}", "(".repeat(depth));
        assert!(matches!(
            ptx::parse(&lists),
            Err(ptx::ParseError::NestingTooDeep { .. })
        ));
        let inits = format!("{header}.global .u32 x[1] = {};", "{".repeat(depth));
        assert!(matches!(
            ptx::parse(&inits),
            Err(ptx::ParseError::NestingTooDeep { .. })
        ));
    }
    // Just inside the limit still parses.
    let ok = format!(
        "{header}.entry k() {{{}{}}}",
        "{".repeat(60),
        "}".repeat(60)
    );
    assert!(ptx::parse(&ok).is_ok());
}

#[test]
fn every_prefix_of_a_sample_is_handled() {
    // Truncation at every byte of the smaller samples: each prefix is a distinct parser state.
    for sample in &SAMPLES[..3] {
        for end in 0..=sample.len() {
            if let Some(prefix) = sample.get(..end) {
                check(prefix);
            }
        }
    }
}
