//! The allocation checker: abstract interpretation of the allocated kernel that proves every
//! physical register (and spill slot) read by an instruction holds the virtual value the
//! original instruction read there.
//!
//! The abstract state maps each location — a physical register or a 4-byte spill word — to
//! the set of original virtual registers whose current value it holds. An original
//! instruction reading `%v` from `R5` is correct when `%v ∈ state[R5]`; its definition of `%d`
//! into `R7` makes `state[R7] = {%d}` and removes `%d` from every other location (they hold
//! a stale version). A guarded definition keeps `%d` in `R7` only if `R7` already held the
//! old `%d` (lanes whose guard is false keep it). Spill code is interpreted as copies; a
//! coalesced `mov %d, %s` that was removed adds `%d` to every location holding `%s`. At
//! block joins the sets are intersected; at entry every location is zero, as is every
//! register read before it is written, so those registers are held everywhere.
//!
//! Besides values, the checker enforces the physical rules: predicates in predicate
//! registers, 64-bit values in even registers with the odd half clobbered by (and
//! clobbering) the pair, uniform registers only for values the uniformity analysis proves
//! uniform, spill slots only after the kernel's own local memory, the same CFG, and branch
//! targets that land on the start of the corresponding block.

use kir::inst::{Cmp, Op, Operand, Space};
use kir::{BlockId, Id, InstId, Kernel, Reg, Ty};
use thiserror::Error;

use crate::uniformity::Uniformity;
use crate::{Allocation, Phase};
use kir::liveness::BlockLiveness;

/// Why an allocation is wrong. `pc` is an instruction of the allocated kernel, `inst` one of
/// the original, `vreg` an original virtual register and `location` a physical register.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum VerifyError {
    #[error("register table does not match the documented layout: {what}")]
    Layout { what: String },
    #[error("{block}: blocks or successors differ from the original kernel")]
    Cfg { block: BlockId },
    #[error("{block}: instructions are not in the original order")]
    Order { block: BlockId },
    #[error("original instruction {inst} is missing and is not a coalesced copy")]
    Missing { inst: InstId },
    #[error("{pc}: does not match original instruction {inst} apart from registers")]
    Shape { pc: InstId, inst: InstId },
    #[error("{pc}: inserted instruction is not spill code")]
    BadInserted { pc: InstId },
    #[error("{pc}: branch target does not start the target block")]
    BranchTarget { pc: InstId },
    #[error("{pc}: spill slot at offset {offset} is outside the spill area")]
    SpillSlot { pc: InstId, offset: i64 },
    #[error("{pc}: {location} does not hold {vreg} here")]
    WrongValue {
        pc: InstId,
        vreg: Reg,
        location: Reg,
    },
    #[error("{pc}: {vreg} is in {location}, a register of the wrong file")]
    WrongFile {
        pc: InstId,
        vreg: Reg,
        location: Reg,
    },
    #[error("{pc}: 64-bit {vreg} is in {location}, not the even register of a pair")]
    Misaligned {
        pc: InstId,
        vreg: Reg,
        location: Reg,
    },
    #[error("{pc}: {vreg} is placed in uniform register {location} but is not uniform")]
    NotUniform {
        pc: InstId,
        vreg: Reg,
        location: Reg,
    },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum File {
    Gpr,
    Pred,
    Uniform,
    Spill,
}

type Set = Vec<u32>;
type State = Vec<Set>;

struct Checker<'a> {
    orig: &'a Kernel,
    alloc: &'a Allocation,
    uniform: Uniformity,
    n_regs: usize,
    spill_base: u32,
    /// First allocated instruction of each block.
    new_start: Vec<InstId>,
}

/// Checks that `allocation` computes what `original` computes (see the module docs).
pub fn verify(original: &Kernel, allocation: &Allocation) -> Result<(), VerifyError> {
    let new = &allocation.kernel;
    let (g, p, u) = (
        allocation.gpr_count as usize,
        allocation.pred_count as usize,
        allocation.uniform_count as usize,
    );
    if new.regs.len() != g + p + u {
        return Err(VerifyError::Layout {
            what: format!("{} registers, counts say {}", new.regs.len(), g + p + u),
        });
    }
    for (r, info) in new.regs.iter() {
        let i = r.index();
        let (name, ty) = if i < g {
            (format!("R{i}"), Ty::B32)
        } else if i < g + p {
            (format!("P{}", i - g), Ty::Pred)
        } else {
            (format!("UR{}", i - g - p), Ty::B32)
        };
        if info.name != name || info.ty != ty {
            return Err(VerifyError::Layout {
                what: format!(
                    "{r} is `{}` {:?}, expected `{name}` {ty:?}",
                    info.name, info.ty
                ),
            });
        }
    }
    if allocation.origins.len() != new.insts.len() {
        return Err(VerifyError::Layout {
            what: "one origin per instruction".into(),
        });
    }
    let (ob, nb) = (&original.cfg.blocks, &new.cfg.blocks);
    if ob.len() != nb.len() {
        return Err(VerifyError::Cfg { block: BlockId(0) });
    }
    for b in ob.ids() {
        let mut s1 = ob[b].succs.clone();
        let mut s2 = nb[b].succs.clone();
        s1.sort();
        s2.sort();
        if s1 != s2 || ob[b].exits != nb[b].exits {
            return Err(VerifyError::Cfg { block: b });
        }
    }
    let spill_base = original.local_size.next_multiple_of(8);
    let checker = Checker {
        orig: original,
        alloc: allocation,
        uniform: Uniformity::compute(original),
        n_regs: new.regs.len(),
        spill_base,
        new_start: nb.values().map(|b| b.start).collect(),
    };
    checker.run()
}

impl Checker<'_> {
    fn n_locs(&self) -> usize {
        let spill_words = self.alloc.kernel.local_size.saturating_sub(self.spill_base) / 4;
        self.n_regs + spill_words as usize
    }

    fn run(&self) -> Result<(), VerifyError> {
        let nb = self.orig.cfg.blocks.len();
        if nb == 0 {
            return Ok(());
        }
        // Registers read before any write start out zero, like every location.
        let mut live = BlockLiveness::new();
        live.compute_kernel(self.orig);
        let succs: Vec<Vec<usize>> = self
            .orig
            .cfg
            .blocks
            .values()
            .map(|b| b.succs.iter().map(|s| s.index()).collect())
            .collect();
        let entry: Set = live.live_in[0].iter().map(|v| v.0).collect();
        let mut input: Vec<Option<State>> = vec![None; nb];
        input[0] = Some(vec![entry; self.n_locs()]);
        let mut work = vec![0usize];
        while let Some(b) = work.pop() {
            let mut state = input[b].clone().expect("queued blocks have a state");
            // Errors are reported by the final pass, once the states are stable.
            let _ = self.transfer(BlockId(b as u32), &mut state, false);
            for &s in &succs[b] {
                let changed = match &mut input[s] {
                    None => {
                        input[s] = Some(state.clone());
                        true
                    }
                    Some(old) => meet(old, &state),
                };
                if changed && !work.contains(&s) {
                    work.push(s);
                }
            }
        }
        for (b, st) in input.into_iter().enumerate() {
            if let Some(mut st) = st {
                self.transfer(BlockId(b as u32), &mut st, true)?;
            }
        }
        Ok(())
    }

    fn transfer(&self, b: BlockId, st: &mut State, check: bool) -> Result<(), VerifyError> {
        let ob = &self.orig.cfg.blocks[b];
        let nbk = &self.alloc.kernel.cfg.blocks[b];
        let origins = &self.alloc.origins;
        let mut pc = nbk.start.0;
        let end = nbk.end.0;
        for j in ob.start.0..ob.end.0 {
            let j = InstId(j);
            let at = |pc: u32, phase| {
                pc < end && origins[pc as usize].inst == j && origins[pc as usize].phase == phase
            };
            while at(pc, Phase::Before) {
                self.inserted(InstId(pc), st, check)?;
                pc += 1;
            }
            if at(pc, Phase::At) {
                self.original(j, InstId(pc), st, check)?;
                pc += 1;
            } else {
                self.elided(j, st)?;
            }
            while at(pc, Phase::After) {
                self.inserted(InstId(pc), st, check)?;
                pc += 1;
            }
        }
        if pc != end {
            return Err(VerifyError::Order { block: b });
        }
        Ok(())
    }

    fn file(&self, loc: usize) -> (File, usize) {
        let (g, p) = (
            self.alloc.gpr_count as usize,
            self.alloc.pred_count as usize,
        );
        if loc < g {
            (File::Gpr, loc)
        } else if loc < g + p {
            (File::Pred, loc - g)
        } else if loc < self.n_regs {
            (File::Uniform, loc - g - p)
        } else {
            (File::Spill, loc - self.n_regs)
        }
    }

    fn vty(&self, v: u32) -> Ty {
        self.orig.regs[Reg(v)].ty
    }

    fn wide(&self, v: u32) -> bool {
        self.vty(v) != Ty::Pred && self.vty(v).size() == 8
    }

    /// Whether `v` may live in `loc` as the operand of an original instruction.
    fn placement(&self, pc: InstId, v: Reg, loc: Reg) -> Result<(), VerifyError> {
        let (file, idx) = self.file(loc.index());
        let is_pred = self.vty(v.0) == Ty::Pred;
        let ok_file = match file {
            File::Pred => is_pred,
            File::Gpr | File::Uniform => !is_pred,
            File::Spill => false,
        };
        if !ok_file {
            return Err(VerifyError::WrongFile {
                pc,
                vreg: v,
                location: loc,
            });
        }
        if self.wide(v.0) && idx % 2 != 0 {
            return Err(VerifyError::Misaligned {
                pc,
                vreg: v,
                location: loc,
            });
        }
        if file == File::Uniform && !self.uniform.is_uniform(v) {
            return Err(VerifyError::NotUniform {
                pc,
                vreg: v,
                location: loc,
            });
        }
        Ok(())
    }

    /// `loc` was written with a value of `bytes` bytes: clobber the halves of pairs.
    fn clobber_pair(&self, st: &mut State, loc: usize, bytes: u32) {
        let (file, idx) = self.file(loc);
        if file == File::Pred {
            return;
        }
        if bytes == 8 {
            if let Some(next) = st.get_mut(loc + 1) {
                next.clear();
            }
        }
        if idx % 2 == 1 {
            let below = &mut st[loc - 1];
            below.retain(|&v| !(self.vty(v) != Ty::Pred && self.vty(v).size() == 8));
        }
    }

    fn original(
        &self,
        j: InstId,
        pc: InstId,
        st: &mut State,
        check: bool,
    ) -> Result<(), VerifyError> {
        let o = &self.orig.insts[j];
        let n = &self.alloc.kernel.insts[pc];
        let shape = Err(VerifyError::Shape { pc, inst: j });
        let same_op = match (o.op, n.op) {
            (
                Op::Bra {
                    target: t1,
                    uni: u1,
                },
                Op::Bra {
                    target: t2,
                    uni: u2,
                },
            ) => {
                let tb = self.orig.cfg.block_of[t1.index()];
                if check && self.new_start[tb.index()] != t2 {
                    return Err(VerifyError::BranchTarget { pc });
                }
                u1 == u2
            }
            (a, b) => a == b,
        };
        if !same_op
            || o.n_srcs != n.n_srcs
            || o.n_dsts != n.n_dsts
            || o.guard.map(|g| g.negated) != n.guard.map(|g| g.negated)
        {
            return shape;
        }
        let mut reads: Vec<(Reg, Reg)> = Vec::new();
        for (a, b) in o.srcs().iter().zip(n.srcs()) {
            match (*a, *b) {
                (Operand::Reg(v), Operand::Reg(l)) | (Operand::NotReg(v), Operand::NotReg(l)) => {
                    reads.push((v, l))
                }
                (a, b) if a == b && !matches!(a, Operand::Reg(_) | Operand::NotReg(_)) => {}
                _ => return shape,
            }
        }
        if let (Some(g1), Some(g2)) = (o.guard, n.guard) {
            reads.push((g1.reg, g2.reg));
        }
        if check {
            for &(v, l) in &reads {
                self.placement(pc, v, l)?;
                if st[l.index()].binary_search(&v.0).is_err() {
                    return Err(VerifyError::WrongValue {
                        pc,
                        vreg: v,
                        location: l,
                    });
                }
            }
        }
        let guarded = o.guard.is_some();
        for (a, b) in o.dsts().iter().zip(n.dsts()) {
            match (*a, *b) {
                (Some(d), Some(l)) => {
                    if check {
                        self.placement(pc, d, l)?;
                    }
                    let li = l.index();
                    let had = st[li].binary_search(&d.0).is_ok();
                    for set in st.iter_mut() {
                        if let Ok(i) = set.binary_search(&d.0) {
                            set.remove(i);
                        }
                    }
                    st[li].clear();
                    if !guarded || had {
                        st[li].push(d.0);
                    }
                    let bytes = if self.wide(d.0) { 8 } else { 4 };
                    self.clobber_pair(st, li, bytes);
                }
                (None, None) => {}
                _ => return shape,
            }
        }
        Ok(())
    }

    /// An original instruction with no counterpart: it must be a copy whose source and
    /// destination were coalesced.
    fn elided(&self, j: InstId, st: &mut State) -> Result<(), VerifyError> {
        let o = &self.orig.insts[j];
        let missing = Err(VerifyError::Missing { inst: j });
        let (Op::Mov(ty), Operand::Reg(s), Some(d)) = (o.op, o.srcs[0], o.dsts[0]) else {
            return missing;
        };
        let (ts, td) = (self.vty(s.0), self.vty(d.0));
        if (ts == Ty::Pred) != (td == Ty::Pred) || ts.size() > ty.size() || td.size() > ty.size() {
            return missing;
        }
        let guarded = o.guard.is_some();
        let gets: Vec<bool> = st
            .iter()
            .map(|set| {
                set.binary_search(&s.0).is_ok() && (!guarded || set.binary_search(&d.0).is_ok())
            })
            .collect();
        for (set, gets) in st.iter_mut().zip(gets) {
            match (set.binary_search(&d.0), gets) {
                (Ok(i), false) => {
                    set.remove(i);
                }
                (Err(i), true) => set.insert(i, d.0),
                _ => {}
            }
        }
        Ok(())
    }

    fn slot(&self, pc: InstId, offset: i32, bytes: u32) -> Result<usize, VerifyError> {
        let off = offset as i64;
        let end = self.alloc.kernel.local_size as i64;
        if off < self.spill_base as i64 || off + bytes as i64 > end || off % bytes as i64 != 0 {
            return Err(VerifyError::SpillSlot { pc, offset: off });
        }
        Ok(self.n_regs + ((off - self.spill_base as i64) / 4) as usize)
    }

    /// Spill code: loads, stores and predicate moves, interpreted as copies.
    fn inserted(&self, pc: InstId, st: &mut State, _check: bool) -> Result<(), VerifyError> {
        let n = &self.alloc.kernel.insts[pc];
        let bad = Err(VerifyError::BadInserted { pc });
        if n.guard.is_some() {
            return bad;
        }
        let reg_loc = |op: Operand| match op {
            Operand::Reg(r) if r.index() < self.n_regs => Some(r.index()),
            _ => None,
        };
        let dst = n.dsts[0]
            .filter(|r| r.index() < self.n_regs && n.n_dsts == 1)
            .map(|r| r.index());
        let (from, to, bytes, preds_only) = match n.op {
            Op::Ld {
                space: Space::Local,
                ty,
                vec: 1,
                offset,
                ..
            } if n.srcs[0] == Operand::Imm(0) && n.n_srcs == 1 => {
                let Some(to) = dst else { return bad };
                (self.slot(pc, offset, ty.size())?, to, ty.size(), false)
            }
            Op::St {
                space: Space::Local,
                ty,
                vec: 1,
                offset,
            } if n.srcs[0] == Operand::Imm(0) && n.n_srcs == 2 => {
                let Some(from) = reg_loc(n.srcs[1]) else {
                    return bad;
                };
                (from, self.slot(pc, offset, ty.size())?, ty.size(), false)
            }
            Op::Selp(Ty::U32)
                if n.n_srcs == 3
                    && n.srcs[0] == Operand::Imm(1)
                    && n.srcs[1] == Operand::Imm(0) =>
            {
                let (Some(from), Some(to)) = (reg_loc(n.srcs[2]), dst) else {
                    return bad;
                };
                (from, to, 4, true)
            }
            Op::Setp {
                cmp: Cmp::Ne,
                combine: None,
                ty: Ty::U32,
                ftz: false,
            } if n.n_srcs == 2 && n.srcs[1] == Operand::Imm(0) => {
                let (Some(from), Some(to)) = (reg_loc(n.srcs[0]), dst) else {
                    return bad;
                };
                (from, to, 1, true)
            }
            _ => return bad,
        };
        if bytes == 8
            && (!self.file(from).1.is_multiple_of(2) || !self.file(to).1.is_multiple_of(2))
        {
            return bad;
        }
        let fits = |v: &u32| {
            let t = self.vty(*v);
            if preds_only {
                t == Ty::Pred
            } else {
                t.size() <= bytes
            }
        };
        let set: Set = st[from].iter().copied().filter(fits).collect();
        st[to] = set;
        self.clobber_pair(st, to, bytes);
        Ok(())
    }
}

/// `old ∩= new`; whether `old` changed.
fn meet(old: &mut State, new: &State) -> bool {
    let mut changed = false;
    for (a, b) in old.iter_mut().zip(new) {
        let before = a.len();
        a.retain(|v| b.binary_search(v).is_ok());
        changed |= a.len() != before;
    }
    changed
}
