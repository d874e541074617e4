//! Warp schedulers: each cycle, every scheduler of an SM ranks its warps and the SM issues
//! the first one, in that order, that can issue.
//!
//! * [`Lrr`] — loose round robin: start with the warp after the one that issued last
//!   (GPGPU-Sim `lrr`; papers/lin-lightweight Table I).
//! * [`Gto`] — greedy then oldest: keep issuing the same warp until it stalls, then the
//!   oldest (earliest dispatched) warp (Rogers et al., MICRO 2012; GPGPU-Sim `gto`).
//! * [`TwoLevel`] — an active set of `n` warps ranked round-robin; a warp that waits on a
//!   memory result (or at a barrier, so the set cannot fill with warps waiting for pending
//!   ones) leaves the set and the oldest pending warp takes its place
//!   (Narasiman et al., MICRO 2011; GPGPU-Sim `two_level_active`).
//! * [`Quota`] — per-kernel issue quotas over any of them (SMK's warp-instruction quotas,
//!   papers/lin-thesis §4.2).

use super::ids::{LaunchId, WarpSlotId};
use crate::config::SchedulerPolicy;

/// A warp as a scheduler sees it: hardware-visible facts only, never values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WarpInfo {
    /// The warp's slot in the SM (stable while the warp is resident).
    pub slot: WarpSlotId,
    /// Dispatch order of the warp on this SM (smaller = older).
    pub age: u64,
    /// The warp waits for something long: an outstanding memory access its next instruction
    /// needs, or a barrier.
    pub long_wait: bool,
    /// The launch the warp belongs to (for policies that treat kernels differently, such as
    /// per-kernel warp quotas, papers/lin-thesis ch. 4).
    pub launch: LaunchId,
}

/// A warp-scheduling policy.
///
/// **Contract:** `order` receives the scheduler's resident, unfinished warps sorted by slot
/// and writes into `order` (cleared first) the slots it is willing to issue this cycle,
/// highest priority first, each at most once; it may leave warps out (a two-level scheduler
/// hides its pending set). It may keep state between cycles but must be deterministic: the
/// same sequence of calls gives the same orders. It sees no register values and cannot change
/// any warp; whether a warp can actually issue (scoreboard, units, memory) is decided by the
/// SM, which calls `issued` for the one warp that did, at most once per cycle.
pub trait WarpScheduler {
    fn order(&mut self, warps: &[WarpInfo], order: &mut Vec<WarpSlotId>);
    fn issued(&mut self, slot: WarpSlotId);
    /// Whether `order` reads [`WarpInfo::long_wait`]. When it does not, the SM passes
    /// `false` there and checks warps only as far down the order as it needs to find one
    /// that can issue, which gives the same issue as checking all of them first. Such a
    /// policy's `order` must also be a pure function of the warps and of state that only
    /// `issued` changes: the SM reuses an order until a warp issues or warps come or go.
    fn reads_long_wait(&self) -> bool {
        true
    }
    /// Whether `issued(slot)`, called next, leaves what `order` writes for the same warps
    /// unchanged (a greedy policy issuing its greedy warp again). Only a policy that does
    /// not read long waits is asked; the SM then keeps its order. `false` is always right.
    fn keeps_order(&self, _slot: WarpSlotId) -> bool {
        false
    }
    /// The next order after the `issued` just called, for the same warps, as a rotation of
    /// `order`, the one this policy wrote last, in which the warp that issued is at index
    /// `issued_at`: `Some(start)` when it is `order` read from index `start` on and wrapping
    /// around; `None` (always right) when it is not, and the SM asks `order` again. Only a
    /// policy that does not read long waits is asked. A round robin's next order is its
    /// last one from another start: no need to read the warps, nor to move them, nor to
    /// look for the warp (the SM knows where it found it).
    fn reorder(&mut self, _order: &[WarpSlotId], _issued_at: usize) -> Option<usize> {
        None
    }
}

/// Loose round robin.
#[derive(Clone, Debug, Default)]
pub struct Lrr {
    last: Option<WarpSlotId>,
}

impl WarpScheduler for Lrr {
    fn order(&mut self, warps: &[WarpInfo], order: &mut Vec<WarpSlotId>) {
        order.clear();
        let start = match self.last {
            Some(l) => warps.iter().position(|w| w.slot > l).unwrap_or(0),
            None => 0,
        };
        order.extend(warps[start..].iter().map(|w| w.slot));
        order.extend(warps[..start].iter().map(|w| w.slot));
    }

    fn issued(&mut self, slot: WarpSlotId) {
        self.last = Some(slot);
    }

    fn reads_long_wait(&self) -> bool {
        false
    }

    /// The rotation starts after the last warp that issued: the same warp again, the
    /// same rotation.
    fn keeps_order(&self, slot: WarpSlotId) -> bool {
        self.last == Some(slot)
    }

    /// The last order is the warps sorted by slot, rotated; the warp that issued is at
    /// `issued_at`, and the next order starts at its successor (the first warp with a
    /// larger slot, or, past the end, the smallest).
    fn reorder(&mut self, order: &[WarpSlotId], issued_at: usize) -> Option<usize> {
        debug_assert_eq!(order.get(issued_at).copied(), self.last, "the issued warp");
        if order.get(issued_at).copied() != self.last {
            // Not where the caller said: the order afresh (always right).
            return None;
        }
        Some(if issued_at + 1 == order.len() {
            0
        } else {
            issued_at + 1
        })
    }
}

/// Greedy then oldest.
#[derive(Clone, Debug, Default)]
pub struct Gto {
    last: Option<WarpSlotId>,
    /// The warps (slot, age) `order` was last given, and the same as (age, slot) sorted:
    /// the sort is redone only when the warps change (they come or go), not whenever a
    /// warp other than the greedy one issued.
    seen: Vec<(WarpSlotId, u64)>,
    by_age: Vec<(u64, WarpSlotId)>,
}

impl WarpScheduler for Gto {
    fn order(&mut self, warps: &[WarpInfo], order: &mut Vec<WarpSlotId>) {
        order.clear();
        let first = self.last.filter(|&l| warps.iter().any(|w| w.slot == l));
        order.extend(first);
        // Oldest first; slots break ties (the keys are distinct: one per slot).
        let same = self.seen.len() == warps.len()
            && self
                .seen
                .iter()
                .zip(warps)
                .all(|(&(slot, age), w)| (slot, age) == (w.slot, w.age));
        if !same {
            self.seen.clear();
            self.seen.extend(warps.iter().map(|w| (w.slot, w.age)));
            self.by_age.clear();
            self.by_age.extend(warps.iter().map(|w| (w.age, w.slot)));
            self.by_age.sort_unstable();
        }
        order.extend(
            self.by_age
                .iter()
                .map(|&(_, slot)| slot)
                .filter(|&slot| Some(slot) != first),
        );
    }

    fn issued(&mut self, slot: WarpSlotId) {
        self.last = Some(slot);
    }

    fn reads_long_wait(&self) -> bool {
        false
    }

    /// The greedy warp issuing again stays first; the rest is by age.
    fn keeps_order(&self, slot: WarpSlotId) -> bool {
        self.last == Some(slot)
    }
}

/// Two-level scheduling with an active set of `size` warps.
#[derive(Clone, Debug)]
pub struct TwoLevel {
    size: usize,
    active: Vec<WarpSlotId>,
    lrr: Lrr,
}

impl TwoLevel {
    pub fn new(size: u32) -> Self {
        TwoLevel {
            size: size.max(1) as usize,
            active: Vec::with_capacity(size.max(1) as usize),
            lrr: Lrr::default(),
        }
    }
}

impl WarpScheduler for TwoLevel {
    fn order(&mut self, warps: &[WarpInfo], order: &mut Vec<WarpSlotId>) {
        // Demote warps that left the SM or wait on memory.
        self.active.retain(|s| {
            warps
                .iter()
                .find(|w| w.slot == *s)
                .is_some_and(|w| !w.long_wait)
        });
        // Refill from the pending warps, oldest first.
        while self.active.len() < self.size {
            let next = warps
                .iter()
                .filter(|w| !w.long_wait && !self.active.contains(&w.slot))
                .min_by_key(|w| (w.age, w.slot));
            match next {
                Some(w) => self.active.push(w.slot),
                None => break,
            }
        }
        self.active.sort_unstable();
        order.clear();
        let start = match self.lrr.last {
            Some(l) => self.active.iter().position(|&s| s > l).unwrap_or(0),
            None => 0,
        };
        order.extend_from_slice(&self.active[start..]);
        order.extend_from_slice(&self.active[..start]);
    }

    fn issued(&mut self, slot: WarpSlotId) {
        self.lrr.issued(slot);
    }
}

/// Per-kernel issue quotas over any scheduler: SMK's warp-instruction quotas (Wang et al.,
/// HPCA 2016, as papers/lin-thesis §4.2 describes them: "periodically assigns each kernel a
/// fixed time quota in the warp scheduler"). Within an epoch a launch with a quota issues at
/// most that many warp instructions from this scheduler; once it has, its warps are left out
/// of the order while a launch with quota left (or with no quota) has warps here, and when
/// none has, a new epoch starts. Launches without a quota are not limited, and with no
/// quota set the wrapper passes every call straight through.
#[derive(Clone, Debug)]
pub struct Quota<S> {
    inner: S,
    /// Per launch with a quota: the quota and what it used this epoch.
    quotas: Vec<(LaunchId, u32, u32)>,
    /// The launch of each warp of the last order (for `issued`).
    launches: Vec<(WarpSlotId, LaunchId)>,
    eligible: Vec<WarpInfo>,
}

impl<S: WarpScheduler> Quota<S> {
    pub fn new(inner: S) -> Quota<S> {
        Quota {
            inner,
            quotas: Vec::new(),
            launches: Vec::new(),
            eligible: Vec::new(),
        }
    }

    /// Sets `launch`'s quota of warp instructions per epoch (`None`: unlimited).
    pub fn set(&mut self, launch: LaunchId, quota: Option<u32>) {
        self.quotas.retain(|q| q.0 != launch);
        if let Some(q) = quota {
            self.quotas.push((launch, q.max(1), 0));
        }
    }

    /// Whether a launch still may issue this epoch.
    fn open(&self, launch: LaunchId) -> bool {
        self.quotas
            .iter()
            .find(|q| q.0 == launch)
            .is_none_or(|q| q.2 < q.1)
    }
}

impl<S: WarpScheduler> WarpScheduler for Quota<S> {
    fn order(&mut self, warps: &[WarpInfo], order: &mut Vec<WarpSlotId>) {
        if self.quotas.is_empty() {
            return self.inner.order(warps, order);
        }
        self.launches.clear();
        self.launches
            .extend(warps.iter().map(|w| (w.slot, w.launch)));
        if !warps.iter().any(|w| self.open(w.launch)) {
            // Every launch here has used its quota: a new epoch.
            for q in &mut self.quotas {
                q.2 = 0;
            }
        }
        let mut eligible = std::mem::take(&mut self.eligible);
        eligible.clear();
        eligible.extend(warps.iter().filter(|w| self.open(w.launch)).copied());
        self.inner.order(&eligible, order);
        self.eligible = eligible;
    }

    fn issued(&mut self, slot: WarpSlotId) {
        if !self.quotas.is_empty() {
            if let Some(&(_, l)) = self.launches.iter().find(|w| w.0 == slot) {
                if let Some(q) = self.quotas.iter_mut().find(|q| q.0 == l) {
                    q.2 += 1;
                }
            }
        }
        self.inner.issued(slot);
    }

    fn reads_long_wait(&self) -> bool {
        self.inner.reads_long_wait()
    }

    /// An issue under a quota counts against it, which may change who is eligible.
    fn keeps_order(&self, slot: WarpSlotId) -> bool {
        self.quotas.is_empty() && self.inner.keeps_order(slot)
    }

    fn reorder(&mut self, order: &[WarpSlotId], issued_at: usize) -> Option<usize> {
        if self.quotas.is_empty() {
            self.inner.reorder(order, issued_at)
        } else {
            None
        }
    }
}

/// The configured policies, dispatched without a virtual call on the issue path.
#[derive(Clone, Debug)]
pub enum AnyScheduler {
    Lrr(Lrr),
    Gto(Gto),
    TwoLevel(TwoLevel),
}

impl AnyScheduler {
    /// A fresh scheduler for `policy`; `active` is the two-level active-set size.
    pub fn new(policy: SchedulerPolicy, active: u32) -> Self {
        match policy {
            SchedulerPolicy::Lrr => AnyScheduler::Lrr(Lrr::default()),
            SchedulerPolicy::Gto => AnyScheduler::Gto(Gto::default()),
            SchedulerPolicy::TwoLevel => AnyScheduler::TwoLevel(TwoLevel::new(active)),
        }
    }
}

impl WarpScheduler for AnyScheduler {
    fn order(&mut self, warps: &[WarpInfo], order: &mut Vec<WarpSlotId>) {
        match self {
            AnyScheduler::Lrr(s) => s.order(warps, order),
            AnyScheduler::Gto(s) => s.order(warps, order),
            AnyScheduler::TwoLevel(s) => s.order(warps, order),
        }
    }

    fn issued(&mut self, slot: WarpSlotId) {
        match self {
            AnyScheduler::Lrr(s) => s.issued(slot),
            AnyScheduler::Gto(s) => s.issued(slot),
            AnyScheduler::TwoLevel(s) => s.issued(slot),
        }
    }

    fn reads_long_wait(&self) -> bool {
        match self {
            AnyScheduler::Lrr(s) => s.reads_long_wait(),
            AnyScheduler::Gto(s) => s.reads_long_wait(),
            AnyScheduler::TwoLevel(s) => s.reads_long_wait(),
        }
    }

    fn keeps_order(&self, slot: WarpSlotId) -> bool {
        match self {
            AnyScheduler::Lrr(s) => s.keeps_order(slot),
            AnyScheduler::Gto(s) => s.keeps_order(slot),
            AnyScheduler::TwoLevel(s) => s.keeps_order(slot),
        }
    }

    fn reorder(&mut self, order: &[WarpSlotId], issued_at: usize) -> Option<usize> {
        match self {
            AnyScheduler::Lrr(s) => s.reorder(order, issued_at),
            AnyScheduler::Gto(s) => s.reorder(order, issued_at),
            AnyScheduler::TwoLevel(s) => s.reorder(order, issued_at),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(slots: &[u32]) -> Vec<WarpSlotId> {
        slots.iter().map(|&s| WarpSlotId(s)).collect()
    }

    fn warps(slots: &[(u32, u64, bool)]) -> Vec<WarpInfo> {
        slots
            .iter()
            .map(|&(slot, age, long_wait)| WarpInfo {
                slot: WarpSlotId(slot),
                age,
                long_wait,
                launch: LaunchId(0),
            })
            .collect()
    }

    proptest::proptest! {
        /// The SM keeps a policy's order and reads it from a new start when the policy can
        /// (a round robin): after any warp of the order issued, the order read from the
        /// start `reorder` gives must be the one the policy would write afresh. Under a
        /// quota it must not give one (the quota filters warps, and `issued` counts by the
        /// order's launches).
        #[test]
        fn a_reordered_order_is_the_fresh_one(
            slots in proptest::collection::btree_set(0u32..64, 1..24),
            before in proptest::option::of(0u32..64),
            pick in 0usize..24,
            quota in proptest::bool::ANY,
        ) {
            let w: Vec<WarpInfo> = slots.iter().map(|&s| warps(&[(s, u64::from(s), false)])[0]).collect();
            let issued = w[pick % w.len()].slot;
            let mut schedulers = [
                Quota::new(AnyScheduler::Lrr(Lrr::default())),
                Quota::new(AnyScheduler::Gto(Gto::default())),
                Quota::new(AnyScheduler::TwoLevel(TwoLevel::new(4))),
            ];
            for (k, s) in schedulers.iter_mut().enumerate() {
                if quota {
                    s.set(LaunchId(0), Some(1_000));
                }
                if let Some(b) = before {
                    s.issued(WarpSlotId(b));
                }
                let mut kept = Vec::new();
                s.order(&w, &mut kept);
                if !kept.contains(&issued) {
                    // Hidden by the policy (a two-level scheduler's pending warps): it
                    // cannot issue. A round robin hides none.
                    proptest::prop_assert!(k != 0);
                    continue;
                }
                s.issued(issued);
                let at = kept.iter().position(|&k| k == issued).expect("in the order");
                let updated = s.reorder(&kept, at);
                proptest::prop_assert_eq!(updated.is_some(), k == 0 && !quota);
                if let Some(start) = updated {
                    let rotated = [&kept[start..], &kept[..start]].concat();
                    let mut fresh = Vec::new();
                    s.order(&w, &mut fresh);
                    proptest::prop_assert_eq!(rotated, fresh);
                }
            }
        }
    }

    #[test]
    fn lrr_rotates_after_the_last_issued() {
        let w = warps(&[(0, 0, false), (2, 1, false), (4, 2, false)]);
        let mut s = Lrr::default();
        let mut o = Vec::new();
        s.order(&w, &mut o);
        assert_eq!(o, ids(&[0, 2, 4]));
        s.issued(WarpSlotId(2));
        s.order(&w, &mut o);
        assert_eq!(o, ids(&[4, 0, 2]));
        s.issued(WarpSlotId(4));
        s.order(&w, &mut o);
        assert_eq!(o, ids(&[0, 2, 4]));
    }

    #[test]
    fn gto_keeps_the_greedy_warp_then_oldest() {
        let w = warps(&[(0, 5, false), (2, 1, false), (4, 3, false)]);
        let mut s = Gto::default();
        let mut o = Vec::new();
        s.order(&w, &mut o);
        assert_eq!(o, ids(&[2, 4, 0]));
        s.issued(WarpSlotId(0));
        s.order(&w, &mut o);
        assert_eq!(o, ids(&[0, 2, 4]));
    }

    /// GTO keeps its warps sorted by age between calls: as warps come, go and are
    /// replaced (a slot reused by a younger warp), its orders stay those of a fresh GTO
    /// told the same greedy warp.
    #[test]
    fn gto_orders_stay_fresh_as_warps_change() {
        let sets = [
            warps(&[(0, 5, false), (2, 1, false), (4, 3, false)]),
            warps(&[(0, 5, false), (2, 1, false), (4, 3, false), (6, 0, false)]),
            warps(&[(0, 5, false), (4, 3, false), (6, 0, false)]),
            warps(&[(0, 5, false), (2, 9, false), (4, 3, false), (6, 0, false)]),
            warps(&[(0, 5, true), (2, 9, false), (4, 3, false), (6, 0, true)]),
        ];
        let mut kept = Gto::default();
        let (mut got, mut want) = (Vec::new(), Vec::new());
        for (k, w) in sets.iter().chain(sets.iter().rev()).enumerate() {
            let greedy = w[k % w.len()].slot;
            kept.issued(greedy);
            kept.order(w, &mut got);
            let mut fresh = Gto::default();
            fresh.issued(greedy);
            fresh.order(w, &mut want);
            assert_eq!(got, want, "step {k}");
        }
    }

    /// Launch 0 may issue 3 warp instructions an epoch, launch 1 one: in four issues the
    /// order leaves launch 0 out once it has used its three, then a new epoch starts.
    #[test]
    fn quotas_share_issue_by_epoch() {
        let w: Vec<WarpInfo> = [(0, 0), (1, 0), (2, 1)]
            .iter()
            .map(|&(slot, launch)| WarpInfo {
                slot: WarpSlotId(slot),
                age: u64::from(slot),
                long_wait: false,
                launch: LaunchId(launch),
            })
            .collect();
        let mut s = Quota::new(Gto::default());
        s.set(LaunchId(0), Some(3));
        s.set(LaunchId(1), Some(1));
        let mut issued = Vec::new();
        let mut o = Vec::new();
        for _ in 0..8 {
            s.order(&w, &mut o);
            let first = o[0];
            s.issued(first);
            issued.push(first.0);
        }
        // Greedy on slot 0 for launch 0's three, then launch 1's one; then a new epoch, in
        // which GTO stays greedy on slot 2 for launch 1's one, then launch 0's three.
        assert_eq!(issued, [0, 0, 0, 2, 2, 0, 0, 0]);
        // Without quotas, GTO stays on slot 0.
        let mut plain = Quota::new(Gto::default());
        plain.set(LaunchId(0), None);
        plain.order(&w, &mut o);
        plain.issued(o[0]);
        plain.order(&w, &mut o);
        assert_eq!(o[0], WarpSlotId(0));
    }

    /// `keeps_order` is a promise the SM relies on to skip `order`: whenever a policy
    /// makes it, the next order is the same. Issues drawn from a fixed sequence, over
    /// every policy that does not read long waits, with and without a quota.
    #[test]
    fn keeps_order_only_when_the_order_holds() {
        let w = warps(&[(1, 7, false), (3, 2, false), (4, 9, false), (6, 4, false)]);
        let picks = [3u32, 3, 1, 1, 1, 6, 4, 4, 3, 6, 6, 6, 1, 4];
        let mut policies: Vec<Quota<AnyScheduler>> = vec![
            Quota::new(AnyScheduler::Lrr(Lrr::default())),
            Quota::new(AnyScheduler::Gto(Gto::default())),
            Quota::new(AnyScheduler::Gto(Gto::default())),
        ];
        policies[2].set(LaunchId(0), Some(2));
        for p in &mut policies {
            let mut kept = 0;
            let (mut before, mut after) = (Vec::new(), Vec::new());
            for &k in &picks {
                p.order(&w, &mut before);
                let keeps = p.keeps_order(WarpSlotId(k));
                p.issued(WarpSlotId(k));
                p.order(&w, &mut after);
                if keeps {
                    assert_eq!(before, after, "{p:?} kept its order after issuing {k}");
                    kept += 1;
                }
            }
            // The promise is made where it can be (not under a quota).
            assert_eq!(kept > 0, p.quotas.is_empty(), "{p:?}");
        }
    }

    #[test]
    fn two_level_hides_pending_warps() {
        let w = warps(&[(0, 0, false), (1, 1, true), (2, 2, false), (3, 3, false)]);
        let mut s = TwoLevel::new(2);
        let mut o = Vec::new();
        s.order(&w, &mut o);
        assert_eq!(o, ids(&[0, 2]));
        let w = warps(&[(0, 0, true), (1, 1, false), (2, 2, false), (3, 3, false)]);
        s.issued(WarpSlotId(0));
        s.order(&w, &mut o);
        // Warp 0 waits on memory: the oldest ready pending warp (1) takes its place.
        assert_eq!(o, ids(&[1, 2]));
    }
}
