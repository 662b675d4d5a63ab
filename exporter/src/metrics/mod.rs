//! Snapshots → Prometheus metrics with bounded cardinality.
//!
//! Every class and peer series is a counter accumulated here from the
//! deltas between consecutive snapshots, so it stays monotonic whatever
//! happens underneath. At most `top_k` peers (and `top_k_classes` classes)
//! carry their own label; who gets one, and how the rest are summed into
//! `peer="other"` / `class="other"`, is [`crate::fold`]'s business. The
//! number of entities below their fair share, however many are folded, is
//! `nfsdtop_unfair_entities` (the list: /api/v1/unfair).

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use nfsdtop_agent::model::{BpfProgramStats, EntityKind, EntityStats, Snapshot, SourceInfo};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use crate::fold::{delta_f, delta_u, dense, Folder, Series, Smooth};

mod server;

/// The default fairness ratio under which an entity counts as unfairly
/// served (the NfsdtopUnfairShare alert's default UNFAIR_RATIO).
pub const DEFAULT_UNFAIR_BELOW: f64 = 0.5;

/// The label value of the folded series.
pub const OTHER: &str = nfsdtop_agent::classify::OTHER_CLASS;

/// Upper bounds of the exported queue-wait buckets, in µs: powers of two
/// from 16 µs to 2^22 µs (4.19 s). Every power of two is a bucket boundary
/// of [`WaitHistogram`], so the exported cumulative counts are exact.
pub const WAIT_BOUNDS_POW: std::ops::RangeInclusive<u32> = 4..=22;

/// Escape a label value for the text formats (prometheus-client writes
/// label values verbatim).
pub fn escape_label(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// The BPF self-metrics of a snapshot: the live source's per-program
/// counters (run time and runs are the kernel's `bpf_prog_info` numbers,
/// kept while `kernel.bpf_stats_enabled` is 1, else 0). Sources without
/// BPF (demo, replay) have none, and the `nfsdtop_bpf_*` families are left
/// out.
pub fn bpf_stats(snapshot: &Snapshot) -> Vec<BpfProgramStats> {
    snapshot.totals.bpf.clone()
}

/// Everything /metrics shows, updated once per snapshot.
#[derive(Debug)]
pub struct MetricsState {
    unfair_below: f64,
    classes: Folder,
    peers: Folder,
    last_total_dispatches: Option<u64>,
    last_total_exec: Option<f64>,
    last_total_hist: Option<Vec<u64>>,
    dispatches: u64,
    peers_now: u64,
    classes_now: u64,
    transports: u64,
    peers_evicted: u64,
    events: Vec<(String, u64)>,
    lost: Vec<(String, u64)>,
    source: Option<SourceInfo>,
    last_time: Option<f64>,
    bpf: Vec<BpfProgramStats>,
    version: String,
    server: server::ServerMetrics,
}

impl MetricsState {
    pub fn new(top_k: usize, top_k_classes: usize) -> MetricsState {
        MetricsState::with_unfair_below(top_k, top_k_classes, DEFAULT_UNFAIR_BELOW)
    }

    /// `unfair_below`: the fairness ratio under which an entity counts in
    /// `nfsdtop_unfair_entities`.
    pub fn with_unfair_below(
        top_k: usize,
        top_k_classes: usize,
        unfair_below: f64,
    ) -> MetricsState {
        MetricsState {
            unfair_below,
            classes: Folder::new(top_k_classes, true, unfair_below),
            peers: Folder::new(top_k, false, unfair_below),
            last_total_dispatches: None,
            last_total_exec: None,
            last_total_hist: None,
            dispatches: 0,
            peers_now: 0,
            classes_now: 0,
            transports: 0,
            peers_evicted: 0,
            events: Vec::new(),
            lost: Vec::new(),
            source: None,
            last_time: None,
            bpf: Vec::new(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            server: server::ServerMetrics::default(),
        }
    }

    pub fn update(&mut self, s: &Snapshot) {
        let t = &s.totals;
        let d_disp = delta_u(t.dispatches, self.last_total_dispatches);
        let d_exec = delta_f(t.exec_seconds, self.last_total_exec);
        let hist_now = dense(&t.wait_histogram);
        let d_hist: Vec<u64> = match &self.last_total_hist {
            Some(p) => hist_now
                .iter()
                .zip(p)
                .map(|(a, b)| a.saturating_sub(*b))
                .collect(),
            None => hist_now.clone(),
        };
        self.last_total_dispatches = Some(t.dispatches);
        self.last_total_exec = Some(t.exec_seconds);
        self.last_total_hist = Some(hist_now);
        let dt = s.interval_s;
        self.classes
            .update(&s.classes, dt, d_disp, d_exec, Some(&d_hist));
        self.peers.update(&s.peers, dt, d_disp, d_exec, None);
        self.dispatches += d_disp;
        self.peers_now = t.peers;
        self.classes_now = t.classes;
        self.transports = t.transports;
        self.peers_evicted = self.peers_evicted.max(t.peers_evicted);
        // The tracepoint lists are fixed by the agent (five names): bounded.
        self.events = t
            .events
            .iter()
            .map(|(tp, c)| (escape_label(tp.name()), c))
            .collect();
        self.lost = t
            .lost_by_tracepoint
            .iter()
            .map(|(tp, c)| (escape_label(tp.name()), c))
            .collect();
        self.source = Some(s.source.clone());
        self.last_time = Some(s.time);
        self.bpf = bpf_stats(s);
        self.server.update(s);
    }

    pub fn peers_folded(&self) -> u64 {
        self.peers.folded_now
    }

    /// The ratio under which an entity counts as unfairly served.
    pub fn unfair_below(&self) -> f64 {
        self.unfair_below
    }

    /// An entity's smoothed fairness (see [`Smooth`]) and its label in
    /// /metrics, if it has one; None for an entity the latest update did
    /// not see.
    pub fn smoothed(&self, kind: EntityKind, e: &EntityStats) -> Option<(Smooth, Option<&str>)> {
        match kind {
            EntityKind::Peer => self.peers.smoothed(e),
            EntityKind::Class => self.classes.smoothed(e),
        }
    }

    /// Encode every family through prometheus-client's encoder.
    fn encode_into(&self, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        let classes = self.classes.series();
        let peers = self.peers.series();

        // ---- per class ----
        counter_family(enc, "nfsdtop_class_dispatches", "Dispatches (svc_xprt_dequeue events) of the class; class other sums the classes beyond the top K.", None, &classes, |s| CV::U(s.dispatches), class_label)?;
        counter_family(enc, "nfsdtop_class_entitled_dispatches", "Fair-share dispatches the class was entitled to while backlogged (1/n of each dispatch with n entities backlogged). rate(dispatches)/rate(entitled) is the fairness ratio.", None, &classes, |s| CV::F(s.entitled), class_label)?;
        counter_family(
            enc,
            "nfsdtop_class_execution",
            "nfsd thread time spent on the class's requests (svc_stats_latency execute).",
            Some(&Unit::Seconds),
            &classes,
            |s| CV::F(s.exec_seconds),
            class_label,
        )?;
        counter_family(
            enc,
            "nfsdtop_class_backlogged",
            "Time the class had at least one transport on the ready queue.",
            Some(&Unit::Seconds),
            &classes,
            |s| CV::F(s.backlogged_seconds),
            class_label,
        )?;
        {
            let mut m = enc.encode_descriptor(
                "nfsdtop_class_queue_wait",
                "Queue wait (enqueue to dequeue) of the class's dispatches; _sum is estimated from bucket midpoints.",
                Some(&Unit::Seconds),
                MetricType::Histogram,
            )?;
            for s in &classes {
                let (sum, count, buckets) = s.hist.export();
                m.encode_family(&[("class", s.name.as_str())])?
                    .encode_histogram::<NoLabelSet>(sum, count, &buckets, None)?;
            }
        }
        gauge_family(
            enc,
            "nfsdtop_class_connections",
            "Transports (connections) of the class now.",
            &classes,
            |s| s.connections as f64,
            class_label,
        )?;
        gauge_family(
            enc,
            "nfsdtop_class_backlogged",
            "1 if the class has a transport on the ready queue now, else 0.",
            &classes,
            |s| if s.backlogged { 1.0 } else { 0.0 },
            class_label,
        )?;

        // ---- per peer (top K + other) ----
        counter_family(
            enc,
            "nfsdtop_peer_dispatches",
            "Dispatches of the peer (top K peers; peer other sums the rest).",
            None,
            &peers,
            |s| CV::U(s.dispatches),
            peer_label,
        )?;
        counter_family(
            enc,
            "nfsdtop_peer_entitled_dispatches",
            "Fair-share dispatches the peer was entitled to while backlogged.",
            None,
            &peers,
            |s| CV::F(s.entitled),
            peer_label,
        )?;
        counter_family(
            enc,
            "nfsdtop_peer_execution",
            "nfsd thread time spent on the peer's requests.",
            Some(&Unit::Seconds),
            &peers,
            |s| CV::F(s.exec_seconds),
            peer_label,
        )?;
        counter_family(
            enc,
            "nfsdtop_peer_backlogged",
            "Time the peer had at least one transport on the ready queue.",
            Some(&Unit::Seconds),
            &peers,
            |s| CV::F(s.backlogged_seconds),
            peer_label,
        )?;
        gauge_family(
            enc,
            "nfsdtop_peer_connections",
            "Transports (connections) of the peer now.",
            &peers,
            |s| s.connections as f64,
            peer_label,
        )?;
        single_gauge(
            enc,
            "nfsdtop_peers_folded",
            "Peers currently folded into peer other (beyond the top K).",
            self.peers.folded_now as f64,
        )?;
        single_counter(
            enc,
            "nfsdtop_peer_folds",
            "Times a peer started being folded into peer other (new beyond the top K, or its label given to a client below its fair share).",
            CV::U(self.peers.folds_total),
        )?;
        single_gauge(
            enc,
            "nfsdtop_classes_folded",
            "Classes currently folded into class other (beyond the top K classes).",
            self.classes.folded_now as f64,
        )?;
        {
            let mut m = enc.encode_descriptor(
                "nfsdtop_unfair_entities",
                "Peers and classes backlogged and below nfsdtop_unfair_threshold_ratio of their fair share over about the last minute, labelled or folded (the list: /api/v1/unfair).",
                None,
                MetricType::Gauge,
            )?;
            for (kind, f) in [("peer", &self.peers), ("class", &self.classes)] {
                m.encode_family(&[("kind", kind)])?
                    .encode_gauge(&(f.unfair_now as f64))?;
            }
        }
        {
            let mut m = enc.encode_descriptor(
                "nfsdtop_unfair_entities_folded",
                "Of nfsdtop_unfair_entities, those without a series of their own (more victims than the top K).",
                None,
                MetricType::Gauge,
            )?;
            for (kind, f) in [("peer", &self.peers), ("class", &self.classes)] {
                m.encode_family(&[("kind", kind)])?
                    .encode_gauge(&(f.unfair_folded as f64))?;
            }
        }
        single_gauge(
            enc,
            "nfsdtop_unfair_threshold_ratio",
            "The fairness ratio under which nfsdtop_unfair_entities counts an entity (--unfair-ratio).",
            self.unfair_below,
        )?;

        // ---- totals and self-metrics ----
        single_counter(
            enc,
            "nfsdtop_dispatches",
            "All dispatches seen.",
            CV::U(self.dispatches),
        )?;
        single_gauge(
            enc,
            "nfsdtop_peers",
            "Peers the aggregator tracks now.",
            self.peers_now as f64,
        )?;
        single_gauge(
            enc,
            "nfsdtop_classes",
            "Classes the aggregator tracks now.",
            self.classes_now as f64,
        )?;
        single_gauge(
            enc,
            "nfsdtop_transports",
            "Transports the aggregator tracks now.",
            self.transports as f64,
        )?;
        single_counter(
            enc,
            "nfsdtop_peers_evicted",
            "Idle peers forgotten to keep memory bounded.",
            CV::U(self.peers_evicted),
        )?;
        {
            let mut m = enc.encode_descriptor(
                "nfsdtop_events",
                "Events seen, by tracepoint.",
                None,
                MetricType::Counter,
            )?;
            for (tp, c) in &self.events {
                m.encode_family(&[("tracepoint", tp.as_str())])?
                    .encode_counter::<NoLabelSet, _, u64>(c, None)?;
            }
        }
        {
            let mut m = enc.encode_descriptor(
                "nfsdtop_events_lost",
                "Events lost (ring buffer overflow), by tracepoint.",
                None,
                MetricType::Counter,
            )?;
            for (tp, c) in &self.lost {
                m.encode_family(&[("tracepoint", tp.as_str())])?
                    .encode_counter::<NoLabelSet, _, u64>(c, None)?;
            }
        }
        if !self.bpf.is_empty() {
            let progs: Vec<(String, &BpfProgramStats)> = self
                .bpf
                .iter()
                .map(|b| (escape_label(&b.program), b))
                .collect();
            let fams: [BpfFamily; 4] = [
                (
                    "nfsdtop_bpf_run",
                    "Kernel-reported run time of nfsdtop's BPF programs (0 unless nfsdtopd runs with --bpf-stats or kernel.bpf_stats_enabled=1).",
                    Some(&Unit::Seconds),
                    |b| CV::F(b.run_time_ns as f64 / 1e9),
                ),
                (
                    "nfsdtop_bpf_runs",
                    "Kernel-reported runs of nfsdtop's BPF programs (0 unless nfsdtopd runs with --bpf-stats or kernel.bpf_stats_enabled=1).",
                    None,
                    |b| CV::U(b.runs),
                ),
                (
                    "nfsdtop_bpf_hits",
                    "Times each BPF program's tracepoint fired.",
                    None,
                    |b| CV::U(b.hits),
                ),
                (
                    "nfsdtop_bpf_busy_dropped",
                    "Enqueue attempts the BPF program dropped in the kernel because the transport was already BUSY.",
                    None,
                    |b| CV::U(b.busy_dropped),
                ),
            ];
            for (name, help, unit, value) in fams {
                let mut m = enc.encode_descriptor(name, help, unit, MetricType::Counter)?;
                for (p, b) in &progs {
                    let labels = [("program", p.as_str())];
                    let mut f = m.encode_family(&labels)?;
                    match value(b) {
                        CV::U(v) => f.encode_counter::<NoLabelSet, _, u64>(&v, None)?,
                        CV::F(v) => f.encode_counter::<NoLabelSet, _, f64>(&v, None)?,
                    }
                }
            }
        }
        {
            let mut m = enc.encode_descriptor(
                "nfsdtop_build",
                "nfsdtopd's version.",
                None,
                MetricType::Info,
            )?;
            m.encode_info(&[("version", self.version.as_str())])?;
        }
        if let Some(src) = &self.source {
            let kind = escape_label(src.kind.as_str());
            let kernel = escape_label(&src.kernel);
            let generation = escape_label(&src.generation);
            let wait = escape_label(src.wait_source.as_str());
            let mut m = enc.encode_descriptor("nfsdtop_source", "The event source: kind (live|demo|replay), kernel, tracepoint generation, queue-wait source.", None, MetricType::Info)?;
            m.encode_info(&[
                ("kind", kind.as_str()),
                ("kernel", kernel.as_str()),
                ("generation", generation.as_str()),
                ("wait_source", wait.as_str()),
            ])?;
        }
        if let Some(t) = self.last_time {
            let mut m = enc.encode_descriptor(
                "nfsdtop_last_snapshot_timestamp",
                "Unix time of the latest snapshot.",
                Some(&Unit::Seconds),
                MetricType::Gauge,
            )?;
            m.encode_gauge(&t)?;
        }
        self.server.encode(enc)?;
        Ok(())
    }
}

fn class_label(s: &Series) -> [(&'static str, String); 1] {
    [("class", s.name.clone())]
}

fn peer_label(s: &Series) -> [(&'static str, String); 2] {
    [("peer", s.name.clone()), ("class", s.class.clone())]
}

/// (name, help, unit, value) of one `nfsdtop_bpf_*` family.
type BpfFamily = (
    &'static str,
    &'static str,
    Option<&'static Unit>,
    fn(&BpfProgramStats) -> CV,
);

enum CV {
    U(u64),
    F(f64),
}

fn counter_family<L: EncodeLabelSet>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    series: &[&Series],
    value: impl Fn(&Series) -> CV,
    labels: impl Fn(&Series) -> L,
) -> std::fmt::Result {
    let mut m = enc.encode_descriptor(name, help, unit, MetricType::Counter)?;
    for s in series {
        let l = labels(s);
        let mut f = m.encode_family(&l)?;
        match value(s) {
            CV::U(v) => f.encode_counter::<NoLabelSet, _, u64>(&v, None)?,
            CV::F(v) => f.encode_counter::<NoLabelSet, _, f64>(&v, None)?,
        }
    }
    Ok(())
}

fn gauge_family<L: EncodeLabelSet>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: &[&Series],
    value: impl Fn(&Series) -> f64,
    labels: impl Fn(&Series) -> L,
) -> std::fmt::Result {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for s in series {
        let l = labels(s);
        m.encode_family(&l)?.encode_gauge(&value(s))?;
    }
    Ok(())
}

fn single_gauge(enc: &mut DescriptorEncoder, name: &str, help: &str, v: f64) -> std::fmt::Result {
    enc.encode_descriptor(name, help, None, MetricType::Gauge)?
        .encode_gauge(&v)
}

fn single_counter(enc: &mut DescriptorEncoder, name: &str, help: &str, v: CV) -> std::fmt::Result {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    match v {
        CV::U(v) => m.encode_counter::<NoLabelSet, _, u64>(&v, None),
        CV::F(v) => m.encode_counter::<NoLabelSet, _, f64>(&v, None),
    }
}

/// The collector behind /metrics: reads the shared state on each scrape.
#[derive(Debug)]
pub struct StateCollector(pub Arc<Mutex<MetricsState>>);

impl Collector for StateCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let state = self.0.lock().unwrap_or_else(|p| p.into_inner());
        state.encode_into(&mut encoder)
    }
}

/// A registry holding the nfsdtop collector.
pub fn registry(state: Arc<Mutex<MetricsState>>) -> Registry {
    let mut r = Registry::default();
    r.register_collector(Box::new(StateCollector(state)));
    r
}

/// OpenMetrics text (application/openmetrics-text; version=1.0.0).
pub fn encode_openmetrics(registry: &Registry) -> String {
    let mut out = String::with_capacity(64 * 1024);
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, registry);
    out
}

/// The Prometheus text format 0.0.4 from prometheus-client's OpenMetrics
/// output, for clients that do not ask for OpenMetrics (promtool, curl):
/// counters' metadata names gain `_total`, `info` becomes a gauge named
/// `*_info`, `# UNIT` and `# EOF` lines go (0.0.4 has neither).
pub fn openmetrics_to_text(om: &str) -> String {
    let mut out = String::with_capacity(om.len());
    let mut pending_help: Option<(&str, &str)> = None;
    for line in om.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            pending_help = Some((name, help));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, ty) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (name, ty) = match ty {
                "counter" => (format!("{name}_total"), "counter"),
                "info" => (format!("{name}_info"), "gauge"),
                "histogram" | "gauge" | "summary" => (name.to_string(), ty),
                _ => (name.to_string(), "untyped"),
            };
            if let Some((_, help)) = pending_help.take() {
                let _ = writeln!(out, "# HELP {name} {help}");
            }
            let _ = writeln!(out, "# TYPE {name} {ty}");
            continue;
        }
        if line.contains("_created") {
            if let Some(first) = line.split(['{', ' ']).next() {
                if first.ends_with("_created") {
                    continue;
                }
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests;
