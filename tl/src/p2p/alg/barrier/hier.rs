//! Hierarchical barrier: empty messages up the hierarchy (`pattern::hier`:
//! node, switch group, top), each leader waiting for all its members, then
//! back down from the top leader. A rank leaves only after the top leader
//! heard, through the leaders, from every rank; only leaders' messages
//! cross nodes and switches (one each way per node and per group). Linear
//! within a level (units are small). Chosen by name (`barrier:@hier`).

use ferrocoll_core::engine::try_join_all;
use ferrocoll_core::{MemRef, MemType, Result};

use crate::p2p::Comm;
use crate::p2p::pattern::hier::levels;

const TAG_UP: u32 = 0;
const TAG_DOWN: u32 = 1;

pub(crate) async fn run(comm: Comm) -> Result<()> {
    let none = MemRef::empty(MemType::Host);
    let levels = levels(comm.layout(), comm.rank(), None)?;
    let active: Vec<_> = levels.iter().enumerate().filter(|(_, l)| !l.trivial()).collect();
    // Up: the levels this rank leads, then the first it does not (it waits there).
    let mut led = Vec::new();
    for &(i, level) in &active {
        let c = comm.phase(i as u32);
        if !level.leads() {
            c.send(level.leader_rank(), TAG_UP, none).await?;
            c.recv(level.leader_rank(), TAG_DOWN, none).await?;
            break;
        }
        let others = level.members.iter().enumerate().filter(|(m, _)| *m != level.me);
        try_join_all(others.map(|(_, &r)| c.recv(r, TAG_UP, none))).await?;
        led.push((i, level));
    }
    // Down, from the highest level this rank leads.
    for &(i, level) in led.iter().rev() {
        let c = comm.phase(i as u32);
        let others = level.members.iter().enumerate().filter(|(m, _)| *m != level.me);
        let sends = others.map(|(_, &r)| c.isend(r, TAG_DOWN, none)).collect::<Result<Vec<_>>>()?;
        try_join_all(sends).await?;
    }
    Ok(())
}
