//! Backward liveness of registers over basic blocks, and the bit sets it is built on.
//!
//! A guarded definition (`@p op d, ...`) does not kill `d`: lanes whose guard is false keep
//! the old value, so the old value stays live above the definition whenever `d` is live
//! below it. That one rule is what makes "a guarded def writes the same register as the
//! value it may leave in place" fall out of ordinary interference.

use kir::{Id, Inst};

/// A fixed-size set of small integers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BitSet {
    words: Vec<u64>,
}

impl BitSet {
    pub fn new(n: usize) -> Self {
        BitSet {
            words: vec![0; n.div_ceil(64)],
        }
    }

    #[inline]
    pub fn insert(&mut self, i: usize) -> bool {
        let (w, b) = (i / 64, 1u64 << (i % 64));
        let was = self.words[w] & b != 0;
        self.words[w] |= b;
        !was
    }

    #[inline]
    pub fn remove(&mut self, i: usize) {
        self.words[i / 64] &= !(1u64 << (i % 64));
    }

    /// `self |= other`; whether anything was added.
    pub fn union_with(&mut self, other: &BitSet) -> bool {
        let mut changed = false;
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            let n = *a | b;
            changed |= n != *a;
            *a = n;
        }
        changed
    }

    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &bits)| {
            let mut bits = bits;
            std::iter::from_fn(move || {
                if bits == 0 {
                    None
                } else {
                    let b = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    Some(w * 64 + b)
                }
            })
        })
    }
}

/// Registers live into and out of each block.
pub struct Liveness {
    pub live_in: Vec<BitSet>,
    pub live_out: Vec<BitSet>,
}

/// Applies one instruction backwards: `live` goes from after `inst` to before it.
pub fn step_back(live: &mut BitSet, inst: &Inst) {
    if inst.guard.is_none() {
        for d in inst.defs() {
            live.remove(d.index());
        }
    }
    for u in inst.uses() {
        live.insert(u.index());
    }
}

/// Liveness of `n_regs` registers over `blocks` (instructions per block) and `succs`.
pub fn compute(n_regs: usize, blocks: &[Vec<&Inst>], succs: &[Vec<usize>]) -> Liveness {
    let nb = blocks.len();
    // Per-block transfer: upward-exposed uses (gen) and unconditional definitions (kill).
    let mut gen = vec![BitSet::new(n_regs); nb];
    let mut kill = vec![BitSet::new(n_regs); nb];
    for (b, insts) in blocks.iter().enumerate() {
        for inst in insts.iter().rev() {
            if inst.guard.is_none() {
                for d in inst.defs() {
                    gen[b].remove(d.index());
                    kill[b].insert(d.index());
                }
            }
            for u in inst.uses() {
                gen[b].insert(u.index());
            }
        }
    }
    let mut live_in = gen.clone();
    let mut live_out = vec![BitSet::new(n_regs); nb];
    let mut changed = true;
    while changed {
        changed = false;
        for b in (0..nb).rev() {
            for &s in &succs[b] {
                let (out, inn) = (&mut live_out[b], &live_in[s]);
                out.union_with(inn);
            }
            let mut inn = live_out[b].clone();
            for (w, k) in inn.words.iter_mut().zip(&kill[b].words) {
                *w &= !k;
            }
            inn.union_with(&gen[b]);
            if inn != live_in[b] {
                live_in[b] = inn;
                changed = true;
            }
        }
    }
    Liveness { live_in, live_out }
}
