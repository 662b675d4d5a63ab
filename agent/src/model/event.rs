//! The one event type every source (live BPF, demo simulator, replay)
//! produces. It is deliberately small and `Copy`: the aggregator consumes
//! tens of millions of these per second and must not allocate per event.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use serde::{Deserialize, Serialize};

/// A socket address as the kernel's tracepoints report it. `None` is the
/// zero-length sockaddr of listener and UDP transports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Endpoint {
    #[default]
    None,
    V4 {
        ip: [u8; 4],
        port: u16,
    },
    V6 {
        ip: [u8; 16],
        port: u16,
    },
}

impl Endpoint {
    pub fn from_socket_addr(sa: SocketAddr) -> Self {
        match sa {
            SocketAddr::V4(a) => Endpoint::V4 {
                ip: a.ip().octets(),
                port: a.port(),
            },
            SocketAddr::V6(a) => Endpoint::V6 {
                ip: a.ip().octets(),
                port: a.port(),
            },
        }
    }

    pub fn ip(&self) -> Option<IpAddr> {
        match *self {
            Endpoint::None => None,
            Endpoint::V4 { ip, .. } => Some(IpAddr::V4(Ipv4Addr::from(ip))),
            Endpoint::V6 { ip, .. } => Some(IpAddr::V6(Ipv6Addr::from(ip))),
        }
    }

    pub fn port(&self) -> u16 {
        match *self {
            Endpoint::None => 0,
            Endpoint::V4 { port, .. } | Endpoint::V6 { port, .. } => port,
        }
    }

    /// The same endpoint without its port: the identity of a peer.
    pub fn without_port(&self) -> Self {
        match *self {
            Endpoint::None => Endpoint::None,
            Endpoint::V4 { ip, .. } => Endpoint::V4 { ip, port: 0 },
            Endpoint::V6 { ip, .. } => Endpoint::V6 { ip, port: 0 },
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ip() {
            None => f.write_str("(listener)"),
            Some(ip) if self.port() == 0 => write!(f, "{ip}"),
            Some(ip) => write!(f, "{}", SocketAddr::new(ip, self.port())),
        }
    }
}

/// Hashed as one or three words (family and port in the first): the
/// aggregator looks a transport up on every event, and the derived hash
/// fed the address bytes and an array length in separately.
impl std::hash::Hash for Endpoint {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match *self {
            Endpoint::None => state.write_u64(0),
            Endpoint::V4 { ip, port } => {
                state.write_u64(1 << 48 | u64::from(port) << 32 | u64::from(u32::from_ne_bytes(ip)))
            }
            Endpoint::V6 { ip, port } => {
                let (hi, lo) = ip.split_at(8);
                state.write_u64(2 << 48 | u64::from(port) << 32);
                state.write_u64(u64::from_ne_bytes(hi.try_into().unwrap_or_default()));
                state.write_u64(u64::from_ne_bytes(lo.try_into().unwrap_or_default()));
            }
        }
    }
}

/// One svc_xprt: (netns inode, server sockaddr, client sockaddr with port).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct XprtKey {
    pub netns: u32,
    pub server: Endpoint,
    pub client: Endpoint,
}

impl std::hash::Hash for XprtKey {
    /// An IPv4 transport (the common case) is exactly 128 bits, written as
    /// two words (a seeded hasher folds them once): every event's
    /// transport is looked up by this hash.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        if let (Endpoint::V4 { ip: s, port: sp }, Endpoint::V4 { ip: c, port: cp }) =
            (self.server, self.client)
        {
            state.write_u64(u64::from(self.netns) << 32 | u64::from(u32::from_ne_bytes(s)));
            state.write_u64(
                u64::from(sp) << 48 | u64::from(cp) << 32 | u64::from(u32::from_ne_bytes(c)),
            );
        } else {
            state.write_u32(self.netns);
            self.server.hash(state);
            self.client.hash(state);
        }
    }
}

impl XprtKey {
    /// The peer this transport belongs to: the client address without its
    /// port, within its netns. Listener/UDP records (no client) all map to
    /// the `(listener)` pseudo-peer of their netns.
    pub fn peer(&self) -> PeerKey {
        PeerKey {
            netns: self.netns,
            addr: self.client.without_port(),
        }
    }
}

/// A client address without its port, within a netns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct PeerKey {
    pub netns: u32,
    pub addr: Endpoint,
}

impl PeerKey {
    pub fn is_listener(&self) -> bool {
        self.addr == Endpoint::None
    }
}

impl fmt::Display for PeerKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.addr.fmt(f)
    }
}

/// Which tracepoint an event or a count belongs to: the BPF side's slot
/// (`nfsdtop_common::SLOTS` is the one table of tracepoints; its number is
/// also the recording format's code).
pub use nfsdtop_common::Slot as Tracepoint;

/// One count per tracepoint, indexed by [`Tracepoint`]; named only where
/// it is written out. In JSON it is `[[name, count], ...]` in slot order
/// (docs/json.md); reading, a name this version does not know is skipped
/// (a newer agent's tracepoint) and a missing one is 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PerTracepoint(pub [u64; Tracepoint::COUNT]);

impl PerTracepoint {
    /// (tracepoint, count) in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (Tracepoint, u64)> + '_ {
        Tracepoint::ALL.into_iter().zip(self.0.iter().copied())
    }

    pub fn sum(&self) -> u64 {
        self.0.iter().fold(0u64, |a, &b| a.saturating_add(b))
    }
}

impl std::ops::Index<Tracepoint> for PerTracepoint {
    type Output = u64;
    fn index(&self, t: Tracepoint) -> &u64 {
        &self.0[t as usize]
    }
}

impl std::ops::IndexMut<Tracepoint> for PerTracepoint {
    fn index_mut(&mut self, t: Tracepoint) -> &mut u64 {
        &mut self.0[t as usize]
    }
}

impl Serialize for PerTracepoint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter().map(|(t, n)| (t.name(), n)))
    }
}

impl<'de> Deserialize<'de> for PerTracepoint {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let pairs = Vec::<(String, u64)>::deserialize(d)?;
        let mut out = PerTracepoint::default();
        for (name, n) in pairs {
            if let Some(t) = Tracepoint::ALL.into_iter().find(|t| t.name() == name) {
                out[t] = n;
            }
        }
        Ok(out)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A real enqueue: the transport went onto a pool's ready queue. Sources
    /// must not emit attempts that found the transport BUSY (6.6+ kernels).
    /// `inflight`: the transport's requests in flight at that moment (the
    /// kernel's `xpt_nr_rqsts`: received, not yet replied to), where the
    /// source reads it.
    Enqueue { inflight: Option<u32> },
    /// A thread took the transport off the ready queue: one dispatch.
    /// `qtime_ns` is the kernel's own queue wait (6.16+ `qtime`); `class`
    /// is the kernel's class when the dequeue tracepoint carries one.
    Dequeue {
        qtime_ns: Option<u64>,
        class: Option<u32>,
    },
    /// `requests` requests finished, taking `exec_ns` in all
    /// (`svc_stats_latency.execute`, receive → send): one request per
    /// record, or several where the kernel added them up (see
    /// `nfsdtop_common::exec`). `bytes`: what those requests received
    /// and sent on the wire, where the source measures it (`None`: not
    /// measured, e.g. on classic tracepoints, never "0 bytes").
    /// `procedure`: the one procedure all of them were, where the record
    /// names it (a classic or raw record of one request): the same as a
    /// `Procedure` event of these counts, carried here so that a request
    /// is one event, not two, on its way through the agent.
    Executed {
        exec_ns: u64,
        requests: u64,
        bytes: Option<Bytes>,
        procedure: Option<ProcName>,
    },
    /// `requests` requests of one RPC procedure finished, taking
    /// `exec_ns` in all: a breakdown of the same transport's `Executed`
    /// events, from sources that count procedures (never counted twice:
    /// the requests themselves are the `Executed` ones).
    Procedure {
        name: ProcName,
        requests: u64,
        exec_ns: u64,
    },
    /// `count` NFSv4 operations numbered `op` (`nfsdtop_common::nfs4ops`:
    /// the number nfsd counts in `proc4ops`; 255 past its table) were
    /// processed in the transport's COMPOUNDs (`--nfs4-ops`).
    Operation { op: u8, count: u32 },
    /// A connection was accepted (or found in the socket table at start).
    Accepted,
    /// A transport went away (close/free).
    Closed,
    /// Records that never reached the agent (ring buffer full).
    Lost { tracepoint: Tracepoint, count: u64 },
}

/// An RPC procedure's name as the kernel gives it (`pc_name`, what ftrace
/// prints as `proc=`), kept inline so that an [`Event`] stays `Copy`:
/// printable ASCII, at most [`ProcName::MAX`] bytes (longer is cut).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcName([u8; ProcName::MAX]);

impl ProcName {
    pub const MAX: usize = 16;
    /// The name procedures outside nfsdtop's table go by.
    pub const OTHER: &'static str = "(other)";

    /// `name`, with anything but printable ASCII as `?`.
    pub fn new(name: &str) -> ProcName {
        ProcName::from_bytes(name.as_bytes())
    }

    /// The same from bytes as a kernel record holds them (not checked for
    /// UTF-8 first: each byte that is not printable ASCII becomes `?`).
    pub fn from_bytes(name: &[u8]) -> ProcName {
        let mut b = [0u8; ProcName::MAX];
        for (d, &c) in b.iter_mut().zip(name) {
            *d = if c.is_ascii_graphic() { c } else { b'?' };
        }
        ProcName(b)
    }

    pub fn as_str(&self) -> &str {
        let n = self.0.iter().position(|&c| c == 0).unwrap_or(ProcName::MAX);
        // Only ASCII is ever stored (`new`).
        std::str::from_utf8(&self.0[..n]).unwrap_or("?")
    }
}

impl fmt::Debug for ProcName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// In JSON: the name as a string (read back as [`ProcName::new`] makes it).
impl Serialize for ProcName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ProcName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(ProcName::new(&<std::borrow::Cow<'de, str>>::deserialize(
            d,
        )?))
    }
}

impl fmt::Display for ProcName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Bytes of RPC requests and replies (`svc_rqst.rq_arg.len` received,
/// `rq_res.len` sent: on the wire, RPC headers included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bytes {
    pub received: u64,
    pub sent: u64,
}

/// Timestamps are nanoseconds on the source's monotonic clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub ts_ns: u64,
    pub xprt: XprtKey,
    pub kind: EventKind,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_drops_port_and_keeps_netns() {
        let x = XprtKey {
            netns: 7,
            server: Endpoint::from_socket_addr("10.0.0.1:2049".parse().unwrap()),
            client: Endpoint::from_socket_addr("10.0.0.9:801".parse().unwrap()),
        };
        assert_eq!(x.peer().to_string(), "10.0.0.9");
        assert_eq!(x.peer().netns, 7);
    }

    #[test]
    fn procedure_names_are_inline_printable_and_cut() {
        assert_eq!(ProcName::new("READDIRPLUS").as_str(), "READDIRPLUS");
        assert_eq!(ProcName::new("a\nb\u{e9}").as_str(), "a?b??");
        assert_eq!(ProcName::from_bytes(b"RE\xffD").as_str(), "RE?D");
        assert_eq!(
            ProcName::new("0123456789abcdefXYZ").as_str(),
            "0123456789abcdef"
        );
        assert_eq!(ProcName::new("").as_str(), "");
    }

    #[test]
    fn ipv6_and_listener_display() {
        let v6 = Endpoint::from_socket_addr("[fd00::2]:700".parse().unwrap());
        assert_eq!(v6.to_string(), "[fd00::2]:700");
        assert_eq!(v6.without_port().to_string(), "fd00::2");
        assert_eq!(Endpoint::None.to_string(), "(listener)");
    }

    /// The JSON of docs/json.md: names in slot order, and back.
    #[test]
    fn per_tracepoint_counts_serialise_as_named_pairs() {
        let mut c = PerTracepoint::default();
        c[Tracepoint::Dequeue] = 7;
        c[Tracepoint::Close] = 2;
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(
            json,
            r#"[["svc_xprt_enqueue",0],["svc_xprt_dequeue",7],["svc_stats_latency",0],["svc_xprt_accept",0],["svc_xprt_free",2]]"#
        );
        assert_eq!(serde_json::from_str::<PerTracepoint>(&json).unwrap(), c);
        let newer = r#"[["svc_xprt_free",3],["svc_pool_thread_wake",9]]"#;
        let back: PerTracepoint = serde_json::from_str(newer).unwrap();
        assert_eq!((back[Tracepoint::Close], back.sum()), (3, 3));
    }
}
