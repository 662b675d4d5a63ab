//! Each peer's burst completion and in-flight depth at enqueue, derived
//! from the events alone: a transport's requests in flight (the kernel's
//! `xpt_nr_rqsts`, received and not yet released) are its dispatches less
//! its finished requests (`Executed`), and it is on the ready queue from
//! an `Enqueue` to the next `Dequeue`.
//!
//! A burst begins at an enqueue that finds nothing in flight (what the
//! sparse-flow design keys on) and completes at the next moment the
//! transport has nothing in flight and nothing queued: its last reply
//! sent with no request left waiting. A transport that touches zero in
//! flight while still queued has not finished its burst: it is waiting
//! for a thread, as a burst served one request at a time does.
//!
//! Exact where each request's `Executed` comes at its end (the demo and
//! its recordings, the what-if's own runs); a live source settles
//! execution times in batches, so there the caller leaves bursts out.

use std::collections::HashMap;

use super::reservoir::Reservoir;
use crate::model::{Event, EventKind, XprtKey};

/// Burst durations kept per peer for its percentiles.
const SAMPLES: usize = 4096;

#[derive(Clone, Copy, Debug, Default)]
struct TransportState {
    inflight: u64,
    queued: bool,
    /// When the burst under way began (its enqueue at depth 0).
    burst_from: Option<u64>,
}

/// One peer's bursts and enqueues.
#[derive(Clone, Debug)]
pub struct PeerBursts {
    pub enqueues: u64,
    /// Enqueues that found the transport with nothing in flight.
    pub enqueues_at_depth0: u64,
    completions_ns: Reservoir<u64>,
}

impl PeerBursts {
    fn new() -> Self {
        PeerBursts {
            enqueues: 0,
            enqueues_at_depth0: 0,
            completions_ns: Reservoir::new(SAMPLES, 0x5eed),
        }
    }

    /// Bursts completed.
    pub fn bursts(&self) -> u64 {
        self.completions_ns.seen()
    }

    /// The `q` quantile (0..1) of burst completion, µs; None without a
    /// completed burst.
    pub fn completion_us(&self, q: f64) -> Option<f64> {
        let mut v = self.completions_ns.items().to_vec();
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        let i = ((v.len() - 1) as f64 * q).round() as usize;
        Some(v[i.min(v.len() - 1)] as f64 / 1e3)
    }

    /// Enqueues at depth 0 over all enqueues; None without an enqueue.
    pub fn depth0_share(&self) -> Option<f64> {
        (self.enqueues > 0).then(|| self.enqueues_at_depth0 as f64 / self.enqueues as f64)
    }
}

/// Burst tracking over an event stream, per peer (netns, address).
#[derive(Clone, Debug, Default)]
pub struct Bursts {
    transports: HashMap<XprtKey, TransportState>,
    peers: HashMap<(u32, String), PeerBursts>,
}

impl Bursts {
    pub fn ingest_all(&mut self, events: &[Event]) {
        for e in events {
            self.ingest(e);
        }
    }

    pub fn ingest(&mut self, e: &Event) {
        let counts = matches!(
            e.kind,
            EventKind::Enqueue { .. } | EventKind::Dequeue { .. } | EventKind::Executed { .. }
        );
        if !counts {
            if e.kind == EventKind::Closed {
                self.transports.remove(&e.xprt);
            }
            return;
        }
        let st = self.transports.entry(e.xprt).or_default();
        match e.kind {
            EventKind::Enqueue { .. } => {
                let peer = self
                    .peers
                    .entry((e.xprt.netns, e.xprt.peer().to_string()))
                    .or_insert_with(PeerBursts::new);
                peer.enqueues += 1;
                if st.inflight == 0 {
                    peer.enqueues_at_depth0 += 1;
                    st.burst_from.get_or_insert(e.ts_ns);
                }
                st.queued = true;
            }
            EventKind::Dequeue { .. } => {
                st.queued = false;
                st.inflight += 1;
            }
            EventKind::Executed { requests, .. } => {
                st.inflight = st.inflight.saturating_sub(requests);
                if st.inflight == 0 && !st.queued {
                    if let Some(from) = st.burst_from.take() {
                        self.peers
                            .entry((e.xprt.netns, e.xprt.peer().to_string()))
                            .or_insert_with(PeerBursts::new)
                            .completions_ns
                            .push(e.ts_ns.saturating_sub(from));
                    }
                }
            }
            _ => {}
        }
    }

    /// Forget what was counted (a run's warm-up), keeping each transport's
    /// state so that bursts under way carry on.
    pub fn reset_counts(&mut self) {
        self.peers.clear();
        // A burst begun in the warm-up is not measured whole from here.
        for st in self.transports.values_mut() {
            st.burst_from = None;
        }
    }

    pub fn peer(&self, netns: u32, name: &str) -> Option<&PeerBursts> {
        self.peers.get(&(netns, name.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Endpoint;

    fn ev(ts_ns: u64, kind: EventKind) -> Event {
        Event {
            ts_ns,
            xprt: XprtKey {
                netns: 1,
                server: Endpoint::None,
                client: Endpoint::from_socket_addr("10.0.0.2:700".parse().unwrap()),
            },
            kind,
        }
    }

    fn done(ts_ns: u64) -> Event {
        ev(
            ts_ns,
            EventKind::Executed {
                exec_ns: 1,
                requests: 1,
                bytes: None,
                procedure: None,
            },
        )
    }

    fn deq(ts_ns: u64) -> Event {
        ev(
            ts_ns,
            EventKind::Dequeue {
                qtime_ns: None,
                class: None,
            },
        )
    }

    /// Two requests served one at a time: in flight touches zero at 30
    /// while the transport still waits on the queue; the burst ends at
    /// 50, when nothing is in flight or queued.
    #[test]
    fn a_burst_ends_when_nothing_is_in_flight_or_queued() {
        let mut b = Bursts::default();
        b.ingest_all(&[
            ev(10, EventKind::Enqueue { inflight: None }),
            deq(20),
            ev(20, EventKind::Enqueue { inflight: None }), // received: one more waiting, depth 1
            done(30),
            deq(40),
            done(50),
            ev(100, EventKind::Enqueue { inflight: None }), // the next burst
            deq(110),
            done(130),
        ]);
        let p = b.peer(1, "10.0.0.2").unwrap();
        assert_eq!(p.bursts(), 2);
        assert_eq!(p.enqueues, 3);
        assert_eq!(p.enqueues_at_depth0, 2);
        assert_eq!(p.completion_us(0.0), Some(0.03));
        assert_eq!(p.completion_us(1.0), Some(0.04));
        assert_eq!(p.depth0_share(), Some(2.0 / 3.0));
    }

    /// A burst begun in the warm-up is not counted, nor its enqueues.
    #[test]
    fn reset_drops_counts_and_bursts_under_way() {
        let mut b = Bursts::default();
        b.ingest_all(&[ev(10, EventKind::Enqueue { inflight: None }), deq(20)]);
        b.reset_counts();
        b.ingest_all(&[
            done(30),
            ev(40, EventKind::Enqueue { inflight: None }),
            deq(41),
            done(45),
        ]);
        let p = b.peer(1, "10.0.0.2").unwrap();
        assert_eq!(p.bursts(), 1);
        assert_eq!(p.completion_us(0.5), Some(0.005));
        assert_eq!(p.enqueues, 1);
    }
}
