//! What a preemption request asks of an SM: all of it, or only the room one kernel needs
//! (partial preemption, papers/lin-thesis ch. 4: co-running kernels give up part of an SM;
//! papers/lin-lightweight §III-A: in-place switching frees only what the incoming kernel
//! needs). [`victims`] picks the TBs a request takes and [`room_plan`] what each of them must
//! give up; both answer from the SM's ledger, which hardware keeps, and nothing else.

use gpu::occupancy::TbDemand;
use gpu::timing::{Keep, LaunchId, Machine, SmId, SmLedger, TbControl, TbRef};

/// A preemption request for one SM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// Every TB on the SM: it is reserved for `next` (`None`: for no kernel in particular,
    /// as an experiment's preemption signal is).
    Sm { next: Option<LaunchId> },
    /// Room for `tbs` more TBs of `launch`, taken from the running TBs of the other launches
    /// on the SM; the TBs not needed for it keep running.
    Room { launch: LaunchId, tbs: u32 },
}

impl Want {
    /// The kernel the freed resources are for.
    pub fn next(&self) -> Option<LaunchId> {
        match *self {
            Want::Sm { next } => next,
            Want::Room { launch, .. } => Some(launch),
        }
    }
}

/// The TBs of `sm` that `want` takes, in the order they were placed.
///
/// A whole SM gives every running TB. Room gives the fewest running TBs of other launches
/// whose resources, added to what is free, let `tbs` TBs of the launch fit (its limits
/// included), taking the most recently placed first (the least work to stop or redo); if
/// all of them would not be enough, it takes them all.
pub fn victims(m: &Machine, sm: SmId, want: &Want) -> Vec<TbRef> {
    let running: Vec<TbRef> = m
        .resident(sm)
        .filter(|(_, control)| *control == TbControl::Running)
        .map(|(tb, _)| tb)
        .collect();
    let (launch, tbs) = match *want {
        Want::Sm { .. } => return running,
        Want::Room { launch, tbs } => (launch, tbs),
    };
    let mut candidates: Vec<(u64, TbRef)> = running
        .into_iter()
        .filter(|tb| tb.launch != launch)
        .map(|tb| (m.tb_progress(sm, tb).map_or(0, |p| p.placed_at), tb))
        .collect();
    // Youngest first; ties by launch and index, so the choice is deterministic.
    candidates.sort_by(|a, b| b.cmp(a));
    let demand = *m.launch(launch).demand();
    let mut ledger = m.ledger(sm).clone();
    let mut taken = Vec::new();
    for (placed_at, tb) in candidates {
        if ledger.room_for(launch, &demand) >= tbs {
            break;
        }
        ledger.give_for(tb.launch, m.launch(tb.launch).demand());
        taken.push((placed_at, tb));
    }
    taken.sort_unstable();
    taken.into_iter().map(|(_, tb)| tb).collect()
}

/// In place (papers/lin-lightweight §III-A): of `tbs`, about to stop on `sm` for `want`,
/// keep their registers or their shared memory on the SM (`None`: neither), so that the kernel
/// the request is for gets the room it needs and no more is freed.
///
/// The room is `n` TBs of that kernel: for a whole SM, as many as an empty SM holds (or
/// fewer, if fewer are left to place); for a partial request, the TBs it names. Whole-SM
/// in-place switching is the instance of the partial request that asks for an empty SM's
/// worth. Without a kernel to make room for, every TB gives up everything.
pub fn room_plan(m: &Machine, sm: SmId, tbs: &[TbRef], want: &Want) -> Vec<Option<Keep>> {
    let Some(next) = want.next() else {
        return vec![None; tbs.len()];
    };
    let d2 = *m.launch(next).demand();
    let n2 = match *want {
        Want::Room { tbs: n, .. } => u64::from(n),
        Want::Sm { .. } => {
            // TBs of `next` an empty SM holds, or fewer if fewer are left to place.
            let empty = SmLedger::new(&m.config().sm.resources);
            let fit = u64::from(empty.room_for(next, &d2));
            let returning = tbs.iter().filter(|t| t.launch == next).count() as u64;
            let left = m.launch(next).undispatched() + m.launch(next).held() + returning;
            fit.min(left)
        }
    };
    keep_within(m.ledger(sm), tbs, |t| *m.launch(t.launch).demand(), &d2, n2)
}

/// The registers and shared memory each of `tbs` may keep once they and `n` TBs of demand
/// `d2` are accounted for, first come first kept.
fn keep_within(
    l: &SmLedger,
    tbs: &[TbRef],
    demand: impl Fn(&TbRef) -> TbDemand,
    d2: &TbDemand,
    n: u64,
) -> Vec<Option<Keep>> {
    let (mut regs, mut smem) = (u64::from(l.used_registers), u64::from(l.used_shared_memory));
    for t in tbs {
        regs -= u64::from(demand(t).registers);
        smem -= u64::from(demand(t).shared_memory);
    }
    let mut room_regs = u64::from(l.registers)
        .saturating_sub(regs)
        .saturating_sub(n * u64::from(d2.registers));
    let mut room_smem = u64::from(l.shared_memory)
        .saturating_sub(smem)
        .saturating_sub(n * u64::from(d2.shared_memory));
    tbs.iter()
        .map(|t| {
            let d = demand(t);
            let registers = u64::from(d.registers) <= room_regs;
            if registers {
                room_regs -= u64::from(d.registers);
            }
            let shared = d.shared_memory > 0 && u64::from(d.shared_memory) <= room_smem;
            if shared {
                room_smem -= u64::from(d.shared_memory);
            }
            Keep::of(registers, shared)
        })
        .collect()
}
