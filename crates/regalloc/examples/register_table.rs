//! Prints, for every suite kernel and target, the registers our allocator uses with the
//! default configuration (the numbers in `REGISTERS.md`), plus the uniform-register split
//! and the spills at a 32-register budget.
//!
//! `cargo run -p regalloc --example register_table`

use regalloc::{allocate, AllocConfig};

fn main() {
    println!(
        "kernel\ttarget\tentry\tvregs\tgpr\tpred\tgpr_with_ur\tur\tspilled@32\tspill_bytes@32"
    );
    for k in suite::all() {
        for &(target, text) in k.sources() {
            let ast = ptx::parse(text).expect("suite PTX parses");
            let m = kir::lower::lower_module(&ast, k.name()).expect("suite PTX lowers");
            for kernel in m.kernels.values() {
                let a = allocate(kernel, &AllocConfig::default()).expect("allocates");
                let u = allocate(
                    kernel,
                    &AllocConfig {
                        uniform_registers: 63,
                        ..AllocConfig::default()
                    },
                )
                .expect("allocates");
                let s = allocate(
                    kernel,
                    &AllocConfig {
                        max_registers: 32,
                        ..AllocConfig::default()
                    },
                )
                .expect("allocates");
                println!(
                    "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                    k.name(),
                    target.name(),
                    kernel.name,
                    kernel.regs.len(),
                    a.gpr_count,
                    a.pred_count,
                    u.gpr_count,
                    u.uniform_count,
                    s.spilled_values,
                    s.spill_bytes
                );
            }
        }
    }
}
