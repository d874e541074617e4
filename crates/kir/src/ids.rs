//! Typed indices and dense vectors indexed by them (the Cranelift `EntityRef` idiom).

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Index, IndexMut};

/// An entity id: a dense `u32` index.
pub trait Id: Copy + Eq + Ord + fmt::Debug {
    fn new(index: usize) -> Self;
    fn index(self) -> usize;
}

/// Defines a typed id: a `u32` newtype implementing [`Id`] whose `Display` is `prefix`
/// followed by the index. Attributes (docs, extra derives) pass through.
#[macro_export]
macro_rules! define_id {
    ($(#[$attr:meta])* $name:ident, $prefix:literal) => {
        $(#[$attr])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
        pub struct $name(pub u32);

        impl $crate::Id for $name {
            #[inline]
            fn new(index: usize) -> Self {
                $name(index as u32)
            }
            #[inline]
            fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

define_id!(
    /// A register of a kernel (virtual, before register allocation).
    Reg,
    "%v"
);
define_id!(
    /// An instruction; also the program counter (instructions are stored in program order).
    InstId,
    "pc"
);
define_id!(
    /// A basic block of the control-flow graph.
    BlockId,
    "bb"
);
define_id!(
    /// A module-scope variable in the global or constant space.
    GlobalId,
    "g"
);
define_id!(
    /// A kernel (`.entry`) of a module.
    KernelId,
    "k"
);

/// A dense vector indexed by a typed id.
#[derive(Clone, PartialEq, Eq)]
pub struct IdVec<I: Id, T> {
    items: Vec<T>,
    _id: PhantomData<I>,
}

impl<I: Id, T> IdVec<I, T> {
    pub fn new() -> Self {
        IdVec {
            items: Vec::new(),
            _id: PhantomData,
        }
    }

    pub fn from_vec(items: Vec<T>) -> Self {
        IdVec {
            items,
            _id: PhantomData,
        }
    }

    /// Appends an item and returns its id.
    pub fn push(&mut self, item: T) -> I {
        self.items.push(item);
        I::new(self.items.len() - 1)
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn get(&self, id: I) -> Option<&T> {
        self.items.get(id.index())
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = (I, &T)> + '_ {
        self.items.iter().enumerate().map(|(i, t)| (I::new(i), t))
    }

    pub fn ids(&self) -> impl ExactSizeIterator<Item = I> {
        (0..self.items.len()).map(I::new)
    }

    pub fn values(&self) -> std::slice::Iter<'_, T> {
        self.items.iter()
    }

    pub fn as_slice(&self) -> &[T] {
        &self.items
    }

    pub fn get_mut(&mut self, id: I) -> Option<&mut T> {
        self.items.get_mut(id.index())
    }

    pub fn values_mut(&mut self) -> std::slice::IterMut<'_, T> {
        self.items.iter_mut()
    }
}

impl<I: Id, T> Default for IdVec<I, T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<I: Id, T: fmt::Debug> fmt::Debug for IdVec<I, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<I: Id, T> Index<I> for IdVec<I, T> {
    type Output = T;
    #[inline]
    fn index(&self, id: I) -> &T {
        &self.items[id.index()]
    }
}

impl<I: Id, T> IndexMut<I> for IdVec<I, T> {
    #[inline]
    fn index_mut(&mut self, id: I) -> &mut T {
        &mut self.items[id.index()]
    }
}
