//! On-chip scalar register backup (OSRB, papers/ji-ctxback §III-D, Fig. 5).
//!
//! A scalar (uniform) register that is overwritten by an instruction that can be neither
//! re-executed from saved state nor reverted makes every earlier reader of its old value
//! non-re-executable, which forces CTXBack to save those readers' (vector) results or to give
//! up earlier flashback points. OSRB copies the scalar into a free register just before it is
//! overwritten (`mov B, S` during normal execution, Fig. 5b); a resume routine can then copy
//! the old value back (`mov S, B`, [`ResumeStep::CopyBack`]) after reloading `B`, which costs
//! 4 bytes per warp when `B` is scalar.
//!
//! # Which scalars are backed up
//!
//! A *site* is an instruction `d` that overwrites a 32-bit uniform register `S` whose current
//! value was read earlier in `d`'s flashback reach: by an instruction `j < d` of the same
//! basic block, with no side effect (store, atomic, barrier) in `[j, d)`, fewer than `window`
//! instructions before `d`, and no other definition of `S` in `(j, d)`. Only such a reader can
//! lie between a flashback point and `d`.
//!
//! Every site gets a backup in a first pass, and CTXBack runs on that kernel. A block keeps
//! its backups only if they lower the sum of its instructions' estimated preemption
//! latencies, and then only those some chosen flashback copies back from (the paper's rule:
//! "OSRB only backs up the scalar registers that do provide better flashback-points"). The
//! copy-back is the planner's last resort (after re-execution, saving and reverting), so a
//! backup is used only where nothing cheaper restores the value. The second pass rebuilds
//! the kernel with the kept backups; the analysis of that kernel is the result.
//!
//! # Where the backup goes
//!
//! The *backup period* of a site runs from `d` to the last instruction a flashback across it
//! can serve: the end of the block, the next side effect, or `window` instructions, whichever
//! comes first. A register `B` may hold the backup when it is dead at `d` under the SIMT-aware
//! liveness (so clobbering it changes nothing, even for lanes parked elsewhere), no instruction
//! of the period overwrites it, it is not the odd half of a live 64-bit pair, and no other
//! backup holds it during an overlapping period. In the order of §III-D:
//!
//! 1. a **dead uniform register** of the kernel;
//! 2. an **unused uniform register**: one of the warp's [`OsrbConfig::uniform_registers`]
//!    that the kernel does not use (NVIDIA Turing and later give every warp 63; AMD's
//!    allocation granularity leaves similar slack), added to the kernel's registers;
//! 3. a **dead vector register**: the scalar is copied into every active lane. Unlike the
//!    paper, which packs one scalar per lane, it takes the whole register, so saving it costs
//!    a vector register, and the planner uses it only where that still pays;
//! 4. a **word of the warp's own shared memory** (the paper's "unused shared memory"), one of
//!    [`OsrbConfig::shared_words`]: `st.shared [%warp_smem + 4w], S` and, at resume,
//!    `ld.shared S, [%warp_smem + 4w]`.
//!
//! A site that finds none of these is left without a backup ([`OsrbKernel::unplaced`]).
//!
//! **Addressing shared memory without a register.** A per-warp shared slot needs an address
//! that differs from warp to warp, and this fallback applies exactly when no register is free
//! to hold one (reserving one at kernel entry would only move the shortage: that register
//! could hold a backup itself). So the words are addressed as local memory is, by hardware:
//! the rewritten kernel declares [`Kernel::warp_smem`] bytes per warp, which the TB's shared
//! memory places after its static and dynamic shared memory, and `%warp_smem`
//! ([`kir::inst::Special::WarpSmem`]) is the address of the executing warp's bytes. They
//! belong to the TB's shared memory, so a switch saves and restores them with it (every
//! mechanism that evicts a TB keeps its shared memory); the register context does not count
//! them, and the resume routine loads the backup directly. The price is the TB's larger
//! shared-memory footprint (warps × `warp_smem` bytes, which may lower occupancy) and a
//! shared-memory access instead of a register move in the kernel.
//!
//! Only uniform registers are backed up: the execution mask, the other scalar the paper backs
//! up, is part of Switchyard's SIMT stack, not a register.

use std::collections::HashSet;

use kir::inst::{Op, Operand};
use kir::module::RegInfo;
use kir::{Id, Inst, InstId, Kernel, Reg, Ty};

use super::flashback::{is_side_effect, KernelFacts, ResumeStep};
use super::widths::{reg_class, RegClass, Widths};
use super::{CtxBack, CtxBackConfig};
use crate::liveness::Liveness;

/// Settings of on-chip scalar register backup.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OsrbConfig {
    /// Uniform registers every warp has. Those the kernel does not use are free backup slots
    /// (step 2 of the search); 0 leaves only dead registers.
    pub uniform_registers: u32,
    /// 32-bit words of shared memory each warp may take for backups that find no register
    /// (step 4 of the search); 0 uses no shared memory.
    pub shared_words: u32,
    /// Whether backups may go to registers (steps 1–3). `false` sends every backup to
    /// shared memory, to study that destination alone.
    pub registers: bool,
}

impl Default for OsrbConfig {
    /// NVIDIA Turing and later: `UR0 .. UR62`; up to 8 shared words (32 B) per warp, 1 KiB
    /// for a TB of 1,024 threads.
    fn default() -> Self {
        OsrbConfig {
            uniform_registers: 63,
            shared_words: 8,
            registers: true,
        }
    }
}

/// Where a backup is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackupSlot {
    /// A uniform register of the kernel, dead over the backup period.
    DeadUniform(Reg),
    /// A uniform register the kernel did not use (added to its registers).
    UnusedUniform(Reg),
    /// A vector register of the kernel, dead over the backup period.
    DeadVector(Reg),
    /// The word at this byte offset of the warp's own shared memory
    /// ([`Kernel::warp_smem`]).
    Shared(u32),
}

impl BackupSlot {
    /// The register holding the backup (`None`: it is in shared memory).
    pub fn reg(self) -> Option<Reg> {
        match self {
            BackupSlot::DeadUniform(r)
            | BackupSlot::UnusedUniform(r)
            | BackupSlot::DeadVector(r) => Some(r),
            BackupSlot::Shared(_) => None,
        }
    }
}

/// One backup copy (`mov B, S`, or `st.shared [%warp_smem + o], S`) of the rewritten kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backup {
    /// The copy, in the rewritten kernel.
    pub copy: InstId,
    /// The instruction of the original kernel it runs before (which overwrites `scalar`).
    pub before: InstId,
    /// The scalar register backed up (`S`).
    pub scalar: Reg,
    pub slot: BackupSlot,
    /// The last instruction (rewritten kernel) before which a preemption may copy back from
    /// the backup: the end of its backup period.
    pub until: InstId,
}

/// A kernel with its OSRB copies inserted.
#[derive(Clone, Debug)]
pub struct OsrbKernel {
    /// The rewritten kernel; its instructions are the original ones with the copies inserted.
    pub kernel: Kernel,
    /// The copies kept, in program order.
    pub backups: Vec<Backup>,
    /// For every instruction of `kernel`, the original instruction it is (`None`: a copy).
    pub origin: Vec<Option<InstId>>,
    /// Sites found (the first pass backs up each one that finds a register).
    pub sites: usize,
    /// Sites that found no free register.
    pub unplaced: usize,
}

impl OsrbKernel {
    /// `kernel` unchanged (no backup).
    pub fn unchanged(kernel: &Kernel) -> Self {
        OsrbKernel {
            kernel: kernel.clone(),
            backups: Vec::new(),
            origin: kernel.insts.ids().map(Some).collect(),
            sites: 0,
            unplaced: 0,
        }
    }

    /// The instructions of the rewritten kernel that are the original kernel's, in order.
    pub fn original_pcs(&self) -> impl Iterator<Item = InstId> + Clone + '_ {
        self.origin
            .iter()
            .enumerate()
            .filter(|(_, o)| o.is_some())
            .map(|(pc, _)| InstId::new(pc))
    }
}

/// A scalar to back up before `before`, over `before ..= end`.
#[derive(Clone, Copy, Debug)]
struct Site {
    before: InstId,
    scalar: Reg,
    end: InstId,
}

fn sites(kernel: &Kernel, facts: &KernelFacts<'_>, widths: &Widths, window: u32) -> Vec<Site> {
    let mut out = Vec::new();
    for block in kernel.cfg.blocks.values() {
        for d in block.start.0..block.end.0 {
            let d = InstId(d);
            for &s in facts.overwrites(d) {
                if widths.class(s) != RegClass::Uniform
                    || widths.wide_before(d, s)
                    || kernel.regs[s].ty.bits() > 32
                    || facts
                        .overwrites(d)
                        .iter()
                        .any(|&x| widths.partner(x) == Some(s))
                {
                    continue;
                }
                let mut read = false;
                let mut j = d.0;
                while j > block.start.0 && d.0 - j < window {
                    j -= 1;
                    let inst = &kernel.insts[InstId(j)];
                    if is_side_effect(inst) || facts.overwrites(InstId(j)).contains(&s) {
                        break;
                    }
                    if inst.uses().any(|u| u == s) {
                        read = true;
                        break;
                    }
                }
                if !read {
                    continue;
                }
                let mut end = d.0;
                while end + 1 < block.end.0
                    && end + 1 - d.0 < window
                    && !is_side_effect(&kernel.insts[InstId(end)])
                {
                    end += 1;
                }
                out.push(Site {
                    before: d,
                    scalar: s,
                    end: InstId(end),
                });
            }
        }
    }
    out
}

/// Register search state: which registers hold a backup over which periods.
struct Slots<'a> {
    kernel: &'a Kernel,
    facts: &'a KernelFacts<'a>,
    live: &'a Liveness,
    widths: &'a Widths,
    /// Periods taken, per register (kernel registers, then added ones).
    busy: Vec<Vec<(u32, u32)>>,
    /// Uniform registers that may still be added.
    spare_uniform: u32,
    /// Periods taken, per shared word of the warp.
    shared: Vec<Vec<(u32, u32)>>,
    /// Shared words that may still be added.
    spare_shared: u32,
    /// Whether registers may hold backups ([`OsrbConfig::registers`]).
    registers: bool,
}

fn overlaps(periods: &[(u32, u32)], site: &Site) -> bool {
    let (a, b) = (site.before.0, site.end.0);
    periods.iter().any(|&(x, y)| x <= b && a <= y)
}

impl Slots<'_> {
    fn free(&self, r: Reg, site: &Site) -> bool {
        let (a, b) = (site.before.0, site.end.0);
        if overlaps(&self.busy[r.index()], site) {
            return false;
        }
        if r.index() >= self.kernel.regs.len() {
            return true;
        }
        let d = site.before;
        let pair_live = r.index() > 0 && {
            let even = Reg::new(r.index() - 1);
            self.widths.partner(even) == Some(r)
                && (a..=b).any(|pc| self.widths.wide_before(InstId(pc), even))
        };
        r != site.scalar
            && self.kernel.regs[r].ty.bits() == 32
            && !pair_live
            && !self.live.divergent_live(d).contains(r)
            && (a..b).all(|pc| !self.facts.overwrites(InstId(pc)).contains(&r))
    }

    /// The first free register of `class` among the kernel's own.
    fn dead(&self, class: RegClass, site: &Site) -> Option<Reg> {
        (0..self.kernel.regs.len())
            .map(Reg::new)
            .find(|&r| self.widths.class(r) == class && self.free(r, site))
    }

    fn place(&mut self, site: &Site) -> Option<BackupSlot> {
        if !self.registers {
            return self.place_shared(site);
        }
        let slot = if let Some(r) = self.dead(RegClass::Uniform, site) {
            BackupSlot::DeadUniform(r)
        } else if let Some(r) = (self.kernel.regs.len()..self.busy.len())
            .map(Reg::new)
            .find(|&r| self.free(r, site))
        {
            BackupSlot::UnusedUniform(r)
        } else if self.spare_uniform > 0 {
            self.spare_uniform -= 1;
            self.busy.push(Vec::new());
            BackupSlot::UnusedUniform(Reg::new(self.busy.len() - 1))
        } else if let Some(r) = self.dead(RegClass::Vector, site) {
            BackupSlot::DeadVector(r)
        } else {
            return self.place_shared(site);
        };
        if let Some(r) = slot.reg() {
            self.busy[r.index()].push((site.before.0, site.end.0));
        }
        Some(slot)
    }

    /// The first shared word free over the site's period, taking a new one if needed.
    fn place_shared(&mut self, site: &Site) -> Option<BackupSlot> {
        let w = match self.shared.iter().position(|p| !overlaps(p, site)) {
            Some(w) => w,
            None if self.spare_shared > 0 => {
                self.spare_shared -= 1;
                self.shared.push(Vec::new());
                self.shared.len() - 1
            }
            None => return None,
        };
        self.shared[w].push((site.before.0, site.end.0));
        Some(BackupSlot::Shared(self.kernel.warp_smem + 4 * w as u32))
    }
}

/// Inserts the copies of `placed` into `kernel`, adding `added` uniform registers and the
/// shared words the backups use.
fn rewrite(kernel: &Kernel, placed: &[(Site, BackupSlot)], added: usize) -> OsrbKernel {
    let mut base = kernel.clone();
    for (_, slot) in placed {
        if let BackupSlot::Shared(at) = *slot {
            base.warp_smem = base.warp_smem.max(at + 4);
        }
    }
    let uniform_count = kernel
        .regs
        .ids()
        .filter(|&r| reg_class(kernel, r) == RegClass::Uniform)
        .count();
    for k in 0..added {
        base.regs.push(RegInfo {
            name: format!("UR{}", uniform_count + k),
            ty: Ty::B32,
        });
    }
    let inserts: Vec<(InstId, Inst)> = placed
        .iter()
        .map(|(site, slot)| {
            let span = kernel.insts[site.before].span;
            let copy = match *slot {
                BackupSlot::Shared(at) => Inst::warp_smem_store(at as i32, site.scalar, span),
                BackupSlot::DeadUniform(b)
                | BackupSlot::UnusedUniform(b)
                | BackupSlot::DeadVector(b) => {
                    let mut mov = Inst::new(Op::Mov(Ty::B32), span);
                    mov.dsts[0] = Some(b);
                    mov.n_dsts = 1;
                    mov.srcs[0] = Operand::Reg(site.scalar);
                    mov.n_srcs = 1;
                    mov
                }
            };
            (site.before, copy)
        })
        .collect();
    let ins = base.insert_before(&inserts);
    let mut origin = vec![None; ins.kernel.insts.len()];
    for pc in kernel.insts.ids() {
        origin[ins.new_pc[pc.index()].index()] = Some(pc);
    }
    let mut backups = Vec::with_capacity(placed.len());
    let mut next_in_group = std::collections::HashMap::new();
    for (site, slot) in placed {
        let k = next_in_group.entry(site.before).or_insert(0u32);
        backups.push(Backup {
            copy: InstId(ins.group_start[site.before.index()].0 + *k),
            before: site.before,
            scalar: site.scalar,
            slot: *slot,
            until: ins.new_pc[site.end.index()],
        });
        *k += 1;
    }
    OsrbKernel {
        kernel: ins.kernel,
        backups,
        origin,
        sites: 0,
        unplaced: 0,
    }
}

/// Every site of `kernel` with the register it would use (first pass), the number of sites,
/// and the uniform registers added.
fn placements(
    kernel: &Kernel,
    config: &CtxBackConfig,
    osrb: OsrbConfig,
) -> (Vec<(Site, BackupSlot)>, usize, usize) {
    let p = super::prepare(kernel, config, &[]);
    let facts = KernelFacts::new(kernel, &p.live, &p.widths, p.global_loads_stable);
    let found = sites(kernel, &facts, &p.widths, config.window);
    let existing = (0..kernel.regs.len())
        .filter(|&r| p.widths.class(Reg::new(r)) == RegClass::Uniform)
        .count() as u32;
    let mut slots = Slots {
        kernel,
        facts: &facts,
        live: &p.live,
        widths: &p.widths,
        busy: vec![Vec::new(); kernel.regs.len()],
        spare_uniform: osrb.uniform_registers.saturating_sub(existing),
        shared: Vec::new(),
        spare_shared: osrb.shared_words,
        registers: osrb.registers,
    };
    let placed: Vec<(Site, BackupSlot)> = found
        .iter()
        .filter_map(|site| Some((*site, slots.place(site)?)))
        .collect();
    let added = slots.busy.len() - kernel.regs.len();
    (placed, found.len(), added)
}

/// Backs up the scalars whose backup lets CTXBack choose better flashbacks, and analyses the
/// rewritten kernel (see the module docs). With `config.osrb` unset, the kernel is unchanged
/// and the analysis is [`CtxBack::compute`]'s.
///
/// Which backups are kept: flashbacks never leave their basic block, so blocks are decided
/// independently. A block keeps its backups only if they lower the sum of the estimated
/// preemption latencies of its instructions (a backup register is live over its period, so
/// every preemption there pays for keeping it), and then only the backups a chosen flashback
/// copies back from.
pub fn backup_scalars(kernel: &Kernel, config: &CtxBackConfig) -> (OsrbKernel, CtxBack) {
    let Some(osrb) = config.osrb else {
        return (
            OsrbKernel::unchanged(kernel),
            CtxBack::compute(kernel, config),
        );
    };
    let (placed, sites, added) = placements(kernel, config, osrb);
    let unplaced = sites - placed.len();
    let unchanged = |ctx: CtxBack| {
        let mut out = OsrbKernel::unchanged(kernel);
        out.sites = sites;
        out.unplaced = unplaced;
        (out, ctx)
    };
    if placed.is_empty() {
        return unchanged(CtxBack::compute(kernel, config));
    }
    // Pass 1: every backup, against none.
    let none = CtxBack::compute(kernel, config);
    let first = rewrite(kernel, &placed, added);
    let all = CtxBack::compute_osrb(&first, config);
    let nb = kernel.cfg.blocks.len();
    let mut gain = vec![0i64; nb];
    for (pc, orig) in first.origin.iter().enumerate() {
        if let Some(orig) = *orig {
            let b = kernel.cfg.block_of[orig.index()].index();
            gain[b] += i64::from(none.flashback(orig).cost.preempt)
                - i64::from(all.flashback(InstId::new(pc)).cost.preempt);
        }
    }
    let used: HashSet<InstId> = all
        .flashbacks()
        .iter()
        .flat_map(|fb| fb.resume.iter())
        .filter_map(|s| match *s {
            ResumeStep::CopyBack(c) => Some(c),
            _ => None,
        })
        .collect();
    let mut kept: Vec<(Site, BackupSlot)> = placed
        .iter()
        .zip(&first.backups)
        .filter(|((site, _), b)| {
            used.contains(&b.copy) && gain[kernel.cfg.block_of[site.before.index()].index()] > 0
        })
        .map(|(p, _)| *p)
        .collect();
    if kept.is_empty() {
        return unchanged(none);
    }
    // Pass 2: the kept backups only (their registers stay free: a subset of the periods),
    // with the added uniform registers and the shared words renumbered densely in order of
    // first use.
    let mut renumber = std::collections::HashMap::new();
    let mut words = std::collections::HashMap::new();
    for (_, slot) in &mut kept {
        match slot {
            BackupSlot::UnusedUniform(r) => {
                let next = kernel.regs.len() + renumber.len();
                *r = *renumber.entry(*r).or_insert(Reg::new(next));
            }
            BackupSlot::Shared(at) => {
                let next = kernel.warp_smem + 4 * words.len() as u32;
                *at = *words.entry(*at).or_insert(next);
            }
            _ => {}
        }
    }
    let mut out = rewrite(kernel, &kept, renumber.len());
    out.sites = sites;
    out.unplaced = unplaced;
    let ctx = CtxBack::compute_osrb(&out, config);
    (out, ctx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::kernel;

    /// Renames the `%s…` registers `UR…`: the uniform registers of an allocated kernel.
    fn scalars_uniform(k: &mut Kernel) {
        for r in k.regs.ids() {
            if let Some(n) = k.regs[r].name.strip_prefix("%s") {
                k.regs[r].name = format!("UR{n}");
            }
        }
    }

    /// Fig. 5's code after `add.u32 %v9, %v9, %s9`; `keep` lists the registers stored at the
    /// end (live there). `%s…` registers become uniform (`UR…`). Only used registers are
    /// declared: a declared, unused one would be a dead register to back up into.
    fn fig5(keep: &[&str]) -> Kernel {
        let stores: String = keep
            .iter()
            .enumerate()
            .map(|(n, r)| format!("    st.global.u32 [%rd1+{}], %{r};\n", 4 * n))
            .collect();
        let mut k = kernel(&format!(
            "
    .reg .b32 %v2, %v7, %v9, %v11, %v12, %s4, %s9;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd0, [k_in];
    ld.global.u32 %v2, [%rd0];
    ld.global.u32 %v11, [%rd0+4];
    ld.global.u32 %v9, [%rd0+8];
    ld.global.u32 %s4, [%rd0+12];
    ld.global.u32 %s9, [%rd0+16];
    bar.sync 0;
    add.u32 %v9, %v9, %s9;
    add.u32 %v7, %v2, %s4;
    or.b32 %s4, %s4, 2;
    mul.lo.u32 %v11, %v11, %v2;
    sub.u32 %v12, %v11, %v7;
    ld.param.u64 %rd1, [k_out];
{stores}    exit;
"
        ));
        scalars_uniform(&mut k);
        k
    }

    /// Where the only site's backup would go, by kind and name.
    fn slot(k: &Kernel, uniform_registers: u32, shared_words: u32) -> Option<String> {
        let (placed, sites, _) = placements(
            k,
            &CtxBackConfig::default(),
            OsrbConfig {
                uniform_registers,
                shared_words,
                registers: true,
            },
        );
        assert_eq!(sites, 1, "one site: %s4 before the `or`");
        placed.first().map(|(site, slot)| {
            assert_eq!(k.regs[site.scalar].name, "UR4");
            let name = |r: Reg| match r.index().checked_sub(k.regs.len()) {
                Some(n) => format!("new{n}"),
                None => k.regs[r].name.clone(),
            };
            match *slot {
                BackupSlot::DeadUniform(r) => format!("dead {}", name(r)),
                BackupSlot::UnusedUniform(r) => format!("unused {}", name(r)),
                BackupSlot::DeadVector(r) => format!("vector {}", name(r)),
                BackupSlot::Shared(at) => format!("shared +{at}"),
            }
        })
    }

    /// §III-D's order: a dead scalar register, then an unused one (of the warp's uniform
    /// registers the kernel does not use), then a dead vector register, then the warp's
    /// shared memory, else none.
    #[test]
    fn backup_destinations_in_order() {
        let live_out = ["v2", "v11", "v12", "s4"];
        // %s9 and %v9 are dead after their last read.
        assert_eq!(slot(&fig5(&live_out), 63, 8).as_deref(), Some("dead UR9"));
        // %s9 live to the end: an unused uniform register, if the file has one to spare
        // (the kernel already uses two).
        let k = fig5(&["v2", "v11", "v12", "s4", "s9"]);
        assert_eq!(slot(&k, 3, 8).as_deref(), Some("unused new0"));
        assert_eq!(slot(&k, 2, 8).as_deref(), Some("vector %v9"));
        // No free register: %v9 live too (every other vector register is live or overwritten
        // in the backup period; %rd0 and %rd1 are 64-bit). Shared memory if the warp has a
        // word to spare, else nowhere.
        let k = fig5(&["v2", "v11", "v12", "s4", "s9", "v9"]);
        assert_eq!(slot(&k, 2, 8).as_deref(), Some("shared +0"));
        assert_eq!(slot(&k, 2, 0), None);
    }

    /// Two backups whose periods overlap never share a register.
    #[test]
    fn overlapping_backups_take_different_registers() {
        let mut k = kernel(
            "
    .reg .b32 %v1, %v2, %v3, %s1, %s2;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd0, [k_in];
    ld.global.u32 %v1, [%rd0];
    ld.global.u32 %s1, [%rd0+4];
    ld.global.u32 %s2, [%rd0+8];
    bar.sync 0;
    add.u32 %v2, %v1, %s1;
    add.u32 %v3, %v1, %s2;
    or.b32 %s1, %s1, 2;
    or.b32 %s2, %s2, 4;
    ld.param.u64 %rd1, [k_out];
    st.global.u32 [%rd1], %v2;
    st.global.u32 [%rd1+4], %v3;
    st.global.u32 [%rd1+8], %s1;
    st.global.u32 [%rd1+12], %s2;
    st.global.u32 [%rd1+16], %v1;
    exit;
",
        );
        scalars_uniform(&mut k);
        let place = |uniform_registers, shared_words| {
            placements(
                &k,
                &CtxBackConfig::default(),
                OsrbConfig {
                    uniform_registers,
                    shared_words,
                    registers: true,
                },
            )
        };
        let (placed, sites, added) = place(63, 0);
        assert_eq!((sites, placed.len()), (2, 2), "{placed:?}");
        assert_ne!(placed[0].1.reg(), placed[1].1.reg());
        assert!(placed
            .iter()
            .all(|(_, s)| matches!(s, BackupSlot::UnusedUniform(_))));
        assert_eq!(added, 2);
        // With no uniform register to add (%v2 and %v3 are written in the periods, %v1 is
        // live to the end), the two backups take different shared words.
        let (placed, _, added) = place(2, 8);
        let slots: Vec<BackupSlot> = placed.iter().map(|(_, s)| *s).collect();
        assert_eq!(slots, [BackupSlot::Shared(0), BackupSlot::Shared(4)]);
        assert_eq!(added, 0);
        // One word only: the second backup finds no place.
        let (placed, _, _) = place(2, 1);
        assert_eq!(placed.len(), 1);
    }
}
