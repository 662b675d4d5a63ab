//! The typed svc_stats_latency program (`tp_btf`): what the agent and the
//! program share about it. A raw tracepoint program reads the request's
//! fields with `bpf_probe_read_kernel`, a helper call each (about 75
//! instructions in the benchmark guest); a `tp_btf` program gets the
//! request as a typed pointer and reads its fields with single loads,
//! which the verifier checks against the kernel's BTF. It can do so only
//! at offsets it knows while verifying: the agent sets them here, in a
//! read-only global, before the object is loaded.

/// The program's name in the object.
pub const PROGRAM: &str = "typed_svc_stats_latency";

/// The read-only global that holds the offsets (a [`RqstOffsets`]).
pub const GLOBAL: &str = "TYPED_RQST";

/// Byte offsets in this kernel's `struct svc_rqst` (u64 each, so a spill
/// of one to the stack keeps it a constant for the verifier). Every one
/// must be a real member of the width the program reads (`rq_xprt` a
/// pointer and `rq_stime` 8 bytes, the others 4): the agent loads the
/// program only when the kernel's BTF has them all.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RqstOffsets {
    pub rq_xprt: u64,
    pub rq_stime: u64,
    pub rq_arg_len: u64,
    pub rq_res_len: u64,
    pub rq_prog: u64,
    pub rq_vers: u64,
    pub rq_proc: u64,
}

const _: () = assert!(core::mem::size_of::<RqstOffsets>() == 56);
// The agent names the loaded program by its first 15 bytes.
const _: () = assert!(PROGRAM.len() >= 15);
