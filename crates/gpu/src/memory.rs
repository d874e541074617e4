//! Device memory: allocations with bounds, and the generic address space.
//!
//! Global allocations are placed by a bump allocator from [`GLOBAL_BASE`] with a guard gap
//! between them, so an access just past the end of a buffer lands in no allocation and is
//! reported rather than silently reading a neighbour. Addresses are never reused, which keeps
//! "use after free" detectable too.
//!
//! Generic addresses (PTX's flat address space) map onto windows: shared memory at
//! [`SHARED_WINDOW`], per-thread local memory at [`LOCAL_WINDOW`] and the kernel parameter
//! buffer at [`PARAM_WINDOW`], each 4 GiB; everything else is global. Constant variables live
//! in ordinary device allocations, so `cvta.const` is the identity, as `cvta.global` is.

/// First global address handed out (a null or small pointer never hits an allocation).
pub const GLOBAL_BASE: u64 = 0x0000_0001_0000_0000;
/// Generic window of the TB's shared memory.
pub const SHARED_WINDOW: u64 = 0x0000_7e00_0000_0000;
/// Generic window of the thread's local memory.
pub const LOCAL_WINDOW: u64 = 0x0000_7f00_0000_0000;
/// Generic window of the kernel parameter buffer.
pub const PARAM_WINDOW: u64 = 0x0000_7d00_0000_0000;
/// Size of each window.
pub const WINDOW_SIZE: u64 = 1 << 32;
/// Allocation granularity and alignment (as `cudaMalloc`).
pub const ALLOC_ALIGN: u64 = 256;
/// Unmapped bytes left after each allocation.
pub const GUARD_GAP: u64 = 4096;

/// Which part of the generic address space an address falls in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    Global(u64),
    Shared(u64),
    Local(u64),
    Param(u64),
}

/// Bytes of device memory one TB's local memory takes: `local_size` bytes per thread, for
/// every lane of its `warps` warps, rounded up to whole 4-byte words.
pub fn local_frame_bytes(local_size: u32, warps: u32) -> u64 {
    u64::from(local_size.div_ceil(4)) * 4 * 32 * u64::from(warps)
}

/// Device address of word `word` (4 bytes) of the local memory of lane `lane` of warp `warp`
/// of a TB whose local memory starts at `base`, with `frame_words` words per thread.
///
/// Local memory lives in device memory (so spills and context routines' `st.local` are real
/// memory traffic) and is interleaved as CUDA lays it out: consecutive 32-bit words of one
/// thread are 128 bytes apart and the 32 lanes of a warp share each 128-byte row, so a warp
/// reading one local variable touches one line.
#[inline]
pub fn local_word_address(base: u64, frame_words: u64, warp: u32, lane: u32, word: u64) -> u64 {
    base + ((u64::from(warp) * frame_words + word) * 32 + u64::from(lane)) * 4
}

/// Classifies a generic address.
#[inline]
pub fn window(addr: u64) -> Window {
    if addr.wrapping_sub(SHARED_WINDOW) < WINDOW_SIZE {
        Window::Shared(addr - SHARED_WINDOW)
    } else if addr.wrapping_sub(LOCAL_WINDOW) < WINDOW_SIZE {
        Window::Local(addr - LOCAL_WINDOW)
    } else if addr.wrapping_sub(PARAM_WINDOW) < WINDOW_SIZE {
        Window::Param(addr - PARAM_WINDOW)
    } else {
        Window::Global(addr)
    }
}

/// Why a global access failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GlobalFault {
    /// The address is in no live allocation.
    Unallocated,
    /// The access starts inside an allocation but runs past its end.
    OutOfBounds { base: u64, size: u64 },
    /// The allocation was freed.
    Freed { base: u64 },
}

#[derive(Clone, Debug)]
struct Allocation {
    base: u64,
    data: Vec<u8>,
    live: bool,
}

/// The device's global memory.
#[derive(Clone, Debug)]
pub struct DeviceMemory {
    /// Sorted by base (the bump allocator only grows).
    allocs: Vec<Allocation>,
    next: u64,
}

impl Default for DeviceMemory {
    fn default() -> Self {
        Self::new()
    }
}

impl DeviceMemory {
    pub fn new() -> Self {
        DeviceMemory {
            allocs: Vec::new(),
            next: GLOBAL_BASE,
        }
    }

    /// Allocates `size` zeroed bytes and returns the device address.
    pub fn alloc(&mut self, size: u64) -> u64 {
        let base = self.next;
        self.allocs.push(Allocation {
            base,
            data: vec![0; size as usize],
            live: true,
        });
        self.next = (base + size.max(1) + GUARD_GAP).div_ceil(ALLOC_ALIGN) * ALLOC_ALIGN;
        base
    }

    /// Frees the allocation starting at `base`; false if there is none.
    pub fn free(&mut self, base: u64) -> bool {
        match self.allocs.binary_search_by_key(&base, |a| a.base) {
            Ok(i) if self.allocs[i].live => {
                self.allocs[i].live = false;
                self.allocs[i].data = Vec::new();
                true
            }
            _ => false,
        }
    }

    /// Total bytes in live allocations.
    pub fn bytes_allocated(&self) -> u64 {
        self.allocs
            .iter()
            .filter(|a| a.live)
            .map(|a| a.data.len() as u64)
            .sum()
    }

    #[inline]
    fn find(&self, addr: u64, len: u64, hint: &mut usize) -> Result<(usize, usize), GlobalFault> {
        let idx = match self.allocs.get(*hint) {
            Some(a) if addr >= a.base && addr < a.base + a.data.len().max(1) as u64 => *hint,
            _ => {
                let i = self.allocs.partition_point(|a| a.base <= addr);
                if i == 0 {
                    return Err(GlobalFault::Unallocated);
                }
                i - 1
            }
        };
        let a = &self.allocs[idx];
        if !a.live {
            return Err(GlobalFault::Freed { base: a.base });
        }
        let off = addr - a.base;
        let size = a.data.len() as u64;
        if off >= size {
            return Err(GlobalFault::Unallocated);
        }
        if off + len > size {
            return Err(GlobalFault::OutOfBounds { base: a.base, size });
        }
        *hint = idx;
        Ok((idx, off as usize))
    }

    /// Reads `len` (≤ 8) bytes little-endian. `hint` caches the last allocation hit.
    #[inline]
    pub fn read(&self, addr: u64, len: u32, hint: &mut usize) -> Result<u64, GlobalFault> {
        let (i, off) = self.find(addr, len as u64, hint)?;
        Ok(read_le(&self.allocs[i].data[off..off + len as usize]))
    }

    /// Writes the low `len` (≤ 8) bytes of `value` little-endian.
    #[inline]
    pub fn write(
        &mut self,
        addr: u64,
        len: u32,
        value: u64,
        hint: &mut usize,
    ) -> Result<(), GlobalFault> {
        let (i, off) = self.find(addr, len as u64, hint)?;
        write_le(&mut self.allocs[i].data[off..off + len as usize], value);
        Ok(())
    }

    /// Copies bytes out of device memory (a host `memcpy` from the device).
    pub fn read_bytes(&self, addr: u64, len: u64) -> Result<&[u8], GlobalFault> {
        let (i, off) = self.find(addr, len, &mut 0)?;
        Ok(&self.allocs[i].data[off..off + len as usize])
    }

    /// Copies bytes into device memory (a host `memcpy` to the device).
    pub fn write_bytes(&mut self, addr: u64, data: &[u8]) -> Result<(), GlobalFault> {
        let (i, off) = self.find(addr, data.len() as u64, &mut 0)?;
        self.allocs[i].data[off..off + data.len()].copy_from_slice(data);
        Ok(())
    }

    /// Whether `addr` lies in a live allocation (`isspacep.global`).
    pub fn is_mapped(&self, addr: u64) -> bool {
        self.find(addr, 1, &mut 0).is_ok()
    }
}

/// Little-endian load of up to 8 bytes.
#[inline]
pub fn read_le(bytes: &[u8]) -> u64 {
    // The common widths as fixed-size reads: a variable-length copy is a `memcpy` call.
    match *bytes {
        [a] => u64::from(a),
        [a, b] => u64::from(u16::from_le_bytes([a, b])),
        [a, b, c, d] => u64::from(u32::from_le_bytes([a, b, c, d])),
        [a, b, c, d, e, f, g, h] => u64::from_le_bytes([a, b, c, d, e, f, g, h]),
        _ => {
            let mut b = [0u8; 8];
            b[..bytes.len()].copy_from_slice(bytes);
            u64::from_le_bytes(b)
        }
    }
}

/// Little-endian store of the low `bytes.len()` bytes of `v`.
#[inline]
pub fn write_le(bytes: &mut [u8], v: u64) {
    match bytes.len() {
        1 => bytes[0] = v as u8,
        2 => bytes.copy_from_slice(&(v as u16).to_le_bytes()),
        4 => bytes.copy_from_slice(&(v as u32).to_le_bytes()),
        8 => bytes.copy_from_slice(&v.to_le_bytes()),
        n => bytes.copy_from_slice(&v.to_le_bytes()[..n]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_bounded_and_separated() {
        let mut m = DeviceMemory::new();
        let a = m.alloc(16);
        let b = m.alloc(8);
        assert_eq!(a % ALLOC_ALIGN, 0);
        assert!(b >= a + 16 + GUARD_GAP);
        let mut h = 0;
        m.write(a + 12, 4, 0xdead_beef, &mut h).unwrap();
        assert_eq!(m.read(a + 12, 4, &mut h).unwrap(), 0xdead_beef);
        assert_eq!(
            m.read(a + 14, 4, &mut h),
            Err(GlobalFault::OutOfBounds { base: a, size: 16 })
        );
        assert_eq!(m.read(a + 16, 4, &mut h), Err(GlobalFault::Unallocated));
        assert_eq!(m.read(0, 4, &mut h), Err(GlobalFault::Unallocated));
        assert!(m.free(a));
        assert_eq!(m.read(a, 4, &mut h), Err(GlobalFault::Freed { base: a }));
        assert!(!m.free(a));
        assert_eq!(m.read(b, 8, &mut h), Ok(0));
    }

    #[test]
    fn windows_classify_generic_addresses() {
        assert_eq!(window(SHARED_WINDOW + 8), Window::Shared(8));
        assert_eq!(window(LOCAL_WINDOW), Window::Local(0));
        assert_eq!(window(PARAM_WINDOW + 4), Window::Param(4));
        assert_eq!(window(GLOBAL_BASE), Window::Global(GLOBAL_BASE));
    }
}
