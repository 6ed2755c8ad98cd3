//! Running one conformance case on one rank through the raw (C-style) API,
//! and checking what it wrote.

use ferrocoll::{BufferInfo, BufferInfoV, CollArgs, CollBuffer, CollFlags, CollType, MemType, ReduceOp, Status, Team};

use crate::cases::Case;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, OnceLock};

use crate::dtypes::{Expected, decode, elem_size, expected, input, matches};
use crate::rng::hash;
use crate::setup::{Expect, Setup, setup};
use crate::world::TEST_TIMEOUT;

/// The buffers and arrays a request points into; they must not move while it lives.
struct Live {
    setup: Setup,
    arrays: Vec<Vec<u8>>,
}

fn side(
    buf: &mut Option<Vec<u8>>,
    count: usize,
    v: &Option<(Vec<usize>, Vec<usize>)>,
    case: &Case,
    arrays: &mut Vec<Vec<u8>>,
) -> CollBuffer {
    let Some(b) = buf.as_mut() else { return CollBuffer::None };
    // Alternate between telling the memory type and letting ferrocoll find it.
    let mem_type = if case.seed.is_multiple_of(2) { MemType::Host } else { MemType::Unknown };
    coll_buffer(b.as_mut_ptr(), count, v, case, mem_type, arrays)
}

/// One side of a case's arguments at `buffer`: `count` elements, or the
/// blocks `v` (counts, displacements) packed as the case says into
/// `arrays`, which must outlive the request.
pub fn coll_buffer(
    buffer: *mut u8,
    count: usize,
    v: &Option<(Vec<usize>, Vec<usize>)>,
    case: &Case,
    mem_type: MemType,
    arrays: &mut Vec<Vec<u8>>,
) -> CollBuffer {
    match v {
        None => CollBuffer::Info(BufferInfo { buffer, count: count as u64, datatype: case.dtype, mem_type }),
        Some((counts, displs)) => {
            arrays.push(packed(counts, case.wide_counts));
            let counts = arrays.last().map_or(std::ptr::null(), |a| a.as_ptr());
            arrays.push(packed(displs, case.wide_counts));
            let displacements = arrays.last().map_or(std::ptr::null(), |a| a.as_ptr());
            CollBuffer::InfoV(BufferInfoV { buffer, counts, displacements, datatype: case.dtype, mem_type })
        }
    }
}

/// Counts or displacements as the raw API reads them (u32 or u64 array).
fn packed(v: &[usize], wide: bool) -> Vec<u8> {
    if wide {
        v.iter().flat_map(|&x| (x as u64).to_le_bytes()).collect()
    } else {
        v.iter().flat_map(|&x| (x as u32).to_le_bytes()).collect()
    }
}

/// A case's arguments without buffers: collective, op, root, the test
/// timeout and the flags its axes ask for.
pub fn case_args(case: &Case) -> CollArgs {
    let mut a = CollArgs::new(case.coll);
    a.op = case.op;
    a.root = case.root as u64;
    a.flags = CollFlags::TIMEOUT;
    a.timeout = TEST_TIMEOUT.as_secs_f64();
    if case.in_place {
        a.flags |= CollFlags::IN_PLACE;
    }
    if case.persistent {
        a.flags |= CollFlags::PERSISTENT;
    }
    if case.wide_counts {
        a.flags |= CollFlags::COUNT_64BIT | CollFlags::DISPLACEMENTS_64BIT;
    }
    if case.op.is_loc() {
        a.flags |= CollFlags::LOC_PAIRS;
    }
    a
}

fn args(case: &Case, live: &mut Live) -> CollArgs {
    let mut a = case_args(case);
    let s = &mut live.setup;
    a.src = side(&mut s.src, s.src_count, &s.src_v, case, &mut live.arrays);
    a.dst = side(&mut s.dst, s.dst_count, &s.dst_v, case, &mut live.arrays);
    a
}

/// Refill inputs and re-poison outputs in place (pointers stay valid for a persistent request).
fn reset(live: &mut Live, fresh: &Setup) {
    if let (Some(b), Some(f)) = (live.setup.src.as_mut(), fresh.src.as_ref()) {
        b.copy_from_slice(f);
    }
    if let (Some(b), Some(f)) = (live.setup.dst.as_mut(), fresh.dst.as_ref()) {
        b.copy_from_slice(f);
    }
}

/// Check `dst` against the expectations; the message names the first bad element.
pub fn verify(case: &Case, rank: usize, size: usize, s: &Setup) -> Result<(), String> {
    let empty = Vec::new();
    // Bcast's one buffer is its source; every other collective's result is its destination.
    let result = if case.coll == CollType::Bcast { &s.src } else { &s.dst };
    let dst = result.as_ref().unwrap_or(&empty);
    let op = case.coll.is_reduction().then_some(case.op);
    let es = elem_size(case.dtype, op);
    for e in &s.expect {
        match e {
            Expect::Bytes { offset, bytes } => {
                let got = dst.get(*offset..offset + bytes.len()).ok_or("dst too short")?;
                if let Some(i) = got.iter().zip(bytes).position(|(a, b)| a != b) {
                    let el = i / es;
                    return Err(format!(
                        "element {el} (byte {}) is {:02x?}, expected {:02x?}",
                        offset + i,
                        &got[el * es..(el + 1) * es],
                        &bytes[el * es..(el + 1) * es]
                    ));
                }
            }
            Expect::Reduced { offset, count, base } => {
                let op = case.op;
                let want = reference(case, size, *base, *count);
                for (el, w) in want.iter().enumerate() {
                    let at = offset + el * es;
                    let got = decode(case.dtype, op, dst.get(at..at + es).ok_or("dst too short")?);
                    if !matches(case.dtype, op, &got, w) {
                        return Err(format!("element {el}: got {got:?}, expected {w:?}"));
                    }
                }
            }
        }
    }
    let _ = rank;
    Ok(())
}

/// What one rank saw of a case.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Hash of the destination (for cross-rank comparisons).
    pub digest: u64,
    /// "tl/algorithm" that ran.
    pub selected: String,
}

type RefKey = (u64, usize, usize, usize);
type RefCell = Arc<OnceLock<Arc<Vec<Expected>>>>;

/// Reference results shared by the ranks of a world: every rank of an
/// allreduce checks the same vector, so it is computed once.
static REFERENCES: LazyLock<Mutex<HashMap<RefKey, RefCell>>> = LazyLock::new(Default::default);

/// The expected reduction of inputs `base..base + count` over `size` ranks.
fn reference(case: &Case, size: usize, base: usize, count: usize) -> Arc<Vec<Expected>> {
    let key = (case.seed, size, base, count);
    let cell = {
        let mut map = REFERENCES.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() > 256 {
            map.clear();
        }
        map.entry(key).or_default().clone()
    };
    cell.get_or_init(|| {
        let es = elem_size(case.dtype, Some(case.op));
        let mut buf = vec![0u8; es];
        let mut contrib = Vec::with_capacity(size);
        let v = (0..count)
            .map(|el| {
                contrib.clear();
                for b in 0..size {
                    input(case.dtype, Some(case.op), case.seed, b, base + el, &mut buf);
                    contrib.push(decode(case.dtype, case.op, &buf));
                }
                expected(case.dtype, case.op, &contrib)
            })
            .collect();
        Arc::new(v)
    })
    .clone()
}

/// Run `case` on this rank: init, post (three times if persistent), wait, verify.
pub fn run_case(team: &Team, case: &Case) -> Result<Outcome, String> {
    let (rank, size) = (team.rank(), team.size());
    let fresh = setup(case, rank, size);
    let mut live = Live { setup: fresh.clone(), arrays: Vec::new() };
    let a = args(case, &mut live);
    let fail = |what: &str, e: ferrocoll::Error| format!("{what}: {e}");
    // SAFETY: every pointer in `a` points into `live`, whose vectors are never
    // resized or dropped while the request lives (reset copies in place).
    let mut req = unsafe { team.collective_init(&a) }.map_err(|e| fail("init", e))?;
    let posts = if case.persistent { 3 } else { 1 };
    let mut digest = 0;
    for i in 0..posts {
        if i > 0 {
            reset(&mut live, &fresh);
        }
        req.post().map_err(|e| fail("post", e))?;
        req.wait().map_err(|e| fail(&format!("wait (post {})", i + 1), e))?;
        match req.test() {
            Ok(Status::Ok) => {}
            other => return Err(format!("test after wait returned {other:?}")),
        }
        verify(case, rank, size, &live.setup).map_err(|e| format!("post {}: {e}", i + 1))?;
        digest = live.setup.dst.as_ref().map_or(0, |d| hash(&[d.len() as u64, fx(d)]));
    }
    let selected = req.selected().to_string();
    req.finalize().map_err(|e| fail("finalize", e))?;
    Ok(Outcome { digest, selected })
}

fn fx(b: &[u8]) -> u64 {
    b.chunks(8).fold(0u64, |h, c| {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        (h.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95)
    })
}

/// Whether every rank's result must be bit-identical (allreduce).
pub fn must_agree(case: &Case) -> bool {
    case.coll == CollType::Allreduce && case.op != ReduceOp::Maxloc
}

/// Run `cases` on `size` thread ranks (a library made with `config`), on a
/// team each rank creates with `params` (typically a tune string pinning
/// one algorithm); every case must select `want` (or be a zero-size no-op).
/// Per rank: how many cases ran, or the first failure.
pub fn run_pinned(
    size: usize,
    config: &ferrocoll::Config,
    params: ferrocoll::TeamParams,
    cases: Vec<Case>,
    want: &str,
) -> Vec<Result<usize, String>> {
    let want = want.to_string();
    crate::world::run(size, config, move |_team: &Team, ctx| -> Result<usize, String> {
        let team = Team::create(ctx, params.clone()).map_err(|e| format!("team: {e}"))?;
        for case in &cases {
            let out = run_case(&team, case).map_err(|e| format!("size {size}: {case}: {e}"))?;
            if out.selected != want && out.selected != "none/zero-size" {
                return Err(format!("{case}: pinned {want} but {} ran", out.selected));
            }
        }
        Ok(cases.len())
    })
}
