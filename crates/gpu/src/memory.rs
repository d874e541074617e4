//! Device memory: allocations with bounds, and the generic address space.
//!
//! Global allocations are placed by a bump allocator from [`GLOBAL_BASE`] with a guard gap
//! between them, so an access just past the end of a buffer lands in no allocation and is
//! reported rather than silently reading a neighbour. Addresses are never reused, which keeps
//! "use after free" detectable too.
//!
//! How strictly global accesses are checked is the memory's [`MemoryCheck`]: by default
//! every access must lie inside one live allocation, and a fault names the nearest
//! allocation and the distance from it; [`MemoryCheck::Page`] accepts, as hardware does, any
//! access inside a page that some allocation maps (the guard gaps included), which real
//! programs that read a few elements outside their buffers rely on.
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
/// The page size of [`MemoryCheck::Page`]: 2 MiB, the page in which NVIDIA's driver maps
/// `cudaMalloc` memory on Pascal and later GPUs (small allocations share one).
pub const PAGE_BYTES: u64 = 2 << 20;

/// How strictly global accesses are checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MemoryCheck {
    /// Every access lies inside one live allocation; anything else faults, naming the
    /// nearest allocation. Finds the bugs a real GPU hides; the default.
    #[default]
    Strict,
    /// As a GPU does: an access inside a page ([`PAGE_BYTES`]) that a live allocation
    /// overlaps succeeds, reading and writing the bytes there (zero until written); one that
    /// touches a page no allocation maps faults.
    Page,
}

/// The live allocation nearest to a faulting address, and where the address lies from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nearest {
    pub base: u64,
    pub size: u64,
    /// Bytes from the allocation to the address: negative before its start, otherwise past
    /// its end (0: the first byte after it).
    pub offset: i64,
}

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
    /// The address is in no live allocation ([`MemoryCheck::Strict`]); the fault's report
    /// names the nearest one ([`DeviceMemory::nearest`]).
    Unallocated,
    /// The access touches a page no live allocation maps ([`MemoryCheck::Page`]).
    Unmapped,
    /// The access starts inside an allocation but runs past its end.
    OutOfBounds { base: u64, size: u64 },
    /// The allocation was freed.
    Freed { base: u64 },
}

#[derive(Clone, Debug)]
struct Allocation {
    base: u64,
    /// Bytes allocated (kept when freed, for naming the nearest allocation).
    size: u64,
    data: Vec<u8>,
    live: bool,
}

/// The device's global memory.
#[derive(Clone, Debug)]
pub struct DeviceMemory {
    /// Sorted by base (the bump allocator only grows).
    allocs: Vec<Allocation>,
    next: u64,
    check: MemoryCheck,
    /// [`MemoryCheck::Page`]: bytes of mapped pages outside every allocation that have been
    /// written, a page at a time (page number → its bytes).
    stray: std::collections::HashMap<u64, Vec<u8>>,
    /// Texture objects; handle `k + 1` names `textures[k]` (0 is no texture, as in CUDA).
    textures: Vec<TextureDesc>,
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
            check: MemoryCheck::Strict,
            stray: std::collections::HashMap::new(),
            textures: Vec::new(),
        }
    }

    /// Registers a texture object over texels already in device memory and returns its
    /// handle (`cudaCreateTextureObject`).
    pub fn create_texture(&mut self, desc: TextureDesc) -> Result<u64, TextureError> {
        desc.validate()?;
        if self.read_bytes(desc.base, desc.bytes()).is_err() {
            return Err(TextureError {
                field: "base",
                what: format!(
                    "{} bytes of texels at {:#x} are not inside one allocation",
                    desc.bytes(),
                    desc.base
                ),
            });
        }
        self.textures.push(desc);
        Ok(self.textures.len() as u64)
    }

    /// The texture object `handle` names.
    pub fn texture(&self, handle: u64) -> Option<&TextureDesc> {
        crate::texture::by_handle(&self.textures, handle)
    }

    /// Every texture object, by handle minus one.
    pub fn textures(&self) -> &[TextureDesc] {
        &self.textures
    }

    /// How accesses are checked from now on (placement does not change with it).
    pub fn set_check(&mut self, check: MemoryCheck) {
        self.check = check;
    }

    pub fn check(&self) -> MemoryCheck {
        self.check
    }

    /// Allocates `size` zeroed bytes and returns the device address.
    pub fn alloc(&mut self, size: u64) -> u64 {
        let base = self.next;
        self.allocs.push(Allocation {
            base,
            size,
            data: vec![0; size as usize],
            live: true,
        });
        self.next = (base + size.max(1) + GUARD_GAP).div_ceil(ALLOC_ALIGN) * ALLOC_ALIGN;
        base
    }

    /// [`DeviceMemory::alloc`] starting at a multiple of `align` (a power of two, at least
    /// [`ALLOC_ALIGN`]; smaller ones are raised to it).
    pub fn alloc_aligned(&mut self, size: u64, align: u64) -> u64 {
        let align = align.max(ALLOC_ALIGN).next_power_of_two();
        self.next = self.next.div_ceil(align) * align;
        self.alloc(size)
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

    /// The bytes `addr..addr + len` when they lie in one live allocation (what [`read`]
    /// would read without a fault, whatever the check mode), else `None`. `hint` caches the
    /// last allocation hit, as for [`read`].
    ///
    /// [`read`]: DeviceMemory::read
    #[inline]
    pub fn span(&self, addr: u64, len: u64, hint: &mut usize) -> Option<&[u8]> {
        let (i, off) = self.find(addr, len, hint).ok()?;
        Some(&self.allocs[i].data[off..off + len as usize])
    }

    /// Reads `len` (≤ 8) bytes little-endian. `hint` caches the last allocation hit.
    #[inline]
    pub fn read(&self, addr: u64, len: u32, hint: &mut usize) -> Result<u64, GlobalFault> {
        match self.find(addr, len as u64, hint) {
            Ok((i, off)) => Ok(read_le(&self.allocs[i].data[off..off + len as usize])),
            Err(fault) => self.read_paged(addr, len, fault),
        }
    }

    /// The access `find` refused: under [`MemoryCheck::Page`] done byte by byte when every
    /// byte lies in a mapped page; otherwise the fault, with the nearest allocation named.
    #[cold]
    fn read_paged(&self, addr: u64, len: u32, fault: GlobalFault) -> Result<u64, GlobalFault> {
        self.paged_fault(addr, len, fault)?;
        let mut bytes = [0u8; 8];
        for (k, b) in bytes.iter_mut().take(len as usize).enumerate() {
            *b = self.byte(addr + k as u64);
        }
        Ok(read_le(&bytes[..len as usize]))
    }

    /// `Ok` when the refused access may go ahead byte by byte (page mode, every byte in a
    /// mapped page), else the fault to report.
    fn paged_fault(&self, addr: u64, len: u32, fault: GlobalFault) -> Result<(), GlobalFault> {
        let end = addr.saturating_add(u64::from(len));
        let mapped = |a: u64| self.page_mapped(a / PAGE_BYTES);
        match fault {
            GlobalFault::Unallocated | GlobalFault::OutOfBounds { .. }
                if self.check == MemoryCheck::Page =>
            {
                // An access is at most 8 bytes: its first and last byte name its pages.
                if mapped(addr) && mapped(end - 1) {
                    Ok(())
                } else {
                    Err(GlobalFault::Unmapped)
                }
            }
            f => Err(f),
        }
    }

    /// Whether a live allocation overlaps page `page`.
    fn page_mapped(&self, page: u64) -> bool {
        let (start, end) = (page * PAGE_BYTES, (page + 1) * PAGE_BYTES);
        // Allocations are sorted and disjoint: look back from the last one starting in or
        // before the page while they could still reach into it.
        let i = self.allocs.partition_point(|a| a.base < end);
        self.allocs[..i]
            .iter()
            .rev()
            .take_while(|a| a.base + a.size.max(1) > start)
            .any(|a| a.live && a.base + a.size.max(1) > start)
    }

    /// The byte at `addr` under [`MemoryCheck::Page`]: an allocation's, else a stray one.
    fn byte(&self, addr: u64) -> u8 {
        match self.find(addr, 1, &mut 0) {
            Ok((i, off)) => self.allocs[i].data[off],
            Err(_) => self
                .stray
                .get(&(addr / PAGE_BYTES))
                .map_or(0, |p| p[(addr % PAGE_BYTES) as usize]),
        }
    }

    /// The live allocation nearest to `addr` (for fault messages).
    pub fn nearest(&self, addr: u64) -> Option<Nearest> {
        self.allocs
            .iter()
            .filter(|a| a.live)
            .map(|a| {
                let offset = if addr < a.base {
                    -((a.base - addr).min(i64::MAX as u64) as i64)
                } else {
                    (addr - (a.base + a.size)).min(i64::MAX as u64) as i64
                };
                Nearest {
                    base: a.base,
                    size: a.size,
                    offset,
                }
            })
            .min_by_key(|n| n.offset.unsigned_abs())
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
        // The allocation `hint` names holding every byte, live: what `find` answers first.
        if let Some(a) = self.allocs.get_mut(*hint) {
            let off = addr.wrapping_sub(a.base);
            if a.live && off < a.data.len() as u64 {
                if let Some(bytes) = a.data.get_mut(off as usize..off as usize + len as usize) {
                    write_le(bytes, value);
                    return Ok(());
                }
            }
        }
        match self.find(addr, len as u64, hint) {
            Ok((i, off)) => {
                write_le(&mut self.allocs[i].data[off..off + len as usize], value);
                Ok(())
            }
            Err(fault) => self.write_paged(addr, len, value, fault),
        }
    }

    /// [`DeviceMemory::write`]'s refused access, as [`DeviceMemory::read_paged`].
    #[cold]
    fn write_paged(
        &mut self,
        addr: u64,
        len: u32,
        value: u64,
        fault: GlobalFault,
    ) -> Result<(), GlobalFault> {
        self.paged_fault(addr, len, fault)?;
        for (k, b) in value.to_le_bytes().iter().take(len as usize).enumerate() {
            let a = addr + k as u64;
            match self.find(a, 1, &mut 0) {
                Ok((i, off)) => self.allocs[i].data[off] = *b,
                Err(_) => {
                    let page = self
                        .stray
                        .entry(a / PAGE_BYTES)
                        .or_insert_with(|| vec![0; PAGE_BYTES as usize]);
                    page[(a % PAGE_BYTES) as usize] = *b;
                }
            }
        }
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

    /// Writes `data` at `addr`, all of it in one live allocation (else the fault, nothing
    /// written); `hint` caches the allocation, as for [`DeviceMemory::write`].
    #[inline]
    pub fn write_span(
        &mut self,
        addr: u64,
        data: &[u8],
        hint: &mut usize,
    ) -> Result<(), GlobalFault> {
        let (i, off) = self.find(addr, data.len() as u64, hint)?;
        self.allocs[i].data[off..off + data.len()].copy_from_slice(data);
        Ok(())
    }

    /// Whether `addr` lies in a live allocation (`isspacep.global`).
    pub fn is_mapped(&self, addr: u64) -> bool {
        self.find(addr, 1, &mut 0).is_ok()
    }
}

/// A global read-modify-write of one lane (`atom`/`red` on global memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicRmw {
    /// Global address, aligned to the type's size (the executor checked it).
    pub addr: u64,
    pub op: kir::inst::AtomOp,
    pub ty: kir::inst::Ty,
    /// The operand, and the CAS operand (0 otherwise).
    pub b: u64,
    pub c: u64,
    /// Where the old value goes: the index into the warp's `regs` (`reg × 32 + lane`), for
    /// `atom`; `None` for `red`.
    pub dest: Option<u32>,
}

/// Global memory as an executing instruction sees it: reads from [`GlobalAccess::device`],
/// writes through the two methods below. [`DeviceMemory`] applies every write at once (the
/// functional core). The timed machine's view applies them at the end of the cycle, in SM
/// order (ARCHITECTURE.md, "Memory visibility"), so SMs stepped on several threads see the
/// same memory.
pub trait GlobalAccess {
    /// The memory reads see.
    fn device(&self) -> &DeviceMemory;
    /// Writes the low `len` (≤ 8) bytes of `value` at `addr` (little-endian). An access the
    /// memory refuses is a fault now, whenever the write takes effect.
    fn store(
        &mut self,
        addr: u64,
        len: u32,
        value: u64,
        hint: &mut usize,
    ) -> Result<(), GlobalFault>;
    /// [`GlobalAccess::store`] of bytes the caller found in one live allocation of
    /// [`GlobalAccess::device`] ([`DeviceMemory::span`]), which cannot fault: a whole-warp
    /// store checks its lanes' span once. The default checks again.
    #[inline]
    fn store_in_span(&mut self, addr: u64, len: u32, value: u64, hint: &mut usize) {
        self.store(addr, len, value, hint)
            .expect("bytes in one live allocation");
    }
    /// [`GlobalAccess::store_in_span`] of `bytes` at `addr` at once: a whole warp's
    /// elements side by side, stored as the lanes' stores one after another would leave
    /// them (they do not overlap).
    fn store_bytes_in_span(&mut self, addr: u64, bytes: &[u8], hint: &mut usize);
    /// Performs `rmw`: `Some(old)` when it took effect now, `None` when it takes effect later
    /// (the old value is then written to `rmw.dest` when it does).
    fn atomic(&mut self, rmw: AtomicRmw, hint: &mut usize) -> Result<Option<u64>, GlobalFault>;
}

impl GlobalAccess for DeviceMemory {
    #[inline]
    fn device(&self) -> &DeviceMemory {
        self
    }

    #[inline]
    fn store(
        &mut self,
        addr: u64,
        len: u32,
        value: u64,
        hint: &mut usize,
    ) -> Result<(), GlobalFault> {
        self.write(addr, len, value, hint)
    }

    #[inline]
    fn store_bytes_in_span(&mut self, addr: u64, bytes: &[u8], hint: &mut usize) {
        self.write_span(addr, bytes, hint)
            .expect("bytes in one live allocation");
    }

    #[inline]
    fn atomic(&mut self, rmw: AtomicRmw, hint: &mut usize) -> Result<Option<u64>, GlobalFault> {
        self.rmw(rmw, hint).map(Some)
    }
}

impl DeviceMemory {
    /// Performs `rmw` now and returns the old value (masked to the type).
    pub fn rmw(&mut self, rmw: AtomicRmw, hint: &mut usize) -> Result<u64, GlobalFault> {
        let size = rmw.ty.size();
        let old = self.read(rmw.addr, size, hint)?;
        let new = crate::alu::atom(rmw.op, rmw.ty, old, rmw.b, rmw.c);
        self.write(rmw.addr, size, new, hint)?;
        Ok(old & rmw.ty.mask())
    }
}

use crate::texture::{TextureDesc, TextureError};

pub use crate::bytes::read_le;

/// Little-endian store of the low `bytes.len()` bytes of `v`.
#[inline]
pub fn write_le(bytes: &mut [u8], v: u64) {
    // The common widths as fixed-size stores: a copy of a slice's length is a `memcpy` call.
    match bytes {
        [b] => *b = v as u8,
        [_, _] => *<&mut [u8; 2]>::try_from(bytes).expect("2 bytes") = (v as u16).to_le_bytes(),
        [_, _, _, _] => {
            *<&mut [u8; 4]>::try_from(bytes).expect("4 bytes") = (v as u32).to_le_bytes()
        }
        [_, _, _, _, _, _, _, _] => {
            *<&mut [u8; 8]>::try_from(bytes).expect("8 bytes") = v.to_le_bytes()
        }
        _ => {
            let n = bytes.len();
            bytes.copy_from_slice(&v.to_le_bytes()[..n])
        }
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
        // A strict fault names the nearest allocation and the distance from it.
        let near = |offset| {
            Some(Nearest {
                base: a,
                size: 16,
                offset,
            })
        };
        for (addr, offset) in [(a + 16, 0), (a - 8, -8), (a + 40, 24)] {
            assert_eq!(m.read(addr, 4, &mut h), Err(GlobalFault::Unallocated));
            assert_eq!(m.nearest(addr), near(offset));
        }
        assert_eq!(m.read(0, 4, &mut h), Err(GlobalFault::Unallocated));
        assert!(m.free(a));
        assert_eq!(m.read(a, 4, &mut h), Err(GlobalFault::Freed { base: a }));
        assert!(!m.free(a));
        assert_eq!(m.read(b, 8, &mut h), Ok(0));
    }

    #[test]
    fn page_mode_accepts_what_a_mapped_page_holds_and_faults_outside() {
        let mut m = DeviceMemory::new();
        m.set_check(MemoryCheck::Page);
        let a = m.alloc(64);
        let b = m.alloc(64);
        let mut h = 0;
        m.write(a, 4, 7, &mut h).unwrap();
        // Before the second buffer and after the last, in the same 2 MiB page: allowed, and
        // what is written there stays, without touching the buffers. The first buffer
        // starts a page (as cudaMalloc's first does), so the bytes before it are unmapped.
        assert_eq!(m.read(b - 4, 4, &mut h), Ok(0));
        assert!(matches!(
            m.read(a - 4, 4, &mut h),
            Err(GlobalFault::Unmapped)
        ));
        m.write(b + 64, 4, 0x1234_5678, &mut h).unwrap();
        assert_eq!(m.read(b + 64, 4, &mut h), Ok(0x1234_5678));
        assert_eq!(m.read_bytes(b, 64).unwrap(), &[0u8; 64][..]);
        // An access straddling a buffer's end reads both sides.
        m.write(a + 60, 4, 0xaabb_ccdd, &mut h).unwrap();
        m.write(a + 64, 4, 0x1122_3344, &mut h).unwrap();
        assert_eq!(m.read(a + 62, 4, &mut h), Ok(0x3344_aabb));
        // Outside every mapped page: a fault naming the nearest allocation.
        let far = b + 3 * PAGE_BYTES;
        assert_eq!(m.read(far, 4, &mut h), Err(GlobalFault::Unmapped));
        assert_eq!(
            m.nearest(far),
            Some(Nearest {
                base: b,
                size: 64,
                offset: (far - b - 64) as i64
            })
        );
        assert!(matches!(m.read(8, 4, &mut h), Err(GlobalFault::Unmapped)));
        // The same accesses are faults under the strict check.
        m.set_check(MemoryCheck::Strict);
        assert!(matches!(
            m.read(a - 4, 4, &mut h),
            Err(GlobalFault::Unallocated)
        ));
    }

    #[test]
    fn windows_classify_generic_addresses() {
        assert_eq!(window(SHARED_WINDOW + 8), Window::Shared(8));
        assert_eq!(window(LOCAL_WINDOW), Window::Local(0));
        assert_eq!(window(PARAM_WINDOW + 4), Window::Param(4));
        assert_eq!(window(GLOBAL_BASE), Window::Global(GLOBAL_BASE));
    }
}
