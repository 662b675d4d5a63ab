//! Scenario "pools" (scripts/vm/scenario-pools.sh): nfsd with one thread
//! pool per CPU (pool_mode=percpu), measured by ftrace and nfsdtop side by
//! side. ftrace is the truth for how busy each pool was: a
//! svc_stats_latency record written by an nfsd thread is its thread's
//! pool's. On 6.17+ the svc_pool_thread_* events name each thread's pool
//! (`pool=N pid=P`; there a percpu pool's threads run on any CPU: seen on
//! 7.2, each thread on both CPUs); before them, a pool's threads are
//! pinned to its CPU, so a record on CPU N is pool N's. Other services'
//! threads, such as lockd's, run requests on their own service's pool 0,
//! which nfsdtop adds to pool 0 too. Each pool's requests in nfsdtop's last line must equal
//! ftrace's records and its execution seconds match their `execute-us`;
//! every line must give each pool the
//! threads /proc/fs/nfsd/pool_threads listed, and busy threads stay
//! between 0 and them.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use super::batch;
use super::ftrace::{field, ftrace_losses};
use super::report::Report;
use super::tolerance::{exec_slack_s, EXEC_SLACK_PER_REQUEST_S, EXEC_TOLERANCE};

/// A pool no svc_pool_thread_* record named the thread of (never
/// expected where there are such records: the check then fails on it).
pub const UNNAMED_POOL: u32 = u32::MAX;

/// Each nfsd thread's pool, by pid, from the svc_pool_thread_* records
/// (6.17+); empty before them.
fn thread_pools(trace: &str) -> BTreeMap<u32, u32> {
    trace
        .lines()
        .filter(|l| l.contains(" svc_pool_thread_"))
        .filter_map(|l| {
            let pool = field(l, "pool")?.parse().ok()?;
            let pid = field(l, "pid")?.parse().ok()?;
            Some((pid, pool))
        })
        .collect()
}

/// Requests and execution seconds per pool from ftrace's text: an nfsd
/// thread's record to its thread's pool (or its CPU's, without the
/// svc_pool_thread_* records), any other thread's to pool 0.
fn exec_per_pool(trace: &str) -> BTreeMap<u32, (u64, f64)> {
    let mut pools = BTreeMap::new();
    let by_pid = thread_pools(trace);
    for line in trace.lines().filter(|l| l.contains(" svc_stats_latency: ")) {
        let mut tok = line.split_whitespace();
        let (Some(task), Some(cpu)) = (tok.next(), tok.next()) else {
            continue;
        };
        let cpu = cpu
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<u32>()
            .ok();
        let us = field(line, "execute-us").and_then(|v| v.parse::<u64>().ok());
        let (Some(cpu), Some(us)) = (cpu, us) else {
            continue;
        };
        let pool = match task.strip_prefix("nfsd-") {
            Some(_) if by_pid.is_empty() => cpu,
            Some(pid) => pid
                .parse()
                .ok()
                .and_then(|p: u32| by_pid.get(&p).copied())
                .unwrap_or(UNNAMED_POOL),
            None => 0,
        };
        let e = pools.entry(pool).or_insert((0, 0.0));
        e.0 += 1;
        e.1 += us as f64 / 1e6;
    }
    pools
}

pub fn check(results: &Path, summary: &BTreeMap<String, String>, rep: &mut Report) {
    let mode = summary.get("pools.mode").map(String::as_str);
    rep.check(
        mode == Some("percpu"),
        format!("pools: nfsd restarted with pool_mode=percpu ({mode:?})"),
    );
    if mode != Some("percpu") {
        return;
    }
    let want: Option<Vec<u32>> = summary
        .get("pools.pool_threads")
        .and_then(|t| t.split_whitespace().map(|n| n.parse().ok()).collect());
    let Some(want) = want.filter(|w| w.len() > 1) else {
        rep.check(
            false,
            format!(
                "pools: /proc/fs/nfsd/pool_threads lists several pools ({:?})",
                summary.get("pools.pool_threads")
            ),
        );
        return;
    };
    let lines = match batch::read(&results.join("nfsdtop-pools.jsonl")) {
        Ok(l) if !l.is_empty() => l,
        Ok(_) => {
            rep.check(false, "pools: no nfsdtop line");
            return;
        }
        Err(e) => {
            rep.check(false, format!("pools: {e}"));
            return;
        }
    };
    let threads_wrong = lines
        .iter()
        .filter(|l| {
            l.server
                .pools
                .iter()
                .map(|p| p.threads)
                .ne(want.iter().map(|&n| Some(n)))
        })
        .count();
    rep.check(
        threads_wrong == 0,
        format!(
            "pools: every line's pool threads == /proc/fs/nfsd/pool_threads {want:?} ({threads_wrong} of {} lines differ)",
            lines.len()
        ),
    );
    // Every pool's busy threads on every line that knows them.
    let mut known = 0;
    let mut out_of_range = Vec::new();
    for l in &lines {
        for (p, n) in l.server.pools.iter().zip(&want) {
            if let Some(b) = p.busy_threads {
                known += 1;
                if !(0.0..=f64::from(*n)).contains(&b) {
                    out_of_range.push((p.pool, b));
                }
            }
        }
    }
    rep.check(
        known > 0 && out_of_range.is_empty(),
        format!(
            "pools: busy threads of each pool in [0, its threads] ({known} values, out of range: {out_of_range:?})"
        ),
    );
    let detail = &lines[lines.len() - 1].source.detail;
    rep.check(
        detail.contains("busy threads per pool from rq_pool"),
        format!("pools: source.detail says how pools are measured ({detail})"),
    );

    let losses = fs::read_to_string(results.join("ftrace-stats-pools.txt"))
        .ok()
        .and_then(|s| ftrace_losses(&s));
    let trace = fs::read_to_string(results.join("trace-pools.txt")).unwrap_or_default();
    let by_thread = !thread_pools(&trace).is_empty();
    let truth = exec_per_pool(&trace);
    if losses != Some(0) {
        rep.check(false, format!("pools: ftrace lost nothing ({losses:?})"));
        return;
    }
    let last = &lines[lines.len() - 1].server.pools;
    let mut all = true;
    let mut text = Vec::new();
    for (i, _) in want.iter().enumerate() {
        let (requests, ours) = last
            .get(i)
            .map_or((None, None), |p| (p.requests, p.exec_seconds));
        let (n, theirs) = truth.get(&(i as u32)).copied().unwrap_or((0, 0.0));
        let slack = exec_slack_s(theirs, n);
        let ok = requests == Some(n) && ours.is_some_and(|o| (o - theirs).abs() <= slack);
        all &= ok;
        text.push(format!(
            "pool {i}: nfsdtop {requests:?} requests {ours:?} s, ftrace {n} requests {theirs:.3} s (±{slack:.3})"
        ));
    }
    if let Some((n, _)) = truth.get(&UNNAMED_POOL) {
        all = false;
        text.push(format!(
            "{n} requests of threads no svc_pool_thread_* record named"
        ));
    }
    let total: u64 = truth.values().map(|t| t.0).sum();
    rep.check(
        all && total > 0,
        format!(
            "pools: each pool's requests == ftrace's svc_stats_latency records by {}, execution \
             seconds within {:.0}% + {:.0} µs a request: {}",
            if by_thread {
                "thread (svc_pool_thread_*)"
            } else {
                "CPU"
            },
            EXEC_TOLERANCE * 100.0,
            EXEC_SLACK_PER_REQUEST_S * 1e6,
            text.join(", ")
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ftrace_records_go_to_their_cpus_pool_or_pool_0_for_other_services() {
        let trace = "\
# tracer: nop
            nfsd-338     [000] .....    80.6: svc_stats_latency: xid=0x1 server=10.99.1.1:2049 client=10.99.1.2:969 proc=NULL execute-us=224
            nfsd-339     [001] .....    80.7: svc_stats_latency: xid=0x2 server=10.99.1.1:2049 client=10.99.1.2:969 proc=READ execute-us=1000
            nfsd-339     [001] .....    80.8: svc_xprt_dequeue: server=10.99.1.1:2049 client=10.99.1.2:969 flags=BUSY
           lockd-400     [001] .....    80.9: svc_stats_latency: xid=0x3 server=0.0.0.0:4045 client=(einval) proc=TEST execute-us=6
";
        let p = exec_per_pool(trace);
        assert_eq!(p.len(), 2);
        assert_eq!((p[&0].0, p[&1].0), (2, 1), "lockd's to pool 0");
        assert!((p[&0].1 - 0.000230).abs() < 1e-9, "{p:?}");
        assert!((p[&1].1 - 0.001).abs() < 1e-9, "{p:?}");
    }

    /// 6.17+: a thread's pool from svc_pool_thread_*, whatever CPU it ran
    /// on; a thread none of them named is a pool of its own, so the check
    /// fails rather than guesses.
    #[test]
    fn with_pool_thread_records_a_record_goes_to_its_threads_pool() {
        let trace = "\
            nfsd-833     [000] .....    80.1: svc_pool_thread_wake: pool=1 pid=833
            nfsd-834     [001] .....    80.2: svc_pool_thread_running: pool=0 pid=834
            nfsd-833     [000] .....    80.6: svc_stats_latency: xid=0x1 server=10.99.1.1:2049 client=10.99.1.2:969 proc=NULL execute-us=224
            nfsd-834     [001] .....    80.7: svc_stats_latency: xid=0x2 server=10.99.1.1:2049 client=10.99.1.2:969 proc=READ execute-us=1000
            nfsd-999     [001] .....    80.8: svc_stats_latency: xid=0x3 server=10.99.1.1:2049 client=10.99.1.2:969 proc=READ execute-us=5
";
        let p = exec_per_pool(trace);
        assert_eq!((p[&1].0, p[&0].0, p[&UNNAMED_POOL].0), (1, 1, 1), "{p:?}");
        assert!((p[&0].1 - 0.001).abs() < 1e-9, "{p:?}");
    }
}
