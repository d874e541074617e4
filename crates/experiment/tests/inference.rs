//! The inference-tail setting end to end at its smallest: a batch that holds every SM of a
//! cut-down GPU for much longer than a request, replayed for the whole request stream.
//! Under FCFS a request waits for the batch kernel's TBs; preemptive priority takes the SMs
//! back at once, so its tail falls to about the requests' own; a partition that leaves the
//! requests SMs of their own does the same by giving the batch fewer.

use experiment::inference::{self, InferenceConfig, InferenceRun};
use gpu::config::GpuConfig;

fn tiny(runs: &[&'static str]) -> InferenceConfig {
    let mut c = InferenceConfig::default_on(GpuConfig::preset("v100").unwrap());
    c.sms = Some(2);
    c.batch = suite::by_name("branchy").unwrap();
    c.batch_size = suite::Size::Small;
    c.requests = vec![suite::by_name("softmax").unwrap()];
    c.count = 6;
    c.mean_gap_us = 60.0;
    c.runs = runs.to_vec();
    c.threads = 2;
    c
}

#[test]
fn preemptive_priority_cuts_the_tail_a_batch_holding_every_sm_causes() {
    let c = tiny(&["fcfs", "ppq-exclusive/cs", "mps-50", "alone"]);
    let r = inference::run(&c, &|_, _, _| {}).unwrap();
    assert!(r.all_verified(), "{}", inference::table(&r));
    assert!(r.gpu.ends_with("cut to 2 SMs"), "{}", r.gpu);
    let run = |name: &str| -> &InferenceRun { r.runs.iter().find(|x| x.run == name).unwrap() };
    let (fcfs, ppq, mps, alone) = (
        run("fcfs"),
        run("ppq-exclusive/cs"),
        run("mps-50"),
        run("alone"),
    );
    eprintln!("{}", inference::table(&r));
    // The setting's premise: the batch replays through the whole request stream, and
    // every request arrives while it runs.
    for x in [fcfs, ppq] {
        assert_eq!(x.beside_batch, Some(6), "{}", x.run);
    }
    for x in [fcfs, ppq, mps, alone] {
        assert_eq!(x.latency.count, 6, "{}", x.run);
    }
    assert!(r.schedule.replays >= 3);
    // FCFS: a request waits for the batch's TBs, so its tail is many times its time alone.
    assert!(
        fcfs.latency.p99_us > 3.0 * alone.latency.p99_us,
        "FCFS p99 {} against alone {}",
        fcfs.latency.p99_us,
        alone.latency.p99_us
    );
    // PPQ with a context switch: the SMs are taken back at once; the tail falls to within
    // a small factor of the requests alone, paid for by the batch.
    assert!(
        2.0 * ppq.latency.p99_us < fcfs.latency.p99_us,
        "PPQ-CS p99 {} against FCFS {}",
        ppq.latency.p99_us,
        fcfs.latency.p99_us
    );
    assert!(ppq.preempted_tbs > 0);
    assert_eq!(fcfs.preempted_tbs, 0);
    assert!(ppq.batch_throughput.unwrap() < fcfs.batch_throughput.unwrap());
    // MPS at 50%: the batch may use one of the two SMs, so a request finds the other free
    // without preempting anything; the batch runs at about half its speed.
    assert!(
        2.0 * mps.latency.p99_us < fcfs.latency.p99_us,
        "MPS-50 p99 {} against FCFS {}",
        mps.latency.p99_us,
        fcfs.latency.p99_us
    );
    assert_eq!(mps.preempted_tbs, 0);
    assert!(mps.batch_throughput.unwrap() < 0.8);
}

#[test]
fn a_bad_setting_is_an_error_not_a_panic() {
    let mut c = tiny(&["fcfs"]);
    c.sms = Some(3000);
    let e = inference::run(&c, &|_, _, _| {}).unwrap_err().to_string();
    assert!(e.contains("SMs: 3000 is out of 1..=80"), "{e}");
    let mut c = tiny(&["fcfs", "nope"]);
    c.sms = Some(2);
    let e = inference::run(&c, &|_, _, _| {}).unwrap_err().to_string();
    assert!(e.contains("no inference run `nope`"), "{e}");
    let mut c = tiny(&["fcfs"]);
    c.mean_gap_us = 0.0;
    let e = inference::run(&c, &|_, _, _| {}).unwrap_err().to_string();
    assert!(e.contains("mean gap"), "{e}");
}
