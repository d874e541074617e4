//! Helpers shared by the integration tests: lowering PTX text and suite kernels.

#![allow(dead_code)]

use kir::{Kernel, Module};

pub fn lower(text: &str) -> Module {
    let ast = ptx::parse(text).unwrap_or_else(|e| panic!("parse: {e}"));
    kir::lower::lower_module(&ast, "test.ptx").unwrap_or_else(|e| panic!("lower: {e:?}"))
}

/// Every kernel of every suite module on both targets: (label, kernel).
pub fn suite_kernels() -> Vec<(String, Kernel)> {
    let mut out = Vec::new();
    for k in suite::all() {
        for &(target, text) in k.sources() {
            let m = lower(text);
            for kernel in m.kernels.values() {
                out.push((
                    format!("{} {} {}", k.name(), target.name(), kernel.name),
                    kernel.clone(),
                ));
            }
        }
    }
    out
}
