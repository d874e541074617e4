//! Typed indices of the timing model (STYLE.md: every entity has a typed `u32` id, printed
//! with its short name so traces and errors read naturally).

use std::fmt;

use kir::Id;
use serde::{Deserialize, Serialize};

macro_rules! timing_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(
            Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub u32);

        impl Id for $name {
            #[inline]
            fn new(index: usize) -> Self {
                $name(index as u32)
            }
            #[inline]
            fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

timing_id!(
    /// A streaming multiprocessor of the machine.
    SmId,
    "sm"
);
timing_id!(
    /// A launch submitted to a [`super::Machine`], numbered in submission order for the
    /// machine's whole life.
    LaunchId,
    "launch"
);
timing_id!(
    /// A TB slot of one SM.
    TbSlotId,
    "tbslot"
);
timing_id!(
    /// A warp slot of one SM (the warp's place in the register file and the schedulers).
    WarpSlotId,
    "w"
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
