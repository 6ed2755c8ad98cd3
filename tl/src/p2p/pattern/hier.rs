//! The levels of a hierarchical collective, as one rank takes part in them:
//! its node, then (if it leads its node) the node leaders of its switch
//! group, then (if it leads its group) the group leaders. Each level is a
//! unit with members and a leader; a member brings to it the data of the
//! team ranks it gathered at the levels below (its *span*), so a leader of a
//! level holds, after it, the spans of all its members in member order.
//! That is the whole bookkeeping of Kandalla et al.'s topology-aware gather
//! and scatter (leaders per node and per switch, every byte crossing each
//! slow link once) and of the three-level bcast, reduce and allreduce.
//!
//! Leaders follow the team's layout rules (`ferrocoll_core::topo::subgroups`):
//! a node's leader is its lowest rank and a group's is its first node's
//! leader, except that with a root the root leads its node, its group and
//! the top level: rooted collectives never take an extra hop to the root.
//! A layout with one switch group has a trivial top (one member); one whose
//! groups each hold one node has trivial group levels: both are kept in
//! [`Level::trivial`] terms so callers simply skip one-member levels, and
//! two levels remain where the topology has only two.
//!
//! Pure functions of the layout, so every rank derives the same levels.

use ferrocoll_core::topo::Layout;
use ferrocoll_core::{Error, Result};

/// Which unit of the hierarchy a level is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The ranks of one node.
    Node,
    /// The node leaders of one switch group.
    Group,
    /// The group leaders.
    Top,
}

/// One unit of the hierarchy that this rank is a member of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Level {
    /// Which unit.
    pub kind: Kind,
    /// Team ranks of the members, in order.
    pub members: Vec<usize>,
    /// Index of the leader in `members`.
    pub leader: usize,
    /// Index of this rank in `members`.
    pub me: usize,
    /// Per member, the team ranks whose data it brings (its span), in order.
    pub spans: Vec<Vec<usize>>,
    /// Whether this is the highest level of the whole hierarchy with more
    /// than one member (where allreduce exchanges instead of reducing to a leader).
    pub outermost: bool,
}

impl Level {
    /// A level of one member has nothing to do.
    pub(crate) fn trivial(&self) -> bool {
        self.members.len() < 2
    }

    /// The leader's team rank.
    pub(crate) fn leader_rank(&self) -> usize {
        self.members[self.leader]
    }

    /// Whether this rank leads the level.
    pub(crate) fn leads(&self) -> bool {
        self.me == self.leader
    }

    /// Every span of the level, concatenated in member order (what its leader holds after it).
    pub(crate) fn all_ranks(&self) -> Vec<usize> {
        self.spans.concat()
    }
}

/// The levels rank `me` is a member of, bottom-up (its node first); with
/// `root`, the root leads every unit it is in.
pub(crate) fn levels(layout: &Layout, me: usize, root: Option<usize>) -> Result<Vec<Level>> {
    let size = layout.size();
    for (what, r) in [("rank", Some(me)), ("root", root)] {
        if let Some(r) = r.filter(|r| *r >= size) {
            return Err(Error::invalid_param(format!("hierarchy: {what} {r} is outside the team of {size}")));
        }
    }
    let (nodes, groups) = (layout.nodes(), layout.groups());
    let mut node_of = vec![0; size];
    for (n, ranks) in nodes.iter().enumerate() {
        for &r in ranks {
            *node_of
                .get_mut(r)
                .ok_or_else(|| Error::internal(format!("hierarchy: rank {r} of a layout of {size}")))? = n;
        }
    }
    let mut group_of = vec![0; nodes.len()];
    for (g, ns) in groups.iter().enumerate() {
        for &n in ns {
            *group_of.get_mut(n).ok_or_else(|| Error::internal(format!("hierarchy: node {n} out of range")))? = g;
        }
    }
    let root_node = root.map(|r| node_of[r]);
    let root_group = root_node.map(|n| group_of[n]);
    let node_leader = |n: usize| if root_node == Some(n) { root.unwrap_or(nodes[n][0]) } else { nodes[n][0] };
    let group_leader = |g: usize| match root {
        Some(r) if root_group == Some(g) => r,
        _ => node_leader(groups[g][0]),
    };
    // The highest level with more than one member, for the whole team.
    let outermost = if groups.len() > 1 {
        Kind::Top
    } else if nodes.len() > 1 {
        Kind::Group
    } else {
        Kind::Node
    };
    let position = |list: &[usize], r: usize| {
        list.iter().position(|&x| x == r).ok_or_else(|| Error::internal(format!("hierarchy: {r} not in {list:?}")))
    };
    let level = |kind: Kind, members: Vec<usize>, leader: usize, spans: Vec<Vec<usize>>| -> Result<Level> {
        Ok(Level {
            kind,
            leader: position(&members, leader)?,
            me: position(&members, me)?,
            members,
            spans,
            outermost: kind == outermost,
        })
    };

    let n = node_of[me];
    let g = group_of[n];
    let mut out = Vec::with_capacity(3);
    let node = &nodes[n];
    out.push(level(Kind::Node, node.clone(), node_leader(n), node.iter().map(|&r| vec![r]).collect())?);
    if me != node_leader(n) {
        return Ok(out);
    }
    let members = groups[g].iter().map(|&m| node_leader(m)).collect();
    out.push(level(Kind::Group, members, group_leader(g), groups[g].iter().map(|&m| nodes[m].clone()).collect())?);
    if me != group_leader(g) {
        return Ok(out);
    }
    let members: Vec<usize> = (0..groups.len()).map(group_leader).collect();
    let top = root.unwrap_or(members[0]);
    let spans = groups.iter().map(|ns| ns.iter().flat_map(|&m| nodes[m].iter().copied()).collect()).collect();
    out.push(level(Kind::Top, members, top, spans)?);
    Ok(out)
}

/// Where the spans of the levels a rank leads lie in one buffer holding
/// its highest led level's ranks in order (what it sends up, or what it
/// received from above): its own block, and each other member's span.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ranges {
    /// Bytes of the whole buffer.
    pub total: usize,
    /// Offset of this rank's own block.
    pub own: usize,
    /// (index into `led`, member's team rank, offset, bytes) of every other
    /// member's span, top level first.
    pub spans: Vec<(usize, usize, usize, usize)>,
}

/// [`Ranges`] of `led` (the non-trivial levels a rank leads, bottom-up),
/// with `bytes(r)` the size of rank r's block.
pub(crate) fn ranges(led: &[&Level], bytes: &dyn Fn(usize) -> Result<usize>) -> Result<Ranges> {
    let sum = |ranks: &[usize]| {
        ranks.iter().try_fold(0usize, |acc, &r| {
            acc.checked_add(bytes(r)?).ok_or_else(|| Error::invalid_param("hierarchy: span bytes overflow"))
        })
    };
    let total = match led.last() {
        Some(top) => sum(&top.all_ranks())?,
        None => 0,
    };
    let (mut base, mut spans) = (0, Vec::new());
    for (i, level) in led.iter().enumerate().rev() {
        let mut at = base;
        for (m, span) in level.spans.iter().enumerate() {
            let len = sum(span)?;
            if m == level.me {
                base = at;
            } else {
                spans.push((i, level.members[m], at, len));
            }
            at += len;
        }
    }
    Ok(Ranges { total, own: base, spans })
}

/// `len` bytes cut into pieces of `frag` bytes (at least one piece, at
/// most 65 536: larger pieces for huge messages, so tags stay few).
pub(crate) fn fragments(len: usize, frag: usize) -> Vec<(usize, usize)> {
    let frag = frag.max(1).max(len.div_ceil(1 << 16));
    if len == 0 {
        return vec![(0, 0)];
    }
    (0..len.div_ceil(frag)).map(|k| (k * frag, frag.min(len - k * frag))).collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn layout(places: &[(usize, usize)]) -> Layout {
        let p: Vec<(String, String)> = places.iter().map(|(h, s)| (format!("h{h}"), format!("s{s}"))).collect();
        Layout::new(&p)
    }

    #[test]
    fn two_groups_of_two_hosts_of_two() {
        let l = layout(&[(0, 0), (0, 0), (1, 0), (1, 0), (2, 1), (2, 1), (3, 1), (3, 1)]);
        let v = levels(&l, 6, None).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!((v[0].kind, &v[0].members, v[0].leader_rank(), v[0].me), (Kind::Node, &vec![6, 7], 6, 0));
        assert_eq!((&v[1].members, v[1].leader_rank(), v[1].me), (&vec![4, 6], 4, 1));
        assert_eq!(v[1].spans, vec![vec![4, 5], vec![6, 7]]);
        let v = levels(&l, 4, None).unwrap();
        assert_eq!((v[2].kind, &v[2].members, v[2].leader_rank()), (Kind::Top, &vec![0, 4], 0));
        assert_eq!(v[2].spans, vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
        assert!(v[2].outermost && !v[1].outermost);
        // Rooted at 7: 7 leads its node, its group and the top.
        let v = levels(&l, 7, Some(7)).unwrap();
        assert_eq!(v.iter().map(Level::leader_rank).collect::<Vec<_>>(), vec![7, 7, 7]);
        assert_eq!(v[2].members, vec![0, 7]);
        assert_eq!(v[1].members, vec![4, 7]);
        let v = levels(&l, 1, Some(7)).unwrap();
        assert_eq!((v.len(), v[0].leader_rank()), (1, 0));
        assert!(levels(&l, 8, None).is_err() && levels(&l, 0, Some(8)).is_err());
    }

    #[test]
    fn one_group_has_a_trivial_top() {
        // Hosts of 1, 3 and 2 ranks, host b's ranks not contiguous.
        let l = layout(&[(0, 0), (1, 0), (1, 0), (2, 0), (2, 0), (1, 0)]);
        let v = levels(&l, 3, Some(5)).unwrap();
        assert_eq!(v[1].members, vec![0, 5, 3]);
        assert_eq!(v[1].spans, vec![vec![0], vec![1, 2, 5], vec![3, 4]]);
        assert!(v.len() == 2 && v[1].outermost && !v[1].leads());
        let v = levels(&l, 5, Some(5)).unwrap();
        assert_eq!((v[0].members.clone(), v[0].leader_rank(), v[0].me), (vec![1, 2, 5], 5, 2));
        assert!(v.len() == 3 && v[2].trivial() && v[1].leads());
    }

    #[test]
    fn ranges_place_every_span_in_the_top_buffer() {
        let l = layout(&[(0, 0), (0, 0), (1, 0), (1, 0), (2, 1), (2, 1), (3, 1), (3, 1)]);
        // Rank 4 leads its node and group s1 (ranks 4, 5 | 6, 7); blocks of r + 1 bytes.
        let v = levels(&l, 4, None).unwrap();
        let led: Vec<&Level> = v[..2].iter().collect();
        let r = ranges(&led, &|x| Ok(x + 1)).unwrap();
        assert_eq!((r.total, r.own), (5 + 6 + 7 + 8, 0));
        assert_eq!(r.spans, vec![(1, 6, 11, 15), (0, 5, 5, 6)]);
        // Rank 5 leads nothing: its own block, nothing else.
        assert_eq!(ranges(&[], &|_| Ok(1)).unwrap(), Ranges { total: 0, own: 0, spans: vec![] });
        let led: Vec<&Level> = v.iter().collect();
        let r = ranges(&led, &|_| Ok(2)).unwrap();
        assert_eq!((r.total, r.own), (16, 8));
        assert_eq!(r.spans[0], (2, 0, 0, 8));
    }

    #[test]
    fn fragments_cover_the_message() {
        assert_eq!(fragments(0, 4), vec![(0, 0)]);
        assert_eq!(fragments(10, 4), vec![(0, 4), (4, 4), (8, 2)]);
        assert_eq!(fragments(3, 4), vec![(0, 3)]);
        assert_eq!(fragments(1 << 20, 1).len(), 1 << 16);
    }

    proptest! {
        /// Spans partition the ranks below each leader; the top's spans
        /// cover the team exactly once; a member's span is what it holds
        /// after its own level below; leaders are agreed on by every member.
        #[test]
        fn spans_are_what_the_levels_below_gathered(
            places in proptest::collection::vec((0usize..4, 0usize..3), 1..20), root in 0usize..20,
        ) {
            let l = layout(&places);
            let n = places.len();
            let root = (root < n).then_some(root);
            let all: Vec<Vec<Level>> = (0..n).map(|r| levels(&l, r, root).unwrap()).collect();
            let top_leader = root.unwrap_or(0);
            let mut tops = 0;
            for (r, lv) in all.iter().enumerate() {
                for (i, level) in lv.iter().enumerate() {
                    prop_assert_eq!(level.members[level.me], r);
                    prop_assert_eq!(level.spans.len(), level.members.len());
                    for (m, &member) in level.members.iter().enumerate() {
                        prop_assert!(level.spans[m].contains(&member));
                        // The member agrees on this unit and its leader.
                        let theirs = &all[member][i];
                        prop_assert_eq!(&theirs.members, &level.members);
                        prop_assert_eq!(theirs.leader, level.leader);
                        // Its span is what it held after the level below.
                        if i > 0 {
                            prop_assert_eq!(&all[member][i - 1].all_ranks(), &level.spans[m]);
                        }
                    }
                    if let Some(root) = root {
                        if level.members.contains(&root) {
                            prop_assert_eq!(level.leader_rank(), root);
                        }
                    }
                }
                // A rank goes up while it leads.
                for w in lv.windows(2) {
                    prop_assert!(w[0].leads());
                }
                if lv.len() == 3 {
                    tops += 1;
                    let mut covered = lv[2].all_ranks();
                    covered.sort_unstable();
                    prop_assert_eq!(covered, (0..n).collect::<Vec<_>>());
                    if lv[2].leads() {
                        prop_assert_eq!(r, top_leader);
                    }
                }
            }
            prop_assert_eq!(tops, l.groups().len());
        }
    }
}
