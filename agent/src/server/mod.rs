//! The server view: how many nfsd threads there are (per pool where the
//! kernel says), how many of them the interval kept busy, and which
//! network namespaces the transports are in. Threads come from the
//! source ([`crate::source::Source::nfsd_threads`]: `/proc/fs/nfsd` on a
//! live host, the scenario in the demo, the recording's header in a
//! replay); busy threads are the interval's execution time over its
//! length (mean threads in service), from the snapshots themselves.
//!
//! Execution time arrives when a request completes (and a record or a
//! folded total reaches the agent), so an interval's share can hold work
//! done in the one before: more than its threads could do. What exceeds
//! the threads × the interval is shown in the next interval instead
//! (busy threads never pass the thread count; over a run they add up to
//! the execution time), up to one more interval of all threads: beyond
//! that it is dropped, so the figure is never more than an interval
//! late. Only a thread count below the threads that ran the requests
//! makes that much (nfsd instances of other network namespaces, a count
//! lowered under load).
//!
//! Each pool's busy threads come the same way from its own execution
//! time, which a live source reads from the kernel's per-pool totals
//! (`source::live::pools`); a lone pool is as busy as the server. Where
//! neither is known a pool's `busy_threads` is `None`: unknown is
//! `None`, never 0.
//!
//! Where nfsd's threads come and go (Linux 7.0+), the source reads how
//! many ran ([`threads`]); the interval's view then says how many ran
//! (time-weighted mean, fewest, most), started and exited, and busy
//! threads are bounded by the mean that ran, not by the configured count.

pub mod threads;

use std::path::Path;

use crate::model::{PoolView, ServerView, Snapshot, ThreadsRunning};

/// Where a live host's nfsd says how many threads it runs.
pub const PROC_NFSD: &str = "/proc/fs/nfsd";

/// What a source knows of nfsd's threads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NfsdThreads {
    /// Over all pools (`/proc/fs/nfsd/threads`).
    pub threads: Option<u32>,
    /// How many pools (`None`: unknown).
    pub pools: Option<u32>,
    /// Threads of each pool, where known (`/proc/fs/nfsd/pool_threads`).
    pub pool_threads: Option<Vec<u32>>,
    /// Execution seconds so far of each pool's threads, where measured.
    pub pool_exec_seconds: Option<Vec<f64>>,
    /// Requests so far of each pool's threads, where measured.
    pub pool_requests: Option<Vec<u64>>,
    /// Execution seconds so far of requests whose pool was not found.
    pub unattributed_exec_seconds: f64,
    /// The ports nfsd listens on (`/proc/fs/nfsd/portlist`), where known.
    pub ports: Option<crate::aggregate::services::NfsdPorts>,
    /// NFSv4 operations counted and lost, where the source counts them.
    pub nfs4_operations: Option<crate::model::OperationTotals>,
    /// How many threads ran, where they come and go (see [`threads`]).
    pub running: Option<threads::ThreadsReading>,
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
        ports: read("portlist")
            .as_deref()
            .and_then(crate::aggregate::services::NfsdPorts::parse_portlist),
        ..NfsdThreads::default()
    }
}

/// Derives each snapshot's [`ServerView`]; keeps the previous totals
/// (execution seconds and count), which start at zero with the
/// aggregator the pipeline starts, and the execution seconds carried to
/// the next interval.
#[derive(Debug)]
pub struct Tracker {
    last_exec: Option<(f64, u64)>,
    carried: f64,
    /// Each pool's execution seconds at the last view, and its carried
    /// seconds; from zero, as the kernel's totals start.
    last_pool_exec: Vec<f64>,
    pool_carried: Vec<f64>,
    last_unattributed: f64,
    /// The last reading of the threads that ran (see [`threads`]).
    last_running: Option<threads::ThreadsReading>,
}

impl Default for Tracker {
    fn default() -> Self {
        Tracker {
            last_exec: Some((0.0, 0)),
            carried: 0.0,
            last_pool_exec: Vec::new(),
            pool_carried: Vec::new(),
            last_unattributed: 0.0,
            last_running: None,
        }
    }
}

/// `secs` of execution in an interval of `interval` seconds as mean busy
/// threads, at most `threads` where known; and the seconds beyond that,
/// for the next interval (at most one interval of every thread).
fn busy_within(secs: f64, interval: f64, threads: Option<f64>) -> (f64, f64) {
    match threads.filter(|&n| n > 0.0) {
        Some(n) => {
            let busy = (secs / interval).min(n);
            let rest = (secs - busy * interval).clamp(0.0, n * interval);
            (busy, rest)
        }
        None => (secs / interval, 0.0),
    }
}

impl Tracker {
    /// A snapshot taken but not shown (a seek): the next interval starts
    /// from its totals.
    pub fn skip(&mut self, s: &Snapshot) {
        let executions = s.peers.iter().map(|p| p.executions).sum();
        self.last_exec = Some((s.totals.exec_seconds, executions));
        self.carried = 0.0;
        self.pool_carried.clear();
    }

    /// Each pool's busy threads over the interval from its execution
    /// seconds so far (`exec`), bounded by its threads as the server's
    /// are. `None` for all when the pool count changed (nfsd restarted),
    /// or when more than 1% of the interval's execution time could not
    /// be given a pool (`unattributed` so far): shares of a part would
    /// pass for the whole.
    fn pool_busy(
        &mut self,
        exec: &[f64],
        unattributed: f64,
        threads: &[Option<u32>],
        interval: f64,
    ) -> Vec<Option<f64>> {
        let same = self.last_pool_exec.is_empty() || self.last_pool_exec.len() == exec.len();
        let last = std::mem::replace(&mut self.last_pool_exec, exec.to_vec());
        let lost =
            (unattributed - std::mem::replace(&mut self.last_unattributed, unattributed)).max(0.0);
        let attributed: f64 = exec
            .iter()
            .enumerate()
            .map(|(i, &e)| (e - last.get(i).copied().unwrap_or(0.0)).max(0.0))
            .sum();
        self.pool_carried.resize(exec.len(), 0.0);
        if !same || interval <= 0.0 || lost > 0.01 * (attributed + lost) {
            self.pool_carried.iter_mut().for_each(|c| *c = 0.0);
            return vec![None; exec.len()];
        }
        exec.iter()
            .enumerate()
            .map(|(i, &now)| {
                let before = last.get(i).copied().unwrap_or(0.0);
                let secs = (now - before).max(0.0) + self.pool_carried[i];
                let bound = threads.get(i).copied().flatten().map(f64::from);
                let (busy, rest) = busy_within(secs, interval, bound);
                self.pool_carried[i] = rest;
                Some(busy)
            })
            .collect()
    }

    /// The interval's threads that ran, from the source's reading and the
    /// last one (the first reading's interval is from the ledger's start).
    fn running(
        &mut self,
        now: Option<threads::ThreadsReading>,
        interval: f64,
    ) -> Option<ThreadsRunning> {
        let now = now?;
        let last = self.last_running.replace(now).unwrap_or_default();
        let seconds = (now.thread_seconds - last.thread_seconds).max(0.0);
        let mean = if interval > 0.0 {
            seconds / interval
        } else {
            f64::from(now.now)
        };
        Some(ThreadsRunning {
            mean: mean.clamp(f64::from(now.low), f64::from(now.high)),
            min: now.low,
            max: now.high,
            now: now.now,
            starts: now.starts.saturating_sub(last.starts),
            exits: now.exits.saturating_sub(last.exits),
            starts_total: now.starts,
            exits_total: now.exits,
            lost: now.lost,
            configured_min: now.configured_min,
            configured_max: now.configured_max,
        })
    }

    pub fn view(&mut self, threads: &NfsdThreads, s: &Snapshot) -> ServerView {
        let running = self.running(threads.running, s.interval_s);
        // Busy threads are bounded by the threads that ran where they come
        // and go, else by the threads nfsd has.
        let bound = match &running {
            Some(r) => Some(r.mean),
            None => threads.threads.map(f64::from),
        };
        let exec = s.totals.exec_seconds;
        let executions: u64 = s.peers.iter().map(|p| p.executions).sum();
        let busy = match self.last_exec {
            // No execution events while requests were dispatched: the
            // source does not see execution time (unknown, not idle).
            Some((e0, n0))
                if s.interval_s > 0.0 && (executions > n0 || s.totals.dispatch_rate == 0.0) =>
            {
                let secs = (exec - e0).max(0.0) + self.carried;
                let (busy, rest) = busy_within(secs, s.interval_s, bound);
                self.carried = rest;
                Some(busy)
            }
            _ => None,
        };
        self.last_exec = Some((exec, executions));
        let mut pools: Vec<PoolView> = match (&threads.pool_threads, threads.pools) {
            (Some(v), _) => v
                .iter()
                .enumerate()
                .map(|(i, n)| PoolView {
                    pool: i as u32,
                    threads: Some(*n),
                    ..PoolView::default()
                })
                .collect(),
            (None, Some(n)) => (0..n.min(4096))
                .map(|i| PoolView {
                    pool: i,
                    threads: (n == 1).then_some(threads.threads).flatten(),
                    ..PoolView::default()
                })
                .collect(),
            (None, None) => Vec::new(),
        };
        match &threads.pool_exec_seconds {
            Some(exec) if exec.len() == pools.len() => {
                let each: Vec<Option<u32>> = pools.iter().map(|p| p.threads).collect();
                let busy =
                    self.pool_busy(exec, threads.unattributed_exec_seconds, &each, s.interval_s);
                let requests = threads.pool_requests.as_deref().unwrap_or(&[]);
                for (i, (p, b)) in pools.iter_mut().zip(busy).enumerate() {
                    p.busy_threads = b;
                    p.exec_seconds = Some(exec[i]);
                    p.requests = requests.get(i).copied();
                }
            }
            // One pool: it is the server.
            _ if pools.len() == 1 => pools[0].busy_threads = busy,
            _ => {}
        }
        let mut netns: Vec<u32> = s.peers.iter().map(|p| p.netns).collect();
        netns.sort_unstable();
        netns.dedup();
        ServerView {
            threads: threads.threads,
            busy_threads: busy,
            pools,
            netns,
            // The aggregator's, added by the pipeline.
            services: Vec::new(),
            nfs4_operations: threads.nfs4_operations,
            threads_running: running,
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
            ..NfsdThreads::default()
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

    /// One thread, 1 s intervals. A request in service from 0.5 s to
    /// 2.0 s completes in the second interval: its 1.5 s are more than
    /// the thread could do there, so the second shows 1 busy thread and
    /// the third the 0.5 s left (with the first's 0.5 s: 2 s in all, as
    /// executed).
    #[test]
    fn a_request_spanning_two_intervals_is_split_and_busy_never_passes_the_threads() {
        let one = NfsdThreads {
            threads: Some(1),
            ..Default::default()
        };
        // `rate`: dispatches a second in the interval.
        let snap = |exec: f64, n: u64, rate: f64| Snapshot {
            interval_s: 1.0,
            totals: crate::model::Totals {
                exec_seconds: exec,
                dispatch_rate: rate,
                ..Default::default()
            },
            peers: vec![EntityStats {
                executions: n,
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut tr = Tracker::default();
        let busy =
            |tr: &mut Tracker, exec, n, rate| tr.view(&one, &snap(exec, n, rate)).busy_threads;
        // 0 to 1 s: the first request (0 to 0.5 s) completes, the second
        // is dispatched.
        assert_eq!(busy(&mut tr, 0.5, 1, 2.0), Some(0.5));
        // 1 to 2 s: the second (0.5 to 2.0 s) completes.
        assert_eq!(busy(&mut tr, 2.0, 2, 0.0), Some(1.0));
        // 2 to 3 s: nothing; the 0.5 s carried.
        assert_eq!(busy(&mut tr, 2.0, 2, 0.0), Some(0.5));
        assert_eq!(busy(&mut tr, 2.0, 2, 0.0), Some(0.0));

        // 5 s of one thread's work reported in one interval: 1 busy
        // thread in it and in the next, the rest dropped (never more than
        // an interval late).
        let mut tr = Tracker::default();
        assert_eq!(busy(&mut tr, 5.0, 1, 1.0), Some(1.0));
        assert_eq!(busy(&mut tr, 5.0, 1, 0.0), Some(1.0));
        assert_eq!(busy(&mut tr, 5.0, 1, 0.0), Some(0.0));

        // Threads unknown: nothing to bound by, nothing carried.
        let mut tr = Tracker::default();
        let v = tr.view(&NfsdThreads::default(), &snap(1.5, 1, 1.0));
        assert_eq!(v.busy_threads, Some(1.5));
        let v = tr.view(&NfsdThreads::default(), &snap(1.5, 1, 0.0));
        assert_eq!(v.busy_threads, Some(0.0));

        // A seek starts afresh: nothing carried over it.
        let mut tr = Tracker::default();
        assert_eq!(busy(&mut tr, 1.5, 1, 1.0), Some(1.0));
        tr.skip(&snap(10.0, 5, 1.0));
        assert_eq!(busy(&mut tr, 10.0, 5, 0.0), Some(0.0));
    }

    /// A snapshot of `interval_s` with one peer of `n` executions, the
    /// server's `exec` seconds so far, dispatching.
    fn one_peer(interval_s: f64, exec: f64, n: u64) -> Snapshot {
        Snapshot {
            interval_s,
            totals: crate::model::Totals {
                exec_seconds: exec,
                dispatch_rate: 10.0,
                ..Default::default()
            },
            peers: vec![EntityStats {
                executions: n,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    /// Threads that come and go: the interval's mean, fewest, most, starts
    /// and exits from two readings of the ledger; busy threads bounded by
    /// the mean that ran (3 s of execution in 1 s with 2.5 threads
    /// running on average: 2.5 busy, not 3 of the 8 configured).
    #[test]
    fn threads_that_come_and_go_bound_busy_threads_by_what_ran() {
        use threads::{ThreadEvent, ThreadLedger};
        let mut ledger = ThreadLedger::new(2, 0);
        let s = 1_000_000_000u64;
        let snap = |exec: f64, n: u64| one_peer(1.0, exec, n);
        let with = |r| NfsdThreads {
            threads: Some(8),
            running: Some(r),
            ..NfsdThreads::default()
        };
        let mut tr = Tracker::default();
        let v = tr.view(&with(ledger.read(s, 0, 0, 0)), &snap(1.0, 1));
        let r = v.threads_running.unwrap();
        assert_eq!((r.mean, r.min, r.max, r.starts), (2.0, 2, 2, 0));
        assert_eq!(v.busy_threads, Some(1.0));
        // 1–1.5 s 2 threads, then a start: 1.5–2 s 3 threads.
        ledger.apply(ThreadEvent {
            ts_ns: s * 3 / 2,
            start: true,
            pool: 0,
            nrthreads: 2,
            min: 1,
            max: 8,
        });
        let v = tr.view(&with(ledger.read(2 * s, 1, 0, 0)), &snap(4.0, 2));
        let r = v.threads_running.unwrap();
        assert_eq!((r.mean, r.min, r.max, r.now), (2.5, 2, 3, 3));
        assert_eq!((r.starts, r.exits, r.starts_total), (1, 0, 1));
        assert_eq!((r.configured_min, r.configured_max), (Some(1), Some(8)));
        assert_eq!(v.busy_threads, Some(2.5), "bounded by the mean that ran");
        assert_eq!(v.threads, Some(8));
        // Without the reading nothing changes: bounded by the 8.
        let mut tr = Tracker::default();
        let v = tr.view(
            &NfsdThreads {
                threads: Some(8),
                ..NfsdThreads::default()
            },
            &snap(3.0, 1),
        );
        assert_eq!((v.busy_threads, v.threads_running), (Some(3.0), None));
    }

    /// Two pools of 4 threads, 2 s intervals, their execution seconds as
    /// the kernel's per-pool totals give them.
    #[test]
    fn each_pool_is_as_busy_as_its_own_execution_time_says() {
        let threads = |exec: [f64; 2], unattributed: f64| NfsdThreads {
            threads: Some(8),
            pools: Some(2),
            pool_threads: Some(vec![4, 4]),
            pool_exec_seconds: Some(exec.to_vec()),
            pool_requests: Some(vec![10, 30]),
            unattributed_exec_seconds: unattributed,
            ports: None,
            nfs4_operations: None,
            running: None,
        };
        let snap = |exec: f64, n: u64| one_peer(2.0, exec, n);
        let busy = |v: &ServerView| -> Vec<Option<f64>> {
            v.pools.iter().map(|p| p.busy_threads).collect()
        };
        let mut tr = Tracker::default();
        let v = tr.view(&threads([1.0, 3.0], 0.0), &snap(4.0, 1));
        assert_eq!(busy(&v), [Some(0.5), Some(1.5)]);
        assert_eq!(v.pools[1].exec_seconds, Some(3.0));
        assert_eq!(v.pools[1].requests, Some(30));
        assert_eq!(v.busy_threads, Some(2.0));
        // Pool 1 reports 10 s in 2 s: its 4 threads, and 2 s carried.
        let v = tr.view(&threads([1.0, 13.0], 0.0), &snap(14.0, 2));
        assert_eq!(busy(&v), [Some(0.0), Some(4.0)]);
        let v = tr.view(&threads([1.0, 13.0], 0.0), &snap(14.0, 3));
        assert_eq!(busy(&v), [Some(0.0), Some(1.0)]);
        // 1 s of the interval's 3 s without a pool: unknown, not less busy.
        let v = tr.view(&threads([2.0, 14.0], 1.0), &snap(17.0, 4));
        assert_eq!(busy(&v), [None, None]);
        let v = tr.view(&threads([3.0, 14.0], 1.0), &snap(18.0, 5));
        assert_eq!(busy(&v), [Some(0.5), Some(0.0)]);

        // A lone pool is the server, whatever the source.
        let one = NfsdThreads {
            threads: Some(2),
            pools: Some(1),
            pool_threads: Some(vec![2]),
            ..NfsdThreads::default()
        };
        let v = Tracker::default().view(&one, &snap(3.0, 1));
        assert_eq!(busy(&v), [Some(1.5)]);
        assert_eq!(v.pools[0].exec_seconds, None);
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
                pool_threads: Some(vec![8, 8]),
                ..NfsdThreads::default()
            }
        );
        std::fs::write(dir.join("pool_threads"), "8 x\n").unwrap();
        assert_eq!(read_proc(&dir).pool_threads, None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
