//! Turning a memory instruction into what the memory system sees: the lane (or element)
//! addresses, read from the warp's registers before it executes (they are the addresses
//! `step` will use), coalesced into line requests and offered to the memory system (global,
//! local, constant), or priced at a fixed latency (shared memory with its bank conflicts,
//! parameters).

use kir::inst::{Inst, Op, Operand, Space, Special, MAX_DSTS};
use kir::Id;
use memsys::Pipeline;
use memsys::{
    coalesce::shared_bank_conflicts_with, coalesce_into, AccessKind, MemAccess, Priority,
};

use crate::exec::{lanes, WARP_SIZE};
use crate::memory::{self, Window};
use crate::timing::backend::SmMemory;
use crate::timing::ids::WarpSlotId;
use crate::timing::launch::Launch;
use crate::timing::probe::Watch;
use crate::timing::stats::StallReason;

use super::ldst::{chunk_lines, Backlog, PendingAccess, Refusal};
use super::warp::{WarpSlot, MEM_PENDING};
use super::{Sm, Specs};

/// A memory instruction being planned: its warp, TB and launch.
pub(super) struct Access<'a> {
    pub launch: &'a Launch,
    pub ws: &'a WarpSlot,
    pub local_base: u64,
    pub inst: &'a Inst,
    pub pc: u32,
    pub exec: u32,
    pub slot: WarpSlotId,
    pub now: u64,
    /// The device's texture objects (handle `k + 1` is `textures[k]`).
    pub textures: &'a [crate::texture::TextureDesc],
}

/// What a memory instruction does beyond the functional step.
pub(super) enum MemPlan {
    /// Not a memory access (or no active lane): fixed class latency.
    None,
    /// Issued to the memory system; `pending` when the destinations wait for completion.
    System { pending: bool },
    /// Fixed latency and LD/ST-unit occupancy.
    Fixed { latency: u64, busy: u64 },
}

/// Whether an access is offered for the first time, or again after the memory system
/// refused it (its addresses and lines are already planned then).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Attempt {
    First,
    Retry,
}

/// Where a planned access's addresses are: one per lane, or one per matrix element.
#[derive(Clone, Copy)]
enum Addresses {
    Lanes,
    Elements,
}

impl Sm {
    /// Whether the access of `a` is the one the memory system refused last.
    fn attempt(&self, a: &Access) -> Attempt {
        match self.ldst.refused {
            Some(r) if (r.slot, r.pc) == (a.slot, a.pc) => Attempt::Retry,
            _ => Attempt::First,
        }
    }

    /// Computes the lane addresses of a memory instruction and offers it to the memory
    /// system (global/local/const) or prices it (shared, param).
    pub(super) fn plan_memory<P: SmMemory>(
        &mut self,
        specs: &Specs,
        memsys: &mut P,
        a: &Access,
        watch: &mut Watch,
    ) -> Result<MemPlan, StallReason> {
        let (ctx, inst) = (&a.launch.ctx, a.inst);
        let (space, ty, vec, offset, kind) = match inst.op {
            Op::Ld {
                space,
                ty,
                vec,
                offset,
                ..
            } => (space, ty, vec, offset, AccessKind::Load),
            Op::St {
                space,
                ty,
                vec,
                offset,
            } => (space, ty, vec, offset, AccessKind::Store),
            Op::Atom {
                space, ty, offset, ..
            }
            | Op::Red {
                space, ty, offset, ..
            } => (space, ty, 1, offset, AccessKind::Atomic),
            // A read-modify-write of the 8-byte barrier object.
            Op::Mbarrier { space, offset, .. } => {
                (space, kir::Ty::B64, 1, offset, AccessKind::Atomic)
            }
            _ => return self.plan_matrix_memory(specs, memsys, a, watch),
        };
        let bytes = ty.size() * u32::from(vec.max(1));
        let regs = &a.ws.warp.regs;
        let base = inst.srcs[0];
        let read = |l: usize| -> u64 {
            let b = match base {
                Operand::Reg(r) => regs[r.index() * WARP_SIZE + l],
                Operand::Imm(v) => v,
                Operand::GlobalAddr(g, off) => ctx.global_addrs[g.index()].wrapping_add(off as u64),
                Operand::Special(Special::WarpSmem) => ctx.warp_smem(a.ws.warp.index),
                _ => 0,
            };
            b.wrapping_add(offset as i64 as u64)
        };
        let first = a.exec.trailing_zeros() as usize;
        let attempt = self.attempt(a);
        let retry = attempt == Attempt::Retry;
        // The space the access goes to, and how a lane's address maps into it.
        let resolved = match space {
            Space::Generic => match memory::window(read(first)) {
                Window::Global(_) => Space::Global,
                Window::Shared(_) => Space::Shared,
                Window::Local(_) => Space::Local,
                Window::Param(_) => Space::Param,
            },
            s => s,
        };
        let strip = |x: u64| -> u64 {
            if space == Space::Generic {
                match memory::window(x) {
                    Window::Global(x) | Window::Shared(x) | Window::Local(x) | Window::Param(x) => {
                        x
                    }
                }
            } else {
                x
            }
        };
        match base {
            // The common case, hoisted: a register's lanes plus the offset, in a space that
            // needs no resolving.
            Operand::Reg(r) if !retry && space != Space::Generic && resolved != Space::Local => {
                let row = &regs[r.index() * WARP_SIZE..][..WARP_SIZE];
                let offset = offset as i64 as u64;
                for (l, (addr, &b)) in self.ldst.addrs.iter_mut().zip(row).enumerate() {
                    *addr = (a.exec & (1 << l) != 0).then(|| b.wrapping_add(offset));
                }
            }
            // A parameter read is priced without its addresses (`offer_planned`).
            _ if resolved == Space::Param => {}
            _ if !retry => self.lane_addresses(a, read, strip, resolved),
            _ => {}
        }
        self.offer_planned(
            specs,
            memsys,
            a,
            resolved,
            bytes,
            kind,
            attempt,
            Addresses::Lanes,
            watch,
        )
    }

    /// Every lane's address into `self.ldst.addrs` (`None` for an inactive lane): its
    /// `read` value, `strip`ped of its window, interleaved into its warp's local frame when
    /// the access goes to local memory.
    fn lane_addresses(
        &mut self,
        a: &Access,
        read: impl Fn(usize) -> u64,
        strip: impl Fn(u64) -> u64,
        resolved: Space,
    ) {
        for l in 0..WARP_SIZE {
            self.ldst.addrs[l] = if a.exec & (1 << l) != 0 {
                let x = strip(read(l));
                Some(match resolved {
                    Space::Local => {
                        memory::local_word_address(
                            a.local_base,
                            a.launch.frame_words,
                            a.ws.warp.index,
                            l as u32,
                            x / 4,
                        ) + x % 4
                    }
                    _ => x,
                })
            } else {
                None
            };
        }
    }

    /// The memory plan of an access whose addresses are in `self.ldst.addrs` (one per lane) or,
    /// with [`Addresses::Elements`], in `self.ldst.matrix_addrs` (one per element): priced (shared, param) or
    /// offered to the memory system.
    #[allow(clippy::too_many_arguments)]
    fn offer_planned<P: SmMemory>(
        &mut self,
        specs: &Specs,
        memsys: &mut P,
        a: &Access,
        resolved: Space,
        bytes: u32,
        kind: AccessKind,
        attempt: Attempt,
        source: Addresses,
        watch: &mut Watch,
    ) -> Result<MemPlan, StallReason> {
        let inst = a.inst;
        let retry = attempt == Attempt::Retry;
        let addrs: &[Option<u64>] = match source {
            Addresses::Elements => &self.ldst.matrix_addrs,
            Addresses::Lanes => &self.ldst.addrs,
        };
        match resolved {
            Space::Shared => {
                let sh = &specs.memory.shared;
                let passes = shared_bank_conflicts_with(addrs, bytes, sh.banks, sh.bank_bytes);
                watch.shared_access(self.id, a.ws.launch, passes, a.now);
                Ok(MemPlan::Fixed {
                    latency: sh.access_cycles(passes),
                    busy: u64::from(passes.max(1)) * u64::from(specs.pipeline.ldst_interval.max(1)),
                })
            }
            Space::Param => Ok(MemPlan::Fixed {
                latency: specs.memory.const_cache.hit_latency,
                busy: u64::from(specs.pipeline.ldst_interval.max(1)),
            }),
            Space::Global | Space::Const | Space::Local => {
                let msp = match resolved {
                    Space::Const => memsys::Space::Const,
                    Space::Local => memsys::Space::Local,
                    _ => memsys::Space::Global,
                };
                if !retry {
                    coalesce_into(addrs, bytes, specs.memory.line_bytes, &mut self.ldst.lines);
                }
                if self.ldst.lines.is_empty() {
                    // Nothing to read (a `cp.async` whose lanes all read zero bytes).
                    return Ok(MemPlan::None);
                }
                let waits = kind != AccessKind::Store
                    && matches!(
                        inst.op,
                        Op::Ld { .. } | Op::Atom { .. } | Op::WmmaLoad { .. } | Op::Tex { .. }
                    )
                    && inst.defs().next().is_some();
                let tag = self.ldst.pending.next_tag();
                let chunk = chunk_lines(specs.memory, msp, kind);
                let first = self.ldst.lines.len().min(chunk);
                self.ldst.offer.kind = kind;
                self.ldst.offer.space = msp;
                self.ldst.offer.priority = Priority::Normal;
                self.ldst.offer.tag = u64::from(tag.0);
                self.ldst.offer.owner = a.ws.launch.0;
                self.ldst.offer.lines.clear();
                self.ldst
                    .offer
                    .lines
                    .extend_from_slice(&self.ldst.lines[..first]);
                // CCBP's issue rate controller: a launch over its quota waits. Not a
                // refusal of the memory system's, so the retry coalesces again.
                if !self.ldst.rate.admits(a.ws.launch, a.now) {
                    self.ldst.refused = None;
                    self.ldst.throttled_at = a.now;
                    return Err(StallReason::Memory);
                }
                let sent = memsys.noc_requests();
                if let Err(stall) = memsys.offer(&self.ldst.offer) {
                    let state = memsys.issue_state();
                    self.ldst.refused = Some(Refusal {
                        slot: a.slot,
                        pc: a.pc,
                        state,
                        stall,
                    });
                    return Err(StallReason::Memory);
                }
                let sent = memsys.noc_requests() - sent;
                self.ldst.rate.charge(a.ws.launch, sent);
                watch.noc_requests(self.id, a.ws.launch, sent, a.now);
                self.ldst.refused = None;
                watch.memory(self.id, &self.ldst.offer, a.now);
                let parts = self.ldst.lines.len().div_ceil(chunk).max(1) as u32;
                if parts > 1 {
                    self.ldst.backlog = Some(Backlog {
                        kind,
                        space: msp,
                        tag,
                        lines: self.ldst.lines.clone(),
                        next: first,
                        part: MemAccess {
                            kind,
                            space: msp,
                            priority: Priority::Normal,
                            lines: Vec::with_capacity(chunk),
                            tag: u64::from(tag.0),
                            owner: a.ws.launch.0,
                        },
                    });
                }
                let mut regs = [None; MAX_DSTS];
                if waits {
                    regs[..inst.dsts().len()].copy_from_slice(inst.dsts());
                }
                // Warp disable (papers/tanasic-thesis §6.3.1): with translation on every
                // access may fault, so the warp issues nothing more until the instruction
                // completes (WD-commit) or its last page is translated (WD-lastcheck; not
                // known before its last part is offered).
                let translated = memsys.last_translated();
                let pipeline = specs
                    .memory
                    .translating()
                    .map_or(Pipeline::Stall, |t| t.pipeline);
                self.ldst.disable = match (pipeline, translated) {
                    (Pipeline::Stall, _) | (_, None) => None,
                    (Pipeline::WdCommit, Some(_)) => Some((tag, MEM_PENDING)),
                    (
                        Pipeline::WdLastcheck | Pipeline::ReplayQueue | Pipeline::OperandLog,
                        Some(r),
                    ) => Some((tag, if parts > 1 { MEM_PENDING } else { r })),
                };
                let p = PendingAccess {
                    slot: Some(a.slot),
                    launch: a.ws.launch,
                    regs,
                    waits,
                    parts,
                    transfer: None,
                    cp_async: matches!(inst.op, Op::CpAsync { .. }).then_some(a.ws.cp_async.open),
                    translated: translated.unwrap_or(0),
                    squashed: 0,
                };
                self.ldst.pending.add(p);
                self.in_flight[a.ws.launch] += 1;
                Ok(MemPlan::System { pending: waits })
            }
            Space::Generic => unreachable!("resolved above"),
        }
    }

    /// [`Sm::plan_memory`] for the matrix loads and stores and `cp.async`: every element's
    /// address (the `wmma` element layout, `ldmatrix` rows of 16 bytes from lanes `8j..8j+8`,
    /// each lane's `cp.async` source) into `matrix_addrs`, then priced or offered like any
    /// access. A `cp.async` reads global memory; its write into shared memory is not priced.
    fn plan_matrix_memory<P: SmMemory>(
        &mut self,
        specs: &Specs,
        memsys: &mut P,
        a: &Access,
        watch: &mut Watch,
    ) -> Result<MemPlan, StallReason> {
        use crate::exec::matrix::wmma_element_addr;
        use kir::matrix::{wmma_layout, Frag, WMMA_PART_REGS};
        let (ctx, inst) = (&a.launch.ctx, a.inst);
        let regs = &a.ws.warp.regs;
        let value = |o: Operand, l: usize| -> u64 {
            match o {
                Operand::Reg(r) => regs[r.index() * WARP_SIZE + l],
                Operand::Imm(v) => v,
                Operand::GlobalAddr(g, off) => ctx.global_addrs[g.index()].wrapping_add(off as u64),
                _ => 0,
            }
        };
        let attempt = self.attempt(a);
        let retry = attempt == Attempt::Retry;
        let s = inst.srcs;
        let (space, bytes, kind) = match inst.op {
            Op::WmmaLoad { space, elem, .. } => (space, elem.bits() / 8, AccessKind::Load),
            Op::WmmaStore { space, elem, .. } => (space, elem.bits() / 8, AccessKind::Store),
            Op::Ldmatrix { space, .. } => (space, 16, AccessKind::Load),
            Op::Stmatrix { space, .. } => (space, 16, AccessKind::Store),
            Op::CpAsync { bytes, .. } => (Space::Global, u32::from(bytes), AccessKind::Load),
            // Texels, read through the L1 as global loads (the model has no separate
            // texture pipeline); the first active lane's texture gives the texel size.
            Op::Tex { .. } => {
                let handle = value(s[0], lanes(a.exec).next().unwrap_or(0));
                match crate::texture::by_handle(a.textures, handle) {
                    Some(t) => (Space::Global, t.texel_bytes() as u32, AccessKind::Load),
                    // Not a texture object: the fetch fails when it executes.
                    None => return Ok(MemPlan::None),
                }
            }
            _ => return Ok(MemPlan::None),
        };
        if !retry {
            let mut out = std::mem::take(&mut self.ldst.matrix_addrs);
            out.clear();
            let wmma = match inst.op {
                Op::WmmaLoad {
                    shape,
                    frag,
                    elem,
                    row_major,
                    offset,
                    part,
                    ..
                } => Some((
                    shape,
                    frag,
                    elem,
                    row_major,
                    offset,
                    part,
                    u32::from(inst.n_dsts),
                )),
                Op::WmmaStore {
                    shape,
                    elem,
                    row_major,
                    offset,
                    part,
                    ..
                } => Some((
                    shape,
                    Frag::C,
                    elem,
                    row_major,
                    offset,
                    part,
                    u32::from(inst.n_srcs) - 2,
                )),
                _ => None,
            };
            match inst.op {
                _ if wmma.is_some() => {
                    let (shape, frag, elem, row_major, offset, part, n) = wmma.expect("checked");
                    let first = u32::from(part) * WMMA_PART_REGS;
                    // Checked when the instruction was lowered; without a plan it fails when
                    // it executes.
                    let Some(plan) = kir::matrix::wmma_frag_plan(shape, frag, elem) else {
                        return Ok(MemPlan::None);
                    };
                    for l in lanes(a.exec) {
                        let base = value(s[0], l).wrapping_add(offset as i64 as u64);
                        let stride = value(s[1], l) & 0xffff_ffff;
                        for k in 0..n {
                            for i in 0..elem.per_reg() {
                                let at = wmma_layout(plan, frag, elem, l as u32, first + k, i);
                                out.push(Some(wmma_element_addr(
                                    base, stride, row_major, elem, at,
                                )));
                            }
                        }
                    }
                }
                Op::Ldmatrix { count, offset, .. } | Op::Stmatrix { count, offset, .. } => {
                    // Each matrix row once: the rows' addresses come from lanes 8j..8j+8.
                    for l in 0..8 * usize::from(count) {
                        out.push(Some(value(s[0], l).wrapping_add(offset as i64 as u64)));
                    }
                }
                Op::CpAsync {
                    bytes,
                    src_offset,
                    src_size,
                    ignore_src,
                    ..
                } => {
                    for l in lanes(a.exec) {
                        let read = if src_size {
                            value(s[2], l).min(u64::from(bytes))
                        } else if ignore_src && value(s[2], l) != 0 {
                            0
                        } else {
                            u64::from(bytes)
                        };
                        if read > 0 {
                            out.push(Some(value(s[1], l).wrapping_add(src_offset as i64 as u64)));
                        }
                    }
                }
                Op::Tex {
                    geom, cty, gather, ..
                } => {
                    for l in lanes(a.exec) {
                        let Some(t) = crate::texture::by_handle(a.textures, value(s[0], l)) else {
                            continue;
                        };
                        let fp = crate::texture::fetch_footprint(t, geom, cty, gather, |k| {
                            value(s[k], l)
                        });
                        out.extend(fp.taps[..fp.n].iter().filter_map(|tap| tap.0.map(Some)));
                    }
                }
                _ => {}
            }
            // Generic addresses: the window of the first, the offset within it for each.
            if space == Space::Generic {
                for x in out.iter_mut().flatten() {
                    *x = match memory::window(*x) {
                        Window::Global(y)
                        | Window::Shared(y)
                        | Window::Local(y)
                        | Window::Param(y) => y,
                    };
                }
            }
            self.ldst.matrix_addrs = out;
        }
        let resolved = match space {
            Space::Generic => {
                let first = lanes(a.exec).next().unwrap_or(0);
                let addr = match inst.op {
                    Op::Ldmatrix { offset, .. }
                    | Op::Stmatrix { offset, .. }
                    | Op::WmmaLoad { offset, .. }
                    | Op::WmmaStore { offset, .. } => {
                        value(s[0], first).wrapping_add(offset as i64 as u64)
                    }
                    _ => 0,
                };
                match memory::window(addr) {
                    Window::Global(_) => Space::Global,
                    Window::Shared(_) => Space::Shared,
                    Window::Local(_) => Space::Local,
                    Window::Param(_) => Space::Param,
                }
            }
            sp => sp,
        };
        if resolved == Space::Local {
            // The local window holds per-thread frames that matrix instructions do not
            // address; such an access faults when it executes.
            return Ok(MemPlan::None);
        }
        self.offer_planned(
            specs,
            memsys,
            a,
            resolved,
            bytes,
            kind,
            attempt,
            Addresses::Elements,
            watch,
        )
    }
}
