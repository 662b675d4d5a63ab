//! NFSv4 operations per client (`--nfs4-ops`): the two nfsd tracepoints
//! they are counted on, the operations' names by number, where the
//! programs find what they read, and the record they send.
//!
//! A COMPOUND is one RPC; its operations are what users call NFSv4 ops.
//! nfsd's `nfsd_compound` tracepoint fires once per COMPOUND with the
//! request (`struct svc_rqst *`), then `nfsd_compound_status` once per
//! operation processed, on the same thread, with the operation's 1-based
//! index (`resp_opcnt`) and its status — and no request. So the
//! `nfsd_compound` program remembers, per thread, the request and where
//! its decoded operations are (`rq_argp` → `nfsd4_compoundargs.ops`), and
//! the `nfsd_compound_status` program reads the operation's number there
//! (`ops[resp_opcnt - 1].opnum`: the number nfsd counts in
//! `/proc/net/rpc/nfsd`'s `proc4ops`) and adds it to the thread's list.
//! The COMPOUND's last operation (its index reaches the count, or its
//! status ends the COMPOUND) sends the list in one [`Record`] with the
//! transport's addresses, or earlier when the list is full.
//!
//! These are not [`crate::Slot`]s: they are nfsd's, not sunrpc's
//! transport events, have no classic program or record layout, and run
//! only when asked for.
//!
//! [`Record`]: crate::Record

use crate::NfsdTracepoint;

/// `nfsd_compound`, then `nfsd_compound_status` (attach order: the
/// second needs what the first remembers).
pub const TRACEPOINTS: [NfsdTracepoint; 2] = [
    NfsdTracepoint {
        event: "nfsd_compound",
        program: "nfsd_compound",
    },
    NfsdTracepoint {
        event: "nfsd_compound_status",
        program: "nfsd_compound_status",
    },
];

/// Operations one record carries at most; a longer COMPOUND sends more
/// than one.
pub const OPS_PER_RECORD: usize = 40;
/// An operation number past [`NAMES`] (OP_ILLEGAL is 10044) as a record
/// carries it.
pub const OP_UNKNOWN: u8 = 0xff;

/// The record (`raw_kind` [`RECORD_KIND`], slot byte unused): the
/// `rawrec` addresses and namespace, then the operation count and the
/// numbers, one byte each.
pub const RECORD_KIND: u8 = 3;
pub const COUNT_AT: u16 = 96;
pub const OPS_AT: u16 = 104;
const _: () = assert!(OPS_AT as usize + OPS_PER_RECORD <= crate::RAW_BYTES);
const _: () = assert!(crate::rawrec::CLIENT_AT as usize + crate::ADDR_MAX <= COUNT_AT as usize);

/// Where the programs find what they read (byte offsets from the kernel's
/// BTF: sunrpc's and nfsd's), one entry in `OPSCONFIG`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpsConfig {
    /// 0: the programs return at once.
    pub enabled: u32,
    /// `svc_rqst.rq_xprt` and `rq_argp`.
    pub rq_xprt: u32,
    pub rq_argp: u32,
    /// `nfsd4_compoundargs.ops`, `sizeof(struct nfsd4_op)`,
    /// `nfsd4_op.opnum`.
    pub args_ops: u32,
    pub op_size: u32,
    pub op_opnum: u32,
    /// As `RawConfig`'s: the transport's namespace and addresses.
    pub xpt_net: u32,
    pub net_ns_inum: u32,
    pub xpt_local: u32,
    pub _pad: u32,
}

/// What the `nfsd_compound` program remembers of a thread's COMPOUND.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadCompound {
    pub rqst: u64,
    /// `args->ops`: the decoded operations.
    pub ops: u64,
    /// Operations listed and not yet sent.
    pub count: u32,
    pub _pad: u32,
    pub list: [u8; OPS_PER_RECORD],
}

/// Counters in `OPS_COUNTERS`, [`STRIDE`] entries per possible CPU.
pub mod counter {
    /// Operations sent in records.
    pub const SENT: u32 = 0;
    /// Operations lost: the ring was full, the thread's COMPOUND was not
    /// known (its `nfsd_compound` hit was missed or before the attach),
    /// or its transport could not be read.
    pub const LOST: u32 = 1;
    pub const STRIDE: u32 = 8;
}

/// NFSv4 operation names by number (RFC 7530, 8881, 7862, 8276), as
/// nfsd's `proc4ops` counts them; 0–2 are not operations.
pub const NAMES: [&str; 76] = [
    "",
    "",
    "",
    "ACCESS",
    "CLOSE",
    "COMMIT",
    "CREATE",
    "DELEGPURGE",
    "DELEGRETURN",
    "GETATTR",
    "GETFH",
    "LINK",
    "LOCK",
    "LOCKT",
    "LOCKU",
    "LOOKUP",
    "LOOKUPP",
    "NVERIFY",
    "OPEN",
    "OPENATTR",
    "OPEN_CONFIRM",
    "OPEN_DOWNGRADE",
    "PUTFH",
    "PUTPUBFH",
    "PUTROOTFH",
    "READ",
    "READDIR",
    "READLINK",
    "REMOVE",
    "RENAME",
    "RENEW",
    "RESTOREFH",
    "SAVEFH",
    "SECINFO",
    "SETATTR",
    "SETCLIENTID",
    "SETCLIENTID_CONFIRM",
    "VERIFY",
    "WRITE",
    "RELEASE_LOCKOWNER",
    "BACKCHANNEL_CTL",
    "BIND_CONN_TO_SESSION",
    "EXCHANGE_ID",
    "CREATE_SESSION",
    "DESTROY_SESSION",
    "FREE_STATEID",
    "GET_DIR_DELEGATION",
    "GETDEVICEINFO",
    "GETDEVICELIST",
    "LAYOUTCOMMIT",
    "LAYOUTGET",
    "LAYOUTRETURN",
    "SECINFO_NO_NAME",
    "SEQUENCE",
    "SET_SSV",
    "TEST_STATEID",
    "WANT_DELEGATION",
    "DESTROY_CLIENTID",
    "RECLAIM_COMPLETE",
    "ALLOCATE",
    "COPY",
    "COPY_NOTIFY",
    "DEALLOCATE",
    "IO_ADVISE",
    "LAYOUTERROR",
    "LAYOUTSTATS",
    "OFFLOAD_CANCEL",
    "OFFLOAD_STATUS",
    "READ_PLUS",
    "SEEK",
    "WRITE_SAME",
    "CLONE",
    "GETXATTR",
    "SETXATTR",
    "LISTXATTRS",
    "REMOVEXATTR",
];

/// The name of operation `op` as a record carries it ("ILLEGAL" past the
/// table, where nfsd counts nothing).
pub fn name(op: u8) -> &'static str {
    match NAMES.get(op as usize) {
        Some(n) if !n.is_empty() => n,
        _ => "ILLEGAL",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_rfcs_numbers() {
        assert_eq!(name(3), "ACCESS");
        assert_eq!(name(9), "GETATTR");
        assert_eq!(name(22), "PUTFH");
        assert_eq!(name(25), "READ");
        assert_eq!(name(38), "WRITE");
        assert_eq!(name(53), "SEQUENCE");
        assert_eq!(name(58), "RECLAIM_COMPLETE");
        assert_eq!(name(68), "READ_PLUS");
        assert_eq!(name(75), "REMOVEXATTR");
        assert_eq!(
            (name(0), name(76), name(OP_UNKNOWN)),
            ("ILLEGAL", "ILLEGAL", "ILLEGAL")
        );
        assert!(NAMES.iter().all(|n| n.len() <= 20));
    }
}
