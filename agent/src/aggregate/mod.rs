//! Events → per-peer and per-class numbers, exactly as docs/json.md defines
//! them. Every event costs O(1): one transport lookup, a few field updates.
//!
//! Fair share uses a virtual clock per grouping: at each dispatch, with n
//! entities backlogged, the clock advances by 1/n, and an entity's
//! entitled dispatches are the clock's advance over the periods it was
//! backlogged. So "each backlogged entity earns 1/n" never needs a loop
//! over entities.
//!
//! Here: the aggregator's state and how an event is taken in; the tables'
//! slots and eviction in `slots`, queueing and the fair clocks in `queue`,
//! the snapshot's numbers in `snapshot`, the services other than nfsd
//! (each with an aggregator of its own) in `services`.

mod index;
mod operations;
mod procedures;
mod queue;
pub mod services;
mod slots;
mod snapshot;
mod table;

use rustc_hash::FxHashMap;

use crate::enrich::classify::ClassMap;
use crate::enrich::redact::Redactor;
/// The histogram is the model's; its path here is the one other crates
/// name.
pub use crate::model::histogram;
use crate::model::histogram::WaitHistogram;
use crate::model::{Endpoint, Event, EventKind, PeerKey, Tracepoint, WaitSource, XprtKey};
pub use procedures::exec_bucket;
use services::{NfsdPorts, OtherServices, ServiceCounts, SnapshotAt};
pub use snapshot::jain_index;
use table::EntityTable;

/// Memory bounds. Defaults keep a flood of short-lived peers to a few
/// tens of MiB.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_peers: usize,
    pub max_classes: usize,
    pub max_transports: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_peers: 65_536,
            max_classes: 65_536,
            max_transports: 262_144,
        }
    }
}

#[derive(Debug, Default)]
struct FairClock {
    /// Virtual time: dispatches each continuously backlogged entity is owed.
    v: f64,
    backlogged: u64,
}

#[derive(Debug)]
struct Xprt {
    key: XprtKey,
    peer: u32,
    class: u32,
    queued: bool,
    enqueued_ns: u64,
    dispatches: u64,
    last_ns: u64,
    /// The kernel class word this transport was last seen with.
    kernel_class: Option<u32>,
}

pub struct Aggregator {
    classmap: ClassMap,
    limits: Limits,
    xprt_index: index::XprtIndex,
    xprts: Vec<Option<Xprt>>,
    xprt_free: Vec<u32>,
    transports_evicted: u64,
    /// Amortises transport eviction as EntityTable does for entities.
    xprt_next_scan_at: usize,
    peers: EntityTable<PeerKey>,
    classes: EntityTable<String>,
    peer_clock: FairClock,
    class_clock: FairClock,
    dispatches: u64,
    prev_dispatches: u64,
    exec_ns: u64,
    prev_exec_ns: u64,
    events: [u64; Tracepoint::COUNT],
    lost: [u64; Tracepoint::COUNT],
    wait_interval: WaitHistogram,
    /// Every wait until the last snapshot (each adds its interval's).
    wait_total: WaitHistogram,
    /// The agent's own enqueue→dequeue waits, kept even when the kernel
    /// gives `qtime`, so the two can be compared.
    own_wait_total: WaitHistogram,
    saw_qtime: bool,
    saw_own_wait: bool,
    last_ts: u64,
    last_snapshot_ns: Option<u64>,
    redactor: Option<Redactor>,
    /// NFSv4 client names by address, attached to the peers of each
    /// snapshot.
    client_names: std::sync::Arc<crate::enrich::clients::ClientMap>,
    /// Which transports are nfsd's; the events of the others are only
    /// counted, in `other_services`.
    nfsd_ports: NfsdPorts,
    /// false: this aggregator is one other service's own, and takes every
    /// event it is given.
    routes_other_services: bool,
    other_services: OtherServices,
    /// Every service's row as of the last snapshot (see `services`).
    service_rows: Vec<crate::model::ServiceView>,
    listener_dispatches: u64,
}

impl Default for Aggregator {
    fn default() -> Self {
        Aggregator::new(ClassMap::default(), Limits::default())
    }
}

impl Aggregator {
    pub fn new(classmap: ClassMap, limits: Limits) -> Self {
        Aggregator {
            classmap,
            limits,
            xprt_index: index::XprtIndex::default(),
            xprts: Vec::new(),
            xprt_free: Vec::new(),
            transports_evicted: 0,
            xprt_next_scan_at: limits.max_transports,
            peers: EntityTable::new(limits.max_peers),
            classes: EntityTable::new(limits.max_classes),
            peer_clock: FairClock::default(),
            class_clock: FairClock::default(),
            dispatches: 0,
            prev_dispatches: 0,
            exec_ns: 0,
            prev_exec_ns: 0,
            events: [0; Tracepoint::COUNT],
            lost: [0; Tracepoint::COUNT],
            wait_interval: WaitHistogram::dense(),
            wait_total: WaitHistogram::dense(),
            own_wait_total: WaitHistogram::dense(),
            saw_qtime: false,
            saw_own_wait: false,
            last_ts: 0,
            last_snapshot_ns: None,
            redactor: None,
            client_names: Default::default(),
            nfsd_ports: NfsdPorts::default(),
            routes_other_services: true,
            other_services: OtherServices::within(limits),
            service_rows: Vec::new(),
            listener_dispatches: 0,
        }
    }

    /// Adds to the ports whose transports are nfsd's (from
    /// `/proc/fs/nfsd/portlist` or a recording's header). Only ever adds:
    /// a transport nfsd's queue state was kept for stays nfsd's, so none
    /// is left queued by an event counted elsewhere.
    pub fn add_nfsd_ports(&mut self, ports: &NfsdPorts) {
        let mut all = self.nfsd_ports.ports().to_vec();
        all.extend_from_slice(ports.ports());
        self.nfsd_ports = NfsdPorts::from_ports(&all);
        self.other_services.forget_ports(&self.nfsd_ports);
    }

    /// An aggregator of one other service: every event it is given is its
    /// service's (the nfsd aggregator routed it here by port).
    pub fn owning_every_port(mut self) -> Self {
        self.routes_other_services = false;
        self
    }

    /// This aggregator's cumulative dispatches, requests and execution.
    pub fn service_counts(&self) -> ServiceCounts {
        ServiceCounts {
            dispatches: self.dispatches,
            listener_dispatches: self.listener_dispatches,
            requests: self.events[Tracepoint::StatsLatency.index()],
            exec_ns: self.exec_ns,
        }
    }

    /// nfsd's row and each other service's, as of the last snapshot (which
    /// took each other service's own: its peers' numbers cover the same
    /// interval as nfsd's, across a replay's fast-forward too).
    pub fn services(&self) -> Vec<crate::model::ServiceView> {
        self.service_rows.clone()
    }

    /// Takes each other service's snapshot and makes every row: called by
    /// the snapshot, which ends their interval with nfsd's.
    pub(super) fn take_service_rows(
        &mut self,
        now_ns: u64,
        wall_time: f64,
        source: &crate::model::SourceInfo,
    ) {
        if !self.routes_other_services {
            return;
        }
        let at = SnapshotAt {
            now_ns,
            wall_time,
            source: source.clone(),
            client_names: self.client_names.clone(),
        };
        let counts = self.service_counts();
        self.service_rows = self.other_services.views(&self.nfsd_ports, counts, &at);
    }

    /// Show client addresses only as keyed-hash pseudonyms, in every name
    /// this aggregator produces (peers, per-peer classes, transports).
    /// Classification still sees the real address, so class maps work.
    pub fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.other_services.set_redactor(Some(redactor.clone()));
        self.redactor = Some(redactor);
        self
    }

    /// The NFSv4 client names the next snapshots give their peers.
    pub fn set_client_names(&mut self, names: std::sync::Arc<crate::enrich::clients::ClientMap>) {
        self.client_names = names;
    }

    fn shown(&self, peer: &PeerKey) -> String {
        match (&self.redactor, peer.addr.ip()) {
            (Some(r), _) => r.peer_name(peer),
            (None, Some(ip)) => ip.to_string(),
            (None, None) => peer.to_string(),
        }
    }

    pub fn classmap(&self) -> &ClassMap {
        &self.classmap
    }

    /// Swap the class map (SIGHUP) without losing counts: peers keep their
    /// totals; from now on their dispatches count for their new class.
    pub fn set_classmap(&mut self, classmap: ClassMap) {
        self.classmap = classmap;
        let peers: Vec<(u32, PeerKey)> = self.peers.iter().map(|(s, k, _)| (s, *k)).collect();
        // One pass over the transports, grouped by peer: a scan per peer
        // would be quadratic on a SIGHUP with 100k peers.
        let mut by_peer: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
        for (i, x) in self.xprts.iter().enumerate() {
            if let Some(x) = x.as_ref().filter(|x| x.kernel_class.is_none()) {
                by_peer.entry(x.peer).or_default().push(i as u32);
            }
        }
        let ts = self.last_ts;
        for (ps, key) in peers {
            let new_class = self.class_slot_for(&key, None);
            let old_class = self.peers.get(ps).class_slot;
            if new_class == old_class {
                continue;
            }
            for xi in by_peer.remove(&ps).unwrap_or_default() {
                self.move_xprt_class(xi, new_class, ts);
            }
            self.classes.get_mut(old_class).members -= 1;
            self.classes.get_mut(new_class).members += 1;
            let class_name = self.classes.get(new_class).class.clone();
            let p = self.peers.get_mut(ps);
            p.class_slot = new_class;
            p.class = class_name;
        }
    }

    /// The first snapshot's interval starts here (a live source's clock
    /// counts from boot, not from when the agent started).
    pub fn start_clock(&mut self, now_ns: u64) {
        self.other_services.start_clock(now_ns);
        if self.last_snapshot_ns.is_none() {
            self.last_snapshot_ns = Some(now_ns);
        }
    }

    pub fn wait_source(&self) -> WaitSource {
        if self.saw_qtime {
            WaitSource::Qtime
        } else if self.saw_own_wait {
            WaitSource::EnqueueDequeue
        } else {
            WaitSource::None
        }
    }

    pub fn own_wait_histogram(&self) -> &WaitHistogram {
        &self.own_wait_total
    }

    /// Where the last snapshot's interval ended (the start of the next).
    pub fn last_snapshot_ns(&self) -> Option<u64> {
        self.last_snapshot_ns
    }

    pub fn dispatches(&self) -> u64 {
        self.dispatches
    }

    /// Transports held now.
    pub fn transports(&self) -> usize {
        self.xprt_index.len()
    }

    pub fn ingest_all(&mut self, events: &[Event]) {
        for e in events {
            self.ingest(e);
        }
    }

    pub fn ingest(&mut self, ev: &Event) {
        self.last_ts = self.last_ts.max(ev.ts_ns);
        if self.routes_other_services && !self.nfsd_ports.is_nfsd(ev.xprt.server.port()) {
            self.other_services.take(ev);
            return;
        }
        let ts = ev.ts_ns;
        match ev.kind {
            EventKind::Enqueue { inflight } => {
                self.events[Tracepoint::Enqueue.index()] += 1;
                let xi = self.xprt(&ev.xprt, ts);
                if let Some(depth) = inflight {
                    // Every enqueue the kernel made counts, also one the
                    // queue below takes for a duplicate.
                    let (ps, cs) = self.owners(xi);
                    for e in [self.peers.get_mut(ps), self.classes.get_mut(cs)] {
                        e.depth.get_or_insert_default().record(depth);
                    }
                }
                self.enqueue(xi, ts);
            }
            EventKind::Dequeue { qtime_ns, class } => {
                self.events[Tracepoint::Dequeue.index()] += 1;
                self.listener_dispatches += u64::from(ev.xprt.client == Endpoint::None);
                let xi = self.xprt(&ev.xprt, ts);
                self.dequeue(xi, ts, qtime_ns, class);
            }
            // Counts and times from the kernel or a file saturate: a
            // corrupt word can pin a counter at its maximum, never wrap it.
            EventKind::Executed {
                exec_ns,
                requests,
                bytes,
                procedure,
            } => {
                let n = &mut self.events[Tracepoint::StatsLatency.index()];
                *n = n.saturating_add(requests);
                let xi = self.xprt(&ev.xprt, ts);
                let (ps, cs) = self.owners(xi);
                for e in [self.peers.get_mut(ps), self.classes.get_mut(cs)] {
                    e.exec_ns = e.exec_ns.saturating_add(exec_ns);
                    e.executions = e.executions.saturating_add(requests);
                    if let Some(b) = bytes {
                        let t = e.bytes.get_or_insert_default();
                        t.received = t.received.saturating_add(b.received);
                        t.sent = t.sent.saturating_add(b.sent);
                    }
                    if let Some(name) = procedure {
                        e.procedures
                            .get_or_insert_default()
                            .add(name, requests, exec_ns);
                    }
                }
                self.exec_ns = self.exec_ns.saturating_add(exec_ns);
            }
            EventKind::Procedure {
                name,
                requests,
                exec_ns,
            } => {
                let xi = self.xprt(&ev.xprt, ts);
                let (ps, cs) = self.owners(xi);
                for e in [self.peers.get_mut(ps), self.classes.get_mut(cs)] {
                    e.procedures
                        .get_or_insert_default()
                        .add(name, requests, exec_ns);
                }
            }
            EventKind::Operation { op, count } => {
                let xi = self.xprt(&ev.xprt, ts);
                let (ps, cs) = self.owners(xi);
                for e in [self.peers.get_mut(ps), self.classes.get_mut(cs)] {
                    e.operations
                        .get_or_insert_default()
                        .add(op, u64::from(count));
                }
            }
            EventKind::Accepted => {
                self.events[Tracepoint::Accept.index()] += 1;
                self.xprt(&ev.xprt, ts);
            }
            EventKind::Closed => {
                self.events[Tracepoint::Close.index()] += 1;
                if let Some(xi) = self.xprt_index.get(&ev.xprt, &self.xprts) {
                    self.remove_xprt(xi, ts);
                }
            }
            EventKind::Lost { tracepoint, count } => {
                let n = &mut self.lost[tracepoint.index()];
                *n = n.saturating_add(count);
            }
        }
    }
}

#[cfg(test)]
mod tests;
