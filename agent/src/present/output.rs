//! Batch output: the JSON contract of docs/json.md (one object per line per
//! iteration), a `top -b`-like text table, and CSV.

use std::borrow::Cow;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

pub use crate::model::BatchEntity;
use crate::model::{EntityKind, EntityStats, Schema, ServerView, Snapshot, SourceInfo, Tracepoint};
use crate::present::fields::{self, Field};
use crate::present::units::fmt_us;
use crate::text::displayable;

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

/// The totals of one batch JSON line (docs/json.md). Public and
/// deserialisable so that readers of the batch output (the QEMU tests in
/// xtask) read the same typed record the agent writes: a renamed or
/// missing field fails to parse instead of reading as 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BatchTotals {
    pub dispatches: u64,
    pub dispatch_rate: f64,
    pub backlogged: u64,
    pub jain: f64,
    pub wait_p50_us: f64,
    pub wait_p99_us: f64,
    pub events_lost: u64,
    pub peers: u64,
    pub classes: u64,
    pub peers_evicted: u64,
    pub transports: u64,
    pub transports_evicted: u64,
    /// Whole-run p50 of the wait source in use and of the agent's own
    /// enqueue→dequeue waits, with their histogram bucket indices: on
    /// 6.16+ the two sources can be compared bucket for bucket.
    /// Dequeue records the kernel could not hand over (ring full), from
    /// the per-CPU loss counters: dispatches + lost_dispatches is the
    /// kernel's dispatch count even when records were lost.
    pub lost_dispatches: u64,
    pub run_wait_p50_us: f64,
    pub run_wait_p50_bucket: Option<usize>,
    pub own_wait_p50_us: f64,
    pub own_wait_p50_bucket: Option<usize>,
    /// As the snapshot's: absent without `--resolve`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname_lookups_dropped: Option<u64>,
    /// As the snapshot's: live only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_s: Option<f64>,
}

/// One line of the batch JSON output; `BatchRecord<'static>` is the
/// owned form a reader deserialises.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BatchRecord<'a> {
    /// The JSON's schema (docs/json.md): first, so a reader sees it
    /// before anything it might misread.
    #[serde(default = "Schema::before_the_field")]
    pub schema: Schema,
    pub time: f64,
    pub interval_s: f64,
    pub source: Cow<'a, SourceInfo>,
    pub totals: BatchTotals,
    pub server: Cow<'a, ServerView>,
    pub entities: Vec<BatchEntity<'a>>,
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

/// The entities of `group` busiest first (most dispatches this
/// interval), ties by [`name_order`], at most `top` of them.
pub fn top_entities(s: &Snapshot, group: EntityKind, top: Option<usize>) -> Vec<&EntityStats> {
    let mut v: Vec<&EntityStats> = s.entities(group).iter().collect();
    v.sort_by(|a, b| {
        b.interval_dispatches
            .cmp(&a.interval_dispatches)
            .then_with(|| name_order(&a.name, &b.name))
    });
    v.truncate(top.unwrap_or(usize::MAX));
    v
}

/// The peers of a class entity: those the class map put in it (a
/// `per-peer` class's entities are `CLASS/ADDRESS`, one peer each).
pub fn peers_of<'a>(
    s: &'a Snapshot,
    class: &'a EntityStats,
) -> impl Iterator<Item = &'a EntityStats> {
    s.peers.iter().filter(move |p| {
        p.class == class.name
            || class
                .name
                .strip_prefix(p.class.as_str())
                .and_then(|r| r.strip_prefix('/'))
                == Some(p.name.as_str())
    })
}

/// How many peers each of `s.classes` holds, in its order: one pass over
/// the peers (a class entity is the peer's class, or `CLASS/ADDRESS` for
/// a `per-peer` class).
pub fn peer_counts(s: &Snapshot) -> Vec<u32> {
    let index: std::collections::HashMap<&str, usize> = s
        .classes
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name.as_str(), i))
        .collect();
    let mut counts = vec![0u32; s.classes.len()];
    for p in &s.peers {
        let hit = index
            .get(p.class.as_str())
            .or_else(|| index.get(format!("{}/{}", p.class, p.name).as_str()));
        if let Some(&i) = hit {
            counts[i] += 1;
        }
    }
    counts
}

/// One line of the batch JSON contract.
pub fn json_line(s: &Snapshot, group: EntityKind, top: Option<usize>) -> String {
    let (backlogged, jain) = match group {
        EntityKind::Peer => (s.totals.backlogged, s.totals.jain),
        EntityKind::Class => (s.totals.backlogged_classes, s.totals.jain_classes),
    };
    let rec = BatchRecord {
        schema: Schema::default(),
        time: s.time,
        interval_s: s.interval_s,
        source: Cow::Borrowed(&s.source),
        server: Cow::Borrowed(&s.server),
        totals: BatchTotals {
            dispatches: s.totals.dispatches,
            dispatch_rate: s.totals.dispatch_rate,
            backlogged,
            jain,
            wait_p50_us: s.totals.wait_p50_us,
            wait_p99_us: s.totals.wait_p99_us,
            events_lost: s.totals.events_lost,
            lost_dispatches: s.totals.lost_by_tracepoint[Tracepoint::Dequeue],
            run_wait_p50_us: s.totals.wait_histogram.quantile_us(0.5),
            run_wait_p50_bucket: s.totals.wait_histogram.bucket_index_of_quantile(0.5),
            own_wait_p50_us: s.totals.own_wait_histogram.quantile_us(0.5),
            own_wait_p50_bucket: s.totals.own_wait_histogram.bucket_index_of_quantile(0.5),
            peers: s.totals.peers,
            classes: s.totals.classes,
            peers_evicted: s.totals.peers_evicted,
            transports: s.totals.transports,
            transports_evicted: s.totals.transports_evicted,
            hostname_lookups_dropped: s.totals.hostname_lookups_dropped,
            lag_s: s.totals.lag_s,
        },
        entities: top_entities(s, group, top)
            .into_iter()
            .map(BatchEntity::from)
            .collect(),
    };
    serde_json::to_string(&rec).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

/// A peer's NFSv4 client in a few characters: a Linux client's name
/// without its "Linux NFSv4.x " prefix (what is left is the host), and
/// how many more there are at the address; without one, its host name
/// (`--resolve`), if known; else empty.
pub fn client_label(e: &EntityStats) -> String {
    let Some(first) = e.client_names.first() else {
        return e.hostname.clone().unwrap_or_default();
    };
    let short = first
        .name
        .strip_prefix("Linux NFSv4.")
        .and_then(|r| r.split_once(' '))
        .map_or(first.name.as_str(), |(_, host)| host);
    match e.client_names.len() {
        1 => short.to_string(),
        n => format!("{short} +{}", n - 1),
    }
}

/// A `top -b`-like block: the UI's columns and units, every name whole
/// (columns as wide as the longest shown), classes with their peer count
/// instead of a class column.
pub fn text_block(s: &Snapshot, group: EntityKind, top: Option<usize>) -> String {
    let t = &s.totals;
    let (backlogged, jain) = match group {
        EntityKind::Peer => (t.backlogged, t.jain),
        EntityKind::Class => (t.backlogged_classes, t.jain_classes),
    };
    let rows = top_entities(s, group, top);
    let mut o = String::new();
    let _ = writeln!(
        o,
        "nfsdtop - {} {} ({}) wait source: {} - interval {:.2}s",
        s.source.kind.as_str(),
        displayable(&s.source.detail),
        displayable(&s.source.generation),
        s.source.wait_source.as_str(),
        s.interval_s
    );
    let _ = writeln!(
        o,
        "dispatches {} since start, {:.0}/s  backlogged {backlogged}  jain {jain:.3}  \
         wait of all dispatches p50 {} p99 {}  lost {}",
        t.dispatches,
        t.dispatch_rate,
        fmt_us(t.wait_p50_us),
        fmt_us(t.wait_p99_us),
        t.events_lost
    );
    let first = group.as_str().to_uppercase();
    // Every name as a terminal can draw it (crate::text).
    let names: Vec<String> = rows.iter().map(|e| displayable(&e.name)).collect();
    let nw = names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(0)
        .max(first.len());
    // Peers: their class; classes: how many peers they hold.
    let (second, cells): (&str, Vec<String>) = match group {
        EntityKind::Peer => (
            "CLASS",
            rows.iter().map(|e| displayable(&e.class)).collect(),
        ),
        EntityKind::Class => {
            let counts: std::collections::HashMap<&str, u32> = s
                .classes
                .iter()
                .map(|c| c.name.as_str())
                .zip(peer_counts(s))
                .collect();
            let of = |e: &EntityStats| counts.get(e.name.as_str()).copied().unwrap_or(0);
            ("PEERS", rows.iter().map(|e| of(e).to_string()).collect())
        }
    };
    let cw = cells
        .iter()
        .map(|c| c.chars().count())
        .max()
        .unwrap_or(0)
        .max(second.len());
    // A class's peer count is a number: right-aligned.
    let second = match group {
        EntityKind::Peer => format!("{second:<cw$}"),
        EntityKind::Class => format!("{second:>cw$}"),
    };
    // Peers' client names (or host names), last and only where a shown
    // peer has one: the other columns keep their places.
    let labels: Vec<String> = match group {
        EntityKind::Peer => rows.iter().map(|e| displayable(&client_label(e))).collect(),
        EntityKind::Class => Vec::new(),
    };
    let named = labels.iter().any(|l| !l.is_empty());
    let label_cell = |i: usize| match labels.get(i) {
        Some(l) if named => format!(" {l}"),
        _ => String::new(),
    };
    let mut head = format!("{first:<nw$} {second}");
    for (_, t) in fields::text_columns() {
        let _ = write!(head, " {:>w$}", t.title, w = t.width);
    }
    let _ = writeln!(o, "{head}{}", if named { " CLIENT" } else { "" });
    for (i, ((e, c), name)) in rows.iter().zip(&cells).zip(&names).enumerate() {
        let c = match group {
            EntityKind::Peer => format!("{c:<cw$}"),
            EntityKind::Class => format!("{c:>cw$}"),
        };
        let _ = write!(o, "{name:<nw$} {c}");
        for (f, t) in fields::text_columns() {
            let _ = write!(o, " {:>w$}", f.show(e), w = t.width);
        }
        let _ = writeln!(o, "{}", label_cell(i));
    }
    o
}

/// The CSV header. `*_total` columns are cumulative (since the source
/// started, or since the aggregator first saw the entity); the others
/// cover the interval. The workload columns come last, so that readers
/// of the older columns by position still read them; bytes are empty
/// where not measured. Each iteration ends with a `total` row: the whole
/// server (connections = its transports, share 1, waits of every
/// dispatch, the workload rates of every peer; no workload totals, as
/// peers forgotten take theirs with them). Then a peer's NFSv4 client
/// names (`; ` between several; the JSON's `client_names` has each
/// whole, with its minor version and implementation) and its host name
/// (`--resolve`), empty where unknown and for classes.
pub fn csv_header() -> String {
    let mut h = String::from("time,interval_s,source,kind,name,class");
    let cols = |after| fields::csv_columns(after).map(|(_, c)| c.header);
    for c in cols(false) {
        h.push(',');
        h.push_str(c);
    }
    h.push_str(",client_names,hostname");
    for c in cols(true) {
        h.push(',');
        h.push_str(c);
    }
    h
}

/// A text cell: shown as a terminal or spreadsheet can ([`displayable`]),
/// and never read as a formula. As OWASP recommends against CSV
/// injection, a cell beginning with `=`, `+`, `-`, `@`, tab or carriage
/// return is prefixed with `'` and quoted, so that a spreadsheet shows it
/// as text instead of evaluating it (a client chooses its NFSv4 name, a
/// PTR record its host name). Quotes inside are doubled.
fn csv_field(s: &str) -> String {
    let s = displayable(s);
    let formula = s.starts_with(['=', '+', '-', '@', '\t', '\r']);
    if formula {
        format!("\"'{}\"", s.replace('"', "\"\""))
    } else if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

pub fn csv_rows(s: &Snapshot, group: EntityKind, top: Option<usize>) -> String {
    let mut o = String::new();
    let source = csv_field(s.source.kind.as_str());
    let lead = format!("{:.3},{:.3},{source}", s.time, s.interval_s);
    let cells = |after: bool, cell: &dyn Fn(&Field) -> String| -> String {
        fields::csv_columns(after)
            .map(|(f, _)| format!(",{}", cell(f)))
            .collect()
    };
    for e in top_entities(s, group, top) {
        let names = e
            .client_names
            .iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>()
            .join("; ");
        let _ = writeln!(
            o,
            "{lead},{},{},{}{},{},{}{}",
            e.kind.as_str(),
            csv_field(&e.name),
            csv_field(&e.class),
            cells(false, &|f| f.csv_cell(e)),
            csv_field(&names),
            csv_field(e.hostname.as_deref().unwrap_or_default()),
            cells(true, &|f| f.csv_cell(e)),
        );
    }
    // The whole server: every field's total (fields::Total).
    let _ = writeln!(
        o,
        "{lead},total,total,{},,{}",
        cells(false, &|f| f.csv_total(s)),
        cells(true, &|f| f.csv_total(s)),
    );
    o
}

#[cfg(test)]
#[path = "output_tests.rs"]
mod tests;
