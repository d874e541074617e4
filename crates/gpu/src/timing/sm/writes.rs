//! Global writes made visible at the end of the cycle (ARCHITECTURE.md, "Memory
//! visibility"; issue "Parallel machine", item 2).
//!
//! During a cycle every SM reads device memory as it was when the cycle began: its
//! instructions' global and local stores and global atomics are logged here, in issue order,
//! and the machine applies every SM's log after all SMs have issued, SM by SM in index
//! order ([`super::Sm::commit`]). An atomic is performed then, and its old value is written
//! to its destination register. So what an instruction reads, and what an atomic returns,
//! follow from that order and never from the order in which SMs were stepped, on any
//! number of threads.
//!
//! Against applying writes at issue (before this rule) only a read in the same cycle of a
//! location another warp wrote in that cycle changes: such a read races with the write
//! under PTX's memory model anyway. A warp issues at most one instruction per cycle, so its
//! own program order is kept; an atomic's old value is the same as before, because SMs
//! used to issue in index order too.

use crate::error::ExecError;
use crate::memory::{AtomicRmw, DeviceMemory, GlobalAccess, GlobalFault};
use crate::timing::ids::WarpSlotId;

/// A global write waiting for the end of the cycle.
#[derive(Clone, Copy, Debug)]
enum Deferred {
    Store {
        addr: u64,
        len: u32,
        value: u64,
        slot: WarpSlotId,
    },
    /// A whole warp's elements side by side: `bytes[start..start + len]` of the log.
    Bytes {
        addr: u64,
        start: u32,
        len: u32,
        slot: WarpSlotId,
    },
    Atomic {
        rmw: AtomicRmw,
        slot: WarpSlotId,
    },
}

/// One SM's global writes of the cycle, in issue order.
#[derive(Debug, Default)]
pub(super) struct WriteLog {
    entries: Vec<Deferred>,
    /// The data of the `Bytes` entries.
    bytes: Vec<u8>,
}

impl WriteLog {
    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Applies every write to `mem` in order; each atomic that returns a value gives it to
    /// `set(slot, dest, old)`.
    pub(super) fn apply(
        &mut self,
        mem: &mut DeviceMemory,
        mut set: impl FnMut(WarpSlotId, u32, u64),
    ) -> Result<(), (WarpSlotId, GlobalFault)> {
        let mut hint = 0;
        let bytes = &self.bytes;
        // The log is emptied whatever happens (a refusal ends the run, the rest dropped).
        let applied = self.entries.drain(..).try_for_each(|d| match d {
            Deferred::Store {
                addr,
                len,
                value,
                slot,
            } => mem
                .write(addr, len, value, &mut hint)
                .map_err(|f| (slot, f)),
            Deferred::Bytes {
                addr,
                start,
                len,
                slot,
            } => {
                let data = &bytes[start as usize..(start + len) as usize];
                mem.write_span(addr, data, &mut hint).map_err(|f| (slot, f))
            }
            Deferred::Atomic { rmw, slot } => {
                let old = mem.rmw(rmw, &mut hint).map_err(|f| (slot, f))?;
                if let Some(dest) = rmw.dest {
                    set(slot, dest, old);
                }
                Ok(())
            }
        });
        self.bytes.clear();
        applied
    }
}

/// What one warp's instruction sees of global memory on the timed SM: reads of the memory
/// as the cycle began, writes logged for the end of the cycle. A write the memory would
/// refuse is a fault at once, as it was when writes were applied at issue.
pub(super) struct CycleView<'a> {
    pub base: &'a DeviceMemory,
    pub log: &'a mut WriteLog,
    pub slot: WarpSlotId,
}

impl GlobalAccess for CycleView<'_> {
    #[inline]
    fn device(&self) -> &DeviceMemory {
        self.base
    }

    #[inline]
    fn store(
        &mut self,
        addr: u64,
        len: u32,
        value: u64,
        hint: &mut usize,
    ) -> Result<(), GlobalFault> {
        // Reads and writes are checked alike (`DeviceMemory::find`, or the page rule).
        self.base.read(addr, len, hint)?;
        self.log.entries.push(Deferred::Store {
            addr,
            len,
            value,
            slot: self.slot,
        });
        Ok(())
    }

    #[inline]
    fn store_in_span(&mut self, addr: u64, len: u32, value: u64, hint: &mut usize) {
        debug_assert!(
            self.base.read(addr, len, hint).is_ok(),
            "a store in a checked span"
        );
        self.log.entries.push(Deferred::Store {
            addr,
            len,
            value,
            slot: self.slot,
        });
    }

    #[inline]
    fn store_bytes_in_span(&mut self, addr: u64, bytes: &[u8], hint: &mut usize) {
        debug_assert!(
            self.base.span(addr, bytes.len() as u64, hint).is_some(),
            "a store in a checked span"
        );
        self.log.entries.push(Deferred::Bytes {
            addr,
            start: self.log.bytes.len() as u32,
            len: bytes.len() as u32,
            slot: self.slot,
        });
        self.log.bytes.extend_from_slice(bytes);
    }

    #[inline]
    fn atomic(&mut self, rmw: AtomicRmw, hint: &mut usize) -> Result<Option<u64>, GlobalFault> {
        self.base.read(rmw.addr, rmw.ty.size(), hint)?;
        self.log.entries.push(Deferred::Atomic {
            rmw,
            slot: self.slot,
        });
        Ok(None)
    }
}

/// The error of a logged write the memory refused at the end of the cycle (it was checked
/// at issue, so this is a bug).
pub(super) fn refused(kernel: &str, fault: GlobalFault) -> ExecError {
    ExecError::Internal {
        kernel: kernel.into(),
        what: format!(
            "a global write checked at issue was refused at the end of the cycle: {fault:?}"
        ),
    }
}
