//! The one snapshot type every view (TUI, batch output, JSON API, stream,
//! Prometheus exporter) consumes. It is the wire model: it serialises to
//! the JSON of docs/json.md and back, so a remote TUI sees exactly what a local
//! one does.

use serde::{Deserialize, Serialize};

use super::histogram::WaitHistogram;
use super::{DepthHistogram, Operations, PerTracepoint, Procedures, Schema};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum SourceKind {
    #[default]
    Live,
    Demo,
    Replay,
    Remote,
}

impl SourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Live => "live",
            SourceKind::Demo => "demo",
            SourceKind::Replay => "replay",
            SourceKind::Remote => "remote",
        }
    }
}

/// Where queue-wait numbers come from (every output says which).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum WaitSource {
    /// The kernel's own `qtime` on `svc_xprt_dequeue` (6.16+).
    Qtime,
    /// The agent's own enqueue → dequeue timestamps per transport.
    EnqueueDequeue,
    #[default]
    None,
}

impl WaitSource {
    pub fn as_str(self) -> &'static str {
        match self {
            WaitSource::Qtime => "qtime",
            WaitSource::EnqueueDequeue => "enqueue-dequeue",
            WaitSource::None => "none",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct SourceInfo {
    pub kind: SourceKind,
    /// Kernel release (`uname -r`), or a description for demo/replay.
    pub kernel: String,
    /// Tracepoint generation (see `live::layout`), e.g. "6.6+" or "demo".
    pub generation: String,
    pub wait_source: WaitSource,
    /// Free text: scenario and policy for demo, file for replay, URL for remote.
    #[serde(default)]
    pub detail: String,
    #[serde(default)]
    pub host: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum EntityKind {
    #[default]
    Peer,
    Class,
}

impl EntityKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EntityKind::Peer => "peer",
            EntityKind::Class => "class",
        }
    }
}

/// One BPF program's counters (see [`Source::bpf_stats`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BpfProgramStats {
    /// The tracepoint it is attached to, e.g. "svc_xprt_dequeue".
    pub program: String,
    /// Times the tracepoint fired.
    pub hits: u64,
    /// Records streamed to the agent.
    pub records: u64,
    /// Records lost (ring buffer full or unreadable).
    pub lost: u64,
    /// Enqueue attempts dropped in the kernel because the transport was BUSY.
    pub busy_dropped: u64,
    /// Time spent in the program (0 where the kernel keeps no statistics).
    pub run_time_ns: u64,
    pub runs: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct Totals {
    /// Cumulative dispatches since the pipeline started.
    pub dispatches: u64,
    pub dispatch_rate: f64,
    /// Entities (of the snapshot's grouping) backlogged right now.
    pub backlogged: u64,
    /// Jain's index over the fairness ratios of the entities that were
    /// backlogged during the interval (1.0 when none or one was).
    pub jain: f64,
    pub wait_p50_us: f64,
    pub wait_p99_us: f64,
    pub events_lost: u64,
    #[serde(default)]
    pub backlogged_classes: u64,
    #[serde(default)]
    pub jain_classes: f64,
    #[serde(default)]
    pub peers: u64,
    #[serde(default)]
    pub classes: u64,
    #[serde(default)]
    pub transports: u64,
    /// Peers forgotten to keep memory bounded (idle, no transports).
    #[serde(default)]
    pub peers_evicted: u64,
    #[serde(default)]
    pub transports_evicted: u64,
    /// Events seen, per tracepoint.
    #[serde(default)]
    pub events: PerTracepoint,
    /// Events lost, per tracepoint.
    #[serde(default)]
    pub lost_by_tracepoint: PerTracepoint,
    /// Cumulative execution seconds over every peer.
    #[serde(default)]
    pub exec_seconds: f64,
    /// Cumulative queue-wait histogram of every dispatch.
    #[serde(default)]
    pub wait_histogram: WaitHistogram,
    /// The agent's own enqueue→dequeue waits over the whole run, kept
    /// even when `qtime` is the wait source, so the two can be compared.
    #[serde(default)]
    pub own_wait_histogram: WaitHistogram,
    /// The kernel side's own counters, per BPF program (live source only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bpf: Vec<BpfProgramStats>,
    /// With `--resolve`: host name lookups not asked because the lookup
    /// queue was full (cumulative; asked again at a later snapshot).
    /// Absent without `--resolve`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname_lookups_dropped: Option<u64>,
    /// Live only: how far the snapshot was behind the kernel when it was
    /// made, in seconds, beyond what the source holds by design (the 1 s
    /// reorder window on 6.16+ without enqueue hooks): the agent reading
    /// the kernel's records late, or cutting a snapshot late (catching
    /// up). Tens of ms when it keeps up. Past the interval the agent is
    /// behind: see [`Snapshot::behind_s`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_s: Option<f64>,
}

/// One RPC procedure's requests of an entity.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct ProcedureStats {
    /// Cumulative.
    pub requests: u64,
    /// Per second, this interval.
    pub request_rate: f64,
    /// Cumulative execution time of those requests.
    pub exec_seconds: f64,
    /// Of `requests`, those whose execution time is known one by one (not
    /// only within a sum the kernel added up), cumulative since the
    /// procedure's histogram began (an entity keeps one for its busiest
    /// few procedures).
    #[serde(default)]
    pub timed: u64,
    /// The 99th percentile of those requests' execution times (µs: the
    /// middle of its bucket, two per power of two, so within 20% of it);
    /// None where none was timed alone.
    #[serde(default)]
    pub exec_p99_us: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct TransportStats {
    pub client: String,
    pub server: String,
    pub dispatches: u64,
    pub queued: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct EntityStats {
    pub name: String,
    pub kind: EntityKind,
    pub class: String,
    /// Cumulative.
    pub dispatches: u64,
    pub dispatch_rate: f64,
    /// This entity's dispatches / all dispatches, this interval.
    pub share: f64,
    /// Cumulative entitled dispatches (fair share by virtual time).
    pub entitled: f64,
    /// dispatches / entitled over this interval; `null` when the entity
    /// was neither backlogged nor dispatched (nothing to judge).
    pub fairness: Option<f64>,
    pub wait_p50_us: f64,
    pub wait_p99_us: f64,
    /// This entity's execution time / all execution time, this interval.
    pub exec_share: f64,
    pub connections: u64,
    // From here on `default`: JSON from an older agent lacks some of them.
    #[serde(default)]
    pub netns: u32,
    /// This interval's entitled dispatches, i.e. its fair share in counts.
    #[serde(default)]
    pub interval_dispatches: u64,
    #[serde(default)]
    pub interval_entitled: f64,
    /// interval_entitled / all dispatches in the interval.
    #[serde(default)]
    pub fair_share: f64,
    #[serde(default)]
    pub backlogged: bool,
    #[serde(default)]
    pub queued_transports: u64,
    #[serde(default)]
    pub exec_seconds: f64,
    /// Requests executing at once on average over this interval: its
    /// execution time in the interval over the interval's length.
    #[serde(default)]
    pub inflight_mean: f64,
    /// Its requests' mean execution time this interval (the nfsd thread
    /// time of those that finished over their count), in microseconds;
    /// `null` where none finished.
    #[serde(default)]
    pub exec_mean_us: Option<f64>,
    /// Requests in `exec_seconds` (cumulative): the batch record's
    /// `requests`.
    #[serde(default)]
    pub executions: u64,
    /// The same count under the name the workload fields share
    /// (`requests`, `bytes_in`, `bytes_out`).
    #[serde(default)]
    pub requests: u64,
    /// Requests per second, this interval.
    #[serde(default)]
    pub request_rate: f64,
    /// Cumulative bytes received (`rq_arg.len`) and sent (`rq_res.len`),
    /// RPC headers included; `null` where not measured (classic
    /// tracepoints; `source.detail` says so), never 0 for unknown.
    #[serde(default)]
    pub bytes_in: Option<u64>,
    #[serde(default)]
    pub bytes_out: Option<u64>,
    /// Their rates (bytes per second, this interval), `null` likewise.
    #[serde(default)]
    pub bytes_in_rate: Option<f64>,
    #[serde(default)]
    pub bytes_out_rate: Option<f64>,
    /// Requests per RPC procedure (the kernel's names; at most 32 per
    /// entity, later names under `(other)`); empty (absent in JSON) where
    /// procedures are not counted (`source.detail` says so).
    #[serde(default, skip_serializing_if = "Procedures::is_empty")]
    pub procedures: Procedures,
    /// NFSv4 operations by name, cumulative and per second (`--nfs4-ops`;
    /// absent where not counted or none seen).
    #[serde(default, skip_serializing_if = "Operations::is_empty")]
    pub nfs4_operations: Operations,
    /// In-flight depth at enqueue: its transports' enqueues by the
    /// requests each had in flight then, cumulative; `null` where the
    /// source does not measure it (`source.detail` says so).
    #[serde(default)]
    pub enqueue_depth: Option<DepthHistogram>,
    /// Of this interval's enqueues, the share at depth 0; `null` where
    /// none was measured in the interval.
    #[serde(default)]
    pub depth0_share: Option<f64>,
    /// Their mean depth, `null` likewise.
    #[serde(default)]
    pub enqueue_depth_mean: Option<f64>,
    /// The most requests one of its transports had in flight at one of
    /// this interval's enqueues (the interval's peak as the kernel's count
    /// shows it at enqueues); `null` where not measured or none.
    #[serde(default)]
    pub enqueue_depth_max: Option<u32>,
    #[serde(default)]
    pub backlogged_seconds: f64,
    /// Queue-wait histogram: this interval for peers, cumulative for
    /// classes (the exporter's per-class histogram).
    #[serde(default)]
    pub wait_histogram: WaitHistogram,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "super::bounds::transports"
    )]
    pub transports: Vec<TransportStats>,
    /// Peers only: the NFSv4 clients the server knows at this address
    /// (`/proc/fs/nfsd/clients`), sorted; empty (absent in JSON) where
    /// none is known. Pseudonyms under `--redact` (see `crate::enrich::clients`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_names: Vec<ClientName>,
    /// Peers only, under `--resolve`: the address's host name (reverse
    /// DNS through the system resolver, cached); absent where it has
    /// none or is not known yet. A pseudonym under `--redact`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
}

// The keys of a batch JSON line's entity, in the line's order: the one
// list of which of the fields above the batch contract carries
// (`super::batch`). A new number the batch line carries is one more
// `added` key; one it does not is named in the test that every field is
// one or the other (`batch_tests.rs`).
super::batch::batch_keys! {
    required: name, kind, class, dispatches, dispatch_rate, share, entitled, fairness,
        wait_p50_us, wait_p99_us, exec_share, connections, fair_share, backlogged_seconds,
        exec_seconds, executions;
    added: inflight_mean, exec_mean_us, requests, request_rate, bytes_in, bytes_out, bytes_in_rate,
        bytes_out_rate, enqueue_depth, depth0_share, enqueue_depth_mean, enqueue_depth_max;
    unless_empty: procedures if Procedures::is_empty, nfs4_operations if Operations::is_empty,
        client_names if Vec::is_empty, hostname if Option::is_none;
}

/// Who an NFSv4 client says it is: the name it gave the server (its
/// client owner, e.g. "Linux NFSv4.2 host1"), its minor version and the
/// implementation it reported (EXCHANGE_ID, 4.1+).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub struct ClientName {
    pub name: String,
    #[serde(default)]
    pub minor_version: Option<u32>,
    #[serde(default)]
    pub implementation: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct Snapshot {
    /// The JSON's schema (see `super::schema`); absent from an agent
    /// older than the field, which is read as schema 1.
    #[serde(default = "Schema::before_the_field")]
    pub schema: Schema,
    /// Unix seconds (wall clock) when the snapshot was taken.
    pub time: f64,
    pub interval_s: f64,
    pub source: SourceInfo,
    pub totals: Totals,
    #[serde(deserialize_with = "super::bounds::entities")]
    pub peers: Vec<EntityStats>,
    #[serde(deserialize_with = "super::bounds::entities")]
    pub classes: Vec<EntityStats>,
    /// nfsd's threads and how busy they were (see `crate::server`).
    #[serde(default)]
    pub server: ServerView,
}

/// The server as a whole: threads, busy threads, pools, namespaces.
/// `None` (JSON `null`) where the source cannot tell, never 0.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct ServerView {
    /// nfsd threads over all pools.
    pub threads: Option<u32>,
    /// Mean threads in service over the interval: execution seconds /
    /// interval seconds, at most `threads` (the excess is carried to the
    /// next interval: see `crate::server`). busy_threads / threads is the
    /// saturation.
    pub busy_threads: Option<f64>,
    /// Thread pools, where known.
    #[serde(default)]
    pub pools: Vec<PoolView>,
    /// Network namespaces (inode numbers) of the peers, ascending.
    #[serde(default)]
    pub netns: Vec<u32>,
    /// nfsd and the other RPC services whose dispatches the tracepoints
    /// showed (lockd, the NFS client's callback service), kept out of
    /// every other number here (see `crate::services`).
    #[serde(default)]
    pub services: Vec<ServiceView>,
    /// NFSv4 operations the kernel side counted and lost since nfsdtop
    /// started (`--nfs4-ops`); absent where they are not counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nfs4_operations: Option<OperationTotals>,
    /// The threads that ran in the interval, where nfsd starts and stops
    /// them (Linux 7.0+); absent elsewhere (see `crate::server::threads`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads_running: Option<ThreadsRunning>,
}

/// nfsd's threads as they came and went in the interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct ThreadsRunning {
    /// Threads running, time-weighted mean over the interval (busy
    /// threads are at most this; busy / mean is the saturation).
    pub mean: f64,
    /// Fewest and most running at any moment of the interval.
    pub min: u32,
    pub max: u32,
    /// Running at the end of the interval.
    pub now: u32,
    /// Threads started and exited in the interval, and since the start.
    pub starts: u64,
    pub exits: u64,
    pub starts_total: u64,
    pub exits_total: u64,
    /// Start and exit events the ring lost (counted all the same; the
    /// mean, min and max miss their moments).
    pub lost: u64,
    /// The pools' configured minimum and maximum (summed), from their
    /// last start or exit; null before one.
    pub configured_min: Option<u32>,
    pub configured_max: Option<u32>,
}

/// NFSv4 operations sent to the agent, and those lost on the way (a full
/// ring, a COMPOUND whose start was not seen): a client's operation counts
/// are exact while `lost` is 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct OperationTotals {
    pub counted: u64,
    pub lost: u64,
}

/// One RPC service's dispatches since nfsdtop started.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct ServiceView {
    /// "nfsd"; "lockd" or "nfs_callback" once a request on the port named
    /// one of their procedures; else "other" (told apart by its port only).
    pub service: String,
    /// Its server (local) ports: nfsd's all, another service's one.
    pub ports: Vec<u16>,
    pub dispatches: u64,
    /// Of them, of transports without a client address (listeners, UDP).
    pub listener_dispatches: u64,
    /// Requests completed (svc_stats_latency) and their execution time.
    pub requests: u64,
    pub exec_seconds: f64,
    /// A service other than nfsd: how many peers it has (nfsd's are the
    /// snapshot's own `peers`; None in its row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_count: Option<u64>,
    /// Jain's index over this service's backlogged peers in the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jain: Option<f64>,
    /// A service other than nfsd: at most 32 of its peers (those backlogged
    /// under their fair share in the interval, worst first, then the
    /// busiest in the interval), each share and fair share among this
    /// service's own peers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<ServicePeer>,
}

/// A peer of a service other than nfsd, as `peers` rows define the
/// numbers, among that service's peers and threads only.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct ServicePeer {
    pub peer: String,
    /// Its network namespace (inode): the same address in two is two
    /// peers.
    #[serde(default)]
    pub netns: u32,
    pub dispatches: u64,
    pub dispatch_rate: f64,
    /// Of this service's dispatches in the interval.
    pub share: f64,
    /// Entitled dispatches since the start, among this service's
    /// backlogged peers.
    pub entitled: f64,
    pub fairness: Option<f64>,
    pub backlogged: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct PoolView {
    pub pool: u32,
    pub threads: Option<u32>,
    /// Mean threads of this pool in service over the interval, as the
    /// server's `busy_threads`; None where not measured.
    pub busy_threads: Option<f64>,
    /// Execution seconds of this pool's threads since nfsdtop started,
    /// where measured per pool (a live host with several pools).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec_seconds: Option<f64>,
    /// Requests this pool's threads completed since nfsdtop started,
    /// where measured per pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
}

impl Snapshot {
    /// How far behind the kernel the snapshot was, where that is more
    /// than the snapshot's interval (and more than half a second,
    /// which the ring's drain period can take on its own): the agent is
    /// behind, and every surface says so.
    pub fn behind_s(&self) -> Option<f64> {
        self.totals.lag_s.filter(|&l| l > self.interval_s.max(0.5))
    }

    pub fn entities(&self, kind: EntityKind) -> &[EntityStats] {
        match kind {
            EntityKind::Peer => &self.peers,
            EntityKind::Class => &self.classes,
        }
    }
}
