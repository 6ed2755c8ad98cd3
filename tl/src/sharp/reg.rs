//! Memory registrations (`sharp_coll_reg_mr`): per execution, or from a
//! small cache keyed by address range.
//!
//! A cached registration serves any buffer inside its range; entries are
//! reference-counted while collectives use them and only unused ones are
//! evicted (least recently used first) when the cache is over its size.
//! With a size of 0 every registration is made for one execution and
//! released when it ends.

use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use ferrocoll_core::{Error, MemRef, Result};

use super::team::Lib;

struct Entry {
    addr: usize,
    len: usize,
    mr: *mut c_void,
    users: usize,
    last_use: u64,
}

/// The cache of one SHARP context.
pub(crate) struct RegCache {
    cap: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    entries: Vec<Entry>,
    clock: u64,
}

// SAFETY: the registration handles are opaque tokens of the library; they
// are only passed back to it, under the team's library lock.
unsafe impl Send for RegCache {}
// SAFETY: as for Send; the table is behind a mutex.
unsafe impl Sync for RegCache {}

/// A buffer's registration for one execution; released (or returned to the
/// cache) on drop.
pub(crate) struct Reg {
    lib: Arc<Lib>,
    mr: *mut c_void,
    /// The cache entry's address and length, when cached.
    cached: Option<(usize, usize)>,
}

// SAFETY: see RegCache.
unsafe impl Send for Reg {}
// SAFETY: see RegCache.
unsafe impl Sync for Reg {}

impl Reg {
    /// The handle to pass in a data descriptor.
    pub(crate) fn mr(&self) -> *mut c_void {
        self.mr
    }
}

impl Drop for Reg {
    fn drop(&mut self) {
        match self.cached {
            Some((addr, len)) => self.lib.cache.release(addr, len),
            None => {
                if let Err(e) = self.lib.dereg(self.mr) {
                    ferrocoll_core::log_warn!("sharp: {e}");
                }
            }
        }
    }
}

impl RegCache {
    pub(crate) fn new(cap: usize) -> RegCache {
        RegCache { cap, state: Mutex::new(State::default()) }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `mem` registered with `lib`: from the cache when it covers it.
    pub(crate) fn get(&self, lib: &Arc<Lib>, mem: MemRef) -> Result<Reg> {
        let (addr, len) = (mem.addr() as usize, mem.len());
        let end = addr
            .checked_add(len)
            .ok_or_else(|| Error::invalid_param(format!("buffer at {addr:#x} of {len} bytes wraps around")))?;
        if self.cap == 0 {
            let mr = lib.reg(mem)?;
            return Ok(Reg { lib: lib.clone(), mr, cached: None });
        }
        let mut st = self.state();
        st.clock += 1;
        let clock = st.clock;
        if let Some(e) = st.entries.iter_mut().find(|e| e.addr <= addr && end <= e.addr + e.len) {
            e.users += 1;
            e.last_use = clock;
            return Ok(Reg { lib: lib.clone(), mr: e.mr, cached: Some((e.addr, e.len)) });
        }
        let mr = lib.reg(mem)?;
        st.entries.push(Entry { addr, len, mr, users: 1, last_use: clock });
        while st.entries.len() > self.cap {
            let Some(victim) = st
                .entries
                .iter()
                .enumerate()
                .filter(|(_, e)| e.users == 0)
                .min_by_key(|(_, e)| e.last_use)
                .map(|(i, _)| i)
            else {
                break; // every entry is in use: over the size until some are released
            };
            let e = st.entries.swap_remove(victim);
            if let Err(err) = lib.dereg(e.mr) {
                ferrocoll_core::log_warn!("sharp: evicting a registration: {err}");
            }
        }
        Ok(Reg { lib: lib.clone(), mr, cached: Some((addr, len)) })
    }

    fn release(&self, addr: usize, len: usize) {
        let mut st = self.state();
        if let Some(e) = st.entries.iter_mut().find(|e| e.addr == addr && e.len == len && e.users > 0) {
            e.users -= 1;
        }
    }

    /// Every registration, for deregistration at teardown.
    pub(crate) fn drain(&self) -> Vec<*mut c_void> {
        self.state().entries.drain(..).map(|e| e.mr).collect()
    }
}
