//! Counts with unit suffixes (`-b 1K -e 16M`, as UCC's `ucs_str_to_memunits`)
//! and sizes for people (`16 MiB`).

/// Parse a count: digits with an optional `k`/`m`/`g`/`t` suffix (powers
/// of 1024, case-insensitive, optionally followed by `b`).
pub fn parse_count(s: &str) -> Option<u64> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.strip_suffix('b').filter(|r| r.ends_with(['k', 'm', 'g', 't'])).unwrap_or(&t);
    let (digits, shift) = match t.chars().last()? {
        'k' => (&t[..t.len() - 1], 10),
        'm' => (&t[..t.len() - 1], 20),
        'g' => (&t[..t.len() - 1], 30),
        't' => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(1u64 << shift)
}

/// `bytes` as `512 B`, `4 KiB`, `1.5 MiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 || v.fract() == 0.0 { format!("{v:.0} {}", UNITS[u]) } else { format!("{v:.1} {}", UNITS[u]) }
}

/// The counts of a sweep: `min`, then ×`factor` while ≤ `max` (0 is
/// followed by 1, so that `-b 0` still sweeps).
pub fn sweep(min: u64, max: u64, factor: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut c = min;
    while c <= max {
        out.push(c);
        c = match c {
            0 => 1,
            _ => match c.checked_mul(factor) {
                Some(n) if n > c => n,
                _ => break,
            },
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn counts() {
        assert_eq!(parse_count("16M"), Some(16 << 20));
        assert_eq!(parse_count("1k"), Some(1024));
        assert_eq!(parse_count("4KB"), Some(4096));
        assert_eq!(parse_count("128"), Some(128));
        assert_eq!(parse_count("0"), Some(0));
        for bad in ["", "k", "1.5M", "-1", "12x", "99999999999999999999"] {
            assert_eq!(parse_count(bad), None, "{bad}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(16 << 20), "16 MiB");
        assert_eq!(human_bytes(1536), "1.5 KiB");
    }

    #[test]
    fn sweeps() {
        assert_eq!(sweep(1, 16, 2), vec![1, 2, 4, 8, 16]);
        assert_eq!(sweep(0, 4, 4), vec![0, 1, 4]);
        assert_eq!(sweep(128, 128, 2), vec![128]);
        assert!(sweep(5, 4, 2).is_empty());
        assert_eq!(sweep(u64::MAX / 2, u64::MAX, 4).len(), 1);
    }

    proptest! {
        #[test]
        fn parse_never_panics(s in ".{0,12}") {
            let _ = parse_count(&s);
        }

        #[test]
        fn numbers_round_trip(n in 0u64..1 << 40) {
            prop_assert_eq!(parse_count(&n.to_string()), Some(n));
        }

        #[test]
        fn sweeps_are_increasing_and_bounded(min in 0u64..1000, max in 0u64..1 << 30, f in 2u64..10) {
            let s = sweep(min, max, f);
            prop_assert!(s.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(s.iter().all(|&c| c >= min && c <= max));
        }
    }
}
