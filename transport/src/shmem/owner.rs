//! Whose a segment is, from its name: every name ends with its creator's
//! tag, `-p<pid>t<start time>n<pid namespace>`, so that a segment left by a
//! process that died before it could unlink it (killed during setup,
//! outside a launcher that cleans up) can be recognised as stale and
//! removed by the next ferrocoll process of the user
//! ([`sweep_stale`](super::sweep_stale)) — without opening it: a stale
//! segment's contents are not trusted.
//!
//! The pid namespace is in the tag because `/dev/shm` may be shared by
//! containers that do not share pids (the containers of a Kubernetes pod):
//! a pid of another namespace says nothing here, and such segments are
//! never judged.

use std::sync::OnceLock;

use crate::liveness;

/// A process that created segments (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    /// Process id.
    pub pid: u32,
    /// Start time in clock ticks after boot, which tells a reused pid apart.
    pub start: Option<u64>,
    /// Inode of its pid namespace (`/proc/self/ns/pid`).
    pub ns: Option<u64>,
}

fn pid_namespace() -> Option<u64> {
    let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
    // "pid:[4026531836]"
    link.to_str()?.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

impl Owner {
    /// This process.
    pub fn me() -> Owner {
        static ME: OnceLock<Owner> = OnceLock::new();
        let pid = std::process::id();
        let fresh = || Owner { pid, start: liveness::start_time(pid), ns: pid_namespace() };
        let me = *ME.get_or_init(fresh);
        // A forked child has another pid: take it afresh then.
        if me.pid == pid { me } else { fresh() }
    }

    /// The tag at the end of a segment name: `p<pid>`, then `t<start>` and
    /// `n<namespace>` when known.
    pub fn tag(&self) -> String {
        let mut t = format!("p{}", self.pid);
        if let Some(s) = self.start {
            t += &format!("t{s}");
        }
        if let Some(n) = self.ns {
            t += &format!("n{n}");
        }
        t
    }

    /// The owner named by the tag that ends `file_name` (`…-p<pid>[t<start>][n<ns>]`),
    /// if it ends with one.
    pub fn of_name(file_name: &str) -> Option<Owner> {
        let mut rest = file_name[file_name.rfind('-')? + 1..].strip_prefix('p')?;
        let mut field = |letter: Option<char>| -> Option<Option<u64>> {
            if let Some(l) = letter {
                match rest.strip_prefix(l) {
                    Some(r) => rest = r,
                    None => return Some(None),
                }
            }
            let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
            let value = rest[..end].parse().ok()?;
            rest = &rest[end..];
            Some(Some(value))
        };
        let pid = u32::try_from(field(None)??).ok()?;
        let (start, ns) = (field(Some('t'))?, field(Some('n'))?);
        rest.is_empty().then_some(Owner { pid, start, ns })
    }

    /// Whether this process no longer runs, as far as this process can
    /// tell: `None` when it cannot (another or an unknown pid namespace).
    pub fn gone(&self) -> Option<bool> {
        let ns = pid_namespace();
        (ns.is_some() && self.ns == ns).then(|| liveness::gone_since(self.pid, self.start))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip_and_others_are_not_owners() {
        let me = Owner::me();
        assert_eq!(me.gone(), me.ns.map(|_| false));
        assert_eq!(Owner::of_name(&format!("ferrocoll-job-3-00ff-{}", me.tag())), Some(me));
        assert_eq!(Owner::of_name("ferrocoll-j-s1-p42"), Some(Owner { pid: 42, start: None, ns: None }));
        assert_eq!(Owner::of_name("ferrocoll-j-s1-p42n7"), Some(Owner { pid: 42, start: None, ns: Some(7) }));
        for bad in ["ferrocoll-j-3", "ferrocoll-j-p", "ferrocoll-j-p1t", "ferrocoll-j-px1", "ferrocoll-j-p1t2x", "p1"] {
            assert_eq!(Owner::of_name(bad), None, "{bad}");
        }
        if me.ns.is_some() {
            assert_eq!(Owner { ns: me.ns.map(|n| n + 1), ..me }.gone(), None, "another namespace is not judged");
            if me.start.is_some() {
                let reused = Owner { start: me.start.map(|t| t + 1), ..me };
                assert_eq!(reused.gone(), Some(true), "another start time is another process");
            }
        }
    }
}

/// Never-panic property of the file-name parser (names found in /dev/shm).
#[cfg(test)]
mod parser_props {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn names_never_panic_and_tags_round_trip(
            name in "\\PC{0,32}",
            prefix in "[a-z.-]{0,12}",
            pid in any::<u32>(),
            start in proptest::option::of(any::<u64>()),
            ns in proptest::option::of(any::<u64>()),
        ) {
            let _ = Owner::of_name(&name);
            let o = Owner { pid, start, ns };
            prop_assert_eq!(Owner::of_name(&format!("{prefix}-{}", o.tag())), Some(o));
        }
    }
}
