//! The ready queue rebuilt from dequeues alone: how nfsdtop watches
//! kernels whose svc_xprt_dequeue carries `qtime` (6.16+) unless asked
//! for `--enqueue-hooks`.
//!
//! A dequeue's `qtime` is how long its transport was on the ready queue,
//! so the dequeue says when the transport joined it: an enqueue at
//! `ts - qtime`. That is all DESIGN's "backlogged" needs (a transport is
//! queued from a real enqueue to its dequeue), so fair share comes out as
//! with the enqueue hooks, without the four tracepoint hits per dispatch
//! that svc_xprt_enqueue's attempts cost. The catch is order: the enqueue
//! is learnt only at the dequeue, after dispatches of other transports
//! it was backlogged through. So every event is held for [`WINDOW_NS`]
//! and released in time order: a snapshot covers events up to one window
//! ago. A transport queued longer than the window has its enqueue
//! released late, at the time of the last released event (counted in
//! [`Rebuild::late`]); it is backlogged only from then on. At most
//! [`MAX_HELD`] events are held: beyond that the oldest go out early.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::model::{Event, EventKind};

/// How long events are held for reordering.
pub const WINDOW_NS: u64 = 1_000_000_000;
/// Most events held at once (about 110 MiB at 112 bytes an event): a
/// window of a server doing some 500 k dispatches a second, five times
/// what the benchmark guest's programs could produce.
pub const MAX_HELD: usize = 1 << 20;

/// An event held, ordered by time, then by arrival: a made-up enqueue
/// arrives just before its own dequeue, and after the events of other
/// transports at the same instant (which a qtime cannot order).
struct Held {
    ts_ns: u64,
    seq: u64,
    ev: Event,
}

impl Held {
    fn key(&self) -> (u64, u64) {
        (self.ts_ns, self.seq)
    }
}

impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        self.key() == o.key()
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    // Reversed: BinaryHeap is a max-heap, the earliest must come first.
    fn cmp(&self, o: &Self) -> Ordering {
        o.key().cmp(&self.key())
    }
}

/// The reorder buffer (see the module comment).
pub struct Rebuild {
    held: BinaryHeap<Held>,
    /// Most events held ([`MAX_HELD`]; smaller in tests).
    cap: usize,
    seq: u64,
    /// Time of the last event released.
    released_ns: u64,
    /// Events released later than their time (their transport was queued
    /// longer than the window, or more than [`MAX_HELD`] were held).
    pub late: u64,
}

impl Default for Rebuild {
    fn default() -> Self {
        Rebuild::with_cap(MAX_HELD)
    }
}

impl Rebuild {
    pub fn with_cap(cap: usize) -> Rebuild {
        Rebuild {
            held: BinaryHeap::new(),
            cap,
            seq: 0,
            released_ns: 0,
            late: 0,
        }
    }

    /// Take one decoded event; a dequeue with `qtime` brings its enqueue.
    pub fn push(&mut self, ev: Event) {
        if let EventKind::Dequeue {
            qtime_ns: Some(q), ..
        } = ev.kind
        {
            self.hold(Event {
                ts_ns: ev.ts_ns.saturating_sub(q),
                xprt: ev.xprt,
                kind: EventKind::Enqueue,
            });
        }
        self.hold(ev);
    }

    fn hold(&mut self, ev: Event) {
        self.seq += 1;
        self.held.push(Held {
            ts_ns: ev.ts_ns,
            seq: self.seq,
            ev,
        });
    }

    /// Release, in time order, every event older than one window before
    /// `now_ns` (and the oldest beyond the cap).
    pub fn release(&mut self, now_ns: u64, out: &mut Vec<Event>) {
        let horizon = now_ns.saturating_sub(WINDOW_NS);
        while let Some(top) = self.held.peek() {
            if top.ts_ns > horizon && self.held.len() <= self.cap {
                break;
            }
            let Some(Held { mut ev, .. }) = self.held.pop() else {
                break;
            };
            if ev.ts_ns < self.released_ns {
                ev.ts_ns = self.released_ns;
                self.late += 1;
            }
            self.released_ns = ev.ts_ns;
            out.push(ev);
        }
    }

    pub fn held(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Endpoint, XprtKey};

    const MS: u64 = 1_000_000;

    fn xprt(port: u16) -> XprtKey {
        XprtKey {
            netns: 1,
            server: Endpoint::from_socket_addr("10.0.0.1:2049".parse().unwrap()),
            client: Endpoint::from_socket_addr(format!("10.0.0.9:{port}").parse().unwrap()),
        }
    }

    fn dequeue(ts_ms: u64, port: u16, qtime_ms: u64) -> Event {
        Event {
            ts_ns: ts_ms * MS,
            xprt: xprt(port),
            kind: EventKind::Dequeue {
                qtime_ns: Some(qtime_ms * MS),
                class: None,
            },
        }
    }

    fn kinds(out: &[Event]) -> Vec<(u64, u16, &'static str)> {
        out.iter()
            .map(|e| {
                let k = match e.kind {
                    EventKind::Enqueue => "enq",
                    EventKind::Dequeue { .. } => "deq",
                    _ => "other",
                };
                (e.ts_ns / MS, e.xprt.client.port(), k)
            })
            .collect()
    }

    /// Transport 1 queued at 10 ms, dequeued at 50; transport 2 queued
    /// at 20, dequeued at 30 (its dequeue arrives first). Released in
    /// time order once a window has passed, not before.
    #[test]
    fn enqueues_come_from_qtime_and_everything_goes_out_in_time_order() {
        let mut r = Rebuild::default();
        r.push(dequeue(30, 2, 10));
        r.push(dequeue(50, 1, 40));
        let mut out = Vec::new();
        r.release(30 * MS + WINDOW_NS - 1, &mut out);
        assert_eq!(kinds(&out), [(10, 1, "enq"), (20, 2, "enq")]);
        r.release(50 * MS + WINDOW_NS, &mut out);
        assert_eq!(
            kinds(&out),
            [
                (10, 1, "enq"),
                (20, 2, "enq"),
                (30, 2, "deq"),
                (50, 1, "deq")
            ]
        );
        assert_eq!((r.late, r.held()), (0, 0));
    }

    /// A transport queued longer than the window: its enqueue goes out at
    /// the last released time, counted late; a qtime of 0 puts the
    /// enqueue just before its own dequeue.
    #[test]
    fn an_enqueue_older_than_the_window_is_released_late_and_counted() {
        let mut r = Rebuild::default();
        let mut out = Vec::new();
        r.push(dequeue(100, 2, 0));
        r.release(100 * MS + WINDOW_NS, &mut out);
        r.push(dequeue(1_500, 1, 1_450));
        r.release(1_500 * MS + WINDOW_NS, &mut out);
        assert_eq!(
            kinds(&out),
            [
                (100, 2, "enq"),
                (100, 2, "deq"),
                (100, 1, "enq"),
                (1_500, 1, "deq")
            ]
        );
        assert_eq!(r.late, 1);
    }

    /// More events than the cap within one window: the oldest go out at
    /// once, so what is held never passes the cap.
    #[test]
    fn never_more_than_the_cap_is_held() {
        let mut r = Rebuild::with_cap(100);
        let mut out = Vec::new();
        for i in 0..250 {
            r.push(dequeue(1_000 + i, 1, 0));
            r.release((1_000 + i) * MS, &mut out);
            assert!(r.held() <= 100, "{} held", r.held());
        }
        assert_eq!(out.len() + r.held(), 500, "nothing dropped");
        let ts: Vec<u64> = out.iter().map(|e| e.ts_ns).collect();
        assert!(ts.windows(2).all(|w| w[0] <= w[1]), "in time order");
    }
}
