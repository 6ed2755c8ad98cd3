//! The shared-memory layer against the real `/dev/shm`: exclusive creation
//! and replacement, the owner and mode checks of open, checked mapping
//! bounds, and that no path leaves a segment behind.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use ferrocoll_core::{Error, Status};

use super::*;

/// A name of this test process (`/ferrocoll-shmemtest<pid>-<what>`).
fn name(what: &str) -> String {
    segment_name(&format!("shmemtest{}", std::process::id()), what)
}

fn path(name: &str) -> String {
    format!("{SHM_DIR}{name}")
}

#[test]
fn create_map_open_unlink() {
    let n = name("rt");
    let page = page_size();
    let (file, owned) = ShmFile::create(&n, 2 * page, IfExists::Replace).unwrap();
    assert_eq!(owned.as_str(), n);
    assert_eq!(file.size().unwrap(), 2 * page);
    let mode = std::fs::metadata(path(&n)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & 0o077, 0, "created with mode {mode:o}");
    let map = file.map(0, 2 * page).unwrap();
    map.u64_at(8).unwrap().store(0xfe44_0c01, Ordering::Relaxed);
    // Another opener sees the same bytes, through a mapping of the second page too.
    let other = ShmFile::open(&n).unwrap().expect("the segment exists");
    let mut head = [0u8; 16];
    other.read_exact_at(0, &mut head).unwrap();
    assert_eq!(u64::from_le_bytes(head[8..].try_into().unwrap()), 0xfe44_0c01);
    let second = other.map(page, page).unwrap();
    second.u64_at(0).unwrap().store(7, Ordering::Relaxed);
    assert_eq!(map.u64_at(page as usize).unwrap().load(Ordering::Relaxed), 7);
    // Unlinking removes the name, not the memory; twice is fine.
    owned.unlink().unwrap();
    owned.unlink().unwrap();
    assert!(!Path::new(&path(&n)).exists());
    assert!(ShmFile::open(&n).unwrap().is_none());
    assert_eq!(second.u64_at(0).unwrap().load(Ordering::Relaxed), 7);
}

#[test]
fn an_existing_name_is_replaced_or_refused_as_asked() {
    let n = name("excl");
    let (_first, owned) = ShmFile::create(&n, 4096, IfExists::Replace).unwrap();
    let refuse =
        |f: &ShmFile| -> ferrocoll_core::Result<()> { Err(Error::no_resource(format!("{} is busy", f.name()))) };
    let e = ShmFile::create(&n, 4096, IfExists::ReplaceIf(&refuse)).err().expect("refused");
    assert_eq!(e.context(), format!("{n} is busy"));
    assert!(Path::new(&path(&n)).exists(), "a refused creation keeps the existing segment");
    let (second, owned2) = ShmFile::create(&n, 8192, IfExists::ReplaceIf(&|_| Ok(()))).unwrap();
    assert_eq!(second.size().unwrap(), 8192, "replaced by a new segment");
    let (third, owned3) = ShmFile::create(&n, 4096, IfExists::Replace).unwrap();
    assert_eq!(third.size().unwrap(), 4096);
    // Dropping an owned name unlinks it, even one already replaced (the
    // unlink of a name that is gone is only logged).
    drop((owned, owned2));
    assert!(!Path::new(&path(&n)).exists());
    drop(owned3);
}

#[test]
fn nothing_is_left_behind_on_errors() {
    let n = name("left");
    // More than /dev/shm can hold: refused before anything exists.
    let e = ShmFile::create(&n, i64::MAX as u64, IfExists::Replace).err().expect("too large");
    assert_eq!(e.status(), Status::NotSupported, "{e}");
    assert!(e.context().contains(&n) && e.context().contains(&(i64::MAX as u64).to_string()), "{e}");
    assert!(ShmFile::create(&n, 0, IfExists::Replace).is_err());
    assert!(ShmFile::create(&n, u64::MAX, IfExists::Replace).is_err());
    assert!(!Path::new(&path(&n)).exists());
    // A caller that fails after creating drops the name with its error.
    let failed_setup = || -> ferrocoll_core::Result<()> {
        let (file, _owned) = ShmFile::create(&n, 4096, IfExists::Replace)?;
        file.map(0, 8192)?; // past the end: refused
        Ok(())
    };
    let e = failed_setup().unwrap_err();
    assert!(e.context().contains("8192 bytes at offset 0") && e.context().contains("4096"), "{e}");
    assert!(!Path::new(&path(&n)).exists());
}

#[test]
fn a_segment_open_to_others_is_refused() {
    let n = name("planted");
    let p = path(&n);
    if std::fs::write(&p, [0u8; 4096]).is_err() {
        eprintln!("skipped: {SHM_DIR} is not writable here");
        return;
    }
    struct Remove<'a>(&'a str);
    impl Drop for Remove<'_> {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(self.0);
        }
    }
    let _rm = Remove(&p);
    // As another user's pre-created file would be: readable and writable by all.
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
    let e = ShmFile::open(&n).err().expect("refused");
    let msg = e.context();
    assert!(msg.contains(&n) && msg.contains("0666") && msg.contains("uid"), "{msg}");
    // Replacing it asks open first, so the check never sees it.
    let never = |_: &ShmFile| -> ferrocoll_core::Result<()> { panic!("checked a segment that open refuses") };
    let e = ShmFile::create(&n, 4096, IfExists::ReplaceIf(&never)).err().expect("refused");
    assert!(e.context().contains("0666"), "{e}");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
    assert!(ShmFile::open(&n).is_err(), "group bits are refused too");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(ShmFile::open(&n).unwrap().is_some(), "a private segment of this uid opens");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // As root the test can plant a segment of another user (nobody) with a private mode.
        let cp = std::ffi::CString::new(p.clone()).unwrap();
        // SAFETY: cp is NUL-terminated; chown only reads it.
        assert_eq!(unsafe { libc::chown(cp.as_ptr(), 65534, 65534) }, 0);
        let e = ShmFile::open(&n).err().expect("another user's segment is refused");
        assert!(e.context().contains("uid 65534"), "{e}");
    } else {
        eprintln!("not checked: a segment of another uid (needs root to plant one)");
    }
}

#[test]
fn mapping_bounds_are_checked() {
    let n = name("bounds");
    let page = page_size();
    let (file, _owned) = ShmFile::create(&n, page, IfExists::Replace).unwrap();
    let e = file.map(u64::MAX - 10, 100).err().expect("overflow");
    assert!(e.context().contains(&(u64::MAX - 10).to_string()) && e.context().contains("overflows"), "{e}");
    assert!(file.map(0, page + 1).is_err(), "past the end");
    assert!(file.map(0, 0).is_err(), "empty");
    assert!(file.map(8, 8).is_err(), "not page-aligned");
    let map = file.map(0, page).unwrap();
    assert_eq!(map.len(), page as usize);
    assert!(map.u64_at(page as usize - 8).is_ok());
    assert!(map.u64_at(page as usize).is_err(), "one past the end");
    assert!(map.u64_at(4).is_err(), "misaligned");
    assert!(map.view::<AtomicU64>(usize::MAX - 3).is_err(), "offset + size overflows");
    assert!(map.range(usize::MAX, 2).is_err());
    assert!(map.range(0, page as usize).is_ok() && map.range(1, page as usize).is_err());
}

#[test]
fn segments_of_dead_creators_are_swept_and_others_kept() {
    if std::fs::metadata(SHM_DIR).is_err() {
        eprintln!("skipped: no {SHM_DIR}");
        return;
    }
    let me = Owner::me();
    if me.ns.is_none() {
        eprintln!("skipped: this process cannot read its pid namespace, so it judges no segment");
        return;
    }
    let Ok(mut child) = std::process::Command::new("true").spawn() else {
        eprintln!("skipped: cannot spawn `true`");
        return;
    };
    let dead = Owner { pid: child.id(), start: None, ns: me.ns };
    child.wait().unwrap();
    let make = |owner: &Owner, what: &str| {
        let n = name(&format!("{what}-{}", owner.tag()));
        std::fs::write(path(&n), b"left behind").unwrap();
        n
    };
    let stale = make(&dead, "stale");
    let live = make(&me, "live");
    let elsewhere = make(&Owner { ns: me.ns.map(|n| n ^ 1), ..dead }, "elsewhere");
    let removed = sweep_stale();
    assert!(removed.contains(&stale[1..].to_string()), "{removed:?}");
    assert!(!Path::new(&path(&stale)).exists(), "the dead creator's segment is gone");
    assert!(Path::new(&path(&live)).exists(), "a living creator's segment stays");
    assert!(Path::new(&path(&elsewhere)).exists(), "a segment of another pid namespace is not judged");
    for n in [live, elsewhere] {
        std::fs::remove_file(path(&n)).unwrap();
    }
}
