//! Snapshots → Prometheus metrics with bounded cardinality.
//!
//! Every class and peer series is a counter accumulated here from the
//! deltas between consecutive snapshots, so it stays monotonic whatever
//! happens underneath. At most `top_k` peers (and `top_k_classes` classes)
//! carry their own label; who gets one, and how the rest are summed into
//! `peer="other"` / `class="other"`, is [`crate::fold`]'s business. The
//! number of entities below their fair share, however many are folded, is
//! `nfsdtop_unfair_entities` (the list: /api/v1/unfair). The families
//! themselves (name, help, unit, type, value) are the tables of
//! [`families`]; this module keeps the state they read and the encoding
//! (once per snapshot, by the pipeline: scrapes copy the text).

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use nfsdtop_agent::model::{BpfProgramStats, EntityKind, EntityStats, Snapshot, SourceInfo};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use crate::fold::{delta_f, delta_u, dense, Folder, Smooth};

mod families;

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

    /// Encode every family through prometheus-client's encoder: the
    /// tables of [`families`], then the BPF self-metrics and the infos.
    fn encode_into(&self, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        families::encode_entities(enc, "class", &self.classes.series(), |s| {
            [("class", s.name.clone())]
        })?;
        families::encode_entities(enc, "peer", &self.peers.series(), |s| {
            [("peer", s.name.clone()), ("class", s.class.clone())]
        })?;
        families::encode_procedures(enc, "class", &self.classes.series(), |s, p| {
            [("class", s.name.clone()), ("procedure", p.to_string())]
        })?;
        families::encode_procedures(enc, "peer", &self.peers.series(), |s, p| {
            [
                ("peer", s.name.clone()),
                ("class", s.class.clone()),
                ("procedure", p.to_string()),
            ]
        })?;
        families::encode_operations(enc, "class", &self.classes.series(), |s, op| {
            [("class", s.name.clone()), ("operation", op.to_string())]
        })?;
        families::encode_operations(enc, "peer", &self.peers.series(), |s, op| {
            [
                ("peer", s.name.clone()),
                ("class", s.class.clone()),
                ("operation", op.to_string()),
            ]
        })?;
        families::encode_server(enc, self)?;
        families::encode_bpf(enc, &self.bpf)?;
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

/// One snapshot's /metrics: the OpenMetrics text the pipeline encoded, and
/// the Prometheus 0.0.4 text made from it by the first scrape that asks for
/// it, then shared by the snapshot's later scrapes (no lock: a `OnceLock`).
#[derive(Debug, Default)]
pub struct Exposition {
    openmetrics: String,
    text: std::sync::OnceLock<String>,
}

impl Exposition {
    pub fn new(openmetrics: String) -> Exposition {
        Exposition {
            openmetrics,
            text: std::sync::OnceLock::new(),
        }
    }

    pub fn openmetrics(&self) -> &str {
        &self.openmetrics
    }

    /// The 0.0.4 text ([`openmetrics_to_text`]), converted once.
    pub fn text(&self) -> &str {
        self.text
            .get_or_init(|| openmetrics_to_text(&self.openmetrics))
    }
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
mod exposition_tests;
#[cfg(test)]
mod tests;
