//! How busy each nfsd thread pool is, on a live host: where the programs
//! find a request's pool (offsets from the kernel's BTF, see
//! `nfsdtop_common::pools`), whether they fold per pool at all, and the
//! pools' running execution totals read back from the memory-mapped
//! `POOL_TOTALS` array.
//!
//! With a single pool (sunrpc's `global` pool mode, the usual one
//! without NUMA) the pool is as busy as the server, so nothing is folded:
//! every CPU adding to one shared entry would cost every request a
//! contended cache line for nothing.

use std::path::Path;

use aya::Ebpf;
use nfsdtop_common::pools::{PoolConfig, ENTRIES, SLOTS};

use super::btf::Btf;
use super::error::LiveError;
use super::mapped::Mapped;

/// Where a request's pool is in this kernel; `Err` says why pools cannot
/// be told apart.
pub fn config(btf: &Btf) -> Result<PoolConfig, String> {
    let need = |s: &str, path: &[&str]| {
        btf.offset_of(s, path)
            .ok_or_else(|| format!("the kernel's BTF has no {s}.{}", path.join(".")))
    };
    let (rq_pool, sp_id) = (
        need("svc_rqst", &["rq_pool"])?,
        need("svc_pool", &["sp_id"])?,
    );
    // Classic programs reach the request through the running kthread;
    // without these they cannot, and their requests count as
    // unattributed (raw programs have the request itself).
    let thread = btf
        .offset_of("task_struct", &["worker_private"])
        .zip(btf.offset_of("kthread", &["data"]));
    Ok(PoolConfig {
        enabled: 1,
        rq_pool,
        sp_id,
        task_kthread: thread.map_or(0, |t| t.0),
        kthread_data: thread.map_or(0, |t| t.1),
        _pad: 0,
    })
}

/// The programs' pool config for a host whose nfsd has `pools` pools
/// (`None`: not known yet, e.g. nfsd not started), and what to tell the
/// user about per-pool busy threads.
pub fn plan(btf_dir: &Path, pools: Option<u32>) -> (PoolConfig, String) {
    if pools == Some(1) {
        return (
            PoolConfig::default(),
            "busy threads per pool: one pool, as busy as the server".into(),
        );
    }
    let module = btf_dir.join("sunrpc").exists().then_some("sunrpc");
    let cfg = Btf::load(btf_dir, module)
        .map_err(|e| e.to_string())
        .and_then(|b| config(&b));
    match cfg {
        Ok(c) if c.task_kthread != 0 => (c, "busy threads per pool from rq_pool".into()),
        Ok(c) => (
            c,
            "busy threads per pool from rq_pool where a raw tracepoint has the request (the \
             kernel's BTF has no task_struct.worker_private or kthread.data)"
                .into(),
        ),
        Err(why) => (
            PoolConfig::default(),
            format!("busy threads per pool not measured: {why}"),
        ),
    }
}

/// The `POOL_TOTALS` array: each pool's running execution totals (µs and
/// requests), then the unattributed entry.
pub struct PoolTotalsMap {
    map: Mapped,
}

impl PoolTotalsMap {
    pub fn map(ebpf: &Ebpf) -> Result<PoolTotalsMap, LiveError> {
        let bytes = ENTRIES as usize * size_of::<nfsdtop_common::pools::PoolTotals>();
        Ok(PoolTotalsMap {
            map: Mapped::map(ebpf, "POOL_TOTALS", bytes)?,
        })
    }

    /// Execution seconds and requests so far of pools `0..pools` (at
    /// most [`SLOTS`]), and the seconds of requests whose pool was not
    /// found.
    pub fn read(&self, pools: u32) -> (Vec<(f64, u64)>, f64) {
        // Two words an entry: µs, then the request count.
        let secs = |i: u32| self.map.word(i as usize * 2) as f64 / 1e6;
        let each = (0..pools.min(SLOTS))
            .map(|i| (secs(i), self.requests(i)))
            .collect();
        (each, secs(SLOTS))
    }

    /// Requests so far of pool `id` (the entry's second word).
    pub fn requests(&self, id: u32) -> u64 {
        self.map
            .word(nfsdtop_common::pools::entry(id) as usize * 2 + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::live::btf::tests::Builder;

    fn btf(with_thread: bool, with_pool: bool) -> Btf {
        let mut b = Builder::new();
        let u64t = b.int("unsigned long", 8);
        let rqst: &[(&str, u32, u32)] = if with_pool {
            &[("rq_xprt", u64t, 0), ("rq_pool", u64t, 8 * 40)]
        } else {
            &[("rq_xprt", u64t, 0)]
        };
        b.composite(false, "svc_rqst", 48, false, rqst);
        b.composite(false, "svc_pool", 8, false, &[("sp_id", u64t, 0)]);
        if with_thread {
            b.composite(
                false,
                "task_struct",
                104,
                false,
                &[("pid", u64t, 0), ("worker_private", u64t, 8 * 96)],
            );
            b.composite(
                false,
                "kthread",
                32,
                false,
                &[("flags", u64t, 0), ("data", u64t, 8 * 24)],
            );
        }
        Btf::parse(&b.build(), None).unwrap()
    }

    #[test]
    fn offsets_come_from_btf_and_the_thread_path_is_optional() {
        let c = config(&btf(false, true)).unwrap();
        assert_eq!((c.enabled, c.rq_pool, c.sp_id), (1, 40, 0));
        assert_eq!((c.task_kthread, c.kthread_data), (0, 0));
        let c = config(&btf(true, true)).unwrap();
        assert_eq!((c.task_kthread, c.kthread_data), (96, 24));
        assert_eq!(
            config(&btf(true, false)),
            Err("the kernel's BTF has no svc_rqst.rq_pool".into())
        );
    }

    #[test]
    fn one_pool_folds_nothing_and_missing_btf_says_why() {
        let dir = std::env::temp_dir().join(format!("nfsdtop-pools-{}", std::process::id()));
        let (c, why) = plan(&dir, Some(1));
        assert_eq!(c.enabled, 0);
        assert!(why.contains("one pool"), "{why}");
        let (c, why) = plan(&dir, Some(2));
        assert_eq!(c.enabled, 0);
        assert!(
            why.starts_with("busy threads per pool not measured: "),
            "{why}"
        );
    }
}
