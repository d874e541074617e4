//! Typed indices of the timing model (STYLE.md: every entity has a typed `u32` id, printed
//! with its short name so traces and errors read naturally).

use std::fmt;

use serde::{Deserialize, Serialize};

kir::define_id!(
    /// A streaming multiprocessor of the machine.
    #[derive(Serialize, Deserialize)]
    #[serde(transparent)]
    SmId,
    "sm"
);
kir::define_id!(
    /// A launch submitted to a [`super::Machine`], numbered in submission order for the
    /// machine's whole life.
    #[derive(Serialize, Deserialize)]
    #[serde(transparent)]
    LaunchId,
    "launch"
);
kir::define_id!(
    /// A TB slot of one SM.
    #[derive(Serialize, Deserialize)]
    #[serde(transparent)]
    TbSlotId,
    "tbslot"
);
kir::define_id!(
    /// A warp slot of one SM (the warp's place in the register file and the schedulers).
    #[derive(Serialize, Deserialize)]
    #[serde(transparent)]
    WarpSlotId,
    "w"
);

kir::define_id!(
    /// Resources an SM keeps for a TB that is not resident: its context is being saved, or
    /// is about to be restored.
    #[derive(Serialize, Deserialize)]
    #[serde(transparent)]
    HoldId,
    "hold"
);
kir::define_id!(
    /// A context transfer (a save or a restore) on one SM.
    #[derive(Serialize, Deserialize)]
    #[serde(transparent)]
    TransferId,
    "xfer"
);

/// One TB of one launch: the launch and the TB's linear index in its grid (x fastest).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
pub struct TbRef {
    pub launch: LaunchId,
    pub index: u64,
}

impl fmt::Display for TbRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.tb{}", self.launch, self.index)
    }
}

kir::define_id!(
    /// A checkpoint of a TB taken on one SM ([`super::Request::Checkpoint`]), numbered per SM.
    #[derive(Serialize, Deserialize)]
    #[serde(transparent)]
    CheckpointId,
    "ckpt"
);
kir::define_id!(
    /// A memory access in flight from one SM (the tag the memory system returns with its
    /// completion).
    PendingId,
    "acc"
);
