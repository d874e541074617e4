//! The periodic-preemption experiment end to end on two small kernels: every run verifies
//! and ends bit-exact, the measures add up, the mechanisms differ the way their designs
//! say, and the results do not depend on the number of threads.

use experiment::figures;
use experiment::periodic::{self, PeriodicConfig};
use gpu::config::GpuConfig;
use preempt::MechanismKind;
use suite::Size;

fn config(threads: usize) -> PeriodicConfig {
    let mut c = PeriodicConfig::paper(GpuConfig::preset("gtx480").unwrap());
    c.kernels = vec![
        suite::by_name("gemm").unwrap(),
        suite::by_name("hotspot").unwrap(),
    ];
    c.size = Size::Small;
    // Small inputs run a few thousand cycles: signal often enough to take several SMs.
    c.interval = 1_200;
    c.mechanisms = vec![
        MechanismKind::Drain,
        MechanismKind::Baseline,
        MechanismKind::LIGHTWEIGHT,
    ];
    c.threads = threads;
    c
}

#[test]
fn periodic_preemption_measures_every_mechanism_and_stays_bit_exact() {
    let r = periodic::run(&config(2), &|_, _, _| {}).unwrap();
    assert_eq!(r.runs.len(), 6);
    assert!(
        r.all_exact(),
        "{:?}",
        r.runs
            .iter()
            .map(|m| (&m.kernel, &m.mechanism, m.verified, m.bit_exact))
            .collect::<Vec<_>>()
    );
    for m in &r.runs {
        let name = format!("{} with {}", m.kernel, m.mechanism);
        assert!(m.signals.len() >= 2, "{name}: {} signals", m.signals.len());
        for g in &m.signals {
            assert_eq!(g.drain + g.spill, g.latency, "{name}: {g:?}");
            assert_eq!(g.switched + g.drained + g.flushed, g.tbs, "{name}: {g:?}");
        }
        let c = &m.summary.registers;
        match m.mechanism.as_str() {
            "drain" => {
                assert!(m
                    .signals
                    .iter()
                    .all(|g| g.spill == 0 && g.bytes.total() == 0));
                assert_eq!(m.tb_cycles_held, 0, "{name}: draining holds nothing idle");
            }
            "baseline" => {
                // Every switched TB held its resources while its context was saved, and
                // again while restored.
                assert!(m.tb_cycles_held > 0, "{name}");
                // Every allocated register is saved, uncompressed.
                assert!(
                    c.occupied > 0 && c.occupied == c.live && c.live == c.moved,
                    "{name}: {c:?}"
                );
                assert!(m.signals.iter().all(|g| g.switched == g.tbs && g.spill > 0));
            }
            "lightweight" => {
                assert!(c.moved < c.live && c.live <= c.occupied, "{name}: {c:?}");
                assert!(c.uniform + c.strided > 0, "{name}: {c:?}");
            }
            _ => unreachable!(),
        }
    }
    // Compression moves fewer register bytes per switched TB than the baseline.
    for k in &r.kernels {
        let per_tb = |m: &str| {
            let run = r.run(k, m).unwrap();
            let tbs: u32 = run.signals.iter().map(|g| g.switched).sum();
            run.summary.registers.moved as f64 / f64::from(tbs.max(1))
        };
        assert!(per_tb("lightweight") < per_tb("baseline") / 2.0, "{k}");
    }
    let f15 = figures::preemption_latency(&r).unwrap();
    for row in &f15.rows {
        if row.category != "geomean" {
            assert!(
                (row.total(0) - 1.0).abs() < 1e-9,
                "Occup is the unit: {row:?}"
            );
        }
    }
    assert!(f15.geomean().is_some());
    // The figures need mechanisms this run did not include.
    assert!(figures::spill_latency(&r).is_none());
    assert!(figures::register_context(&r).is_none());
    // One thread or two: the same results.
    let one = periodic::run(&config(1), &|_, _, _| {}).unwrap();
    assert_eq!(one, r);
}

#[test]
fn a_minimum_number_of_signals_shortens_the_interval_of_short_kernels() {
    // At the paper's 10,000 cycles the small kernels get few signals or none; asking for at
    // least 6 gives each kernel an interval of its busy cycles over 7, and every run gets
    // at least the signals it asked for (a preempted run lasts longer than its reference).
    let mut c = config(2);
    c.interval = 10_000;
    c.mechanisms = vec![MechanismKind::Baseline];
    let plain = periodic::run(&c, &|_, _, _| {}).unwrap();
    c.min_signals = 6;
    let r = periodic::run(&c, &|_, _, _| {}).unwrap();
    assert!(r.all_exact());
    for (m, p) in r.runs.iter().zip(&plain.runs) {
        assert_eq!(p.interval, 10_000);
        assert!(m.interval < 10_000, "{}: {}", m.kernel, m.interval);
        assert!(
            m.signals.len() >= 6,
            "{}: {} signals at every {} cycles",
            m.kernel,
            m.signals.len(),
            m.interval
        );
        assert!(m.signals.len() > p.signals.len(), "{}", m.kernel);
    }
}

#[test]
fn the_routine_switches_run_in_the_periodic_experiment() {
    // CS-Defer, CTXBack and CTXBack+CS-Defer (papers/ji-ctxback) under periodic signals:
    // every run ends bit-exact, the measures add up, and the register bytes are what the
    // routines stored (no compression), never more than saving every register would.
    let mut c = config(2);
    c.mechanisms = vec![
        MechanismKind::CsDefer,
        MechanismKind::CtxBack,
        MechanismKind::CtxBackCsDefer,
    ];
    let r = periodic::run(&c, &|_, _, _| {}).unwrap();
    assert_eq!(r.runs.len(), 6);
    assert!(r.all_exact());
    for m in &r.runs {
        let name = format!("{} with {}", m.kernel, m.mechanism);
        assert!(m.signals.len() >= 2, "{name}: {} signals", m.signals.len());
        for g in &m.signals {
            assert_eq!(g.drain + g.spill, g.latency, "{name}: {g:?}");
            assert_eq!(g.switched + g.drained + g.flushed, g.tbs, "{name}: {g:?}");
        }
        let s = &m.summary.registers;
        assert!(s.moved == s.live && s.live <= s.occupied, "{name}: {s:?}");
        assert!(s.moved > 0 && m.tb_cycles_held > 0, "{name}: {s:?}");
    }
}
