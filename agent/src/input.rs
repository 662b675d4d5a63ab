//! Reading the small files a user hands us (class maps, demo scenarios,
//! nfsdtopd's config, TLS certificates and keys, netrc files) with a size
//! limit and a deadline: `/dev/zero` or any endless file given by mistake
//! is refused after the limit, instead of being read until memory runs
//! out, and a FIFO nobody writes to is refused after [`PIPE_DEADLINE`],
//! instead of blocking the reader (and, in nfsdtopd, every later SIGHUP
//! reload) for good. Pipes that do deliver (`--class-map <(gen-map)`)
//! still work.

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};

/// The most any of these files may hold. A class map of a million
/// prefixes is about 30 MB; the other files are a few kilobytes.
pub const MAX_TEXT_FILE: u64 = 64 << 20;

/// The longest a pipe, FIFO or terminal given as a file may take to
/// deliver all of it.
pub const PIPE_DEADLINE: Duration = Duration::from_secs(30);

/// The text of `path`, at most `limit` bytes. `what` names the file in
/// errors ("class map", "scenario file", "config file"); `flag` is the
/// option that named it, so the message can say what to do.
pub fn read_text(path: &Path, what: &str, flag: &str, limit: u64) -> anyhow::Result<String> {
    let bytes = read_bytes(path, what, flag, limit)?;
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{what} {} is not UTF-8 text (byte {} is not): pass a text file to {flag}",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

/// The bytes of `path`, at most `limit` of them, as [`read_text`] reads
/// them.
pub fn read_bytes(path: &Path, what: &str, flag: &str, limit: u64) -> anyhow::Result<Vec<u8>> {
    read_bytes_within(path, what, flag, limit, PIPE_DEADLINE)
}

fn read_bytes_within(
    path: &Path,
    what: &str,
    flag: &str,
    limit: u64,
    deadline: Duration,
) -> anyhow::Result<Vec<u8>> {
    let shown = path.display();
    let cannot = |e: std::io::Error| {
        anyhow::anyhow!("cannot read {what} {shown}: {e} (pass a readable file to {flag})")
    };
    let meta = std::fs::metadata(path).map_err(cannot)?;
    if meta.is_dir() {
        anyhow::bail!("{what} {shown} is a directory: pass a file to {flag}");
    }
    let regular = meta.is_file();
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    if !regular {
        // Opening a FIFO blocks until a writer opens it; without
        // blocking, the wait is ours to bound (below).
        opts.custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
    }
    let mut f = opts.open(path).map_err(cannot)?;
    let mut bytes = Vec::new();
    let cap = limit.saturating_add(1);
    if regular {
        (&mut f).take(cap).read_to_end(&mut bytes).map_err(cannot)?;
    } else if !read_until_end(&mut f, &mut bytes, cap, deadline).map_err(cannot)? {
        anyhow::bail!(
            "{what} {shown} did not deliver all of itself within {} s (a pipe or FIFO that \
             nobody writes to, or that is never closed?): pass a regular file to {flag}, \
             or have the writer write the whole file and close it",
            deadline.as_secs_f64()
        );
    }
    if bytes.len() as u64 > limit {
        anyhow::bail!(
            "{what} {shown} is larger than {} MiB (or endless, like a device): \
             pass a regular file of at most {} MiB to {flag}",
            limit >> 20,
            limit >> 20
        );
    }
    Ok(bytes)
}

/// Reads `f` (opened non-blocking) into `out` until its end or `cap`
/// bytes: true; false if `deadline` passed first. Reads only after poll
/// says there is something to read: a FIFO that no writer has opened yet
/// reads as its end, but does not poll as readable.
fn read_until_end(
    f: &mut File,
    out: &mut Vec<u8>,
    cap: u64,
    deadline: Duration,
) -> std::io::Result<bool> {
    let end = Instant::now() + deadline;
    let mut buf = vec![0u8; 64 << 10];
    while (out.len() as u64) < cap {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(false);
        }
        let timeout = Timespec::try_from(left).unwrap_or(Timespec {
            tv_sec: 1,
            tv_nsec: 0,
        });
        let mut fds = [PollFd::new(&*f, PollFlags::IN)];
        match poll(&mut fds, Some(&timeout)) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
        match f.read(&mut buf) {
            Ok(0) => return Ok(true),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::mpsc;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("nfsdtop-input-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn mkfifo(p: &Path) {
        let st = std::process::Command::new("mkfifo")
            .arg(p)
            .status()
            .unwrap();
        assert!(st.success(), "mkfifo {}", p.display());
    }

    /// Runs `f` on a thread, failing the test (not hanging it) if it
    /// takes more than 20 s.
    fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || tx.send(f()));
        rx.recv_timeout(Duration::from_secs(20))
            .expect("the read came back")
    }

    #[test]
    fn an_endless_file_is_refused_at_the_limit() {
        let e = read_text(Path::new("/dev/zero"), "class map", "--class-map", 1 << 20)
            .unwrap_err()
            .to_string();
        assert!(e.contains("/dev/zero is larger than 1 MiB"), "{e}");
        assert!(e.contains("--class-map"), "{e}");
    }

    #[test]
    fn a_small_file_is_read_and_a_missing_one_named() {
        let dir = temp_dir("small");
        let p = dir.join("m");
        std::fs::write(&p, "10.0.0.0/8 a\n").unwrap();
        assert_eq!(read_text(&p, "x", "--x", 13).unwrap(), "10.0.0.0/8 a\n");
        assert!(read_text(&p, "x", "--x", 12).is_err());
        let e = read_text(&dir.join("nope"), "scenario file", "--demo", 10).unwrap_err();
        assert!(e.to_string().contains("cannot read scenario file"), "{e}");
        let e = read_text(&dir, "class map", "--class-map", 10).unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A FIFO nobody opens for writing: refused after the deadline,
    /// naming the file and the flag, instead of blocking for good.
    #[test]
    fn a_fifo_nobody_writes_to_is_refused_after_the_deadline() {
        let dir = temp_dir("fifo-idle");
        let p = dir.join("f");
        mkfifo(&p);
        let q = p.clone();
        let e = bounded(move || {
            read_bytes_within(
                &q,
                "class map",
                "--class-map",
                1 << 20,
                Duration::from_millis(300),
            )
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains(&format!("class map {}", p.display())), "{e}");
        assert!(e.contains("did not deliver all of itself"), "{e}");
        assert!(e.contains("--class-map"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A FIFO whose writer comes after the reader, writes in two parts
    /// and closes: all of it is read.
    #[test]
    fn a_fifo_that_delivers_is_read_whole() {
        let dir = temp_dir("fifo-write");
        let p = dir.join("f");
        mkfifo(&p);
        let q = p.clone();
        let (opened_tx, opened_rx) = mpsc::channel();
        let writer = std::thread::spawn(move || {
            use std::io::Write;
            // Blocks until the reader has opened the FIFO.
            let mut w = std::fs::OpenOptions::new().write(true).open(&q).unwrap();
            opened_tx.send(()).unwrap();
            w.write_all(b"10.0.0.0/8 a\n").unwrap();
            w.flush().unwrap();
            w.write_all(b"10.1.0.0/16 b\n").unwrap();
        });
        let r = p.clone();
        let text = bounded(move || read_text(&r, "class map", "--class-map", 1 << 20)).unwrap();
        assert_eq!(text, "10.0.0.0/8 a\n10.1.0.0/16 b\n");
        opened_rx.recv().unwrap();
        writer.join().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
