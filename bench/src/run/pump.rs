//! Copying a rank's stdout or stderr to ours, a line at a time, with the
//! rank's `[r] ` prefix.
//!
//! Each line is written with one `write_all` under the stream's lock, so
//! lines of different ranks may interleave but never mix. A last line
//! without a newline gets one; an endless line is cut every
//! [`MAX_LINE`] bytes (each piece prefixed).

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::mpsc;
use std::thread::JoinHandle;

/// Longest piece written as one line.
pub const MAX_LINE: usize = 1 << 20;

/// Which of our streams a pump writes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sink {
    /// Our stdout.
    Stdout,
    /// Our stderr.
    Stderr,
}

fn write_line(sink: Sink, line: &[u8]) -> std::io::Result<()> {
    match sink {
        Sink::Stdout => {
            let mut out = std::io::stdout().lock();
            out.write_all(line)?;
            out.flush()
        }
        Sink::Stderr => std::io::stderr().lock().write_all(line),
    }
}

/// Copy `input` to `sink` line by line, each line preceded by `prefix`
/// (empty: no prefix). Returns when `input` reaches end of file.
pub fn pump(input: impl Read, prefix: &str, sink: Sink) {
    pump_with(input, prefix, &mut |line| write_line(sink, line));
}

/// [`pump`] with the writer given: `write` gets each whole line. A write
/// error (our stdout closed) makes it drain `input` without writing, so the
/// rank never blocks on a full pipe.
pub fn pump_with(input: impl Read, prefix: &str, write: &mut dyn FnMut(&[u8]) -> std::io::Result<()>) {
    let mut reader = BufReader::new(input);
    let mut line = Vec::with_capacity(256);
    let mut writing = true;
    loop {
        line.clear();
        line.extend_from_slice(prefix.as_bytes());
        let start = line.len();
        let got = match (&mut reader).take(MAX_LINE as u64).read_until(b'\n', &mut line) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => 0,
        };
        if got == 0 {
            return;
        }
        if line.last() != Some(&b'\n') {
            line.push(b'\n');
        }
        if writing && line.len() > start && write(&line).is_err() {
            writing = false;
        }
    }
}

/// A pump running on its own thread; `done` receives one message when it ends.
pub fn spawn_pump<R: Read + Send + 'static>(
    input: R,
    prefix: String,
    sink: Sink,
    done: mpsc::Sender<()>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(format!("pump {}", prefix.trim())).spawn(move || {
        pump(input, &prefix, sink);
        // The receiver may be gone when the launcher stops waiting; nothing to do then.
        let _ = done.send(());
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], prefix: &str) -> Vec<u8> {
        let mut out = Vec::new();
        pump_with(input, prefix, &mut |l| {
            out.extend_from_slice(l);
            Ok(())
        });
        out
    }

    #[test]
    fn prefixes_every_line_and_ends_the_last() {
        assert_eq!(lines(b"", "[0] "), b"");
        assert_eq!(lines(b"a\n\nb", "[1] "), b"[1] a\n[1] \n[1] b\n");
        assert_eq!(lines(b"x\n", ""), b"x\n");
    }

    #[test]
    fn cuts_endless_lines() {
        let long = vec![b'y'; MAX_LINE + 10];
        let out = lines(&long, "[2] ");
        assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 2);
        assert!(out.starts_with(b"[2] yyy"));
    }

    #[test]
    fn a_closed_sink_still_drains() {
        let mut calls = 0;
        pump_with(&b"a\nb\nc\n"[..], "", &mut |_| {
            calls += 1;
            Err(std::io::Error::other("closed"))
        });
        assert_eq!(calls, 1);
    }
}
