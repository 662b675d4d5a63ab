//! The server view: how many nfsd threads there are (per pool where the
//! kernel says), how many of them the interval kept busy, and which
//! network namespaces the transports are in. Threads come from the
//! source ([`crate::source::Source::nfsd_threads`]: `/proc/fs/nfsd` on a
//! live host, the scenario in the demo, the recording's header in a
//! replay); busy threads are the interval's execution time over its
//! length (mean threads in service), from the snapshots themselves.
//!
//! Not available anywhere yet: how busy each pool is (that needs the
//! kernel's pid→pool tracepoints, 6.17+), so a pool's `busy_threads` is
//! always `None`; unknown is `None`, never 0.

use std::path::Path;

use crate::model::{PoolView, ServerView, Snapshot};

/// Where a live host's nfsd says how many threads it runs.
pub const PROC_NFSD: &str = "/proc/fs/nfsd";

/// What a source knows of nfsd's threads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NfsdThreads {
    /// Over all pools (`/proc/fs/nfsd/threads`).
    pub threads: Option<u32>,
    /// How many pools (`None`: unknown).
    pub pools: Option<u32>,
    /// Threads of each pool, where known (`/proc/fs/nfsd/pool_threads`).
    pub pool_threads: Option<Vec<u32>>,
}

/// Read nfsd's thread counts from `dir` (normally `/proc/fs/nfsd`);
/// what cannot be read is unknown.
pub fn read_proc(dir: &Path) -> NfsdThreads {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    let threads = read("threads").and_then(|t| t.trim().parse().ok());
    // One number per pool, e.g. "8 8" for two NUMA pools.
    let pool_threads: Option<Vec<u32>> = read("pool_threads")
        .and_then(|t| t.split_whitespace().map(|n| n.parse().ok()).collect())
        .filter(|v: &Vec<u32>| !v.is_empty());
    NfsdThreads {
        threads,
        pools: pool_threads.as_ref().map(|v| v.len() as u32),
        pool_threads,
    }
}

/// Derives each snapshot's [`ServerView`]; keeps the previous totals
/// (execution seconds and count), which start at zero with the
/// aggregator the pipeline starts.
#[derive(Debug)]
pub struct Tracker {
    last_exec: Option<(f64, u64)>,
}

impl Default for Tracker {
    fn default() -> Self {
        Tracker {
            last_exec: Some((0.0, 0)),
        }
    }
}

impl Tracker {
    /// A snapshot taken but not shown (a seek): the next interval starts
    /// from its totals.
    pub fn skip(&mut self, s: &Snapshot) {
        let executions = s.peers.iter().map(|p| p.executions).sum();
        self.last_exec = Some((s.totals.exec_seconds, executions));
    }

    pub fn view(&mut self, threads: &NfsdThreads, s: &Snapshot) -> ServerView {
        let exec = s.totals.exec_seconds;
        let executions: u64 = s.peers.iter().map(|p| p.executions).sum();
        let busy = match self.last_exec {
            // No execution events while requests were dispatched: the
            // source does not see execution time (unknown, not idle).
            Some((e0, n0))
                if s.interval_s > 0.0 && (executions > n0 || s.totals.dispatch_rate == 0.0) =>
            {
                Some(((exec - e0).max(0.0) / s.interval_s).max(0.0))
            }
            _ => None,
        };
        self.last_exec = Some((exec, executions));
        let pools = match (&threads.pool_threads, threads.pools) {
            (Some(v), _) => v
                .iter()
                .enumerate()
                .map(|(i, n)| PoolView {
                    pool: i as u32,
                    threads: Some(*n),
                    busy_threads: None,
                })
                .collect(),
            (None, Some(n)) => (0..n.min(4096))
                .map(|i| PoolView {
                    pool: i,
                    threads: (n == 1).then_some(threads.threads).flatten(),
                    busy_threads: None,
                })
                .collect(),
            (None, None) => Vec::new(),
        };
        let mut netns: Vec<u32> = s.peers.iter().map(|p| p.netns).collect();
        netns.sort_unstable();
        netns.dedup();
        ServerView {
            threads: threads.threads,
            busy_threads: busy,
            pools,
            netns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::EntityStats;

    #[test]
    fn busy_threads_are_execution_time_over_the_interval() {
        let t = NfsdThreads {
            threads: Some(8),
            pools: Some(2),
            pool_threads: Some(vec![4, 4]),
        };
        let mut tr = Tracker::default();
        let snap = |exec: f64, n: u64, netns: &[u32]| Snapshot {
            interval_s: 2.0,
            totals: crate::model::Totals {
                exec_seconds: exec,
                dispatch_rate: 100.0,
                ..Default::default()
            },
            peers: netns
                .iter()
                .map(|ns| EntityStats {
                    netns: *ns,
                    executions: n,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let v = tr.view(&t, &snap(1.0, 10, &[7]));
        assert_eq!(v.busy_threads, Some(0.5), "from zero at the start");
        // 6 s of thread time in 2 s: 3 threads busy on average.
        let v = tr.view(&t, &snap(7.0, 20, &[9, 7, 9]));
        assert_eq!(v.busy_threads, Some(3.0));
        assert_eq!(v.threads, Some(8));
        assert_eq!(v.netns, [7, 9]);
        assert_eq!(v.pools.len(), 2);
        assert_eq!(v.pools[1].threads, Some(4));
        assert_eq!(v.pools[1].busy_threads, None);
        // Dispatches but no execution events: unknown, not idle.
        let v = tr.view(&t, &snap(7.0, 20, &[7]));
        assert_eq!(v.busy_threads, None);
    }

    #[test]
    fn proc_files_that_are_missing_or_bad_are_unknown() {
        let dir = std::env::temp_dir().join(format!("nfsdtop-server-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(read_proc(&dir), NfsdThreads::default());
        std::fs::write(dir.join("threads"), "16\n").unwrap();
        std::fs::write(dir.join("pool_threads"), "8 8\n").unwrap();
        let t = read_proc(&dir);
        assert_eq!(
            t,
            NfsdThreads {
                threads: Some(16),
                pools: Some(2),
                pool_threads: Some(vec![8, 8])
            }
        );
        std::fs::write(dir.join("pool_threads"), "8 x\n").unwrap();
        assert_eq!(read_proc(&dir).pool_threads, None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
