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
            .map(|(n, c)| (escape_label(n), *c))
            .collect();
        self.lost = t
            .lost_by_tracepoint
            .iter()
            .map(|(n, c)| (escape_label(n), *c))
            .collect();
        self.source = Some(s.source.clone());
        self.last_time = Some(s.time);
        self.bpf = bpf_stats(s);
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
mod tests {
    use super::*;
    use nfsdtop_agent::model::{EntityKind, Totals};

    fn peer(name: &str, dispatches: u64, interval: u64) -> EntityStats {
        EntityStats {
            name: name.into(),
            kind: EntityKind::Peer,
            class: name.into(),
            dispatches,
            interval_dispatches: interval,
            entitled: dispatches as f64,
            exec_seconds: dispatches as f64 / 100.0,
            connections: 1,
            ..EntityStats::default()
        }
    }

    fn snap(total: u64, peers: Vec<EntityStats>) -> Snapshot {
        Snapshot {
            time: 1.0,
            totals: Totals {
                dispatches: total,
                exec_seconds: total as f64 / 100.0,
                ..Totals::default()
            },
            classes: peers
                .iter()
                .map(|p| EntityStats {
                    kind: EntityKind::Class,
                    ..p.clone()
                })
                .collect(),
            peers,
            ..Snapshot::default()
        }
    }

    fn value(text: &str, series: &str) -> Option<f64> {
        text.lines()
            .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    }

    fn text(state: MetricsState) -> (String, Arc<Mutex<MetricsState>>) {
        let st = Arc::new(Mutex::new(state));
        let r = registry(st.clone());
        (openmetrics_to_text(&encode_openmetrics(&r)), st)
    }

    #[test]
    fn top_k_is_sticky_and_other_is_the_monotonic_residual() {
        let mut m = MetricsState::new(2, 2);
        // a, b busiest: labelled; c folded.
        m.update(&snap(
            60,
            vec![peer("a", 30, 30), peer("b", 20, 20), peer("c", 10, 10)],
        ));
        let (t, st) = text(m);
        assert_eq!(
            value(&t, "nfsdtop_peer_dispatches_total{peer=\"a\",class=\"a\"}"),
            Some(30.0)
        );
        assert_eq!(
            value(
                &t,
                "nfsdtop_peer_dispatches_total{peer=\"other\",class=\"other\"}"
            ),
            Some(10.0)
        );
        assert_eq!(value(&t, "nfsdtop_peers_folded"), Some(1.0));
        assert_eq!(value(&t, "nfsdtop_peer_folds_total"), Some(1.0));
        let mut m = Arc::try_unwrap(st).unwrap().into_inner().unwrap();
        // c becomes the busiest: a and b keep their labels (sticky).
        m.update(&snap(
            160,
            vec![peer("a", 31, 1), peer("b", 21, 1), peer("c", 108, 98)],
        ));
        // b is evicted by the aggregator (gone from the snapshot) after 4
        // more dispatches nobody saw; "other" must not go back, and the
        // exact total still adds up.
        m.update(&snap(200, vec![peer("a", 40, 9), peer("c", 135, 27)]));
        let (t, st) = text(m);
        assert_eq!(
            value(&t, "nfsdtop_peer_dispatches_total{peer=\"a\",class=\"a\"}"),
            Some(40.0)
        );
        assert_eq!(
            value(&t, "nfsdtop_peer_dispatches_total{peer=\"b\",class=\"b\"}"),
            None
        );
        // c took b's free slot at the third snapshot; its history (108)
        // stays in "other", its own series starts counting from there.
        assert_eq!(
            value(&t, "nfsdtop_peer_dispatches_total{peer=\"c\",class=\"c\"}"),
            Some(0.0)
        );
        let other = value(
            &t,
            "nfsdtop_peer_dispatches_total{peer=\"other\",class=\"other\"}",
        )
        .unwrap();
        assert_eq!(
            other,
            200.0 - 40.0 - 21.0,
            "other = total - a - the 21 b had when its series went"
        );
        let mut m = Arc::try_unwrap(st).unwrap().into_inner().unwrap();
        // b comes back (re-created: its cumulative restarts at 0).
        m.update(&snap(
            210,
            vec![peer("a", 41, 1), peer("c", 140, 5), peer("b", 4, 4)],
        ));
        let (t, _) = text(m);
        assert_eq!(
            value(&t, "nfsdtop_peer_dispatches_total{peer=\"c\",class=\"c\"}"),
            Some(5.0)
        );
        let other2 = value(
            &t,
            "nfsdtop_peer_dispatches_total{peer=\"other\",class=\"other\"}",
        )
        .unwrap();
        assert!(other2 >= other, "other is monotonic: {other} -> {other2}");
        assert_eq!(other2, other + 4.0);
        assert_eq!(value(&t, "nfsdtop_peer_folds_total"), Some(2.0));
        assert_eq!(value(&t, "nfsdtop_dispatches_total"), Some(210.0));
    }

    #[test]
    fn histogram_buckets_are_exact_at_powers_of_two() {
        let mut c = EntityStats {
            name: "x".into(),
            kind: EntityKind::Class,
            class: "x".into(),
            dispatches: 4,
            ..EntityStats::default()
        };
        for us in [15, 16, 1000, 5_000_000] {
            c.wait_histogram.record_us(us);
        }
        let mut s = snap(4, vec![]);
        s.totals.wait_histogram = c.wait_histogram.clone();
        s.classes = vec![c];
        let mut m = MetricsState::new(5, 5);
        m.update(&s);
        let (t, _) = text(m);
        let b = |le: &str| {
            value(
                &t,
                &format!("nfsdtop_class_queue_wait_seconds_bucket{{le=\"{le}\",class=\"x\"}}"),
            )
        };
        assert_eq!(b("0.000016"), Some(1.0));
        assert_eq!(b("0.000032"), Some(2.0));
        assert_eq!(b("0.001024"), Some(3.0));
        assert_eq!(b("4.194304"), Some(3.0));
        assert_eq!(b("+Inf"), Some(4.0));
        assert_eq!(
            value(&t, "nfsdtop_class_queue_wait_seconds_count{class=\"x\"}"),
            Some(4.0)
        );
        // Nothing folded: the "other" histogram is empty.
        assert_eq!(
            value(
                &t,
                "nfsdtop_class_queue_wait_seconds_count{class=\"other\"}"
            ),
            Some(0.0)
        );
    }

    #[test]
    fn bpf_self_metrics_appear_when_the_source_has_them() {
        let mut m = MetricsState::new(5, 5);
        m.update(&snap(1, vec![peer("a", 1, 1)]));
        let (t, st) = text(m);
        assert!(!t.contains("nfsdtop_bpf_"), "demo: no BPF families");
        let mut m = Arc::try_unwrap(st).unwrap().into_inner().unwrap();
        let mut s = snap(2, vec![peer("a", 2, 1)]);
        s.totals.bpf = vec![BpfProgramStats {
            program: "svc_xprt_dequeue".into(),
            hits: 10,
            records: 10,
            lost: 0,
            busy_dropped: 3,
            run_time_ns: 1_500_000_000,
            runs: 10,
        }];
        m.update(&s);
        let (t, _) = text(m);
        let p = "{program=\"svc_xprt_dequeue\"}";
        assert_eq!(
            value(&t, &format!("nfsdtop_bpf_run_seconds_total{p}")),
            Some(1.5)
        );
        assert_eq!(value(&t, &format!("nfsdtop_bpf_runs_total{p}")), Some(10.0));
        assert_eq!(
            value(&t, &format!("nfsdtop_bpf_busy_dropped_total{p}")),
            Some(3.0)
        );
        let out = std::process::Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write as _;
                c.stdin.take().unwrap().write_all(t.as_bytes())?;
                c.wait_with_output()
            })
            .expect("promtool (scripts/setup.sh installs it)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }

    #[test]
    fn label_values_are_escaped() {
        let mut m = MetricsState::new(5, 5);
        m.update(&snap(1, vec![peer("we\"ird\\name\n", 1, 1)]));
        let (t, _) = text(m);
        assert!(t.contains("peer=\"we\\\"ird\\\\name\\n\""), "{t}");
    }
}

#[cfg(test)]
mod openmetrics_tests {
    use super::*;
    use nfsdtop_agent::model::{EntityKind, Totals};

    /// OpenMetrics: every family name once, and no family's samples
    /// (name + a suffix its type reserves) named like another family.
    #[test]
    fn family_names_are_unique_as_openmetrics_requires() {
        let mut m = MetricsState::new(1, 1);
        let e = |name: &str| EntityStats {
            name: name.into(),
            kind: EntityKind::Peer,
            class: name.into(),
            dispatches: 5,
            interval_dispatches: 5,
            ..EntityStats::default()
        };
        let s = Snapshot {
            time: 1.0,
            interval_s: 1.0,
            totals: Totals {
                dispatches: 10,
                ..Totals::default()
            },
            peers: vec![e("a"), e("b")],
            classes: vec![e("a"), e("b")],
            ..Snapshot::default()
        };
        m.update(&s);
        let om = encode_openmetrics(&registry(Arc::new(Mutex::new(m))));
        let mut families: Vec<(String, String)> = Vec::new();
        for l in om.lines() {
            if let Some(rest) = l.strip_prefix("# TYPE ") {
                let (name, ty) = rest.split_once(' ').unwrap();
                assert!(
                    families.iter().all(|(n, _)| n != name),
                    "family {name} declared twice"
                );
                families.push((name.into(), ty.into()));
            }
        }
        for (name, ty) in &families {
            let suffixes: &[&str] = match ty.as_str() {
                "counter" => &["_total", "_created"],
                "histogram" => &["_bucket", "_count", "_sum", "_created"],
                "info" => &["_info"],
                _ => &[],
            };
            for suf in suffixes {
                let sample = format!("{name}{suf}");
                assert!(
                    families.iter().all(|(n, _)| *n != sample),
                    "{name}'s sample {sample} is also a family"
                );
            }
        }
        assert!(families.iter().any(|(n, _)| n == "nfsdtop_peers_folded"));
        assert!(families.iter().any(|(n, _)| n == "nfsdtop_unfair_entities"));
    }
}
