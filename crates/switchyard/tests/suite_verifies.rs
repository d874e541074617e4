//! Every suite kernel verifies against its CPU reference on both PTX targets.

use suite::{Size, Target};
use switchyard::suite_run::run_kernel;

#[test]
fn every_suite_kernel_verifies_on_both_targets() {
    let mut failures = Vec::new();
    let kernels = suite::all();
    assert!(
        kernels.len() >= 14,
        "the suite has {} kernels",
        kernels.len()
    );
    for k in kernels {
        for target in Target::ALL {
            match run_kernel(*k, target, Size::Small, 1) {
                Ok(r) if r.verification.passed() => {
                    assert!(r.stats.warp_instructions > 0);
                }
                Ok(r) => failures.push(format!(
                    "{} {}: {:?}",
                    k.name(),
                    target.name(),
                    r.verification
                )),
                Err(e) => failures.push(format!("{} {}: {e}", k.name(), target.name())),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
