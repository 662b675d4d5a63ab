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
//! 2049). The others are counted per server port ([`OtherServices`]) and
//! shown apart (`server.services` in the JSON).

use std::collections::BTreeMap;
use std::path::Path;

use crate::model::{Event, EventKind, ServiceView};

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
        server_port == 0 || self.ports().contains(&server_port)
    }
}

/// What one other service's transports did: cumulative.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Counts {
    dispatches: u64,
    listener_dispatches: u64,
    requests: u64,
    exec_ns: u64,
}

/// Dispatches and requests of the transports that are not nfsd's, per
/// server port.
#[derive(Debug, Default)]
pub struct OtherServices {
    by_port: BTreeMap<u16, Counts>,
    /// Ports beyond [`MAX_OTHER_PORTS`], together.
    rest: Counts,
}

impl OtherServices {
    /// Counts an event of a transport that is not nfsd's.
    pub fn take(&mut self, ev: &Event) {
        let port = ev.xprt.server.port();
        let c = if let Some(c) = self.by_port.get_mut(&port) {
            c
        } else if self.by_port.len() < MAX_OTHER_PORTS {
            self.by_port.entry(port).or_default()
        } else {
            &mut self.rest
        };
        match ev.kind {
            EventKind::Dequeue { .. } => {
                c.dispatches += 1;
                if ev.xprt.client.ip().is_none() {
                    c.listener_dispatches += 1;
                }
            }
            EventKind::Executed {
                exec_ns, requests, ..
            } => {
                c.requests = c.requests.saturating_add(requests);
                c.exec_ns = c.exec_ns.saturating_add(exec_ns);
            }
            EventKind::Enqueue
            | EventKind::Procedure { .. }
            | EventKind::Operation { .. }
            | EventKind::Accepted
            | EventKind::Closed
            | EventKind::Lost { .. } => {}
        }
    }

    /// Every service's row: nfsd's first (its numbers given), then one
    /// per other server port, then the rest.
    pub fn views(&self, nfsd: &NfsdPorts, nfsd_counts: ServiceCounts) -> Vec<ServiceView> {
        let row = |service: &str, ports: Vec<u16>, c: Counts| ServiceView {
            service: service.to_string(),
            ports,
            dispatches: c.dispatches,
            listener_dispatches: c.listener_dispatches,
            requests: c.requests,
            exec_seconds: c.exec_ns as f64 / 1e9,
        };
        let mut out = vec![row(
            "nfsd",
            nfsd.ports().to_vec(),
            Counts {
                dispatches: nfsd_counts.dispatches,
                listener_dispatches: nfsd_counts.listener_dispatches,
                requests: nfsd_counts.requests,
                exec_ns: nfsd_counts.exec_ns,
            },
        )];
        out.extend(self.by_port.iter().map(|(&p, &c)| row("other", vec![p], c)));
        if self.rest != Counts::default() {
            out.push(row("other", vec![], self.rest));
        }
        out
    }
}

/// nfsd's own cumulative numbers, from the aggregator.
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
        let mut o = OtherServices::default();
        let deq = EventKind::Dequeue {
            qtime_ns: None,
            class: None,
        };
        o.take(&ev("0.0.0.0:53601", None, deq));
        o.take(&ev("10.0.0.1:4045", Some("10.0.0.2:700"), deq));
        o.take(&ev("10.0.0.1:4045", Some("10.0.0.2:700"), deq));
        o.take(&ev(
            "10.0.0.1:4045",
            Some("10.0.0.2:700"),
            EventKind::Executed {
                exec_ns: 3_000,
                requests: 2,
                bytes: None,
            },
        ));
        o.take(&ev(
            "10.0.0.1:4045",
            Some("10.0.0.2:700"),
            EventKind::Enqueue,
        ));
        let v = o.views(
            &NfsdPorts::default(),
            ServiceCounts {
                dispatches: 10,
                listener_dispatches: 1,
                requests: 9,
                exec_ns: 0,
            },
        );
        assert_eq!(v.len(), 3);
        assert_eq!((v[0].service.as_str(), v[0].dispatches), ("nfsd", 10));
        assert_eq!(
            (v[1].ports.as_slice(), v[1].dispatches, v[1].requests),
            (&[4045][..], 2, 2)
        );
        assert!((v[1].exec_seconds - 3e-6).abs() < 1e-12);
        assert_eq!(
            (
                v[2].ports.as_slice(),
                v[2].dispatches,
                v[2].listener_dispatches
            ),
            (&[53601][..], 1, 1)
        );
        for port in 0..(MAX_OTHER_PORTS as u16 + 10) {
            o.take(&ev(&format!("10.0.0.1:{}", 30000 + port), None, deq));
        }
        let v = o.views(&NfsdPorts::default(), ServiceCounts::default());
        assert_eq!(
            v.len(),
            1 + MAX_OTHER_PORTS + 1,
            "one row for the ports beyond the bound"
        );
        let total: u64 = v.iter().map(|r| r.dispatches).sum();
        assert_eq!(total, 3 + MAX_OTHER_PORTS as u64 + 10, "nothing dropped");
    }
}
