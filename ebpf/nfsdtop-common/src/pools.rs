//! Execution time folded per thread pool: the svc_stats_latency programs
//! (raw and classic) add each request's `execute` to its thread's pool's
//! entry of the `POOL_TOTALS` array (memory-mapped by the agent), which
//! gives how busy each pool is. The pool is the request's
//! `rq_pool->sp_id`; a classic program, which has no request pointer,
//! finds the request through the nfsd thread running it (a kthread whose
//! `data` is its `struct svc_rqst`). Pools are few and their threads run
//! on the pool's own CPUs (percpu and pernode modes), so each entry is
//! written by few CPUs; with a single pool the agent leaves this off.

/// Pools with an entry of their own; a pool id at or beyond it, or a
/// request whose pool could not be read, adds to entry [`SLOTS`].
pub const SLOTS: u32 = 1024;
/// Entries of `POOL_TOTALS`: one per pool, and the unattributed one.
pub const ENTRIES: u32 = SLOTS + 1;

/// Where the programs find a request's pool (byte offsets from the
/// kernel's BTF), one entry in `POOLCONFIG`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolConfig {
    /// 0: nothing is folded per pool.
    pub enabled: u32,
    /// `svc_rqst.rq_pool` and `svc_pool.sp_id`.
    pub rq_pool: u32,
    pub sp_id: u32,
    /// `task_struct.worker_private` (the thread's `struct kthread`)
    /// and `kthread.data` (the thread function's argument: the
    /// `struct svc_rqst` of an RPC service thread); 0: a classic
    /// program cannot find the request, and folds into [`SLOTS`].
    pub task_kthread: u32,
    pub kthread_data: u32,
    pub _pad: u32,
}

/// One pool's running totals: `execute` µs and requests.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolTotals {
    pub us: u64,
    pub count: u64,
}

/// The entry of pool `id`.
#[inline(always)]
pub const fn entry(id: u32) -> u32 {
    if id < SLOTS {
        id
    } else {
        SLOTS
    }
}
