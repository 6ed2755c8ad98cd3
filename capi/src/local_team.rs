//! Teams over a context made without an OOB (UCC's context-local
//! contexts): UCC exchanges the members' addresses when such a team is
//! created, over the team's OOB. ferrocoll connects a context's endpoints
//! when the context is made, so the team gets a context of its own, made
//! over the team's OOB as `ucc_context_create` would make one over a
//! context OOB (the same job name agreement, address exchange, connection
//! barrier), and its collectives run there; the user's context progresses
//! it ([`ContextHandle::progress_children`]).
//!
//! Making a context blocks on its OOB exchanges, and team creation must
//! not: `ucc_team_create_post` is called by each member in turn from one
//! thread in some programs (UCC's gtest makes all its "processes" so). So
//! the context is made on a thread of its own, whose OOB ([`Forwarded`])
//! hands each allgather to the caller's thread, where
//! `ucc_team_create_test` posts and tests it with the caller's callbacks
//! ([`Wiring::step`]) — which UCC lets ferrocoll call only from there.

use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};
use std::sync::{Arc, OnceLock};
use std::task::Poll;
use std::thread::JoinHandle;

use ferrocoll::core::oob::{Oob, OobRequest, allgather_blocking};
use ferrocoll::{Context, ContextParams, Error, Lib, Result};

use crate::oob::{CollOob, RawOob, job_name, job_part};

/// Where the caller's thread sends the result of an allgather.
type Reply = Sender<Result<Vec<Vec<u8>>>>;

/// An allgather the context's thread asks the caller's thread to run.
struct Ask {
    data: Vec<u8>,
    reply: Reply,
}

/// The OOB of the context being made: the team's, reached through the
/// caller's thread.
struct Forwarded {
    rank: usize,
    size: usize,
    job: OnceLock<String>,
    asks: Sender<Ask>,
}

impl Oob for Forwarded {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn allgather(&self, data: &[u8]) -> Result<Box<dyn OobRequest>> {
        let (reply, answer) = channel();
        self.asks
            .send(Ask { data: data.to_vec(), reply })
            .map_err(|_| Error::invalid_param("the team's creation was abandoned (its handle destroyed)"))?;
        Ok(Box::new(Answer(answer)))
    }

    fn job_id(&self) -> Option<String> {
        self.job.get().cloned()
    }
}

/// A forwarded allgather, answered by the caller's thread.
struct Answer(Receiver<Result<Vec<Vec<u8>>>>);

impl OobRequest for Answer {
    fn test(&mut self) -> Poll<Result<Vec<Vec<u8>>>> {
        match self.0.try_recv() {
            Ok(r) => Poll::Ready(r),
            Err(TryRecvError::Empty) => Poll::Pending,
            Err(TryRecvError::Disconnected) => {
                Poll::Ready(Err(Error::invalid_param("the team's creation was abandoned (its handle destroyed)")))
            }
        }
    }
}

/// A team's own context in the making.
pub(crate) struct Wiring {
    oob: CollOob,
    asks: Receiver<Ask>,
    /// The allgather of the context's thread now running on the team's OOB.
    current: Option<(Box<dyn OobRequest>, Reply)>,
    thread: Option<JoinHandle<Result<Context>>>,
}

impl Wiring {
    /// Start making a context over `raw`, the team's OOB, with the
    /// library and parameters of the user's context (its OOB aside).
    pub(crate) fn start(lib: Lib, mut params: ContextParams, raw: RawOob) -> Result<Wiring> {
        let (asks_tx, asks) = channel();
        let timeout = lib
            .config()
            .merged(&params.config)
            .positive_duration_or("OOB_TIMEOUT", Some(crate::context::OOB_TIMEOUT))?;
        let oob = Arc::new(Forwarded { rank: raw.rank(), size: raw.size(), job: OnceLock::new(), asks: asks_tx });
        let thread = std::thread::Builder::new()
            .name("ucc-team-context".into())
            .spawn(move || {
                let all = allgather_blocking(oob.as_ref(), job_part(oob.rank).as_bytes(), timeout)
                    .map_err(|e| e.prefixed("agreeing on a job name over the team OOB"))?;
                let _ = oob.job.set(job_name(&all));
                params.oob = Some(oob);
                Context::new(&lib, params)
            })
            .map_err(|e| Error::no_resource(format!("a thread to make the team's context: {e}")))?;
        Ok(Wiring { oob: CollOob::unnamed(raw), asks, current: None, thread: Some(thread) })
    }

    /// Run the allgathers the context's thread asks for, on this (the
    /// caller's) thread; the context once made.
    pub(crate) fn step(&mut self) -> Poll<Result<Context>> {
        loop {
            if let Some((req, reply)) = &mut self.current {
                let Poll::Ready(r) = req.test() else { return Poll::Pending };
                // The thread may have given up (its timeout): nothing to tell then.
                let _ = reply.send(r);
                self.current = None;
            }
            match self.asks.try_recv() {
                Ok(ask) => match self.oob.allgather(&ask.data) {
                    Ok(req) => self.current = Some((req, ask.reply)),
                    Err(e) => {
                        let _ = ask.reply.send(Err(e));
                    }
                },
                Err(_) if self.thread.as_ref().is_some_and(JoinHandle::is_finished) => {
                    let made = self.thread.take().map(JoinHandle::join);
                    return Poll::Ready(match made {
                        Some(Ok(r)) => r,
                        Some(Err(_)) => Err(Error::internal("the thread making the team's context panicked")),
                        None => Err(Error::internal("the team's context was already taken")),
                    });
                }
                Err(_) => return Poll::Pending,
            }
        }
    }
}
