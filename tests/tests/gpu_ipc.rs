//! CUDA IPC between two processes on device 0 (`ferrocoll_cuda::ipc`, the
//! foundation of a TL/CUDA that is not built yet).
//!
//! The test process exports device memory and starts a copy of this binary
//! as the importer (the helper test [`ipc_importer`], in role
//! `FERROCOLL_TEST_ROLE=ipc-importer`; run without that role it does
//! nothing). They talk over the importer's stdin and stdout, one line per
//! message: the exporter sends what `export` described (its 96 bytes in
//! hex) and what to expect and write; the importer opens it through an
//! `IpcCache`, checks the bytes with a copy to the host, writes a new
//! pattern, and answers with its cache's counts. The exporter then reads
//! the importer's write in its own memory.
//!
//! Where there is no GPU every test runs on the fake CUDA driver
//! (`tests/fake_cuda/ipc.c`: device memory is a memfd the importer maps
//! through `/proc/<pid>/fd`), in a child process that starts the importer
//! in turn; under `REQUIRE_GPU=1` a missing GPU fails instead. On a GPU
//! they passed on an H200 (2026-11-30; `scripts/gpu-check.sh build`
//! collects them).

mod gpu_support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use ferrocoll::Status;
use ferrocoll_cuda::ipc::{self, Exported, IpcCache, IpcHandle, OpenedMem};
use ferrocoll_cuda::{Stream, memory};
use ferrocoll_tests::fake_cuda;
use ferrocoll_tests::gpu::{on_fake_driver, skip_unless_gpu};
use ferrocoll_tests::procs::ROLE;
use gpu_support::{DevBuf, Kind, bind};

/// The role of the importer process.
const IMPORTER: &str = "ipc-importer";

/// How long one answer of the importer may take.
const ANSWER: Duration = Duration::from_secs(60);

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

/// Copy `n` bytes from device address `src` to the host, with the crate's copy on a stream of its own.
fn read_device(src: u64, n: usize) -> Vec<u8> {
    let mut out = vec![0u8; n];
    let stream = Stream::create(ferrocoll_cuda::Context::current().unwrap().expect("a bound context")).unwrap();
    // SAFETY: src is n live bytes of device memory (the caller's mapping);
    // out is ours and outlives the copy, which the stream finishes before
    // synchronize returns.
    unsafe { memory::copy_async(out.as_mut_ptr() as u64, src, n, &stream) }.unwrap();
    stream.synchronize().unwrap();
    out
}

/// Copy `bytes` from the host to device address `dst`, as [`read_device`].
fn write_device(dst: u64, bytes: &[u8]) {
    let stream = Stream::create(ferrocoll_cuda::Context::current().unwrap().expect("a bound context")).unwrap();
    // SAFETY: dst is bytes.len() live bytes of device memory; bytes outlives
    // the copy, finished before synchronize returns.
    unsafe { memory::copy_async(dst, bytes.as_ptr() as u64, bytes.len(), &stream) }.unwrap();
    stream.synchronize().unwrap();
}

/// The importer process, as seen by the exporter.
struct Importer {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    report: Option<std::path::PathBuf>,
}

impl Importer {
    fn start() -> Importer {
        let exe = std::env::current_exe().expect("the test binary");
        let mut cmd = Command::new(exe);
        cmd.args(["--exact", "ipc_importer", "--nocapture", "--test-threads=1"])
            .env(ROLE, IMPORTER)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        // On the fake, the importer writes its own report (not over the exporter's).
        let report = on_fake_driver()
            .then(|| std::env::temp_dir().join(format!("ferrocoll-ipc-importer-{}.report", std::process::id())));
        if let Some(r) = &report {
            cmd.env("FAKE_CUDA_REPORT", r);
        }
        let mut child = cmd.spawn().expect("start the importer");
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // The harness may print "test ipc_importer ... " before the first answer.
                if let Some(at) = line.find("IPC: ") {
                    if tx.send(line[at + 5..].to_string()).is_err() {
                        break;
                    }
                }
            }
        });
        Importer { child, stdin, lines, report }
    }

    /// Send one command and wait for its answer.
    fn ask(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").and_then(|()| self.stdin.flush()).expect("write to the importer");
        match self.lines.recv_timeout(ANSWER) {
            Ok(answer) => answer,
            Err(e) => {
                let _ = self.child.kill();
                panic!("the importer did not answer {command:?} ({e})");
            }
        }
    }

    /// Ask the importer to open `e` (rank 0's), check that its `len`
    /// exported bytes are all `expect`, and write `write` over them.
    fn open(&mut self, e: &Exported, len: usize, expect: u8, write: u8) -> String {
        self.ask(&format!("open {} {len} {expect} {write}", hex(&e.to_bytes())))
    }

    /// Close everything, let the importer exit, and check that it passed
    /// (and, on the fake, opened `opened` mappings and closed every one).
    fn finish(self, opened: u32) {
        self.finish_with(&[&format!("ipc.opened={opened}"), "live.ipc_mappings=0"]);
    }

    /// As [`Importer::finish`], with the lines its fake-driver report must hold.
    fn finish_with(mut self, report_lines: &[&str]) {
        assert_eq!(self.ask("quit"), "bye");
        drop(self.stdin);
        let status = self.child.wait().expect("wait for the importer");
        assert!(status.success(), "the importer failed: {status}");
        if let Some(path) = self.report {
            let text = std::fs::read_to_string(&path).expect("the importer's fake-driver report");
            let _ = std::fs::remove_file(&path);
            for want in report_lines {
                assert!(text.lines().any(|l| l == *want), "{want} in the importer's report:\n{text}");
            }
        }
    }
}

/// The importer's side (a helper: it does nothing unless the exporter
/// started it). Commands, one per line on stdin: `open <exported hex> <len>
/// <expect> <write>`, `quit`; answers on stdout after `IPC: `.
#[test]
fn ipc_importer() {
    if std::env::var(ROLE).as_deref() != Ok(IMPORTER) {
        return;
    }
    ferrocoll_cuda::driver().expect("the importer finds the driver its exporter used");
    bind();
    let mut cache: IpcCache = IpcCache::new();
    let answer = |msg: String| println!("IPC: {msg}");
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("read a command");
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["open", exported, len, expect, write] => {
                let e = Exported::from_bytes(&unhex(exported)).expect("a well-formed export");
                let (len, expect, write): (u64, u8, u8) =
                    (len.parse().unwrap(), expect.parse().unwrap(), write.parse().unwrap());
                let m = match cache.get_or_open(0, &e, OpenedMem::open) {
                    Ok(m) => m,
                    Err(err) => {
                        answer(format!("error {err}"));
                        continue;
                    }
                };
                let at = m.exported_range(len).expect("the exported range lies in the mapping");
                // A range past the mapping is refused, never handed out.
                let past = m.range(m.size() - 1, 2).unwrap_err();
                assert_eq!(past.status(), Status::InvalidParam, "{past}");
                assert!(m.exported_range(m.size() - e.offset + 1).is_err());
                let seen = read_device(at, len as usize);
                if let Some(i) = seen.iter().position(|&b| b != expect) {
                    answer(format!("mismatch at {i}: {} instead of {expect}", seen[i]));
                    continue;
                }
                write_device(at, &vec![write; len as usize]);
                let s = cache.stats();
                answer(format!("ok opens={} hits={} stale={} len={}", s.opens, s.hits, s.stale, cache.len()));
            }
            ["quit"] => {
                cache.clear();
                answer("bye".into());
                return;
            }
            _ => panic!("unknown command {line:?}"),
        }
    }
    panic!("the exporter closed the pipe without quit");
}

#[test]
fn a_peer_process_reads_and_writes_exported_device_memory() {
    if skip_unless_gpu("a_peer_process_reads_and_writes_exported_device_memory") {
        return;
    }
    bind();
    const LEN: usize = 1 << 16;
    const OFFSET: usize = 4096;
    let buf = DevBuf::from_host(&[0x5a; LEN], Kind::Device);
    let at = buf.addr() as u64 + OFFSET as u64;
    let e = ipc::export(at).unwrap();
    assert_eq!((e.base, e.offset), (buf.addr() as u64, OFFSET as u64), "{e:?}");
    assert!(e.size >= LEN as u64, "{e:?}");
    assert_eq!(ipc::buffer_id(at).unwrap(), e.buffer_id, "the buffer id of any address in the allocation");
    let n = LEN - OFFSET;
    let mut importer = Importer::start();
    assert_eq!(importer.open(&e, n, 0x5a, 0xa5), "ok opens=1 hits=0 stale=0 len=1");
    // Reused buffers are opened once.
    assert_eq!(importer.open(&e, n, 0xa5, 0x3c), "ok opens=1 hits=1 stale=0 len=1");
    importer.finish(1);
    let mut want = vec![0x5a; OFFSET];
    want.extend(vec![0x3c; n]);
    assert!(buf.read() == want, "the exporter sees the importer's writes, and only in the range it exported");
}

#[test]
fn opening_in_the_exporting_process_and_exporting_host_memory_are_errors() {
    if skip_unless_gpu("opening_in_the_exporting_process_and_exporting_host_memory_are_errors") {
        return;
    }
    bind();
    let buf = DevBuf::from_host(&[1; 4096], Kind::Device);
    let e = ipc::export(buf.addr() as u64).unwrap();
    let err = OpenedMem::open(&e).unwrap_err();
    // CUDA answers CUDA_ERROR_INVALID_CONTEXT here ("invalid device context").
    assert_eq!(err.status(), Status::InvalidParam, "{err}");
    let base = format!("{:#x}", e.base);
    assert!(err.context().contains("cuIpcOpenMemHandle") && err.context().contains(&base), "{err}");
    // Host memory the driver does not know is no allocation to export.
    let host = [0u8; 64];
    let err = ipc::export(host.as_ptr() as u64).unwrap_err();
    let addr = format!("{:#x}", host.as_ptr() as u64);
    assert!(err.context().contains("cuMemGetAddressRange") && err.context().contains(&addr), "{err}");
    assert_eq!(buf.read(), vec![1; 4096], "the failed open touched nothing");
}

#[test]
fn a_reallocated_buffer_gets_a_new_id_and_the_cache_never_serves_the_stale_mapping() {
    if skip_unless_gpu("a_reallocated_buffer_gets_a_new_id_and_the_cache_never_serves_the_stale_mapping") {
        return;
    }
    bind();
    const LEN: usize = 1 << 20;
    let first = DevBuf::from_host(&vec![0x11; LEN], Kind::Device);
    let e1 = ipc::export(first.addr() as u64).unwrap();
    let mut importer = Importer::start();
    assert_eq!(importer.open(&e1, LEN, 0x11, 0x12), "ok opens=1 hits=0 stale=0 len=1");
    drop(first);
    // The same size again: a GPU's allocator usually hands the same address out.
    let second = DevBuf::from_host(&vec![0x22; LEN], Kind::Device);
    let e2 = ipc::export(second.addr() as u64).unwrap();
    assert_ne!(e2.buffer_id, e1.buffer_id, "a new allocation has a new buffer id ({e1:?}, {e2:?})");
    let answer = importer.open(&e2, LEN, 0x22, 0x23);
    let overlaps = e2.base < e1.base + e1.size && e1.base < e2.base + e2.size;
    if overlaps {
        // On an H200 it came back 4 KiB lower: overlapping, not equal.
        assert_eq!(answer, "ok opens=2 hits=0 stale=1 len=1", "the stale mapping was closed and replaced");
    } else {
        eprintln!("the second allocation is elsewhere ({:#x}, then {:#x})", e1.base, e2.base);
        // Kept, unless the driver refused the open as already mapped (the
        // memory of the first): then the peer's mappings were closed first.
        let kept = answer == "ok opens=2 hits=0 stale=0 len=2";
        assert!(kept || answer == "ok opens=2 hits=0 stale=1 len=1", "{answer}");
    }
    importer.finish(2);
    assert!(second.read().iter().all(|&b| b == 0x23), "the importer wrote the new buffer");
}

/// On the fake driver only (a GPU's driver has the entry points): a driver
/// without CUDA IPC still passes the probe and serves everything else, and
/// each IPC call is an error naming the missing entry point and the address.
#[test]
fn a_driver_without_the_ipc_entry_points_is_an_error_not_a_panic() {
    const TEST: &str = "a_driver_without_the_ipc_entry_points_is_an_error_not_a_panic";
    if fake_cuda::is_child() {
        ferrocoll_cuda::driver().expect("the probe does not need the IPC entry points");
        bind();
        let buf = DevBuf::from_host(&[7; 256], Kind::Device);
        let err = ipc::export(buf.addr() as u64).unwrap_err();
        assert_eq!(err.status(), Status::NotSupported, "{err}");
        let addr = format!("{:#x}", buf.addr() as u64);
        assert!(err.context().contains("cuIpcOpenMemHandle_v2") && err.context().contains(&addr), "{err}");
        let mut peer = [0u8; Exported::LEN];
        peer[IpcHandle::LEN + 8] = 1; // size 1, offset 0
        let err = OpenedMem::open(&Exported::from_bytes(&peer).unwrap()).unwrap_err();
        assert_eq!(err.status(), Status::NotSupported, "{err}");
        assert!(err.context().contains("cuIpcOpenMemHandle_v2"), "{err}");
        return;
    }
    let lib = match fake_cuda::fake_without(&["cuIpcOpenMemHandle_v2"]) {
        Ok(lib) => lib,
        Err(why) => return fake_cuda::skip(TEST, &why),
    };
    let run = fake_cuda::run(TEST, &lib, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert!(run.report.teardown_problems().is_empty(), "{:?}", run.report.teardown_problems());
    assert_eq!(run.report.calls("cuMemAlloc_v2"), 1, "the rest of the driver serves");
    assert_eq!(run.report.calls("cuIpcGetMemHandle") + run.report.calls("cuMemGetAddressRange_v2"), 0);
}

/// On the fake driver only (what a GPU cannot be asked for): a handle whose
/// allocation was freed is refused by the opener with an error naming the
/// call, and a close the driver refuses is logged when the mapping is
/// dropped, the importer going on and exiting normally.
#[test]
fn a_freed_allocation_and_a_failing_close_are_errors_not_panics() {
    const TEST: &str = "a_freed_allocation_and_a_failing_close_are_errors_not_panics";
    if fake_cuda::is_child() {
        ferrocoll_cuda::driver().expect("the fake driver");
        bind();
        let gone = DevBuf::from_host(&[3; 4096], Kind::Device);
        let e_gone = ipc::export(gone.addr() as u64).unwrap();
        drop(gone);
        let live = DevBuf::from_host(&[4; 4096], Kind::Device);
        let e_live = ipc::export(live.addr() as u64).unwrap();
        let mut importer = Importer::start();
        let answer = importer.open(&e_gone, 4096, 3, 3);
        assert!(
            answer.starts_with("error ")
                && answer.contains("cuIpcOpenMemHandle")
                && answer.contains("CUDA_ERROR_INVALID_HANDLE"),
            "{answer}"
        );
        assert_eq!(importer.open(&e_live, 4096, 4, 5), "ok opens=1 hits=0 stale=0 len=1");
        // FAKE_CUDA_FAIL fails the importer's first close (quit drops the cache).
        importer.finish_with(&["ipc.opened=1", "errors.cuIpcCloseMemHandle=1", "live.ipc_mappings=1"]);
        assert_eq!(live.read(), vec![5; 4096]);
        return;
    }
    let lib = match fake_cuda::fake() {
        Ok(fake) => fake.dir().to_path_buf(),
        Err(why) => return fake_cuda::skip(TEST, &why),
    };
    let run =
        fake_cuda::run(TEST, &lib, &[("FAKE_CUDA_FAIL", "cuIpcCloseMemHandle:1")]).unwrap_or_else(|e| panic!("{e}"));
    assert!(run.report.teardown_problems().is_empty(), "{:?}", run.report.teardown_problems());
    assert_eq!(run.report.get("ipc.exported"), 2);
}
