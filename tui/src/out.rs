//! Every message nfsdtop writes goes through here, so that no output
//! error can panic (`eprintln!` panics when stderr is closed) or kill the
//! program with a message about itself. stdout closed under batch output
//! (e.g. `nfsdtop -b | head -4`) is an ordinary way to stop reading, as it
//! is for other tools: [`closed_pipe`] recognises it so `main` ends quietly
//! with status 0.

use std::fmt::Display;
use std::io::{self, Write};

/// `nfsdtop: MSG` on stderr; a closed or broken stderr loses the message
/// and nothing else.
pub fn warn(msg: impl Display) {
    let line = format!("nfsdtop: {msg}\n");
    let _ = io::stderr().lock().write_all(line.as_bytes());
}

/// Write `bytes` to stdout and flush.
pub fn stdout(bytes: &[u8]) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(bytes)?;
    out.flush()
}

/// Does `e` (anywhere in its chain) say that stdout's reader went away?
pub fn closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_pipe_is_recognised_through_context() {
        let e = anyhow::Error::from(io::Error::from(io::ErrorKind::BrokenPipe)).context("writing");
        assert!(closed_pipe(&e));
        let e = anyhow::Error::from(io::Error::from(io::ErrorKind::PermissionDenied));
        assert!(!closed_pipe(&e));
    }
}
