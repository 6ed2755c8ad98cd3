//! FNV-1a: a small stable hash that every process computes alike (team
//! ids, job ids). Not for hash tables that face untrusted keys.

/// FNV-1a (64 bits) over the concatenation of `parts`.
pub fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in parts.iter().flat_map(|p| p.iter()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    #[test]
    fn known_value_and_concatenation() {
        assert_eq!(super::fnv1a(&[]), 0xcbf2_9ce4_8422_2325);
        assert_eq!(super::fnv1a(&[b"a"]), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(super::fnv1a(&[b"ab", b"c"]), super::fnv1a(&[b"abc"]));
    }
}
