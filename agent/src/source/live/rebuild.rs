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
//! and released in time order.
//!
//! The window is measured in the events' own time, from the agent's
//! *frontier*: the time up to which it has read the kernel's records (the
//! newest record read, or the last moment the ring reader found the ring
//! empty). An agent that reads the ring late, because the server is busy
//! or the agent is held back, still releases in time order: the frontier
//! is where its reading is, not where the clock is. A transport queued
//! longer than the window has its enqueue released late, at the time of
//! the last released event (counted in [`Rebuild::late`]); it is
//! backlogged only from then on. At most [`MAX_HELD`] events are held:
//! beyond that the oldest go out before their window has passed (counted
//! in [`Rebuild::early`]).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use crate::model::{Event, EventKind};

/// How long events are held for reordering.
pub const WINDOW_NS: u64 = 1_000_000_000;
/// Most events held at once (about 120 MiB at 120 bytes an event, which
/// a test holds it to): a
/// window of a server doing some 500 k dispatches a second, five times
/// what the benchmark guest's programs could produce.
pub const MAX_HELD: usize = 1 << 20;

/// An out-of-order event held: its place in the slab, ordered by time,
/// then by arrival (a made-up enqueue arrives just before its own
/// dequeue, and after the events of other transports at the same instant,
/// which a qtime cannot order). The heap moves these 24 bytes, not the
/// events.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Held {
    ts_ns: u64,
    seq: u64,
    slot: u32,
}

impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    // Reversed: BinaryHeap is a max-heap, the earliest must come first.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.ts_ns, o.seq).cmp(&(self.ts_ns, self.seq))
    }
}

/// Queues of events in time order ([`Rebuild::lanes`]).
const LANES: usize = 2;

/// The reorder buffer (see the module comment). Events come nearly in
/// time order, all but the made-up enqueues (a qtime before their
/// dequeue). Those come nearly in time order among themselves too: the
/// kernel's ready queue is first in, first out, so transports leave it in
/// the order they joined. So an event waits in the first of two queues
/// whose last event is no later than it (the first takes the records, the
/// second the made-up enqueues), only the rest in a heap, and release
/// takes the earliest head of the three. The order out is that of one
/// heap of all (time, then arrival), at O(1) for most events: at 12 k
/// dispatches a second a window holds some 40,000.
pub struct Rebuild {
    lanes: [VecDeque<(u64, Event)>; LANES],
    held: BinaryHeap<Held>,
    /// The heap's events, by [`Held::slot`]; `free` lists the empty slots.
    slab: Vec<Event>,
    free: Vec<u32>,
    /// Most events held ([`MAX_HELD`]; smaller in tests).
    cap: usize,
    seq: u64,
    /// Time of the last event released.
    released_ns: u64,
    /// Events released later than their own time: enqueues of transports
    /// queued longer than the window (or behind events that went out
    /// early).
    pub late: u64,
    /// Events released before their window had passed, because more than
    /// the cap were held.
    pub early: u64,
}

impl Default for Rebuild {
    fn default() -> Self {
        Rebuild::with_cap(MAX_HELD)
    }
}

impl Rebuild {
    pub fn with_cap(cap: usize) -> Rebuild {
        Rebuild {
            lanes: Default::default(),
            held: BinaryHeap::new(),
            slab: Vec::new(),
            free: Vec::new(),
            cap,
            seq: 0,
            released_ns: 0,
            late: 0,
            early: 0,
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
                kind: EventKind::Enqueue { inflight: None },
            });
        }
        self.hold(ev);
    }

    fn hold(&mut self, ev: Event) {
        self.seq += 1;
        let ts_ns = ev.ts_ns;
        if let Some(lane) = self
            .lanes
            .iter_mut()
            .find(|l| l.back().is_none_or(|b| b.1.ts_ns <= ts_ns))
        {
            lane.push_back((self.seq, ev));
            return;
        }
        let slot = match self.free.pop() {
            Some(s) => {
                self.slab[s as usize] = ev;
                s
            }
            None => {
                self.slab.push(ev);
                // At most MAX_HELD (2^20) plus one window's events.
                u32::try_from(self.slab.len() - 1).unwrap_or(u32::MAX)
            }
        };
        self.held.push(Held {
            ts_ns,
            seq: self.seq,
            slot,
        });
    }

    /// The earliest event held: its time, and where it is.
    fn earliest(&self) -> Option<(u64, Head)> {
        let mut best = self.held.peek().map(|h| ((h.ts_ns, h.seq), Head::Heap));
        for (i, lane) in self.lanes.iter().enumerate() {
            if let Some((seq, e)) = lane.front() {
                let at = (e.ts_ns, *seq);
                if best.is_none_or(|(b, _)| at < b) {
                    best = Some((at, Head::Lane(i)));
                }
            }
        }
        best.map(|((ts, _), from)| (ts, from))
    }

    /// The earliest event, taken out of where it is.
    fn pop(&mut self, from: Head) -> Option<Event> {
        match from {
            Head::Lane(i) => self.lanes[i].pop_front().map(|(_, e)| e),
            Head::Heap => {
                let h = self.held.pop()?;
                let ev = *self.slab.get(h.slot as usize)?;
                self.free.push(h.slot);
                Some(ev)
            }
        }
    }

    /// Release, in time order, every event up to `until_ns` that is
    /// older than one window before `frontier_ns` (the time up to which
    /// the kernel's records have been read), and the oldest beyond the cap.
    pub fn release(&mut self, frontier_ns: u64, until_ns: u64, out: &mut Vec<Event>) {
        let horizon = horizon(frontier_ns).min(until_ns);
        // Events past the cap go out whatever their time.
        let mut over = self.held().saturating_sub(self.cap);
        while let Some((ts, from)) = self.earliest() {
            if ts > horizon {
                if over == 0 {
                    break;
                }
                self.early += 1;
            }
            over = over.saturating_sub(1);
            let Some(mut ev) = self.pop(from) else {
                break;
            };
            if ev.ts_ns < self.released_ns {
                ev.ts_ns = self.released_ns;
                self.late += 1;
            }
            self.released_ns = ev.ts_ns;
            out.push(ev);
        }
        // A burst's slots are not kept once the window has passed it.
        if self.held.is_empty() {
            self.slab.clear();
            self.free.clear();
        }
    }

    pub fn held(&self) -> usize {
        self.lanes.iter().map(VecDeque::len).sum::<usize>() + self.held.len()
    }
}

/// The time up to which held events can be released once the kernel's
/// records have been read up to `frontier_ns`: one window before it.
pub fn horizon(frontier_ns: u64) -> u64 {
    frontier_ns.saturating_sub(WINDOW_NS)
}

/// Where the earliest event held is.
#[derive(Clone, Copy)]
enum Head {
    Lane(usize),
    Heap,
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
                    EventKind::Enqueue { .. } => "enq",
                    EventKind::Dequeue { .. } => "deq",
                    _ => "other",
                };
                (e.ts_ns / MS, e.xprt.client.port(), k)
            })
            .collect()
    }

    /// The memory bound stated at [`MAX_HELD`] holds for the event's size.
    #[test]
    fn a_held_event_is_at_most_120_bytes() {
        assert!(std::mem::size_of::<Event>() <= 120);
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
        r.release(30 * MS + WINDOW_NS - 1, u64::MAX, &mut out);
        assert_eq!(kinds(&out), [(10, 1, "enq"), (20, 2, "enq")]);
        r.release(50 * MS + WINDOW_NS, u64::MAX, &mut out);
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
        r.release(100 * MS + WINDOW_NS, u64::MAX, &mut out);
        r.push(dequeue(1_500, 1, 1_450));
        r.release(1_500 * MS + WINDOW_NS, u64::MAX, &mut out);
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

    /// The queues-and-heap release gives exactly the order of one heap of
    /// every event by (time, arrival), with the same late fix-ups: checked
    /// against that reference on a pseudo-random stream of dequeues (some
    /// with long qtimes, some arriving out of order) released at random
    /// times, with a cap that binds.
    #[test]
    fn the_same_order_as_one_heap_of_all() {
        let mut r = Rebuild::with_cap(300);
        let mut reference: Vec<(u64, u64, Event)> = Vec::new();
        let (mut seq, mut released, mut late) = (0u64, 0u64, 0u64);
        let (mut got, mut want) = (Vec::new(), Vec::new());
        // The second queue and the heap each held events at some point.
        let mut used = [false; 2];
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let mut now = 10_000 * MS;
        for _ in 0..5_000 {
            now += rnd(3 * MS);
            // Now and then a record from another CPU, a little late.
            let ts = now - rnd(4) * rnd(2) * MS / 2;
            let q = if rnd(10) == 0 {
                rnd(2_000) * MS
            } else {
                rnd(MS)
            };
            let ev = Event {
                ts_ns: ts,
                xprt: xprt(700 + rnd(8) as u16),
                kind: EventKind::Dequeue {
                    qtime_ns: Some(q),
                    class: None,
                },
            };
            r.push(ev);
            used[0] |= !r.lanes[1].is_empty();
            used[1] |= !r.held.is_empty();
            let enq = Event {
                ts_ns: ts.saturating_sub(q),
                kind: EventKind::Enqueue { inflight: None },
                ..ev
            };
            for e in [enq, ev] {
                seq += 1;
                reference.push((e.ts_ns, seq, e));
            }
            if rnd(20) == 0 {
                let at = now - rnd(WINDOW_NS);
                r.release(at, u64::MAX, &mut got);
                // The reference: one sort of all, the same rule.
                reference.sort_by_key(|&(t, s, _)| std::cmp::Reverse((t, s)));
                let horizon = at.saturating_sub(WINDOW_NS);
                while let Some(&(t, _, mut e)) = reference.last() {
                    if t > horizon && reference.len() <= 300 {
                        break;
                    }
                    reference.pop();
                    if e.ts_ns < released {
                        e.ts_ns = released;
                        late += 1;
                    }
                    released = e.ts_ns;
                    want.push(e);
                }
            }
        }
        assert!(want.len() > 1_000, "{}", want.len());
        assert!(late > 0, "some enqueues older than the window");
        assert_eq!(got, want);
        assert_eq!(r.late, late);
        assert_eq!(used, [true, true], "the second queue, the heap");
    }

    /// More events than the cap within one window: the oldest go out at
    /// once, so what is held never passes the cap.
    #[test]
    fn never_more_than_the_cap_is_held() {
        let mut r = Rebuild::with_cap(100);
        let mut out = Vec::new();
        for i in 0..250 {
            r.push(dequeue(1_000 + i, 1, 0));
            r.release((1_000 + i) * MS, u64::MAX, &mut out);
            assert!(r.held() <= 100, "{} held", r.held());
        }
        assert_eq!(out.len() + r.held(), 500, "nothing dropped");
        let ts: Vec<u64> = out.iter().map(|e| e.ts_ns).collect();
        assert!(ts.windows(2).all(|w| w[0] <= w[1]), "in time order");
        assert_eq!(r.early as usize, out.len(), "each one counted early");
    }

    /// Nothing after `until` goes out, however far the frontier is: a
    /// snapshot cut at `until` gets exactly the events up to it.
    #[test]
    fn nothing_after_until_is_released() {
        let mut r = Rebuild::default();
        let mut out = Vec::new();
        for t in [10, 20, 30, 40] {
            r.push(dequeue(t, 1, 0));
        }
        r.release(10 * WINDOW_NS, 20 * MS, &mut out);
        assert_eq!(
            kinds(&out),
            [
                (10, 1, "enq"),
                (10, 1, "deq"),
                (20, 1, "enq"),
                (20, 1, "deq")
            ]
        );
        r.release(10 * WINDOW_NS, u64::MAX, &mut out);
        assert_eq!(out.len(), 8);
        assert_eq!((r.late, r.early), (0, 0));
    }

    /// An agent that reads ten windows' worth of records at once (it was
    /// held back, or the server kept it busy) releases them as one that
    /// kept up does: the frontier is the newest record read, so the
    /// enqueues made up from qtimes are not late, and the order is time's.
    #[test]
    fn a_late_reader_releases_as_a_prompt_one() {
        let stream: Vec<Event> = (0..2_000u64)
            .map(|i| dequeue(1_000 + 5 * i, 1 + (i % 7) as u16, 3 + i % 11))
            .collect();
        // Prompt: each record read at its own time, released as it goes.
        let mut prompt = Rebuild::default();
        let mut want = Vec::new();
        for ev in &stream {
            prompt.push(*ev);
            prompt.release(ev.ts_ns, u64::MAX, &mut want);
        }
        // Late: nothing read for the first 9 s, then all of it at once.
        let mut late = Rebuild::default();
        let mut got = Vec::new();
        for ev in &stream {
            late.push(*ev);
        }
        let newest = stream.last().map_or(0, |e| e.ts_ns);
        late.release(newest, u64::MAX, &mut got);
        assert_eq!(got, want);
        assert_eq!((late.late, late.early), (0, 0));
        assert_eq!(prompt.late, 0);
        // The rest goes out once the frontier passes it, as before.
        late.release(newest + WINDOW_NS, u64::MAX, &mut got);
        assert_eq!(got.len(), 2 * stream.len());
    }
}
