//! Execution time folded in the kernel: with short records, the raw
//! svc_stats_latency program adds a known transport's `execute` to its
//! entry of the `EXEC_TOTALS` array (one [`ExecTotals`] per
//! [`crate::xprt_table::slot`], memory-mapped by the agent) instead of sending a
//! record; the agent reads the running totals and reports what grew.
//! An entry belongs to one transport from the full record that claimed it
//! (`gen` = that record's time) until its svc_xprt_free, or until another
//! transport's full record claims the entry: the record that ends an
//! owner's run (its free, or the claiming full record) carries the final
//! totals at the [`crate::rawrec`] `EXEC_*` offsets, so nothing added is lost.

/// One transport's running totals. Written by the BPF programs only;
/// `us` and `count` only grow while `owner` and `gen` stay.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExecTotals {
    /// The `struct svc_xprt` pointer; 0 = free.
    pub owner: u64,
    /// `ts_ns` of the full record that claimed the entry.
    pub gen: u64,
    /// Sum of `execute` (µs) and number of requests.
    pub us: u64,
    pub count: u64,
    /// Sums of the requests' `rq_arg.len` and `rq_res.len` (bytes
    /// received and sent, RPC headers included); 0 where the program
    /// does not read them (`RawConfig::rq_arg_len` 0).
    pub bytes_in: u64,
    pub bytes_out: u64,
}
