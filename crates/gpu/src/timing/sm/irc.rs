//! Issue rate controllers (papers/lin-thesis §4.5.1, CCBP): per launch on this SM, the
//! requests its accesses may send towards the L2 per [`IRC_WINDOW`] core cycles
//! ([`KernelLimits::noc_quota`](crate::timing::KernelLimits)).
//!
//! The thesis places the controller at the L1 D-cache's miss queue, so that L1 hits, which
//! use no interconnect bandwidth, are not slowed. Here it gates the load-store unit's offer
//! of an access, and charges the access what the memory system reports it sent
//! (`memsys::MemorySystem::noc_requests`: its misses, stores and atomics, not its hits).
//! A token bucket: each window adds the quota (at most one quota is held), an access is
//! offered while its launch holds a token, and what it sent is charged after it was
//! accepted. One access may overdraw (a warp's access is offered whole); the debt delays
//! the next, so over any run of windows a launch sends at most its quota a window plus one
//! access. A refused access waits in the unit as one the memory system refused does.

use crate::timing::ids::LaunchId;
use crate::timing::IRC_WINDOW;

/// The issue rate controllers of one SM, one per launch with a quota.
#[derive(Clone, Debug, Default)]
pub(super) struct IssueRate {
    entries: Vec<(LaunchId, Bucket)>,
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    quota: u32,
    /// Requests it may still send (negative: what it overdrew).
    tokens: i64,
    /// The window (`now / IRC_WINDOW`) `tokens` was last brought up to.
    window: u64,
}

impl IssueRate {
    /// Sets `launch`'s quota (`None`: not limited); a new quota starts with a full window.
    pub fn set(&mut self, launch: LaunchId, quota: Option<u32>) {
        let at = self.entries.iter().position(|(l, _)| *l == launch);
        match (quota, at) {
            (None, Some(i)) => {
                self.entries.swap_remove(i);
            }
            (None, None) => {}
            (Some(q), Some(i)) if self.entries[i].1.quota == q => {}
            (Some(q), i) => {
                let b = Bucket {
                    quota: q,
                    tokens: i64::from(q),
                    window: 0,
                };
                match i {
                    Some(i) => self.entries[i].1 = b,
                    None => self.entries.push((launch, b)),
                }
            }
        }
    }

    /// Whether `launch` may offer an access at core cycle `now`.
    #[inline]
    pub fn admits(&mut self, launch: LaunchId, now: u64) -> bool {
        if self.entries.is_empty() {
            return true;
        }
        let Some((_, b)) = self.entries.iter_mut().find(|(l, _)| *l == launch) else {
            return true;
        };
        let window = now / IRC_WINDOW;
        if window > b.window {
            // Each window adds the quota; at most one quota is held.
            let q = i64::from(b.quota);
            let elapsed = i64::try_from(window - b.window).unwrap_or(i64::MAX);
            b.tokens = b.tokens.saturating_add(q.saturating_mul(elapsed)).min(q);
            b.window = window;
        }
        b.tokens > 0
    }

    /// Charges `launch` the `requests` an accepted access sent towards the L2.
    #[inline]
    pub fn charge(&mut self, launch: LaunchId, requests: u64) {
        if let Some((_, b)) = self.entries.iter_mut().find(|(l, _)| *l == launch) {
            b.tokens = b
                .tokens
                .saturating_sub(i64::try_from(requests).unwrap_or(i64::MAX));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launch_sends_its_quota_a_window_and_pays_back_what_it_overdrew() {
        let (a, b) = (LaunchId(0), LaunchId(1));
        let mut irc = IssueRate::default();
        irc.set(a, Some(4));
        // Three accesses of two requests each in window 0: the third overdraws by 2.
        for _ in 0..2 {
            assert!(irc.admits(a, 10));
            irc.charge(a, 2);
        }
        assert!(!irc.admits(a, 10), "the quota is spent");
        assert!(irc.admits(b, 10), "another launch is not limited");
        // Window 1 refills the bucket to its quota, 4; an access of 6 overdraws it by 2.
        assert!(irc.admits(a, IRC_WINDOW));
        irc.charge(a, 6);
        // Overdrawn by 2: window 2 brings it to 2, so one more access.
        assert!(!irc.admits(a, IRC_WINDOW + 199));
        assert!(irc.admits(a, 2 * IRC_WINDOW));
        // Idle windows add at most one quota.
        irc.charge(a, 2);
        assert!(irc.admits(a, 100 * IRC_WINDOW));
        irc.charge(a, 4);
        assert!(!irc.admits(a, 100 * IRC_WINDOW));
        // Lifted: no limit.
        irc.set(a, None);
        assert!(irc.admits(a, 100 * IRC_WINDOW));
    }
}
