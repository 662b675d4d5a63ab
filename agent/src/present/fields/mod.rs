//! The per-entity field table: one entry per number a peer or class row
//! shows, with everything each surface needs to show it — its JSON key,
//! unit, typed value, CSV column, batch-text column, TUI column (title,
//! width, place in each view, when it gives way on a narrow terminal), the
//! Prometheus family it comes from and the manual's sentence. The TUI's
//! table, filter and drill-down, the batch text and CSV
//! ([`crate::present::output`]) and the manual read it; the JSON contracts, the
//! metric families and the docs are checked against it (tests). A new
//! per-entity number is a new entry in [`FIELDS`], in the place its CSV
//! and batch-text columns go (see ARCHITECTURE.md).
//!
//! The identity columns (name, class, a class's peer count, the clients'
//! names) are not numbers and stay with each surface.

mod field;

pub use field::{Csv, Field, Place, Text, Total, Tui, Value};

use super::units::Unit;
use crate::model::Snapshot;

const fn int(n: u64) -> Option<Value> {
    Some(Value::Int(n))
}

const fn real(x: f64) -> Option<Value> {
    Some(Value::Real(x))
}

const fn csv(header: &'static str, decimals: usize) -> Option<Csv> {
    Some(Csv {
        header,
        decimals,
        after_names: false,
    })
}

const fn text(title: &'static str, width: usize) -> Option<Text> {
    Some(Text { title, width })
}

const fn at(order: u8, drop: Option<u8>) -> Option<Place> {
    Some(Place { order, drop })
}

/// The whole server's share of everything: 1 once anything was
/// dispatched (the CSV's `total` row).
fn server_share(s: &Snapshot) -> Option<Value> {
    real(if s.totals.dispatch_rate > 0.0 {
        1.0
    } else {
        0.0
    })
}

/// The server's mean execution time a request this interval: the peers'
/// thread time over their requests (their means in flight are thread
/// time over the interval, their rates requests over it).
fn server_exec_mean(s: &Snapshot) -> Option<Value> {
    let requests: f64 = s.peers.iter().map(|p| p.request_rate).sum();
    let inflight: f64 = s.peers.iter().map(|p| p.inflight_mean).sum();
    (requests > 0.0).then(|| Value::Real(inflight / requests * 1e6))
}

pub const CONNECTIONS: Field = Field {
    json: "connections",
    unit: Unit::Count,
    value: |e| int(e.connections),
    csv: csv("connections", 0),
    total: Total::Server(|s| int(s.totals.transports)),
    text: text("CONN", 5),
    tui: Some(Tui {
        title: "CONN",
        label: "connections",
        width: 5,
        fairness: at(10, Some(60)),
        workload: at(10, Some(10)),
    }),
    prometheus: Some("connections"),
    doc: "its transports (connections) now",
};

pub const DISPATCHES: Field = Field {
    json: "dispatches",
    unit: Unit::Count,
    value: |e| int(e.dispatches),
    csv: csv("dispatches_total", 0),
    total: Total::Server(|s| int(s.totals.dispatches)),
    text: None,
    tui: None,
    prometheus: Some("dispatches_total"),
    doc: "dispatches since the start",
};

pub const DISPATCH_RATE: Field = Field {
    json: "dispatch_rate",
    unit: Unit::PerSecond,
    value: |e| real(e.dispatch_rate),
    csv: csv("dispatch_rate", 3),
    total: Total::Server(|s| real(s.totals.dispatch_rate)),
    text: text("DISP/S", 8),
    tui: Some(Tui {
        title: "DISP/S",
        label: "dispatches/s",
        width: 7,
        fairness: at(20, Some(80)),
        workload: None,
    }),
    prometheus: Some("dispatches_total"),
    doc: "dispatches per second, interval: one dispatch is one svc_xprt_dequeue, an nfsd thread taking one request",
};

pub const SHARE: Field = Field {
    json: "share",
    unit: Unit::Percent,
    value: |e| real(e.share),
    csv: csv("share", 6),
    total: Total::Server(server_share),
    text: text("SHARE", 6),
    tui: Some(Tui {
        title: "SHARE",
        label: "share",
        width: 6,
        fairness: at(30, None),
        workload: at(60, Some(50)),
    }),
    prometheus: Some("dispatches_total"),
    doc: "its dispatches / all dispatches, interval",
};

pub const FAIR_SHARE: Field = Field {
    json: "fair_share",
    unit: Unit::Percent,
    value: |e| real(e.fair_share),
    csv: csv("fair_share", 6),
    total: Total::Server(server_share),
    text: text("FAIR", 6),
    tui: Some(Tui {
        title: "FAIR",
        label: "fair share",
        width: 6,
        fairness: at(40, Some(70)),
        workload: None,
    }),
    prometheus: Some("entitled_dispatches_total"),
    doc: "its fair share, interval: at every dispatch each of the n entities with work queued (backlogged) earns 1/n; FAIR is what it earned / all dispatches",
};

pub const ENTITLED: Field = Field {
    json: "entitled",
    unit: Unit::Ratio,
    value: |e| real(e.entitled),
    csv: csv("entitled_total", 3),
    total: Total::Empty,
    text: None,
    tui: None,
    prometheus: Some("entitled_dispatches_total"),
    doc: "fair-share dispatches earned since the start",
};

pub const FAIRNESS: Field = Field {
    json: "fairness",
    unit: Unit::Ratio,
    value: |e| e.fairness.map(Value::Real),
    csv: csv("fairness", 4),
    total: Total::Empty,
    text: text("RATIO", 6),
    tui: Some(Tui {
        title: "RATIO",
        label: "ratio",
        width: 6,
        fairness: at(50, None),
        workload: None,
    }),
    prometheus: Some("entitled_dispatches_total"),
    doc: "dispatches / fair share, interval: 1.00 is its fair turn, 0.22 is 22% of it, above 1 more than its turn, \\- when it was neither backlogged nor dispatched. Rows below 0.9 are yellow, below 0.5 red: at once when clearly below (0.72, 0.4), else after two refreshes below, and back only once clearly above (0.99, 0.55), so a ratio near a threshold does not flicker",
};

pub const WAIT_P50: Field = Field {
    json: "wait_p50_us",
    unit: Unit::Micros,
    value: |e| real(e.wait_p50_us),
    csv: csv("wait_p50_us", 1),
    total: Total::Server(|s| real(s.totals.wait_p50_us)),
    text: text("WAIT_P50", 9),
    tui: Some(Tui {
        title: "WAIT50",
        label: "wait p50",
        width: 7,
        fairness: at(60, Some(30)),
        workload: None,
    }),
    prometheus: Some("queue_wait_seconds"),
    doc: "median of its queue wait (ready to taken by a thread), interval; the header says which wait is measured (the kernel's qtime on 6.16+, else nfsdtop's enqueue to dequeue)",
};

pub const WAIT_P99: Field = Field {
    json: "wait_p99_us",
    unit: Unit::Micros,
    value: |e| real(e.wait_p99_us),
    csv: csv("wait_p99_us", 1),
    total: Total::Server(|s| real(s.totals.wait_p99_us)),
    text: text("WAIT_P99", 9),
    tui: Some(Tui {
        title: "WAIT99",
        label: "wait p99",
        width: 7,
        fairness: at(70, None),
        workload: None,
    }),
    prometheus: Some("queue_wait_seconds"),
    doc: "99th percentile of its queue wait, interval",
};

pub const EXEC_SHARE: Field = Field {
    json: "exec_share",
    unit: Unit::Percent,
    value: |e| real(e.exec_share),
    csv: csv("exec_share", 6),
    total: Total::Server(server_share),
    text: text("EXEC", 6),
    tui: Some(Tui {
        title: "EXEC",
        label: "exec share",
        width: 6,
        fairness: at(80, Some(10)),
        workload: at(50, Some(20)),
    }),
    prometheus: Some("execution_seconds_total"),
    doc: "its share of nfsd thread time (svc_stats_latency execute), interval: round\\-robin evens out dispatches, not thread time",
};

pub const REQUESTS: Field = Field {
    json: "requests",
    unit: Unit::Count,
    value: |e| int(e.requests),
    csv: csv("requests_total", 0),
    total: Total::Empty,
    text: None,
    tui: None,
    prometheus: Some("requests_total"),
    doc: "requests answered since the start",
};

pub const REQUEST_RATE: Field = Field {
    json: "request_rate",
    unit: Unit::PerSecond,
    value: |e| real(e.request_rate),
    csv: csv("request_rate", 3),
    total: Total::Server(|s| real(s.peers.iter().map(|p| p.request_rate).sum())),
    text: text("OPS/S", 8),
    tui: Some(Tui {
        title: "OPS/S",
        label: "ops/s",
        width: 7,
        fairness: None,
        workload: at(20, None),
    }),
    prometheus: Some("requests_total"),
    doc: "the workload view: requests answered per second (svc_stats_latency), interval",
};

pub const BYTES_IN: Field = Field {
    json: "bytes_in",
    unit: Unit::Count,
    value: |e| e.bytes_in.map(Value::Int),
    csv: csv("bytes_in_total", 0),
    total: Total::Empty,
    text: None,
    tui: None,
    prometheus: Some("received_bytes_total"),
    doc: "bytes received since the start",
};

pub const BYTES_OUT: Field = Field {
    json: "bytes_out",
    unit: Unit::Count,
    value: |e| e.bytes_out.map(Value::Int),
    csv: csv("bytes_out_total", 0),
    total: Total::Empty,
    text: None,
    tui: None,
    prometheus: Some("sent_bytes_total"),
    doc: "bytes sent since the start",
};

pub const BYTES_IN_RATE: Field = Field {
    json: "bytes_in_rate",
    unit: Unit::BytesPerSecond,
    value: |e| e.bytes_in_rate.map(Value::Real),
    csv: csv("bytes_in_rate", 3),
    total: Total::SumOfPeers,
    text: text("IN/S", 10),
    tui: Some(Tui {
        title: "IN/S",
        label: "bytes in/s",
        // "1023KiB/s" and the sort arrow's room.
        width: 10,
        fairness: None,
        workload: at(30, Some(60)),
    }),
    prometheus: Some("received_bytes_total"),
    doc: "the workload view: bytes its requests brought in per second, RPC headers included (rq_arg.len), interval, in binary units (4.20KiB/s, 35.9MiB/s); \\- where not measured (the classic tracepoint has no lengths), never 0",
};

pub const BYTES_OUT_RATE: Field = Field {
    json: "bytes_out_rate",
    unit: Unit::BytesPerSecond,
    value: |e| e.bytes_out_rate.map(Value::Real),
    csv: csv("bytes_out_rate", 3),
    total: Total::SumOfPeers,
    text: text("OUT/S", 10),
    tui: Some(Tui {
        title: "OUT/S",
        label: "bytes out/s",
        width: 10,
        fairness: None,
        workload: at(40, None),
    }),
    prometheus: Some("sent_bytes_total"),
    doc: "the workload view: bytes its replies sent per second (rq_res.len), as IN/S. The drill\\-down shows the requests and bytes since the start beside their rates, and the requests per RPC procedure (the kernel's names): each one's rate, share of the client's requests this interval, mean execution time, and P99, the 99th percentile of those requests whose execution time arrived one by one (every one on classic tracepoints; on raw ones those the kernel did not add up with others; \\- where none did)",
};

pub const INFLIGHT: Field = Field {
    json: "inflight_mean",
    unit: Unit::Ratio,
    value: |e| real(e.inflight_mean),
    csv: Some(Csv {
        header: "inflight_mean",
        decimals: 3,
        after_names: true,
    }),
    total: Total::SumOfPeers,
    text: text("INFLT", 6),
    tui: Some(Tui {
        title: "INFLT",
        label: "in flight",
        width: 6,
        fairness: None,
        workload: at(45, Some(15)),
    }),
    prometheus: Some("execution_seconds_total"),
    doc: "the workload view: its requests in flight, mean over the interval: its nfsd thread time in the interval / the interval's length (a request counts while it executes, not while it waits in the queue); 2.00 is two threads busy with it throughout, and the peers' add up to the header's busy threads",
};

pub const DEPTH0_SHARE: Field = Field {
    json: "depth0_share",
    unit: Unit::Percent,
    value: |e| e.depth0_share.map(Value::Real),
    csv: Some(Csv {
        header: "depth0_share",
        decimals: 6,
        after_names: true,
    }),
    total: Total::Empty,
    text: None,
    tui: None,
    prometheus: Some("enqueue_depth"),
    doc: "the drill\\-down: of its transports' enqueues this interval, the share that found nothing in flight (the kernel's xpt_nr_rqsts 0: every request it had sent was answered); a sparse\\-flow queue protects a flow only while about 1 in 64 of its enqueues are at depth 0. \\- where not measured",
};

pub const DEPTH_MEAN: Field = Field {
    json: "enqueue_depth_mean",
    unit: Unit::Ratio,
    value: |e| e.enqueue_depth_mean.map(Value::Real),
    csv: Some(Csv {
        header: "enqueue_depth_mean",
        decimals: 3,
        after_names: true,
    }),
    total: Total::Empty,
    text: None,
    tui: None,
    prometheus: Some("enqueue_depth"),
    doc: "the drill\\-down: the mean of its requests in flight at its enqueues this interval, beside the since\\-start histogram (0, 1, 2\\-3, 4\\-7, 8 and more)",
};

pub const DEPTH_MAX: Field = Field {
    json: "enqueue_depth_max",
    unit: Unit::Count,
    value: |e| e.enqueue_depth_max.map(|d| Value::Int(u64::from(d))),
    csv: Some(Csv {
        header: "enqueue_depth_max",
        decimals: 0,
        after_names: true,
    }),
    total: Total::Empty,
    text: None,
    tui: None,
    prometheus: None,
    doc: "the drill\\-down: the most requests one of its transports had in flight at one of its enqueues this interval (the interval's peak as the kernel's count shows it when the transport is queued; a client with several connections can have more in flight over all of them). \\- where not measured",
};

pub const EXEC_MEAN: Field = Field {
    json: "exec_mean_us",
    unit: Unit::Micros,
    value: |e| e.exec_mean_us.map(Value::Real),
    csv: Some(Csv {
        header: "exec_mean_us",
        decimals: 1,
        after_names: true,
    }),
    total: Total::Server(server_exec_mean),
    text: text("EXEC/OP", 9),
    tui: Some(Tui {
        title: "EXEC/OP",
        label: "exec per op",
        width: 8,
        fairness: None,
        workload: at(47, Some(5)),
    }),
    prometheus: Some("execution_seconds_total"),
    doc: "the workload view: its requests' mean execution time this interval (svc_stats_latency execute, receive to send: the nfsd thread time one of its requests costs); OPS/S times EXEC/OP is INFLT. \\- where none finished",
};

/// Every per-entity number, in the order of the CSV's and the batch
/// text's columns.
pub const FIELDS: &[Field] = &[
    CONNECTIONS,
    DISPATCHES,
    DISPATCH_RATE,
    SHARE,
    FAIR_SHARE,
    ENTITLED,
    FAIRNESS,
    WAIT_P50,
    WAIT_P99,
    EXEC_SHARE,
    REQUESTS,
    REQUEST_RATE,
    BYTES_IN,
    BYTES_OUT,
    BYTES_IN_RATE,
    BYTES_OUT_RATE,
    INFLIGHT,
    DEPTH0_SHARE,
    DEPTH_MEAN,
    DEPTH_MAX,
    EXEC_MEAN,
];

/// The fields with a batch-text column, in order.
pub fn text_columns() -> impl Iterator<Item = (&'static Field, Text)> {
    FIELDS.iter().filter_map(|f| f.text.map(|t| (f, t)))
}

/// The fields with a CSV column, in order: those before the clients'
/// names (`false`) or after them (`true`).
pub fn csv_columns(after_names: bool) -> impl Iterator<Item = (&'static Field, Csv)> {
    FIELDS
        .iter()
        .filter_map(|f| f.csv.map(|c| (f, c)))
        .filter(move |(_, c)| c.after_names == after_names)
}

#[cfg(test)]
mod tests;
