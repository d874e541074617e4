//! The control protocol's conformance: every request from every state of its TB, warp and
//! hold, on one SM of the GTX480 over a fixed-latency memory ([`super::harness`]). A legal
//! request is acknowledged by its event; an illegal one is a clean error naming the request
//! and the state, hands the request back, and changes nothing.

use super::control::{
    AfterStop, ControlError, Direction, Keep, Refused, Request, Routine, RoutineEnd, Scope, Start,
    StopAt, TbCheckpoint, TbControl, WarpControl, WarpReports,
};
use super::ids::{HoldId, SmId, TbRef};
use super::machine::Event;
use super::TbContext;
use crate::config::GpuConfig;
use crate::harness::{HarnessSpec, SmHarness, SM};
use crate::host::{DevPtr, KernelArg};
use crate::memory::DeviceMemory;

/// Warp 1 exits at once; warp 0 runs a loop of `n` iterations without touching memory, then
/// stores its lanes' sums.
const SPIN: &str = r#"
.version 7.0
.target sm_70
.address_size 64
.visible .entry spin(.param .u64 out, .param .u32 n)
{
    .reg .pred %p<3>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    mov.u32 %r2, %tid.x;
    setp.ge.u32 %p2, %r2, 32;
    @%p2 exit;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r3, 0;
L:
    add.u32 %r3, %r3, %r2;
    add.u32 %r1, %r1, -1;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra L;
    mul.wide.u32 %rd2, %r2, 4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r3;
    exit;
}
"#;

/// The PC of the timed kernel's last instruction (its final `exit`): a routine of one
/// instruction.
fn exit_pc(h: &SmHarness) -> u32 {
    let kernel = &h.machine().launch(h.launch()).ctx().kernel;
    let pc = kernel.insts.len() as u32 - 1;
    assert!(matches!(
        kernel.insts.as_slice()[pc as usize].op,
        kir::Op::Exit
    ));
    pc
}

/// Cache lines `bytes` at `base` touch.
fn lines(base: u64, bytes: u64, line: u64) -> u64 {
    (base + bytes - 1) / line - base / line + 1
}

const LATENCY: u64 = 100;

struct Setup {
    h: SmHarness,
    tb: TbRef,
    /// A checkpoint of the TB taken while it ran (its latest, unless the state took another).
    chain: Vec<TbCheckpoint>,
    /// Where checkpoints and transfers write.
    area: u64,
}

fn harness(iterations: u32) -> (SmHarness, u64) {
    let mut memory = DeviceMemory::default();
    let out = memory.alloc(64 * 4);
    let area = memory.alloc(1 << 16);
    let h = SmHarness::new(HarnessSpec {
        gpu: GpuConfig::preset("gtx480").expect("preset"),
        ptx: SPIN,
        kernel: "spin",
        grid: [2, 1, 1],
        block: [64, 1, 1],
        args: vec![KernelArg::Ptr(DevPtr(out)), KernelArg::U32(iterations)],
        latency: LATENCY,
        memory,
    })
    .expect("harness");
    (h, area)
}

/// Steps past the first instruction fetch (an i-cache miss: about 140 cycles on the GTX480)
/// into the loop.
fn warm_up(h: &mut SmHarness) {
    for _ in 0..300 {
        h.step().unwrap();
    }
}

/// A TB running its loop, with a full checkpoint taken and written.
fn running() -> Setup {
    let (mut h, area) = harness(100_000);
    let tb = h.dispatch().expect("room");
    warm_up(&mut h);
    h.request(Request::Checkpoint {
        sm: SM,
        tb,
        scope: Scope::Full,
        base: area,
    })
    .expect("checkpoint");
    let i = h
        .run_until(1000, |e| matches!(e, Event::CheckpointDone { .. }))
        .unwrap();
    let Event::CheckpointDone { checkpoint, .. } = &h.log()[i] else {
        unreachable!()
    };
    let chain = vec![(**checkpoint).clone()];
    Setup { h, tb, chain, area }
}

fn stop(s: &mut Setup, then: AfterStop) {
    s.h.request(Request::Stop {
        sm: SM,
        tb: s.tb,
        at: StopAt::Boundary,
        then,
        reports: WarpReports::None,
    })
    .expect("stop");
}

/// The TB asked to stop and staying, before its stop completes.
fn stopping() -> Setup {
    let mut s = running();
    stop(&mut s, AfterStop::Stay);
    s
}

/// The TB stopped, resident.
fn stopped() -> Setup {
    let mut s = stopping();
    s.h.run_until(1000, |e| matches!(e, Event::TbStopped { .. }))
        .unwrap();
    s
}

/// The TB stopped and evicted: not resident.
fn evicted() -> (Setup, Box<TbContext>) {
    let mut s = stopped();
    let from = s.h.log().len();
    s.h.request(Request::Evict {
        sm: SM,
        tb: s.tb,
        then: AfterStop::Leave,
    })
    .expect("evict");
    let context = take_context(&mut s, from);
    (s, context)
}

fn take_context(s: &mut Setup, from: usize) -> Box<TbContext> {
    let i =
        s.h.run_until_since(from, 1000, |e| matches!(e, Event::TbEvicted { .. }))
            .unwrap();
    match &s.h.log()[i] {
        Event::TbEvicted { context, .. } => context.clone(),
        _ => unreachable!(),
    }
}

/// The requests of the TB matrix, by name.
fn tb_request(name: &str, s: &Setup) -> Request {
    let (sm, tb) = (SM, s.tb);
    match name {
        "stop" => Request::Stop {
            sm,
            tb,
            at: StopAt::Boundary,
            then: AfterStop::Stay,
            reports: WarpReports::None,
        },
        "resume" => Request::Resume { sm, tb },
        "evict" => Request::Evict {
            sm,
            tb,
            then: AfterStop::Leave,
        },
        "discard" => Request::Discard { sm, tb },
        "routine" => Request::Routine {
            sm,
            tb,
            warp: 0,
            routine: Routine {
                entry: exit_pc(&s.h),
                lanes: u32::MAX,
                end: RoutineEnd::Exit,
            },
        },
        "hold-warp" => Request::HoldWarp { sm, tb, warp: 0 },
        "release-warp" => Request::ReleaseWarp { sm, tb, warp: 0 },
        "checkpoint" => Request::Checkpoint {
            sm,
            tb,
            scope: Scope::Dirty,
            base: s.area,
        },
        "rollback" => Request::Rollback {
            sm,
            tb,
            chain: s.chain.clone(),
        },
        _ => unreachable!("{name}"),
    }
}

/// Whether `e` acknowledges the request `name`.
fn acknowledges(name: &str, e: &Event) -> bool {
    matches!(
        (name, e),
        ("stop", Event::TbStopped { .. })
            | ("resume", Event::TbResumed { .. })
            | ("evict", Event::TbEvicted { .. })
            | ("discard", Event::TbDiscarded { .. })
            | ("routine", Event::RoutineDone { .. })
            | ("hold-warp", Event::WarpHeld { .. })
            | ("release-warp", Event::WarpReleased { .. })
            | ("checkpoint", Event::CheckpointDone { .. })
            | ("rollback", Event::TbRolledBack { .. })
            | ("release", Event::HoldReleased { .. })
            | ("park", Event::HoldParked { .. })
            | ("unpark", Event::HoldUnparked { .. })
            | ("install", Event::TbRestored { .. })
    )
}

/// What a request from a state must give.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Expect {
    Ack,
    Illegal,
    NotResident,
    NoHold,
}

/// Checks one outcome: an acknowledgement within 2,000 cycles, or the expected error with
/// the request handed back and no event.
fn check(
    h: &mut SmHarness,
    from: usize,
    name: &str,
    state: &str,
    r: Result<super::Ticket, Refused>,
    e: Expect,
) {
    match (r, e) {
        (Ok(_), Expect::Ack) => {
            h.run_until_since(from, 2000, |ev| acknowledges(name, ev))
                .unwrap_or_else(|err| panic!("`{name}` from {state}: {err}"));
        }
        (Err(refused), expected) => {
            assert_eq!(refused.request.name(), name, "the request comes back");
            let got = match refused.error {
                ControlError::Illegal {
                    request, ref state, ..
                } => {
                    assert_eq!(request, name);
                    assert!(!state.is_empty());
                    Expect::Illegal
                }
                ControlError::NotResident { .. } => Expect::NotResident,
                ControlError::NoHold { .. } => Expect::NoHold,
                ref other => panic!("`{name}` from {state}: unexpected {other}"),
            };
            assert_eq!(got, expected, "`{name}` from {state}: {}", refused.error);
            assert_eq!(h.log().len(), from, "a refusal is not acknowledged");
        }
        (Ok(_), expected) => panic!("`{name}` from {state} was accepted, expected {expected:?}"),
    }
}

/// A state, how to reach it, and the outcome of each of `TB_REQUESTS` from it.
type Row = (&'static str, fn() -> Setup, [Expect; 9]);

const TB_REQUESTS: [&str; 9] = [
    "stop",
    "resume",
    "evict",
    "discard",
    "routine",
    "hold-warp",
    "release-warp",
    "checkpoint",
    "rollback",
];

#[test]
fn every_tb_request_from_every_tb_state() {
    use Expect::*;
    // Per state, the outcome of each request of `TB_REQUESTS`, in order.
    let table: [Row; 4] = [
        (
            "running",
            running,
            [
                Ack, Illegal, Illegal, Ack, Illegal, Ack, Illegal, Ack, Illegal,
            ],
        ),
        (
            "stopping",
            stopping,
            [
                Illegal, Illegal, Illegal, Ack, Ack, Illegal, Illegal, Ack, Illegal,
            ],
        ),
        (
            "stopped",
            stopped,
            [Illegal, Ack, Ack, Ack, Ack, Illegal, Illegal, Ack, Ack],
        ),
        ("evicted", || evicted().0, [NotResident; 9]),
    ];
    for (state, setup, expected) in table {
        for (name, e) in TB_REQUESTS.into_iter().zip(expected) {
            let mut s = setup();
            let before = s.h.machine().resident(SM).collect::<Vec<_>>();
            let from = s.h.log().len();
            let r = s.h.request(tb_request(name, &s));
            let refused = r.is_err();
            check(&mut s.h, from, name, state, r, e);
            if refused {
                assert_eq!(
                    s.h.machine().resident(SM).collect::<Vec<_>>(),
                    before,
                    "`{name}` refused from {state} changed the TB"
                );
            }
        }
    }
}

#[test]
fn warp_requests_follow_the_warp_state() {
    use Expect::*;
    // A held warp: holding it again is illegal, releasing is legal; a routine needs a
    // stopped TB.
    let mut s = running();
    s.h.request(tb_request("hold-warp", &s)).expect("hold");
    for (name, e) in [
        ("hold-warp", Illegal),
        ("routine", Illegal),
        ("release-warp", Ack),
    ] {
        let from = s.h.log().len();
        let r = s.h.request(tb_request(name, &s));
        check(&mut s.h, from, name, "held", r, e);
    }
    // A finished warp (warp 1 exits first thing) takes no routine and cannot be held.
    let mut s = stopped();
    let from = s.h.log().len();
    let r = s.h.request(Request::Routine {
        sm: SM,
        tb: s.tb,
        warp: 1,
        routine: Routine {
            entry: exit_pc(&s.h),
            lanes: 1,
            end: RoutineEnd::Exit,
        },
    });
    check(&mut s.h, from, "routine", "finished", r, Illegal);
    // A warp in a routine: no second routine, and its TB can be neither resumed nor evicted
    // until the routine is acknowledged.
    let mut s = stopped();
    s.h.request(tb_request("routine", &s)).expect("routine");
    let views = s.h.machine().warps_of(SM, s.tb).unwrap();
    assert!(matches!(views[0].control, WarpControl::InRoutine(_)));
    for name in ["routine", "resume", "evict"] {
        let from = s.h.log().len();
        let r = s.h.request(tb_request(name, &s));
        check(&mut s.h, from, name, "in a routine", r, Illegal);
    }
    s.h.run_until(2000, |e| matches!(e, Event::RoutineDone { .. }))
        .unwrap();
    let from = s.h.log().len();
    let r = s.h.request(tb_request("resume", &s));
    check(&mut s.h, from, "resume", "after its routine", r, Ack);
    // No such warp.
    let s = stopped();
    let mut h = s.h;
    let r = h.request(Request::HoldWarp {
        sm: SM,
        tb: s.tb,
        warp: 5,
    });
    assert!(matches!(
        r,
        Err(Refused {
            error: ControlError::Illegal { .. } | ControlError::NoWarp { .. },
            ..
        })
    ));
}

/// A hold in each state: saving (a TB stopped keeping its resources), restoring (taken for a
/// context to come), parked; and the context of the TB stopped.
fn hold_in(state: &str) -> (Setup, HoldId, Box<TbContext>) {
    let mut s = running();
    stop(&mut s, AfterStop::LeaveHolding);
    let i =
        s.h.run_until(1000, |e| matches!(e, Event::TbEvicted { .. }))
            .unwrap();
    let (context, hold) = match &s.h.log()[i] {
        Event::TbEvicted { context, hold, .. } => (context.clone(), hold.expect("held")),
        _ => unreachable!(),
    };
    let hold = match state {
        "saving" => hold,
        "parked" => {
            s.h.request(Request::Park {
                sm: SM,
                hold,
                keep: Keep::Registers,
            })
            .expect("park");
            hold
        }
        "restoring" => {
            s.h.request(Request::Release { sm: SM, hold })
                .expect("release");
            let launch = s.h.launch();
            s.h.request(Request::Hold { sm: SM, launch })
                .expect("hold")
                .hold()
                .expect("a hold")
        }
        _ => unreachable!(),
    };
    (s, hold, context)
}

#[test]
fn every_hold_request_from_every_hold_state() {
    use Expect::*;
    let requests = ["release", "park", "unpark", "install"];
    let table = [
        ("saving", [Ack, Ack, Illegal, Illegal]),
        ("restoring", [Ack, Illegal, Illegal, Ack]),
        ("parked", [Ack, Illegal, Ack, Illegal]),
    ];
    for (state, expected) in table {
        for (name, e) in requests.into_iter().zip(expected) {
            let (mut s, hold, context) = hold_in(state);
            let holds = s.h.machine().holds(SM).collect::<Vec<_>>();
            let ledger = s.h.machine().ledger(SM).clone();
            let from = s.h.log().len();
            let r = s.h.request(match name {
                "release" => Request::Release { sm: SM, hold },
                "park" => Request::Park {
                    sm: SM,
                    hold,
                    keep: Keep::SharedMemory,
                },
                "unpark" => Request::Unpark { sm: SM, hold },
                _ => Request::Install {
                    sm: SM,
                    context,
                    into: Some(hold),
                    start: Start::Running,
                },
            });
            let refused = r.is_err();
            if let Err(Refused { request, .. }) = &r {
                if let Request::Install { context, .. } = request.as_ref() {
                    assert_eq!(context.tb, s.tb, "the context comes back with the refusal");
                }
            }
            check(&mut s.h, from, name, state, r, e);
            if refused {
                assert_eq!(s.h.machine().holds(SM).collect::<Vec<_>>(), holds);
                assert_eq!(s.h.machine().ledger(SM), &ledger);
            }
        }
    }
    // No such hold.
    let (mut s, hold, _) = hold_in("saving");
    let missing = HoldId(hold.0 + 7);
    for name in ["release", "park", "unpark"] {
        let from = s.h.log().len();
        let r = s.h.request(match name {
            "release" => Request::Release {
                sm: SM,
                hold: missing,
            },
            "park" => Request::Park {
                sm: SM,
                hold: missing,
                keep: Keep::Both,
            },
            _ => Request::Unpark {
                sm: SM,
                hold: missing,
            },
        });
        check(&mut s.h, from, name, "no hold", r, NoHold);
    }
}

#[test]
fn a_request_for_a_missing_sm_is_refused_and_handed_back() {
    let (mut s, context) = evicted();
    let r = s.h.request(Request::Install {
        sm: SmId(3),
        context,
        into: None,
        start: Start::Stopped,
    });
    let Err(Refused { error, request }) = r else {
        panic!("accepted");
    };
    assert_eq!(error, ControlError::NoSuchSm { sm: SmId(3) });
    let Request::Install { context, .. } = *request else {
        panic!("another request came back");
    };
    // The context is intact: installing it where it belongs works, stopped.
    s.h.request(Request::Install {
        sm: SM,
        context,
        into: None,
        start: Start::Stopped,
    })
    .expect("install");
    assert_eq!(
        s.h.machine().resident(SM).collect::<Vec<_>>(),
        vec![(s.tb, TbControl::Stopped)]
    );
}

/// Context bytes go out one chunk of lines per cycle when no warp uses the LD/ST unit, and
/// the transfer is acknowledged when its last chunk completes: `chunks - 1 + latency`
/// cycles after the request.
#[test]
fn a_transfer_is_acknowledged_when_its_last_line_completes() {
    let (mut h, area) = harness(10);
    let gpu = GpuConfig::preset("gtx480").unwrap();
    let (line, chunk) = (
        gpu.memory.line_bytes,
        gpu.memory.icnt_request.input_buffer as u64,
    );
    for lines in [1, chunk, chunk + 1, 5 * chunk + 3] {
        let at = h.cycle();
        let bytes = lines * line;
        let id = h
            .request(Request::Transfer {
                sm: SM,
                direction: Direction::Save,
                base: area,
                bytes,
                launch: h.launch(),
                not_before: at,
            })
            .unwrap()
            .transfer()
            .unwrap();
        let i = h
            .run_until(
                10_000,
                |e| matches!(e, Event::TransferDone { id: d, .. } if *d == id),
            )
            .unwrap();
        let touched = self::lines(area, bytes, line);
        assert_eq!(
            h.log()[i].cycle() - at,
            touched.div_ceil(chunk) - 1 + LATENCY,
            "{touched} lines of {chunk} per cycle"
        );
    }
}

/// A checkpoint is written while the TB keeps running (its loop uses no memory, so the
/// LD/ST unit is free for the checkpoint's lines), acknowledged like a transfer of its
/// bytes; the TB issued instructions meanwhile.
#[test]
fn a_checkpoint_is_written_while_the_tb_runs() {
    let (mut h, area) = harness(100_000);
    let tb = h.dispatch().unwrap();
    warm_up(&mut h);
    let before = h.machine().tb_progress(SM, tb).unwrap().executed;
    let at = h.cycle();
    h.request(Request::Checkpoint {
        sm: SM,
        tb,
        scope: Scope::Full,
        base: area,
    })
    .unwrap();
    let i = h
        .run_until(10_000, |e| matches!(e, Event::CheckpointDone { .. }))
        .unwrap();
    let Event::CheckpointDone {
        checkpoint, cycle, ..
    } = &h.log()[i]
    else {
        unreachable!()
    };
    let gpu = GpuConfig::preset("gtx480").unwrap();
    let line = gpu.memory.line_bytes;
    let chunk = gpu.memory.icnt_request.input_buffer as u64;
    let touched = lines(area, checkpoint.bytes, line);
    assert_eq!(cycle - at, touched.div_ceil(chunk) - 1 + LATENCY);
    assert_eq!(checkpoint.taken_at, at);
    // Full: every register of both warps; warp 1 has exited, so its registers cost nothing.
    let regs = checkpoint.warps[0].registers.len() as u64;
    assert!(regs > 0 && checkpoint.warps[1].registers.len() as u64 == regs);
    let stacks: u64 = checkpoint
        .warps
        .iter()
        .map(|w| w.stack.len() as u64 * 12 + 4)
        .sum();
    assert_eq!(checkpoint.bytes, regs * 32 * 4 + stacks + 64);
    let after = h.machine().tb_progress(SM, tb).unwrap().executed;
    assert!(after > before + 20, "the TB ran on: {before} -> {after}");
}

/// A held warp issues nothing while its TB's other warps run; released, it goes on.
#[test]
fn a_held_warp_issues_nothing_until_released() {
    // Two TBs' worth of one warp each: hold the first TB's warp 0 and watch the second run.
    let (mut h, _) = harness(100_000);
    let a = h.dispatch().unwrap();
    let b = h.dispatch().unwrap();
    warm_up(&mut h);
    h.request(Request::HoldWarp {
        sm: SM,
        tb: a,
        warp: 0,
    })
    .unwrap();
    // What was in flight finishes first.
    for _ in 0..50 {
        h.step().unwrap();
    }
    let executed = |h: &SmHarness, tb| h.machine().tb_progress(SM, tb).unwrap().executed;
    let (a0, b0) = (executed(&h, a), executed(&h, b));
    for _ in 0..200 {
        h.step().unwrap();
    }
    assert_eq!(executed(&h, a), a0, "a held warp issues nothing");
    assert!(executed(&h, b) > b0 + 50, "the other TB runs on");
    h.request(Request::ReleaseWarp {
        sm: SM,
        tb: a,
        warp: 0,
    })
    .unwrap();
    for _ in 0..100 {
        h.step().unwrap();
    }
    assert!(executed(&h, a) > a0 + 20, "released, it runs again");
}

/// What a probe saw.
#[derive(Default)]
struct Seen {
    issues: u64,
    /// Issues by PC.
    by_pc: std::collections::BTreeMap<u32, u64>,
    memory: u64,
    dispatched: u64,
    finished: u64,
    /// Cycles of what it saw, in order (they never go back).
    cycles: Vec<u64>,
}

struct Counting(std::rc::Rc<std::cell::RefCell<Seen>>);

impl super::Probe for Counting {
    fn on_issue(&mut self, i: &super::Issue) {
        let mut s = self.0.borrow_mut();
        s.issues += 1;
        *s.by_pc.entry(i.pc).or_default() += 1;
        s.cycles.push(i.cycle);
    }
    fn on_memory_request(&mut self, _: SmId, _: &memsys::MemAccess, cycle: u64) {
        let mut s = self.0.borrow_mut();
        s.memory += 1;
        s.cycles.push(cycle);
    }
    fn on_event(&mut self, e: &Event) {
        let mut s = self.0.borrow_mut();
        match e {
            Event::TbDispatched { .. } => s.dispatched += 1,
            Event::TbFinished { .. } => s.finished += 1,
            _ => {}
        }
        s.cycles.push(e.cycle());
    }
}

/// Runs both TBs of the spin kernel (200 iterations) to the end, with a probe or without:
/// the cycle it ended, its warp instructions, and what the probe saw.
fn probed_run(probe: bool) -> (u64, u64, Seen) {
    let (mut h, _) = harness(200);
    let seen = std::rc::Rc::new(std::cell::RefCell::new(Seen::default()));
    if probe {
        h.machine_mut().attach(Box::new(Counting(seen.clone())));
    }
    h.dispatch().unwrap();
    h.dispatch().unwrap();
    h.run_until_idle(100_000).unwrap();
    let launch = h.launch();
    let instructions = h.machine().warp_instructions(launch);
    let end = h.cycle();
    drop(h);
    let seen = std::rc::Rc::try_unwrap(seen).ok().unwrap().into_inner();
    (end, instructions, seen)
}

/// A probe is told of every issue, memory request and event, in order, and changes
/// nothing.
#[test]
fn a_probe_sees_every_issue_and_event_and_changes_nothing() {
    let (end, instructions, none) = probed_run(false);
    assert_eq!(none.issues, 0);
    let (end_probed, instructions_probed, seen) = probed_run(true);
    assert_eq!((end, instructions), (end_probed, instructions_probed));
    assert_eq!(
        seen.issues, instructions,
        "one on_issue per warp instruction"
    );
    assert_eq!((seen.dispatched, seen.finished), (2, 2));
    // The loop body ran 200 times in each TB's warp 0.
    assert!(seen.by_pc.values().any(|&n| n == 400), "{:?}", seen.by_pc);
    // Each TB's warp 0 stores once: two accepted memory requests.
    assert_eq!(seen.memory, 2);
    assert!(seen.cycles.windows(2).all(|w| w[0] <= w[1]), "in order");
}

/// CKPT's verbs: a launch counting block entries raises `CheckpointDue` once a warp entered
/// one block `every` times, and not again until a checkpoint; a live checkpoint holds fewer
/// registers than a full one; a stopped TB rolled back to it repeats the lost iterations and
/// still stores what an uninterrupted run stores.
#[test]
fn block_counts_call_for_a_live_checkpoint_that_a_rollback_restores() {
    const N: u32 = 400;
    let mut memory = DeviceMemory::default();
    let out = memory.alloc(64 * 4);
    let area = memory.alloc(1 << 16);
    let mut h = SmHarness::new(HarnessSpec {
        gpu: GpuConfig::preset("gtx480").expect("preset"),
        ptx: SPIN,
        kernel: "spin",
        grid: [1, 1, 1],
        block: [64, 1, 1],
        args: vec![KernelArg::Ptr(DevPtr(out)), KernelArg::U32(N)],
        latency: LATENCY,
        memory,
    })
    .expect("harness");
    let launch = h.launch();
    h.request(Request::CountBlocks {
        sm: SM,
        launch,
        every: 5,
    })
    .expect("count");
    let tb = h.dispatch().expect("room");
    let due = h
        .run_until(5000, |e| matches!(e, Event::CheckpointDue { .. }))
        .unwrap();
    assert!(h.log()[..due]
        .iter()
        .any(|e| matches!(e, Event::BlockCountSet { .. })));
    // Warp 0 entered the loop body five times (five loop-back branches, fewer than 8
    // instructions each, plus the prologue): the due comes early, and only once.
    let executed = h.machine().tb_progress(SM, tb).unwrap().executed;
    assert!(
        (20..60).contains(&executed),
        "due after {executed} instructions"
    );
    for _ in 0..200 {
        h.step().unwrap();
    }
    let dues = h
        .log()
        .iter()
        .filter(|e| matches!(e, Event::CheckpointDue { .. }))
        .count();
    assert_eq!(dues, 1, "raised again before a checkpoint");
    assert!(!h.machine().tb_progress(SM, tb).unwrap().repeatable);

    let from = h.log().len();
    let requested = from;
    h.request(Request::Checkpoint {
        sm: SM,
        tb,
        scope: Scope::Live,
        base: area,
    })
    .unwrap();
    let i = h
        .run_until_since(from, 10_000, |e| matches!(e, Event::CheckpointDone { .. }))
        .unwrap();
    let Event::CheckpointDone { checkpoint, .. } = &h.log()[i] else {
        unreachable!()
    };
    let checkpoint = (**checkpoint).clone();
    let n_regs = h.machine().launch(launch).ctx().kernel.regs.len();
    let live = checkpoint.warps[0].registers.len();
    assert!(
        live > 0 && live < n_regs,
        "live {live} of {n_regs} registers"
    );
    assert!(
        checkpoint.shared.is_some(),
        "a TB's first checkpoint holds its shared memory"
    );
    assert!(h.machine().tb_progress(SM, tb).unwrap().repeatable);
    // The counts start again at the capture: another due, after five more entries (it may
    // come while the checkpoint's bytes are still moving).
    h.run_until_since(requested, 5000, |e| {
        matches!(e, Event::CheckpointDue { .. })
    })
    .unwrap();

    // Stop, roll back to the live checkpoint, resume: the work since is done again.
    let from = h.log().len();
    h.request(Request::Stop {
        sm: SM,
        tb,
        at: StopAt::Boundary,
        then: AfterStop::Stay,
        reports: WarpReports::None,
    })
    .unwrap();
    h.run_until_since(from, 1000, |e| matches!(e, Event::TbStopped { .. }))
        .unwrap();
    let before = h.machine().tb_progress(SM, tb).unwrap().executed;
    let at_checkpoint: u64 = checkpoint.warps.iter().map(|w| w.executed).sum();
    assert!(before > at_checkpoint);
    h.request(Request::Rollback {
        sm: SM,
        tb,
        chain: vec![checkpoint],
    })
    .unwrap();
    h.run_until_since(from, 1000, |e| matches!(e, Event::TbRolledBack { .. }))
        .unwrap();
    assert_eq!(
        h.machine().tb_progress(SM, tb).unwrap().executed,
        at_checkpoint
    );
    h.request(Request::Resume { sm: SM, tb }).unwrap();
    h.run_until_idle(200_000).unwrap();
    let bytes = h.machine().memory().read_bytes(out, 32 * 4).unwrap();
    for lane in 0..32u32 {
        let v = u32::from_le_bytes(bytes[lane as usize * 4..][..4].try_into().unwrap());
        assert_eq!(v, lane * N, "lane {lane}");
    }
}
