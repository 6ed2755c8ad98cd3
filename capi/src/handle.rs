//! Handles: what a `ucc_*_h` points to.
//!
//! Every handle is an `Arc` whose pointer C holds (`Arc::into_raw`); the
//! object starts with, or has at a fixed offset, a magic word saying which
//! kind of handle it is and whether it is alive. Each call checks the word
//! before it uses the object and holds its own reference for the call, so:
//! - NULL, a handle of another kind, or a pointer to memory that is not a
//!   handle (and happens to be readable) is `InvalidParam`, not undefined
//!   behaviour;
//! - destroying twice is `InvalidParam`: a destroyed handle's memory is kept
//!   (with its payload released) in a quarantine of the last
//!   [`QUARANTINE`] destroyed handles, so its word still reads "dead" (a
//!   finalized request handle that its team keeps for the same call,
//!   `spares.rs`, reads "dead" until an init of that call hands it out
//!   again: from then on it is the new request's);
//! - a call racing with a destroy of the same handle on another thread
//!   finishes on live memory.
//!
//! What cannot be caught cheaply: a pointer into unmapped memory, and a
//! handle destroyed longer than [`QUARANTINE`] destructions ago.

use std::any::Any;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ferrocoll::{Error, Result};

/// Destroyed handles whose memory is kept so that a second destroy is detected.
pub(crate) const QUARANTINE: usize = 4096;

/// The magic word of a destroyed handle (of any kind).
pub(crate) const DEAD: u64 = 0xdead_dead_dead_dead;

/// A kind of handle.
///
/// # Safety
/// `MAGIC_OFFSET` is the offset of an `AtomicU64` field of `Self` that
/// [`Handle::magic`] returns; it holds `LIVE` from [`publish`] until
/// [`retire`], then [`DEAD`].
pub(crate) unsafe trait Handle: Send + Sync + Sized + 'static {
    /// The C type, for messages (`ucc_team_h`).
    const WHAT: &'static str;
    /// The word of a live handle of this kind (distinct per kind).
    const LIVE: u64;
    /// Where the word is.
    const MAGIC_OFFSET: usize;
    /// The word.
    fn magic(&self) -> &AtomicU64;
}

/// Hand `h` to C: the pointer carries one reference, released by [`retire`].
pub(crate) fn publish<H: Handle>(h: H) -> *mut H {
    publish_arc(Arc::new(h))
}

/// Hand a shared `h` to C (the pointer carries one more reference).
pub(crate) fn publish_arc<H: Handle>(h: Arc<H>) -> *mut H {
    // Release: a thread that reads the word as live sees the object as built.
    h.magic().store(H::LIVE, Ordering::Release);
    Arc::into_raw(h).cast_mut()
}

/// Read the magic word of what `p` points to.
///
/// # Safety
/// `p` is non-null and aligned, and `MAGIC_OFFSET` bytes past it is
/// readable memory (true of every handle this library made, and of its
/// quarantined ones).
unsafe fn word<H: Handle>(p: *const H) -> u64 {
    // SAFETY: the caller promises readable, aligned memory at the offset;
    // AtomicU64 has the alignment of u64, and H (which has such a field) is
    // at least as aligned, which `p.is_aligned()` checked.
    unsafe { (*p.cast::<u8>().add(H::MAGIC_OFFSET).cast::<AtomicU64>()).load(Ordering::Acquire) }
}

fn check<H: Handle>(p: *const H, arg: &str) -> Result<()> {
    if p.is_null() {
        return Err(Error::invalid_param(format!("{arg} ({}) is NULL", H::WHAT)));
    }
    if !p.is_aligned() {
        return Err(Error::invalid_param(format!("{arg} = {p:p} is not a {} (misaligned)", H::WHAT)));
    }
    // SAFETY: non-null and aligned; that it is readable is the C caller's
    // promise of passing a handle (see the module docs for what is caught).
    match unsafe { word(p) } {
        w if w == H::LIVE => Ok(()),
        DEAD => Err(Error::invalid_param(format!("{arg} = {p:p} was already destroyed or finalized ({})", H::WHAT))),
        _ => Err(Error::invalid_param(format!("{arg} = {p:p} is not a {} made by this library", H::WHAT))),
    }
}

/// A reference to the live handle `p` for the duration of a call.
///
/// # Safety
/// `p` is NULL or points to readable memory (see the module docs).
pub(crate) unsafe fn borrow<H: Handle>(p: *const H, arg: &str) -> Result<Arc<H>> {
    check(p, arg)?;
    // SAFETY: the word says `p` came from `publish` and is live or
    // quarantined, so the Arc allocation is still there; the count taken
    // here is given back when the returned Arc drops.
    unsafe {
        Arc::increment_strong_count(p);
        Ok(Arc::from_raw(p))
    }
}

/// Mark `p` destroyed and take C's reference back (the memory goes to the
/// quarantine; the caller releases the payload). A second call fails.
///
/// # Safety
/// As [`borrow`].
pub(crate) unsafe fn retire<H: Handle>(p: *const H, arg: &str) -> Result<Arc<H>> {
    // SAFETY: forwarded.
    let arc = unsafe { take_back(p, arg) }?;
    quarantine(arc.clone());
    Ok(arc)
}

/// [`retire`] for a caller that needs nothing more of the handle: C's
/// reference goes to the quarantine as it is (no count taken and dropped).
///
/// # Safety
/// As [`borrow`].
pub(crate) unsafe fn retire_quietly<H: Handle>(p: *const H, arg: &str) -> Result<()> {
    // SAFETY: forwarded.
    quarantine(unsafe { take_back(p, arg) }?);
    Ok(())
}

/// Mark `p` destroyed and take back the reference `publish` handed to C,
/// for a caller that keeps the handle (then [`quarantine`]s it, or
/// publishes it again).
///
/// # Safety
/// As [`borrow`].
pub(crate) unsafe fn take_back<H: Handle>(p: *const H, arg: &str) -> Result<Arc<H>> {
    check(p, arg)?;
    // SAFETY: checked live just above, and the memory stays allocated (see `borrow`).
    let word = unsafe { &*p.cast::<u8>().add(H::MAGIC_OFFSET).cast::<AtomicU64>() };
    // AcqRel: exactly one of racing destroys wins, and it sees everything
    // written to the object before it was published.
    if word.compare_exchange(H::LIVE, DEAD, Ordering::AcqRel, Ordering::Acquire).is_err() {
        return Err(Error::invalid_param(format!("{arg} = {p:p} was already destroyed or finalized ({})", H::WHAT)));
    }
    // SAFETY: the winner of the exchange owns the reference `publish` handed to C.
    Ok(unsafe { Arc::from_raw(p) })
}

/// Keep `h` alive for a while (see the module docs).
pub(crate) fn quarantine(h: Arc<dyn Any + Send + Sync>) {
    static KEPT: Mutex<VecDeque<Arc<dyn Any + Send + Sync>>> = Mutex::new(VecDeque::new());
    let oldest = {
        let mut kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
        kept.push_back(h);
        if kept.len() > QUARANTINE { kept.pop_front() } else { None }
    };
    // Dropped outside the lock: a handle's drop may log or free a lot.
    drop(oldest);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C)]
    struct Thing {
        magic: AtomicU64,
        value: u32,
    }

    // SAFETY: `magic` is the AtomicU64 at offset 0.
    unsafe impl Handle for Thing {
        const WHAT: &'static str = "thing_h";
        const LIVE: u64 = 0x7417_6000_0000_0001;
        const MAGIC_OFFSET: usize = 0;
        fn magic(&self) -> &AtomicU64 {
            &self.magic
        }
    }

    #[repr(C)]
    struct Other {
        magic: AtomicU64,
    }

    // SAFETY: as above.
    unsafe impl Handle for Other {
        const WHAT: &'static str = "other_h";
        const LIVE: u64 = 0x7417_6000_0000_0002;
        const MAGIC_OFFSET: usize = 0;
        fn magic(&self) -> &AtomicU64 {
            &self.magic
        }
    }

    #[test]
    fn live_dead_foreign_and_null() {
        let p = publish(Thing { magic: AtomicU64::new(0), value: 7 });
        // SAFETY: p is a live handle.
        assert_eq!(unsafe { borrow(p, "t") }.unwrap().value, 7);
        // SAFETY: p is a live handle; the test destroys it once, then checks the second.
        assert!(unsafe { retire(p, "t") }.is_ok());
        // SAFETY: p is quarantined, so still readable.
        let e = unsafe { retire(p, "t") }.err().expect("a second destroy fails");
        assert!(e.context().contains("already destroyed"), "{e}");
        // SAFETY: as above.
        assert!(unsafe { borrow(p, "t") }.is_err());
        let o = publish(Other { magic: AtomicU64::new(0) });
        // SAFETY: o is a live Other, read here through the wrong kind, which
        // only reads its magic word (at the same offset).
        let e = unsafe { borrow(o.cast::<Thing>(), "team") }.err().expect("a foreign kind fails");
        assert!(e.context().contains("is not a thing_h"), "{e}");
        // SAFETY: NULL is caught before any read.
        let e = unsafe { borrow(std::ptr::null::<Thing>(), "team") }.err().expect("NULL fails");
        assert_eq!(e.context(), "team (thing_h) is NULL");
        // SAFETY: o is live.
        assert!(unsafe { retire(o, "o") }.is_ok());
    }

    /// A handle retired without a reference back is as dead as one retired
    /// with it: its memory kept, a second destroy refused, never freed early.
    #[test]
    fn retired_quietly_is_dead_and_kept() {
        let p = publish(Thing { magic: AtomicU64::new(0), value: 9 });
        // SAFETY: p is a live handle.
        let held = unsafe { borrow(p, "t") }.unwrap();
        // SAFETY: p is a live handle, destroyed once here.
        assert!(unsafe { retire_quietly(p, "t") }.is_ok());
        assert_eq!(held.value, 9, "a call that borrowed it still reads live memory");
        // SAFETY: p is quarantined, so still readable.
        let e = unsafe { retire_quietly(p, "t") }.expect_err("a second destroy fails");
        assert!(e.context().contains("already destroyed"), "{e}");
        // C's reference went to the quarantine, the borrow's is ours: two.
        assert_eq!(Arc::strong_count(&held), 2);
    }
}
