//! The allocator: liveness, interference, colouring and spill rewriting, round after round
//! until every value has a register; then the rewrite to physical registers.
//!
//! Spilling is "spill everywhere": a spilled value gets a local-memory slot after the
//! kernel's own local variables, every use reloads it into a fresh short-lived temporary
//! (`ld.local`) and every definition stores it (`st.local`), so the timing model sees the
//! traffic. A guarded definition reloads first, because lanes whose guard is false must
//! store back the old value. Predicates beyond the predicate file are kept in a GPR as 0/1
//! (`selp.u32 g, 1, 0, p` after a definition, `setp.ne.u32 p, g, 0` before a use), the way
//! NVIDIA's compiler moves predicates to GPRs; that GPR may itself be spilled later.
//! Values proven warp-uniform go to the uniform file when it is enabled; one that does not
//! fit there is moved back to the GPR file rather than spilled.

use std::collections::HashMap;

use kir::cfg::Cfg;
use kir::inst::{Op, Operand, Space};
use kir::module::RegInfo;
use kir::{BlockId, Id, IdVec, Inst, InstId, Kernel, Reg, Ty};

use crate::color::{self, Graph, Node};
use crate::uniformity::Uniformity;
use crate::{AllocConfig, AllocError, Allocation, Origin, Phase};
use kir::liveness::{step_back, BlockLiveness};

/// GPRs below which a single instruction's operands and spill temporaries may not fit.
pub const MIN_GPRS: u32 = 16;
/// Predicates one instruction can need: a guard, two `setp` results and a combined source.
pub(crate) const MIN_PREDS: u32 = 4;
const MAX_ROUNDS: u32 = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Gpr = 0,
    Pred = 1,
    Uniform = 2,
}

#[derive(Clone, Debug)]
struct VInfo {
    ty: Ty,
    class: Class,
    /// Spill temporaries live across one instruction: spilling them cannot help.
    no_spill: bool,
}

impl VInfo {
    fn width(&self) -> u32 {
        if self.class != Class::Pred && self.ty.size() == 8 {
            2
        } else {
            1
        }
    }
}

#[derive(Clone, Debug)]
struct WInst {
    inst: Inst,
    tag: Origin,
}

/// The kernel being allocated: original blocks, each a list of instructions over virtual
/// registers (originals first, then spill temporaries).
struct Work {
    blocks: Vec<Vec<WInst>>,
    succs: Vec<Vec<usize>>,
    vregs: Vec<VInfo>,
    spill_base: u32,
    spill_end: u32,
    spilled_values: u32,
}

pub(crate) fn allocate(kernel: &Kernel, config: &AllocConfig) -> Result<Allocation, AllocError> {
    if config.max_registers < MIN_GPRS {
        return Err(AllocError::TooFewRegisters {
            kernel: kernel.name.clone(),
            max_registers: config.max_registers,
            min: MIN_GPRS,
        });
    }
    if config.predicate_registers < MIN_PREDS {
        return Err(AllocError::TooFewPredicates {
            kernel: kernel.name.clone(),
            predicate_registers: config.predicate_registers,
            min: MIN_PREDS,
        });
    }
    let uniform = (config.uniform_registers > 0).then(|| Uniformity::compute(kernel));
    let mut w = Work::new(kernel, uniform.as_ref());
    let depth = loop_depths(&kernel.cfg);
    let k = [
        config.max_registers,
        config.predicate_registers,
        config.uniform_registers,
    ];
    for _ in 0..MAX_ROUNDS {
        let g = w.graph(&depth);
        let col = color::color(&g, &k);
        if col.failed.is_empty() {
            return Ok(w.finish(kernel, &col.colors));
        }
        let mut spill = Vec::new();
        for &v in &col.failed {
            match w.vregs[v].class {
                // The uniform file is an optimisation: a value that does not fit goes back
                // to the GPRs.
                Class::Uniform => w.vregs[v].class = Class::Gpr,
                _ if !w.vregs[v].no_spill => spill.push(v),
                _ => {
                    // A temporary found no register: spill the cheapest neighbour that can be.
                    let victim = g
                        .neighbors(v)
                        .iter()
                        .map(|&u| u as usize)
                        .filter(|&u| !w.vregs[u].no_spill && !spill.contains(&u))
                        .min_by(|&a, &b| g.nodes[a].cost.total_cmp(&g.nodes[b].cost));
                    match victim {
                        Some(u) => spill.push(u),
                        None => {
                            return Err(AllocError::TooFewRegisters {
                                kernel: kernel.name.clone(),
                                max_registers: config.max_registers,
                                min: config.max_registers + 1,
                            })
                        }
                    }
                }
            }
        }
        spill.sort_unstable();
        spill.dedup();
        w.spill(&spill);
    }
    Err(AllocError::NoConvergence {
        kernel: kernel.name.clone(),
        rounds: MAX_ROUNDS,
    })
}

impl Work {
    fn new(kernel: &Kernel, uniform: Option<&Uniformity>) -> Work {
        let cfg = &kernel.cfg;
        let blocks = cfg
            .blocks
            .values()
            .map(|b| {
                (b.start.0..b.end.0)
                    .map(|i| WInst {
                        inst: kernel.insts[InstId(i)].clone(),
                        tag: Origin {
                            inst: InstId(i),
                            phase: Phase::At,
                        },
                    })
                    .collect()
            })
            .collect();
        let succs = cfg
            .blocks
            .values()
            .map(|b| b.succs.iter().map(|s| s.index()).collect())
            .collect();
        let vregs = kernel
            .regs
            .iter()
            .map(|(r, info)| VInfo {
                ty: info.ty,
                class: if info.ty == Ty::Pred {
                    Class::Pred
                } else if uniform.is_some_and(|u| u.is_uniform(r)) {
                    Class::Uniform
                } else {
                    Class::Gpr
                },
                no_spill: false,
            })
            .collect();
        let spill_base = kernel.local_size.next_multiple_of(8);
        Work {
            blocks,
            succs,
            vregs,
            spill_base,
            spill_end: spill_base,
            spilled_values: 0,
        }
    }

    /// Liveness, interference graph, spill costs and `mov` partners.
    fn graph(&self, depth: &[u32]) -> Graph {
        let n = self.vregs.len();
        let mut live = BlockLiveness::new();
        live.compute(
            n,
            self.blocks.len(),
            |b| self.blocks[b].iter().map(|w| &w.inst),
            |b| self.succs[b].iter().copied(),
        );
        let mut appears = vec![false; n];
        let mut cost = vec![0f64; n];
        for (b, insts) in self.blocks.iter().enumerate() {
            let weight = 10f64.powi(depth[b].min(8) as i32);
            for w in insts {
                for r in w.inst.uses().chain(w.inst.defs()) {
                    appears[r.index()] = true;
                    cost[r.index()] += weight;
                }
            }
        }
        let nodes = self
            .vregs
            .iter()
            .enumerate()
            .map(|(v, info)| Node {
                class: appears[v].then_some(info.class as usize),
                width: info.width(),
                cost: cost[v],
                no_spill: info.no_spill,
            })
            .collect();
        let mut g = Graph::new(nodes);
        for (b, insts) in self.blocks.iter().enumerate() {
            let mut live_now = live.live_out[b].clone();
            for w in insts.iter().rev() {
                let inst = &w.inst;
                let copy_src = self.copy_source(inst);
                // Chaitin: a copy's destination does not interfere with its source, which
                // holds the same value.
                let unguarded_copy = if inst.guard.is_none() { copy_src } else { None };
                let defs: Vec<Reg> = inst.defs().collect();
                for (i, &d) in defs.iter().enumerate() {
                    // Every definition, even a dead one, writes its register: it interferes
                    // with everything live after the instruction.
                    for l in live_now.iter() {
                        if Some(l) != unguarded_copy {
                            g.add_edge(d.index(), l.index());
                        }
                    }
                    for &d2 in &defs[i + 1..] {
                        g.add_edge(d.index(), d2.index());
                    }
                }
                if let (Some(s), Some(d)) = (copy_src, inst.dsts[0]) {
                    g.partners[d.index()].push(s.0);
                    g.partners[s.index()].push(d.0);
                }
                step_back(&mut live_now, inst);
            }
        }
        g
    }

    /// The source of a `mov` that copies a register whole into one of the same file and
    /// width (and so can be coalesced into an identity and removed).
    fn copy_source(&self, inst: &Inst) -> Option<Reg> {
        let (Op::Mov(ty), Operand::Reg(s), Some(d)) = (inst.op, inst.srcs[0], inst.dsts[0]) else {
            return None;
        };
        let (si, di) = (&self.vregs[s.index()], &self.vregs[d.index()]);
        let same_file = (si.class == Class::Pred) == (di.class == Class::Pred);
        (same_file
            && si.width() == di.width()
            && si.ty.size() <= ty.size()
            && di.ty.size() <= ty.size())
        .then_some(s)
    }

    fn temp(&mut self, ty: Ty, class: Class) -> Reg {
        self.vregs.push(VInfo {
            ty,
            class,
            no_spill: true,
        });
        Reg::new(self.vregs.len() - 1)
    }

    /// Rewrites the kernel so that the values in `spill` live in memory (GPRs) or in a GPR
    /// (predicates).
    fn spill(&mut self, spill: &[usize]) {
        // Where each spilled value now lives: a local-memory slot, or a GPR for a predicate.
        enum Home {
            Slot { offset: u32, wide: bool },
            Gpr(Reg),
        }
        let mut home: HashMap<usize, Home> = HashMap::new();
        for &v in spill {
            let h = if self.vregs[v].class == Class::Pred {
                self.vregs.push(VInfo {
                    ty: Ty::U32,
                    class: Class::Gpr,
                    no_spill: false,
                });
                Home::Gpr(Reg::new(self.vregs.len() - 1))
            } else {
                let wide = self.vregs[v].width() == 2;
                let size = if wide { 8 } else { 4 };
                let offset = self.spill_end.next_multiple_of(size);
                self.spill_end = offset + size;
                self.spilled_values += 1;
                Home::Slot { offset, wide }
            };
            home.insert(v, h);
        }
        for b in 0..self.blocks.len() {
            let old = std::mem::take(&mut self.blocks[b]);
            let mut new = Vec::with_capacity(old.len());
            for mut w in old {
                let touched: Vec<Reg> = {
                    let mut t: Vec<Reg> = w
                        .inst
                        .uses()
                        .chain(w.inst.defs())
                        .filter(|r| home.contains_key(&r.index()))
                        .collect();
                    t.sort_unstable();
                    t.dedup();
                    t
                };
                if touched.is_empty() {
                    new.push(w);
                    continue;
                }
                let (pre, post) = match w.tag.phase {
                    Phase::At => (Phase::Before, Phase::After),
                    p => (p, p),
                };
                let guarded = w.inst.guard.is_some();
                let mut after = Vec::new();
                for v in touched {
                    let used = w.inst.uses().any(|r| r == v);
                    let defined = w.inst.defs().any(|r| r == v);
                    let info = self.vregs[v.index()].clone();
                    let t = self.temp(info.ty, info.class);
                    let span = w.inst.span;
                    let tag = |phase| Origin {
                        inst: w.tag.inst,
                        phase,
                    };
                    if used || (defined && guarded) {
                        let load = match home[&v.index()] {
                            Home::Slot { offset, wide } => local_load(t, offset, wide, span),
                            Home::Gpr(g) => Inst::word_to_pred(t, g, span),
                        };
                        new.push(WInst {
                            inst: load,
                            tag: tag(pre),
                        });
                    }
                    if defined {
                        let store = match home[&v.index()] {
                            Home::Slot { offset, wide } => local_store(t, offset, wide, span),
                            Home::Gpr(g) => Inst::pred_to_word(g, t, span),
                        };
                        after.push(WInst {
                            inst: store,
                            tag: tag(post),
                        });
                    }
                    rename(&mut w.inst, v, t);
                }
                new.push(w);
                new.extend(after);
            }
            self.blocks[b] = new;
        }
    }

    /// Builds the allocated kernel from a complete colouring.
    fn finish(&self, kernel: &Kernel, colors: &[Option<u32>]) -> Allocation {
        let mut count = [0u32; 3];
        for (v, c) in colors.iter().enumerate() {
            if let Some(c) = c {
                let info = &self.vregs[v];
                let k = &mut count[info.class as usize];
                *k = (*k).max(c + info.width());
            }
        }
        let [n_gpr, n_pred, n_ur] = count;
        let phys = |v: Reg| -> Reg {
            let info = &self.vregs[v.index()];
            let c = colors[v.index()].expect("every register in an instruction is coloured");
            Reg(match info.class {
                Class::Gpr => c,
                Class::Pred => n_gpr + c,
                Class::Uniform => n_gpr + n_pred + c,
            })
        };
        let mut insts: IdVec<InstId, Inst> = IdVec::new();
        let mut origins = Vec::new();
        let mut block_start = Vec::with_capacity(self.blocks.len());
        for block in &self.blocks {
            block_start.push(InstId(insts.len() as u32));
            let mapped: Vec<(Inst, Origin)> = block
                .iter()
                .map(|w| {
                    let mut inst = w.inst.clone();
                    map_regs(&mut inst, phys);
                    (inst, w.tag)
                })
                .collect();
            let identity = |(inst, tag): &(Inst, Origin)| {
                tag.phase == Phase::At
                    && matches!((inst.op, inst.srcs[0], inst.dsts[0]),
                        (Op::Mov(_), Operand::Reg(s), Some(d)) if s == d)
            };
            // Coalesced copies are removed, but a block keeps at least one instruction so
            // that the CFG keeps its shape.
            let keep_one = mapped.iter().all(identity);
            for (i, m) in mapped.iter().enumerate() {
                if identity(m) && !(keep_one && i == 0) {
                    continue;
                }
                insts.push(m.0.clone());
                origins.push(m.1);
            }
        }
        for inst in insts.ids() {
            if let Op::Bra { target, uni } = insts[inst].op {
                let b = kernel.cfg.block_of[target.index()];
                insts[inst].op = Op::Bra {
                    target: block_start[b.index()],
                    uni,
                };
            }
        }
        let mut regs: IdVec<Reg, RegInfo> = IdVec::new();
        for (prefix, n, ty) in [
            ("R", n_gpr, Ty::B32),
            ("P", n_pred, Ty::Pred),
            ("UR", n_ur, Ty::B32),
        ] {
            for i in 0..n {
                regs.push(RegInfo {
                    name: format!("{prefix}{i}"),
                    ty,
                });
            }
        }
        let assignment = (0..kernel.regs.len())
            .map(|v| colors[v].map(|_| phys(Reg::new(v))))
            .collect();
        let cfg = Cfg::build(&insts);
        let spill_bytes = self.spill_end - self.spill_base;
        let new_kernel = Kernel {
            regs,
            insts,
            cfg,
            local_size: if spill_bytes > 0 {
                self.spill_end
            } else {
                kernel.local_size
            },
            ..kernel.clone()
        };
        Allocation {
            kernel: new_kernel,
            gpr_count: n_gpr,
            pred_count: n_pred,
            uniform_count: n_ur,
            spilled_values: self.spilled_values,
            spill_bytes,
            origins,
            assignment,
        }
    }
}

/// Replaces `from` by `to` in every operand, the guard and the destinations.
fn rename(inst: &mut Inst, from: Reg, to: Reg) {
    map_regs(inst, |r| if r == from { to } else { r });
}

fn map_regs(inst: &mut Inst, f: impl Fn(Reg) -> Reg) {
    for s in inst.srcs.iter_mut() {
        match s {
            Operand::Reg(r) | Operand::NotReg(r) => *r = f(*r),
            _ => {}
        }
    }
    if let Some(g) = &mut inst.guard {
        g.reg = f(g.reg);
    }
    for d in inst.dsts.iter_mut().flatten() {
        *d = f(*d);
    }
}

/// `ld.local.b32|b64 t, [slot]`.
fn local_load(t: Reg, offset: u32, wide: bool, span: ptx::Span) -> Inst {
    let mut i = Inst::new(
        Op::Ld {
            space: Space::Local,
            ty: if wide { Ty::B64 } else { Ty::B32 },
            vec: 1,
            offset: offset as i32,
            dst_bits: if wide { 64 } else { 32 },
            volatile: false,
        },
        span,
    );
    i.dsts[0] = Some(t);
    i.n_dsts = 1;
    i.srcs[0] = Operand::Imm(0);
    i.n_srcs = 1;
    i
}

/// `st.local.b32|b64 [slot], t`.
fn local_store(t: Reg, offset: u32, wide: bool, span: ptx::Span) -> Inst {
    let mut i = Inst::new(
        Op::St {
            space: Space::Local,
            ty: if wide { Ty::B64 } else { Ty::B32 },
            vec: 1,
            offset: offset as i32,
        },
        span,
    );
    i.srcs[0] = Operand::Imm(0);
    i.srcs[1] = Operand::Reg(t);
    i.n_srcs = 2;
    i
}

/// Loop nesting depth of each block, from natural loops of back edges (an edge to a block
/// that dominates its source). Spill costs weigh each use by 10^depth.
fn loop_depths(cfg: &Cfg) -> Vec<u32> {
    let nb = cfg.blocks.len();
    let dominates = |a: usize, b: usize| {
        let mut x = b;
        loop {
            if x == a {
                return true;
            }
            match cfg.idom[x] {
                Some(d) => x = d.index(),
                None => return false,
            }
        }
    };
    let mut depth = vec![0u32; nb];
    for (b, block) in cfg.blocks.iter() {
        for &h in &block.succs {
            if dominates(h.index(), b.index()) {
                let mut body = vec![false; nb];
                body[h.index()] = true;
                let mut stack = vec![b.index()];
                while let Some(x) = stack.pop() {
                    if !body[x] {
                        body[x] = true;
                        stack.extend(
                            cfg.blocks[BlockId(x as u32)]
                                .preds
                                .iter()
                                .map(|p| p.index()),
                        );
                    }
                }
                for (x, inside) in body.iter().enumerate() {
                    if *inside {
                        depth[x] += 1;
                    }
                }
            }
        }
    }
    depth
}
