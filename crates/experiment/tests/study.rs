//! Preemptive priority serves a high-priority kernel at once where non-preemptive priority
//! makes it wait for a long kernel's TBs, with every mechanism's results bit-exact.

use experiment::study::{self, Arrival, StudyConfig};
use gpu::config::GpuConfig;
use preempt::MechanismKind;
use suite::Size;

#[test]
fn ppq_serves_the_high_priority_kernel_sooner_than_npq() {
    let mut c = StudyConfig::default_on(GpuConfig::preset("gtx480").unwrap());
    // `branchy`'s TBs all fit at once and each lives about as long as the kernel.
    c.low = (suite::by_name("branchy").unwrap(), Size::Small);
    c.arrival = Arrival::IntoLowKernel(0.3);
    c.mechanisms = vec![
        MechanismKind::Drain,
        MechanismKind::Baseline,
        MechanismKind::LIGHTWEIGHT,
        MechanismKind::CtxBack,
    ];
    let r = study::run(&c, &|_, _, _| {}).unwrap();
    assert!(r.all_exact());
    let wait = |m: &str| {
        r.rows
            .iter()
            .find(|row| row.mechanism.starts_with(m))
            .unwrap()
            .high_wait_us
    };
    let (npq, drain, baseline, light, ctxback) = (
        wait("npq"),
        wait("drain"),
        wait("baseline"),
        wait("lightweight"),
        wait("ctxback"),
    );
    eprintln!("high-priority wait, µs: npq {npq}, drain {drain}, baseline {baseline}, lightweight {light}, ctxback {ctxback}");
    // Without preemption the kernel waits for the first SM to finish its TBs; draining
    // waits likewise; a context switch frees an SM within microseconds.
    assert!(npq > 20.0, "npq {npq}");
    assert!(drain > 0.5 * npq, "drain {drain} vs npq {npq}");
    assert!(baseline < npq / 4.0, "baseline {baseline} vs npq {npq}");
    assert!(light < npq / 4.0, "lightweight {light} vs npq {npq}");
    // CTXBack's routines save and restore on the SM.
    assert!(ctxback < npq / 4.0, "ctxback {ctxback} vs npq {npq}");
    // Under NPQ the low-priority process is never preempted.
    assert_eq!(r.rows[0].preemption.requests, 0);
    assert!((r.rows[0].low_slowdown - 1.0).abs() < 1e-12);
}

#[test]
fn in_place_switching_moves_less_and_stays_bit_exact() {
    use experiment::inplace;
    let gpu = GpuConfig::preset("gtx480").unwrap();
    let pairs = [
        (
            suite::by_name("branchy").unwrap(),
            suite::by_name("gemm").unwrap(),
        ),
        (
            suite::by_name("branchy").unwrap(),
            suite::by_name("hist").unwrap(),
        ),
    ];
    let rows = inplace::run(&gpu, &pairs, Size::Small, 2, &|_, _, _| {}).unwrap();
    for r in &rows {
        eprintln!("{r:?}");
        assert!(r.exact, "{}", r.pair);
        assert!(r.complete.tbs > 0, "{}: nothing was preempted", r.pair);
    }
    // Some TBs kept their registers or shared memory on the SM: fewer bytes moved.
    assert!(rows
        .iter()
        .any(|r| r.in_place.context_bytes < r.complete.context_bytes));
    for r in &rows {
        assert!(
            r.in_place.context_bytes <= r.complete.context_bytes + r.complete.context_bytes / 4,
            "{r:?}"
        );
    }
    let f = inplace::figure(&rows);
    assert!(f.geomean().is_some());
}
