//! The procedure check of one vm-test measurement: per client and RPC
//! procedure, nfsdtop's requests against ftrace's svc_stats_latency
//! records (`proc=`), exactly; and summed over the clients, each NFS
//! procedure against what the kernel's own counters (`proc3`, `proc4` of
//! /proc/net/rpc/nfsd, saved before and after the load) grew by. NULL may
//! exceed the counters: NFSACL's NULL, which v3 clients call at mount,
//! has the same name but is not counted there (nor are GETACL, SETACL).

use std::collections::BTreeMap;
use std::net::IpAddr;

use nfsdtop_agent::aggregate::exec_bucket;
use nfsdtop_agent::present::output::BatchEntity;
use nfsdtop_common::procs::names_of;

/// The NFS program, whose versions 3 and 4 /proc/net/rpc/nfsd counts.
const NFS: u32 = 100003;

/// What nfsdtop's `source.detail` says when it counts procedures (raw
/// programs or the classic record).
pub const PROCEDURES_MEASURED: &str = "; procedures from ";
/// What it says when every request's procedure (and execution time) comes
/// in a record of its own: the classic tracepoint.
pub const EVERY_REQUEST_TIMED: &str = "; procedures from the svc_stats_latency record";

/// Requests per procedure name in /proc/net/rpc/nfsd's `proc3` and
/// `proc4` lines (`procN COUNT n0 n1 ...`, by procedure number, named as
/// nfsdtop names them).
pub fn rpc_nfsd(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut tok = line.split_whitespace();
        let names: &[&str] = match tok.next() {
            Some("proc3") => names_of(NFS, 3),
            Some("proc4") => names_of(NFS, 4),
            _ => continue,
        };
        for (name, n) in names.iter().zip(tok.skip(1)) {
            *out.entry(name.to_string()).or_default() += n.parse::<u64>().unwrap_or(0);
        }
    }
    out
}

/// What each of the kernel's counters grew by from `before` to `after`
/// (those that grew).
pub fn grew(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(p, &n)| {
            (
                p.clone(),
                n.saturating_sub(before.get(p).copied().unwrap_or(0)),
            )
        })
        .filter(|&(_, n)| n > 0)
        .collect()
}

/// The checks, each `(passed, what)`: `entities` of nfsdtop's last line,
/// `measured` whether its source counts procedures, `ftrace` per client,
/// `clients` (name, address), and /proc/net/rpc/nfsd before and after.
pub fn check(
    entities: &[BatchEntity],
    measured: bool,
    ftrace: &BTreeMap<IpAddr, BTreeMap<String, u64>>,
    clients: &[(&str, IpAddr)],
    rpc: Option<(&str, &str)>,
) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    let mut summed = BTreeMap::<String, u64>::new();
    for &(name, ip) in clients {
        let ours: BTreeMap<String, u64> = entities
            .iter()
            .find(|e| e.name == ip.to_string().as_str())
            .map(|e| {
                e.procedures
                    .iter()
                    .map(|(p, s)| (p.to_string(), s.requests))
                    .collect()
            })
            .unwrap_or_default();
        if !measured {
            out.push((
                ours.is_empty(),
                format!("{name} ({ip}): procedures not counted: none given ({ours:?})"),
            ));
            continue;
        }
        let theirs = ftrace.get(&ip).cloned().unwrap_or_default();
        out.push((
            !theirs.is_empty() && ours == theirs,
            format!(
                "{name} ({ip}): nfsdtop's requests per procedure {ours:?} == ftrace's {theirs:?}"
            ),
        ));
        for (p, n) in ours {
            *summed.entry(p).or_default() += n;
        }
    }
    let Some((before, after)) = rpc.filter(|_| measured) else {
        if measured {
            out.push((
                false,
                "/proc/net/rpc/nfsd saved before and after the load".into(),
            ));
        }
        return out;
    };
    let grew = grew(&rpc_nfsd(before), &rpc_nfsd(after));
    let mut differ = Vec::new();
    for (p, &n) in &grew {
        let got = summed.get(p).copied().unwrap_or(0);
        if !(got == n || p == "NULL" && got > n) {
            differ.push(format!("{p}: nfsdtop {got}, kernel {n}"));
        }
    }
    for (p, &got) in &summed {
        let counted = [3, 4]
            .iter()
            .any(|&v| names_of(NFS, v).contains(&p.as_str()));
        if counted && !grew.contains_key(p) && got > 0 && p != "NULL" {
            differ.push(format!("{p}: nfsdtop {got}, kernel 0"));
        }
    }
    out.push((
        !grew.is_empty() && differ.is_empty(),
        format!(
            "summed over clients, each procedure == its /proc/net/rpc/nfsd proc3/proc4 delta \
             {grew:?} (NULL may exceed it){}",
            if differ.is_empty() {
                String::new()
            } else {
                format!(": {}", differ.join(", "))
            }
        ),
    ));
    out
}

/// Fewest requests of a procedure whose 99th percentile is compared: with
/// fewer, it is their slowest, and one request's clocks decide it (each
/// handler of svc_stats_latency reads the clock itself, hundreds of µs
/// apart now and then under TCG).
const P99_MIN_REQUESTS: u64 = 100;

/// The exact 99th percentile of `v`: its ⌈0.99 n⌉-th smallest value.
fn p99(v: &[u64]) -> Option<u64> {
    let mut v = v.to_vec();
    v.sort_unstable();
    let rank = (v.len() as f64 * 0.99).ceil().max(1.0) as usize;
    v.get(rank - 1).copied()
}

/// The 99th percentile of execution time per client and procedure: where
/// nfsdtop timed every one of at least [`P99_MIN_REQUESTS`] requests of a
/// procedure one by one (classic tracepoints), ftrace's exact one falls in
/// nfsdtop's bucket or the next one either way (a request's two clock
/// readings can straddle a bucket's edge); everywhere, a percentile is
/// given exactly where some request was timed, and no more requests are
/// timed than counted. `every_timed`: the source times every request (so
/// a client's procedure with enough requests must have been compared).
pub fn check_p99(
    entities: &[BatchEntity],
    ftrace: &BTreeMap<IpAddr, BTreeMap<String, Vec<u64>>>,
    clients: &[(&str, IpAddr)],
    every_timed: bool,
) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    for &(name, ip) in clients {
        let Some(e) = entities.iter().find(|e| e.name == ip.to_string().as_str()) else {
            continue;
        };
        let (mut compared, mut bad) = (Vec::new(), Vec::new());
        for (p, st) in e.procedures.iter() {
            if st.timed > st.requests || st.exec_p99_us.is_some() != (st.timed > 0) {
                bad.push(format!(
                    "{p}: {} timed of {} requests, p99 {:?}",
                    st.timed, st.requests, st.exec_p99_us
                ));
                continue;
            }
            let theirs = ftrace
                .get(&ip)
                .and_then(|m| m.get(p.as_str()))
                .and_then(|v| p99(v));
            let all_timed = st.timed == st.requests && st.requests >= P99_MIN_REQUESTS;
            if let (true, Some(m), Some(v)) = (all_timed, st.exec_p99_us, theirs) {
                let what = format!("{p} {m:.0} vs {v} µs");
                if exec_bucket(m as u64).abs_diff(exec_bucket(v)) <= 1 {
                    compared.push(what);
                } else {
                    bad.push(what);
                }
            }
        }
        // Where every request is timed, a procedure with enough requests
        // must have been compared (a loaded guest can give a client fewer).
        let enough = e
            .procedures
            .iter()
            .any(|(_, st)| st.requests >= P99_MIN_REQUESTS);
        out.push((
            bad.is_empty() && !(every_timed && enough && compared.is_empty()),
            format!(
                "{name} ({ip}): execution p99 per procedure within a bucket of ftrace's where \
                 every one of {P99_MIN_REQUESTS}+ requests was timed [{}]{}",
                compared.join(", "),
                if bad.is_empty() {
                    String::new()
                } else {
                    format!("; wrong: {}", bad.join(", "))
                }
            ),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfsdtop_agent::model::{EntityStats, ProcName, ProcedureStats};

    fn entity(ip: &str, procs: &[(&str, u64)]) -> BatchEntity<'static> {
        BatchEntity::from(EntityStats {
            name: ip.to_string(),
            procedures: procs
                .iter()
                .map(|&(p, n)| {
                    (
                        ProcName::new(p),
                        ProcedureStats {
                            requests: n,
                            ..ProcedureStats::default()
                        },
                    )
                })
                .collect(),
            ..EntityStats::default()
        })
    }

    #[test]
    fn exact_per_client_and_summed_against_the_kernels_counters() {
        let ip: IpAddr = "10.99.1.2".parse().unwrap();
        let clients = [("c1", ip)];
        let ftrace = BTreeMap::from([(
            ip,
            BTreeMap::from([("NULL".to_string(), 3), ("READ".to_string(), 10)]),
        )]);
        // proc3: 22 procedures, NULL first, READ seventh.
        let before =
            "rc 0 0 0\nproc3 22 1 0 0 0 0 0 5 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\nproc4 2 0 7\n";
        let after =
            "rc 0 0 0\nproc3 22 3 0 0 0 0 0 15 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\nproc4 2 0 7\n";
        let good = [entity("10.99.1.2", &[("NULL", 3), ("READ", 10)])];
        let r = check(&good, true, &ftrace, &clients, Some((before, after)));
        assert!(r.iter().all(|(ok, _)| *ok), "{r:?}");
        assert_eq!(rpc_nfsd(after)["READ"], 15);
        assert_eq!(rpc_nfsd(after)["COMPOUND"], 7);
        // One READ fewer than ftrace: both checks fail.
        let short = [entity("10.99.1.2", &[("NULL", 3), ("READ", 9)])];
        let r = check(&short, true, &ftrace, &clients, Some((before, after)));
        assert_eq!(r.iter().filter(|(ok, _)| !ok).count(), 2, "{r:?}");
        // Not measured: none given passes, some given fails.
        assert!(check(&[entity("10.99.1.2", &[])], false, &ftrace, &clients, None)[0].0);
        assert!(!check(&good, false, &ftrace, &clients, None)[0].0);
        // Measured but the counters were not saved: a failure, said.
        let r = check(&good, true, &ftrace, &clients, None);
        assert!(!r[1].0 && r[1].1.contains("/proc/net/rpc/nfsd"), "{r:?}");
    }

    #[test]
    fn p99_against_ftraces_where_every_request_was_timed() {
        let ip: IpAddr = "10.99.1.2".parse().unwrap();
        let clients = [("c1", ip)];
        // 100 READs: 99 of 1000 µs and one of 5000: p99 is the 99th, 1000.
        let mut reads = vec![1000u64; 99];
        reads.push(5000);
        assert_eq!(p99(&reads), Some(1000));
        // 1000 µs is in [768, 1024), middle 896; its neighbours' middles
        // are 640 and 1280; two buckets away, 1792.
        let ftrace = BTreeMap::from([(ip, BTreeMap::from([("READ".to_string(), reads)]))]);
        let with = |timed: u64, p99: Option<f64>| {
            let mut e = entity("10.99.1.2", &[("READ", 100)]);
            let procs = &mut e.stats.to_mut().procedures;
            let read = ProcName::new("READ");
            let mut st = procs[&read];
            (st.timed, st.exec_p99_us) = (timed, p99);
            procs.insert(read, st);
            [e]
        };
        let ok = |e: &[BatchEntity]| check_p99(e, &ftrace, &clients, false)[0].0;
        assert!(ok(&with(100, Some(896.0))));
        assert!(ok(&with(100, Some(640.0))) && ok(&with(100, Some(1280.0))));
        assert!(!ok(&with(100, Some(1792.0))));
        // The slow request's bucket instead: wrong.
        assert!(!ok(&with(100, Some(5120.0))));
        // Only some timed: not compared; but a percentile without any
        // timed, or more timed than requests, is wrong.
        assert!(ok(&with(40, Some(5120.0))));
        assert!(!ok(&with(0, Some(896.0))));
        assert!(!ok(&with(40, None)));
        assert!(!ok(&with(101, Some(896.0))));
        assert!(ok(&with(0, None)));
        // A source that times every request must have compared something.
        assert!(check_p99(&with(100, Some(896.0)), &ftrace, &clients, true)[0].0);
        assert!(!check_p99(&with(0, None), &ftrace, &clients, true)[0].0);
        // ... where it had a procedure with enough requests: a client the
        // loaded guest gave 57 READs has nothing to compare.
        let few = [entity("10.99.1.2", &[("READ", 57)])];
        assert!(check_p99(&few, &ftrace, &clients, true)[0].0);
    }
}
