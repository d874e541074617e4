//! Graph colouring with registers of width one or two (aligned pairs), independent of the IR.
//!
//! Chaitin-Briggs with optimistic colouring: nodes are removed smallest-degree-first (which
//! bounds the colours by the graph's degeneracy and so keeps register counts low even when
//! the budget is generous); when every remaining node has too many neighbours, the one with
//! the lowest spill cost per unit of degree is removed optimistically. Colours are chosen in
//! reverse removal order, lowest free first, preferring the colour of an already-coloured
//! `mov` partner (biased colouring: the `mov` becomes an identity and is removed). A node
//! that finds no colour is reported to the caller, which spills it or moves it to another
//! register file.
//!
//! Degree counts blocked *slots*: a single-width node is blocked by one register per
//! single-width neighbour and two per pair neighbour; a pair is blocked by one aligned pair
//! per neighbour of either width.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};

/// A value to colour.
#[derive(Clone, Debug)]
pub struct Node {
    /// Register file (an index into the `k` passed to [`color`]); `None`: not allocated.
    pub class: Option<usize>,
    /// 1 (one register) or 2 (an aligned pair).
    pub width: u32,
    /// Estimated cost of spilling (weighted uses and definitions).
    pub cost: f64,
    /// Spill temporaries must get a register.
    pub no_spill: bool,
}

/// The interference graph.
pub struct Graph {
    pub nodes: Vec<Node>,
    adj: Vec<Vec<u32>>,
    /// The edges as `min << 32 | max`. A set, not an n × n bit matrix: a kernel may declare
    /// far more registers than it uses (`.reg .b32 %r<1000000>`), and memory must grow with
    /// the interferences, not with the square of the declarations.
    edges: HashSet<u64>,
    /// `mov`-related nodes, for biased colouring.
    pub partners: Vec<Vec<u32>>,
}

impl Graph {
    pub fn new(nodes: Vec<Node>) -> Self {
        let n = nodes.len();
        Graph {
            nodes,
            adj: vec![Vec::new(); n],
            edges: HashSet::new(),
            partners: vec![Vec::new(); n],
        }
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn add_edge(&mut self, a: usize, b: usize) {
        if a == b || self.nodes[a].class.is_none() || self.nodes[a].class != self.nodes[b].class {
            return;
        }
        let key = (a.min(b) as u64) << 32 | a.max(b) as u64;
        if self.edges.insert(key) {
            self.adj[a].push(b as u32);
            self.adj[b].push(a as u32);
        }
    }

    pub fn neighbors(&self, a: usize) -> &[u32] {
        &self.adj[a]
    }

    /// Slots of `v` that neighbour `u` can block.
    fn weight(&self, v: usize, u: usize) -> u32 {
        if self.nodes[v].width == 2 {
            1
        } else {
            self.nodes[u].width
        }
    }
}

/// The outcome of colouring: a colour per node (the first register of a pair), and the
/// nodes that got none.
pub struct Coloring {
    pub colors: Vec<Option<u32>>,
    pub failed: Vec<usize>,
}

/// Colours `g` with `k[class]` registers per class.
pub fn color(g: &Graph, k: &[u32]) -> Coloring {
    let n = g.len();
    let slots = |v: usize| -> u32 {
        let kk = k[g.nodes[v].class.expect("allocated")];
        if g.nodes[v].width == 2 {
            kk / 2
        } else {
            kk
        }
    };
    let mut degree = vec![0u32; n];
    let mut removed = vec![true; n];
    let mut heap = BinaryHeap::new();
    for v in 0..n {
        if g.nodes[v].class.is_some() {
            removed[v] = false;
            degree[v] = g.adj[v].iter().map(|&u| g.weight(v, u as usize)).sum();
            heap.push(Reverse((key(degree[v], g.nodes[v].width), v)));
        }
    }
    let mut remaining = removed.iter().filter(|r| !**r).count();
    let mut stack = Vec::with_capacity(remaining);
    while remaining > 0 {
        // Smallest degree first; stale heap entries are skipped.
        let mut pick = None;
        while let Some(Reverse((kv, v))) = heap.pop() {
            if removed[v] || kv != key(degree[v], g.nodes[v].width) {
                continue;
            }
            if degree[v] < slots(v) {
                pick = Some(v);
            } else {
                heap.push(Reverse((kv, v)));
            }
            break;
        }
        let v = pick.unwrap_or_else(|| {
            // Blocked: remove the cheapest node per unit of degree, optimistically.
            (0..n)
                .filter(|&v| !removed[v])
                .min_by(|&a, &b| {
                    spill_metric(g, a, degree[a])
                        .total_cmp(&spill_metric(g, b, degree[b]))
                        .then(a.cmp(&b))
                })
                .expect("remaining > 0")
        });
        removed[v] = true;
        remaining -= 1;
        stack.push(v);
        for &u in &g.adj[v] {
            let u = u as usize;
            if !removed[u] {
                degree[u] -= g.weight(u, v);
                heap.push(Reverse((key(degree[u], g.nodes[u].width), u)));
            }
        }
    }

    let mut colors: Vec<Option<u32>> = vec![None; n];
    let mut failed = Vec::new();
    let kmax = k.iter().copied().max().unwrap_or(0) as usize;
    let mut busy = vec![false; kmax + 1];
    while let Some(v) = stack.pop() {
        let kk = k[g.nodes[v].class.expect("allocated")] as usize;
        busy[..kk].fill(false);
        for &u in &g.adj[v] {
            if let Some(c) = colors[u as usize] {
                for r in c..c + g.nodes[u as usize].width {
                    busy[r as usize] = true;
                }
            }
        }
        let width = g.nodes[v].width as usize;
        let free = |c: usize| {
            c.is_multiple_of(width) && c + width <= kk && !busy[c..c + width].contains(&true)
        };
        let preferred = g.partners[v]
            .iter()
            .filter_map(|&p| colors[p as usize])
            .find(|&c| free(c as usize));
        let chosen = preferred.or_else(|| (0..kk).find(|&c| free(c)).map(|c| c as u32));
        match chosen {
            Some(c) => colors[v] = Some(c),
            None => failed.push(v),
        }
    }
    Coloring { colors, failed }
}

/// Heap key: pairs count double so that both widths compare on the same scale.
fn key(degree: u32, width: u32) -> u32 {
    degree * width
}

fn spill_metric(g: &Graph, v: usize, degree: u32) -> f64 {
    if g.nodes[v].no_spill {
        f64::INFINITY
    } else {
        g.nodes[v].cost / (degree.max(1) as f64)
    }
}
