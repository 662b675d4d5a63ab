//! The typed (`tp_btf`) programs of svc_xprt_enqueue, svc_xprt_dequeue
//! and svc_stats_latency (`RawProgram::typed` in the tracepoint table):
//! what the agent and the programs share about them. A raw tracepoint
//! program reads the kernel's fields with `bpf_probe_read_kernel`, a helper
//! call each (about 75 instructions in the benchmark guest); a `tp_btf`
//! program gets its argument (a request, or a transport) as a typed
//! pointer and reads its fields with single loads, which the verifier
//! checks against the kernel's BTF. It can do so only at offsets it knows
//! while verifying: the agent sets them here, in a read-only global,
//! before the object is loaded.

/// The read-only global that holds the offsets (a [`TypedOffsets`]).
pub const GLOBAL: &str = "TYPED_OFFSETS";

/// Byte offsets in this kernel's `struct svc_rqst` and `struct svc_xprt`
/// (u64 each, so a spill of one to the stack keeps it a constant for the
/// verifier); 0 where the kernel's BTF lacks the member. Every one a
/// program reads must be a real member of the width it reads (`rq_xprt` a
/// pointer, `rq_stime` and `xpt_flags` 8 bytes, the others 4), used or
/// not: the agent loads the dequeue program only with `rq_xprt`, the
/// svc_stats_latency one only with the request's all, the enqueue one
/// only with the transport's.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TypedOffsets {
    pub rq_xprt: u64,
    pub rq_stime: u64,
    pub rq_arg_len: u64,
    pub rq_res_len: u64,
    pub rq_prog: u64,
    pub rq_vers: u64,
    pub rq_proc: u64,
    pub xpt_flags: u64,
    /// `svc_xprt.xpt_nr_rqsts` (an `atomic_t`: its 4-byte counter).
    pub xpt_nr_rqsts: u64,
    /// Not an offset: 1 where the kernel's svc_xprt_enqueue passes the
    /// flags it tested as argument 1 (6.6+). Where it is 0 the enqueue
    /// program never reads argument 1 (a request pointer on older kernels,
    /// which the verifier would not let it test as flags): a constant to
    /// the verifier, so that path is not even checked.
    pub enqueue_flags_arg: u64,
}

const _: () = assert!(core::mem::size_of::<TypedOffsets>() == 80);
impl TypedOffsets {
    /// Every offset the svc_stats_latency program reads is known.
    pub const fn complete(&self) -> bool {
        self.rq_xprt != 0
            && self.rq_stime != 0
            && self.rq_arg_len != 0
            && self.rq_res_len != 0
            && self.rq_prog != 0
            && self.rq_vers != 0
            && self.rq_proc != 0
    }

    /// Every offset the svc_xprt_enqueue program reads is known.
    pub const fn enqueue_complete(&self) -> bool {
        self.xpt_flags != 0 && self.xpt_nr_rqsts != 0
    }
}
