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

use std::sync::{Arc, Mutex};

use nfsdtop_agent::model::{BpfProgramStats, EntityKind, EntityStats, Snapshot, SourceInfo};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use crate::fold::{delta_f, delta_u, dense, Folder, Smooth};

mod exposition;
mod families;
pub mod native;
pub mod process;

pub use exposition::{encode_openmetrics, openmetrics_to_text, Exposition, Format};

mod server;

/// The default fairness ratio under which an entity counts as unfairly
/// served: below half its fair share (the NfsdtopUnfairShare alert's
/// default `unfairRatio` too).
pub const DEFAULT_UNFAIR_BELOW: f64 = nfsdtop_agent::present::fairness::BELOW_HALF;

/// The git revision nfsdtopd was built from (`git rev-parse HEAD` at build
/// time, build.rs), or "unknown" for a build outside a git checkout.
pub const BUILD_REVISION: &str = env!("NFSDTOP_BUILD_REVISION");

/// The rustc that built nfsdtopd (`rustc --version`, build.rs).
pub const BUILD_RUSTC: &str = env!("NFSDTOP_BUILD_RUSTC");

/// The label value of the folded series, and the exported queue-wait
/// buckets: the fold's, which it folds into and accumulates.
pub use crate::fold::{OTHER, WAIT_BOUNDS_POW};

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
            .map(|(tp, c)| (tp.name().to_string(), c))
            .collect();
        self.lost = t
            .lost_by_tracepoint
            .iter()
            .map(|(tp, c)| (tp.name().to_string(), c))
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
                "nfsdtopd's version, the git revision it was built from (unknown outside a git checkout) and the rustc that built it.",
                None,
                MetricType::Info,
            )?;
            m.encode_info(&[
                ("version", env!("CARGO_PKG_VERSION")),
                ("revision", BUILD_REVISION),
                ("rustc", BUILD_RUSTC),
            ])?;
        }
        if let Some(src) = &self.source {
            let mut m = enc.encode_descriptor("nfsdtop_source", "The event source: kind (live|demo|replay), kernel, tracepoint generation, queue-wait source.", None, MetricType::Info)?;
            // A value the source does not know is left out: an empty
            // label value is no label to PromQL.
            let labels: Vec<(&str, &str)> = [
                ("kind", src.kind.as_str()),
                ("kernel", src.kernel.as_str()),
                ("generation", src.generation.as_str()),
                ("wait_source", src.wait_source.as_str()),
            ]
            .into_iter()
            .filter(|(_, v)| !v.is_empty())
            .collect();
            m.encode_info(&labels)?;
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

#[cfg(test)]
mod exposition_tests;
#[cfg(test)]
mod tests;
