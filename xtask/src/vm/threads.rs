//! Scenario "threads" (scripts/vm/scenario-threads.sh): nfsd's dynamic
//! threads (7.0+), with a minimum below the configured threads, under a
//! load that makes nfsd start threads and then idleness that makes them
//! exit. The truth is ftrace's nfsd_dynthread_start / nfsd_dynthread_kill
//! records (each carries the pool's count before it takes effect), beside
//! the scheduler's sched_process_exit of nfsd kthreads and the kthreads
//! the guest counted at quiet moments. nfsdtop's
//! `server.threads_running` must count the same starts and exits, keep
//! min <= mean <= max, end with the kthreads that run, and bound
//! `busy_threads` in every interval. Where the kernel has no dynamic
//! threads it must be absent from every line.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use serde::Deserialize;

use super::batch;
use super::ftrace::{field, ftrace_losses};
use super::report::Report;

/// Slack for comparing means computed in floating point.
const EPS: f64 = 1e-6;

/// nfsdtop's `server.threads_running`, read here from the raw JSON
/// (every field required: a renamed one fails the check, not reads as 0).
#[derive(Clone, Debug, Deserialize, PartialEq)]
struct Running {
    mean: f64,
    min: u32,
    max: u32,
    now: u32,
    starts: u64,
    exits: u64,
    starts_total: u64,
    exits_total: u64,
    configured_min: Option<u32>,
    configured_max: Option<u32>,
    lost: u64,
}

/// Each line's `server.threads_running` (None where absent or null); Err
/// naming NAME:LINE at the first that is not JSON or not the object.
fn running_of(text: &str, name: &str) -> Result<Vec<Option<Running>>, String> {
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            let v: serde_json::Value =
                serde_json::from_str(l).map_err(|e| format!("{name}:{}: {e}", i + 1))?;
            match v.pointer("/server/threads_running") {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(r) => Running::deserialize(r)
                    .map(Some)
                    .map_err(|e| format!("{name}:{}: server.threads_running: {e}", i + 1)),
            }
        })
        .collect()
}

fn running(path: &Path) -> Result<Vec<Option<Running>>, String> {
    let text = fs::read_to_string(path).unwrap_or_default();
    running_of(&text, &path.display().to_string())
}

/// ftrace's view of nfsd's threads over the measurement.
#[derive(Debug, Default, PartialEq)]
struct Dynamic {
    starts: u64,
    kills: u64,
    trylock_fails: u64,
    /// sched_process_exit records of nfsd kthreads (the guest filters
    /// comm == "nfsd"): exits counted by the scheduler, not nfsd.
    kthread_exits: u64,
    /// Per pool, from its last record: threads after it took effect,
    /// nrthrmin, nrthrmax.
    pools: BTreeMap<u32, (u32, u32, u32)>,
    /// Fewest and most threads at any moment, from the count before the
    /// first record (the guest's kthreads) on, one pool assumed.
    low: i64,
    high: i64,
}

fn parse_dynamic(trace: &str, start: i64) -> Dynamic {
    let mut d = Dynamic {
        low: start,
        high: start,
        ..Dynamic::default()
    };
    let mut now = start;
    for line in trace.lines().filter(|l| !l.starts_with('#')) {
        if line.contains(" sched_process_exit: ") && field(line, "comm") == Some("nfsd") {
            d.kthread_exits += 1;
            continue;
        }
        let (rest, delta) = if let Some((_, r)) = line.split_once(" nfsd_dynthread_start: ") {
            d.starts += 1;
            (r, 1)
        } else if let Some((_, r)) = line.split_once(" nfsd_dynthread_kill: ") {
            d.kills += 1;
            (r, -1)
        } else if let Some((_, r)) = line.split_once(" nfsd_dynthread_trylock_fail: ") {
            d.trylock_fails += 1;
            (r, 0)
        } else {
            continue;
        };
        now += delta;
        d.low = d.low.min(now);
        d.high = d.high.max(now);
        let num = |k| field(rest, k).and_then(|v| v.parse::<u32>().ok());
        if let (Some(pool), Some(n), Some(lo), Some(hi)) = (
            num("pool"),
            num("nrthreads"),
            num("nrthrmin"),
            num("nrthrmax"),
        ) {
            let after = n.saturating_add_signed(delta as i32);
            d.pools.insert(pool, (after, lo, hi));
        }
    }
    d
}

fn kv_num(summary: &BTreeMap<String, String>, key: &str) -> Option<i64> {
    summary.get(key)?.trim().parse().ok()
}

pub fn check(results: &Path, summary: &BTreeMap<String, String>, rep: &mut Report) {
    let dynamic = summary
        .get("threads.dynamic")
        .map(String::as_str)
        .unwrap_or("");
    if dynamic != "yes" {
        rep.check(
            dynamic.starts_with("no"),
            format!("threads: no dynamic threads, scenario not run ({dynamic:?})"),
        );
        // Then nfsdtop must not claim to measure them.
        match running(&results.join("nfsdtop-main.jsonl")) {
            Ok(r) => rep.check(
                !r.is_empty() && r.iter().all(Option::is_none),
                format!(
                    "threads: no server.threads_running in nfsdtop-main's lines ({} of {} have it)",
                    r.iter().filter(|x| x.is_some()).count(),
                    r.len()
                ),
            ),
            Err(e) => rep.check(false, format!("threads: {e}")),
        }
        return;
    }
    if let Some(e) = summary.get("threads.error") {
        rep.check(false, format!("threads: {e}"));
        return;
    }
    let set = summary.get("threads.set").map(String::as_str).unwrap_or("");
    rep.check(
        set.starts_with("rc=0"),
        format!("threads: nfsdctl set the minimum ({set:?})"),
    );
    for k in ["min_set", "start", "end"] {
        rep.note(format!(
            "threads.{k}: {}",
            summary.get(&format!("threads.{k}")).map_or("?", |s| s)
        ));
    }
    let path = results.join("nfsdtop-threads.jsonl");
    // The typed reader first: every line must still be a batch record.
    let lines = match batch::read(&path) {
        Ok(l) if !l.is_empty() => l,
        Ok(_) => return rep.check(false, "threads: no nfsdtop line"),
        Err(e) => return rep.check(false, format!("threads: {e}")),
    };
    let raw = match running(&path) {
        Ok(r) => r,
        Err(e) => return rep.check(false, format!("threads: {e}")),
    };
    let losses = fs::read_to_string(results.join("ftrace-stats-threads.txt"))
        .ok()
        .and_then(|s| ftrace_losses(&s));
    rep.check(
        losses == Some(0),
        format!("threads: ftrace lost nothing ({losses:?})"),
    );
    let (Some(k_start), Some(k_end)) = (
        kv_num(summary, "threads.kthreads_start"),
        kv_num(summary, "threads.kthreads_end"),
    ) else {
        return rep.check(
            false,
            "threads: the guest counted the nfsd kthreads at start and end",
        );
    };
    let trace = fs::read_to_string(results.join("trace-threads.txt")).unwrap_or_default();
    let d = parse_dynamic(&trace, k_start);
    rep.check(
        d.starts > 0 && d.kills > 0,
        format!(
            "threads: the load made nfsd start threads and idleness made them exit: ftrace {} \
             nfsd_dynthread_start, {} nfsd_dynthread_kill ({} trylock failures; none of \
             either: the load did not exercise dynamic threads)",
            d.starts, d.kills, d.trylock_fails
        ),
    );
    // The kernel's own bookkeeping, before nfsdtop's.
    rep.check(
        d.kthread_exits == d.kills,
        format!(
            "threads: every nfsd_dynthread_kill was an nfsd kthread exiting: sched_process_exit {} == {}",
            d.kthread_exits, d.kills
        ),
    );
    rep.check(
        k_end == k_start + d.starts as i64 - d.kills as i64,
        format!(
            "threads: nfsd kthreads at the end {k_end} == at the start {k_start} + {} starts - {} \
             exits (a start whose svc_new_thread failed would break this)",
            d.starts, d.kills
        ),
    );
    let after: u32 = d.pools.values().map(|p| p.0).sum();
    rep.check(
        d.pools.is_empty() || i64::from(after) == k_end,
        format!("threads: the last records' counts (nrthreads ± 1) {after} == kthreads at the end {k_end}"),
    );

    let missing = raw.iter().filter(|r| r.is_none()).count();
    rep.check(
        missing == 0,
        format!(
            "threads: server.threads_running in every nfsdtop line ({missing} of {} lack it)",
            raw.len()
        ),
    );
    let have: Vec<&Running> = raw.iter().flatten().collect();
    let Some(last) = have.last() else {
        return;
    };
    rep.check(
        last.starts_total == d.starts && last.exits_total == d.kills,
        format!(
            "threads: nfsdtop starts_total {} == ftrace's nfsd_dynthread_start {}, exits_total {} == nfsd_dynthread_kill {}",
            last.starts_total, d.starts, last.exits_total, d.kills
        ),
    );
    rep.check(
        last.lost == 0,
        format!("threads: nfsdtop lost no thread events ({})", last.lost),
    );
    rep.check(
        i64::from(last.now) == k_end,
        format!(
            "threads: now at the end {} == nfsd kthreads at the end {k_end}",
            last.now
        ),
    );
    let (want_min, want_max) = d
        .pools
        .values()
        .fold((0, 0), |(a, b), p| (a + p.1, b + p.2));
    rep.check(
        last.configured_min == Some(want_min) && last.configured_max == Some(want_max),
        format!(
            "threads: configured min/max {:?}/{:?} == the last records' nrthrmin/nrthrmax summed over pools {want_min}/{want_max} ({:?})",
            last.configured_min,
            last.configured_max,
            summary.get("threads.want")
        ),
    );
    // Each interval's counts add up to the totals.
    let mut prev = (0, 0);
    let mut unsummed = 0;
    for r in &have {
        if r.starts_total != prev.0 + r.starts || r.exits_total != prev.1 + r.exits {
            unsummed += 1;
        }
        prev = (r.starts_total, r.exits_total);
    }
    rep.check(
        unsummed == 0,
        format!(
            "threads: each line's starts/exits add up to starts_total/exits_total ({unsummed} of {} lines do not)",
            have.len()
        ),
    );
    let disordered: Vec<String> = have
        .iter()
        .enumerate()
        .filter(|(_, r)| {
            let (lo, hi) = (f64::from(r.min), f64::from(r.max));
            !(lo <= r.mean + EPS && r.mean <= hi + EPS && r.min <= r.now && r.now <= r.max)
        })
        .map(|(i, r)| {
            format!(
                "line {}: min {} mean {:.3} max {} now {}",
                i + 1,
                r.min,
                r.mean,
                r.max,
                r.now
            )
        })
        .collect();
    rep.check(
        disordered.is_empty(),
        format!("threads: min <= mean <= max and min <= now <= max in every line ({disordered:?})"),
    );
    let low = have.iter().map(|r| i64::from(r.min)).min().unwrap_or(-1);
    let high = have.iter().map(|r| i64::from(r.max)).max().unwrap_or(-1);
    rep.check(
        low == d.low && high == d.high,
        format!(
            "threads: fewest/most threads over the run {low}/{high} == ftrace's, counted from the {k_start} at the start: {}/{}",
            d.low, d.high
        ),
    );
    // Busy threads are bounded by the threads that ran.
    let mut compared = 0;
    let mut over = Vec::new();
    for (i, (l, r)) in lines.iter().zip(&raw).enumerate() {
        if let (Some(b), Some(r)) = (l.server.busy_threads, r) {
            compared += 1;
            if b > r.mean + EPS {
                over.push(format!("line {}: busy {b:.3} > mean {:.3}", i + 1, r.mean));
            }
        }
    }
    rep.check(
        compared > 0 && over.is_empty(),
        format!(
            "threads: busy_threads <= threads_running.mean in every interval ({compared} compared; over: {over:?})"
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records as 7.2.13 prints them (netns_ino is recorded, not printed).
    const TRACE: &str = "\
# tracer: nop
            nfsd-693     [001] .....    86.899010: nfsd_dynthread_start: pool=0 nrthreads=1 nrthrmin=1 nrthrmax=8
            nfsd-693     [000] .l...    86.977835: nfsd_dynthread_start: pool=0 nrthreads=2 nrthrmin=1 nrthrmax=8
            nfsd-693     [000] .....    88.100000: nfsd_dynthread_trylock_fail: pool=0 nrthreads=3 nrthrmin=1 nrthrmax=8
            nfsd-693     [001] .....    88.200000: svc_xprt_dequeue: server=10.99.1.1:2049 client=10.99.1.2:812 flags=BUSY wakeup-us=3
            nfsd-1046    [001] .....   110.341996: nfsd_dynthread_kill: pool=0 nrthreads=3 nrthrmin=1 nrthrmax=8
            nfsd-1046    [001] .....   110.343176: sched_process_exit: comm=nfsd pid=1046 prio=120 group_dead=true
";

    #[test]
    fn dynamic_thread_records_are_counted_with_the_count_after_each() {
        let d = parse_dynamic(TRACE, 1);
        assert_eq!(
            (d.starts, d.kills, d.trylock_fails, d.kthread_exits),
            (2, 1, 1, 1)
        );
        assert_eq!(d.pools[&0], (2, 1, 8), "3 before the kill, 2 after");
        assert_eq!((d.low, d.high), (1, 3));
    }

    /// A kernel without the events: the scenario says so, and a line of
    /// the main measurement with threads_running fails the check.
    #[test]
    fn without_dynamic_threads_no_line_may_have_threads_running() {
        let dir = std::env::temp_dir().join(format!("nfsdtop-threads-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let summary: BTreeMap<String, String> = [(
            "threads.dynamic".to_string(),
            "no: 6.12.57+deb13-amd64 has no nfsd_dynthread_start event".to_string(),
        )]
        .into();
        let run = |main: &str| {
            fs::write(dir.join("nfsdtop-main.jsonl"), main).unwrap();
            let mut rep = Report {
                lines: vec![],
                failures: vec![],
            };
            check(&dir, &summary, &mut rep);
            rep.failures
        };
        assert!(run("{\"server\":{}}\n{\"server\":{}}\n").is_empty());
        let with = r#"{"server":{"threads_running":{"mean":1.0,"min":1,"max":1,"now":1,"starts":0,"exits":0,"starts_total":0,"exits_total":0,"configured_min":null,"configured_max":null,"lost":0}}}"#;
        assert_eq!(run(with).len(), 1);
        assert_eq!(run("").len(), 1, "no line at all is no evidence");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn threads_running_is_read_where_present_and_refused_where_malformed() {
        let ok = r#"{"server":{"threads_running":{"mean":5.2,"min":2,"max":8,"now":4,"starts":6,"exits":0,"starts_total":6,"exits_total":0,"configured_min":2,"configured_max":8,"lost":0}}}
{"server":{}}
{"server":{"threads_running":null}}"#;
        let r = running_of(ok, "f").unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].as_ref().map(|r| (r.max, r.starts_total)), Some((8, 6)));
        assert!(r[1].is_none() && r[2].is_none());
        let renamed = r#"{"server":{"threads_running":{"mean":1.0,"min":1,"max":1,"now":1}}}"#;
        let e = running_of(renamed, "f").unwrap_err();
        assert!(e.starts_with("f:1: server.threads_running"), "{e}");
    }
}
