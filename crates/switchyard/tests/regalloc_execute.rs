//! Register-allocated suite kernels run unchanged on the functional core and still verify:
//! with the default budget, with uniform registers, and under pressure with spill code.

use gpu::Gpu;
use regalloc::{allocate_module, AllocConfig};
use suite::Size;
use switchyard::suite_run::FunctionalDevice;

fn run_allocated(config: &AllocConfig) {
    let mut failures = Vec::new();
    for k in suite::all() {
        for &(target, text) in k.sources() {
            let file = format!("kernels/{0}/{0}.{1}.ptx", k.name(), target.name());
            let ast = ptx::parse(text).expect("suite PTX parses");
            let module = kir::lower::lower_module(&ast, &file).expect("suite PTX lowers");
            let allocated = allocate_module(&module, config).expect("allocates");
            let mut gpu = Gpu::new();
            let module_id = match gpu.load_module(&file, text, allocated) {
                Ok(id) => id,
                Err(e) => {
                    failures.push(format!("{} {}: load: {e}", k.name(), target.name()));
                    continue;
                }
            };
            let mut dev = FunctionalDevice::with_gpu(gpu, module_id);
            match k.run(&mut dev, Size::Small, 1) {
                Ok(v) if v.passed() => {}
                Ok(v) => failures.push(format!("{} {}: {v:?}", k.name(), target.name())),
                Err(e) => failures.push(format!("{} {}: {e}", k.name(), target.name())),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{config:?}: {} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn allocated_suite_verifies() {
    run_allocated(&AllocConfig::default());
}

#[test]
fn allocated_suite_with_uniform_registers_verifies() {
    run_allocated(&AllocConfig {
        uniform_registers: 63,
        ..AllocConfig::default()
    });
}

#[test]
fn spilled_suite_verifies() {
    run_allocated(&AllocConfig {
        max_registers: 16,
        predicate_registers: 4,
        ..AllocConfig::default()
    });
}
