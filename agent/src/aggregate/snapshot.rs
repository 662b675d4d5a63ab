//! The aggregator's snapshot: the interval's and the run's numbers per
//! peer and class, their rates, fair shares and Jain's index.

use std::net::IpAddr;

use rustc_hash::FxHashMap;

use super::queue::entitled_now;
use super::table::EntityTable;
use super::{Aggregator, FairClock};
use crate::model::{
    ClientName, DepthTally, EntityKind, EntityStats, PeerKey, PerTracepoint, Snapshot, SourceInfo,
    Totals, TransportStats, WaitSource,
};

impl Aggregator {
    /// The numbers since the previous snapshot (or since the start). `now_ns`
    /// is on the source clock; `wall_time` is Unix seconds for the output.
    pub fn snapshot(&mut self, now_ns: u64, wall_time: f64, source: &SourceInfo) -> Snapshot {
        self.snapshot_resolving(now_ns, wall_time, source, &mut |_| None)
    }

    /// [`Self::snapshot`], the peers named by `hostname` (`--resolve`:
    /// a cache's answer, never a wait); pseudonyms under a redactor.
    pub fn snapshot_resolving(
        &mut self,
        now_ns: u64,
        wall_time: f64,
        source: &SourceInfo,
        hostname: &mut dyn FnMut(IpAddr) -> Option<String>,
    ) -> Snapshot {
        let now_ns = now_ns.max(self.last_ts);
        let since = self.last_snapshot_ns.unwrap_or(0);
        let interval_s = now_ns.saturating_sub(since) as f64 / 1e9;
        self.last_snapshot_ns = Some(now_ns);
        let interval_dispatches = self.dispatches - self.prev_dispatches;
        let interval_exec = self.exec_ns - self.prev_exec_ns;
        self.prev_dispatches = self.dispatches;
        self.prev_exec_ns = self.exec_ns;

        let ctx = IntervalCtx {
            now_ns,
            interval_s,
            dispatches: interval_dispatches,
            exec_ns: interval_exec,
        };
        let mut transports: FxHashMap<u32, Vec<TransportStats>> = FxHashMap::default();
        // Another service's rows list no transports: none are made.
        let listed = if self.routes_other_services {
            &self.xprts[..]
        } else {
            &[]
        };
        for x in listed.iter().flatten() {
            let list = transports.entry(x.peer).or_default();
            if list.len() < 64 {
                list.push(TransportStats {
                    client: match &self.redactor {
                        Some(r) => r.endpoint_name(&x.key.client),
                        None => x.key.client.to_string(),
                    },
                    server: x.key.server.to_string(),
                    dispatches: x.dispatches,
                    queued: x.queued,
                });
            }
        }
        let (names, redactor) = (&*self.client_names, self.redactor.as_ref());
        let mut peer_names = |k: &PeerKey| -> Names {
            let Some(ip) = k.addr.ip() else {
                return Names::default();
            };
            let found = names.get(k.netns, ip);
            let host = hostname(ip);
            match redactor {
                Some(r) => Names {
                    clients: found.iter().map(|c| r.client_name(c)).collect(),
                    host: host.map(|h| r.hostname(&h)),
                },
                None => Names {
                    clients: found.to_vec(),
                    host,
                },
            }
        };
        let (peers, jain_peers) = entity_stats(
            &mut self.peers,
            &self.peer_clock,
            EntityKind::Peer,
            &ctx,
            Some(&mut transports),
            &mut peer_names,
        );
        let (classes, jain_classes) = entity_stats(
            &mut self.classes,
            &self.class_clock,
            EntityKind::Class,
            &ctx,
            None,
            &mut |_| Names::default(),
        );

        let mut source = source.clone();
        if source.wait_source == WaitSource::None {
            source.wait_source = self.wait_source();
        }
        self.wait_total.merge(&self.wait_interval);
        let totals = Totals {
            dispatches: self.dispatches,
            dispatch_rate: rate(interval_dispatches, interval_s),
            backlogged: self.peer_clock.backlogged,
            jain: jain_peers,
            wait_p50_us: self.wait_interval.quantile_us(0.5),
            wait_p99_us: self.wait_interval.quantile_us(0.99),
            events_lost: self.lost.iter().fold(0u64, |a, &b| a.saturating_add(b)),
            backlogged_classes: self.class_clock.backlogged,
            jain_classes,
            peers: self.peers.len() as u64,
            classes: self.classes.len() as u64,
            transports: self.xprt_index.len() as u64,
            peers_evicted: self.peers.evicted,
            transports_evicted: self.transports_evicted,
            events: PerTracepoint(self.events),
            lost_by_tracepoint: PerTracepoint(self.lost),
            exec_seconds: self.exec_ns as f64 / 1e9,
            wait_histogram: self.wait_total.clone(),
            own_wait_histogram: self.own_wait_total.clone(),
            bpf: Vec::new(),
            hostname_lookups_dropped: None,
            lag_s: None,
        };
        self.wait_interval.clear();
        self.take_service_rows(now_ns, wall_time, &source);
        Snapshot {
            schema: Default::default(),
            time: wall_time,
            interval_s,
            source,
            totals,
            peers,
            classes,
            server: Default::default(),
        }
    }
}

/// Who a peer is, besides its address.
#[derive(Default)]
struct Names {
    clients: Vec<ClientName>,
    host: Option<String>,
}

struct IntervalCtx {
    now_ns: u64,
    interval_s: f64,
    dispatches: u64,
    exec_ns: u64,
}

fn rate(count: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        count as f64 / secs
    } else {
        0.0
    }
}

/// Jain's fairness index of `xs`: (Σx)² / (n·Σx²), 1.0 for fewer than two.
pub fn jain_index(xs: impl IntoIterator<Item = f64>) -> f64 {
    let (mut n, mut sum, mut sq) = (0u64, 0.0, 0.0);
    for x in xs {
        n += 1;
        sum += x;
        sq += x * x;
    }
    if n < 2 || sq == 0.0 {
        return 1.0;
    }
    sum * sum / (n as f64 * sq)
}

fn entity_stats<K: std::hash::Hash + Eq + Clone>(
    table: &mut EntityTable<K>,
    clock: &FairClock,
    kind: EntityKind,
    ctx: &IntervalCtx,
    mut transports: Option<&mut FxHashMap<u32, Vec<TransportStats>>>,
    names: &mut dyn FnMut(&K) -> Names,
) -> (Vec<EntityStats>, f64) {
    let mut out = Vec::with_capacity(table.len());
    let mut ratios = Vec::new();
    let slots: Vec<(u32, Names)> = table.iter().map(|(s, k, _)| (s, names(k))).collect();
    for (slot, names) in slots {
        let e = table.get_mut(slot);
        let entitled = entitled_now(e, clock);
        let d = e.dispatches - e.prev_dispatches;
        let de = entitled - e.prev_entitled;
        let dexec = e.exec_ns - e.prev_exec_ns;
        let dreq = e.executions.saturating_sub(e.prev_executions);
        let bytes = e.bytes;
        let byte_rates = bytes.map(|b| {
            let r = (
                rate(
                    b.received.saturating_sub(e.prev_bytes.received),
                    ctx.interval_s,
                ),
                rate(b.sent.saturating_sub(e.prev_bytes.sent), ctx.interval_s),
            );
            e.prev_bytes = b;
            r
        });
        let depth = e.depth.as_deref_mut().map(DepthTally::take);
        e.prev_dispatches = e.dispatches;
        e.prev_entitled = entitled;
        e.prev_exec_ns = e.exec_ns;
        e.prev_executions = e.executions;
        // Tiny residues of floating-point subtraction are not a backlog.
        let fairness = if de > 1e-9 { Some(d as f64 / de) } else { None };
        if let Some(f) = fairness {
            ratios.push(f);
        }
        let backlogged_ns = e.backlogged_ns
            + if e.queued > 0 {
                ctx.now_ns.saturating_sub(e.backlog_since_ns)
            } else {
                0
            };
        let wait_histogram = match kind {
            EntityKind::Peer => e.wait_interval.clone(),
            EntityKind::Class => {
                e.wait_total.merge(&e.wait_interval);
                e.wait_total.clone()
            }
        };
        let stats = EntityStats {
            name: e.name.clone(),
            kind,
            class: e.class.clone(),
            dispatches: e.dispatches,
            dispatch_rate: rate(d, ctx.interval_s),
            share: if ctx.dispatches > 0 {
                d as f64 / ctx.dispatches as f64
            } else {
                0.0
            },
            entitled,
            fairness,
            wait_p50_us: e.wait_interval.quantile_us(0.5),
            wait_p99_us: e.wait_interval.quantile_us(0.99),
            exec_share: if ctx.exec_ns > 0 {
                dexec as f64 / ctx.exec_ns as f64
            } else {
                0.0
            },
            connections: e.connections,
            netns: e.netns,
            interval_dispatches: d,
            interval_entitled: de.max(0.0),
            fair_share: if ctx.dispatches > 0 {
                de.max(0.0) / ctx.dispatches as f64
            } else {
                0.0
            },
            backlogged: e.queued > 0,
            queued_transports: e.queued as u64,
            exec_seconds: e.exec_ns as f64 / 1e9,
            inflight_mean: rate(dexec, ctx.interval_s) / 1e9,
            exec_mean_us: (dreq > 0).then(|| dexec as f64 / dreq as f64 / 1e3),
            executions: e.executions,
            requests: e.executions,
            request_rate: rate(dreq, ctx.interval_s),
            bytes_in: bytes.map(|b| b.received),
            bytes_out: bytes.map(|b| b.sent),
            bytes_in_rate: byte_rates.map(|r| r.0),
            bytes_out_rate: byte_rates.map(|r| r.1),
            procedures: e
                .procedures
                .as_mut()
                .map(|p| p.snapshot(ctx.interval_s))
                .unwrap_or_default(),
            nfs4_operations: e
                .operations
                .as_mut()
                .map(|p| p.snapshot(ctx.interval_s))
                .unwrap_or_default(),
            enqueue_depth: depth.map(|d| d.0),
            depth0_share: depth.and_then(|d| d.1.depth0_share()),
            enqueue_depth_mean: depth.and_then(|d| d.1.mean()),
            enqueue_depth_max: depth.and_then(|d| d.2),
            backlogged_seconds: backlogged_ns as f64 / 1e9,
            wait_histogram,
            transports: transports
                .as_mut()
                .and_then(|t| t.remove(&slot))
                .unwrap_or_default(),
            client_names: names.clients,
            hostname: names.host,
        };
        e.wait_interval.clear();
        out.push(stats);
    }
    out.sort_by(|a, b| {
        b.interval_dispatches
            .cmp(&a.interval_dispatches)
            .then_with(|| a.name.cmp(&b.name))
    });
    (out, jain_index(ratios))
}
