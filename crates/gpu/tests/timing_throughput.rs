//! Issue rate of the timed SM: an ALU-bound kernel with independent work in many warps
//! reaches the configured issue width (one instruction per warp scheduler per cycle), and a
//! chain of dependent adds in a single warp issues once per ALU latency. A streaming copy
//! keeps the DRAM buses at least 80% busy.

mod timing_common;

use timing_common::{dependent_chain, run_kernel, Engine};

/// `rounds` iterations of 32 adds over 8 independent accumulators, with the loop control
/// interleaved so it never delays the adds.
fn independent_body(rounds: u32) -> String {
    let mut b = format!("    mov.u32 %r20, 0;\n    mov.u32 %r21, {rounds};\nL:\n");
    for i in 0..32 {
        b += &format!("    add.u32 %r{0}, %r{0}, {1};\n", 10 + i % 8, i + 1);
        if i == 8 {
            b += "    add.u32 %r20, %r20, 1;\n";
        }
        if i == 20 {
            b += "    setp.lt.u32 %p1, %r20, %r21;\n";
        }
    }
    b += "    @%p1 bra L;\n";
    for i in 0..8 {
        b += &format!("    add.u32 %r10, %r10, %r{};\n", 10 + i);
    }
    b += "    mul.wide.u32 %rd5, %r2, 4;\n    add.s64 %rd5, %rd0, %rd5;\n    st.global.u32 [%rd5], %r10;\n";
    b
}

#[test]
fn independent_adds_reach_the_issue_width() {
    reaches_the_issue_width(Engine::gtx480(), 0.9);
}

/// The A100 preset's four sub-cores each fetch through their own L0 i-cache and read their
/// own register banks, so the SM issues four warp instructions per cycle (one shared fetch
/// port of two instructions per cycle would cap it at two). The kernel is short on 108 SMs
/// (two TBs each), so starting and draining them costs a few percent more than on the GTX480.
#[test]
fn sub_cores_reach_the_issue_width() {
    let engine = Engine::Timed(Box::new(gpu::timing::TimedGpu::new(
        gpu::config::GpuConfig::preset("a100").unwrap(),
    )));
    reaches_the_issue_width(engine, 0.85);
}

/// At least `fraction` of the issue width per SM on an ALU-bound kernel with many warps.
fn reaches_the_issue_width(engine: Engine, fraction: f64) {
    let Engine::Timed(t) = &engine else {
        unreachable!()
    };
    let (sms, width) = (t.gpu.sm.count, t.gpu.sm.warp_schedulers);
    let rounds = 40;
    let threads = 256;
    let tbs = 2 * sms;
    let (s, out) = run_kernel(
        engine,
        "",
        &independent_body(rounds),
        tbs,
        threads,
        0,
        u64::from(tbs * threads) * 4,
        &[],
    );
    let s = s.unwrap();
    // Values are real: each accumulator i gets rounds × (sum of the constants added to it).
    let mut acc = [0u32; 8];
    for i in 0..32u32 {
        acc[(i % 8) as usize] += rounds * (i + 1);
    }
    let expected: u32 = acc.iter().sum::<u32>() + acc[0];
    assert!(out
        .chunks(4)
        .all(|c| u32::from_le_bytes(c.try_into().unwrap()) == expected));
    let per_sm: Vec<f64> = s
        .sms
        .iter()
        .map(|m| m.warp_instructions as f64 / s.cycles as f64)
        .collect();
    let mean = per_sm.iter().sum::<f64>() / per_sm.len() as f64;
    eprintln!(
        "ALU-bound: {} warp instructions in {} cycles, IPC {:.2} (GPU), {mean:.3} per SM (width {width}), {} TBs/SM, stalls {:?}",
        s.warp_instructions, s.cycles, s.ipc, s.tbs_per_sm, s.schedulers
    );
    assert!(
        mean >= fraction * f64::from(width) && mean <= f64::from(width),
        "per-SM IPC {mean:.3} vs issue width {width}"
    );
}

#[test]
fn dependent_chain_issues_once_per_alu_latency() {
    let cycles = |rounds: u32| {
        let (s, out) = run_kernel(
            Engine::gtx480(),
            "",
            &dependent_chain(rounds, "1"),
            1,
            32,
            0,
            4,
            &[],
        );
        assert_eq!(
            u32::from_le_bytes(out[..4].try_into().unwrap()),
            32 * rounds
        );
        s.unwrap()
    };
    let (a, b) = (cycles(10), cycles(30));
    let per_add = (b.cycles - a.cycles) as f64 / (32.0 * 20.0);
    let latency = f64::from(gpu::timing::PipelineSpec::default().alu.latency);
    eprintln!(
        "dependent chain: {:.3} cycles per add (ALU latency {latency}), IPC {:.3}",
        per_add, b.ipc
    );
    assert!(
        (per_add - latency).abs() <= 0.05 * latency,
        "{per_add} cycles per dependent add, latency {latency}"
    );
}

/// A grid-stride copy, `out[i] = aux[i] + 1` over `n` words, four words per thread per step
/// (`ld.global.v4`): every warp access moves four whole lines.
const STREAM: &str = r#"
    mov.u32 %r5, %nctaid.x;
    mul.lo.u32 %r5, %r5, %r4;
    shl.b32 %r5, %r5, 2;
    shl.b32 %r6, %r2, 2;
    setp.ge.u32 %p1, %r6, %r0;
    @%p1 bra DONE;
L:
    mul.wide.u32 %rd5, %r6, 4;
    add.s64 %rd6, %rd1, %rd5;
    ld.global.v4.u32 {%r10, %r11, %r12, %r13}, [%rd6];
    add.u32 %r10, %r10, 1;
    add.u32 %r11, %r11, 1;
    add.u32 %r12, %r12, 1;
    add.u32 %r13, %r13, 1;
    add.s64 %rd7, %rd0, %rd5;
    st.global.v4.u32 [%rd7], {%r10, %r11, %r12, %r13};
    add.u32 %r6, %r6, %r5;
    setp.lt.u32 %p1, %r6, %r0;
    @%p1 bra L;
DONE:
"#;

/// The papers' two main machines.
#[test]
fn streaming_copy_reaches_most_of_the_dram_bandwidth() {
    for preset in ["gtx480", "maxwell16"] {
        let engine = Engine::Timed(Box::new(gpu::timing::TimedGpu::new(
            gpu::config::GpuConfig::preset(preset).unwrap(),
        )));
        let Engine::Timed(t) = &engine else {
            unreachable!()
        };
        let sms = t.gpu.sm.count;
        let n: u32 = 1 << 19;
        let input: Vec<u8> = (0..n).flat_map(|i| (i * 3).to_le_bytes()).collect();
        let (s, out) = run_kernel(
            engine,
            "",
            STREAM,
            4 * sms,
            256,
            n,
            4 * u64::from(n),
            &input,
        );
        let s = s.unwrap();
        for i in 0..n as usize {
            let got = u32::from_le_bytes(out[4 * i..4 * i + 4].try_into().unwrap());
            assert_eq!(got, 3 * i as u32 + 1, "{preset}: word {i}");
        }
        eprintln!(
            "{preset}: {} cycles, DRAM {:.1} GB/s = {:.1}% of peak, bus busy {:.1}%",
            s.cycles,
            s.rates.dram_gbps,
            100.0 * s.rates.dram_peak_fraction,
            100.0 * s.utilisation.dram
        );
        // Most of the bandwidth: the SMs and the interconnect keep the channels busy. But not
        // all of it: read/write turnarounds (tWTR, tRTW), row misses and refresh keep
        // sustained GDDR5 bandwidth well under the peak, as on real cards (STREAM-like copies
        // on a GTX480 are commonly reported near 75% of its 177 GB/s). The model before tWTR,
        // tRTW and refresh streamed at 97-99%.
        assert!(
            (0.6..0.95).contains(&s.rates.dram_peak_fraction),
            "{preset}: {:.1}% of the DRAM bandwidth",
            100.0 * s.rates.dram_peak_fraction
        );
    }
}
