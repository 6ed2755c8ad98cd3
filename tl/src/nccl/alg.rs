//! TL/NCCL's algorithms: one per collective, each the NCCL call (or the
//! group of sends and receives) that does it, enqueued by one shared
//! future ([`run`]): create the communicator if needed (polled), enqueue,
//! then wait for the event recorded after the work.

use std::ffi::{c_int, c_void};
use std::sync::{Arc, LazyLock};
use std::task::Poll;

use ferrocoll_core::args::{
    Allgather, Allreduce, Alltoall, Bcast, Blocked, CollInit, Gather, Operands, Reduce, ReduceScatter, Scatter,
};
use ferrocoll_core::backend::{CollTask, Ee, PostInfo};
use ferrocoll_core::engine::{TaskDiag, TaskFuture};
use ferrocoll_core::score::MsgRange;
use ferrocoll_core::{CollType, DataType, Error, MemRef, ReduceOp, Result};
use ferrocoll_cuda::Event;
use ferrocoll_cuda::nccl::{self, BYTES, Comm};

use super::team::NcclTeam;
use crate::base::{Alg, AlgFuture, DefaultAlg, Registry, Run};

/// What an algorithm runs with at one post.
pub(crate) struct Exec {
    team: Arc<NcclTeam>,
    /// The engine's stream for a stream-native triggered post, else the team's own.
    stream: Option<usize>,
    diag: Arc<TaskDiag>,
}

const DESC: &str = "NCCL's own call (grouped ncclSend/ncclRecv where the library has none)";

static REGISTRY: LazyLock<Registry<Exec>> = LazyLock::new(|| {
    use CollType as C;
    let algs = [
        Alg::new(C::Allreduce, 0, "nccl", DESC, Run::Allreduce(allreduce)),
        Alg::new(C::Reduce, 0, "nccl", DESC, Run::Reduce(reduce)),
        Alg::new(C::Bcast, 0, "nccl", DESC, Run::Bcast(bcast)),
        Alg::new(C::Allgather, 0, "nccl", DESC, Run::Allgather(allgather)),
        Alg::new(C::Allgatherv, 0, "nccl", DESC, Run::Allgather(allgatherv)),
        Alg::new(C::Gather, 0, "nccl", DESC, Run::Gather(gather)),
        Alg::new(C::Gatherv, 0, "nccl", DESC, Run::Gather(gatherv)),
        Alg::new(C::Scatter, 0, "nccl", DESC, Run::Scatter(scatter)),
        Alg::new(C::Scatterv, 0, "nccl", DESC, Run::Scatter(scatterv)),
        Alg::new(C::Alltoall, 0, "nccl", DESC, Run::Alltoall(alltoall)),
        Alg::new(C::Alltoallv, 0, "nccl", DESC, Run::Alltoall(alltoallv)),
        Alg::new(C::ReduceScatter, 0, "nccl", DESC, Run::ReduceScatter(reduce_scatter)),
    ];
    Registry::new(&[&algs])
});

pub(crate) fn registry() -> &'static Registry<Exec> {
    &REGISTRY
}

pub(crate) fn defaults() -> Vec<DefaultAlg> {
    registry().colls().iter().map(|coll| DefaultAlg { coll, range: MsgRange::ALL, alg: 0 }).collect()
}

/// What NCCL cannot do, refused before a task is made (`NotSupported`:
/// selection moves on to the next TL).
pub(crate) fn accepts(init: &CollInit) -> Result<()> {
    let refuse = |why: String| Err(Error::not_supported(format!("TL/NCCL: {why}")));
    if init.active_set.is_some() {
        return refuse(format!("{} with an active set", init.coll));
    }
    match &init.ops {
        Operands::Alltoall(o) if o.in_place => return refuse(format!("in-place {}", init.coll)),
        Operands::ReduceScatter(_) if init.coll != CollType::ReduceScatter => {
            return refuse("NCCL has no reduce_scatterv".into());
        }
        Operands::ReduceScatter(o) if o.count % init.size.max(1) != 0 => {
            return refuse(format!(
                "reduce_scatter of {} elements does not split evenly over {} ranks",
                o.count, init.size
            ));
        }
        _ => {}
    }
    if init.coll.is_reduction() {
        reduction(init.dtype, init.op)?;
    }
    Ok(())
}

/// NCCL's codes for a reduction, or `NotSupported` naming what it lacks.
fn reduction(dtype: DataType, op: ReduceOp) -> Result<(c_int, c_int)> {
    let dt =
        nccl::datatype(dtype).ok_or_else(|| Error::not_supported(format!("TL/NCCL: NCCL does not reduce {dtype}")))?;
    let float = matches!(dtype, DataType::Float16 | DataType::Bfloat16 | DataType::Float32 | DataType::Float64);
    match nccl::reduce_op(op) {
        Some(_) if op == ReduceOp::Avg && !float => Err(Error::not_supported(format!(
            "TL/NCCL: avg of {dtype} (ferrocoll truncates integer averages; NCCL's rounding is not the same)"
        ))),
        Some(o) => Ok((dt, o)),
        None => Err(Error::not_supported(format!("TL/NCCL: NCCL has no {op}"))),
    }
}

/// One enqueue: NCCL calls on a communicator and a stream.
type Plan = Box<dyn Fn(&mut Comm, *mut c_void) -> Result<()> + Send + Sync>;

/// The prepared collective.
pub(crate) struct NcclTask {
    team: Arc<NcclTeam>,
    init: Arc<CollInit>,
    run: Run<Exec>,
}

impl NcclTask {
    pub(crate) fn new(team: Arc<NcclTeam>, init: Arc<CollInit>, run: Run<Exec>) -> NcclTask {
        NcclTask { team, init, run }
    }
}

impl CollTask for NcclTask {
    fn start(&self, post: &PostInfo) -> Result<TaskFuture> {
        let exec = Exec { team: self.team.clone(), stream: post.stream, diag: post.diag.clone() };
        self.run.start(exec, &self.init)
    }

    fn native_on_stream(&self) -> bool {
        self.team.comm_ready()
    }

    /// The first triggered post on a stream makes the communicator before
    /// the engine touches the stream (see the trait's reason: NCCL loads its
    /// kernels while it makes one, which must not wait behind a stream held
    /// for this collective). Not while the stream is captured: making a
    /// communicator inside a capture is not ours to risk, and the
    /// host-driven path refuses the capture with a reason instead.
    fn prepare_stream_post(&self, ee: &dyn Ee) -> Result<()> {
        if self.team.comm_ready() || ee.capturing()? {
            return Ok(());
        }
        self.team.wait_comm(self.init.timeout.unwrap_or(super::team::COMM_WAIT_LIMIT))
    }
}

/// A collective in flight: gives its event back, and marks the team when
/// it ends without success (an error, a timeout or a cancellation with work
/// possibly enqueued): its communicator is then aborted at teardown.
struct Flight {
    team: Arc<NcclTeam>,
    event: Option<Event>,
    done: bool,
}

impl Drop for Flight {
    fn drop(&mut self) {
        if let Some(ev) = self.event.take() {
            self.team.put_event(ev);
        }
        if !self.done {
            self.team.set_errored();
        }
    }
}

/// The future of one post: the communicator (made on first use, polled),
/// the enqueue, then the event after the work (none when the stream is
/// being captured: the graph runs the work).
fn run(x: Exec, call: &'static str, plan: Result<Plan>) -> AlgFuture {
    Box::pin(async move {
        let plan = plan?;
        let mut flight = Flight { team: x.team.clone(), event: None, done: false };
        let team = &flight.team;
        if !team.comm_ready() {
            x.diag.waiting_for_work(Some(team.message_creating()));
        }
        // Creation, or the health check of a made communicator.
        std::future::poll_fn(|_| team.poll_comm()).await?;
        let event = team.enqueue(x.stream, &|comm, stream| plan(comm, stream))?;
        if let Some(ev) = event {
            x.diag.waiting_for_work(Some(team.message_enqueued(call)));
            let team = flight.team.clone();
            let ev = flight.event.insert(ev);
            // The poll that enqueued (at post) does not query the event it
            // just recorded, which has practically never completed: that
            // query is three driver calls (with its capture-mode exchange).
            let mut just_enqueued = true;
            std::future::poll_fn(
                |_| {
                    if std::mem::take(&mut just_enqueued) { Poll::Pending } else { team.poll_event(ev) }
                },
            )
            .await?;
        }
        x.diag.waiting_for_work(None);
        flight.done = true;
        Ok(())
    })
}

fn addr(m: &MemRef) -> u64 {
    m.addr() as usize as u64
}

fn allreduce(x: Exec, o: Allreduce) -> AlgFuture {
    let plan = reduction(o.reducer.dtype, o.reducer.op).map(|(dt, op)| -> Plan {
        // SAFETY: validation made src and dst CUDA buffers of `count` elements.
        Box::new(move |c, s| unsafe { c.all_reduce(addr(&o.src), addr(&o.dst), o.count, dt, op, s) })
    });
    run(x, "ncclAllReduce", plan)
}

fn reduce(x: Exec, o: Reduce) -> AlgFuture {
    let plan = reduction(o.reducer.dtype, o.reducer.op).map(|(dt, op)| -> Plan {
        // NCCL reads recvbuff only on the root.
        let recv = o.dst.as_ref().map_or(addr(&o.src), addr);
        // SAFETY: validated CUDA buffers of `count` elements (dst on the root).
        Box::new(move |c, s| unsafe { c.reduce(addr(&o.src), recv, o.count, dt, op, o.root, s) })
    });
    run(x, "ncclReduce", plan)
}

fn bcast(x: Exec, o: Bcast) -> AlgFuture {
    // SAFETY: a validated CUDA buffer of `len` bytes (the root's input, everyone's output).
    let plan: Plan =
        Box::new(move |c, s| unsafe { c.broadcast(addr(&o.buf), addr(&o.buf), o.buf.len(), BYTES, o.root, s) });
    run(x, "ncclBroadcast", Ok(plan))
}

fn allgather(x: Exec, o: Allgather) -> AlgFuture {
    let bytes = o.src.len();
    // SAFETY: validated: src of `bytes`, dst of size × `bytes` (UCC's allgather).
    let plan: Plan = Box::new(move |c, s| unsafe { c.all_gather(addr(&o.src), addr(&o.dst.mem), bytes, BYTES, s) });
    run(x, "ncclAllGather", Ok(plan))
}

/// A group of sends and receives: `(buffer, peer)` pairs; empty ones and a
/// rank's copy onto itself (the same address) are left out.
fn grouped(sends: Vec<(MemRef, usize)>, recvs: Vec<(MemRef, usize)>, me: usize) -> Plan {
    Box::new(move |c, s| {
        c.group(|c| {
            for (buf, peer) in &sends {
                let same = *peer == me && recvs.iter().any(|(r, p)| *p == me && r.addr() == buf.addr());
                if !buf.is_empty() && !same {
                    // SAFETY: a validated CUDA buffer (or block of one) of `len` bytes.
                    unsafe { c.send(addr(buf), buf.len(), BYTES, *peer, s) }?;
                }
            }
            for (buf, peer) in &recvs {
                let same = *peer == me && sends.iter().any(|(b, p)| *p == me && b.addr() == buf.addr());
                if !buf.is_empty() && !same {
                    // SAFETY: as above.
                    unsafe { c.recv(addr(buf), buf.len(), BYTES, *peer, s) }?;
                }
            }
            Ok(())
        })
    })
}

fn blocks(b: &Blocked, n: usize) -> Result<Vec<(MemRef, usize)>> {
    (0..n).map(|p| b.block(p).map(|m| (m, p))).collect()
}

fn allgatherv(x: Exec, o: Allgather) -> AlgFuture {
    let (me, n) = (x.team.rank, x.team.size);
    let plan = blocks(&o.dst, n).map(|recvs| grouped((0..n).map(|p| (o.src, p)).collect(), recvs, me));
    run(x, "ncclSend/ncclRecv (allgatherv)", plan)
}

fn gather_grouped(x: Exec, o: Gather, call: &'static str) -> AlgFuture {
    let (me, n) = (x.team.rank, x.team.size);
    let recvs = match &o.dst {
        Some(dst) => blocks(dst, n),
        None => Ok(Vec::new()),
    };
    let plan = recvs.map(|recvs| grouped(vec![(o.src, o.root)], recvs, me));
    run(x, call, plan)
}

fn gather(x: Exec, o: Gather) -> AlgFuture {
    if !x.team.fallbacks().gather_native {
        return gather_grouped(x, o, "ncclSend/ncclRecv (gather)");
    }
    let recv = o.dst.as_ref().map_or(addr(&o.src), |d| addr(&d.mem));
    // SAFETY: validated: src of `len` bytes; on the root, dst of size × that.
    let plan: Plan = Box::new(move |c, s| unsafe { c.gather(addr(&o.src), recv, o.src.len(), BYTES, o.root, s) });
    run(x, "ncclGather", Ok(plan))
}

fn gatherv(x: Exec, o: Gather) -> AlgFuture {
    gather_grouped(x, o, "ncclSend/ncclRecv (gatherv)")
}

fn scatter_grouped(x: Exec, o: Scatter, call: &'static str) -> AlgFuture {
    let (me, n) = (x.team.rank, x.team.size);
    let sends = match &o.src {
        Some(src) => blocks(src, n),
        None => Ok(Vec::new()),
    };
    let plan = sends.map(|sends| grouped(sends, vec![(o.dst, o.root)], me));
    run(x, call, plan)
}

fn scatter(x: Exec, o: Scatter) -> AlgFuture {
    if !x.team.fallbacks().scatter_native {
        return scatter_grouped(x, o, "ncclSend/ncclRecv (scatter)");
    }
    let send = o.src.as_ref().map_or(addr(&o.dst), |src| addr(&src.mem));
    // SAFETY: validated: dst of `len` bytes; on the root, src of size × that.
    let plan: Plan = Box::new(move |c, s| unsafe { c.scatter(send, addr(&o.dst), o.dst.len(), BYTES, o.root, s) });
    run(x, "ncclScatter", Ok(plan))
}

fn scatterv(x: Exec, o: Scatter) -> AlgFuture {
    scatter_grouped(x, o, "ncclSend/ncclRecv (scatterv)")
}

fn alltoall_grouped(x: Exec, o: Alltoall, call: &'static str) -> AlgFuture {
    let (me, n) = (x.team.rank, x.team.size);
    let plan = blocks(&o.src, n).and_then(|sends| Ok(grouped(sends, blocks(&o.dst, n)?, me)));
    run(x, call, plan)
}

fn alltoall(x: Exec, o: Alltoall) -> AlgFuture {
    if !x.team.fallbacks().alltoall_native {
        return alltoall_grouped(x, o, "ncclSend/ncclRecv (alltoall)");
    }
    let bytes = o.src.blocks.bytes(0);
    // SAFETY: validated, out of place: src and dst of size blocks of `bytes`.
    let plan: Plan = Box::new(move |c, s| unsafe { c.all_to_all(addr(&o.src.mem), addr(&o.dst.mem), bytes, BYTES, s) });
    run(x, "ncclAlltoAll", Ok(plan))
}

fn alltoallv(x: Exec, o: Alltoall) -> AlgFuture {
    alltoall_grouped(x, o, "ncclSend/ncclRecv (alltoallv)")
}

fn reduce_scatter(x: Exec, o: ReduceScatter) -> AlgFuture {
    let n = x.team.size;
    let plan = reduction(o.reducer.dtype, o.reducer.op).map(|(dt, op)| -> Plan {
        let per_rank = o.count / n.max(1);
        // SAFETY: validated: src of `count` elements (even blocks, checked in
        // `accepts`), dst of `count / size`; in place dst is src's block.
        Box::new(move |c, s| unsafe { c.reduce_scatter(addr(&o.src.mem), addr(&o.dst), per_rank, dt, op, s) })
    });
    run(x, "ncclReduceScatter", plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrocoll_core::Status;

    #[test]
    fn reductions_nccl_has_and_has_not() {
        assert_eq!(reduction(DataType::Float32, ReduceOp::Sum).unwrap(), (7, 0));
        assert_eq!(reduction(DataType::Bfloat16, ReduceOp::Avg).unwrap(), (9, 4));
        for (dt, op, word) in [
            (DataType::Int16, ReduceOp::Sum, "does not reduce int16"),
            (DataType::Float32, ReduceOp::Band, "has no band"),
            (DataType::Int32, ReduceOp::Avg, "avg of int32"),
        ] {
            let e = reduction(dt, op).unwrap_err();
            assert_eq!(e.status(), Status::NotSupported);
            assert!(e.context().to_lowercase().contains(word), "{e}");
        }
    }

    #[test]
    fn defaults_cover_every_registered_collective_once() {
        let d = defaults();
        assert_eq!(d.len(), 12);
        assert!(d.iter().all(|d| d.range == MsgRange::ALL && d.alg == 0));
        assert!(!registry().colls().contains(CollType::Barrier));
    }
}
