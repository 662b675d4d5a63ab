//! Entitled dispatches (fair share) recomputed from the kernel's own
//! ftrace text, independently of the agent: the truth that nfsdtop's
//! `entitled` and fairness ratios are checked against in the QEMU tests.
//!
//! The definition, written again here on purpose: a transport is queued
//! from a real enqueue until its dequeue (or its free); a peer is
//! backlogged while any of its transports is queued; at each dispatch,
//! with n peers backlogged, each of them earns 1/n. A dequeue of a
//! transport not seen queued counts it as backlogged for that dispatch.
//! Records without a client address (listeners, UDP) belong to one
//! pseudo-peer, as nfsdtop's `(listener)`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};

use super::ftrace::{field, has_flag, is_listener, other_service};

/// A peer as nfsdtop names it: a client address, or the listener/UDP
/// pseudo-peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Peer {
    Client(IpAddr),
    Listener,
}

/// Which enqueue records are real enqueues. On 5.18-6.5 the tracepoint
/// fires on real enqueues only; from 6.6 on every attempt, and only a
/// record without BUSY and with a reason to queue (CONN, CLOSE,
/// HANDSHAKE, DATA, DEFERRED) queued the transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnqueueRule {
    EveryRecord,
    Attempts,
    /// 6.16+: enqueue records are not read; each dequeue's `qtime-us`
    /// (how long its transport was queued, from the kernel's
    /// `xpt_qtime`) says when it was enqueued. nfsdtop's default there
    /// rebuilds the queue this way, from its dequeues alone.
    Qtime,
}

impl EnqueueRule {
    /// From nfsdtop's `source.generation` ("5.18-6.5", "6.6+", "6.16+").
    pub fn of_generation(generation: &str) -> EnqueueRule {
        if generation.starts_with("5.") {
            EnqueueRule::EveryRecord
        } else {
            EnqueueRule::Attempts
        }
    }

    /// Whether a record with these `flags` (as ftrace prints them) queued
    /// its transport.
    pub fn queues(self, flags: &str) -> bool {
        match self {
            EnqueueRule::EveryRecord => true,
            EnqueueRule::Qtime => false,
            EnqueueRule::Attempts => {
                !has_flag(flags, "BUSY")
                    && ["CONN", "CLOSE", "HANDSHAKE", "DATA", "DEFERRED"]
                        .iter()
                        .any(|f| has_flag(flags, f))
            }
        }
    }
}

/// Per client of nfsd: its real enqueues (by `rule`) over the whole
/// trace.
pub fn real_enqueues(trace: &str, rule: EnqueueRule) -> BTreeMap<IpAddr, u64> {
    let mut n = BTreeMap::new();
    for r in records(trace, rule, None) {
        if let (ENQUEUE, Peer::Client(ip)) = (r.kind, r.peer) {
            *n.entry(ip).or_default() += 1;
        }
    }
    n
}

/// Per peer of nfsd: dispatches and entitled dispatches over the whole
/// trace.
pub fn entitled(trace: &str, rule: EnqueueRule) -> BTreeMap<Peer, (u64, f64)> {
    entitled_in(trace, rule, None)
}

/// Per peer of one service: nfsd's (`port` None) or the other service's
/// on server port `port` (lockd's: its own queue, its own peers).
pub fn entitled_in(
    trace: &str,
    rule: EnqueueRule,
    port: Option<u16>,
) -> BTreeMap<Peer, (u64, f64)> {
    let mut events = records(trace, rule, port);
    // ftrace merges its per-CPU buffers by time; sort to be sure.
    events.sort_by(|a, b| a.ts.total_cmp(&b.ts).then(a.order.cmp(&b.order)));

    let mut queued: HashSet<String> = HashSet::new();
    let mut queued_of: HashMap<Peer, u32> = HashMap::new();
    let mut out: BTreeMap<Peer, (u64, f64)> = BTreeMap::new();
    for Record {
        kind, xprt, peer, ..
    } in events
    {
        match kind {
            ENQUEUE => {
                if queued.insert(xprt) {
                    *queued_of.entry(peer).or_default() += 1;
                }
            }
            DEQUEUE => {
                let mut backlogged: Vec<Peer> = queued_of.keys().copied().collect();
                if !backlogged.contains(&peer) {
                    backlogged.push(peer);
                }
                let share = 1.0 / backlogged.len() as f64;
                for p in backlogged {
                    out.entry(p).or_default().1 += share;
                }
                out.entry(peer).or_default().0 += 1;
                unqueue(&xprt, peer, &mut queued, &mut queued_of);
            }
            _ => unqueue(&xprt, peer, &mut queued, &mut queued_of),
        }
    }
    out
}

const ENQUEUE: &str = "svc_xprt_enqueue";
const DEQUEUE: &str = "svc_xprt_dequeue";

/// One queue record of the trace, as the fair-share definition reads it.
struct Record {
    ts: f64,
    /// Its line, which orders records of the same timestamp.
    order: usize,
    kind: &'static str,
    xprt: String,
    peer: Peer,
}

/// The enqueue, dequeue and free records of one service (nfsd's: `port`
/// None) in trace order: enqueues only where `rule` says they queued (with
/// `Qtime`, one at each dequeue's `ts - qtime`); records without a
/// timestamp or with an unreadable client left out.
fn records(trace: &str, rule: EnqueueRule, port: Option<u16>) -> Vec<Record> {
    let mut events = Vec::new();
    for (order, line) in trace.lines().enumerate() {
        if line.starts_with('#') {
            continue;
        }
        let kind = [ENQUEUE, DEQUEUE, "svc_xprt_free"]
            .into_iter()
            .find_map(|k| {
                line.split_once(&format!(" {k}: "))
                    .map(|(head, rest)| (k, head, rest))
            });
        let Some((kind, head, rest)) = kind else {
            continue;
        };
        // "comm-pid [cpu] flags  SECONDS.MICROS:" ends the head.
        let Some(ts) = head
            .rsplit(' ')
            .find_map(|t| t.trim_end_matches(':').parse::<f64>().ok())
        else {
            continue;
        };
        let flags = field(rest, "flags").unwrap_or("");
        // One service's shares: each has its own queue.
        if other_service(rest) != port {
            continue;
        }
        if kind == ENQUEUE && !rule.queues(flags) {
            continue;
        }
        let server = field(rest, "server").unwrap_or("");
        let client = field(rest, "client").unwrap_or("");
        let (xprt, peer) = if is_listener(rest) {
            (format!("{server} -"), Peer::Listener)
        } else {
            match client.parse::<SocketAddr>() {
                Ok(c) => (format!("{server} {client}"), Peer::Client(c.ip())),
                Err(_) => continue,
            }
        };
        if kind == DEQUEUE && rule == EnqueueRule::Qtime {
            if let Some(qtime_us) = field(rest, "qtime-us").and_then(|q| q.parse::<f64>().ok()) {
                events.push(Record {
                    ts: ts - qtime_us / 1e6,
                    order,
                    kind: ENQUEUE,
                    xprt: xprt.clone(),
                    peer,
                });
            }
        }
        events.push(Record {
            ts,
            order,
            kind,
            xprt,
            peer,
        });
    }
    events
}

fn unqueue(
    xprt: &String,
    peer: Peer,
    queued: &mut HashSet<String>,
    queued_of: &mut HashMap<Peer, u32>,
) {
    if queued.remove(xprt) {
        if let Some(n) = queued_of.get_mut(&peer) {
            *n -= 1;
            if *n == 0 {
                queued_of.remove(&peer);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(ts: f64, event: &str, client: &str, flags: &str) -> String {
        format!(
            "   nfsd-1 [000] ..... {ts:.6}: {event}: server=10.0.0.1:2049 client={client} flags={flags}\n"
        )
    }

    /// Two clients, A with two connections: by hand, A queued on both,
    /// B on one; three dispatches with A and B backlogged, then one with
    /// A alone.
    #[test]
    fn entitled_by_hand() {
        let a1 = "10.0.0.2:700";
        let a2 = "10.0.0.2:701";
        let b = "10.0.0.3:800";
        let mut t = String::new();
        t += &line(1.0, "svc_xprt_enqueue", a1, "DATA");
        t += &line(1.1, "svc_xprt_enqueue", a2, "DATA");
        t += &line(1.2, "svc_xprt_enqueue", b, "DATA");
        // A BUSY attempt and a record with nothing to do queue nothing.
        t += &line(1.25, "svc_xprt_enqueue", b, "BUSY|DATA");
        t += &line(1.3, "svc_xprt_dequeue", a1, "BUSY|DATA"); // A, B: 1/2 each
        t += &line(1.4, "svc_xprt_dequeue", a2, "BUSY|DATA"); // A, B: 1/2 each
        t += &line(1.45, "svc_xprt_enqueue", a1, "TEMP");
        t += &line(1.5, "svc_xprt_dequeue", b, "BUSY|DATA"); // B alone: 1
        t += &line(1.6, "svc_xprt_dequeue", a1, "BUSY|DATA"); // not seen queued: A alone, 1
        let got = entitled(&t, EnqueueRule::Attempts);
        let a = got[&Peer::Client("10.0.0.2".parse().unwrap())];
        let b = got[&Peer::Client("10.0.0.3".parse().unwrap())];
        assert_eq!((a.0, b.0), (3, 1));
        assert!((a.1 - 2.0).abs() < 1e-9, "{a:?}");
        assert!((b.1 - 2.0).abs() < 1e-9, "{b:?}");
        // Where every record is an enqueue (5.18-6.5), the TEMP record
        // queues A again: B's dispatch is shared (a half each), and A's
        // last one was queued (A alone: 1).
        let got = entitled(&t, EnqueueRule::EveryRecord);
        let a = got[&Peer::Client("10.0.0.2".parse().unwrap())];
        let b = got[&Peer::Client("10.0.0.3".parse().unwrap())];
        assert!((a.1 - 2.5).abs() < 1e-9, "{a:?}");
        assert!((b.1 - 1.5).abs() < 1e-9, "{b:?}");
    }

    /// 6.16+: the dequeues' qtime-us say when their transports were
    /// queued, and enqueue records are not read. By hand: A queued at 1.0
    /// (dequeued at 1.3 after 300000 µs), B at 1.2 (dequeued at 1.5):
    /// A's dispatch is shared with B (a half each), B's is B's alone. By
    /// the enqueue records, B's enqueue at 1.35 comes after A's dispatch:
    /// A gets it all.
    #[test]
    fn qtime_says_when_a_transport_was_queued() {
        let a = "10.0.0.2:700";
        let b = "10.0.0.3:800";
        let mut t = String::new();
        t += &line(1.0, "svc_xprt_enqueue", a, "DATA");
        t += &line(1.35, "svc_xprt_enqueue", b, "DATA");
        t += &line(1.3, "svc_xprt_dequeue", a, "BUSY|DATA qtime-us=300000");
        t += &line(1.5, "svc_xprt_dequeue", b, "BUSY|DATA qtime-us=300000");
        let peer = |ip: &str| Peer::Client(ip.parse().unwrap());
        let got = entitled(&t, EnqueueRule::Qtime);
        assert_eq!(got[&peer("10.0.0.2")], (1, 0.5));
        assert_eq!(got[&peer("10.0.0.3")], (1, 1.5));
        let got = entitled(&t, EnqueueRule::Attempts);
        assert_eq!(got[&peer("10.0.0.2")], (1, 1.0));
        assert_eq!(got[&peer("10.0.0.3")], (1, 1.0));
    }

    #[test]
    fn listener_records_are_one_pseudo_peer() {
        let mut t = String::new();
        t += &line(1.0, "svc_xprt_enqueue", "(einval)", "CONN|LISTENER");
        t += &line(1.1, "svc_xprt_enqueue", "10.0.0.2:700", "DATA");
        t += &line(1.2, "svc_xprt_dequeue", "(einval)", "BUSY|CONN|LISTENER");
        let got = entitled(&t, EnqueueRule::Attempts);
        assert_eq!(got[&Peer::Listener], (1, 0.5));
        assert_eq!(got[&Peer::Client("10.0.0.2".parse().unwrap())], (0, 0.5));
    }
}
