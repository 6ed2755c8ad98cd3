//! The handshake's proofs: the store and each rank show that they know the
//! job token without sending it.
//!
//! A proof is HMAC-SHA256 keyed with the token over a label and the
//! transcript (the rank and size the client claimed, and both sides' fresh
//! nonces). The labels differ, so a proof one side sends can never be
//! replayed as the other side's; the nonces are fresh per connection, so a
//! proof recorded on one connection is worth nothing on another. Pure
//! functions, no I/O: `store.rs` and `client.rs` move the bytes.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use ferrocoll_core::{Error, Result};

/// The longest job token (it comes from the environment; HMAC hashes a long
/// one down anyway).
pub(super) const MAX_TOKEN: usize = 4096;
/// Bytes of a nonce: 256 bits, so that two connections never share one.
pub(super) const NONCE: usize = 32;
/// Bytes of a proof (an HMAC-SHA256 tag).
pub(super) const PROOF: usize = 32;

/// A connection's random challenge value, one per side.
pub(super) type Nonce = [u8; NONCE];
/// A MAC over the transcript, keyed with the job token.
pub(super) type Proof = [u8; PROOF];

/// What the store proves (the version is in the label: a proof of another
/// protocol version never verifies).
const STORE_LABEL: &[u8] = b"ferrocoll bootstrap v2: store";
/// What a rank proves.
const RANK_LABEL: &[u8] = b"ferrocoll bootstrap v2: rank";

/// A fresh nonce from the kernel's random source.
pub(super) fn nonce() -> Result<Nonce> {
    let mut n = [0u8; NONCE];
    crate::shmem::fill_random(&mut n).map_err(|e| e.prefixed("bootstrap nonce"))?;
    Ok(n)
}

/// What both proofs of one connection are about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Transcript {
    /// The rank the client claims.
    pub(super) rank: u32,
    /// The job size the client claims.
    pub(super) size: u32,
    /// The client's nonce (from its hello).
    pub(super) client: Nonce,
    /// The store's nonce (from its challenge).
    pub(super) store: Nonce,
}

/// The job token as an HMAC-SHA256 key (kept keyed, so the token's bytes
/// need not be kept apart from it).
#[derive(Clone)]
pub(super) struct Key(Hmac<Sha256>);

impl Key {
    /// Any token, the empty one included: HMAC takes keys of any length. An
    /// empty token still runs the protocol but proves nothing (anyone can
    /// compute its MACs).
    pub(super) fn new(token: &[u8]) -> Result<Key> {
        Hmac::new_from_slice(token)
            .map(Key)
            .map_err(|e| Error::internal(format!("HMAC-SHA256 refused a job token of {} bytes: {e}", token.len())))
    }

    /// The store's proof: the MAC of the store label, rank, size, client nonce, store nonce.
    pub(super) fn store_proof(&self, t: &Transcript) -> Proof {
        self.mac(STORE_LABEL, t, &t.client, &t.store).finalize().into_bytes().into()
    }

    /// A rank's proof: the MAC of the rank label, rank, size, store nonce, client nonce.
    pub(super) fn rank_proof(&self, t: &Transcript) -> Proof {
        self.mac(RANK_LABEL, t, &t.store, &t.client).finalize().into_bytes().into()
    }

    /// Whether `proof` is the store's proof of `t`, compared in constant time
    /// (a timing difference would let a squatter forge it byte by byte).
    pub(super) fn store_proof_holds(&self, t: &Transcript, proof: &Proof) -> bool {
        self.mac(STORE_LABEL, t, &t.client, &t.store).verify_slice(proof).is_ok()
    }

    /// Whether `proof` is a rank's proof of `t`, compared in constant time.
    pub(super) fn rank_proof_holds(&self, t: &Transcript, proof: &Proof) -> bool {
        self.mac(RANK_LABEL, t, &t.store, &t.client).verify_slice(proof).is_ok()
    }

    /// Every field has a fixed length and the labels differ in length, so two
    /// different inputs never encode to the same message.
    fn mac(&self, label: &[u8], t: &Transcript, first: &Nonce, second: &Nonce) -> Hmac<Sha256> {
        self.0
            .clone()
            .chain_update(label)
            .chain_update(t.rank.to_le_bytes())
            .chain_update(t.size.to_le_bytes())
            .chain_update(first)
            .chain_update(second)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transcript() -> Transcript {
        Transcript { rank: 3, size: 8, client: [1; NONCE], store: [2; NONCE] }
    }

    #[test]
    fn proofs_are_hmac_sha256_of_the_labelled_transcript() {
        // RFC 4231 test case 2 checks that the construction is the standard one.
        let tag: [u8; 32] = Hmac::<Sha256>::new_from_slice(b"Jefe")
            .unwrap()
            .chain_update(b"what do ya want for nothing?")
            .finalize()
            .into_bytes()
            .into();
        let want = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
        assert_eq!(tag.iter().map(|b| format!("{b:02x}")).collect::<String>(), want);

        let t = transcript();
        let mut msg = b"ferrocoll bootstrap v2: store".to_vec();
        msg.extend_from_slice(&3u32.to_le_bytes());
        msg.extend_from_slice(&8u32.to_le_bytes());
        msg.extend_from_slice(&[1; NONCE]);
        msg.extend_from_slice(&[2; NONCE]);
        let direct: Proof =
            Hmac::<Sha256>::new_from_slice(b"tok").unwrap().chain_update(&msg).finalize().into_bytes().into();
        assert_eq!(Key::new(b"tok").unwrap().store_proof(&t), direct);
    }

    #[test]
    fn a_proof_holds_only_for_its_token_transcript_and_side() {
        let key = Key::new(b"tok").unwrap();
        let t = transcript();
        let (sp, rp) = (key.store_proof(&t), key.rank_proof(&t));
        assert!(key.store_proof_holds(&t, &sp) && key.rank_proof_holds(&t, &rp));
        // The store's proof cannot be reflected back as a rank's, nor the reverse.
        assert_ne!(sp, rp);
        assert!(!key.rank_proof_holds(&t, &sp) && !key.store_proof_holds(&t, &rp));
        // Another token.
        let other = Key::new(b"tok2").unwrap();
        assert!(!other.store_proof_holds(&t, &sp) && !other.rank_proof_holds(&t, &rp));
        // Any field changed, including swapping the nonces.
        let changed = [
            Transcript { rank: 4, ..t.clone() },
            Transcript { size: 9, ..t.clone() },
            Transcript { client: [9; NONCE], ..t.clone() },
            Transcript { store: [9; NONCE], ..t.clone() },
            Transcript { client: t.store, store: t.client, ..t.clone() },
        ];
        for c in &changed {
            assert!(!key.store_proof_holds(c, &sp) && !key.rank_proof_holds(c, &rp), "{c:?}");
        }
        // Any bit flipped.
        for i in 0..PROOF * 8 {
            let mut bad = sp;
            bad[i / 8] ^= 1 << (i % 8);
            assert!(!key.store_proof_holds(&t, &bad), "bit {i}");
        }
    }

    #[test]
    fn an_empty_token_still_runs_the_protocol() {
        let key = Key::new(b"").unwrap();
        let t = transcript();
        assert!(key.rank_proof_holds(&t, &key.rank_proof(&t)));
        assert!(!key.rank_proof_holds(&t, &Key::new(b"x").unwrap().rank_proof(&t)));
        let long = vec![7u8; 4096];
        assert!(Key::new(&long).unwrap().store_proof_holds(&t, &Key::new(&long).unwrap().store_proof(&t)));
    }

    #[test]
    fn nonces_are_fresh() {
        let (a, b) = (nonce().unwrap(), nonce().unwrap());
        assert_ne!(a, b);
    }
}
