//! What stops a replay: a file that cannot be replayed at all
//! ([`OpenError`]), and where and why reading stopped early ([`Damage`]),
//! with everything before it delivered.

use std::fmt;
use std::io;

/// Why a file cannot be replayed at all.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot read it: {0}")]
    Io(io::Error),
    #[error(
        "not an nfsdtop recording (it starts with \"{}\", not \"NFSDTREC\")",
        .0.escape_ascii()
    )]
    NotARecording(Vec<u8>),
    #[error(
        "recorded by format v{found}; this nfsdtop ({}) reads up to v{supported}: upgrade nfsdtop",
        env!("CARGO_PKG_VERSION")
    )]
    NewerVersion { found: u16, supported: u16 },
    #[error("format version {0} does not exist (corrupt preamble)")]
    BadVersion(u16),
    #[error("corrupt header at byte {offset}: {reason}")]
    Header { offset: u64, reason: String },
}

impl From<io::Error> for OpenError {
    fn from(e: io::Error) -> Self {
        OpenError::Io(e)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DamageKind {
    /// The file ends early: the recorder was killed, the disk filled, or
    /// the file was copied while still being written.
    Truncated,
    /// Bytes that do not check out.
    Corrupt,
    /// The operating system failed to read the file.
    Io,
}

/// Where and why reading stopped early. Everything before `offset` (all of
/// frames `0..frame`) was delivered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    pub kind: DamageKind,
    /// Byte offset in the file of the damage (or of the frame that holds it).
    pub offset: u64,
    /// The frame number (0-based) that could not be read.
    pub frame: u64,
    pub reason: String,
    /// Events delivered before the damage.
    pub events_before: u64,
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            DamageKind::Truncated => "truncated",
            DamageKind::Corrupt => "corrupt",
            DamageKind::Io => "unreadable",
        };
        write!(
            f,
            "{what} at byte {} (frame {}): {}",
            self.offset, self.frame, self.reason
        )
    }
}

impl std::error::Error for Damage {}
