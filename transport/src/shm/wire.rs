//! Byte layouts shared between processes: the segment header, ring records,
//! rendezvous descriptors, completion-slot words and the address blob.
//!
//! Everything another process wrote (a segment header, a record in a ring, an
//! address) is parsed here with length and range checks: a corrupt value is
//! an [`Error`], never a panic or an access outside the segment. Integers are
//! little-endian.
//!
//! Segment (one per endpoint, `/ferrocoll-<job>-<ep>-<nonce>-<owner>`):
//!
//! ```text
//! 0    magic u64 "FCSHMSEG"   8 version u32   12 owner pid u32
//! 16   ep u32                 20 n_eps u32    24 ring_size u64 (data bytes per ring)
//! 32   ring_stride u64        40 slots_off u64  48 rings_off u64
//! 56   n_slots u32            64 probe u64 (a token read through CMA)
//! 128  state u32 (atomic: OPEN, CLOSED), alone on its cache line
//! 192  cma_from[n_eps] u8 (atomic: can this endpoint CMA-read from sender s?)
//! slots_off  n_slots × u64 completion slots (atomic: generation << 8 | state)
//! rings_off  n_eps rings, one per sender, `ring_stride` bytes apart (page-aligned)
//! ```
//!
//! Ring record: a [`RECORD_HEADER`]-byte header, then `chunk_len` bytes,
//! padded to 8. Every record carries the sender's call signature (every
//! fragment of a streamed message too), which the receive checks before it
//! copies anything:
//!
//! ```text
//! 0 magic u16 | kind u8 | 0 u8   4 src u32   8 team u64   16 seq u64
//! 24 tag u32   28 chunk_len u32   32 total_len u64   40 offset u64
//! 48 signature word u64   56 signature size u64
//! ```

use ferrocoll_core::args::Signature;
use ferrocoll_core::wire::Reader;
use ferrocoll_core::{Error, Result};

use crate::p2p::MsgKey;

/// `"FCSHMSEG"`.
pub(super) const MAGIC: u64 = u64::from_le_bytes(*b"FCSHMSEG");
/// Layout version; bumped on any change to this file's layouts (2: records
/// carry the sender's call signature; 3: the header's cause word; 4: the
/// header's nonce). Peers of another version fail at connect, naming both
/// versions, before a record is read.
pub(super) const VERSION: u32 = 4;

/// Bytes of the fixed part of the segment header (what [`SegHeader::parse`] reads).
pub(super) const HEADER_LEN: usize = 80;
/// Offset of the probe word.
pub(super) const H_PROBE: usize = 64;
/// Offset of the nonce (the random part of the segment's name).
const H_NONCE: usize = 72;
/// Offset of the state word.
pub(super) const H_STATE: usize = 128;
/// Offset of the cause word, written before the state turns CLOSED: 0, or 1
/// + the endpoint whose failure the owner left because of (`crate::cause`).
pub(super) const H_CAUSE: usize = 132;
/// Offset of the per-sender CMA flags.
pub(super) const H_CMA: usize = 192;

/// Segment states.
pub(super) const SEG_OPEN: u32 = 1;
/// The owner closed its transport cleanly.
pub(super) const SEG_CLOSED: u32 = 2;

/// CMA flags (0: not probed yet). The owner can `process_vm_readv` from the sender.
pub(super) const CMA_YES: u8 = 1;
/// It cannot (or CMA is off): the sender streams large messages through the ring.
pub(super) const CMA_NO: u8 = 2;

/// Ring control block: head and tail each on their own 128-byte line (two
/// 64-byte lines, so adjacent-line prefetchers do not couple them either).
pub(super) const RING_CTRL: usize = 256;
/// Smallest and largest ring.
pub(super) const MIN_RING: u64 = 4096;
/// Largest ring (1 GiB).
pub(super) const MAX_RING: u64 = 1 << 30;
/// Bounds on the group size and the slot table that a header may claim.
const MAX_EPS: u32 = 1 << 20;
const MAX_SLOTS: u32 = 1 << 20;

/// The fixed header of a segment and the layout it implies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct SegHeader {
    /// Owner's process id.
    pub pid: u32,
    /// Owner's endpoint.
    pub ep: u32,
    /// Group size (one ring per endpoint).
    pub n_eps: u32,
    /// Completion slots.
    pub n_slots: u32,
    /// Data bytes per ring (a power of two).
    pub ring_size: u64,
    /// Distance between rings (page-aligned, control block included).
    pub ring_stride: u64,
    /// Offset of the slot table.
    pub slots_off: u64,
    /// Offset of ring 0 (page-aligned): everything before it is the "meta" part.
    pub rings_off: u64,
    /// Token stored at [`H_PROBE`].
    pub probe: u64,
    /// The random part of the segment's name: an opener compares it with
    /// the name it was given, so a file put under that name holding a copy
    /// of another segment's header is refused.
    pub nonce: u64,
}

fn align(x: u64, a: u64) -> Option<u64> {
    x.checked_add(a - 1).map(|v| v / a * a)
}

impl SegHeader {
    /// The layout for these parameters, or an error naming the bad one.
    #[allow(clippy::too_many_arguments)] // the header's fields, each named at every call
    pub fn layout(
        pid: u32,
        ep: u32,
        n_eps: u32,
        ring_size: u64,
        n_slots: u32,
        page: u64,
        probe: u64,
        nonce: u64,
    ) -> Result<Self> {
        if !ring_size.is_power_of_two() || !(MIN_RING..=MAX_RING).contains(&ring_size) {
            return Err(Error::invalid_param(format!(
                "ring size {ring_size} is not a power of two between {MIN_RING} and {MAX_RING}"
            )));
        }
        if n_eps == 0 || n_eps > MAX_EPS || ep >= n_eps || n_slots > MAX_SLOTS {
            return Err(Error::invalid_param(format!(
                "segment of endpoint {ep} of {n_eps} with {n_slots} slots is out of range"
            )));
        }
        if !page.is_power_of_two() || page < 64 {
            return Err(Error::internal(format!("page size {page} is not a power of two")));
        }
        let bad = || Error::invalid_param(format!("segment layout for {n_eps} endpoints overflows"));
        let slots_off = align(H_CMA as u64 + u64::from(n_eps), 64).ok_or_else(bad)?;
        let rings_off = align(slots_off + 8 * u64::from(n_slots), page).ok_or_else(bad)?;
        let ring_stride = align(RING_CTRL as u64 + ring_size, page).ok_or_else(bad)?;
        let h = SegHeader { pid, ep, n_eps, n_slots, ring_size, ring_stride, slots_off, rings_off, probe, nonce };
        h.total_len()?;
        Ok(h)
    }

    /// Size of the whole segment.
    pub fn total_len(&self) -> Result<u64> {
        self.ring_stride
            .checked_mul(u64::from(self.n_eps))
            .and_then(|r| r.checked_add(self.rings_off))
            .filter(|&t| usize::try_from(t).is_ok() && t <= isize::MAX as u64)
            .ok_or_else(|| Error::invalid_param(format!("segment for {} endpoints is too large", self.n_eps)))
    }

    /// Offset of the ring that sender `src` writes.
    pub fn ring_off(&self, src: usize) -> Result<u64> {
        u64::try_from(src)
            .ok()
            .filter(|&s| s < u64::from(self.n_eps))
            .map(|s| self.rings_off + s * self.ring_stride)
            .ok_or_else(|| Error::internal(format!("endpoint {src} has no ring in a group of {}", self.n_eps)))
    }

    /// The fixed header bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        let mut put = |off: usize, v: &[u8]| b[off..off + v.len()].copy_from_slice(v);
        put(0, &MAGIC.to_le_bytes());
        put(8, &VERSION.to_le_bytes());
        put(12, &self.pid.to_le_bytes());
        put(16, &self.ep.to_le_bytes());
        put(20, &self.n_eps.to_le_bytes());
        put(24, &self.ring_size.to_le_bytes());
        put(32, &self.ring_stride.to_le_bytes());
        put(40, &self.slots_off.to_le_bytes());
        put(48, &self.rings_off.to_le_bytes());
        put(56, &self.n_slots.to_le_bytes());
        put(H_PROBE, &self.probe.to_le_bytes());
        put(H_NONCE, &self.nonce.to_le_bytes());
        b
    }

    /// Read and check a header: magic, version, and a layout that
    /// [`SegHeader::layout`] would have produced for the same parameters.
    pub fn parse(b: &[u8], page: u64) -> Result<SegHeader> {
        let mut r = Reader::new(b);
        let magic = r.u64()?;
        if magic != MAGIC {
            return Err(Error::io(format!("bad segment magic {magic:#018x}")));
        }
        let version = r.u32()?;
        if version != VERSION {
            return Err(Error::io(format!("segment layout version {version}, this build speaks {VERSION}")));
        }
        let (pid, ep, n_eps) = (r.u32()?, r.u32()?, r.u32()?);
        let (ring_size, ring_stride, slots_off, rings_off) = (r.u64()?, r.u64()?, r.u64()?, r.u64()?);
        let n_slots = r.u32()?;
        r.u32()?;
        let (probe, nonce) = (r.u64()?, r.u64()?);
        let read = SegHeader { pid, ep, n_eps, n_slots, ring_size, ring_stride, slots_off, rings_off, probe, nonce };
        let expected = SegHeader::layout(pid, ep, n_eps, ring_size, n_slots, page, probe, nonce)
            .map_err(|e| e.prefixed("segment header"))?;
        if read != expected {
            return Err(Error::io(format!("segment header has an inconsistent layout: {read:?}")));
        }
        Ok(read)
    }
}

/// Record kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// Payload inline.
    Eager = 1,
    /// A [`RndvDesc`]: the receiver reads the sender's buffer with CMA.
    RndvCma = 2,
    /// One fragment of a message streamed through the ring.
    Frag = 3,
}

/// First two bytes of every record.
const RECORD_MAGIC: u16 = 0xFC5E;
/// Bytes of a record header.
pub(super) const RECORD_HEADER: usize = 64;

/// A record's length in the ring: header, chunk, padding to 8.
pub(super) fn record_len(chunk: usize) -> usize {
    RECORD_HEADER + chunk.next_multiple_of(8)
}

/// The header of one ring record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Record {
    /// What follows.
    pub kind: Kind,
    /// The message's key.
    pub key: MsgKey,
    /// The sender's call.
    pub sig: Signature,
    /// Bytes following this header (before padding).
    pub chunk_len: u32,
    /// The whole message's length.
    pub total_len: u64,
    /// Where this chunk goes in the message (fragments; 0 otherwise).
    pub offset: u64,
}

impl Record {
    /// Header bytes.
    pub fn encode(&self) -> [u8; RECORD_HEADER] {
        let mut b = [0u8; RECORD_HEADER];
        let mut put = |off: usize, v: &[u8]| b[off..off + v.len()].copy_from_slice(v);
        put(0, &RECORD_MAGIC.to_le_bytes());
        put(2, &[self.kind as u8]);
        put(4, &self.key.src.to_le_bytes());
        put(8, &self.key.team.to_le_bytes());
        put(16, &self.key.seq.to_le_bytes());
        put(24, &self.key.tag.to_le_bytes());
        put(28, &self.chunk_len.to_le_bytes());
        put(32, &self.total_len.to_le_bytes());
        put(40, &self.offset.to_le_bytes());
        put(48, &self.sig.word.to_le_bytes());
        put(56, &self.sig.size.to_le_bytes());
        b
    }

    /// Parse and check a header: known kind, a chunk that fits in the
    /// message and, for each kind, the shape it must have.
    pub fn parse(b: &[u8]) -> Result<Record> {
        let mut r = Reader::new(b);
        let magic = r.u16()?;
        let kind = r.u8()?;
        r.u8()?;
        if magic != RECORD_MAGIC {
            return Err(Error::io(format!("bad record magic {magic:#06x}")));
        }
        let kind = match kind {
            1 => Kind::Eager,
            2 => Kind::RndvCma,
            3 => Kind::Frag,
            k => return Err(Error::io(format!("unknown record kind {k}"))),
        };
        let src = r.u32()?;
        let (team, seq, tag) = (r.u64()?, r.u64()?, r.u32()?);
        let chunk_len = r.u32()?;
        let (total_len, offset) = (r.u64()?, r.u64()?);
        let sig = Signature { word: r.u64()?, size: r.u64()? };
        r.finish()?;
        let chunk = u64::from(chunk_len);
        let ok = match kind {
            Kind::Eager => offset == 0 && chunk == total_len,
            Kind::RndvCma => offset == 0 && chunk_len as usize == RNDV_DESC,
            Kind::Frag => offset.checked_add(chunk).is_some_and(|end| end <= total_len) && chunk > 0,
        };
        if !ok || usize::try_from(total_len).is_err() {
            return Err(Error::io(format!(
                "{kind:?} record with chunk {chunk_len}, offset {offset}, total {total_len} is inconsistent"
            )));
        }
        Ok(Record { kind, key: MsgKey { team, seq, tag, src }, sig, chunk_len, total_len, offset })
    }
}

/// Bytes of a rendezvous descriptor.
pub(super) const RNDV_DESC: usize = 24;

/// Where the receiver reads a large message from, and where it reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct RndvDesc {
    /// Sender's process.
    pub pid: u32,
    /// Completion slot in the sender's segment.
    pub slot: u32,
    /// The slot's generation for this message.
    pub generation: u64,
    /// The buffer's address in the sender's process.
    pub addr: u64,
}

impl RndvDesc {
    /// Descriptor bytes.
    pub fn encode(&self) -> [u8; RNDV_DESC] {
        let mut b = [0u8; RNDV_DESC];
        b[0..4].copy_from_slice(&self.pid.to_le_bytes());
        b[4..8].copy_from_slice(&self.slot.to_le_bytes());
        b[8..16].copy_from_slice(&self.generation.to_le_bytes());
        b[16..24].copy_from_slice(&self.addr.to_le_bytes());
        b
    }

    /// Parse a descriptor.
    pub fn parse(b: &[u8]) -> Result<RndvDesc> {
        let mut r = Reader::new(b);
        let d = RndvDesc { pid: r.u32()?, slot: r.u32()?, generation: r.u64()?, addr: r.u64()? };
        r.finish()?;
        Ok(d)
    }
}

/// Completion-slot states (low byte of a slot word; the rest is the generation).
pub(super) mod slot {
    // 0: never used (a fresh segment is zero-filled).
    /// Posted; the receiver has not taken it.
    pub const QUEUED: u8 = 1;
    /// The receiver is reading the sender's buffer.
    pub const TAKEN: u8 = 2;
    /// The receiver has read it: the buffer may be reused.
    pub const DONE: u8 = 3;
    /// The receive expected another size.
    pub const FAILED_SIZE: u8 = 4;
    /// The receiver could not read the buffer (CMA error).
    pub const FAILED_READ: u8 = 5;
    /// The receiver closed before taking it.
    pub const FAILED_CLOSED: u8 = 6;
    /// The sender retracted it before the receiver took it.
    pub const CANCELLED: u8 = 7;
    /// The receive was posted for another call (the signatures disagree).
    pub const FAILED_CALL: u8 = 8;

    /// A slot word.
    pub fn word(generation: u64, state: u8) -> u64 {
        (generation << 8) | u64::from(state)
    }

    /// `(generation, state)` of a word.
    pub fn split(word: u64) -> (u64, u8) {
        (word >> 8, word as u8)
    }
}

/// Version of the address blob.
const ADDR_VERSION: u8 = 1;

/// What peers need to find and check a segment: `[version u8][pid u32][probe address u64][name_len u8][name]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Address {
    /// Owner's process.
    pub pid: u32,
    /// Address of the probe word in the owner's process.
    pub probe_addr: u64,
    /// The shared-memory object's name (with its leading `/`).
    pub name: String,
}

impl Address {
    /// Blob bytes.
    pub fn encode(&self) -> Vec<u8> {
        let name = self.name.as_bytes();
        let len = name.len().min(usize::from(u8::MAX));
        let mut b = vec![ADDR_VERSION];
        b.extend_from_slice(&self.pid.to_le_bytes());
        b.extend_from_slice(&self.probe_addr.to_le_bytes());
        b.push(len as u8);
        b.extend_from_slice(&name[..len]);
        b
    }

    /// Parse a blob.
    pub fn parse(b: &[u8]) -> Result<Address> {
        let mut r = Reader::new(b);
        let version = r.u8()?;
        if version != ADDR_VERSION {
            return Err(Error::io(format!("shared-memory address version {version}, expected {ADDR_VERSION}")));
        }
        let (pid, probe_addr) = (r.u32()?, r.u64()?);
        let len = usize::from(r.u8()?);
        let name = std::str::from_utf8(r.bytes(len)?)
            .ok()
            .filter(|n| n.starts_with('/') && n.len() > 1 && !n[1..].contains('/') && !n.contains('\0'))
            .ok_or_else(|| Error::io("shared-memory name in a peer's address is not a valid name"))?
            .to_string();
        r.finish()?;
        Ok(Address { pid, probe_addr, name })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn header() -> SegHeader {
        SegHeader::layout(42, 1, 4, 1 << 16, 128, 4096, 7, 0x1234).unwrap()
    }

    #[test]
    fn header_round_trips_and_layout_is_aligned() {
        let h = header();
        assert_eq!(SegHeader::parse(&h.encode(), 4096).unwrap(), h);
        assert_eq!(h.rings_off % 4096, 0);
        assert_eq!(h.ring_stride % 4096, 0);
        assert!(h.slots_off as usize >= H_CMA + 4);
        assert_eq!(h.ring_off(3).unwrap(), h.rings_off + 3 * h.ring_stride);
        assert!(h.ring_off(4).is_err());
        assert!(SegHeader::layout(1, 0, 1, 3000, 1, 4096, 0, 0).is_err());
        assert!(SegHeader::layout(1, 2, 2, 4096, 1, 4096, 0, 0).is_err());
    }

    #[test]
    fn corrupt_headers_are_errors() {
        let good = header().encode();
        let mut b = good;
        b[0] ^= 1;
        assert!(SegHeader::parse(&b, 4096).unwrap_err().to_string().contains("magic"));
        let mut b = good;
        b[8] = 9;
        assert!(SegHeader::parse(&b, 4096).unwrap_err().to_string().contains("version"));
        // A peer of an older build is refused by name.
        let mut b = good;
        b[8] = 3;
        let e = SegHeader::parse(&b, 4096).unwrap_err().to_string();
        assert!(e.contains(&format!("version 3, this build speaks {VERSION}")), "{e}");
        let mut b = good;
        b[48] ^= 0x10; // rings_off
        assert!(SegHeader::parse(&b, 4096).is_err());
        assert!(SegHeader::parse(&good[..40], 4096).is_err());
    }

    #[test]
    fn records_check_their_shape() {
        let key = MsgKey { team: 1, seq: 2, tag: 3, src: 4 };
        let sig = Signature { word: 0x0102_0304_0506_0708, size: u64::MAX };
        let rec = Record { kind: Kind::Frag, key, sig, chunk_len: 100, total_len: 1000, offset: 900 };
        assert_eq!(Record::parse(&rec.encode()).unwrap(), rec);
        let over = Record { offset: 901, ..rec };
        assert!(Record::parse(&over.encode()).is_err());
        let eager = Record { kind: Kind::Eager, offset: 0, total_len: 101, ..rec };
        assert!(Record::parse(&eager.encode()).is_err());
        let rndv = Record { kind: Kind::RndvCma, offset: 0, chunk_len: RNDV_DESC as u32, ..rec };
        assert!(Record::parse(&rndv.encode()).is_ok());
        let mut b = rec.encode();
        b[2] = 9;
        assert!(Record::parse(&b).unwrap_err().to_string().contains("kind 9"));
        assert_eq!(record_len(1), RECORD_HEADER + 8);
        // The signature is the last 16 bytes, and a header cut short is an error.
        assert_eq!(rec.encode()[48..56], sig.word.to_le_bytes());
        assert_eq!(rec.encode()[56..], sig.size.to_le_bytes());
        assert!(Record::parse(&rec.encode()[..RECORD_HEADER - 1]).is_err());
        assert!(Record::parse(&rec.encode()[..48]).is_err(), "a version-1 header is too short");
        let d = RndvDesc { pid: 5, slot: 6, generation: 7, addr: 8 };
        assert_eq!(RndvDesc::parse(&d.encode()).unwrap(), d);
    }

    #[test]
    fn addresses_round_trip_and_reject_bad_names() {
        let a = Address { pid: 9, probe_addr: 0x1000, name: "/ferrocoll-j-0".into() };
        assert_eq!(Address::parse(&a.encode()).unwrap(), a);
        let bad = Address { name: "/a/b".into(), ..a.clone() };
        assert!(Address::parse(&bad.encode()).is_err());
        assert!(Address::parse(&a.encode()[..5]).is_err());
        assert_eq!(slot::split(slot::word(77, slot::TAKEN)), (77, slot::TAKEN));
    }

    proptest! {
        #[test]
        fn parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..160)) {
            let _ = SegHeader::parse(&bytes, 4096);
            let _ = Record::parse(&bytes);
            let _ = RndvDesc::parse(&bytes);
            let _ = Address::parse(&bytes);
        }

        #[test]
        fn records_round_trip(
            kind in 1u8..4, team: u64, seq: u64, tag: u32, src: u32, word: u64, size: u64, chunk: u32, total: u64,
        ) {
            let kind = [Kind::Eager, Kind::RndvCma, Kind::Frag][usize::from(kind - 1)];
            let (chunk_len, total_len) = match kind {
                Kind::Eager => (chunk, u64::from(chunk)),
                Kind::RndvCma => (RNDV_DESC as u32, total),
                Kind::Frag => (chunk.max(1), total.max(u64::from(chunk.max(1)))),
            };
            let rec = Record {
                kind, key: MsgKey { team, seq, tag, src }, sig: Signature { word, size }, chunk_len, total_len,
                offset: 0,
            };
            let parsed = Record::parse(&rec.encode());
            // Only a length beyond this machine's usize is refused.
            if usize::try_from(total_len).is_ok() {
                prop_assert_eq!(parsed.unwrap(), rec);
            }
        }

        #[test]
        fn accepted_records_fit(kind in 1u8..4, chunk in any::<u32>(), total in any::<u64>(), offset in any::<u64>(),
                                word: u64, size: u64) {
            let mut b = Record {
                kind: Kind::Eager, key: MsgKey { team: 0, seq: 0, tag: 0, src: 0 }, sig: Signature { word, size },
                chunk_len: chunk, total_len: total, offset,
            }.encode();
            b[2] = kind;
            if let Ok(r) = Record::parse(&b) {
                prop_assert!(r.offset + u64::from(r.chunk_len) <= r.total_len || r.kind == Kind::RndvCma);
            }
        }
    }
}
