//! What the live source is opened with: the options (`nfsdtop`'s and
//! nfsdtopd's source flags end here) and how far the benchmark's partial
//! pipelines run.

use std::path::PathBuf;
use std::time::Duration;

use super::{bpf, drain, raw, Tracepoints};

/// How to open the live source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveOptions {
    /// tracefs mount point (default: /sys/kernel/tracing, then
    /// /sys/kernel/debug/tracing). Tests point it at fixture trees.
    pub tracefs: Option<PathBuf>,
    /// Ring buffer size in bytes (rounded up to a power of two).
    pub ring_bytes: u32,
    /// Wait this long for nfsd's tracepoints to appear (`--wait`);
    /// `Duration::MAX` waits for ever.
    pub wait_for_nfsd: Option<Duration>,
    /// The longest the ring waits to be drained (the reader drains more
    /// often while records arrive fast; see `drain::next_wait`).
    pub drain_period: Duration,
    /// Seed connections from the socket table under this /proc.
    pub proc_root: PathBuf,
    /// Turn on the kernel's BPF run-time statistics while attached
    /// (`--bpf-stats`): the per-program run time in the output, at the cost
    /// of two clock reads on every tracepoint hit, so off by default.
    pub kernel_stats: bool,
    /// Raw tracepoints where the kernel's BTF allows (the default), or
    /// every event classic (see `raw`).
    pub tracepoints: Tracepoints,
    /// Where the kernel's BTF is (tests point it elsewhere).
    pub btf_dir: PathBuf,
    /// Hook svc_xprt_enqueue even where dequeues carry `qtime` (6.16+),
    /// which otherwise rebuild the ready queue alone (see [`super::rebuild`]).
    pub enqueue_hooks: bool,
    /// How much of the pipeline runs: all of it, except for the
    /// benchmark's cost breakdown (see [`BenchStage`]; [`super::open`] picks
    /// the source for it, [`super::LiveSource`] itself always runs all of it).
    pub stage: BenchStage,
    /// Count NFSv4 operations per client (`--nfs4-ops`; see [`super::nfs4ops`]).
    pub nfs4_ops: bool,
    /// Read requests with the typed programs where the kernel allows
    /// (see [`super::typed`]; off with `--no-typed-program`).
    pub typed_program: bool,
    /// Keep raw tracepoints on a kernel that can preempt their programs
    /// (`--keep-raw-tracepoints`): the hits it skips are counted as lost
    /// and no slot moves to its classic tracepoint (see [`super::attach`]).
    pub keep_raw: bool,
}

/// How far the live source goes, so `cargo xtask bench` can split what
/// watching nfsd costs into its parts, each measured in the same run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BenchStage {
    /// Everything: what users run.
    #[default]
    Full,
    /// The programs attached but returning at their first instruction's
    /// map lookup: what merely hooking these tracepoints costs.
    Hooked,
    /// Records streamed and drained, then thrown away undecoded: the
    /// kernel side and the ring reader without the agent's decoding and
    /// aggregation.
    Discard,
    /// Everything but the workload view: no procedure or request and
    /// reply lengths read or folded by the raw programs, no procedure
    /// decoded from classic records, so the benchmark weighs what they add.
    NoWorkload,
}

impl Default for LiveOptions {
    fn default() -> Self {
        LiveOptions {
            tracefs: None,
            ring_bytes: bpf::DEFAULT_RING_BYTES,
            wait_for_nfsd: None,
            drain_period: drain::DEFAULT_DRAIN_PERIOD,
            proc_root: PathBuf::from("/proc"),
            kernel_stats: false,
            tracepoints: Tracepoints::Raw,
            btf_dir: PathBuf::from(raw::BTF_DIR),
            enqueue_hooks: false,
            stage: BenchStage::Full,
            nfs4_ops: false,
            typed_program: true,
            keep_raw: false,
        }
    }
}
