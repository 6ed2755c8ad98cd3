//! The SHARP TL's algorithms, what each needs of the library and the caps
//! (checked at init, so that selection falls back with `NotSupported`),
//! its default selection, and the p2p algorithm that replaces it when the
//! library refuses at post.

mod flat;
mod hier;
mod reduce_scatter;

use std::sync::LazyLock;

use ferrocoll_core::CollType::{self, *};
use ferrocoll_core::args::{CollInit, Operands, Reducer};
use ferrocoll_core::score::{AlgId, MsgRange};
use ferrocoll_core::{Error, MemRef, Result};

use super::req::On;
use super::sys;
use super::team::{Exec, SharpTeam};
use crate::base::{Alg, DefaultAlg, Registry, Run, defaults_of};
use crate::p2p::Comm;

const ALGS: &[Alg<Exec>] = &[
    Alg::new(
        Allreduce,
        0,
        "sharp",
        "one SHARP allreduce over every team rank",
        Run::Allreduce(|x, o| Box::pin(flat::allreduce(x, o))),
    ),
    Alg::new(
        Allreduce,
        1,
        "hier",
        "reduce within each node, SHARP allreduce among node leaders, bcast within each node",
        Run::Allreduce(|x, o| Box::pin(hier::allreduce(x, o))),
    ),
    Alg::new(
        Reduce,
        0,
        "sharp",
        "one SHARP reduce over every team rank",
        Run::Reduce(|x, o| Box::pin(flat::reduce(x, o))),
    ),
    Alg::new(Bcast, 0, "sharp", "one SHARP bcast over every team rank", Run::Bcast(|x, o| Box::pin(flat::bcast(x, o)))),
    Alg::new(Barrier, 0, "sharp", "one SHARP barrier", Run::Barrier(|x| Box::pin(flat::barrier(x)))),
    Alg::new(
        Allgather,
        0,
        "sharp",
        "one SHARP allgather (newer libraries; equal blocks)",
        Run::Allgather(|x, o| Box::pin(flat::allgather(x, o))),
    ),
    Alg::new(
        ReduceScatter,
        0,
        "sat",
        "the library's native reduce_scatter (streaming aggregation; equal blocks)",
        Run::ReduceScatter(|x, o| Box::pin(reduce_scatter::sat(x, o))),
    ),
    Alg::new(
        ReduceScatter,
        1,
        "allreduce",
        "one SHARP allreduce into registered scratch, then the own block copied out (small blocks)",
        Run::ReduceScatter(|x, o| Box::pin(reduce_scatter::via_allreduce(x, o))),
    ),
    Alg::new(
        ReduceScatter,
        2,
        "reduces",
        "one SHARP reduce per root delivering its block, UCC_TL_SHARP_RS_PIPELINE in flight",
        Run::ReduceScatter(|x, o| Box::pin(reduce_scatter::reduces(x, o))),
    ),
    Alg::new(
        ReduceScatter,
        3,
        "hier",
        "reduce within each node, SHARP allreduce among node leaders, scatter within each node",
        Run::ReduceScatter(|x, o| Box::pin(hier::reduce_scatter(x, o))),
    ),
    Alg::new(
        ReduceScatterv,
        0,
        "reduces",
        "one SHARP reduce per root delivering its block, UCC_TL_SHARP_RS_PIPELINE in flight",
        Run::ReduceScatter(|x, o| Box::pin(reduce_scatter::reduces(x, o))),
    ),
];

static REGISTRY: LazyLock<Registry<Exec>> = LazyLock::new(|| Registry::new(&[ALGS]));

/// Every SHARP algorithm.
pub(crate) fn registry() -> &'static Registry<Exec> {
    &REGISTRY
}

const INF: u64 = u64::MAX;

/// The team's defaults: hierarchical where nodes hold several ranks, and
/// for reduce_scatter by size (`UCC_TL_SHARP_RS_ALLREDUCE_MAX`) and caps
/// (native when the library has it and streams, else one reduce per root).
pub(crate) fn defaults(team: &SharpTeam) -> Vec<DefaultAlg> {
    let all = MsgRange::new(0, INF);
    let lib = &team.lib;
    let flat = lib.flat.is_some();
    let mut table: Vec<(CollType, Vec<(MsgRange, AlgId)>)> = Vec::new();
    if team.hierarchical {
        table.push((Allreduce, vec![(all, 1)]));
        table.push((ReduceScatter, vec![(all, 3)]));
    } else if flat {
        table.push((Allreduce, vec![(all, 0)]));
        let cut = team.config.rs_allreduce_max as u64;
        let large = if lib.api.reduce_scatter_nb.is_some() && lib.has_sat() { 0 } else { 2 };
        let ranges = if cut == 0 {
            vec![(all, large)]
        } else {
            vec![(MsgRange::new(0, cut), 1), (MsgRange::new(cut, INF), large)]
        };
        table.push((ReduceScatter, ranges));
    }
    if flat {
        table.push((Reduce, vec![(all, 0)]));
        table.push((Bcast, vec![(all, 0)]));
        table.push((Barrier, vec![(all, 0)]));
        table.push((ReduceScatterv, vec![(all, 0)]));
        if lib.api.allgather_nb.is_some() {
            table.push((Allgather, vec![(all, 0)]));
        }
    }
    let refs: Vec<(CollType, &[(MsgRange, AlgId)])> = table.iter().map(|(c, r)| (*c, r.as_slice())).collect();
    defaults_of(&refs)
}

/// Refuse, with `NotSupported`, what algorithm `alg` cannot run on this
/// team for `init`: caps, entry points, groups, block shapes.
pub(crate) fn supports(team: &SharpTeam, alg: &Alg<Exec>, init: &CollInit) -> Result<()> {
    let lib = &team.lib;
    let name = alg.info.name;
    let on = if name == "hier" { On::Leaders } else { On::Flat };
    match on {
        On::Flat if lib.flat.is_none() => return Err(Error::not_supported("this team has no flat SHARP group")),
        On::Leaders if !team.hierarchical => {
            return Err(Error::not_supported(
                "this team has no SHARP group of node leaders (one rank per node, or one node)",
            ));
        }
        _ => {}
    }
    let reducer = match &init.ops {
        Operands::Allreduce(o) => Some(o.reducer),
        Operands::Reduce(o) => Some(o.reducer),
        Operands::ReduceScatter(o) => Some(o.reducer),
        _ => None,
    };
    if let Some(r) = reducer {
        codes(lib, r)?;
    }
    match (&init.ops, name) {
        (Operands::ReduceScatter(o), "sat") => {
            if lib.api.reduce_scatter_nb.is_none() {
                return Err(Error::not_supported(format!("{} has no sharp_coll_do_reduce_scatter_nb", lib.api.path)));
            }
            if !lib.has_sat() {
                return Err(Error::not_supported(
                    "the SHARP caps have no streaming aggregation (SAT) for reduce_scatter",
                ));
            }
            if o.src.blocks.uniform().is_none() {
                return Err(Error::not_supported(format!(
                    "native SHARP reduce_scatter needs equal blocks ({} elements over {} ranks)",
                    o.count, init.size
                )));
            }
        }
        (Operands::ReduceScatter(_), "allreduce" | "hier") if init.coll != ReduceScatter => {
            return Err(Error::not_supported("reduce_scatterv runs one reduce per root only"));
        }
        (Operands::Allgather(o), _) => {
            if lib.api.allgather_nb.is_none() {
                return Err(Error::not_supported(format!("{} has no sharp_coll_do_allgather_nb", lib.api.path)));
            }
            if init.coll != Allgather || o.dst.blocks.uniform().is_none() {
                return Err(Error::not_supported("SHARP allgather needs equal, back-to-back blocks"));
            }
        }
        _ => {}
    }
    Ok(())
}

/// SHARP's datatype and operation codes for `r`, if the library and its caps have them.
pub(crate) fn codes(lib: &super::team::Lib, r: Reducer) -> Result<(i32, i32)> {
    let dt = sys::dtype(r.dtype).ok_or_else(|| Error::not_supported(format!("SHARP has no datatype {}", r.dtype)))?;
    let op = sys::op(r.op).ok_or_else(|| Error::not_supported(format!("SHARP has no operation {}", r.op)))?;
    if !lib.allows(dt, op) {
        return Err(Error::not_supported(format!("the SHARP caps exclude {} {}", r.op, r.dtype)));
    }
    Ok((dt, op))
}

/// The p2p algorithm that runs when the library refuses at post: p2p's
/// default for the collective and size.
pub(crate) fn p2p_fallback(init: &CollInit) -> Result<&'static Alg<Comm>> {
    let reg = crate::p2p::alg::registry();
    crate::p2p::alg::defaults()
        .into_iter()
        .find(|d| d.coll == init.coll && d.range.contains(init.msgsize))
        .and_then(|d| reg.find(init.coll, d.alg))
        .ok_or_else(|| Error::internal(format!("p2p has no default {} for {} bytes", init.coll, init.msgsize)))
}

/// Where `part` starts inside `buf`, in bytes (validation keeps blocks inside their buffer).
pub(crate) fn offset_in(buf: MemRef, part: MemRef) -> Result<usize> {
    (part.addr() as usize)
        .checked_sub(buf.addr() as usize)
        .filter(|off| off.checked_add(part.len()).is_some_and(|end| end <= buf.len()))
        .ok_or_else(|| Error::internal(format!("a block of {} bytes lies outside its buffer", part.len())))
}

/// A registered buffer and the descriptor naming it.
pub(crate) fn desc(exec: &Exec, mem: MemRef) -> Result<(sys::DataDesc, std::sync::Arc<super::reg::Reg>)> {
    let reg = exec.reg(mem)?;
    Ok((sys::DataDesc::host(mem.addr(), mem.len(), reg.mr()), reg))
}

/// A reduce spec of `count` elements from `src` to `dst`.
pub(crate) fn reduce_spec(
    exec: &Exec,
    src: (sys::DataDesc, MemRef),
    dst: sys::DataDesc,
    count: usize,
    r: Reducer,
    root: usize,
) -> Result<sys::ReduceSpec> {
    let (dtype, op) = codes(&exec.team.lib, r)?;
    let root = i32::try_from(root).map_err(|_| Error::invalid_param(format!("root {root} too large for SHARP")))?;
    let _ = src.1;
    Ok(sys::ReduceSpec {
        root,
        sbuf_desc: src.0,
        rbuf_desc: dst,
        dtype,
        length: count,
        op,
        tag_dtype: sys::DTYPE_NULL,
        aggr_mode: sys::AGGREGATION_NONE,
        stream_lock_batch_size: 0,
        offset: 0,
        reserved: [0; 2],
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn registry_is_consistent() {
        super::registry().check().unwrap();
    }
}
