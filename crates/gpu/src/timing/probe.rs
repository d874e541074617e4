//! Observers of the machine (shared/STYLE.md, after Ramulator 2: plug-ins whose hooks do
//! nothing by default). A probe is told of every issued warp instruction, every memory
//! access the memory system accepts from an SM, and every event the machine reports (each
//! acknowledgement of the control protocol included), in the order they happen. It only
//! reads: it cannot change the run, so a run with a probe attached gives the same results
//! as one without. With none attached the machine pays one branch per hook.

use memsys::MemAccess;

use super::ids::{LaunchId, SmId, WarpSlotId};
use super::machine::Event;

/// A warp instruction as it issues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Issue {
    pub cycle: u64,
    pub sm: SmId,
    pub launch: LaunchId,
    pub warp: WarpSlotId,
    /// The PC of the timed kernel it executes.
    pub pc: u32,
    /// The lanes it runs for (the active mask of its SIMT stack entry).
    pub lanes: u32,
}

/// An observer of the machine.
pub trait Probe {
    /// A warp instruction issued.
    fn on_issue(&mut self, _issue: &Issue) {}
    /// The memory system accepted `access` (a warp's access, or a part of a split one, or a
    /// chunk of a context transfer) from `sm` at `cycle`.
    fn on_memory_request(&mut self, _sm: SmId, _access: &MemAccess, _cycle: u64) {}
    /// The machine reported `event`.
    fn on_event(&mut self, _event: &Event) {}
}

/// The probe a step of the machine reports to, if any.
pub struct Watch<'a>(pub Option<&'a mut (dyn Probe + 'static)>);

impl Watch<'_> {
    #[inline]
    pub(super) fn issue(&mut self, issue: impl FnOnce() -> Issue) {
        if let Some(p) = self.0.as_deref_mut() {
            p.on_issue(&issue());
        }
    }

    #[inline]
    pub(super) fn memory(&mut self, sm: SmId, access: &MemAccess, cycle: u64) {
        if let Some(p) = self.0.as_deref_mut() {
            p.on_memory_request(sm, access, cycle);
        }
    }
}
