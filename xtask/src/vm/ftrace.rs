//! The independent ground truth: the kernel's own ftrace text of the
//! sunrpc events, counted per client, and the ring buffer's loss counters.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

/// nfsd's port in the guest: its records are the ones compared per client.
const NFS_PORT: u16 = nfsdtop_agent::aggregate::services::NFS_PORT;

/// Per-client dequeue counts from ftrace's `trace` text.
#[derive(Debug, Default, PartialEq)]
pub struct Ftrace {
    /// svc_xprt_dequeue records of nfsd (server port 2049) per client IP,
    /// listener records left out (their printed client is bogus).
    pub per_client: BTreeMap<IpAddr, u64>,
    /// nfsd's listener records (flags include LISTENER or XPT_LISTENER)
    /// and its records with an empty client address (UDP).
    pub listener: u64,
    /// Dequeues of other services (lockd, NFS callback: a server port
    /// other than nfsd's), listeners and UDP included, by server port.
    pub other_services: BTreeMap<u16, u64>,
    /// Of them, those of a connected client (not a listener, not UDP), by
    /// server port and client IP.
    pub other_per_client: BTreeMap<(u16, IpAddr), u64>,
    /// svc_stats_latency of other services by server port and procedure
    /// (`proc=`: what names the service, NLM's `TEST` lockd's).
    pub other_procs: BTreeMap<u16, BTreeMap<String, u64>>,
    /// Every svc_xprt_dequeue record.
    pub total: u64,
    /// Records whose addresses could not be parsed.
    pub unparsed: u64,
    pub enqueue: u64,
    /// svc_stats_latency of nfsd per client IP: (requests, sum of
    /// `execute-us`).
    pub exec_per_client: BTreeMap<IpAddr, (u64, u64)>,
    /// The same records per client IP and procedure (`proc=`).
    pub procs_per_client: BTreeMap<IpAddr, BTreeMap<String, u64>>,
    /// Their `execute-us`, per client IP and procedure, in trace order.
    pub exec_us_per_client_proc: BTreeMap<IpAddr, BTreeMap<String, Vec<u64>>>,
}

pub fn field<'a>(rest: &'a str, key: &str) -> Option<&'a str> {
    rest.split_whitespace()
        .find_map(|tok| tok.strip_prefix(key)?.strip_prefix('='))
}

/// Whether a record's `flags` text names `flag` (6.6+ prints "BUSY",
/// 5.18-6.5 "XPT_BUSY").
pub fn has_flag(flags: &str, flag: &str) -> bool {
    flags
        .split('|')
        .any(|f| f.trim_start_matches("XPT_") == flag)
}

/// A record of a listener or of a transport without a client address
/// (UDP, such as lockd's): such an empty address prints as "(einval)" or
/// as a stale address read past the record, and such transports are
/// bound to the wildcard address, while a connected TCP transport has a
/// specific local one. All of these are nfsdtop's (listener) pseudo-peer.
pub fn is_listener(rest: &str) -> bool {
    let server = field(rest, "server").and_then(|s| s.parse::<SocketAddr>().ok());
    field(rest, "client") == Some("(einval)")
        || server.is_some_and(|s| s.ip().is_unspecified())
        || has_flag(field(rest, "flags").unwrap_or(""), "LISTENER")
}

/// The server port of a record of another service than nfsd (lockd, the
/// NFS client's callback service): its server address is the transport's
/// bound one (never empty, listeners and UDP included), on a port other
/// than nfsd's. Such a service has threads and a queue of its own.
pub fn other_service(rest: &str) -> Option<u16> {
    let server = field(rest, "server").and_then(|s| s.parse::<SocketAddr>().ok())?;
    (server.port() != NFS_PORT).then_some(server.port())
}

pub fn parse_trace(text: &str) -> Ftrace {
    let mut f = Ftrace::default();
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        if line.contains(" svc_xprt_enqueue: ") {
            f.enqueue += 1;
            continue;
        }
        if let Some((_, rest)) = line.split_once(" svc_stats_latency: ") {
            let server = field(rest, "server").and_then(|s| s.parse::<SocketAddr>().ok());
            let client = field(rest, "client").and_then(|s| s.parse::<SocketAddr>().ok());
            let us = field(rest, "execute-us").and_then(|v| v.parse::<u64>().ok());
            if let Some(s) = server.filter(|s| s.port() != NFS_PORT) {
                let p = field(rest, "proc").unwrap_or("?").to_string();
                *f.other_procs
                    .entry(s.port())
                    .or_default()
                    .entry(p)
                    .or_default() += 1;
            }
            if let (Some(s), Some(c), Some(us)) = (server, client, us) {
                if s.port() == NFS_PORT && !s.ip().is_unspecified() {
                    let e = f.exec_per_client.entry(c.ip()).or_default();
                    e.0 += 1;
                    e.1 += us;
                    let p = field(rest, "proc").unwrap_or("?").to_string();
                    f.exec_us_per_client_proc
                        .entry(c.ip())
                        .or_default()
                        .entry(p.clone())
                        .or_default()
                        .push(us);
                    *f.procs_per_client
                        .entry(c.ip())
                        .or_default()
                        .entry(p)
                        .or_default() += 1;
                }
            }
            continue;
        }
        let Some((_, rest)) = line.split_once(" svc_xprt_dequeue: ") else {
            continue;
        };
        f.total += 1;
        if let Some(port) = other_service(rest) {
            *f.other_services.entry(port).or_default() += 1;
            let client = field(rest, "client").and_then(|s| s.parse::<SocketAddr>().ok());
            if let (false, Some(c)) = (is_listener(rest), client) {
                *f.other_per_client.entry((port, c.ip())).or_default() += 1;
            }
            continue;
        }
        let server = field(rest, "server").and_then(|s| s.parse::<SocketAddr>().ok());
        if is_listener(rest) {
            f.listener += 1;
            continue;
        }
        let client = field(rest, "client").and_then(|s| s.parse::<SocketAddr>().ok());
        match (server, client) {
            (Some(_), Some(c)) => *f.per_client.entry(c.ip()).or_default() += 1,
            _ => f.unparsed += 1,
        }
    }
    f
}

/// Sums of `overrun`, `commit overrun` and `dropped events` over every CPU
/// in the saved `per_cpu/cpu*/stats`; None if the file has no CPU stats.
pub fn ftrace_losses(stats: &str) -> Option<u64> {
    let mut seen = false;
    let mut lost = 0;
    for line in stats.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        if matches!(k.trim(), "overrun" | "commit overrun" | "dropped events") {
            seen = true;
            lost += v.trim().parse::<u64>().unwrap_or(u64::MAX / 4);
        }
    }
    seen.then_some(lost)
}
