//! Partial preemption (papers/lin-thesis ch. 4; `sched::Tables::make_room`): a kernel that
//! holds every SM is asked to make room on one SM for one TB of a second kernel. Under
//! every mechanism, only the fewest TBs that make the room leave; the SM's other TBs keep
//! running beside the newcomer; both programs verify, and device memory ends bit-identical
//! to the run without the request.

use gpu::config::GpuConfig;
use gpu::occupancy::TbDemand;
use gpu::timing::{LaunchId, Machine, Move, SmId, SmLedger, TbRef, TimedGpu};
use preempt::{MechanismKind, Record};
use sched::{Framework, Record as SchedRecord};
use suite::Size;
use workload::scenario::Process;
use workload::system::Injector;
use workload::{RunRecord, Setup, System};

fn process(name: &str, arrival_us: f64) -> Process {
    let k = suite::by_name(name).unwrap();
    Process {
        arrival_us,
        ..Process::suite(k, Size::Small, 3)
    }
}

fn run(mechanism: MechanismKind, injector: Option<&mut dyn Injector>) -> RunRecord {
    // Two SMs, so that the small inputs fill them.
    let mut config = GpuConfig::preset("gtx480").unwrap();
    config.sm.count = 2;
    let timing = TimedGpu::new(config);
    let setup = Setup {
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
    // `branchy` fills both SMs with long TBs; `gemm` arrives while it runs and finds
    // none idle.
    let r = System::new(setup, &[process("branchy", 0.0), process("gemm", 5.0)])
        .unwrap()
        .run_with(&mut |_| {}, injector)
        .unwrap_or_else(|e| panic!("{}: {e}", mechanism.name()));
    for p in &r.processes {
        let v = p.verdict.as_ref().unwrap();
        assert!(
            v.verified,
            "{} with {}: {}",
            p.name,
            mechanism.name(),
            v.detail
        );
    }
    r
}

/// The fewest TBs of demand `victim` whose release lets one TB of demand `guest` fit,
/// worked out from the SM's capacities alone.
fn fewest(l: &SmLedger, victim: &TbDemand, guest: &TbDemand) -> u32 {
    (0..=l.used_tbs)
        .find(|&k| {
            let k = u64::from(k);
            let room = |cap: u32, used: u32, each: u32, need: u32| {
                u64::from(cap) - u64::from(used) + k * u64::from(each) >= u64::from(need)
            };
            room(l.max_tbs, l.used_tbs, 1, 1)
                && room(l.max_warps, l.used_warps, victim.warps, guest.warps)
                && room(l.max_threads, l.used_threads, victim.threads, guest.threads)
                && room(
                    l.registers,
                    l.used_registers,
                    victim.registers,
                    guest.registers,
                )
                && room(
                    l.shared_memory,
                    l.used_shared_memory,
                    victim.shared_memory,
                    guest.shared_memory,
                )
        })
        .expect("freeing every TB makes room")
}

/// Asks, once both kernels are active and SM 0 is full of the first, for room for one TB of
/// the second there; notes which TBs were on SM 0 then, and how many must leave.
#[derive(Default)]
struct AskOnce {
    asked_at: Option<u64>,
    guest: Option<LaunchId>,
    resident: Vec<TbRef>,
    need: u32,
}

impl Injector for AskOnce {
    fn before_cycle(&mut self, m: &Machine, fw: &mut Framework) {
        if self.asked_at.is_some() {
            return;
        }
        let sm = SmId(0);
        let active = m.active();
        if active.len() < 2 {
            return;
        }
        let (host, guest) = (active[0], active[1]);
        let resident: Vec<TbRef> = m.resident(sm).map(|(tb, _)| tb).collect();
        // Full of the first kernel's TBs, and it has more waiting: nothing would otherwise
        // free room for the second soon.
        if resident.len() < 2
            || resident.iter().any(|t| t.launch != host)
            || m.fits(sm, host)
            || m.launch(host).undispatched() == 0
        {
            return;
        }
        self.need = fewest(
            m.ledger(sm),
            m.launch(host).demand(),
            m.launch(guest).demand(),
        );
        assert!(fw.make_room(sm, guest, 1), "the request is taken");
        self.asked_at = Some(m.cycle());
        self.guest = Some(guest);
        self.resident = resident;
    }
}

#[test]
fn partial_preemption_takes_only_the_room_asked_for_under_every_mechanism() {
    let reference = run(MechanismKind::Drain, None);
    for mechanism in MechanismKind::ALL {
        let name = mechanism.name();
        let mut ask = AskOnce::default();
        let r = run(mechanism, Some(&mut ask));
        let asked = ask
            .asked_at
            .unwrap_or_else(|| panic!("{name}: never asked"));
        let guest = ask.guest.unwrap();
        assert!(ask.need >= 1 && (ask.need as usize) < ask.resident.len());
        assert!(
            r.memory == reference.memory,
            "{name}: memory differs from the run without the request"
        );
        // One request, for SM 0, taking exactly the fewest TBs that make the room.
        let requested: Vec<u32> = r
            .preemptions
            .iter()
            .filter_map(|p| match p {
                Record::Requested { sm, tbs, .. } if *sm == SmId(0) => Some(*tbs),
                _ => None,
            })
            .collect();
        assert_eq!(requested, vec![ask.need], "{name}: TBs the request took");
        let gone: Vec<TbRef> = r
            .preemptions
            .iter()
            .filter_map(|p| match p {
                Record::Preempted { sm, tb, .. } if *sm == SmId(0) => Some(*tb),
                _ => None,
            })
            .collect();
        assert_eq!(gone.len() as u32, ask.need, "{name}: TBs that gave up SM 0");
        // The room was made, and the guest's TB ran on SM 0 beside TBs of the first kernel
        // that were there when the request came and never left.
        let made = r
            .records
            .iter()
            .find_map(|e| match *e {
                SchedRecord::RoomMade {
                    cycle,
                    sm: SmId(0),
                    launch,
                } => {
                    assert_eq!(launch, guest);
                    Some(cycle)
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("{name}: the room was never made"));
        assert!(made >= asked);
        let placed = r
            .residency
            .iter()
            .find(|m| m.how.arrives() && m.sm == SmId(0) && m.tb.launch == guest)
            .unwrap_or_else(|| panic!("{name}: no TB of the guest on SM 0"))
            .cycle;
        let stayed: Vec<TbRef> = ask
            .resident
            .iter()
            .copied()
            .filter(|tb| !gone.contains(tb))
            .collect();
        let beside = stayed.iter().any(|&tb| {
            r.residency.iter().any(|m| {
                m.how == Move::Finished && m.sm == SmId(0) && m.tb == tb && m.cycle > placed
            })
        });
        assert!(
            beside,
            "{name}: no TB of the first kernel ran beside the guest"
        );
        for tb in &stayed {
            assert!(
                !r.residency
                    .iter()
                    .any(|m| m.tb == *tb && matches!(m.how, Move::Evicted | Move::Discarded)),
                "{name}: {tb} was not needed for the room but was taken"
            );
        }
    }
}
