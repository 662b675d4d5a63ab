//! Requests per RPC procedure, counted in the kernel: the one table of
//! the procedures nfsdtop names ([`PROGRAMS`]), the dense index the raw
//! svc_stats_latency program folds by, and the per-transport rows it
//! folds into ([`ProcRow`], the memory-mapped `PROC_ROWS` array).
//!
//! A request's procedure is `svc_rqst.rq_prog`, `rq_vers`, `rq_proc`;
//! the program looks its (program, version) up in `PROC_PROGRAMS` (one
//! [`ProcProgram`] per row of [`PROGRAMS`], written by the agent) and gets
//! the procedure's index: the base of its version plus `rq_proc`. A
//! procedure the table does not hold gets [`OTHER`]. The names are the
//! kernel's own `pc_name` strings (what ftrace prints as `proc=`).
//!
//! Rows: a known transport's requests are folded into row
//! [`row`]`(its xprt_table entry)` only while that row is claimed for it:
//! `owner` its pointer and `gen` its `EXEC_TOTALS` claim's. Only the agent
//! claims rows (it writes zeroed counts, then `gen`, then `owner`), and
//! only rows whose last owner can no longer be folded into (freed, or its
//! `EXEC_TOTALS` entry claimed again), after reading their last counts:
//! one writer of ownership, so two CPUs can never split a row. A request
//! that cannot be folded (its row not yet claimed or claimed by another
//! transport, or its procedure [`OTHER`]) goes in a record, with its
//! procedure in [`crate::rawrec::PROC`].

/// One RPC program version whose procedures nfsdtop names, by number
/// (`rq_proc`) from 0.
pub struct Program {
    pub prog: u32,
    /// The versions that share these procedures.
    pub versions: &'static [u32],
    pub names: &'static [&'static str],
    /// The RPC service that serves it (what the agent names a server port
    /// that is not nfsd's by, from the procedures its requests name).
    pub service: &'static str,
}

const NLM_PROCS: &[&str] = &[
    "NULL",
    "TEST",
    "LOCK",
    "CANCEL",
    "UNLOCK",
    "GRANTED",
    "TEST_MSG",
    "LOCK_MSG",
    "CANCEL_MSG",
    "UNLOCK_MSG",
    "GRANTED_MSG",
    "TEST_RES",
    "LOCK_RES",
    "CANCEL_RES",
    "UNLOCK_RES",
    "GRANTED_RES",
    "SM_NOTIFY",
    "UNUSED",
    "UNUSED",
    "UNUSED",
    "SHARE",
    "UNSHARE",
    "NM_LOCK",
    "FREE_ALL",
];

/// The procedures nfsdtop names, in index order: each program's first
/// procedure's index is the sum of the earlier programs' name counts.
pub const PROGRAMS: &[Program] = &[
    Program {
        prog: 100003,
        versions: &[3],
        names: &[
            "NULL",
            "GETATTR",
            "SETATTR",
            "LOOKUP",
            "ACCESS",
            "READLINK",
            "READ",
            "WRITE",
            "CREATE",
            "MKDIR",
            "SYMLINK",
            "MKNOD",
            "REMOVE",
            "RMDIR",
            "RENAME",
            "LINK",
            "READDIR",
            "READDIRPLUS",
            "FSSTAT",
            "FSINFO",
            "PATHCONF",
            "COMMIT",
        ],
        service: "nfsd",
    },
    Program {
        prog: 100003,
        versions: &[4],
        names: &["NULL", "COMPOUND"],
        service: "nfsd",
    },
    Program {
        prog: 100227,
        versions: &[3],
        names: &["NULL", "GETACL", "SETACL"],
        service: "nfsd",
    },
    Program {
        prog: 100021,
        versions: &[1, 3, 4],
        names: NLM_PROCS,
        service: "lockd",
    },
    // The NFS client's callback service (NFS4_CALLBACK: version 1 for
    // NFSv4.0, 4 for the 4.1+ backchannel), on a host that is also an NFS
    // client: its names are nfsd's NFSv4 ones, its ports never nfsd's.
    Program {
        prog: 0x4000_0000,
        versions: &[1, 4],
        names: &["NULL", "COMPOUND"],
        service: "nfs_callback",
    },
];

/// Procedure slots per row (the indices of [`PROGRAMS`] fit).
pub const ROW_SLOTS: usize = 64;
/// The index of a procedure [`PROGRAMS`] does not name.
pub const OTHER: u32 = 0xff;
/// Entries of `PROC_PROGRAMS`: one per (program, version).
pub const PROGRAM_ENTRIES: u32 = 8;
/// Rows of `PROC_ROWS`.
pub const ROWS: u32 = 1 << 13;

/// The row of the transport at `xprt_table` entry `entry`.
#[inline(always)]
pub const fn row(entry: u32) -> u32 {
    entry & (ROWS - 1)
}

/// One (program, version) of [`PROGRAMS`] as the BPF program looks it up.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcProgram {
    /// 0: an unused entry.
    pub prog: u32,
    pub vers: u32,
    /// The index of procedure 0, and how many procedures there are.
    pub base: u32,
    pub count: u32,
}

/// `PROC_PROGRAMS` as the agent writes it, from [`PROGRAMS`].
pub const fn program_entries() -> [ProcProgram; PROGRAM_ENTRIES as usize] {
    let mut out = [ProcProgram {
        prog: 0,
        vers: 0,
        base: 0,
        count: 0,
    }; PROGRAM_ENTRIES as usize];
    let (mut p, mut n, mut base) = (0, 0, 0);
    while p < PROGRAMS.len() {
        let prog = &PROGRAMS[p];
        let mut v = 0;
        while v < prog.versions.len() {
            out[n] = ProcProgram {
                prog: prog.prog,
                vers: prog.versions[v],
                base,
                count: prog.names.len() as u32,
            };
            n += 1;
            v += 1;
        }
        base += prog.names.len() as u32;
        p += 1;
    }
    assert!(base as usize <= ROW_SLOTS, "PROGRAMS outgrew a row");
    out
}

/// The procedure names of `prog` version `vers`, by number (empty where
/// the table has none).
pub fn names_of(prog: u32, vers: u32) -> &'static [&'static str] {
    PROGRAMS
        .iter()
        .find(|p| p.prog == prog && p.versions.contains(&vers))
        .map_or(&[], |p| p.names)
}

/// The name of the procedure at `index` (None: [`OTHER`] or beyond).
pub fn name(index: u32) -> Option<&'static str> {
    let mut base = 0;
    for p in PROGRAMS {
        let i = index.checked_sub(base)? as usize;
        if let Some(n) = p.names.get(i) {
            return Some(n);
        }
        base += p.names.len() as u32;
    }
    None
}

/// One procedure's running totals in a row.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcSlot {
    pub count: u64,
    /// `execute`, µs.
    pub us: u64,
}

/// One transport's requests per procedure (see the module's text).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcRow {
    /// The `struct svc_xprt` pointer the row is claimed for; 0 = free.
    pub owner: u64,
    /// That transport's `EXEC_TOTALS` `gen` when the row was claimed.
    pub gen: u64,
    pub slots: [ProcSlot; ROW_SLOTS],
}

/// [`ProcRow`] in 8-byte words, and where its slots start.
pub const ROW_WORDS: usize = 2 + 2 * ROW_SLOTS;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_follow_the_table_and_name_back() {
        let e = program_entries();
        assert_eq!(
            (e[0].prog, e[0].vers, e[0].base, e[0].count),
            (100003, 3, 0, 22)
        );
        assert_eq!((e[1].vers, e[1].base), (4, 22));
        assert_eq!((e[2].prog, e[2].base), (100227, 24));
        // NLM versions 1, 3 and 4 share one set of names.
        assert_eq!((e[3].vers, e[4].vers, e[5].vers), (1, 3, 4));
        assert!(e[3..6].iter().all(|p| p.base == 27 && p.count == 24));
        assert_eq!((e[6].prog, e[6].vers, e[6].base), (0x4000_0000, 1, 51));
        assert_eq!((e[7].vers, e[7].base, e[7].count), (4, 51, 2));
        assert_eq!(name(6), Some("READ"));
        assert_eq!(name(23), Some("COMPOUND"));
        assert_eq!(name(25), Some("GETACL"));
        assert_eq!(name(27 + 23), Some("FREE_ALL"));
        assert_eq!(name(52), Some("COMPOUND"));
        assert_eq!(name(53), None);
        assert_eq!(name(OTHER), None);
        assert_eq!(
            (names_of(100003, 3).len(), names_of(100003, 4)),
            (22, &["NULL", "COMPOUND"][..])
        );
        assert_eq!(names_of(100021, 3), NLM_PROCS);
        assert!(names_of(100003, 2).is_empty());
        assert_eq!(core::mem::size_of::<ProcRow>(), ROW_WORDS * 8);
    }
}
