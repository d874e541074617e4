//! Preemption is bit-exact for every mechanism: each suite kernel runs as a process while
//! SMs are taken from it — at seeded random cycles, right after a launch starts, while warps
//! wait at a barrier, inside divergent regions, and (for the persistent `mandel`) while its
//! TBs hold work from its queue — and given back, and device memory ends bit-identical to
//! the uninterrupted run. A mechanism that cannot take a TB away says so.

use gpu::config::GpuConfig;
use gpu::timing::{Machine, SmId, TimedGpu};
use preempt::{How, MechanismKind, Record, Technique};
use sched::Framework;
use suite::{Rng, Size};
use workload::scenario::Process;
use workload::system::Injector;
use workload::{RunRecord, Setup, System};

fn process(k: &'static dyn suite::Kernel) -> Process {
    Process::suite(k, Size::Small, 1)
}

fn run(
    k: &'static dyn suite::Kernel,
    mechanism: MechanismKind,
    injector: Option<&mut dyn Injector>,
) -> RunRecord {
    // The GTX480 has no tensor cores; the tensor-core kernels are preempted on the A100.
    let preset = if k.needs_tensor_cores() {
        "a100"
    } else {
        "gtx480"
    };
    let timing = TimedGpu::new(GpuConfig::preset(preset).unwrap());
    let mut setup = Setup {
        host: timing.gpu.host.clone(),
        timing,
        framework: Default::default(),
        policy: Default::default(),
        time_slice_us: 50.0,
        mechanism,
        copy_policy: Default::default(),
        max_cycles: 1 << 24,
        snapshot: true,
        replay: None,
        one_context: false,
    };
    setup.snapshot = true;
    let r = System::new(setup, &[process(k)])
        .unwrap()
        .run_with(&mut |_| {}, injector)
        .unwrap_or_else(|e| panic!("{} with {}: {e}", k.name(), mechanism.name()));
    let v = r.processes[0].verdict.as_ref().unwrap();
    assert!(
        v.verified,
        "{} with {}: {}",
        k.name(),
        mechanism.name(),
        v.detail
    );
    r
}

/// Requests: at the planned cycles (preferring, in turn, an SM with warps at a barrier, one
/// with diverged warps, any), and one just after every launch starts.
struct Requests {
    plan: Vec<u64>,
    rng: Rng,
    turn: u32,
    /// Requests the framework took, and planned moments handled (a moment when every SM
    /// with TBs is already being emptied adds no request).
    made: u32,
    moments: u32,
    started: Vec<u32>,
    /// Cycles at which the host calls a launch (PEP's prediction, papers/li-pep §3.3),
    /// latest first: every SM with TBs is announced, some cycles before a request.
    calls: Vec<u64>,
}

impl Requests {
    fn candidates(m: &Machine, want: u32) -> Vec<SmId> {
        m.sm_ids()
            .filter(|&sm| {
                // TBs already stopping count: the moment finds the SM busy being emptied
                // (a stop at preemption points may wait for a TB to end).
                let tbs: Vec<_> = m.resident(sm).map(|(t, _)| t).collect();
                !tbs.is_empty()
                    && tbs.iter().any(|&tb| {
                        let w = m.warps_of(sm, tb).unwrap();
                        match want {
                            0 => w.iter().any(|w| w.at_barrier),
                            1 => w.iter().any(|w| w.diverged),
                            _ => true,
                        }
                    })
            })
            .collect()
    }
}

impl Injector for Requests {
    fn before_cycle(&mut self, m: &Machine, fw: &mut Framework) {
        let now = m.cycle();
        if self.calls.last().is_some_and(|&c| c <= now) {
            self.calls.pop();
            fw.anticipate(Requests::candidates(m, 2));
        }
        // Just after a launch has started: the SM that got its first TB.
        for &l in m.active() {
            if m.launch(l).started_at().is_some() && !self.started.contains(&l.0) {
                self.started.push(l.0);
                if let Some(sm) = m
                    .sm_ids()
                    .find(|&sm| m.resident(sm).any(|(t, _)| t.launch == l))
                {
                    self.made += u32::from(fw.preempt_sm(sm));
                }
            }
        }
        if self.plan.last().is_some_and(|&c| c <= now) {
            self.turn += 1;
            let mut pool = Requests::candidates(m, self.turn % 3);
            if pool.is_empty() {
                pool = Requests::candidates(m, 2);
            }
            // Nothing to take now (the GPU is between launches): try again a little later.
            if pool.is_empty() {
                return;
            }
            self.plan.pop();
            self.moments += 1;
            pool.retain(|&sm| fw.tables().sm(sm).state == sched::SmState::Running);
            if pool.is_empty() {
                return;
            }
            let sm = pool[self.rng.below(pool.len() as u32) as usize];
            self.made += u32::from(fw.preempt_sm(sm));
        }
    }
}

#[test]
fn every_mechanism_resumes_every_suite_kernel_bit_exactly() {
    let mut refused = 0;
    let mut flushed = 0;
    let mut switched = [0u32; 4];
    // Chimera's drains, flushes and switches, and its recorded choices.
    let mut chimera = [0u32; 3];
    let mut chose = 0u32;
    // Chimera+dirty's and PEP's switches; PEP's cases (a), (b), (c), (d/e).
    let mut dirty = [0u32; 2];
    let mut pep_cases = [0u32; 4];
    // CKPT: TBs rolled back to a checkpoint, TBs switched instead, checkpoints written,
    // rollbacks that discarded work.
    let mut ckpt = [0u32; 4];
    // TBs compressed at TB level (lightweight-tb, stopped together at a `bar.pp`).
    let mut tb_level = 0u32;
    let mut made = [0u32; MechanismKind::ALL.len()];
    // `PREEMPTION_ONLY=kernel[:mechanism,...]` narrows the run while debugging (an empty
    // kernel: every kernel).
    let only = std::env::var("PREEMPTION_ONLY").ok();
    let only = only
        .as_deref()
        .map(|o| o.split_once(':').unwrap_or((o, "")));
    for &k in suite::all() {
        if only.is_some_and(|(kernel, _)| !kernel.is_empty() && kernel != k.name()) {
            continue;
        }
        let reference = run(k, MechanismKind::Drain, None);
        // The cycles the kernels ran in the reference, to plan requests over.
        let period = reference.core_period_fs;
        let busy: Vec<(u64, u64)> = reference
            .kernels
            .iter()
            .map(|r| {
                (
                    r.started_fs.unwrap() / period,
                    r.finished_fs.unwrap() / period,
                )
            })
            .collect();
        let total: u64 = busy.iter().map(|(a, b)| b - a).sum();
        for (mi, mechanism) in MechanismKind::ALL.into_iter().enumerate() {
            if only
                .is_some_and(|(_, m)| !m.is_empty() && !m.split(',').any(|m| m == mechanism.name()))
            {
                continue;
            }
            let mut rng = Rng::for_kernel(k.name(), mi as u64);
            // Within the first 70% of the kernels' time: preempted runs take longer, and a
            // request once the last TB is out finds nothing to take.
            let span = (total * 7 / 10).max(1);
            let mut plan: Vec<u64> = (0..26)
                .map(|_| {
                    let mut x = u64::from(rng.below(span as u32));
                    for &(a, b) in &busy {
                        if x < b - a {
                            return a + x;
                        }
                        x -= b - a;
                    }
                    0
                })
                .collect();
            plan.sort_unstable_by(|a, b| b.cmp(a));
            // A launch call some cycles before every other request: before, during or after
            // the base checkpoints it starts.
            let mut calls: Vec<u64> = plan
                .iter()
                .step_by(2)
                .map(|&c| c.saturating_sub(u64::from(rng.below(3000))))
                .collect();
            calls.sort_unstable_by(|a, b| b.cmp(a));
            // PEP predicts a short launch time here, so that the suite's short TBs are
            // checkpointed too (at 20 µs nearly all of them would drain).
            let mechanism = match mechanism {
                MechanismKind::Pep { .. } => MechanismKind::Pep {
                    predicted_launch_us: 0.2,
                },
                MechanismKind::PepInPlace { .. } => MechanismKind::PepInPlace {
                    predicted_launch_us: 0.2,
                },
                // The suite's loops at `small` run a few iterations: CKPT checkpoints at
                // every second entry of a block, so that rollbacks are common.
                MechanismKind::Ckpt { least_live, .. } => MechanismKind::Ckpt {
                    every: 2,
                    least_live,
                },
                m => m,
            };
            let mut requests = Requests {
                plan,
                rng,
                turn: 0,
                made: 0,
                moments: 0,
                started: Vec::new(),
                calls,
            };
            let r = run(k, mechanism, Some(&mut requests));
            let name = format!("{} with {}", k.name(), mechanism.name());
            assert!(
                r.memory == reference.memory,
                "{name}: memory differs from the uninterrupted run"
            );
            assert!(
                requests.moments >= 20,
                "{name}: only {} moments",
                requests.moments
            );
            // An SM being emptied takes no second request (draining keeps it until its TBs
            // finish, a switch until their contexts are saved), so how many moments find an
            // SM to take depends on the kernel's shape; every run has some.
            assert!(
                requests.made >= 2,
                "{name}: only {} requests",
                requests.made
            );
            made[mi] += requests.made;
            let requested = r
                .preemptions
                .iter()
                .filter(|p| matches!(p, Record::Requested { .. }))
                .count();
            assert_eq!(requested as u32, requests.made, "{name}");
            for p in &r.preemptions {
                match p {
                    Record::Preempted {
                        how,
                        requested,
                        stopped,
                        released,
                        moving,
                        bytes,
                        registers,
                        ..
                    } => {
                        assert!(requested <= stopped && stopped <= released, "{name}: {p:?}");
                        assert!(
                            moving
                                .iter()
                                .all(|&(a, b)| *requested <= a && a <= b && b <= *released),
                            "{name}: {p:?}"
                        );
                        // Saved registers are a subset of the allocated ones, and compression
                        // never grows them.
                        assert!(
                            registers.moved <= registers.live
                                && registers.live <= registers.occupied,
                            "{name}: {p:?}"
                        );
                        match (mechanism, how) {
                            (MechanismKind::Chimera { .. }, How::Drained) => chimera[0] += 1,
                            (MechanismKind::ChimeraDirty { .. }, How::Switched) => {
                                dirty[0] += 1;
                                assert!(released > stopped, "{name}: {p:?}");
                            }
                            (
                                MechanismKind::Pep { .. } | MechanismKind::PepInPlace { .. },
                                How::Switched,
                            ) => {
                                dirty[1] += 1;
                                assert!(bytes.stack_barrier > 0, "{name}: {p:?}");
                            }
                            (MechanismKind::ChimeraDirty { .. }, How::Flushed { .. }) => {}
                            (MechanismKind::Ckpt { .. }, How::Switched) => {
                                assert!(bytes.stack_barrier > 0, "{name}: {p:?}");
                            }
                            (_, How::Drained) => {}
                            (
                                MechanismKind::FlushStrict | MechanismKind::FlushRelaxed,
                                How::Flushed { .. },
                            ) => flushed += 1,
                            (MechanismKind::Baseline, How::Switched) => {
                                switched[0] += 1;
                                assert!(bytes.registers > 0 && released > stopped, "{name}: {p:?}");
                            }
                            (MechanismKind::Live, How::Switched) => {
                                switched[1] += 1;
                                assert!(released > stopped, "{name}: {p:?}");
                            }
                            (MechanismKind::Chimera { .. }, How::Switched) => {
                                chimera[2] += 1;
                            }
                            (MechanismKind::Chimera { .. }, How::Flushed { .. }) => {
                                chimera[1] += 1;
                            }
                            (
                                MechanismKind::PointsLive
                                | MechanismKind::Lightweight { .. }
                                | MechanismKind::LightweightTb { .. }
                                | MechanismKind::LightweightInPlace { .. },
                                How::Switched,
                            ) => {
                                switched[2] += 1;
                                assert!(released > stopped || bytes.total() == 0, "{name}: {p:?}");
                                // TB-level compression never takes more than the same
                                // registers compressed warp by warp.
                                assert!(
                                    registers.tb_level_moved <= registers.tb_level_warp_moved,
                                    "{name}: {p:?}"
                                );
                                tb_level += registers.tb_level_tbs;
                            }
                            // The routine switches run routines, then move the shared memory
                            // and SIMT stacks.
                            (
                                MechanismKind::CsDefer
                                | MechanismKind::CtxBack
                                | MechanismKind::CtxBackCsDefer,
                                How::Switched,
                            ) => {
                                switched[3] += 1;
                                assert!(
                                    released > stopped && bytes.stack_barrier > 0,
                                    "{name}: {p:?}"
                                );
                            }
                            _ => panic!("{name}: {p:?}"),
                        }
                    }
                    Record::Refused { .. } => {
                        assert!(
                            matches!(
                                mechanism,
                                MechanismKind::FlushStrict | MechanismKind::FlushRelaxed
                            ),
                            "{name}: {p:?}"
                        );
                        refused += 1;
                    }
                    Record::Chose { technique, .. } => {
                        assert!(
                            matches!(
                                mechanism,
                                MechanismKind::Chimera { .. }
                                    | MechanismKind::ChimeraDirty { .. }
                                    | MechanismKind::Pep { .. }
                                    | MechanismKind::PepInPlace { .. }
                                    | MechanismKind::Ckpt { .. }
                            ),
                            "{name}: {p:?}"
                        );
                        if matches!(mechanism, MechanismKind::Ckpt { .. }) {
                            match technique {
                                Technique::Checkpoint => ckpt[0] += 1,
                                Technique::Switch => ckpt[1] += 1,
                                t => panic!("{name}: ckpt chose {t:?}"),
                            }
                        }
                        chose += 1;
                    }
                    Record::Checkpointed {
                        paused,
                        written,
                        bytes,
                        ..
                    } => {
                        assert!(
                            matches!(
                                mechanism,
                                MechanismKind::Pep { .. }
                                    | MechanismKind::PepInPlace { .. }
                                    | MechanismKind::Ckpt { .. }
                            ) && paused < written
                                && bytes.stack_barrier > 0,
                            "{name}: {p:?}"
                        );
                        if matches!(mechanism, MechanismKind::Ckpt { .. }) {
                            ckpt[2] += 1;
                        }
                    }
                    Record::Case { case, .. } => {
                        assert!(
                            matches!(
                                mechanism,
                                MechanismKind::Pep { .. } | MechanismKind::PepInPlace { .. }
                            ),
                            "{name}: {p:?}"
                        );
                        pep_cases[*case as usize] += 1;
                    }
                    Record::Restored {
                        started,
                        finished,
                        bytes,
                        ..
                    } => {
                        assert!(started <= finished, "{name}: {p:?}");
                        // A routine switch's resume counts the routine code it sent.
                        if matches!(
                            mechanism,
                            MechanismKind::CsDefer
                                | MechanismKind::CtxBack
                                | MechanismKind::CtxBackCsDefer
                        ) {
                            assert!(bytes.registers == 0 || bytes.metadata > 0, "{name}: {p:?}");
                        }
                    }
                    Record::RolledBack {
                        discarded_instructions,
                        ..
                    } => {
                        assert!(
                            matches!(mechanism, MechanismKind::Ckpt { .. }),
                            "{name}: {p:?}"
                        );
                        if *discarded_instructions > 0 {
                            ckpt[3] += 1;
                        }
                    }
                    Record::Requested { .. } => {}
                }
            }
            eprintln!(
                "{name}: {} requests, {} records",
                requests.made,
                r.preemptions.len()
            );
        }
    }
    eprintln!("requests {made:?}, switched {switched:?}, flushed {flushed}, refused {refused}, chimera {chimera:?} ({chose} choices), dirty {dirty:?}, pep cases {pep_cases:?}, ckpt {ckpt:?}");
    if only.is_some() {
        return;
    }
    // CKPT rolled some TBs back to a checkpoint and switched others (no checkpoint yet, or a
    // store since), and wrote checkpoints.
    assert!(ckpt.iter().all(|&n| n > 0), "ckpt {ckpt:?}");
    assert!(tb_level > 0, "no TB was compressed at TB level");
    for (m, n) in MechanismKind::ALL.iter().zip(made) {
        assert!(
            n >= 10 * suite::all().len() as u32,
            "{}: {n} requests",
            m.name()
        );
    }
    assert!(
        switched[0] > 100 && switched[1] > 100 && switched[2] > 150 && switched[3] > 300,
        "{switched:?}"
    );
    assert!(
        flushed > 0 && refused > 0,
        "flushed {flushed}, refused {refused}"
    );
    // Chimera+dirty and PEP switched, and PEP took two checkpoints of some TBs and one of
    // others.
    assert!(dirty.iter().all(|&n| n > 0), "dirty {dirty:?}");
    assert!(
        pep_cases[0] > 0 && pep_cases[1] > 0,
        "pep cases {pep_cases:?}"
    );
    // Chimera used every technique, and recorded a choice for each TB it took.
    assert!(chimera.iter().all(|&n| n > 0), "chimera {chimera:?}");
    assert!(
        chose >= chimera.iter().sum::<u32>(),
        "{chose} choices for {chimera:?}"
    );
}
