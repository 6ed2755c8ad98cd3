//! Shared-memory segments a job leaves in `/dev/shm` when a rank dies
//! between creating a segment and unlinking it.
//!
//! ferrocoll names its segments `/dev/shm/ferrocoll-<jobid>-…`, where the
//! job id comes from the bootstrap (`Oob::job_id`; for the TCP store, a hash
//! of the token, the store's address and its port); the names and how to
//! recognise them are `ferrocoll_transport::shmem`'s, the layer every
//! segment is made by. The launcher removes them in two ways:
//!
//! - by name: every `/dev/shm/ferrocoll-*` entry whose name contains the
//!   job's id, computed by [`tcp_job_id`] (the TCP store's derivation);
//! - by use: while the ranks run, it looks at what each rank has open or
//!   mapped (`/proc/<pid>/fd` and `/proc/<pid>/maps`) every
//!   [`ShmWatch::PERIOD`] and removes, at the end, the `/dev/shm/ferrocoll-*`
//!   paths it saw that still exist. This catches segments named by a job id
//!   that is not the TCP store's (another bootstrap), unless a segment is
//!   created and abandoned between two looks.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ferrocoll_transport::shmem::{SHM_DIR, is_segment_file, segment_path};

/// The `/dev/shm/ferrocoll-*` paths seen in use by a job's ranks.
#[derive(Debug, Default)]
pub struct ShmWatch {
    seen: BTreeSet<PathBuf>,
    last: Option<Instant>,
    /// Job ids whose segments are removed by name at the end.
    pub job_ids: Vec<String>,
}

/// The job id the TCP bootstrap derives for a job with this token, store
/// address and store port (see `TcpOob::job_id_for`).
pub fn tcp_job_id(token: &str, master_addr: &str, master_port: u16) -> String {
    ferrocoll::TcpOob::job_id_for(token, master_addr, master_port)
}

impl ShmWatch {
    /// How often the ranks' open files are looked at.
    pub const PERIOD: Duration = Duration::from_millis(200);

    /// Look at `pids`' open and mapped files, if [`ShmWatch::PERIOD`] has passed.
    pub fn poll(&mut self, pids: impl Iterator<Item = libc::pid_t>) {
        if self.last.is_some_and(|t| t.elapsed() < Self::PERIOD) {
            return;
        }
        self.last = Some(Instant::now());
        for pid in pids {
            self.look_at(pid);
        }
    }

    /// Record the segments `pid` has open or mapped.
    pub fn look_at(&mut self, pid: libc::pid_t) {
        let proc_dir = PathBuf::from(format!("/proc/{pid}"));
        if let Ok(fds) = std::fs::read_dir(proc_dir.join("fd")) {
            for fd in fds.flatten() {
                if let Some(p) = std::fs::read_link(fd.path()).ok().and_then(|l| l.to_str().and_then(segment_path)) {
                    self.seen.insert(p);
                }
            }
        }
        if let Ok(maps) = std::fs::read_to_string(proc_dir.join("maps")) {
            for line in maps.lines() {
                // address perms offset dev inode path
                if let Some(p) = line.split_whitespace().nth(5).and_then(|_| line.find('/')).map(|i| &line[i..]) {
                    if let Some(p) = segment_path(p) {
                        self.seen.insert(p);
                    }
                }
            }
        }
    }

    /// The segments seen so far.
    pub fn seen(&self) -> impl Iterator<Item = &Path> {
        self.seen.iter().map(PathBuf::as_path)
    }

    /// Remove every recorded segment that still exists, and every
    /// `ferrocoll-*` name containing one of the job ids. Returns the removed paths.
    pub fn cleanup(&self) -> Vec<PathBuf> {
        let mut targets: BTreeSet<PathBuf> = self.seen.clone();
        if !self.job_ids.is_empty() {
            if let Ok(entries) = std::fs::read_dir(SHM_DIR) {
                for e in entries.flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    if is_segment_file(&name) && self.job_ids.iter().any(|id| !id.is_empty() && name.contains(id)) {
                        targets.insert(e.path());
                    }
                }
            }
        }
        targets.into_iter().filter(|p| std::fs::remove_file(p).is_ok()).collect()
    }
}

#[cfg(test)]
mod tests {
    use ferrocoll_transport::shmem::segment_name;

    use super::*;

    #[test]
    fn finds_and_removes_a_mapped_segment_of_this_process() {
        // Named as the shm transport names an endpoint's segment.
        let path = format!("{SHM_DIR}{}", segment_name(&format!("benchtest{}", std::process::id()), "0"));
        if std::fs::write(&path, [0u8; 4096]).is_err() {
            eprintln!("skipped: /dev/shm is not writable here");
            return;
        }
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
        let mut w = ShmWatch::default();
        w.look_at(std::process::id() as libc::pid_t);
        assert!(w.seen().any(|p| p == Path::new(&path)), "{:?}", w.seen().collect::<Vec<_>>());
        drop(file);
        assert_eq!(w.cleanup(), vec![PathBuf::from(&path)]);
        assert!(!Path::new(&path).exists());
    }

    #[test]
    fn job_ids_match_the_tcp_bootstrap() {
        use ferrocoll::{Oob, TcpOob, TcpOobParams};
        let params = TcpOobParams {
            rank: 0,
            size: 1,
            master_addr: "127.0.0.1".into(),
            master_port: 29511,
            token: "0123456789abcdef".into(),
            connect_timeout: std::time::Duration::from_secs(1),
        };
        let oob = TcpOob::new(params).unwrap();
        assert_eq!(oob.job_id(), Some(tcp_job_id("0123456789abcdef", "127.0.0.1", 29511)));
    }

    #[test]
    fn removes_by_job_id() {
        let job = format!("jobid{}", std::process::id());
        // Named as the shm TL names a team's segment.
        let path = format!("{SHM_DIR}{}", segment_name(&job, "s1f"));
        if std::fs::write(&path, b"x").is_err() {
            eprintln!("skipped: /dev/shm is not writable here");
            return;
        }
        let w = ShmWatch { job_ids: vec![job], ..ShmWatch::default() };
        assert_eq!(w.cleanup(), vec![PathBuf::from(&path)]);
    }
}
