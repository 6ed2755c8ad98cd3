//! The subgroups of a team that a hierarchical collective works in: the
//! ranks of my node, the node leaders of my switch group, the leaders of
//! the switch groups. Pure functions of the members' places, so every rank
//! computes the same answer from the exchanged topology without talking.
//!
//! Rules (each rank must derive the same, so they are fixed here):
//! - A **node** is the set of team ranks with the same (switch group, host).
//!   A host whose ranks name different switch groups (a misconfiguration)
//!   is thus split into nodes, one per group, rather than guessed at.
//! - Nodes are ordered by their lowest team rank; so are groups.
//! - A node's **leader** is its lowest team rank; a group's leader is its
//!   lowest team rank (the leader of its first node).
//! - With a **root** (rooted collectives), the root leads its node and its
//!   group instead; every other node and group keeps its leader.

use std::collections::HashMap;

use crate::error::{Error, Result};

/// Where every member of a team sits: nodes and switch groups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Each node's team ranks, ascending; nodes by their lowest rank.
    nodes: Vec<Vec<usize>>,
    /// Each node's group index.
    group_of_node: Vec<usize>,
    /// Each group's node indices, ascending; groups by their lowest rank.
    groups: Vec<Vec<usize>>,
    /// Each team rank's node index.
    node_of: Vec<usize>,
}

/// One rank's view of the hierarchy (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subgroups {
    /// The team ranks of my node, ascending (me included).
    pub node: Vec<usize>,
    /// The leader of my node.
    pub node_leader: usize,
    /// The leaders of the nodes of my switch group, in node order (my node's included).
    pub node_leaders: Vec<usize>,
    /// The leader of my switch group.
    pub group_leader: usize,
    /// The leaders of every switch group, in group order.
    pub group_leaders: Vec<usize>,
}

impl Layout {
    /// The layout of a team whose rank `r` runs on host `places[r].0` under switch group `places[r].1`.
    pub fn new<S: AsRef<str>>(places: &[(S, S)]) -> Layout {
        // Maps, not scans: teams of thousands of ranks on hundreds of nodes are built at every team creation.
        let mut node_index: HashMap<(&str, &str), usize> = HashMap::new();
        let mut group_index: HashMap<&str, usize> = HashMap::new();
        let (mut nodes, mut group_of_node, mut groups) =
            (Vec::<Vec<usize>>::new(), Vec::new(), Vec::<Vec<usize>>::new());
        let mut node_of = Vec::with_capacity(places.len());
        for (r, (host, switch)) in places.iter().enumerate() {
            let (host, switch) = (host.as_ref(), switch.as_ref());
            // Ranks walk in ascending order, so nodes (and groups) are born in order of their lowest rank.
            let n = *node_index.entry((switch, host)).or_insert_with(|| {
                let g = *group_index.entry(switch).or_insert_with(|| {
                    groups.push(Vec::new());
                    groups.len() - 1
                });
                groups[g].push(nodes.len());
                group_of_node.push(g);
                nodes.push(Vec::new());
                nodes.len() - 1
            });
            nodes[n].push(r);
            node_of.push(n);
        }
        Layout { nodes, group_of_node, groups, node_of }
    }

    /// Number of team ranks.
    pub fn size(&self) -> usize {
        self.node_of.len()
    }

    /// Each node's team ranks (nodes in order of their lowest rank).
    pub fn nodes(&self) -> &[Vec<usize>] {
        &self.nodes
    }

    /// Each switch group's nodes (indices into [`Layout::nodes`]).
    pub fn groups(&self) -> &[Vec<usize>] {
        &self.groups
    }

    /// Whether every node has the same number of ranks.
    pub fn is_even(&self) -> bool {
        self.nodes.windows(2).all(|w| w[0].len() == w[1].len())
    }

    /// The leader of node `n`, given the root if any.
    fn leader(&self, n: usize, root: Option<usize>) -> usize {
        match root {
            Some(r) if self.node_of[r] == n => r,
            _ => self.nodes[n][0],
        }
    }

    /// The leader of group `g`: the leader of its root's node if the root is in it, else of its first node.
    fn group_leader(&self, g: usize, root: Option<usize>) -> usize {
        match root {
            Some(r) if self.group_of_node[self.node_of[r]] == g => r,
            _ => self.leader(self.groups[g][0], root),
        }
    }

    /// Rank `me`'s subgroups; with `root`, the root leads its node and group.
    pub fn subgroups(&self, me: usize, root: Option<usize>) -> Result<Subgroups> {
        let size = self.size();
        for (what, r) in [("rank", Some(me)), ("root", root)] {
            if let Some(r) = r.filter(|r| *r >= size) {
                return Err(Error::invalid_param(format!("{what} {r} is outside the team of {size}")));
            }
        }
        let n = self.node_of[me];
        let g = self.group_of_node[n];
        Ok(Subgroups {
            node: self.nodes[n].clone(),
            node_leader: self.leader(n, root),
            node_leaders: self.groups[g].iter().map(|m| self.leader(*m, root)).collect(),
            group_leader: self.group_leader(g, root),
            group_leaders: (0..self.groups.len()).map(|h| self.group_leader(h, root)).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Places from (host, switch) indices.
    fn layout(places: &[(usize, usize)]) -> Layout {
        let p: Vec<(String, String)> = places.iter().map(|(h, s)| (format!("h{h}"), format!("s{s}"))).collect();
        Layout::new(&p)
    }

    fn sub(l: &Layout, me: usize) -> Subgroups {
        l.subgroups(me, None).unwrap()
    }

    #[test]
    fn uneven_nodes_in_two_groups() {
        // Ranks 0..6 on hosts 0,0,1,2,2,2 and host 3 holds rank 6 (interleaved with host 1 at rank 7).
        let l = layout(&[(0, 0), (0, 0), (1, 0), (2, 1), (2, 1), (2, 1), (3, 1), (1, 0)]);
        assert_eq!(l.nodes(), &[vec![0, 1], vec![2, 7], vec![3, 4, 5], vec![6]]);
        assert_eq!(l.groups(), &[vec![0, 1], vec![2, 3]]);
        assert!(!l.is_even());
        let s = sub(&l, 7);
        assert_eq!((s.node, s.node_leader), (vec![2, 7], 2));
        assert_eq!(s.node_leaders, vec![0, 2]);
        assert_eq!((s.group_leader, s.group_leaders.clone()), (0, vec![0, 3]));
        let s = sub(&l, 5);
        assert_eq!((s.node_leader, s.node_leaders, s.group_leader), (3, vec![3, 6], 3));
    }

    #[test]
    fn one_rank_per_node_one_node_and_one_switch_each() {
        let l = layout(&[(0, 0), (1, 0), (2, 0)]);
        let s = sub(&l, 1);
        assert_eq!((s.node, s.node_leader, s.node_leaders), (vec![1], 1, vec![0, 1, 2]));
        assert_eq!(s.group_leaders, vec![0]);
        assert!(l.is_even());

        let l = layout(&[(0, 0); 4]);
        let s = sub(&l, 3);
        assert_eq!((s.node, s.node_leader, s.node_leaders, s.group_leaders), (vec![0, 1, 2, 3], 0, vec![0], vec![0]));

        let l = layout(&[(0, 0), (1, 1), (2, 2)]);
        let s = sub(&l, 2);
        assert_eq!((s.node_leaders, s.group_leader, s.group_leaders), (vec![2], 2, vec![0, 1, 2]));
    }

    #[test]
    fn a_host_under_two_switches_is_two_nodes() {
        let l = layout(&[(0, 0), (0, 1)]);
        assert_eq!(l.nodes().len(), 2);
    }

    #[test]
    fn the_root_leads_its_node_and_group() {
        let l = layout(&[(0, 0), (0, 0), (1, 0), (1, 0), (2, 1), (2, 1)]);
        let s = l.subgroups(0, Some(3)).unwrap();
        assert_eq!((s.node_leader, s.node_leaders, s.group_leader, s.group_leaders), (0, vec![0, 3], 3, vec![3, 4]));
        let s = l.subgroups(3, Some(3)).unwrap();
        assert_eq!((s.node_leader, s.group_leader), (3, 3));
        let s = l.subgroups(5, Some(3)).unwrap();
        assert_eq!((s.node_leader, s.node_leaders, s.group_leader), (4, vec![4], 4));
        let e = l.subgroups(0, Some(6)).unwrap_err().to_string();
        assert!(e.contains("root 6"), "{e}");
        assert!(l.subgroups(9, None).is_err());
    }

    proptest! {
        /// Every rank is in one node; leaders are members; ranks of a group agree on its leaders.
        #[test]
        fn consistent_on_every_rank(places in proptest::collection::vec((0usize..4, 0usize..3), 1..24), root in 0usize..24) {
            let l = layout(&places);
            let n = places.len();
            let root = (root < n).then_some(root);
            let mut seen = vec![0; n];
            l.nodes().iter().flatten().for_each(|r| seen[*r] += 1);
            prop_assert!(seen.iter().all(|c| *c == 1));
            let all: Vec<Subgroups> = (0..n).map(|r| l.subgroups(r, root).unwrap()).collect();
            for (r, s) in all.iter().enumerate() {
                prop_assert!(s.node.contains(&r) && s.node.contains(&s.node_leader));
                prop_assert!(s.node_leaders.contains(&s.node_leader) && s.node_leaders.contains(&s.group_leader));
                prop_assert!(s.group_leaders.contains(&s.group_leader));
                prop_assert_eq!(s.group_leaders.len(), l.groups().len());
                for o in &s.node {
                    prop_assert_eq!(&all[*o].node, &s.node);
                    prop_assert_eq!(all[*o].node_leader, s.node_leader);
                }
                for o in &s.node_leaders {
                    prop_assert_eq!(&all[*o].node_leaders, &s.node_leaders);
                }
                if root.is_none() {
                    prop_assert_eq!(s.node_leader, s.node[0]);
                }
                if let Some(root) = root {
                    prop_assert!(s.group_leaders.contains(&root));
                }
            }
        }
    }
}
