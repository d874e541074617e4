//! Size and speed: a megabyte of NVRTC-style PTX parses, and quickly.
//!
//! The hard bound here is generous because tests run unoptimised-ish (`opt-level = 1`) on a
//! shared machine; in release the same input takes a few milliseconds.

use std::time::Instant;

#[test]
fn parses_a_megabyte_quickly() {
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
    assert!(elapsed.as_secs_f64() < 2.0, "took {elapsed:?}");
}
