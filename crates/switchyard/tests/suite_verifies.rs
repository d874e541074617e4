//! Every suite kernel verifies against its CPU reference on each of its PTX targets; the
//! inference kernels also on the timed A100 and H100.

use gpu::config::GpuConfig;
use gpu::timing::TimedGpu;
use suite::Size;
use switchyard::suite_run::{run_kernel, run_kernel_on, Engine};

#[test]
fn every_suite_kernel_verifies_on_each_target() {
    let mut failures = Vec::new();
    let kernels = suite::all();
    assert!(
        kernels.len() >= 14,
        "the suite has {} kernels",
        kernels.len()
    );
    for k in kernels {
        for &(target, _) in k.sources() {
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

/// The inference kernels (tensor cores, asynchronous copies, warp reductions, carry chains)
/// on both engines, on the presets with tensor cores they were written for.
#[test]
fn inference_kernels_verify_timed_on_a100_and_h100() {
    let names = [
        "wgemm",
        "mgemm",
        "attention",
        "layernorm",
        "softmax",
        "mulword",
        "warpred",
        "igemv",
    ];
    let mut failures = Vec::new();
    for preset in ["a100", "h100"] {
        let gpu = TimedGpu::new(GpuConfig::preset(preset).unwrap());
        for name in names {
            let k = suite::by_name(name).unwrap_or_else(|| panic!("no kernel {name}"));
            for &(target, _) in k.sources() {
                match run_kernel_on(k, target, Size::Small, 1, Engine::on(&gpu), None) {
                    Ok(r) if r.verification.passed() && !r.timed.is_empty() => {}
                    Ok(r) => failures.push(format!(
                        "{name} {} {preset}: {:?}",
                        target.name(),
                        r.verification
                    )),
                    Err(e) => failures.push(format!("{name} {} {preset}: {e}", target.name())),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
