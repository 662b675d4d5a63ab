//! Batch output: the JSON contract of docs/json.md (one object per line per
//! iteration), a `top -b`-like text table, and CSV.

use std::fmt::Write as _;

use serde::Serialize;

use crate::model::{EntityKind, EntityStats, Snapshot, SourceInfo};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Csv,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(Format::Text),
            "json" => Ok(Format::Json),
            "csv" => Ok(Format::Csv),
            o => Err(format!("unknown format {o:?}: expected text, json or csv")),
        }
    }
}

#[derive(Serialize)]
struct BatchTotals {
    dispatches: u64,
    dispatch_rate: f64,
    backlogged: u64,
    jain: f64,
    wait_p50_us: f64,
    wait_p99_us: f64,
    events_lost: u64,
    peers: u64,
    classes: u64,
    peers_evicted: u64,
    transports: u64,
    transports_evicted: u64,
    /// Whole-run p50 of the wait source in use and of the agent's own
    /// enqueue→dequeue waits, with their histogram bucket indices: on
    /// 6.16+ the two sources can be compared bucket for bucket.
    /// Dequeue records the kernel could not hand over (ring full), from
    /// the per-CPU loss counters: dispatches + lost_dispatches is the
    /// kernel's dispatch count even when records were lost.
    lost_dispatches: u64,
    run_wait_p50_us: f64,
    run_wait_p50_bucket: Option<usize>,
    own_wait_p50_us: f64,
    own_wait_p50_bucket: Option<usize>,
}

#[derive(Serialize)]
struct BatchEntity<'a> {
    name: &'a str,
    kind: &'static str,
    class: &'a str,
    dispatches: u64,
    dispatch_rate: f64,
    share: f64,
    entitled: f64,
    fairness: Option<f64>,
    wait_p50_us: f64,
    wait_p99_us: f64,
    exec_share: f64,
    connections: u64,
    fair_share: f64,
    backlogged_seconds: f64,
    exec_seconds: f64,
    executions: u64,
}

#[derive(Serialize)]
struct BatchRecord<'a> {
    time: f64,
    interval_s: f64,
    source: &'a SourceInfo,
    totals: BatchTotals,
    entities: Vec<BatchEntity<'a>>,
}

/// The order of entity names: addresses by value (10.0.0.2 before
/// 10.0.0.10, IPv4 before IPv6), then other names as text. A total order,
/// so sorts that fall back on it are stable from one snapshot to the next.
pub fn name_order(a: &str, b: &str) -> std::cmp::Ordering {
    use std::net::IpAddr;
    match (a.parse::<IpAddr>(), b.parse::<IpAddr>()) {
        (Ok(x), Ok(y)) => x.cmp(&y).then_with(|| a.cmp(b)),
        (Ok(_), Err(_)) => std::cmp::Ordering::Less,
        (Err(_), Ok(_)) => std::cmp::Ordering::Greater,
        (Err(_), Err(_)) => a.cmp(b),
    }
}

pub fn top_entities(s: &Snapshot, group: EntityKind, top: Option<usize>) -> &[EntityStats] {
    let all = s.entities(group);
    &all[..top.unwrap_or(all.len()).min(all.len())]
}

/// One line of the batch JSON contract.
pub fn json_line(s: &Snapshot, group: EntityKind, top: Option<usize>) -> String {
    let (backlogged, jain) = match group {
        EntityKind::Peer => (s.totals.backlogged, s.totals.jain),
        EntityKind::Class => (s.totals.backlogged_classes, s.totals.jain_classes),
    };
    let rec = BatchRecord {
        time: s.time,
        interval_s: s.interval_s,
        source: &s.source,
        totals: BatchTotals {
            dispatches: s.totals.dispatches,
            dispatch_rate: s.totals.dispatch_rate,
            backlogged,
            jain,
            wait_p50_us: s.totals.wait_p50_us,
            wait_p99_us: s.totals.wait_p99_us,
            events_lost: s.totals.events_lost,
            lost_dispatches: s
                .totals
                .lost_by_tracepoint
                .iter()
                .find(|(t, _)| t == "svc_xprt_dequeue")
                .map_or(0, |(_, n)| *n),
            run_wait_p50_us: s.totals.wait_histogram.quantile_us(0.5),
            run_wait_p50_bucket: s.totals.wait_histogram.bucket_index_of_quantile(0.5),
            own_wait_p50_us: s.totals.own_wait_histogram.quantile_us(0.5),
            own_wait_p50_bucket: s.totals.own_wait_histogram.bucket_index_of_quantile(0.5),
            peers: s.totals.peers,
            classes: s.totals.classes,
            peers_evicted: s.totals.peers_evicted,
            transports: s.totals.transports,
            transports_evicted: s.totals.transports_evicted,
        },
        entities: top_entities(s, group, top)
            .iter()
            .map(|e| BatchEntity {
                name: &e.name,
                kind: e.kind.as_str(),
                class: &e.class,
                dispatches: e.dispatches,
                dispatch_rate: e.dispatch_rate,
                share: e.share,
                entitled: e.entitled,
                fairness: e.fairness,
                wait_p50_us: e.wait_p50_us,
                wait_p99_us: e.wait_p99_us,
                exec_share: e.exec_share,
                connections: e.connections,
                fair_share: e.fair_share,
                backlogged_seconds: e.backlogged_seconds,
                exec_seconds: e.exec_seconds,
                executions: e.executions,
            })
            .collect(),
    };
    serde_json::to_string(&rec).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

fn fmt_ratio(f: Option<f64>) -> String {
    f.map(|f| format!("{f:.2}")).unwrap_or_else(|| "-".into())
}

/// A `top -b`-like block.
pub fn text_block(s: &Snapshot, group: EntityKind, top: Option<usize>) -> String {
    let t = &s.totals;
    let (backlogged, jain) = match group {
        EntityKind::Peer => (t.backlogged, t.jain),
        EntityKind::Class => (t.backlogged_classes, t.jain_classes),
    };
    let mut o = String::new();
    let _ = writeln!(
        o,
        "nfsdtop - {} {} ({}) wait source: {} - interval {:.2}s",
        s.source.kind.as_str(),
        s.source.detail,
        s.source.generation,
        s.source.wait_source.as_str(),
        s.interval_s
    );
    let _ =
        writeln!(
        o,
        "dispatches {} ({:.0}/s)  backlogged {}  jain {:.3}  wait p50 {:.0}us p99 {:.0}us  lost {}",
        t.dispatches, t.dispatch_rate, backlogged, jain, t.wait_p50_us, t.wait_p99_us, t.events_lost
    );
    let _ = writeln!(
        o,
        "{:<28} {:<16} {:>5} {:>9} {:>7} {:>7} {:>6} {:>9} {:>9} {:>6}",
        group.as_str().to_uppercase(),
        "CLASS",
        "CONN",
        "DISP/S",
        "SHARE",
        "FAIR",
        "RATIO",
        "WAIT_P50",
        "WAIT_P99",
        "EXEC"
    );
    for e in top_entities(s, group, top) {
        let _ = writeln!(
            o,
            "{:<28} {:<16} {:>5} {:>9.1} {:>6.1}% {:>6.1}% {:>6} {:>9.0} {:>9.0} {:>5.1}%",
            truncate(&e.name, 28),
            truncate(&e.class, 16),
            e.connections,
            e.dispatch_rate,
            e.share * 100.0,
            e.fair_share * 100.0,
            fmt_ratio(e.fairness),
            e.wait_p50_us,
            e.wait_p99_us,
            e.exec_share * 100.0
        );
    }
    o
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n - 1).collect();
        t.push('~');
        t
    }
}

pub const CSV_HEADER: &str = "time,kind,name,class,connections,dispatches,dispatch_rate,share,fair_share,entitled,fairness,wait_p50_us,wait_p99_us,exec_share";

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

pub fn csv_rows(s: &Snapshot, group: EntityKind, top: Option<usize>) -> String {
    let mut o = String::new();
    for e in top_entities(s, group, top) {
        let _ = writeln!(
            o,
            "{:.3},{},{},{},{},{},{:.3},{:.6},{:.6},{:.3},{},{:.1},{:.1},{:.6}",
            s.time,
            e.kind.as_str(),
            csv_field(&e.name),
            csv_field(&e.class),
            e.connections,
            e.dispatches,
            e.dispatch_rate,
            e.share,
            e.fair_share,
            e.entitled,
            e.fairness.map(|f| format!("{f:.4}")).unwrap_or_default(),
            e.wait_p50_us,
            e.wait_p99_us,
            e.exec_share
        );
    }
    o
}
