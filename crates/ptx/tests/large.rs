//! Size: a megabyte of NVRTC-style PTX parses into the expected number of items. (Speed is a
//! benchmark figure in BENCHMARKS.md, not a timed test; the times printed here are for
//! information only.)

use std::time::Instant;

#[test]
fn parses_a_megabyte() {
    let sample = include_str!("data/reduce_shared.ptx");
    // Keep the header once; repeat everything after it.
    let split = sample.find("\t// .globl").unwrap();
    let (header, body) = sample.split_at(split);
    let mut text = header.to_string();
    let mut copies = 0;
    while text.len() < 1 << 20 {
        text.push_str(body);
        copies += 1;
    }
    let start = Instant::now();
    let tokens = ptx::lexer::tokenize(&text).unwrap();
    println!(
        "lexed {} tokens in {:.1} ms",
        tokens.len(),
        start.elapsed().as_secs_f64() * 1e3
    );
    let start = Instant::now();
    let module = ptx::parse(&text).unwrap();
    let elapsed = start.elapsed();
    println!(
        "parsed {} bytes ({} items) in {:.1} ms",
        text.len(),
        module.items.len(),
        elapsed.as_secs_f64() * 1e3
    );
    assert_eq!(module.items.len(), 2 * copies);
}
