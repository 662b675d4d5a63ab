//! The metric families of /metrics, as tables: each row is a family's name,
//! help, unit, type and the value it reads. [`ENTITY`] holds the
//! per-class and per-peer families (one row gives `nfsdtop_class_<what>`
//! and, where it has peer help, `nfsdtop_peer_<what>`), [`SERVER`] the
//! server-wide ones, [`BPF`] the per-program BPF self-metrics. A new
//! family is a new row; the `encode_*` functions write them in table
//! order: classes, peers, the server's, then the BPF programs'.

use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use nfsdtop_agent::model::{BpfProgramStats, DepthHistogram, DEPTH_LOWER};

use super::MetricsState;
use crate::fold::{Folder, Series};

/// A counter's value (integer or not, written as prometheus-client does).
pub(super) enum CV {
    U(u64),
    F(f64),
}

/// What a per-entity family reads from one series.
pub(super) enum EntityValue {
    Counter(fn(&Series) -> CV),
    /// A counter some sources do not measure: a series without a value
    /// has no sample (absent, not 0).
    MeasuredCounter(fn(&Series) -> Option<CV>),
    Gauge(fn(&Series) -> f64),
    /// The queue-wait histogram (classes only: peers have none).
    QueueWait,
    /// The in-flight depth at enqueue, a histogram where measured (absent
    /// where not).
    EnqueueDepth,
}

pub(super) struct EntityFamily {
    /// The name after `nfsdtop_class_` / `nfsdtop_peer_`.
    pub what: &'static str,
    pub class_help: &'static str,
    /// None: a class-only family.
    pub peer_help: Option<&'static str>,
    pub unit: Option<Unit>,
    pub value: EntityValue,
}

pub(super) const ENTITY: &[EntityFamily] = &[
    EntityFamily {
        what: "dispatches",
        class_help: "Dispatches (svc_xprt_dequeue events) of the class; class other sums the classes beyond the top K.",
        peer_help: Some("Dispatches of the peer (top K peers; peer other sums the rest)."),
        unit: None,
        value: EntityValue::Counter(|s| CV::U(s.counts.dispatches)),
    },
    EntityFamily {
        what: "entitled_dispatches",
        class_help: "Fair-share dispatches the class was entitled to while backlogged (1/n of each dispatch with n entities backlogged). rate(dispatches)/rate(entitled) is the fairness ratio.",
        peer_help: Some("Fair-share dispatches the peer was entitled to while backlogged."),
        unit: None,
        value: EntityValue::Counter(|s| CV::F(s.counts.entitled)),
    },
    EntityFamily {
        what: "execution",
        class_help: "nfsd thread time spent on the class's requests (svc_stats_latency execute).",
        peer_help: Some("nfsd thread time spent on the peer's requests."),
        unit: Some(Unit::Seconds),
        value: EntityValue::Counter(|s| CV::F(s.counts.exec_seconds)),
    },
    EntityFamily {
        what: "requests",
        class_help: "Requests nfsd executed for the class (svc_stats_latency); rate() is its operations per second.",
        peer_help: Some("Requests nfsd executed for the peer (svc_stats_latency)."),
        unit: None,
        value: EntityValue::Counter(|s| CV::U(s.counts.requests)),
    },
    EntityFamily {
        what: "received",
        class_help: "RPC bytes nfsd received from the class (rq_arg.len, headers included); absent where the source does not measure bytes (classic tracepoints).",
        peer_help: Some("RPC bytes nfsd received from the peer (rq_arg.len); absent where not measured."),
        unit: Some(Unit::Bytes),
        value: EntityValue::MeasuredCounter(|s| s.counts.bytes_in.map(CV::U)),
    },
    EntityFamily {
        what: "sent",
        class_help: "RPC bytes nfsd sent to the class (rq_res.len, headers included); absent where the source does not measure bytes (classic tracepoints).",
        peer_help: Some("RPC bytes nfsd sent to the peer (rq_res.len); absent where not measured."),
        unit: Some(Unit::Bytes),
        value: EntityValue::MeasuredCounter(|s| s.counts.bytes_out.map(CV::U)),
    },
    EntityFamily {
        what: "backlogged",
        class_help: "Time the class had at least one transport on the ready queue.",
        peer_help: Some("Time the peer had at least one transport on the ready queue."),
        unit: Some(Unit::Seconds),
        value: EntityValue::Counter(|s| CV::F(s.counts.backlogged_seconds)),
    },
    EntityFamily {
        what: "queue_wait",
        class_help: "Queue wait (enqueue to dequeue) of the class's dispatches; _sum is estimated from bucket midpoints.",
        peer_help: None,
        unit: Some(Unit::Seconds),
        value: EntityValue::QueueWait,
    },
    EntityFamily {
        what: "enqueue_depth",
        class_help: "Requests in flight on the class's transport at each of its enqueues (the kernel's xpt_nr_rqsts); the le=\"0\" bucket over _count is its share of enqueues at depth 0. Absent where not measured.",
        peer_help: Some("Requests in flight on the peer's transport at each of its enqueues (xpt_nr_rqsts); absent where not measured."),
        unit: None,
        value: EntityValue::EnqueueDepth,
    },
    EntityFamily {
        what: "connections",
        class_help: "Transports (connections) of the class now.",
        peer_help: Some("Transports (connections) of the peer now."),
        unit: None,
        value: EntityValue::Gauge(|s| s.connections as f64),
    },
    EntityFamily {
        what: "backlogged",
        class_help: "1 if the class has a transport on the ready queue now, else 0.",
        peer_help: None,
        unit: None,
        value: EntityValue::Gauge(|s| if s.backlogged { 1.0 } else { 0.0 }),
    },
];

/// What a server-wide family reads from the state.
pub(super) enum ServerValue {
    Counter(fn(&MetricsState) -> CV),
    Gauge(fn(&MetricsState) -> f64),
    /// One gauge per kind (`kind="peer"`, `kind="class"`), from its folder.
    GaugeByKind(fn(&Folder) -> u64),
    /// One counter per tracepoint (`tracepoint="..."`).
    CounterByTracepoint(fn(&MetricsState) -> &[(String, u64)]),
}

pub(super) struct ServerFamily {
    pub name: &'static str,
    pub help: &'static str,
    pub value: ServerValue,
}

pub(super) const SERVER: &[ServerFamily] = &[
    ServerFamily {
        name: "nfsdtop_peers_folded",
        help: "Peers currently folded into peer other (beyond the top K).",
        value: ServerValue::Gauge(|m| m.peers.folded_now as f64),
    },
    ServerFamily {
        name: "nfsdtop_peer_folds",
        help: "Times a peer started being folded into peer other (new beyond the top K, or its label given to a client below its fair share).",
        value: ServerValue::Counter(|m| CV::U(m.peers.folds_total)),
    },
    ServerFamily {
        name: "nfsdtop_classes_folded",
        help: "Classes currently folded into class other (beyond the top K classes).",
        value: ServerValue::Gauge(|m| m.classes.folded_now as f64),
    },
    ServerFamily {
        name: "nfsdtop_unfair_entities",
        help: "Peers and classes backlogged and below nfsdtop_unfair_threshold_ratio of their fair share over about the last minute, labelled or folded (the list: /api/v1/unfair).",
        value: ServerValue::GaugeByKind(|f| f.unfair_now),
    },
    ServerFamily {
        name: "nfsdtop_unfair_entities_folded",
        help: "Of nfsdtop_unfair_entities, those without a series of their own (more victims than the top K).",
        value: ServerValue::GaugeByKind(|f| f.unfair_folded),
    },
    ServerFamily {
        name: "nfsdtop_unfair_threshold_ratio",
        help: "The fairness ratio under which nfsdtop_unfair_entities counts an entity (--unfair-ratio).",
        value: ServerValue::Gauge(|m| m.unfair_below),
    },
    ServerFamily {
        name: "nfsdtop_dispatches",
        help: "All dispatches seen.",
        value: ServerValue::Counter(|m| CV::U(m.dispatches)),
    },
    ServerFamily {
        name: "nfsdtop_peers",
        help: "Peers the aggregator tracks now.",
        value: ServerValue::Gauge(|m| m.peers_now as f64),
    },
    ServerFamily {
        name: "nfsdtop_classes",
        help: "Classes the aggregator tracks now.",
        value: ServerValue::Gauge(|m| m.classes_now as f64),
    },
    ServerFamily {
        name: "nfsdtop_transports",
        help: "Transports the aggregator tracks now.",
        value: ServerValue::Gauge(|m| m.transports as f64),
    },
    ServerFamily {
        name: "nfsdtop_peers_evicted",
        help: "Idle peers forgotten to keep memory bounded.",
        value: ServerValue::Counter(|m| CV::U(m.peers_evicted)),
    },
    ServerFamily {
        name: "nfsdtop_events",
        help: "Events seen, by tracepoint.",
        value: ServerValue::CounterByTracepoint(|m| &m.events),
    },
    ServerFamily {
        name: "nfsdtop_events_lost",
        help: "Events lost (ring buffer overflow), by tracepoint.",
        value: ServerValue::CounterByTracepoint(|m| &m.lost),
    },
];

/// A per-BPF-program counter (`program="<tracepoint>"`).
pub(super) struct BpfFamily {
    pub name: &'static str,
    pub help: &'static str,
    pub unit: Option<Unit>,
    pub value: fn(&BpfProgramStats) -> CV,
}

pub(super) const BPF: &[BpfFamily] = &[
    BpfFamily {
        name: "nfsdtop_bpf_run",
        help: "Kernel-reported run time of nfsdtop's BPF programs (0 unless nfsdtopd runs with --bpf-stats or kernel.bpf_stats_enabled=1).",
        unit: Some(Unit::Seconds),
        value: |b| CV::F(b.run_time_ns as f64 / 1e9),
    },
    BpfFamily {
        name: "nfsdtop_bpf_runs",
        help: "Kernel-reported runs of nfsdtop's BPF programs (0 unless nfsdtopd runs with --bpf-stats or kernel.bpf_stats_enabled=1).",
        unit: None,
        value: |b| CV::U(b.runs),
    },
    BpfFamily {
        name: "nfsdtop_bpf_hits",
        help: "Times each BPF program's tracepoint fired.",
        unit: None,
        value: |b| CV::U(b.hits),
    },
    BpfFamily {
        name: "nfsdtop_bpf_busy_dropped",
        help: "Enqueue attempts the BPF program dropped in the kernel because the transport was already BUSY.",
        unit: None,
        value: |b| CV::U(b.busy_dropped),
    },
];

/// Every [`ENTITY`] family of one kind (`"class"` or `"peer"`).
pub(super) fn encode_entities<L: EncodeLabelSet>(
    enc: &mut DescriptorEncoder,
    kind: &str,
    series: &[&Series],
    labels: impl Fn(&Series) -> L,
) -> std::fmt::Result {
    let peers = kind == "peer";
    for row in ENTITY {
        let help = match (peers, row.peer_help) {
            (false, _) => row.class_help,
            (true, Some(h)) => h,
            (true, None) => continue,
        };
        let name = format!("nfsdtop_{kind}_{}", row.what);
        let ty = match row.value {
            EntityValue::Counter(_) | EntityValue::MeasuredCounter(_) => MetricType::Counter,
            EntityValue::Gauge(_) => MetricType::Gauge,
            EntityValue::QueueWait | EntityValue::EnqueueDepth => MetricType::Histogram,
        };
        let mut m = enc.encode_descriptor(&name, help, row.unit.as_ref(), ty)?;
        for s in series {
            let l = labels(s);
            if let EntityValue::MeasuredCounter(v) = &row.value {
                if let Some(c) = v(s) {
                    counter(&mut m.encode_family(&l)?, c)?;
                }
                continue;
            }
            if let EntityValue::EnqueueDepth = &row.value {
                if let Some(d) = s.counts.depth {
                    depth_histogram(&mut m.encode_family(&l)?, &d)?;
                }
                continue;
            }
            let mut f = m.encode_family(&l)?;
            match &row.value {
                EntityValue::Counter(v) => counter(&mut f, v(s))?,
                EntityValue::MeasuredCounter(_) | EntityValue::EnqueueDepth => {}
                EntityValue::Gauge(v) => f.encode_gauge(&v(s))?,
                EntityValue::QueueWait => {
                    let (sum, count, buckets) = s.hist.export();
                    let native = super::native::Native::from_counts(s.hist.counts());
                    f.encode_histogram_with_native::<NoLabelSet>(
                        sum,
                        count,
                        &buckets,
                        None,
                        native.encoding(),
                    )?
                }
            }
        }
    }
    Ok(())
}

/// A depth histogram with buckets at its own bounds: le 0, 1, 3, 7, ...,
/// 63, +Inf.
fn depth_histogram(
    f: &mut prometheus_client::encoding::MetricEncoder,
    d: &DepthHistogram,
) -> std::fmt::Result {
    let buckets: Vec<(f64, u64)> = d
        .counts
        .iter()
        .enumerate()
        .map(|(i, &c)| match DEPTH_LOWER.get(i + 1) {
            Some(&next) => (f64::from(next - 1), c),
            None => (f64::INFINITY, c),
        })
        .collect();
    f.encode_histogram::<NoLabelSet>(d.sum as f64, d.count(), &buckets, None)
}

/// Requests per RPC procedure of the labelled series of `kind` (none
/// for `other`): `nfsdtop_<kind>_procedure_requests` and
/// `_procedure_execution_seconds`, each labelled as the series and with
/// `procedure`. Families of their own, so that a sum over a peer's
/// `nfsdtop_peer_requests` never counts a request twice.
pub(super) fn encode_procedures<L: EncodeLabelSet>(
    enc: &mut DescriptorEncoder,
    kind: &str,
    series: &[&Series],
    labels: impl Fn(&Series, &str) -> L,
) -> std::fmt::Result {
    type Read = fn(&crate::fold::ProcCounts) -> CV;
    let families: [(&str, String, Option<Unit>, Read); 2] = [
        (
            "procedure_requests",
            format!("Requests nfsd executed for the {kind}, per RPC procedure (the kernel's name; labelled series only, not other)."),
            None,
            |c| CV::U(c.requests),
        ),
        (
            "procedure_execution",
            format!("nfsd thread time spent on the {kind}'s requests, per RPC procedure (labelled series only, not other)."),
            Some(Unit::Seconds),
            |c| CV::F(c.exec_seconds),
        ),
    ];
    for (what, help, unit, read) in families {
        let name = format!("nfsdtop_{kind}_{what}");
        let mut m = enc.encode_descriptor(&name, &help, unit.as_ref(), MetricType::Counter)?;
        for s in series {
            for (p, c) in &s.procedures.counts {
                counter(&mut m.encode_family(&labels(s, p.as_str()))?, read(c))?;
            }
        }
    }
    Ok(())
}

/// NFSv4 operations of the labelled series of `kind` (none for `other`;
/// `--nfs4-ops`): `nfsdtop_<kind>_nfs4_operations`, labelled as the
/// series and with `operation` (RFC 8881's name: READ, SEQUENCE...).
pub(super) fn encode_operations<L: EncodeLabelSet>(
    enc: &mut DescriptorEncoder,
    kind: &str,
    series: &[&Series],
    labels: impl Fn(&Series, &str) -> L,
) -> std::fmt::Result {
    let name = format!("nfsdtop_{kind}_nfs4_operations");
    let help = format!(
        "NFSv4 operations nfsd processed in the {kind}'s COMPOUNDs, per operation (--nfs4-ops; labelled series only, not other)."
    );
    let mut m = enc.encode_descriptor(&name, &help, None, MetricType::Counter)?;
    for s in series {
        for (op, n) in &s.operations.counts {
            counter(&mut m.encode_family(&labels(s, op))?, CV::U(*n))?;
        }
    }
    Ok(())
}

/// Every [`SERVER`] family.
pub(super) fn encode_server(enc: &mut DescriptorEncoder, m: &MetricsState) -> std::fmt::Result {
    for row in SERVER {
        let ty = match row.value {
            ServerValue::Counter(_) | ServerValue::CounterByTracepoint(_) => MetricType::Counter,
            ServerValue::Gauge(_) | ServerValue::GaugeByKind(_) => MetricType::Gauge,
        };
        let mut d = enc.encode_descriptor(row.name, row.help, None, ty)?;
        match &row.value {
            ServerValue::Counter(v) => counter(&mut d, v(m))?,
            ServerValue::Gauge(v) => d.encode_gauge(&v(m))?,
            ServerValue::GaugeByKind(v) => {
                for (kind, f) in [("peer", &m.peers), ("class", &m.classes)] {
                    d.encode_family(&[("kind", kind)])?
                        .encode_gauge(&(v(f) as f64))?;
                }
            }
            ServerValue::CounterByTracepoint(v) => {
                for (tp, c) in v(m) {
                    d.encode_family(&[("tracepoint", tp.as_str())])?
                        .encode_counter::<NoLabelSet, _, u64>(c, None)?;
                }
            }
        }
    }
    Ok(())
}

/// Every [`BPF`] family; none for sources without BPF (demo, replay).
pub(super) fn encode_bpf(
    enc: &mut DescriptorEncoder,
    progs: &[BpfProgramStats],
) -> std::fmt::Result {
    if progs.is_empty() {
        return Ok(());
    }
    for row in BPF {
        let mut m =
            enc.encode_descriptor(row.name, row.help, row.unit.as_ref(), MetricType::Counter)?;
        for b in progs {
            counter(
                &mut m.encode_family(&[("program", b.program.as_str())])?,
                (row.value)(b),
            )?;
        }
    }
    Ok(())
}

pub(super) fn counter(
    m: &mut prometheus_client::encoding::MetricEncoder,
    v: CV,
) -> std::fmt::Result {
    match v {
        CV::U(v) => m.encode_counter::<NoLabelSet, _, u64>(&v, None),
        CV::F(v) => m.encode_counter::<NoLabelSet, _, f64>(&v, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfsdtop_agent::present::fields::FIELDS;

    /// A per-entity family's name after `nfsdtop_peer_` as exposed.
    fn exposed(f: &EntityFamily) -> String {
        let unit = match &f.unit {
            Some(Unit::Seconds) => "_seconds",
            Some(Unit::Bytes) => "_bytes",
            _ => "",
        };
        let total = match f.value {
            EntityValue::Counter(_) | EntityValue::MeasuredCounter(_) => "_total",
            EntityValue::Gauge(_) | EntityValue::QueueWait | EntityValue::EnqueueDepth => "",
        };
        format!("{}{unit}{total}", f.what)
    }

    /// Every family the agent's field table names is one /metrics has.
    #[test]
    fn the_field_tables_families_exist() {
        let families: Vec<String> = ENTITY.iter().map(exposed).collect();
        for f in FIELDS {
            if let Some(p) = f.prometheus {
                assert!(families.iter().any(|n| n == p), "{}: no family {p}", f.json);
            }
        }
    }
}
