//! Dominator trees over any graph (Cooper, Harvey and Kennedy, "A Simple, Fast Dominance
//! Algorithm"). Post-dominators are the same algorithm run on the reversed graph.

/// A directed graph over dense node indices.
pub trait Graph {
    fn num_nodes(&self) -> usize;
    fn succs(&self, n: usize) -> &[usize];
    fn preds(&self, n: usize) -> &[usize];
}

/// The same graph with every edge reversed.
pub struct Reversed<'a, G: Graph>(pub &'a G);

impl<G: Graph> Graph for Reversed<'_, G> {
    fn num_nodes(&self) -> usize {
        self.0.num_nodes()
    }
    fn succs(&self, n: usize) -> &[usize] {
        self.0.preds(n)
    }
    fn preds(&self, n: usize) -> &[usize] {
        self.0.succs(n)
    }
}

/// A graph stored as adjacency lists.
#[derive(Clone, Debug, Default)]
pub struct AdjGraph {
    pub succs: Vec<Vec<usize>>,
    pub preds: Vec<Vec<usize>>,
}

impl AdjGraph {
    pub fn new(n: usize) -> Self {
        AdjGraph {
            succs: vec![Vec::new(); n],
            preds: vec![Vec::new(); n],
        }
    }

    pub fn add_edge(&mut self, from: usize, to: usize) {
        if !self.succs[from].contains(&to) {
            self.succs[from].push(to);
            self.preds[to].push(from);
        }
    }
}

impl Graph for AdjGraph {
    fn num_nodes(&self) -> usize {
        self.succs.len()
    }
    fn succs(&self, n: usize) -> &[usize] {
        &self.succs[n]
    }
    fn preds(&self, n: usize) -> &[usize] {
        &self.preds[n]
    }
}

/// Nodes reachable from `entry` in reverse postorder (iterative DFS, no recursion).
pub fn reverse_postorder(g: &impl Graph, entry: usize) -> Vec<usize> {
    let n = g.num_nodes();
    let mut visited = vec![false; n];
    let mut post = Vec::with_capacity(n);
    let mut stack: Vec<(usize, usize)> = vec![(entry, 0)];
    visited[entry] = true;
    while let Some(&mut (node, ref mut next)) = stack.last_mut() {
        let succs = g.succs(node);
        if *next < succs.len() {
            let s = succs[*next];
            *next += 1;
            if !visited[s] {
                visited[s] = true;
                stack.push((s, 0));
            }
        } else {
            post.push(node);
            stack.pop();
        }
    }
    post.reverse();
    post
}

/// Immediate dominators: `idom[entry] == Some(entry)`, `None` for unreachable nodes.
pub fn dominators(g: &impl Graph, entry: usize) -> Vec<Option<usize>> {
    let n = g.num_nodes();
    let rpo = reverse_postorder(g, entry);
    let mut order = vec![usize::MAX; n];
    for (i, &b) in rpo.iter().enumerate() {
        order[b] = i;
    }
    let mut idom: Vec<Option<usize>> = vec![None; n];
    idom[entry] = Some(entry);
    let intersect = |idom: &[Option<usize>], mut a: usize, mut b: usize| {
        while a != b {
            while order[a] > order[b] {
                a = idom[a].expect("processed node has an idom");
            }
            while order[b] > order[a] {
                b = idom[b].expect("processed node has an idom");
            }
        }
        a
    };
    let mut changed = true;
    while changed {
        changed = false;
        for &b in rpo.iter().skip(1) {
            let mut new_idom: Option<usize> = None;
            for &p in g.preds(b) {
                if idom[p].is_none() {
                    continue;
                }
                new_idom = Some(match new_idom {
                    None => p,
                    Some(cur) => intersect(&idom, p, cur),
                });
            }
            if new_idom.is_some() && idom[b] != new_idom {
                idom[b] = new_idom;
                changed = true;
            }
        }
    }
    idom
}

/// Whether `a` dominates `b` according to an idom array.
pub fn dominates(idom: &[Option<usize>], a: usize, mut b: usize) -> bool {
    loop {
        if a == b {
            return true;
        }
        match idom[b] {
            Some(p) if p != b => b = p,
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(n: usize, edges: &[(usize, usize)]) -> AdjGraph {
        let mut g = AdjGraph::new(n);
        for &(a, b) in edges {
            g.add_edge(a, b);
        }
        g
    }

    #[test]
    fn diamond_with_loop() {
        // 0 -> 1 -> {2, 3} -> 4 -> 1 (back edge), 4 -> 5
        let g = graph(6, &[(0, 1), (1, 2), (1, 3), (2, 4), (3, 4), (4, 1), (4, 5)]);
        let idom = dominators(&g, 0);
        assert_eq!(
            idom,
            vec![Some(0), Some(0), Some(1), Some(1), Some(1), Some(4)]
        );
        let pdom = dominators(&Reversed(&g), 5);
        // 2 and 3 are post-dominated by 4; 1 by 4; 0 by 1.
        assert_eq!(pdom[2], Some(4));
        assert_eq!(pdom[3], Some(4));
        assert_eq!(pdom[1], Some(4));
        assert_eq!(pdom[0], Some(1));
        assert!(dominates(&idom, 1, 5));
        assert!(!dominates(&idom, 2, 4));
    }

    #[test]
    fn unreachable_nodes_have_no_idom() {
        let g = graph(3, &[(0, 1)]);
        assert_eq!(dominators(&g, 0), vec![Some(0), Some(0), None]);
    }
}
