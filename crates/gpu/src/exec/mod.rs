//! The functional SIMT core: executes one warp instruction at a time on real values.
//!
//! A warp is 32 lanes sharing a program counter. Divergence is handled by a per-warp SIMT
//! reconvergence stack (GPGPU-Sim's PDOM scheme): at a branch whose lanes disagree, the top
//! entry's PC becomes the branch's immediate post-dominator (computed by `kir::cfg`) and one
//! entry per side is pushed, each with that reconvergence PC; an entry is popped when its PC
//! reaches its reconvergence PC, and the lanes merge back into the entry below. Exited lanes
//! are removed from every entry.
//!
//! [`step`] executes exactly one warp instruction, so the same code runs inside a timed
//! pipeline (which decides *when* a warp issues) and in the functional-only driver
//! ([`crate::func`]). Barriers are not resolved here: a warp that reaches one reports a
//! [`BarrierArrival`] and its driver decides when the barrier completes.

use kir::inst::{
    ArithOp, AtomOp, BarKind, BoolOp, Inst, Op, Operand, ReduxOp, ShflMode, Space, Special, Ty,
    VoteMode,
};
use std::sync::Arc;

use kir::{Id, InstId, Kernel};
use ptx::SourceFile;

use crate::alu;
use crate::error::{ExecError, FaultReason};

pub(crate) mod matrix;
mod texture;
use crate::memory::{self, AtomicRmw, GlobalAccess, GlobalFault, Window};

/// Lanes per warp. PTX fixes the warp size at 32 (`WARP_SZ`); masks are `u32`.
pub const WARP_SIZE: usize = 32;

/// Everything about a launch that does not change while it runs. It owns its kernel (shared
/// with the module it came from), so a long-lived machine can hold any number of launches.
#[derive(Clone, Debug)]
pub struct LaunchCtx {
    pub kernel: Arc<Kernel>,
    pub source: Arc<SourceFile>,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// The parameter buffer (`kernel.param_size` bytes).
    pub params: Vec<u8>,
    /// Device address of each module-scope variable, indexed by `GlobalId`.
    pub global_addrs: Arc<[u64]>,
    pub dynamic_smem: u32,
    /// Bytes of shared memory per TB ([`SharedLayout::size`]).
    pub smem_size: u32,
    /// Where the warps' own shared memory starts ([`SharedLayout::warp_base`]).
    pub warp_smem_base: u32,
    pub num_sms: u32,
    pub grid_id: u64,
}

/// Where a TB's shared memory keeps what: the static variables from offset 0, the dynamic
/// shared memory after them (16-byte aligned when the kernel declares it), then, from the
/// next multiple of 8, for each warp in order, the [`Kernel::warp_smem`] bytes it owns
/// ([`Special::WarpSmem`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedLayout {
    /// Offset of warp 0's own bytes.
    pub warp_base: u32,
    /// Bytes of shared memory per TB.
    pub size: u32,
}

impl SharedLayout {
    pub fn of(kernel: &Kernel, block: [u32; 3], dynamic_smem: u32) -> Self {
        let static_end = if kernel.uses_dynamic_smem {
            kernel.static_smem.next_multiple_of(16)
        } else {
            kernel.static_smem
        };
        // 8-byte aligned, so that a warp's 64-bit words are (its bytes are whole words:
        // CTXBack's routines keep 64-bit uniform registers there).
        let warp_base = (static_end + dynamic_smem).next_multiple_of(8);
        let threads = block.iter().product::<u32>();
        let warps = threads.div_ceil(WARP_SIZE as u32);
        let size = if kernel.warp_smem == 0 {
            static_end + dynamic_smem
        } else {
            warp_base + warps * kernel.warp_smem
        };
        SharedLayout { warp_base, size }
    }
}

impl LaunchCtx {
    /// A launch of `kernel` with the parameter buffer `params`; the shared-memory layout
    /// follows from the kernel and the shape.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        kernel: Arc<Kernel>,
        source: Arc<SourceFile>,
        global_addrs: Arc<[u64]>,
        grid: [u32; 3],
        block: [u32; 3],
        dynamic_smem: u32,
        params: Vec<u8>,
        num_sms: u32,
        grid_id: u64,
    ) -> LaunchCtx {
        let layout = SharedLayout::of(&kernel, block, dynamic_smem);
        LaunchCtx {
            kernel,
            source,
            grid,
            block,
            params,
            global_addrs,
            dynamic_smem,
            smem_size: layout.size,
            warp_smem_base: layout.warp_base,
            num_sms,
            grid_id,
        }
    }

    /// Bytes of device memory a TB's local memory takes ([`memory::local_frame_bytes`]).
    pub fn local_frame_bytes(&self) -> u64 {
        memory::local_frame_bytes(self.kernel.local_size, self.warps_per_tb())
    }

    /// `%warp_smem` of the TB's warp `warp`: where its own shared bytes start.
    pub fn warp_smem(&self, warp: u32) -> u64 {
        u64::from(self.warp_smem_base) + u64::from(warp) * u64::from(self.kernel.warp_smem)
    }

    pub fn threads_per_tb(&self) -> u32 {
        self.block[0] * self.block[1] * self.block[2]
    }

    pub fn warps_per_tb(&self) -> u32 {
        self.threads_per_tb().div_ceil(WARP_SIZE as u32)
    }

    pub fn num_tbs(&self) -> u64 {
        self.grid.iter().map(|&d| d as u64).product()
    }

    /// `file:line:col` of an instruction.
    pub fn location(&self, pc: InstId) -> String {
        match self.kernel.insts.get(pc) {
            Some(i) => self.source.location(i.span),
            None => format!("{}:{}", self.source.name, pc),
        }
    }

    /// The CTA coordinates of a linear TB index (x fastest).
    pub fn ctaid(&self, linear: u64) -> [u32; 3] {
        let gx = self.grid[0] as u64;
        let gy = self.grid[1] as u64;
        [
            (linear % gx) as u32,
            ((linear / gx) % gy) as u32,
            (linear / (gx * gy)) as u32,
        ]
    }

    /// The thread coordinates of a linear thread index within a TB.
    pub fn tid(&self, linear: u32) -> [u32; 3] {
        let bx = self.block[0];
        let by = self.block[1];
        [linear % bx, (linear / bx) % by, linear / (bx * by)]
    }
}

/// One entry of the SIMT reconvergence stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackEntry {
    pub pc: u32,
    /// Reconvergence PC; `u32::MAX` for the bottom entry.
    pub rpc: u32,
    pub mask: u32,
}

/// A warp's architectural state.
#[derive(Clone, Debug)]
pub struct Warp {
    /// Index of the warp within its TB.
    pub index: u32,
    /// Registers, `[reg][lane]`: register `r` of lane `l` is `regs[r * 32 + l]`.
    pub regs: Vec<u64>,
    pub stack: Vec<StackEntry>,
    /// Lanes that exist (the last warp of a TB may be partial).
    pub valid: u32,
    /// Lanes that have exited.
    pub exited: u32,
    /// Warp instructions executed (also the functional `%clock`).
    pub executed: u64,
    /// Thread instructions executed (active lanes summed over instructions).
    pub thread_executed: u64,
}

impl Warp {
    pub fn new(ctx: &LaunchCtx, index: u32) -> Warp {
        let threads = ctx.threads_per_tb();
        let first = index * WARP_SIZE as u32;
        let lanes = (threads - first).min(WARP_SIZE as u32);
        let valid = if lanes == 32 {
            u32::MAX
        } else {
            (1u32 << lanes) - 1
        };
        Warp {
            index,
            regs: vec![0; ctx.kernel.regs.len() * WARP_SIZE],
            stack: vec![StackEntry {
                pc: 0,
                rpc: u32::MAX,
                mask: valid,
            }],
            valid,
            exited: 0,
            executed: 0,
            thread_executed: 0,
        }
    }

    /// The PC the warp will execute next, if it has not finished.
    pub fn pc(&self) -> Option<InstId> {
        self.next_entry().map(|e| InstId(e.pc))
    }

    /// The stack entry [`step`] will execute next: the top once finished and reconverged
    /// entries are popped, found without changing the warp (a timing model inspects the next
    /// instruction before issuing it).
    pub fn next_entry(&self) -> Option<StackEntry> {
        self.stack
            .iter()
            .rev()
            .find(|e| e.mask != 0 && e.pc != e.rpc)
            .copied()
    }

    pub fn is_done(&self) -> bool {
        self.stack.is_empty()
    }

    /// Pops finished entries: empty ones and those that reached their reconvergence point.
    #[inline]
    fn reconverge(&mut self) {
        while let Some(top) = self.stack.last() {
            if top.mask == 0 || top.pc == top.rpc {
                self.stack.pop();
            } else {
                break;
            }
        }
    }
}

/// A warp's arrival at a barrier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BarrierArrival {
    pub id: u32,
    /// Threads expected at the barrier (`None`: every thread of the TB).
    pub count: Option<u32>,
    /// `bar.arrive`: counts toward the barrier without waiting.
    pub wait: bool,
    /// For `bar.red`: the operation, this warp's partial result and its destination.
    pub reduction: Option<Reduction>,
    pub pc: InstId,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reduction {
    pub kind: BarKind,
    /// popc: count of true predicates; and/or: the combined predicate (0/1).
    pub partial: u32,
    pub dst: Option<kir::Reg>,
    /// Lanes that receive the result.
    pub mask: u32,
}

/// What one [`step`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Executed an instruction; the warp can go on.
    Executed,
    /// Executed a barrier instruction.
    Barrier(BarrierArrival),
    /// The warp has no more active lanes.
    Done,
}

/// State a warp shares with the other warps of its TB.
pub struct TbView<'a> {
    pub ctaid: [u32; 3],
    pub shared: &'a mut [u8],
    pub sm: u32,
    /// The SM's cycle counter, read by `%clock`/`%clock64` (the timing model's core cycle);
    /// `None` on the functional core, where the clock counts the warp's executed instructions.
    pub clock: Option<u64>,
    /// Device address of the TB's local memory ([`memory::local_word_address`]); unused when
    /// the kernel has no local memory.
    pub local_base: u64,
}

/// The lanes of a mask, lowest first.
#[inline]
pub(crate) fn lanes(mut mask: u32) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if mask == 0 {
            None
        } else {
            let l = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            Some(l)
        }
    })
}

/// The lanes of `mask` for which `inst`'s guard predicate holds (all of them if unguarded).
#[inline]
pub fn guard_mask(inst: &Inst, warp: &Warp, mask: u32) -> u32 {
    match inst.guard {
        None => mask,
        Some(g) => {
            // Every lane's predicate, without a branch per lane, then the lanes asked.
            let base = g.reg.index() * WARP_SIZE;
            let mut set = 0u32;
            for (l, &v) in warp.regs[base..base + WARP_SIZE].iter().enumerate() {
                set |= u32::from(v != 0) << l;
            }
            (if g.negated { !set } else { set }) & mask
        }
    }
}

#[inline]
fn combine(op: BoolOp, a: bool, b: bool) -> bool {
    match op {
        BoolOp::And => a & b,
        BoolOp::Or => a | b,
        BoolOp::Xor => a ^ b,
    }
}

/// Executes one instruction of `warp`.
///
/// Global writes go through `mem` ([`GlobalAccess`]): [`crate::memory::DeviceMemory`] applies them at once;
/// the timed machine's view defers them to the end of the cycle.
pub fn step<M: GlobalAccess + ?Sized>(
    ctx: &LaunchCtx,
    tb: &mut TbView<'_>,
    warp: &mut Warp,
    mem: &mut M,
) -> Result<Step, ExecError> {
    step_as(ctx, tb, warp, mem, None)
}

/// [`step`] of an instruction whose lanes `exec` the caller found already: its next
/// instruction's guard ([`guard_mask`]) over its next stack entry ([`Warp::next_entry`]).
/// The timed SM finds them to decide the issue.
pub fn step_guarded<M: GlobalAccess + ?Sized>(
    ctx: &LaunchCtx,
    tb: &mut TbView<'_>,
    warp: &mut Warp,
    mem: &mut M,
    exec: u32,
) -> Result<Step, ExecError> {
    step_as(ctx, tb, warp, mem, Some(exec))
}

#[inline(always)]
fn step_as<M: GlobalAccess + ?Sized>(
    ctx: &LaunchCtx,
    tb: &mut TbView<'_>,
    warp: &mut Warp,
    mem: &mut M,
    guarded: Option<u32>,
) -> Result<Step, ExecError> {
    warp.reconverge();
    let Some(&top) = warp.stack.last() else {
        return Ok(Step::Done);
    };
    let pc = top.pc;
    let Some(inst) = ctx.kernel.insts.as_slice().get(pc as usize) else {
        // Lowering ends every kernel with `exit`; running past it means a corrupt stack.
        return Err(ExecError::Internal {
            kernel: ctx.kernel.name.clone(),
            what: format!(
                "warp {} ran past the end of the kernel (pc {pc})",
                warp.index
            ),
        });
    };
    let mask = top.mask;
    let exec = match guarded {
        Some(exec) => {
            debug_assert_eq!(exec, guard_mask(inst, warp, mask), "the caller's lanes");
            exec
        }
        None => guard_mask(inst, warp, mask),
    };
    warp.executed += 1;
    warp.thread_executed += mask.count_ones() as u64;

    let mut ex = Exec {
        ctx,
        tb,
        warp,
        mem,
        inst,
        pc,
    };
    match inst.op {
        Op::Bra { target, .. } => {
            let taken = exec;
            let not_taken = mask & !exec;
            let stack = &mut ex.warp.stack;
            let top = stack.last_mut().expect("checked above");
            if not_taken == 0 {
                top.pc = target.0;
            } else if taken == 0 {
                top.pc = pc + 1;
            } else {
                let rpc = ctx.kernel.cfg.reconvergence[pc as usize].0;
                top.pc = rpc;
                stack.push(StackEntry {
                    pc: pc + 1,
                    rpc,
                    mask: not_taken,
                });
                stack.push(StackEntry {
                    pc: target.0,
                    rpc,
                    mask: taken,
                });
            }
            Ok(Step::Executed)
        }
        Op::Exit => {
            let w = &mut ex.warp;
            w.exited |= exec;
            for e in &mut w.stack {
                e.mask &= !exec;
            }
            if let Some(top) = w.stack.last_mut() {
                if top.mask != 0 {
                    top.pc = pc + 1;
                }
            }
            w.reconverge();
            Ok(if w.stack.is_empty() {
                Step::Done
            } else {
                Step::Executed
            })
        }
        Op::Bar { kind, .. } => {
            let arrival = ex.barrier(kind, exec)?;
            ex.advance();
            Ok(match arrival {
                Some(a) => Step::Barrier(a),
                None => Step::Executed,
            })
        }
        _ => {
            ex.execute(exec, mask)?;
            ex.advance();
            Ok(Step::Executed)
        }
    }
}

struct Exec<'a, 'b, 'c, M: GlobalAccess + ?Sized> {
    ctx: &'a LaunchCtx,
    tb: &'b mut TbView<'c>,
    warp: &'b mut Warp,
    mem: &'b mut M,
    inst: &'a Inst,
    pc: u32,
}

impl<M: GlobalAccess + ?Sized> Exec<'_, '_, '_, M> {
    #[inline]
    fn advance(&mut self) {
        if let Some(top) = self.warp.stack.last_mut() {
            top.pc = self.pc + 1;
        }
    }

    #[inline(always)]
    fn read(&self, op: Operand, lane: usize) -> u64 {
        match op {
            Operand::Reg(r) => self.warp.regs[r.index() * WARP_SIZE + lane],
            Operand::Imm(v) => v,
            Operand::NotReg(r) => (self.warp.regs[r.index() * WARP_SIZE + lane] == 0) as u64,
            Operand::GlobalAddr(g, off) => {
                self.ctx.global_addrs[g.index()].wrapping_add(off as u64)
            }
            Operand::Special(s) => self.special(s, lane),
            Operand::None => 0,
        }
    }

    /// A `.sync` instruction's member mask as lane `lane` gives it.
    #[inline]
    fn member_mask(&self, op: Operand, lane: usize) -> u32 {
        self.read(op, lane) as u32
    }

    #[inline]
    fn write(&mut self, k: usize, lane: usize, v: u64) {
        if let Some(r) = self.inst.dsts[k] {
            self.warp.regs[r.index() * WARP_SIZE + lane] = v;
        }
    }

    /// Coordinate `d` of `%tid` of every lane of the warp: [`LaunchCtx::tid`] of each lane's
    /// linear thread index, counted up in mixed radix from the first lane's.
    #[inline(never)]
    fn tid_row(&self, d: usize) -> [u64; WARP_SIZE] {
        let [bx, by, _] = self.ctx.block;
        let mut t = self.ctx.tid(self.warp.index * WARP_SIZE as u32);
        let mut row = [0u64; WARP_SIZE];
        for v in &mut row {
            *v = u64::from(t[d]);
            t[0] += 1;
            if t[0] == bx {
                t[0] = 0;
                t[1] += 1;
                if t[1] == by {
                    t[1] = 0;
                    t[2] += 1;
                }
            }
        }
        row
    }

    #[inline(never)]
    fn special(&self, s: Special, lane: usize) -> u64 {
        let ctx = self.ctx;
        let linear = self.warp.index * WARP_SIZE as u32 + lane as u32;
        let lane_bit = 1u64 << lane;
        match s {
            Special::Tid(d) => ctx.tid(linear)[d as usize] as u64,
            Special::Ntid(d) => ctx.block[d as usize] as u64,
            Special::Ctaid(d) => self.tb.ctaid[d as usize] as u64,
            Special::Nctaid(d) => ctx.grid[d as usize] as u64,
            Special::LaneId => lane as u64,
            Special::WarpId => self.warp.index as u64,
            Special::NWarpId => ctx.warps_per_tb() as u64,
            Special::SmId => self.tb.sm as u64,
            Special::NSmId => ctx.num_sms as u64,
            Special::GridId => ctx.grid_id,
            // Timed: the core cycle. Functional: the warp's executed instructions, which is
            // deterministic and monotonic, all a kernel may rely on without a timing model.
            Special::Clock => self.tb.clock.unwrap_or(self.warp.executed) & 0xffff_ffff,
            Special::Clock64 => self.tb.clock.unwrap_or(self.warp.executed),
            Special::GlobalTimer => self.tb.clock.unwrap_or(self.warp.executed),
            Special::LanemaskEq => lane_bit,
            Special::LanemaskLe => (lane_bit << 1).wrapping_sub(1) & 0xffff_ffff,
            Special::LanemaskLt => lane_bit - 1,
            Special::LanemaskGe => !(lane_bit - 1) & 0xffff_ffff,
            Special::LanemaskGt => !((lane_bit << 1).wrapping_sub(1)) & 0xffff_ffff,
            Special::DynamicSmemSize => ctx.dynamic_smem as u64,
            Special::TotalSmemSize => ctx.smem_size as u64,
            Special::EnvReg(_) => 0,
            Special::WarpSmem => ctx.warp_smem(self.warp.index),
        }
    }

    /// Where lane `lane` of this warp is, for an error that stops the kernel.
    fn thread_at(&self, lane: usize) -> Box<crate::error::ThreadAt> {
        let linear = self.warp.index * WARP_SIZE as u32 + lane.min(WARP_SIZE - 1) as u32;
        Box::new(crate::error::ThreadAt {
            kernel: self.ctx.kernel.name.as_str().into(),
            pc: InstId(self.pc),
            location: self.ctx.location(InstId(self.pc)).into(),
            ctaid: self.tb.ctaid,
            tid: self.ctx.tid(linear),
        })
    }

    fn fault(
        &self,
        lane: usize,
        space: Space,
        addr: u64,
        size: u32,
        reason: FaultReason,
    ) -> ExecError {
        let linear = self.warp.index * WARP_SIZE as u32 + lane as u32;
        ExecError::MemoryFault {
            kernel: self.ctx.kernel.name.as_str().into(),
            pc: InstId(self.pc),
            location: self.ctx.location(InstId(self.pc)).into(),
            ctaid: self.tb.ctaid,
            tid: self.ctx.tid(linear),
            space,
            addr,
            size,
            reason,
            nearest: Box::new(crate::error::NearestNote(match reason {
                FaultReason::Global(GlobalFault::Unallocated | GlobalFault::Unmapped) => {
                    self.mem.device().nearest(addr)
                }
                _ => None,
            })),
        }
    }

    /// Resolves a (possibly generic) address to a concrete space and offset.
    #[inline]
    fn resolve(&self, space: Space, addr: u64) -> (Space, u64) {
        match space {
            Space::Generic => match memory::window(addr) {
                Window::Global(a) => (Space::Global, a),
                Window::Shared(a) => (Space::Shared, a),
                Window::Local(a) => (Space::Local, a),
                Window::Param(a) => (Space::Param, a),
            },
            s => (s, addr),
        }
    }

    /// The device addresses and sizes of the words an aligned local access of `size` bytes at
    /// thread offset `a` touches: one, or two for an 8-byte access (local memory interleaves
    /// the lanes of a warp word by word, [`memory::local_word_address`]).
    #[inline]
    fn local_words(&self, a: u64, size: u32, lane: usize) -> ([(u64, u32); 2], usize) {
        let words = u64::from(self.ctx.kernel.local_size.div_ceil(4));
        let at = |off: u64| {
            memory::local_word_address(
                self.tb.local_base,
                words,
                self.warp.index,
                lane as u32,
                off / 4,
            ) + off % 4
        };
        if size > 4 {
            ([(at(a), 4), (at(a + 4), size - 4)], 2)
        } else {
            ([(at(a), size), (0, 0)], 1)
        }
    }

    /// Loads `size` bytes at `addr` for `lane`.
    #[inline]
    fn load(
        &mut self,
        space: Space,
        addr: u64,
        size: u32,
        lane: usize,
        hint: &mut usize,
    ) -> Result<u64, ExecError> {
        let (sp, a) = self.resolve(space, addr);
        if a % size as u64 != 0 {
            return Err(self.fault(lane, space, addr, size, FaultReason::Misaligned));
        }
        let oob = |e: &Self| e.fault(lane, space, addr, size, FaultReason::OutOfBounds);
        match sp {
            Space::Global | Space::Const => self
                .mem
                .device()
                .read(a, size, hint)
                .map_err(|f| self.fault(lane, space, addr, size, FaultReason::Global(f))),
            Space::Shared => slice(self.tb.shared, a, size)
                .map(memory::read_le)
                .ok_or_else(|| oob(self)),
            Space::Local => {
                if a + u64::from(size) > u64::from(self.ctx.kernel.local_size) {
                    return Err(oob(self));
                }
                let mut v = 0u64;
                let (words, n_words) = self.local_words(a, size, lane);
                for (k, &(at, n)) in words[..n_words].iter().enumerate() {
                    let part =
                        self.mem.device().read(at, n, hint).map_err(|f| {
                            self.fault(lane, space, addr, size, FaultReason::Global(f))
                        })?;
                    v |= part << (32 * k);
                }
                Ok(v)
            }
            Space::Param => slice(&self.ctx.params, a, size)
                .map(memory::read_le)
                .ok_or_else(|| oob(self)),
            Space::Generic => unreachable!("resolved above"),
        }
    }

    #[inline]
    fn store(
        &mut self,
        space: Space,
        addr: u64,
        size: u32,
        value: u64,
        lane: usize,
        hint: &mut usize,
    ) -> Result<(), ExecError> {
        let (sp, a) = self.resolve(space, addr);
        if a % size as u64 != 0 {
            return Err(self.fault(lane, space, addr, size, FaultReason::Misaligned));
        }
        let ok = match sp {
            Space::Global => {
                return self
                    .mem
                    .store(a, size, value, hint)
                    .map_err(|f| self.fault(lane, space, addr, size, FaultReason::Global(f)))
            }
            Space::Shared => slice_mut(self.tb.shared, a, size).map(|s| memory::write_le(s, value)),
            Space::Local => {
                if a + u64::from(size) > u64::from(self.ctx.kernel.local_size) {
                    return Err(self.fault(lane, space, addr, size, FaultReason::OutOfBounds));
                }
                let (words, n_words) = self.local_words(a, size, lane);
                for (k, &(at, n)) in words[..n_words].iter().enumerate() {
                    self.mem
                        .store(at, n, value >> (32 * k), hint)
                        .map_err(|f| self.fault(lane, space, addr, size, FaultReason::Global(f)))?;
                }
                return Ok(());
            }
            Space::Const | Space::Param => {
                return Err(self.fault(lane, space, addr, size, FaultReason::ReadOnly))
            }
            Space::Generic => unreachable!("resolved above"),
        };
        ok.ok_or_else(|| self.fault(lane, space, addr, size, FaultReason::OutOfBounds))
    }

    fn execute(&mut self, exec: u32, active: u32) -> Result<(), ExecError> {
        let inst = self.inst;
        let s = &inst.srcs;
        match inst.op {
            Op::Mov(ty) => {
                let m = ty.mask();
                if self.map1(exec, |a| a & m) {
                    return Ok(());
                }
                if let (Operand::Special(Special::Tid(d)), Some(dst)) = (s[0], inst.dsts[0]) {
                    // `%tid`: every lane's coordinate counted up from the warp's first
                    // thread, not divided out of each lane's linear index.
                    let tid = self.tid_row(d as usize);
                    let row = Row::row_mut(&mut self.warp.regs, dst.index() * WARP_SIZE);
                    for l in lanes(exec) {
                        row[l] = tid[l] & m;
                    }
                    return Ok(());
                }
                for l in lanes(exec) {
                    let v = self.read(s[0], l) & m;
                    self.write(0, l, v);
                }
            }
            Op::Arith { op, ty, mode } => self.arith(exec, op, ty, mode),
            Op::Pack { part, count } => {
                let (bits, m) = (part.bits(), part.mask());
                for l in lanes(exec) {
                    let mut v = 0u64;
                    for (k, &op) in s.iter().enumerate().take(count as usize) {
                        v |= (self.read(op, l) & m) << (k as u32 * bits);
                    }
                    self.write(0, l, v);
                }
            }
            Op::Unpack { part, count } => {
                let (bits, m) = (part.bits(), part.mask());
                for l in lanes(exec) {
                    let v = self.read(s[0], l);
                    for k in 0..count as usize {
                        self.write(k, l, (v >> (k as u32 * bits)) & m);
                    }
                }
            }
            Op::Setp {
                cmp,
                combine: comb,
                ty,
                ftz,
            } => {
                if comb.is_none() && inst.n_dsts == 1 && self.fast_setp(exec, cmp, ty, ftz) {
                    return Ok(());
                }
                for l in lanes(exec) {
                    let t = alu::compare(cmp, ty, ftz, self.read(s[0], l), self.read(s[1], l));
                    let (p, q) = match comb {
                        None => (t, !t),
                        Some(op) => {
                            let c = self.read(s[2], l) != 0;
                            (combine(op, t, c), combine(op, !t, c))
                        }
                    };
                    self.write(0, l, p as u64);
                    if inst.n_dsts > 1 {
                        self.write(1, l, q as u64);
                    }
                }
            }
            Op::Set {
                cmp,
                combine: comb,
                dty,
                sty,
                ftz,
            } => {
                // Packed half-precision sources: each half compared on its own, its result
                // (1.0 of the half type, or 0xffff for an integer result) packed in place.
                let halves = match sty {
                    Ty::F16x2 => Some((Ty::F16, if dty == sty { Ty::F16 } else { Ty::U16 })),
                    Ty::Bf16x2 => Some((Ty::Bf16, if dty == sty { Ty::Bf16 } else { Ty::U16 })),
                    _ => None,
                };
                for l in lanes(exec) {
                    let (a, b) = (self.read(s[0], l), self.read(s[1], l));
                    let c = comb.map(|op| (op, self.read(s[2], l) != 0));
                    let one = |sty: Ty, dty: Ty, a: u64, b: u64| {
                        let mut t = alu::compare(cmp, sty, ftz, a, b);
                        if let Some((op, c)) = c {
                            t = combine(op, t, c);
                        }
                        alu::set_value(dty, t)
                    };
                    let v = match halves {
                        Some((h, d)) => {
                            one(h, d, a & 0xffff, b & 0xffff)
                                | one(h, d, (a >> 16) & 0xffff, (b >> 16) & 0xffff) << 16
                        }
                        None => one(sty, dty, a, b),
                    };
                    self.write(0, l, v);
                }
            }
            Op::Selp(ty) => {
                let m = ty.mask();
                if self.map3(exec, |a, b, c| if c != 0 { a & m } else { b & m }) {
                    return Ok(());
                }
                for l in lanes(exec) {
                    let v = if self.read(s[2], l) != 0 {
                        self.read(s[0], l)
                    } else {
                        self.read(s[1], l)
                    };
                    self.write(0, l, v & m);
                }
            }
            Op::Slct { dty, cty, ftz } => {
                let m = dty.mask();
                for l in lanes(exec) {
                    let c = self.read(s[2], l);
                    let pick_a = if cty == Ty::F32 {
                        let f = f32::from_bits(c as u32);
                        let f = if ftz && f.is_subnormal() { 0.0 } else { f };
                        f >= 0.0
                    } else {
                        (c as u32 as i32) >= 0
                    };
                    let v = if pick_a {
                        self.read(s[0], l)
                    } else {
                        self.read(s[1], l)
                    };
                    self.write(0, l, v & m);
                }
            }
            Op::Cvt {
                dty,
                sty,
                rounding,
                ftz,
                sat,
            } => {
                if !sat && alu::is_plain_int(dty) && alu::is_plain_int(sty) {
                    // Integer to integer, the common widening of an index (`cvt.s64.s32`):
                    // extend by the source's signedness, keep the destination's bits —
                    // `alu::cvt`'s answer without its per-lane type dispatch.
                    let keep = dty.mask();
                    if self.map1(exec, |a| sty.extend(a) & keep) {
                        return Ok(());
                    }
                    for l in lanes(exec) {
                        let v = sty.extend(self.read(s[0], l)) & keep;
                        self.write(0, l, v);
                    }
                } else {
                    if self.map1(exec, |a| alu::cvt(dty, sty, rounding, ftz, sat, a)) {
                        return Ok(());
                    }
                    for l in lanes(exec) {
                        let v = alu::cvt(dty, sty, rounding, ftz, sat, self.read(s[0], l));
                        self.write(0, l, v);
                    }
                }
            }
            Op::Testp { kind, ty } => {
                for l in lanes(exec) {
                    let v = alu::testp(kind, ty, self.read(s[0], l));
                    self.write(0, l, v as u64);
                }
            }
            Op::Cvta {
                space,
                to_generic,
                ty,
            } => {
                let window = match space {
                    Space::Shared => memory::SHARED_WINDOW,
                    Space::Local => memory::LOCAL_WINDOW,
                    Space::Param => memory::PARAM_WINDOW,
                    _ => 0,
                };
                let m = ty.mask();
                let convert = move |a: u64| {
                    if to_generic {
                        a.wrapping_add(window) & m
                    } else {
                        a.wrapping_sub(window) & m
                    }
                };
                if self.map1(exec, convert) {
                    return Ok(());
                }
                for l in lanes(exec) {
                    let v = convert(self.read(s[0], l));
                    self.write(0, l, v);
                }
            }
            Op::IsSpace { space } => {
                for l in lanes(exec) {
                    let a = self.read(s[0], l);
                    let v = match (space, memory::window(a)) {
                        (Space::Global | Space::Const, Window::Global(g)) => {
                            self.mem.device().is_mapped(g)
                        }
                        (Space::Shared, Window::Shared(_)) => true,
                        (Space::Local, Window::Local(_)) => true,
                        (Space::Param, Window::Param(_)) => true,
                        _ => false,
                    };
                    self.write(0, l, v as u64);
                }
            }
            Op::Ld {
                space,
                ty,
                vec,
                offset,
                dst_bits,
                ..
            } => {
                let size = ty.size();
                let dmask = if dst_bits >= 64 {
                    u64::MAX
                } else {
                    (1u64 << dst_bits) - 1
                };
                if self.fast_ld(exec, space, ty, vec, offset as i64 as u64, dmask) {
                    return Ok(());
                }
                let mut hint = 0;
                for l in lanes(exec) {
                    let addr = self.read(s[0], l).wrapping_add(offset as i64 as u64);
                    if vec > 1 && !addr.is_multiple_of(size as u64 * vec as u64) {
                        return Err(self.fault(
                            l,
                            space,
                            addr,
                            size * vec as u32,
                            FaultReason::Misaligned,
                        ));
                    }
                    for k in 0..vec as usize {
                        let a = addr.wrapping_add(k as u64 * size as u64);
                        let raw = self.load(space, a, size, l, &mut hint)?;
                        self.write(k, l, ty.extend(raw) & dmask);
                    }
                }
            }
            Op::St {
                space,
                ty,
                vec,
                offset,
            } => {
                let size = ty.size();
                if self.fast_st(exec, space, ty, vec, offset as i64 as u64)? {
                    return Ok(());
                }
                let mut hint = 0;
                for l in lanes(exec) {
                    let addr = self.read(s[0], l).wrapping_add(offset as i64 as u64);
                    if vec > 1 && !addr.is_multiple_of(size as u64 * vec as u64) {
                        return Err(self.fault(
                            l,
                            space,
                            addr,
                            size * vec as u32,
                            FaultReason::Misaligned,
                        ));
                    }
                    for k in 0..vec as usize {
                        let a = addr.wrapping_add(k as u64 * size as u64);
                        let v = self.read(s[k + 1], l);
                        self.store(space, a, size, v, l, &mut hint)?;
                    }
                }
            }
            Op::Atom {
                space,
                op,
                ty,
                offset,
            }
            | Op::Red {
                space,
                op,
                ty,
                offset,
            } => {
                // Lanes perform their read-modify-writes one after another in lane order:
                // the defined order that makes results reproducible.
                let size = ty.size();
                let mut hint = 0;
                let returns = matches!(inst.op, Op::Atom { .. });
                for l in lanes(exec) {
                    let addr = self.read(s[0], l).wrapping_add(offset as i64 as u64);
                    let (sp, a) = self.resolve(space, addr);
                    if let Space::Const | Space::Param | Space::Local = sp {
                        return Err(self.fault(l, space, addr, size, FaultReason::AtomicSpace));
                    }
                    let b = self.read(s[1], l);
                    let c = if op == AtomOp::Cas {
                        self.read(s[2], l)
                    } else {
                        0
                    };
                    if sp == Space::Global {
                        // Global atomics go through the memory view, which may perform them
                        // later (the timed machine: at the end of the cycle, in SM order).
                        if a % u64::from(size) != 0 {
                            return Err(self.fault(l, space, addr, size, FaultReason::Misaligned));
                        }
                        let dest = match inst.dsts[0] {
                            Some(r) if returns => Some((r.index() * WARP_SIZE + l) as u32),
                            _ => None,
                        };
                        let rmw = AtomicRmw {
                            addr: a,
                            op,
                            ty,
                            b,
                            c,
                            dest,
                        };
                        match self.mem.atomic(rmw, &mut hint) {
                            Ok(Some(old)) if returns => self.write(0, l, old),
                            Ok(_) => {}
                            Err(f) => {
                                return Err(self.fault(
                                    l,
                                    space,
                                    addr,
                                    size,
                                    FaultReason::Global(f),
                                ))
                            }
                        }
                        continue;
                    }
                    let old = self.load(space, addr, size, l, &mut hint)?;
                    let new = alu::atom(op, ty, old, b, c);
                    self.store(space, addr, size, new, l, &mut hint)?;
                    if returns {
                        self.write(0, l, old & ty.mask());
                    }
                }
            }
            Op::Vote { mode } => {
                if let (Some(p), Some(Row::Const(member)), Some(d)) =
                    (self.row(0), self.row(1), self.inst.dsts[0])
                {
                    // One member mask for every lane (the usual constant): one vote, its
                    // result written to every active lane.
                    let regs = &mut self.warp.regs;
                    let mut ballot = 0u32;
                    for l in lanes(exec) {
                        ballot |= u32::from(p.get(regs, l) != 0) << l;
                    }
                    let value = vote_value(mode, ballot, exec & member as u32);
                    let row = Row::row_mut(regs, d.index() * WARP_SIZE);
                    for l in lanes(exec) {
                        row[l] = value;
                    }
                    return Ok(());
                }
                // Each lane votes with the lanes of its own member mask (disjoint groups may
                // vote at once, each naming its own lanes).
                let mut ballot = 0u32;
                for l in lanes(exec) {
                    if self.read(s[0], l) != 0 {
                        ballot |= 1 << l;
                    }
                }
                let mut values = [0u64; WARP_SIZE];
                for l in lanes(exec) {
                    values[l] = vote_value(mode, ballot, exec & self.member_mask(s[1], l));
                }
                for l in lanes(exec) {
                    self.write(0, l, values[l]);
                }
            }
            Op::Shfl { mode } => self.shfl(exec, mode),
            Op::Redux { op, ty } => {
                // Each lane reduces over the lanes of its own member mask.
                let mut value = [0u32; WARP_SIZE];
                for l in lanes(exec) {
                    value[l] = self.read(s[0], l) as u32;
                }
                let signed = ty == Ty::S32;
                let mut out = [0u32; WARP_SIZE];
                for l in lanes(exec) {
                    let part = exec & self.member_mask(s[1], l);
                    out[l] = lanes(part)
                        .map(|k| value[k])
                        .reduce(|x, y| match op {
                            ReduxOp::Add => x.wrapping_add(y),
                            ReduxOp::Min if signed => (x as i32).min(y as i32) as u32,
                            ReduxOp::Max if signed => (x as i32).max(y as i32) as u32,
                            ReduxOp::Min => x.min(y),
                            ReduxOp::Max => x.max(y),
                            ReduxOp::And => x & y,
                            ReduxOp::Or => x | y,
                            ReduxOp::Xor => x ^ y,
                        })
                        .unwrap_or(0);
                }
                for l in lanes(exec) {
                    self.write(0, l, u64::from(out[l]));
                }
            }
            Op::Match { all, ty } => {
                // Each lane matches among the lanes of its own member mask.
                let mut value = [0u64; WARP_SIZE];
                for l in lanes(exec) {
                    value[l] = self.read(s[0], l) & ty.mask();
                }
                let mut out = [(0u32, false); WARP_SIZE];
                for l in lanes(exec) {
                    let part = exec & self.member_mask(s[1], l);
                    let same = lanes(part).all(|k| value[k] == value[l]);
                    let d = if all {
                        if same {
                            part
                        } else {
                            0
                        }
                    } else {
                        lanes(part)
                            .filter(|&k| value[k] == value[l])
                            .fold(0u32, |m, k| m | 1 << k)
                    };
                    out[l] = (d, same);
                }
                for l in lanes(exec) {
                    self.write(0, l, u64::from(out[l].0));
                    if inst.n_dsts > 1 {
                        self.write(1, l, u64::from(out[l].1));
                    }
                }
            }
            Op::Elect => {
                let member = self.read(s[0], exec.trailing_zeros().min(31) as usize) as u32;
                let leader = (exec & member).trailing_zeros();
                for l in lanes(exec) {
                    self.write(0, l, u64::from(leader.min(31)));
                    self.write(1, l, u64::from(l as u32 == leader));
                }
            }
            // A guard that holds in no lane executes nothing.
            Op::Trap | Op::UnmatchedTarget(_) if exec == 0 => {}
            Op::Trap => {
                let at = self.thread_at(exec.trailing_zeros() as usize);
                return Err(ExecError::Trap { at });
            }
            Op::UnmatchedTarget(kind) => {
                let lane = exec.trailing_zeros() as usize;
                return Err(ExecError::UnmatchedTarget {
                    at: self.thread_at(lane),
                    kind,
                    value: self.read(s[0], lane),
                });
            }
            Op::Tex {
                geom,
                dty,
                cty,
                gather,
            } => self.tex(exec, geom, dty, cty, gather)?,
            Op::Activemask => {
                for l in lanes(exec) {
                    self.write(0, l, active as u64);
                }
            }
            Op::Mma {
                shape,
                a,
                b,
                c,
                d,
                satfinite,
            } => self.mma(exec, shape, (a, b, c, d), satfinite)?,
            Op::WmmaLoad {
                shape,
                frag,
                elem,
                row_major,
                space,
                offset,
                part,
            } => self.wmma_load(exec, shape, frag, elem, row_major, space, offset, part)?,
            Op::WmmaStore {
                shape,
                elem,
                row_major,
                space,
                offset,
                part,
            } => self.wmma_store(exec, shape, elem, row_major, space, offset, part)?,
            Op::Ldmatrix {
                count,
                trans,
                space,
                offset,
            } => self.ldmatrix(exec, count, trans, space, offset)?,
            Op::Stmatrix {
                count,
                trans,
                space,
                offset,
            } => self.stmatrix(exec, count, trans, space, offset)?,
            Op::CpAsync {
                bytes,
                dst_offset,
                src_offset,
                src_size,
                ignore_src,
                ..
            } => self.cp_async(exec, bytes, dst_offset, src_offset, src_size, ignore_src)?,
            Op::CvtPack {
                dty,
                rounding,
                relu,
                satfinite,
            } => self.cvt_pack(exec, dty, rounding, relu, satfinite),
            Op::CvtFp8 {
                format,
                to_f16x2,
                from_f16x2,
                relu,
            } => self.cvt_fp8(exec, format, to_f16x2, from_f16x2, relu),
            Op::CvtTf32 {
                rounding,
                away,
                relu,
                satfinite,
            } => self.cvt_tf32(exec, rounding, away, relu, satfinite),
            Op::Mbarrier { op, space, offset } => self.mbarrier(exec, op, space, offset)?,
            // Sleeping changes no value; the timing model suspends the warp.
            Op::Nanosleep => {}
            // The copies are done when issued (see `cp_async`); groups matter to timing only.
            Op::CpAsyncCommit | Op::CpAsyncWait { .. } => {}
            // Preemption points act only when a preemption is pending, which the functional
            // core never has.
            Op::Fence | Op::Nop | Op::Pp { .. } | Op::PpDivergent { .. } => {}
            Op::Bra { .. } | Op::Exit | Op::Bar { .. } => unreachable!("handled by step"),
        }
        Ok(())
    }

    #[inline]
    fn arith(&mut self, exec: u32, op: ArithOp, ty: Ty, mode: kir::inst::FloatMode) {
        if self.fast_arith(exec, op, ty, mode) {
            return;
        }
        let s = self.inst.srcs;
        if let ArithOp::AddC { .. } | ArithOp::SubC { .. } | ArithOp::MadC { .. } = op {
            if self.fast_carry(exec, op, ty) {
                return;
            }
            let (n, carry_out) = (self.inst.n_srcs as usize, self.inst.n_dsts > 1);
            for l in lanes(exec) {
                let x = [
                    self.read(s[0], l),
                    self.read(s[1], l),
                    self.read(s[2], l),
                    self.read(s[3], l),
                ];
                let (v, cf) = alu::carry(op, ty, x, x[n.saturating_sub(1)] & 1 == 1);
                self.write(0, l, v);
                if carry_out {
                    self.write(1, l, u64::from(cf));
                }
            }
            return;
        }
        // Unsupported type combinations are rejected when the module is loaded
        // (`crate::validate`), so an error cannot reach here.
        let row = |k: usize| match s[k] {
            Operand::None => Some(Row::Const(0)),
            _ => self.row(k),
        };
        if let (Some(a), Some(b), Some(c), Some(d)) = (row(0), row(1), row(2), row(3)) {
            // Register and constant operands: each lane's `alu::arith` without the
            // per-lane operand dispatch (a lane reads and writes only its own slots).
            let Some(dst) = self.inst.dsts[0] else {
                return;
            };
            let (regs, dst) = (&mut self.warp.regs, dst.index() * WARP_SIZE);
            for l in lanes(exec) {
                let (a, b, c, d) = (
                    a.get(regs, l),
                    b.get(regs, l),
                    c.get(regs, l),
                    d.get(regs, l),
                );
                regs[dst + l] = alu::arith(op, ty, mode, a, b, c, d).unwrap_or(0);
            }
            return;
        }
        for l in lanes(exec) {
            let a = self.read(s[0], l);
            let b = self.read(s[1], l);
            let c = self.read(s[2], l);
            let d = self.read(s[3], l);
            let v = alu::arith(op, ty, mode, a, b, c, d).unwrap_or(0);
            self.write(0, l, v);
        }
    }

    /// The most frequent operations, decoded once per warp instruction and applied over
    /// register rows, so a full warp's loop has no per-lane dispatch (and vectorises). Each
    /// closure computes exactly what `alu::arith` computes for that op and type: results
    /// masked to the type, float NaNs canonical. Returns false when the instruction needs the
    /// general path (other ops, modifiers, or operands that are not registers or constants).
    #[inline]
    fn fast_arith(&mut self, exec: u32, op: ArithOp, ty: Ty, mode: kir::inst::FloatMode) -> bool {
        use alu::{canon32, canon64};
        use ArithOp::*;
        const M32: u64 = 0xffff_ffff;
        let plain = mode == kir::inst::FloatMode::default();
        let w32 = matches!(ty, Ty::B32 | Ty::U32 | Ty::S32);
        let w64 = matches!(ty, Ty::B64 | Ty::U64 | Ty::S64);
        #[inline(always)]
        fn f32v(x: u64) -> f32 {
            f32::from_bits(x as u32)
        }
        match op {
            Add if w32 && !mode.sat => self.map2(exec, |a, b| a.wrapping_add(b) & M32),
            Add if w64 => self.map2(exec, |a, b| a.wrapping_add(b)),
            Sub if w32 && !mode.sat => self.map2(exec, |a, b| a.wrapping_sub(b) & M32),
            Sub if w64 => self.map2(exec, |a, b| a.wrapping_sub(b)),
            MulLo if w32 => self.map2(exec, |a, b| a.wrapping_mul(b) & M32),
            MulLo if w64 => self.map2(exec, |a, b| a.wrapping_mul(b)),
            MadLo if w32 && !mode.sat => {
                self.map3(exec, |a, b, c| a.wrapping_mul(b).wrapping_add(c) & M32)
            }
            MadLo if w64 => self.map3(exec, |a, b, c| a.wrapping_mul(b).wrapping_add(c)),
            MulWide if ty == Ty::S32 => self.map2(exec, |a, b| {
                ((a as u32 as i32 as i64) * (b as u32 as i32 as i64)) as u64
            }),
            MulWide if ty == Ty::U32 => self.map2(exec, |a, b| (a & M32) * (b & M32)),
            MadWide if ty == Ty::S32 => self.map3(exec, |a, b, c| {
                ((a as u32 as i32 as i64) * (b as u32 as i32 as i64)).wrapping_add(c as i64) as u64
            }),
            MadWide if ty == Ty::U32 => {
                self.map3(exec, |a, b, c| ((a & M32) * (b & M32)).wrapping_add(c))
            }
            And if w32 => self.map2(exec, |a, b| a & b & M32),
            And if w64 => self.map2(exec, |a, b| a & b),
            Or if w32 => self.map2(exec, |a, b| (a | b) & M32),
            Or if w64 => self.map2(exec, |a, b| a | b),
            Xor if w32 => self.map2(exec, |a, b| (a ^ b) & M32),
            Xor if w64 => self.map2(exec, |a, b| a ^ b),
            Not if w32 => self.map1(exec, |a| !a & M32),
            Not if w64 => self.map1(exec, |a| !a),
            // Predicates are one bit (`alu::arith` masks `.pred` results to bit 0).
            And if ty == Ty::Pred => self.map2(exec, |a, b| a & b & 1),
            Or if ty == Ty::Pred => self.map2(exec, |a, b| (a | b) & 1),
            Xor if ty == Ty::Pred => self.map2(exec, |a, b| (a ^ b) & 1),
            Not if ty == Ty::Pred => self.map1(exec, |a| !a & 1),
            Popc if w32 => self.map1(exec, |a| u64::from((a & M32).count_ones())),
            Popc if w64 => self.map1(exec, |a| u64::from(a.count_ones())),
            // Shift amounts are the low 32 bits of `b`, read as unsigned; amounts of the
            // width or more shift everything out (PTX ISA "shl", "shr").
            Shl if w32 => self.map2(exec, |a, b| {
                let n = b & M32;
                if n >= 32 {
                    0
                } else {
                    (a << n) & M32
                }
            }),
            Shl if w64 => self.map2(exec, |a, b| {
                let n = b & M32;
                if n >= 64 {
                    0
                } else {
                    a << n
                }
            }),
            Shr if ty == Ty::S32 => self.map2(exec, |a, b| {
                let n = (b & M32).min(31);
                ((a as u32 as i32) >> n) as u32 as u64
            }),
            Shr if w32 => self.map2(exec, |a, b| {
                let n = b & M32;
                if n >= 32 {
                    0
                } else {
                    (a & M32) >> n
                }
            }),
            Shr if ty == Ty::S64 => {
                self.map2(exec, |a, b| ((a as i64) >> (b & M32).min(63)) as u64)
            }
            Shr if w64 => self.map2(exec, |a, b| {
                let n = b & M32;
                if n >= 64 {
                    0
                } else {
                    a >> n
                }
            }),
            Min if ty == Ty::S32 => self.map2(exec, |a, b| {
                (a as u32 as i32).min(b as u32 as i32) as u32 as u64
            }),
            Max if ty == Ty::S32 => self.map2(exec, |a, b| {
                (a as u32 as i32).max(b as u32 as i32) as u32 as u64
            }),
            Min if ty == Ty::U32 => self.map2(exec, |a, b| (a & M32).min(b & M32)),
            Max if ty == Ty::U32 => self.map2(exec, |a, b| (a & M32).max(b & M32)),
            MulHi if ty == Ty::S32 => self.map2(exec, |a, b| {
                (((a as u32 as i32 as i64) * (b as u32 as i32 as i64)) >> 32) as u64 & M32
            }),
            MulHi if ty == Ty::U32 => self.map2(exec, |a, b| ((a & M32) * (b & M32)) >> 32),
            // `abs` and `neg` touch only the sign bit, NaNs included.
            Abs if ty == Ty::F32 && plain => self.map1(exec, |a| a & 0x7fff_ffff),
            Neg if ty == Ty::F32 && plain => self.map1(exec, |a| (a & M32) ^ 0x8000_0000),
            Abs if ty == Ty::F64 && plain => self.map1(exec, |a| a & !(1 << 63)),
            Neg if ty == Ty::F64 && plain => self.map1(exec, |a| a ^ (1 << 63)),
            Min if ty == Ty::F32 && plain => {
                self.map2(exec, |a, b| alu::min_max_f32(a & M32, b & M32, false))
            }
            Max if ty == Ty::F32 && plain => {
                self.map2(exec, |a, b| alu::min_max_f32(a & M32, b & M32, true))
            }
            Div if ty == Ty::F32 && plain => self.map2(exec, |a, b| canon32(f32v(a) / f32v(b))),
            Rcp if ty == Ty::F32 && plain => self.map1(exec, |a| canon32(1.0 / f32v(a))),
            Sqrt if ty == Ty::F32 && plain => self.map1(exec, |a| canon32(f32v(a).sqrt())),
            Div if ty == Ty::F64 && plain => {
                self.map2(exec, |a, b| canon64(f64::from_bits(a) / f64::from_bits(b)))
            }
            Add if ty == Ty::F32 && plain => self.map2(exec, |a, b| canon32(f32v(a) + f32v(b))),
            Sub if ty == Ty::F32 && plain => self.map2(exec, |a, b| canon32(f32v(a) - f32v(b))),
            Mul if ty == Ty::F32 && plain => self.map2(exec, |a, b| canon32(f32v(a) * f32v(b))),
            Fma if ty == Ty::F32 && plain => {
                self.map3(exec, |a, b, c| canon32(f32v(a).mul_add(f32v(b), f32v(c))))
            }
            Add if ty == Ty::F64 && plain => {
                self.map2(exec, |a, b| canon64(f64::from_bits(a) + f64::from_bits(b)))
            }
            Mul if ty == Ty::F64 && plain => {
                self.map2(exec, |a, b| canon64(f64::from_bits(a) * f64::from_bits(b)))
            }
            Fma if ty == Ty::F64 && plain => self.map3(exec, |a, b, c| {
                canon64(f64::from_bits(a).mul_add(f64::from_bits(b), f64::from_bits(c)))
            }),
            _ => false,
        }
    }

    /// Applies `f` to the first two sources of every lane in `exec`, writing the destination.
    #[inline(always)]
    fn map2(&mut self, exec: u32, f: impl Fn(u64, u64) -> u64) -> bool {
        let (Some(a), Some(b)) = (self.row(0), self.row(1)) else {
            return false;
        };
        let Some(d) = self.inst.dsts[0] else {
            return true;
        };
        let d = d.index() * WARP_SIZE;
        let regs = &mut self.warp.regs;
        if exec == u32::MAX {
            // Whole rows: the sources copied out first (a destination may be a source), so
            // the loop has no per-lane operand dispatch or bounds check, and vectorises.
            let (a, b) = (a.lanes(regs), b.lanes(regs));
            let out = Row::row_mut(regs, d);
            for l in 0..WARP_SIZE {
                out[l] = f(a[l], b[l]);
            }
        } else {
            for l in lanes(exec) {
                regs[d + l] = f(a.get(regs, l), b.get(regs, l));
            }
        }
        true
    }

    /// As [`Exec::map2`], with three sources.
    #[inline(always)]
    fn map3(&mut self, exec: u32, f: impl Fn(u64, u64, u64) -> u64) -> bool {
        let (Some(a), Some(b), Some(c)) = (self.row(0), self.row(1), self.row(2)) else {
            return false;
        };
        let Some(d) = self.inst.dsts[0] else {
            return true;
        };
        let d = d.index() * WARP_SIZE;
        let regs = &mut self.warp.regs;
        if exec == u32::MAX {
            // As in `map2`.
            let (a, b, c) = (a.lanes(regs), b.lanes(regs), c.lanes(regs));
            let out = Row::row_mut(regs, d);
            for l in 0..WARP_SIZE {
                out[l] = f(a[l], b[l], c[l]);
            }
        } else {
            for l in lanes(exec) {
                regs[d + l] = f(a.get(regs, l), b.get(regs, l), c.get(regs, l));
            }
        }
        true
    }

    /// Extended-precision arithmetic (`add.cc addc sub.cc subc mad.cc madc`, PTX ISA
    /// "Extended-Precision Integer Arithmetic Instructions") with its operands' rows
    /// decoded once and `alu::carry` inlined for one known operation and type per loop:
    /// what the general path's per-lane reads and `alu::carry` compute. The carry flag is
    /// the last source; a second destination receives the carry out. Returns false when it
    /// does not apply (an operand that is not a register, a constant or absent).
    #[inline]
    fn fast_carry(&mut self, exec: u32, op: ArithOp, ty: Ty) -> bool {
        let n = self.inst.n_srcs as usize;
        // An absent operand reads as 0 (`Exec::read`).
        let row = |k: usize| match self.inst.srcs[k] {
            Operand::None => Some(Row::Const(0)),
            _ => self.row(k),
        };
        let (Some(a), Some(b), Some(c), Some(cf)) = (row(0), row(1), row(2), row(n.max(1) - 1))
        else {
            return false;
        };
        let rows = [a, b, c, cf];
        let at = |k: usize| self.inst.dsts[k].map(|r| r.index() * WARP_SIZE);
        let dsts = (at(0), if self.inst.n_dsts > 1 { at(1) } else { None });
        macro_rules! typed {
            ($ty:expr) => {
                match op {
                    ArithOp::AddC { carry_in } => self.carry_by(exec, rows, dsts, |x, cf| {
                        alu::carry(ArithOp::AddC { carry_in }, $ty, x, cf)
                    }),
                    ArithOp::SubC { carry_in } => self.carry_by(exec, rows, dsts, |x, cf| {
                        alu::carry(ArithOp::SubC { carry_in }, $ty, x, cf)
                    }),
                    ArithOp::MadC { hi, carry_in } => self.carry_by(exec, rows, dsts, |x, cf| {
                        alu::carry(ArithOp::MadC { hi, carry_in }, $ty, x, cf)
                    }),
                    _ => return false,
                }
            };
        }
        match ty {
            Ty::U32 => typed!(Ty::U32),
            Ty::S32 => typed!(Ty::S32),
            Ty::U64 => typed!(Ty::U64),
            Ty::S64 => typed!(Ty::S64),
            _ => return false,
        }
        true
    }

    /// [`Exec::fast_carry`]'s loop over the lanes for one operation `f`.
    #[inline(always)]
    fn carry_by(
        &mut self,
        exec: u32,
        [a, b, c, cf]: [Row; 4],
        (d, carry): (Option<usize>, Option<usize>),
        f: impl Fn([u64; 4], bool) -> (u64, bool),
    ) {
        let regs = &mut self.warp.regs;
        for l in lanes(exec) {
            let x = [a.get(regs, l), b.get(regs, l), c.get(regs, l), 0];
            let (v, out) = f(x, cf.get(regs, l) & 1 == 1);
            if let Some(d) = d {
                regs[d + l] = v;
            }
            if let Some(d) = carry {
                regs[d + l] = u64::from(out);
            }
        }
    }

    /// `setp` without a combining predicate or a second destination, on a type whose
    /// comparison is a plain one (`alu::SetpKind`): one loop per operator and kind, no
    /// per-lane dispatch, the answer `alu::compare`'s (checked in `alu::prop_tests`).
    /// Returns false when it does not apply.
    #[inline]
    fn fast_setp(&mut self, exec: u32, cmp: kir::inst::Cmp, ty: Ty, ftz: bool) -> bool {
        use alu::SetpKind as K;
        match K::of(cmp, ty, ftz) {
            Some(K::U32) => self.setp_by(exec, cmp, K::key_u32),
            Some(K::S32) => self.setp_by(exec, cmp, K::key_s32),
            Some(K::U64) => self.setp_by(exec, cmp, K::key_u64),
            Some(K::S64) => self.setp_by(exec, cmp, K::key_s64),
            Some(K::F32) => self.setp_by(exec, cmp, K::key_f32),
            Some(K::F64) => self.setp_by(exec, cmp, K::key_f64),
            None => false,
        }
    }

    /// [`Exec::fast_setp`] for one key: the operator is matched once, outside the lanes.
    #[inline(always)]
    fn setp_by<T: PartialOrd + Copy>(
        &mut self,
        exec: u32,
        cmp: kir::inst::Cmp,
        key: impl Fn(u64) -> T + Copy,
    ) -> bool {
        use alu::plain_compare as pc;
        use kir::inst::Cmp as C;
        macro_rules! by {
            ($($c:ident),*) => {
                match cmp {
                    $(C::$c => self.map2(exec, move |a, b| u64::from(pc(C::$c, key(a), key(b)))),)*
                }
            };
        }
        by!(Eq, Ne, Lt, Le, Gt, Ge, Lo, Ls, Hi, Hs, Num, Nan, Equ, Neu, Ltu, Leu, Gtu, Geu)
    }

    /// As [`Exec::map2`], with one source.
    #[inline(always)]
    fn map1(&mut self, exec: u32, f: impl Fn(u64) -> u64) -> bool {
        let Some(a) = self.row(0) else {
            return false;
        };
        let Some(d) = self.inst.dsts[0] else {
            return true;
        };
        let d = d.index() * WARP_SIZE;
        let regs = &mut self.warp.regs;
        if exec == u32::MAX {
            let a = a.lanes(regs);
            let out = Row::row_mut(regs, d);
            for l in 0..WARP_SIZE {
                out[l] = f(a[l]);
            }
        } else {
            for l in lanes(exec) {
                regs[d + l] = f(a.get(regs, l));
            }
        }
        true
    }

    /// Each active lane's address of a `ld`/`st` of `vec` elements of `size` bytes at
    /// source 0 plus `offset`, into `addrs`, and the range from the lowest to one past the
    /// highest element; `None` unless source 0 is a register row or a constant, some lane
    /// is active, every address is aligned to the whole access (a power of two of at most
    /// 8-byte elements) and the range does not wrap.
    #[inline]
    fn lane_addresses(
        &self,
        exec: u32,
        size: u64,
        vec: u8,
        offset: u64,
        addrs: &mut [u64; WARP_SIZE],
    ) -> Option<(u64, u64)> {
        let base = self.row(0)?;
        let span = size * u64::from(vec);
        if exec == 0 || size > 8 || !span.is_power_of_two() {
            return None;
        }
        let regs = &self.warp.regs[..];
        let (mut lo, mut hi, mut misaligned) = (u64::MAX, 0u64, 0u64);
        if exec == u32::MAX {
            // A whole warp: branch-free passes (they vectorise), the register's lanes read in
            // place (an array of them by value is a `memcpy`).
            match base {
                Row::Reg(row) => {
                    for (d, &v) in addrs.iter_mut().zip(&regs[row..row + WARP_SIZE]) {
                        *d = v.wrapping_add(offset);
                    }
                }
                Row::Const(v) => *addrs = [v.wrapping_add(offset); WARP_SIZE],
            }
            for &a in addrs.iter() {
                lo = lo.min(a);
                hi = hi.max(a);
                misaligned |= a & (span - 1);
            }
        } else {
            for l in lanes(exec) {
                let a = base.get(regs, l).wrapping_add(offset);
                addrs[l] = a;
                lo = lo.min(a);
                hi = hi.max(a);
                misaligned |= a & (span - 1);
            }
        }
        let end = hi.checked_add(span)?;
        (misaligned == 0).then_some((lo, end))
    }

    /// Where the active lanes of a `ld`/`st` of `vec` elements of `size` bytes at source 0
    /// plus `offset` go, when one check covers them all: every lane's address aligned to
    /// the whole access, and all of them, resolved, in one region that holds every byte —
    /// the TB's shared memory, the kernel's parameters, or one live allocation of device
    /// memory (global or constant space). Fills `addrs` (the unresolved address per active
    /// lane) and returns where they go; `None` (nothing changed) when any lane needs the
    /// general path's per-lane checks: a fault to report, local memory, a generic address
    /// outside one window, a source that is not a register row or constant.
    #[inline]
    fn uniform_region(
        &self,
        exec: u32,
        space: Space,
        size: u64,
        vec: u8,
        offset: u64,
        addrs: &mut [u64; WARP_SIZE],
        hint: &mut usize,
    ) -> Option<Uniform> {
        let (lo, end) = self.lane_addresses(exec, size, vec, offset, addrs)?;
        let (region, shift) = match space {
            Space::Global | Space::Const => (Region::Device, 0),
            Space::Shared => (Region::Shared, 0),
            Space::Param => (Region::Param, 0),
            Space::Generic => match generic_range_space(lo, end)? {
                Space::Global => (Region::Device, 0),
                Space::Shared => (Region::Shared, memory::SHARED_WINDOW),
                Space::Param => (Region::Param, memory::PARAM_WINDOW),
                _ => return None,
            },
            _ => return None,
        };
        let (lo, end) = (lo - shift, end - shift);
        let fits = match region {
            Region::Shared => end <= self.tb.shared.len() as u64,
            Region::Param => end <= self.ctx.params.len() as u64,
            Region::Device => self.mem.device().span(lo, end - lo, hint).is_some(),
        };
        fits.then_some(Uniform {
            region,
            lo,
            len: end - lo,
            shift,
        })
    }

    /// Where a warp's local `ld`/`st` of `vec` elements of `size` bytes at source 0 plus
    /// `offset` goes, when one check covers every active lane: the device address of the
    /// warp's local frame (its lanes' words interleaved, [`memory::local_word_address`]),
    /// with each lane's offset in its thread's local memory in `offs`. `None` (nothing changed)
    /// unless the access is to local memory (a generic one with both ends in the local
    /// window), every offset is aligned to the whole access and ends inside the thread's
    /// local memory, and the warp's frame lies in one live allocation (`hint` caches it).
    #[inline]
    fn local_frame(
        &self,
        exec: u32,
        space: Space,
        size: u64,
        vec: u8,
        offset: u64,
        offs: &mut [u64; WARP_SIZE],
        hint: &mut usize,
    ) -> Option<u64> {
        if !matches!(space, Space::Local | Space::Generic) || self.ctx.kernel.local_size == 0 {
            return None;
        }
        let (lo, end) = self.lane_addresses(exec, size, vec, offset, offs)?;
        let shift = match space {
            Space::Local => 0,
            _ if generic_range_space(lo, end) == Some(Space::Local) => memory::LOCAL_WINDOW,
            _ => return None,
        };
        if end - shift > u64::from(self.ctx.kernel.local_size) {
            return None;
        }
        if shift != 0 {
            for l in lanes(exec) {
                offs[l] -= shift;
            }
        }
        let frame = memory::local_word_address(
            self.tb.local_base,
            u64::from(self.ctx.kernel.local_size.div_ceil(4)),
            self.warp.index,
            0,
            0,
        );
        let fits = self
            .mem
            .device()
            .span(frame, self.local_frame_len(), hint)
            .is_some();
        fits.then_some(frame)
    }

    /// Bytes of one warp's local frame: every word of its 32 threads.
    #[inline]
    fn local_frame_len(&self) -> u64 {
        u64::from(self.ctx.kernel.local_size.div_ceil(4)) * 4 * WARP_SIZE as u64
    }

    /// `ld` through [`Exec::uniform_region`]: each active lane's elements read straight
    /// from the region's bytes, in the order and with the values `load` gives. `false` when
    /// the general path must run (it then does what it always did: nothing was written).
    #[inline]
    fn fast_ld(
        &mut self,
        exec: u32,
        space: Space,
        ty: Ty,
        vec: u8,
        offset: u64,
        dmask: u64,
    ) -> bool {
        let size = ty.size() as u64;
        let (mut addrs, mut hint) = ([0u64; WARP_SIZE], 0);
        if let Some(frame) = self.local_frame(exec, space, size, vec, offset, &mut addrs, &mut hint)
        {
            let device = self.mem.device();
            let bytes = device
                .span(frame, self.local_frame_len(), &mut hint)
                .expect("checked by local_frame");
            let regs = &mut self.warp.regs;
            for k in 0..vec as usize {
                let Some(d) = self.inst.dsts[k] else { continue };
                let d = d.index() * WARP_SIZE;
                for l in lanes(exec) {
                    let raw = local_read(bytes, addrs[l] + k as u64 * size, size, l);
                    regs[d + l] = ty.extend(raw) & dmask;
                }
            }
            return true;
        }
        let Some(Uniform {
            region,
            lo,
            len,
            shift,
        }) = self.uniform_region(exec, space, size, vec, offset, &mut addrs, &mut hint)
        else {
            return false;
        };
        let bytes: &[u8] = match region {
            Region::Shared => &self.tb.shared[lo as usize..][..len as usize],
            Region::Param => &self.ctx.params[lo as usize..][..len as usize],
            Region::Device => self
                .mem
                .device()
                .span(lo, len, &mut hint)
                .expect("checked by uniform_region"),
        };
        // The lanes' offsets into `bytes` are taken from their unresolved addresses.
        let lo = lo + shift;
        let regs = &mut self.warp.regs;
        // Every lane at one address (a parameter, say): one read per element.
        let same = len == size * u64::from(vec);
        for k in 0..vec as usize {
            let Some(d) = self.inst.dsts[k] else { continue };
            let row = Row::row_mut(regs, d.index() * WARP_SIZE);
            let at = k as u64 * size;
            if same {
                let off = at as usize;
                let v = ty.extend(memory::read_le(&bytes[off..off + size as usize])) & dmask;
                for l in lanes(exec) {
                    row[l] = v;
                }
            } else {
                gather(row, bytes, exec, ty, dmask, |l| {
                    (addrs[l] - lo + at) as usize
                });
            }
        }
        true
    }

    /// `st` through [`Exec::uniform_region`]: each active lane's elements stored in lane
    /// order, element by element, as `store` stores them (shared memory written in place,
    /// global writes handed to the memory one by one), without its per-lane checks. `Ok(false)`
    /// when the general path must run (nothing was stored).
    #[inline]
    fn fast_st(
        &mut self,
        exec: u32,
        space: Space,
        ty: Ty,
        vec: u8,
        offset: u64,
    ) -> Result<bool, ExecError> {
        let size = ty.size() as u64;
        let mut rows = [Row::Const(0); 4];
        for (k, row) in rows.iter_mut().enumerate().take(vec as usize) {
            let Some(r) = self.row(k + 1) else {
                return Ok(false);
            };
            *row = r;
        }
        let (mut addrs, mut hint) = ([0u64; WARP_SIZE], 0);
        if let Some(frame) = self.local_frame(exec, space, size, vec, offset, &mut addrs, &mut hint)
        {
            // Each lane's words stored in the per-lane path's order (lane, element, word),
            // all in the frame `local_frame` found in one live allocation.
            let words = size.div_ceil(4);
            if exec == u32::MAX && size >= 4 && addrs.iter().all(|&a| a == addrs[0]) {
                // Every lane at one thread offset: each word of each element is a row of
                // the lanes' words side by side (the frame interleaves them), stored at
                // once; no two lanes' words overlap, so the order does not matter.
                let mut buf = [0u8; 4 * WARP_SIZE];
                for (k, row) in rows.iter().enumerate().take(vec as usize) {
                    let a = addrs[0] + k as u64 * size;
                    for j in 0..words {
                        for (l, word) in buf.chunks_exact_mut(4).enumerate() {
                            let v = row.get(&self.warp.regs, l) >> (32 * j);
                            word.copy_from_slice(&(v as u32).to_le_bytes());
                        }
                        let (at, _) = local_word(frame, a + 4 * j, 4, 0);
                        self.mem.store_bytes_in_span(at, &buf, &mut hint);
                    }
                }
                return Ok(true);
            }
            for l in lanes(exec) {
                for (k, row) in rows.iter().enumerate().take(vec as usize) {
                    let v = row.get(&self.warp.regs, l);
                    let a = addrs[l] + k as u64 * size;
                    for j in 0..words {
                        let (at, n) = local_word(frame, a + 4 * j, size.min(4), l);
                        self.mem
                            .store_in_span(at, n as u32, v >> (32 * j), &mut hint);
                    }
                }
            }
            return Ok(true);
        }
        let Some(Uniform { region, shift, .. }) =
            self.uniform_region(exec, space, size, vec, offset, &mut addrs, &mut hint)
        else {
            return Ok(false);
        };
        match region {
            // A store to the parameter space faults: the general path names it.
            Region::Param => return Ok(false),
            Region::Shared => {
                let regs = &self.warp.regs;
                let shared = &mut *self.tb.shared;
                for l in lanes(exec) {
                    for (k, row) in rows.iter().enumerate().take(vec as usize) {
                        let a = (addrs[l] - shift + k as u64 * size) as usize;
                        memory::write_le(&mut shared[a..a + size as usize], row.get(regs, l));
                    }
                }
            }
            // Every lane's bytes lie in the span `uniform_region` found in one allocation.
            Region::Device => {
                let n = size as usize;
                if vec == 1
                    && exec == u32::MAX
                    && (1..WARP_SIZE).all(|l| addrs[l] == addrs[0] + l as u64 * size)
                {
                    // The lanes' elements side by side (a coalesced store): one row of
                    // bytes, as the lanes' stores one after another leave it.
                    let mut buf = [0u8; 8 * WARP_SIZE];
                    for (l, e) in buf[..n * WARP_SIZE].chunks_exact_mut(n).enumerate() {
                        memory::write_le(e, rows[0].get(&self.warp.regs, l));
                    }
                    self.mem
                        .store_bytes_in_span(addrs[0], &buf[..n * WARP_SIZE], &mut hint);
                    return Ok(true);
                }
                for l in lanes(exec) {
                    for (k, row) in rows.iter().enumerate().take(vec as usize) {
                        let a = addrs[l] + k as u64 * size;
                        let v = row.get(&self.warp.regs, l);
                        self.mem.store_in_span(a, size as u32, v, &mut hint);
                    }
                }
            }
        }
        Ok(true)
    }

    /// Source `k` as a register row or a lane-invariant constant, if it is one of those.
    #[inline(always)]
    fn row(&self, k: usize) -> Option<Row> {
        match self.inst.srcs[k] {
            Operand::Reg(r) => Some(Row::Reg(r.index() * WARP_SIZE)),
            Operand::Imm(v) => Some(Row::Const(v)),
            Operand::GlobalAddr(g, off) => Some(Row::Const(
                self.ctx.global_addrs[g.index()].wrapping_add(off as u64),
            )),
            _ => None,
        }
    }

    /// `shfl.sync`: PTX ISA "Parallel Synchronization and Communication Instructions: shfl".
    fn shfl(&mut self, exec: u32, mode: ShflMode) {
        let s = self.inst.srcs;
        let mut out = [(0u64, false); WARP_SIZE];
        if let (Some(a), Some(b), Some(c)) = (self.row(0), self.row(1), self.row(2)) {
            // Register and constant operands (the usual `shfl.sync.bfly.b32 r, r, 16, 31`):
            // read without the per-lane operand dispatch.
            let regs = &self.warp.regs;
            for lane in lanes(exec) {
                let (src, pval) = shfl_source(mode, lane, b.get(regs, lane), c.get(regs, lane));
                out[lane] = (a.get(regs, src) & 0xffff_ffff, pval);
            }
        } else {
            for lane in lanes(exec) {
                let (src, pval) =
                    shfl_source(mode, lane, self.read(s[1], lane), self.read(s[2], lane));
                out[lane] = (self.read(s[0], src) & 0xffff_ffff, pval);
            }
        }
        for l in lanes(exec) {
            self.write(0, l, out[l].0);
            if self.inst.n_dsts > 1 {
                self.write(1, l, out[l].1 as u64);
            }
        }
    }

    fn barrier(&mut self, kind: BarKind, exec: u32) -> Result<Option<BarrierArrival>, ExecError> {
        if exec == 0 {
            return Ok(None);
        }
        let s = self.inst.srcs;
        let first = exec.trailing_zeros() as usize;
        let id = self.read(s[0], first) as u32;
        let count = match s[1] {
            Operand::None => None,
            op => Some(self.read(op, first) as u32),
        };
        if id >= 16 {
            return Err(ExecError::BadBarrier {
                kernel: self.ctx.kernel.name.clone(),
                location: self.ctx.location(InstId(self.pc)),
                what: format!("barrier id {id} is out of range (0..16)"),
            });
        }
        if let Some(c) = count {
            if c == 0
                || c % WARP_SIZE as u32 != 0
                || c > self.ctx.threads_per_tb().next_multiple_of(32)
            {
                return Err(ExecError::BadBarrier {
                    kernel: self.ctx.kernel.name.clone(),
                    location: self.ctx.location(InstId(self.pc)),
                    what: format!("barrier thread count {c} must be a non-zero multiple of 32 no larger than the TB"),
                });
            }
        }
        let reduction = match kind {
            BarKind::RedPopc | BarKind::RedAnd | BarKind::RedOr => {
                let mut trues = 0u32;
                for l in lanes(exec) {
                    if self.read(s[2], l) != 0 {
                        trues += 1;
                    }
                }
                let n = exec.count_ones();
                let partial = match kind {
                    BarKind::RedPopc => trues,
                    BarKind::RedAnd => (trues == n) as u32,
                    _ => (trues > 0) as u32,
                };
                Some(Reduction {
                    kind,
                    partial,
                    dst: self.inst.dsts[0],
                    mask: exec,
                })
            }
            _ => None,
        };
        Ok(Some(BarrierArrival {
            id,
            count,
            wait: kind != BarKind::Arrive,
            reduction,
            pc: InstId(self.pc),
        }))
    }
}

/// Where a warp's uniform memory access goes ([`Exec::uniform_region`]): its region, the
/// lowest address the lanes touch (resolved: an offset into the region, or a device
/// address), the bytes from there to one past the highest, and what resolving took off a
/// generic address (its window's start, or 0).
struct Uniform {
    region: Region,
    lo: u64,
    len: u64,
    shift: u64,
}

/// The kind of region a [`Uniform`] access goes to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Region {
    /// The TB's shared memory.
    Shared,
    /// One live allocation of device memory.
    Device,
    /// The kernel's parameter buffer.
    Param,
}

/// What `vote.sync` of `mode` gives a lane whose member lanes (active ones only) are
/// `part`, when the active lanes' predicates are `ballot` (PTX ISA "vote.sync").
#[inline(always)]
fn vote_value(mode: VoteMode, ballot: u32, part: u32) -> u64 {
    let mine = ballot & part;
    match mode {
        VoteMode::Ballot => mine as u64,
        VoteMode::All => (mine == part) as u64,
        VoteMode::Any => (mine != 0) as u64,
        VoteMode::Uni => (mine == 0 || mine == part) as u64,
    }
}

/// The lane `lane` of a `shfl.sync` of `mode` reads, given its `b` (lane or offset) and `c`
/// (clamp and segment mask) operands, and whether that lane is in range (PTX ISA "shfl.sync");
/// out of range it reads its own value.
#[inline(always)]
fn shfl_source(mode: ShflMode, lane: usize, b: u64, c: u64) -> (usize, bool) {
    let b = b as u32 & 0x1f;
    let c = c as u32;
    let clamp = c & 0x1f;
    let segmask = (c >> 8) & 0x1f;
    let lane32 = lane as u32;
    let max_lane = (lane32 & segmask) | (clamp & !segmask);
    let min_lane = lane32 & segmask;
    let (j, pval) = match mode {
        ShflMode::Up => {
            let j = lane32 as i32 - b as i32;
            (j, j >= max_lane as i32)
        }
        ShflMode::Down => {
            let j = lane32 + b;
            (j as i32, j <= max_lane)
        }
        ShflMode::Bfly => {
            let j = lane32 ^ b;
            (j as i32, j <= max_lane)
        }
        ShflMode::Idx => {
            let j = min_lane | (b & !segmask);
            (j as i32, j <= max_lane)
        }
    };
    (if pval { j as usize } else { lane }, pval)
}

/// A source operand resolved for a lane loop.
#[derive(Clone, Copy)]
enum Row {
    /// Index of lane 0 of a register in the warp's register file.
    Reg(usize),
    Const(u64),
}

impl Row {
    #[inline(always)]
    fn get(self, regs: &[u64], lane: usize) -> u64 {
        match self {
            Row::Reg(base) => regs[base + lane],
            Row::Const(v) => v,
        }
    }

    /// Every lane's value.
    #[inline(always)]
    fn lanes(self, regs: &[u64]) -> [u64; WARP_SIZE] {
        match self {
            Row::Reg(base) => regs[base..base + WARP_SIZE]
                .try_into()
                .expect("a register row is a warp wide"),
            Row::Const(v) => [v; WARP_SIZE],
        }
    }

    /// The register row whose lane 0 is at `base`.
    #[inline(always)]
    fn row_mut(regs: &mut [u64], base: usize) -> &mut [u64; WARP_SIZE] {
        (&mut regs[base..base + WARP_SIZE])
            .try_into()
            .expect("a register row is a warp wide")
    }
}

#[inline]
fn slice(bytes: &[u8], addr: u64, size: u32) -> Option<&[u8]> {
    let start = usize::try_from(addr).ok()?;
    bytes.get(start..start.checked_add(size as usize)?)
}

#[inline]
fn slice_mut(bytes: &mut [u8], addr: u64, size: u32) -> Option<&mut [u8]> {
    let start = usize::try_from(addr).ok()?;
    bytes.get_mut(start..start.checked_add(size as usize)?)
}

/// The device address (from the warp's local frame at `frame`) and the byte count of the
/// word of lane `lane`'s local memory that holds thread offset `a`, for an access of `n` ≤ 4
/// bytes ([`memory::local_word_address`] with the frame as base).
#[inline(always)]
fn local_word(frame: u64, a: u64, n: u64, lane: usize) -> (u64, u64) {
    (
        frame + (a / 4) * 4 * WARP_SIZE as u64 + 4 * lane as u64 + a % 4,
        n,
    )
}

/// Each lane of `exec` reads its element of `ty` at `bytes[off(lane)..]` into `row`:
/// `ty.extend(memory::read_le(..)) & dmask`, as the general path reads, with the element's
/// width and signedness decided once for the warp rather than per lane (a load's lanes
/// went through two matches on the type and a variable-length read each).
#[inline(always)]
fn gather(
    row: &mut [u64; WARP_SIZE],
    bytes: &[u8],
    exec: u32,
    ty: Ty,
    dmask: u64,
    off: impl Fn(usize) -> usize,
) {
    macro_rules! each {
        ($n:literal, $value:expr) => {
            for l in lanes(exec) {
                let o = off(l);
                let raw: [u8; $n] = bytes[o..o + $n].try_into().expect("an element's bytes");
                row[l] = $value(raw) & dmask;
            }
        };
    }
    // A type whose value fills its bytes (not `.pred`): extending is the read's own
    // zero- or sign-extension.
    let whole = ty.bits() == ty.size() * 8;
    match (ty.size(), ty.is_signed()) {
        (4, false) if whole => each!(4, |b| u64::from(u32::from_le_bytes(b))),
        (4, true) => each!(4, |b| i32::from_le_bytes(b) as i64 as u64),
        (8, _) => each!(8, u64::from_le_bytes),
        (2, false) if whole => each!(2, |b| u64::from(u16::from_le_bytes(b))),
        (2, true) => each!(2, |b| i16::from_le_bytes(b) as i64 as u64),
        (1, false) if whole => each!(1, |b: [u8; 1]| u64::from(b[0])),
        (1, true) => each!(1, |b: [u8; 1]| b[0] as i8 as i64 as u64),
        _ => {
            let size = ty.size() as usize;
            for l in lanes(exec) {
                let o = off(l);
                row[l] = ty.extend(memory::read_le(&bytes[o..o + size])) & dmask;
            }
        }
    }
}

/// Lane `lane`'s `size` bytes at thread offset `a` of a warp's local frame `bytes` (an
/// 8-byte value spans two words, 128 bytes apart), as the per-lane path reads them.
#[inline(always)]
fn local_read(bytes: &[u8], a: u64, size: u64, lane: usize) -> u64 {
    let word = |a: u64, n: u64| {
        let (at, n) = local_word(0, a, n, lane);
        memory::read_le(&bytes[at as usize..(at + n) as usize])
    };
    if size > 4 {
        word(a, 4) | word(a + 4, size - 4) << 32
    } else {
        word(a, size)
    }
}

/// The space a generic address range `lo..end` lies in whole, if one: both ends in the same
/// window, and the range no wider than a window (a wider one could hold a window between
/// two global ends). Windows start at multiples of their size, so resolving keeps an
/// address's alignment.
#[inline]
fn generic_range_space(lo: u64, end: u64) -> Option<Space> {
    if end - lo > memory::WINDOW_SIZE {
        return None;
    }
    match (memory::window(lo), memory::window(end - 1)) {
        (Window::Global(_), Window::Global(_)) => Some(Space::Global),
        (Window::Shared(_), Window::Shared(_)) => Some(Space::Shared),
        (Window::Local(_), Window::Local(_)) => Some(Space::Local),
        (Window::Param(_), Window::Param(_)) => Some(Space::Param),
        _ => None,
    }
}
