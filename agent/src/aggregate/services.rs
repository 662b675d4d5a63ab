//! Which RPC service a transport's events belong to, and the tally of the
//! services that are not nfsd.
//!
//! lockd and, where the server is also an NFS client, the client's
//! callback service fire the same sunrpc tracepoints as nfsd. They have
//! threads and ready queues of their own, so their dispatches must not
//! count in nfsd's shares, fair shares, busy threads or `(listener)`.
//! Every transport of a service is bound to one of that service's local
//! ports (a connection keeps its listener's port), and no two services
//! share a port: a transport is nfsd's when its server port is one of
//! nfsd's ([`NfsdPorts`]: `/proc/fs/nfsd/portlist` where readable, else
//! 2049). The others are aggregated per server port ([`OtherServices`]),
//! each with its own shares and fair shares among its own peers, named by
//! the RPC program its requests name (lockd's NLM, the callback service's
//! NFS4_CALLBACK), and shown apart (`server.services` in the JSON).

use std::collections::BTreeMap;
use std::path::Path;

use nfsdtop_common::procs;

use super::{Aggregator, Limits};
use crate::enrich::classify::ClassMap;
use crate::enrich::redact::Redactor;
use crate::model::{Event, EventKind, ServicePeer, ServiceView, SourceInfo};

/// nfsd's well-known port, and its port wherever nothing says otherwise.
pub const NFS_PORT: u16 = 2049;
/// Most nfsd ports kept (portlist lists one line per transport class and
/// port: a handful).
const MAX_NFSD_PORTS: usize = 8;
/// Most other-service ports counted apart; beyond, one row for the rest
/// (each service has one or two ports; a flood of ports stays bounded).
pub const MAX_OTHER_PORTS: usize = 64;
/// Bytes of `/proc/fs/nfsd/portlist` read at most.
const MAX_PORTLIST_BYTES: u64 = 4096;

/// The local ports nfsd listens on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NfsdPorts {
    ports: [u16; MAX_NFSD_PORTS],
    len: u8,
}

impl Default for NfsdPorts {
    fn default() -> Self {
        NfsdPorts::from_ports(&[NFS_PORT])
    }
}

impl NfsdPorts {
    /// These ports (sorted, without repeats, at most [`MAX_NFSD_PORTS`]);
    /// none: 2049.
    pub fn from_ports(ports: &[u16]) -> Self {
        let mut v: Vec<u16> = ports.iter().copied().filter(|&p| p != 0).collect();
        v.sort_unstable();
        v.dedup();
        v.truncate(MAX_NFSD_PORTS);
        if v.is_empty() {
            v.push(NFS_PORT);
        }
        let mut out = NfsdPorts {
            ports: [0; MAX_NFSD_PORTS],
            len: v.len() as u8,
        };
        out.ports[..v.len()].copy_from_slice(&v);
        out
    }

    /// The ports of `/proc/fs/nfsd/portlist` text: one `CLASS PORT` line
    /// per listener (`tcp 2049`, `udp 2049`, `rdma 20049`); lines that
    /// are not that are skipped. None: no port in it.
    pub fn parse_portlist(text: &str) -> Option<Self> {
        let ports: Vec<u16> = text
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                let (_class, port) = (w.next()?, w.next()?);
                port.parse::<u16>().ok().filter(|&p| p != 0)
            })
            .collect();
        (!ports.is_empty()).then(|| NfsdPorts::from_ports(&ports))
    }

    /// nfsd's ports from `portlist` (normally `/proc/fs/nfsd/portlist`);
    /// 2049 where it cannot be read or lists none (nfsd not started yet,
    /// its filesystem not mounted). Reads a bounded prefix: never blocks
    /// on a hostile file for long, never grows.
    pub fn read(portlist: &Path) -> Self {
        use std::io::Read;
        let mut text = String::new();
        let read = std::fs::File::open(portlist)
            .and_then(|f| f.take(MAX_PORTLIST_BYTES).read_to_string(&mut text));
        match read {
            Ok(_) => NfsdPorts::parse_portlist(&text).unwrap_or_default(),
            Err(_) => NfsdPorts::default(),
        }
    }

    pub fn ports(&self) -> &[u16] {
        &self.ports[..usize::from(self.len)]
    }

    /// Whether a transport with this server (local) port is nfsd's. Port
    /// 0 is a record without a server address (a loss record): nfsd's.
    #[inline]
    pub fn is_nfsd(&self, server_port: u16) -> bool {
        // Every event asks: nfsd's first port answers most with one
        // compare (an unused entry is 0, which a real port never is).
        server_port == 0 || self.ports[0] == server_port || self.ports().contains(&server_port)
    }
}

/// Limits of each other service's aggregator: lockd and the callback
/// service have a client's worth of transports each, and 65 of them must
/// stay small beside nfsd's (idle transports are forgotten beyond 1024,
/// and then their idle peers).
pub const SERVICE_LIMITS: Limits = Limits {
    max_peers: 1024,
    max_classes: 1024,
    max_transports: 1024,
};
/// Most peers of another service listed in its row: first those that were
/// backlogged and got less than their fair share in the interval (worst
/// first), then the busiest in the interval; its `peer_count` says how
/// many there are.
pub const MAX_SERVICE_PEERS: usize = 32;

/// One other service: its transports aggregated apart, with the same
/// definitions as nfsd's (shares and fair shares among its own peers),
/// and its name once a request named it.
struct OtherService {
    agg: Box<Aggregator>,
    /// Requests naming each service's procedures: the port is the one
    /// with the most (a stray or forged request cannot name it for good).
    votes: Vec<(&'static str, u64)>,
}

impl OtherService {
    fn name(&self) -> &'static str {
        let mut best: Option<(&'static str, u64)> = None;
        for &(s, n) in &self.votes {
            if best.is_none_or(|(_, m)| n > m) {
                best = Some((s, n));
            }
        }
        best.map_or("other", |(s, _)| s)
    }
}

/// The transports that are not nfsd's, per server port: each port is one
/// service (a connection keeps its listener's port; no two services share
/// one).
pub struct OtherServices {
    by_port: BTreeMap<u16, OtherService>,
    /// Ports beyond [`MAX_OTHER_PORTS`], together (never named: its
    /// ports may be several services').
    rest: Option<OtherService>,
    /// Redaction, as nfsd's (classes are not shown for other services:
    /// their aggregators keep the default class map).
    redactor: Option<Redactor>,
    /// Each service's: [`SERVICE_LIMITS`], or the operator's where lower.
    limits: Limits,
    /// When the last rows were made: a service that appears after starts
    /// its first interval there, as its rates' denominator.
    last_view_ns: Option<u64>,
}

impl std::fmt::Debug for OtherServices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OtherServices")
            .field("ports", &self.by_port.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// The service a procedure name on a port that is not nfsd's says it is:
/// the one service other than nfsd whose programs name it
/// (`nfsdtop_common::procs::PROGRAMS`); None for a name several share
/// (`NULL`) or none has.
pub fn service_named_by(procedure: &str) -> Option<&'static str> {
    let mut found = None;
    for p in procs::PROGRAMS.iter().filter(|p| p.service != "nfsd") {
        if p.names.contains(&procedure) {
            match found {
                Some(s) if s != p.service => return None,
                _ => found = Some(p.service),
            }
        }
    }
    found
}

impl Default for OtherServices {
    fn default() -> Self {
        OtherServices::within(Limits::default())
    }
}

impl OtherServices {
    /// Each service within [`SERVICE_LIMITS`] and `limits` (nfsd's).
    pub fn within(limits: Limits) -> Self {
        OtherServices {
            by_port: BTreeMap::new(),
            rest: None,
            redactor: None,
            limits: Limits {
                max_peers: limits.max_peers.min(SERVICE_LIMITS.max_peers),
                max_classes: limits.max_classes.min(SERVICE_LIMITS.max_classes),
                max_transports: limits.max_transports.min(SERVICE_LIMITS.max_transports),
            },
            last_view_ns: None,
        }
    }

    pub fn set_redactor(&mut self, redactor: Option<Redactor>) {
        self.redactor = redactor;
    }

    /// Where a service that appears before the first rows starts its
    /// first interval (the nfsd aggregator's start).
    pub fn start_clock(&mut self, now_ns: u64) {
        self.last_view_ns.get_or_insert(now_ns);
    }

    /// These ports turned out to be nfsd's: their rows go (their events
    /// are nfsd's from now on).
    pub fn forget_ports(&mut self, nfsd: &NfsdPorts) {
        self.by_port.retain(|p, _| !nfsd.is_nfsd(*p));
    }

    fn new_service(&self, since: u64) -> OtherService {
        let mut agg = Aggregator::new(ClassMap::default(), self.limits).owning_every_port();
        if let Some(r) = &self.redactor {
            agg = agg.with_redactor(r.clone());
        }
        agg.start_clock(since);
        OtherService {
            agg: Box::new(agg),
            votes: Vec::new(),
        }
    }

    /// Aggregates an event of a transport that is not nfsd's with its
    /// service's.
    pub fn take(&mut self, ev: &Event) {
        let port = ev.xprt.server.port();
        let since = self.last_view_ns.unwrap_or(ev.ts_ns);
        if !self.by_port.contains_key(&port) && self.by_port.len() < MAX_OTHER_PORTS {
            let s = self.new_service(since);
            self.by_port.insert(port, s);
        }
        let (s, nameable) = match self.by_port.get_mut(&port) {
            Some(s) => (s, true),
            None => {
                if self.rest.is_none() {
                    self.rest = Some(self.new_service(since));
                }
                match self.rest.as_mut() {
                    Some(s) => (s, false),
                    None => return,
                }
            }
        };
        let named_requests = match ev.kind {
            EventKind::Procedure { name, requests, .. }
            | EventKind::Executed {
                procedure: Some(name),
                requests,
                ..
            } => Some((name, requests)),
            _ => None,
        };
        if let (true, Some((name, requests))) = (nameable, named_requests) {
            if let Some(named) = service_named_by(name.as_str()) {
                match s.votes.iter_mut().find(|(n, _)| *n == named) {
                    Some((_, v)) => *v = v.saturating_add(requests),
                    None => s.votes.push((named, requests)),
                }
            }
        }
        s.agg.ingest(ev);
    }

    /// Every service's row: nfsd's first (its numbers given), then one
    /// per other server port, then the rest. Takes each other service's
    /// snapshot (its interval ends now).
    pub fn views(
        &mut self,
        nfsd: &NfsdPorts,
        nfsd_counts: ServiceCounts,
        at: &SnapshotAt,
    ) -> Vec<ServiceView> {
        self.last_view_ns = Some(at.now_ns);
        let mut out = vec![ServiceView {
            service: "nfsd".to_string(),
            ports: nfsd.ports().to_vec(),
            dispatches: nfsd_counts.dispatches,
            listener_dispatches: nfsd_counts.listener_dispatches,
            requests: nfsd_counts.requests,
            exec_seconds: nfsd_counts.exec_ns as f64 / 1e9,
            ..ServiceView::default()
        }];
        let names = at.client_names.clone();
        let row = |ports: Vec<u16>, s: &mut OtherService| {
            s.agg.set_client_names(names.clone());
            let snap = s.agg.snapshot(at.now_ns, at.wall_time, &at.source);
            let counts = s.agg.service_counts();
            let mut peers: Vec<&crate::model::EntityStats> = snap.peers.iter().collect();
            // Short of their turn first (the clients an operator looks
            // for), worst first; then the busiest in the interval.
            let short = crate::present::fairness::short_of_turn;
            peers.sort_by(|a, b| match (short(a), short(b)) {
                (Some(x), Some(y)) => x.total_cmp(&y).then_with(|| a.name.cmp(&b.name)),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => b
                    .interval_dispatches
                    .cmp(&a.interval_dispatches)
                    .then(b.dispatches.cmp(&a.dispatches))
                    .then_with(|| a.name.cmp(&b.name)),
            });
            let peers = peers
                .into_iter()
                .take(MAX_SERVICE_PEERS)
                .map(|p| ServicePeer {
                    peer: p.name.clone(),
                    netns: p.netns,
                    dispatches: p.dispatches,
                    dispatch_rate: p.dispatch_rate,
                    share: p.share,
                    entitled: p.entitled,
                    fairness: p.fairness,
                    backlogged: p.backlogged,
                })
                .collect();
            ServiceView {
                service: if ports.is_empty() { "other" } else { s.name() }.to_string(),
                ports,
                dispatches: counts.dispatches,
                listener_dispatches: counts.listener_dispatches,
                requests: counts.requests,
                exec_seconds: counts.exec_ns as f64 / 1e9,
                peer_count: Some(snap.totals.peers),
                jain: Some(snap.totals.jain),
                peers,
            }
        };
        out.extend(self.by_port.iter_mut().map(|(&p, s)| row(vec![p], s)));
        if let Some(s) = self.rest.as_mut() {
            out.push(row(vec![], s));
        }
        out
    }
}

/// When and how a snapshot is taken, for the other services' own.
pub struct SnapshotAt {
    pub now_ns: u64,
    pub wall_time: f64,
    pub source: SourceInfo,
    pub client_names: std::sync::Arc<crate::enrich::clients::ClientMap>,
}

/// A service's own cumulative numbers, from its aggregator.
#[derive(Clone, Copy, Debug, Default)]
pub struct ServiceCounts {
    pub dispatches: u64,
    pub listener_dispatches: u64,
    pub requests: u64,
    pub exec_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Endpoint, XprtKey};

    fn ev(server: &str, client: Option<&str>, kind: EventKind) -> Event {
        Event {
            ts_ns: 1,
            xprt: XprtKey {
                netns: 1,
                server: Endpoint::from_socket_addr(server.parse().unwrap()),
                client: client.map_or(Endpoint::None, |c| {
                    Endpoint::from_socket_addr(c.parse().unwrap())
                }),
            },
            kind,
        }
    }

    #[test]
    fn portlist_gives_nfsd_ports_and_anything_else_gives_2049() {
        let p = NfsdPorts::parse_portlist("rdma 20049\ntcp 2050\nudp 2050\n").unwrap();
        assert_eq!(p.ports(), &[2050, 20049]);
        assert!(p.is_nfsd(2050) && p.is_nfsd(20049) && !p.is_nfsd(2049));
        assert!(
            p.is_nfsd(0),
            "a record without a server address stays nfsd's"
        );
        assert_eq!(NfsdPorts::parse_portlist(""), None);
        assert_eq!(NfsdPorts::parse_portlist("tcp x\n\0\0garbage\n"), None);
        let dir = std::env::temp_dir().join(format!("nfsdtop-portlist-{}", std::process::id()));
        assert_eq!(NfsdPorts::read(&dir.join("absent")).ports(), &[NFS_PORT]);
        let many: Vec<String> = (1..100).map(|i| format!("tcp {i}")).collect();
        let p = NfsdPorts::parse_portlist(&many.join("\n")).unwrap();
        assert_eq!(p.ports().len(), MAX_NFSD_PORTS, "bounded");
    }

    #[test]
    fn other_services_are_counted_per_port_and_bounded() {
        let deq = EventKind::Dequeue {
            qtime_ns: None,
            class: None,
        };
        let mut o = OtherServices::default();
        let at = SnapshotAt {
            now_ns: 10,
            wall_time: 0.0,
            source: SourceInfo::default(),
            client_names: Default::default(),
        };
        for port in 0..(MAX_OTHER_PORTS as u16 + 10) {
            o.take(&ev(&format!("10.0.0.1:{}", 30000 + port), None, deq));
        }
        // 100 peers on one port: the row lists the busiest, counts all.
        for i in 0..100u32 {
            let client = format!("10.1.{}.{}:700", i / 200, i % 200 + 1);
            for _ in 0..=(i % 3) {
                o.take(&ev("10.0.0.1:30000", Some(&client), deq));
            }
        }
        let v = o.views(&NfsdPorts::default(), ServiceCounts::default(), &at);
        assert_eq!(
            v.len(),
            1 + MAX_OTHER_PORTS + 1,
            "one row for the ports beyond the bound"
        );
        assert_eq!(v.last().unwrap().dispatches, 10);
        let total: u64 = v.iter().map(|r| r.dispatches).sum();
        assert_eq!(total, MAX_OTHER_PORTS as u64 + 10 + 199, "nothing dropped");
        let busy = &v[1];
        assert_eq!(busy.peer_count, Some(101));
        assert_eq!(busy.peers.len(), MAX_SERVICE_PEERS);
        assert!(busy
            .peers
            .iter()
            .take(MAX_SERVICE_PEERS)
            .all(|p| p.dispatches == 3));
    }
}
