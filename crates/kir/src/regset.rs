//! A dense bitset of registers, sized from the kernel's register count.
//!
//! Liveness ([`crate::liveness`], for the register allocator and the analyses alike), the
//! analyses' preemption-point contexts and the `pp` liveness vector all use it. The set
//! is generic over whatever [`Reg`] ids a kernel uses: virtual registers straight out of
//! lowering, or physical registers after register allocation (then bit `i` is physical
//! register `i`, which is what a `pp` instruction encodes: lin-lightweight §IV-A).

use std::fmt;

use crate::inst::LiveVector;
use crate::{Id, Reg};

/// A set of registers: one bit per register index.
///
/// Invariant: `words.len() == ceil(capacity / 64)` and no bit at or beyond `capacity` is set,
/// so equality and [`RegSet::len`] only see real registers.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct RegSet {
    words: Vec<u64>,
    capacity: usize,
}

impl RegSet {
    /// An empty set able to hold registers `0..capacity`.
    pub fn with_capacity(capacity: usize) -> Self {
        RegSet {
            words: vec![0; capacity.div_ceil(64)],
            capacity,
        }
    }

    /// Empties the set and resizes it to hold `0..capacity`, reusing its buffer.
    pub fn reset(&mut self, capacity: usize) {
        self.words.clear();
        self.words.resize(capacity.div_ceil(64), 0);
        self.capacity = capacity;
    }

    /// Removes every register (the capacity is kept).
    pub fn clear(&mut self) {
        self.words.fill(0);
    }

    /// The number of registers the set can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Adds `r`; returns whether it was absent. Panics if `r` is beyond the capacity.
    #[inline]
    pub fn insert(&mut self, r: Reg) -> bool {
        let i = r.index();
        assert!(i < self.capacity, "{r} outside a set of {}", self.capacity);
        let (w, b) = (i / 64, 1u64 << (i % 64));
        let absent = self.words[w] & b == 0;
        self.words[w] |= b;
        absent
    }

    /// Removes `r`; returns whether it was present.
    #[inline]
    pub fn remove(&mut self, r: Reg) -> bool {
        let i = r.index();
        if i >= self.capacity {
            return false;
        }
        let (w, b) = (i / 64, 1u64 << (i % 64));
        let present = self.words[w] & b != 0;
        self.words[w] &= !b;
        present
    }

    #[inline]
    pub fn contains(&self, r: Reg) -> bool {
        let i = r.index();
        i < self.capacity && self.words[i / 64] & (1 << (i % 64)) != 0
    }

    /// Number of registers in the set.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// `self ∪= other`; returns whether `self` grew. Both sets must have the same capacity.
    #[inline]
    pub fn union_with(&mut self, other: &RegSet) -> bool {
        debug_assert_eq!(self.capacity, other.capacity);
        let mut changed = false;
        for (a, &b) in self.words.iter_mut().zip(&other.words) {
            let n = *a | b;
            changed |= n != *a;
            *a = n;
        }
        changed
    }

    /// `self −= other`.
    #[inline]
    pub fn subtract(&mut self, other: &RegSet) {
        debug_assert_eq!(self.capacity, other.capacity);
        for (a, &b) in self.words.iter_mut().zip(&other.words) {
            *a &= !b;
        }
    }

    /// Makes `self` a copy of `other`, reusing `self`'s buffer.
    pub fn copy_from(&mut self, other: &RegSet) {
        self.words.clear();
        self.words.extend_from_slice(&other.words);
        self.capacity = other.capacity;
    }

    /// Whether every register of `self` is in `other`.
    pub fn is_subset(&self, other: &RegSet) -> bool {
        self.words
            .iter()
            .zip(other.words.iter().chain(std::iter::repeat(&0)))
            .all(|(&a, &b)| a & !b == 0)
    }

    /// The registers in increasing index order.
    pub fn iter(&self) -> impl Iterator<Item = Reg> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &word)| {
            let mut bits = word;
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                Some(Reg::new(w * 64 + b))
            })
        })
    }

    /// The raw words (bit `i % 64` of word `i / 64` is register `i`).
    pub fn as_words(&self) -> &[u64] {
        &self.words
    }

    /// Encodes the set as a `pp` liveness vector (lin-lightweight §IV-A): register index `i`
    /// (the [`Reg`] index, which after register allocation is the physical register number)
    /// sets bit `i` for `i < 54` ([`LiveVector::ENCODABLE`]); any live register with index 54
    /// or more sets the single overflow bit ([`LiveVector::OVERFLOW`]), meaning "save every
    /// register from 54 up".
    pub fn to_live_vector(&self) -> LiveVector {
        let mut v = 0u64;
        for r in self.iter() {
            let i = r.index() as u32;
            if i < LiveVector::ENCODABLE {
                v |= 1 << i;
            } else {
                v |= LiveVector::OVERFLOW;
                break;
            }
        }
        LiveVector(v)
    }
}

/// Makes `v` hold `n` empty sets of capacity `cap`, reusing its buffers.
pub fn reset_sets(v: &mut Vec<RegSet>, n: usize, cap: usize) {
    v.truncate(n);
    for s in v.iter_mut() {
        s.reset(cap);
    }
    v.resize_with(n, || RegSet::with_capacity(cap));
}

impl fmt::Debug for RegSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}

impl FromIterator<Reg> for RegSet {
    /// Collects into a set whose capacity is one past the largest register.
    fn from_iter<T: IntoIterator<Item = Reg>>(iter: T) -> Self {
        let regs: Vec<Reg> = iter.into_iter().collect();
        let cap = regs.iter().map(|r| r.index() + 1).max().unwrap_or(0);
        let mut s = RegSet::with_capacity(cap);
        for r in regs {
            s.insert(r);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_remove_iter_across_words() {
        let mut s = RegSet::with_capacity(130);
        assert!(s.insert(Reg(0)));
        assert!(s.insert(Reg(64)));
        assert!(s.insert(Reg(129)));
        assert!(!s.insert(Reg(64)));
        assert_eq!(s.len(), 3);
        assert_eq!(
            s.iter().collect::<Vec<_>>(),
            vec![Reg(0), Reg(64), Reg(129)]
        );
        assert!(s.remove(Reg(64)));
        assert!(!s.contains(Reg(64)));
        assert!(!s.remove(Reg(500)));
        let mut t = RegSet::with_capacity(130);
        t.insert(Reg(3));
        assert!(t.union_with(&s));
        assert!(!t.union_with(&s));
        assert!(s.is_subset(&t));
        assert!(!t.is_subset(&s));
        t.subtract(&s);
        assert_eq!(t.iter().collect::<Vec<_>>(), vec![Reg(3)]);
    }

    #[test]
    fn live_vector_encodes_low_registers_and_overflow() {
        let mut s = RegSet::with_capacity(70);
        s.insert(Reg(0));
        s.insert(Reg(53));
        assert_eq!(s.to_live_vector(), LiveVector(1 | 1 << 53));
        s.insert(Reg(54));
        s.insert(Reg(69));
        let v = s.to_live_vector();
        assert_eq!(v.0, 1 | 1 << 53 | LiveVector::OVERFLOW);
        assert!(v.is_live(60));
        assert!(!v.is_live(1));
    }
}
