//! Idempotence of thread blocks, for SM flushing (papers/lin-lightweight §II-B; Chimera's
//! flushing as summarised in papers/li-pep §2.2).
//!
//! Flushing drops a running thread block (TB) and later relaunches it from its first
//! instruction. That is correct only if the discarded partial execution left nothing that
//! the re-execution, or anyone else, can observe differently. For every instruction we
//! compute whether a TB that has *reached* it (not yet executed it) can still be flushed:
//! a forward "may have happened" dataflow over the CFG, so an instruction is flushable only
//! if **no path** from the entry to it passes a *breaking* instruction. Guarded instructions
//! count (they may execute). Loops are handled by the fixed point: a breaking instruction in
//! a loop body breaks the whole loop from the second iteration on, including its header.
//!
//! # Strict idempotence
//!
//! Breaking instructions:
//! * a store (`st`) to global memory or through a generic address (which may be global);
//! * an atomic or reduction (`atom`, `red`) on global memory or through a generic address.
//!
//! Not breaking: stores and atomics to **shared** memory, and stores to local memory.
//! Shared memory is private to the TB, and a relaunched TB starts with fresh shared memory
//! that it initialises itself (any value it reads before writing was undefined anyway), so
//! nothing outside the TB, and nothing the re-execution reads, depends on them. The same holds
//! for per-thread local memory. Generic accesses whose address provably derives from a
//! `cvta` of a shared or local address are treated as shared/local.
//!
//! # Relaxed idempotence
//!
//! A global store does not break idempotence if re-executing it writes the same value to a
//! location nobody reads the old value of: the TB computes its inputs again from memory the
//! kernel never overwrites. Breaking instructions:
//! * every global or generic atomic / reduction (its result depends on how many times it ran);
//! * a global or generic store that **may alias** a location the kernel reads: any global or
//!   generic load (`ld`, `ldu`, `ld.global.nc`) or atomic of the kernel, anywhere in it.
//!
//! May-alias uses a conservative base-pointer analysis ([`PointerRoots`]): every register
//! gets the set of *roots* its value may derive from, by a flow-insensitive fixed point over
//! all definitions. `ld.param` of an 8-byte parameter is the root "that parameter" (a
//! smaller parameter cannot be a 64-bit pointer); the address of a module variable is the root
//! "that variable"; `cvta` of a shared/local address is the root "TB-private". Values flow
//! through `mov`, `cvta`, `cvt`, `add`/`sub`, the addend of `mad` (`c` of `a*b+c`), bitwise
//! ops, `selp` and the like (union of the sources). `mul`, `mul.wide` and `shl` produce
//! *offsets* (no root): pointers are not scaled. A value loaded from memory (other than
//! `ld.param`) or returned by an atomic or a shuffle from memory is *unknown*. An address with
//! an unknown root, or with no root at all (an absolute address built from immediates), may
//! alias anything.
//!
//! [`AliasModel`] says what roots mean:
//! * [`AliasModel::Conservative`] (the default): any two global accesses may alias, whatever
//!   their roots: a kernel's pointer arguments may overlap.
//! * [`AliasModel::RestrictParams`]: two global accesses may alias unless both have known
//!   roots and the root sets are disjoint. This assumes the pointer arguments of the kernel
//!   point to non-overlapping buffers (C's `__restrict__` semantics) — true of every suite
//!   kernel's launches, not of every program.
//!
//! Not modelled: values that are not deterministic across runs (`clock`, `%smid`) stored to
//! memory, and reads by *other* kernels running concurrently.

use kir::inst::{ArithOp, Op, Operand, Space};
use kir::{GlobalId, Id, InstId, Kernel, Reg};

use crate::loops::reachable;

/// How global accesses may alias.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AliasModel {
    /// Any two global (or generic) accesses may alias.
    #[default]
    Conservative,
    /// Accesses deriving from different pointer parameters (or module variables) never
    /// alias: the kernel's pointer arguments are assumed not to overlap (`__restrict__`).
    RestrictParams,
}

/// Parameters of the idempotence analysis.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IdempotenceConfig {
    pub alias: AliasModel,
}

/// Where a value may derive from (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Roots {
    /// Bit `i`: parameter `i` of the kernel (parameters from 64 on make the value unknown).
    pub params: u64,
    /// Bit `i`: module variable `GlobalId(i)` (from 64 on: unknown).
    pub globals: u64,
    /// A shared- or local-space address converted to generic.
    pub private: bool,
    /// Loaded from memory or otherwise untraceable.
    pub unknown: bool,
}

impl Roots {
    const UNKNOWN: Roots = Roots {
        params: 0,
        globals: 0,
        private: false,
        unknown: true,
    };

    fn union(self, o: Roots) -> Roots {
        Roots {
            params: self.params | o.params,
            globals: self.globals | o.globals,
            private: self.private | o.private,
            unknown: self.unknown | o.unknown,
        }
    }

    fn is_empty(self) -> bool {
        self == Roots::default()
    }

    /// Whether the address certainly points into TB-private (shared or local) memory.
    pub fn only_private(self) -> bool {
        self.private && !self.unknown && self.params == 0 && self.globals == 0
    }

    /// Whether the roots identify the memory precisely enough to rule out aliasing.
    fn known(self) -> bool {
        !self.unknown && !self.is_empty()
    }
}

/// Flow-insensitive base-pointer roots of every register.
#[derive(Clone, Debug, Default)]
pub struct PointerRoots {
    regs: Vec<Roots>,
}

impl PointerRoots {
    /// Computes the roots of every register of `kernel`.
    pub fn compute(kernel: &Kernel) -> Self {
        let mut pr = PointerRoots {
            regs: vec![Roots::default(); kernel.regs.len()],
        };
        let mut changed = true;
        while changed {
            changed = false;
            for inst in kernel.insts.values() {
                let r = pr.result_roots(kernel, inst);
                if r.is_empty() {
                    continue;
                }
                for d in inst.defs() {
                    let old = pr.regs[d.index()];
                    let new = old.union(r);
                    if new != old {
                        pr.regs[d.index()] = new;
                        changed = true;
                    }
                }
            }
        }
        pr
    }

    /// The roots of register `r`.
    pub fn of_reg(&self, r: Reg) -> Roots {
        self.regs[r.index()]
    }

    /// The roots of an operand.
    pub fn of_operand(&self, o: Operand) -> Roots {
        match o {
            Operand::Reg(r) | Operand::NotReg(r) => self.regs[r.index()],
            Operand::GlobalAddr(g, _) => global_root(g),
            Operand::None | Operand::Imm(_) | Operand::Special(_) => Roots::default(),
        }
    }

    fn union_srcs(&self, srcs: &[Operand]) -> Roots {
        srcs.iter()
            .fold(Roots::default(), |acc, &o| acc.union(self.of_operand(o)))
    }

    /// The roots of what `inst` writes.
    fn result_roots(&self, kernel: &Kernel, inst: &kir::Inst) -> Roots {
        let s = inst.srcs();
        match inst.op {
            Op::Ld {
                space: Space::Param,
                offset,
                ..
            } => match s.first() {
                Some(&Operand::Imm(base)) => {
                    let at = base as i64 + offset as i64;
                    kernel
                        .params
                        .iter()
                        .position(|p| at >= p.offset as i64 && at < p.offset as i64 + p.size as i64)
                        .map_or(Roots::UNKNOWN, |i| {
                            if kernel.params[i].size != 8 {
                                Roots::default()
                            } else if i < 64 {
                                Roots {
                                    params: 1 << i,
                                    ..Roots::default()
                                }
                            } else {
                                Roots::UNKNOWN
                            }
                        })
                }
                _ => Roots::UNKNOWN,
            },
            // Constant memory holds no device pointers the analysis could name.
            Op::Ld { .. } | Op::Atom { .. } => Roots::UNKNOWN,
            Op::WmmaLoad { .. } | Op::Ldmatrix { .. } | Op::Tex { .. } => Roots::UNKNOWN,
            // Matrix products and packed conversions of data are no pointers.
            Op::Mma { .. } | Op::CvtPack { .. } | Op::CvtFp8 { .. } => Roots::default(),
            Op::Cvta {
                space: Space::Shared | Space::Local,
                to_generic: true,
                ..
            } => Roots {
                private: true,
                ..Roots::default()
            },
            Op::Arith {
                op: ArithOp::Mul | ArithOp::MulLo | ArithOp::MulHi | ArithOp::MulWide,
                ..
            }
            | Op::Arith {
                op: ArithOp::Mul24Lo | ArithOp::Mul24Hi | ArithOp::Shl,
                ..
            } => Roots::default(),
            Op::Arith {
                op:
                    ArithOp::MadLo
                    | ArithOp::MadHi
                    | ArithOp::MadWide
                    | ArithOp::Mad24Lo
                    | ArithOp::Mad24Hi,
                ..
            } => s.get(2).map_or(Roots::default(), |&c| self.of_operand(c)),
            Op::Setp { .. }
            | Op::Set { .. }
            | Op::Testp { .. }
            | Op::IsSpace { .. }
            | Op::Vote { .. }
            | Op::Activemask
            | Op::Redux { .. }
            | Op::Match { .. }
            | Op::Elect
            | Op::Trap
            | Op::UnmatchedTarget(_) => Roots::default(),
            _ => self.union_srcs(s),
        }
    }
}

fn global_root(g: GlobalId) -> Roots {
    if g.index() < 64 {
        Roots {
            globals: 1 << g.index(),
            ..Roots::default()
        }
    } else {
        Roots::UNKNOWN
    }
}

/// What an instruction does to memory visible outside its TB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Effect {
    None,
    /// A load (or the read half of an atomic) of global memory.
    Read,
    Store,
    Atomic,
}

fn effect(inst: &kir::Inst, roots: &PointerRoots) -> (Effect, Roots) {
    let (space, eff) = match inst.op {
        Op::Ld { space, .. } => (space, Effect::Read),
        Op::St { space, .. } => (space, Effect::Store),
        Op::Atom { space, .. } | Op::Red { space, .. } => (space, Effect::Atomic),
        Op::WmmaLoad { space, .. } | Op::Ldmatrix { space, .. } => (space, Effect::Read),
        Op::WmmaStore { space, .. } | Op::Stmatrix { space, .. } => (space, Effect::Store),
        // Reads global memory (its second address); the shared-memory half is the TB's own.
        Op::CpAsync { .. } => {
            return (Effect::Read, roots.of_operand(inst.srcs()[1]));
        }
        // Texels are global memory behind an opaque handle.
        Op::Tex { .. } => return (Effect::Read, Roots::UNKNOWN),
        _ => return (Effect::None, Roots::default()),
    };
    let addr = roots.of_operand(inst.srcs()[0]);
    match space {
        Space::Global => (eff, addr),
        Space::Generic if !addr.only_private() => (eff, addr),
        _ => (Effect::None, addr),
    }
}

/// Per-instruction idempotence of a kernel, strict and relaxed.
#[derive(Clone, Debug, Default)]
pub struct Idempotence {
    strict: Vec<bool>,
    relaxed: Vec<bool>,
    strict_breakers: Vec<InstId>,
    relaxed_breakers: Vec<InstId>,
}

impl Idempotence {
    /// Analyses `kernel`.
    pub fn compute(kernel: &Kernel, config: &IdempotenceConfig) -> Self {
        let roots = PointerRoots::compute(kernel);
        let effects: Vec<(Effect, Roots)> =
            kernel.insts.values().map(|i| effect(i, &roots)).collect();
        // The address roots of every global read (loads and atomics).
        let reads: Vec<Roots> = effects
            .iter()
            .filter(|(e, _)| matches!(e, Effect::Read | Effect::Atomic))
            .map(|&(_, roots)| roots)
            .collect();
        let may_alias = |a: Roots, b: Roots| match config.alias {
            AliasModel::Conservative => true,
            AliasModel::RestrictParams => {
                !(a.known() && b.known() && a.params & b.params == 0 && a.globals & b.globals == 0)
            }
        };
        let mut strict_breakers = Vec::new();
        let mut relaxed_breakers = Vec::new();
        for (pc, &(e, r)) in effects.iter().enumerate() {
            let pc = InstId::new(pc);
            match e {
                Effect::Atomic => {
                    strict_breakers.push(pc);
                    relaxed_breakers.push(pc);
                }
                Effect::Store => {
                    strict_breakers.push(pc);
                    if reads.iter().any(|&a| may_alias(r, a)) {
                        relaxed_breakers.push(pc);
                    }
                }
                Effect::Read | Effect::None => {}
            }
        }
        Idempotence {
            strict: clean_before(kernel, &strict_breakers),
            relaxed: clean_before(kernel, &relaxed_breakers),
            strict_breakers,
            relaxed_breakers,
        }
    }

    /// Whether a TB that reached `pc` can be flushed under strict idempotence.
    pub fn strict(&self, pc: InstId) -> bool {
        self.strict[pc.index()]
    }

    /// Whether a TB that reached `pc` can be flushed under relaxed idempotence.
    pub fn relaxed(&self, pc: InstId) -> bool {
        self.relaxed[pc.index()]
    }

    /// The instructions that break strict idempotence once executed.
    pub fn strict_breakers(&self) -> &[InstId] {
        &self.strict_breakers
    }

    /// The instructions that break relaxed idempotence once executed.
    pub fn relaxed_breakers(&self) -> &[InstId] {
        &self.relaxed_breakers
    }

    /// Whether the whole kernel is strictly idempotent (a TB can be flushed anywhere).
    pub fn kernel_strict(&self) -> bool {
        self.strict_breakers.is_empty()
    }

    /// Whether the whole kernel is relaxed-idempotent.
    pub fn kernel_relaxed(&self) -> bool {
        self.relaxed_breakers.is_empty()
    }
}

/// For every instruction: whether no path from the entry to it (excluding itself) passes a
/// breaker. Unreachable instructions are trivially clean.
fn clean_before(kernel: &Kernel, breakers: &[InstId]) -> Vec<bool> {
    let n = kernel.insts.len();
    let cfg = &kernel.cfg;
    let nb = cfg.blocks.len();
    let mut is_breaker = vec![false; n];
    for &b in breakers {
        is_breaker[b.index()] = true;
    }
    let has_breaker: Vec<bool> = cfg
        .blocks
        .values()
        .map(|b| {
            is_breaker[b.start.index()..b.end.index()]
                .iter()
                .any(|&x| x)
        })
        .collect();
    // dirty_in[b]: a breaker may have run before block b starts.
    let mut dirty_in = vec![false; nb];
    let mut changed = true;
    while changed {
        changed = false;
        for (b, block) in cfg.blocks.iter() {
            if !reachable(kernel, b) {
                continue;
            }
            let out = dirty_in[b.index()] || has_breaker[b.index()];
            if out {
                for &s in &block.succs {
                    if !dirty_in[s.index()] {
                        dirty_in[s.index()] = true;
                        changed = true;
                    }
                }
            }
        }
    }
    let mut clean = vec![true; n];
    for (b, block) in cfg.blocks.iter() {
        let mut dirty = dirty_in[b.index()];
        for pc in block.start.index()..block.end.index() {
            clean[pc] = !dirty;
            dirty |= is_breaker[pc];
        }
    }
    clean
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::kernel;

    const COPY: &str = r#"
        .reg .b32 %r<4>;
        .reg .b64 %rd<8>;
        .reg .f32 %f<4>;
        ld.param.u64 %rd1, [k_in];
        ld.param.u64 %rd2, [k_out];
        cvta.to.global.u64 %rd3, %rd1;
        cvta.to.global.u64 %rd4, %rd2;
        mov.u32 %r1, %tid.x;
        mul.wide.u32 %rd5, %r1, 4;
        add.s64 %rd6, %rd3, %rd5;
        ld.global.f32 %f1, [%rd6];
        add.s64 %rd7, %rd4, %rd5;
        st.global.f32 [%rd7], %f1;
        exit;
    "#;

    #[test]
    fn copy_kernel_strict_vs_relaxed() {
        let k = kernel(COPY);
        let pr = PointerRoots::compute(&k);
        let store = InstId(9);
        assert!(matches!(k.insts[store].op, Op::St { .. }));
        assert_eq!(pr.of_operand(k.insts[store].srcs[0]).params, 0b10);
        assert_eq!(pr.of_operand(k.insts[InstId(7)].srcs[0]).params, 0b01);

        let strict = Idempotence::compute(&k, &IdempotenceConfig::default());
        assert!(strict.strict(store));
        assert!(!strict.strict(InstId(10)));
        // Conservative aliasing: the store may overwrite the input.
        assert!(!strict.relaxed(InstId(10)));
        let restrict = Idempotence::compute(
            &k,
            &IdempotenceConfig {
                alias: AliasModel::RestrictParams,
            },
        );
        assert!(!restrict.strict(InstId(10)));
        assert!(restrict.relaxed(InstId(10)));
        assert!(restrict.kernel_relaxed());
    }

    #[test]
    fn read_modify_write_and_atomics_break_relaxed() {
        let k = kernel(
            r#"
            .reg .b32 %r<4>;
            .reg .b64 %rd<8>;
            ld.param.u64 %rd1, [k_out];
            cvta.to.global.u64 %rd2, %rd1;
            ld.global.u32 %r1, [%rd2];
            add.u32 %r1, %r1, 1;
            st.global.u32 [%rd2], %r1;
            ld.param.u64 %rd3, [k_in];
            atom.global.add.u32 %r2, [%rd3], 1;
            exit;
            "#,
        );
        let cfg = IdempotenceConfig {
            alias: AliasModel::RestrictParams,
        };
        let id = Idempotence::compute(&k, &cfg);
        assert_eq!(id.relaxed_breakers(), &[InstId(4), InstId(6)]);
        assert!(id.relaxed(InstId(4)));
        assert!(!id.relaxed(InstId(5)));
    }

    #[test]
    fn shared_stores_keep_strict_idempotence_and_loops_propagate() {
        let k = kernel(
            r#"
            .reg .pred %p<2>;
            .reg .b32 %r<4>;
            .reg .b64 %rd<4>;
            .shared .align 4 .b8 buf[128];
            mov.u32 %r1, 0;
            mov.u32 %r2, buf;
        LOOP:
            st.shared.u32 [%r2], %r1;
            setp.eq.u32 %p1, %r1, 5;
            @%p1 bra SKIP;
            ld.param.u64 %rd1, [k_out];
            st.global.u32 [%rd1], %r1;
        SKIP:
            add.u32 %r1, %r1, 1;
            setp.lt.u32 %p1, %r1, 10;
            @%p1 bra LOOP;
            exit;
            "#,
        );
        let id = Idempotence::compute(&k, &IdempotenceConfig::default());
        assert_eq!(id.strict_breakers(), &[InstId(6)]);
        // The shared store does not break; the global store breaks every instruction a TB
        // can reach after it, which, around the back edge, is the whole loop and the store
        // itself (a TB may reach pc6 a second time).
        assert!(id.strict(InstId(0)));
        assert!(id.strict(InstId(1)));
        for pc in 2..=10 {
            assert!(!id.strict(InstId(pc)), "pc{pc}");
        }
    }
}
