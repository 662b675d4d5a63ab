//! nfsd's threads as they come and go (Linux 7.0+): idle threads above the
//! pool's minimum exit, and a new one starts when all are busy. nfsd's
//! `nfsd_dynthread_start` and `nfsd_dynthread_kill` tracepoints fire,
//! under `nfsd_mutex`, just before a thread is started and as a thread
//! decides to exit, each with the pool's `nrthreads` before the change and
//! its `nrthrmin` and `nrthrmax`. A classic program on each copies the
//! record the kernel built into one [`Record`] (so the fields are found at
//! the offsets of the running kernel's format file) and counts the hit,
//! so the counts are exact even where the ring loses a record.
//!
//! These are not [`crate::Slot`]s: they are nfsd's, not sunrpc's
//! transport events, and exist only on kernels with dynamic threads.
//!
//! [`Record`]: crate::Record

use crate::NfsdTracepoint;

/// The tracepoints, indexed by the record's [`START`] or [`EXIT`].
pub const TRACEPOINTS: [NfsdTracepoint; 2] = [
    NfsdTracepoint {
        event: "nfsd_dynthread_start",
        program: "nfsd_dynthread_start",
    },
    NfsdTracepoint {
        event: "nfsd_dynthread_kill",
        program: "nfsd_dynthread_kill",
    },
];

/// The record's slot byte: which tracepoint wrote it.
pub const START: u8 = 0;
pub const EXIT: u8 = 1;

/// The record (`raw_kind` [`RECORD_KIND`]): the tracepoint record's bytes
/// from 8 (after the common fields) to [`COPIED_END`], at their own
/// offsets.
pub const RECORD_KIND: u8 = 4;
/// The class's record ends at byte 28 (five `unsigned int` after the
/// common fields); the copy reaches a little further, as the sunrpc
/// programs' do (the rest of the kernel's per-CPU trace buffer follows).
pub const COPIED_END: usize = 40;

/// Words of the `THREAD_COUNTS` array (not per CPU: the hits are few and
/// serialised by `nfsd_mutex`; the adds are atomic all the same).
pub mod counter {
    /// Hits of `nfsd_dynthread_start` and `nfsd_dynthread_kill`.
    pub const STARTS: u32 = 0;
    pub const EXITS: u32 = 1;
    /// Records the ring could not take, or whose bytes could not be read.
    pub const LOST: u32 = 2;
    /// Entries of the array: one 64-byte line.
    pub const ENTRIES: u32 = 8;
}
