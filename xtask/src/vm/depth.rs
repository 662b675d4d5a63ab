//! Depth at enqueue against the kernel's own reading of it: each client's
//! `enqueue_depth` from nfsdtop's main measurement (the runs whose BPF
//! enqueue program read `svc_xprt.xpt_nr_rqsts`), compared bucket by bucket
//! with a dynamic event the guest put on `svc_xprt_enqueue` in the same
//! ftrace buffer (scripts/vm/guest-init.sh, `depth_probe_on`), which reads
//! the same field, the flags and both addresses by BTF name.

use std::collections::BTreeMap;
use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

use nfsdtop_agent::model::{DEPTH_BUCKETS, DEPTH_LOWER};
use nfsdtop_agent::source::live::format::Format;

use super::batch;
use super::clients;
use super::fairshare::{real_enqueues, EnqueueRule};
use super::ftrace::{field, is_listener, other_service};
use super::report::Report;

/// The dynamic event's name as its trace lines print it.
const EVENT: &str = " depth_at_enqueue: ";
/// What nfsdtop's `source.detail` says where it read the depth.
const MEASURED: &str = "depth at enqueue from xpt_nr_rqsts";
/// nfsdtop's runs of the main measurement, every one compared where it
/// read the depth: the default (up to 6.15), and beside it the classic
/// one (never: the classic record has no depth) and, where the default
/// does without enqueue hooks (6.16+), one with them.
const RUNS: [&str; 3] = ["main", "main-classic", "main-hooks"];
/// Each bucket may differ by this share of the client's enqueues, the
/// depth-0 share by this much: nfsdtop's program and the probe read the
/// flags and `xpt_nr_rqsts` a few instructions apart (the probe at the
/// function's entry, the tracepoint after its barrier), racing the nfsd
/// threads that change them; and on 7.x the hits the kernel skips for
/// nfsdtop's raw enqueue program are missing from its histograms (counted
/// as lost: see [`check`]'s notes).
const BUCKET_SHARE: f64 = 0.01;
const DEPTH0_POINTS: f64 = 0.01;

/// One client's depths by the probe: the histogram of its real enqueues,
/// and how many calls it saw in all.
#[derive(Default)]
struct Probed {
    counts: [u64; DEPTH_BUCKETS],
    sum: i64,
    calls: u64,
}

impl Probed {
    fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

pub fn check(results: &Path, summary: &BTreeMap<String, String>, rep: &mut Report) {
    let lasts: Vec<(&str, batch::Line)> = RUNS
        .iter()
        .filter_map(|run| {
            let lines = batch::read(&results.join(format!("nfsdtop-{run}.jsonl"))).ok()?;
            Some((*run, lines.into_iter().last()?))
        })
        .collect();
    // No line: the measurement's own checks say why.
    let Some((_, first)) = lasts.first() else {
        return;
    };
    // 5.18-6.5's tracepoint fires on real enqueues only, past the tests
    // the probe at the function's entry comes before: not the same set
    // (and those kernels have no fprobe events).
    let rule = EnqueueRule::of_generation(&first.source.generation);
    if rule != EnqueueRule::Attempts {
        rep.note(format!(
            "depth probe: not compared on generation {} (its tracepoint fires after the tests \
             a probe at svc_xprt_enqueue's entry comes before)",
            first.source.generation
        ));
        return;
    }
    let def = summary.get("depth_probe.main").map(String::as_str);
    let log = fs::read_to_string(results.join("depth-probe-main.txt")).unwrap_or_default();
    let Some(def) = def else {
        rep.check(
            false,
            "depth probe: the guest tried none (no depth_probe.main in summary.txt: a run from \
             before the probe)",
        );
        return;
    };
    if def == "refused" {
        rep.check(
            false,
            format!(
                "depth probe: the kernel accepted no dynamic event on svc_xprt_enqueue; \
                 depth-probe-main.txt (each definition tried, then its error_log): {}",
                log.trim()
            ),
        );
        return;
    }
    rep.note(format!("depth probe: {def}"));
    let runs: Vec<&(&str, batch::Line)> = lasts
        .iter()
        .filter(|(_, last)| last.source.detail.contains(MEASURED))
        .collect();
    if runs.is_empty() {
        rep.check(
            false,
            format!("depth probe: no nfsdtop run of the main measurement ({RUNS:?}) read the depth at enqueue ({MEASURED:?})"),
        );
        return;
    }
    let trace = fs::read_to_string(results.join("trace-main.txt")).unwrap_or_default();
    let format =
        fs::read_to_string(results.join("format-svc_xprt_enqueue.txt")).unwrap_or_default();
    let names = match Format::parse(&format) {
        Ok(f) => f.print_flags("flags"),
        Err(e) => {
            rep.check(
                false,
                format!("depth probe: format-svc_xprt_enqueue.txt: {e}"),
            );
            return;
        }
    };
    let probed = probe_depths(&trace, &names, rule);
    let records = real_enqueues(&trace, EnqueueRule::EveryRecord);
    let real = real_enqueues(&trace, rule);
    for c in clients::from_summary(summary) {
        let ip = c.ip;
        let p = probed.get(&ip);
        rep.note(format!(
            "depth probe: {} ({ip}): {} calls of svc_xprt_enqueue ({} tracepoint records), \
             {} real enqueues ({} by the tracepoint's flags)",
            c.name,
            p.map_or(0, |p| p.calls),
            records.get(&ip).copied().unwrap_or(0),
            p.map_or(0, Probed::count),
            real.get(&ip).copied().unwrap_or(0)
        ));
        let Some(p) = p.filter(|p| p.count() > 0) else {
            rep.check(
                false,
                format!("depth probe: no real enqueue of {} ({ip}) recorded", c.name),
            );
            continue;
        };
        for (run, last) in &runs {
            compare(rep, run, last, &c.name, ip, p);
        }
    }
    // On 7.x the raw enqueue program has no twin (svc_xprt_enqueue also
    // fires in softirqs, and a twin relies on a thread's hits coming one
    // after another: nfsdtop_common::twin): the hits the kernel skips for
    // it are counted as lost, and missing from the histograms.
    for (run, last) in &runs {
        rep.note(format!(
            "depth probe: {run}: nfsdtop counted {} events lost",
            last.totals.events_lost
        ));
    }
}

/// One client's histogram in nfsdtop's last line against the probe's.
fn compare(rep: &mut Report, run: &str, last: &batch::Line, name: &str, ip: IpAddr, p: &Probed) {
    let mine = last
        .entities
        .iter()
        .find(|e| e.name.parse::<IpAddr>().ok() == Some(ip))
        .and_then(|e| e.enqueue_depth);
    let Some(n) = mine else {
        rep.check(
            false,
            format!(
                "{run}: {name} ({ip}): no enqueue_depth where the probe saw {} real enqueues",
                p.count()
            ),
        );
        return;
    };
    let (nc, pc) = (n.count(), p.count());
    let slack = BUCKET_SHARE * pc as f64;
    let worst = n
        .counts
        .iter()
        .zip(p.counts)
        .map(|(&a, b)| a.abs_diff(b))
        .max()
        .unwrap_or(0);
    rep.check(
        worst as f64 <= slack,
        format!(
            "{run}: {name} ({ip}) depth at enqueue by bucket (0, 1, 2-3, 4-7, 8-15, 16-31, \
             32-63, 64+): nfsdtop {:?} ({nc} enqueues, sum {}), probe {:?} ({pc}, sum {}); \
             each bucket within 1% of the probe's count ({slack:.1}): at most {worst} apart",
            n.counts, n.sum, p.counts, p.sum
        ),
    );
    let share = |zero: u64, all: u64| zero as f64 / all.max(1) as f64;
    let (a, b) = (share(n.counts[0], nc), share(p.counts[0], pc));
    rep.check(
        (a - b).abs() <= DEPTH0_POINTS,
        format!(
            "{run}: {name} ({ip}) depth-0 share over the run: nfsdtop {:.2}% ({} of {nc}), \
             probe {:.2}% ({} of {pc}): within one point",
            a * 100.0,
            n.counts[0],
            b * 100.0,
            p.counts[0]
        ),
    );
}

/// Per client of nfsd (server port 2049; listeners, UDP and other
/// services left out as the tracepoint's records are): the probe's calls
/// and, of those that are real enqueues by `rule` on flags named as the
/// tracepoint names them (`names`: its print fmt's), the depths.
fn probe_depths(
    trace: &str,
    names: &BTreeMap<String, u64>,
    rule: EnqueueRule,
) -> BTreeMap<IpAddr, Probed> {
    let mut out: BTreeMap<IpAddr, Probed> = BTreeMap::new();
    for line in trace.lines() {
        let Some((_, rest)) = line.split_once(EVENT) else {
            continue;
        };
        let (Some(nr), Some(flags), Some(remote), Some(local)) = (
            field(rest, "nr").and_then(|v| v.parse::<i64>().ok()),
            field(rest, "fl").and_then(hex),
            field(rest, "ra").and_then(bytes),
            field(rest, "la").and_then(bytes),
        ) else {
            continue;
        };
        // The tracepoint's own text, so that its helpers judge it.
        let client = sockaddr(&remote).map_or("(einval)".into(), |a| a.to_string());
        let server = sockaddr(&local).map_or("(einval)".into(), |a| a.to_string());
        let flags = flag_names(flags, names);
        let text = format!("server={server} client={client} flags={flags}");
        if other_service(&text).is_some() || is_listener(&text) {
            continue;
        }
        let Ok(client) = client.parse::<SocketAddr>() else {
            continue;
        };
        let p = out.entry(client.ip()).or_default();
        p.calls += 1;
        if rule.queues(&flags) {
            let depth = u32::try_from(nr).unwrap_or(0);
            let bucket = DEPTH_LOWER.iter().rposition(|&lo| depth >= lo).unwrap_or(0);
            p.counts[bucket] += 1;
            p.sum += nr;
        }
    }
    out
}

/// `0x1a` → 26.
fn hex(v: &str) -> Option<u64> {
    u64::from_str_radix(v.strip_prefix("0x")?, 16).ok()
}

/// `{0xa,0x0,0x3}` → [10, 0, 3].
fn bytes(v: &str) -> Option<Vec<u8>> {
    let inner = v.strip_prefix('{')?.strip_suffix('}')?;
    inner
        .split(',')
        .map(|b| u8::try_from(hex(b)?).ok())
        .collect()
}

/// A `struct sockaddr_storage`'s bytes as the kernel keeps them (x86: the
/// family in host order, then the port and the address in network order):
/// `sockaddr_in` (AF_INET 2) or `sockaddr_in6` (AF_INET6 10); None for
/// any other family (an unset address).
fn sockaddr(b: &[u8]) -> Option<SocketAddr> {
    let family = u16::from_le_bytes([*b.first()?, *b.get(1)?]);
    let port = u16::from_be_bytes([*b.get(2)?, *b.get(3)?]);
    let ip = match family {
        2 => IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(b.get(4..8)?).ok()?)),
        10 => IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(b.get(8..24)?).ok()?)),
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// `flags` as the tracepoint prints them: the names of its bits joined by
/// `|`, bits without a name in hex.
fn flag_names(flags: u64, names: &BTreeMap<String, u64>) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut left = flags;
    let mut by_bit: Vec<(&u64, &String)> = names.iter().map(|(n, m)| (m, n)).collect();
    by_bit.sort();
    for (mask, name) in by_bit {
        if flags & mask == *mask && *mask != 0 {
            out.push(name.clone());
            left &= !mask;
        }
    }
    if left != 0 {
        out.push(format!("{left:#x}"));
    }
    out.join("|")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-made probe records: c1 (IPv4) at depths 0, 1 and 3, one of
    /// them a BUSY attempt; c3 (IPv6) at 70; a listener and a lockd
    /// connection left out.
    #[test]
    fn probe_records_by_client_and_bucket() {
        let names: BTreeMap<String, u64> =
            [("BUSY", 1), ("CONN", 2), ("DATA", 8), ("LISTENER", 512)]
                .map(|(n, m)| (n.to_string(), m))
                .into();
        let v4 = |port: u16, last: u8| {
            let p = port.to_be_bytes();
            format!("{{0x2,0x0,{:#x},{:#x},0xa,0x63,0x1,{last:#x}}}", p[0], p[1])
        };
        let c3 = "{0xa,0x0,0x3,0x15,0x0,0x0,0x0,0x0,0xfd,0x99,0x0,0x3,0x0,0x0,0x0,0x0,0x0,0x0,0x0,0x0,0x0,0x0,0x0,0x2}";
        let s3 = "{0xa,0x0,0x8,0x1,0x0,0x0,0x0,0x0,0xfd,0x99,0x0,0x3,0x0,0x0,0x0,0x0,0x0,0x0,0x0,0x0,0x0,0x0,0x0,0x1}";
        let line = |nr: i32, fl: u64, ra: &str, la: &str| {
            format!(" nfsd-1 [000] ..... 1.0: depth_at_enqueue: (svc_xprt_enqueue+0x4/0x100 [sunrpc]) nr={nr} fl={fl:#x} ra={ra} la={la}\n")
        };
        let (c1, s1) = (v4(700, 2), v4(2049, 1));
        let mut t = String::new();
        t += &line(0, 8, &c1, &s1);
        t += &line(1, 8, &c1, &s1);
        t += &line(3, 8, &c1, &s1);
        t += &line(2, 9, &c1, &s1); // BUSY: a call, not an enqueue
        t += &line(70, 8, c3, s3);
        t += &line(
            0,
            2 | 512,
            "{0x0,0x0,0x0,0x0}",
            "{0x2,0x0,0x8,0x1,0x0,0x0,0x0,0x0}",
        );
        t += &line(0, 8, &c1, &v4(4045, 1)); // lockd
        let got = probe_depths(&t, &names, EnqueueRule::Attempts);
        let ip1: IpAddr = "10.99.1.2".parse().unwrap();
        let ip3: IpAddr = "fd99:3::2".parse().unwrap();
        assert_eq!(got.len(), 2, "{:?}", got.keys().collect::<Vec<_>>());
        assert_eq!(got[&ip1].counts, [1, 1, 1, 0, 0, 0, 0, 0]);
        assert_eq!((got[&ip1].calls, got[&ip1].sum), (4, 4));
        assert_eq!(got[&ip3].counts, [0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(flag_names(9 | 0x40000, &names), "BUSY|DATA|0x40000");
    }
}
