//! Queueing and the fair-share virtual clocks: a transport enqueued,
//! dequeued (a dispatch, with its wait) or moved to another class, and
//! what each backlogged entity is owed.

use super::histogram::bucket_of;
use super::table::Entity;
use super::{Aggregator, FairClock};

impl Aggregator {
    pub(super) fn enqueue(&mut self, xi: u32, ts: u64) {
        let x = self.xprts[xi as usize].as_mut().expect("live transport");
        // Idempotent: a duplicate or racy enqueue record cannot count twice.
        if x.queued {
            return;
        }
        x.queued = true;
        x.enqueued_ns = ts;
        let (ps, cs) = (x.peer, x.class);
        mark_queued(self.peers.get_mut(ps), &mut self.peer_clock, ts);
        mark_queued(self.classes.get_mut(cs), &mut self.class_clock, ts);
    }

    pub(super) fn unqueue(&mut self, xi: u32, ts: u64) {
        let x = self.xprts[xi as usize].as_mut().expect("live transport");
        if !x.queued {
            return;
        }
        x.queued = false;
        let (ps, cs) = (x.peer, x.class);
        mark_unqueued(self.peers.get_mut(ps), &mut self.peer_clock, ts);
        mark_unqueued(self.classes.get_mut(cs), &mut self.class_clock, ts);
    }

    pub(super) fn move_xprt_class(&mut self, xi: u32, new_class: u32, ts: u64) {
        let x = self.xprts[xi as usize].as_ref().expect("live transport");
        let (old, queued) = (x.class, x.queued);
        if old == new_class {
            return;
        }
        if queued {
            mark_unqueued(self.classes.get_mut(old), &mut self.class_clock, ts);
            mark_queued(self.classes.get_mut(new_class), &mut self.class_clock, ts);
        }
        self.classes.get_mut(old).connections -= 1;
        self.classes.get_mut(new_class).connections += 1;
        self.xprts[xi as usize].as_mut().expect("live").class = new_class;
    }

    pub(super) fn dequeue(&mut self, xi: u32, ts: u64, qtime_ns: Option<u64>, class: Option<u32>) {
        if let Some(word) = class {
            let x = self.xprts[xi as usize].as_ref().expect("live transport");
            if x.kernel_class != Some(word) {
                let peer_key = x.key.peer();
                let cs = self.class_slot_for(&peer_key, Some(word));
                self.move_xprt_class(xi, cs, ts);
                self.xprts[xi as usize].as_mut().expect("live").kernel_class = Some(word);
            }
        }
        // A dequeue of a transport we never saw queued (the agent started
        // mid-queue, or the enqueue record was lost): it was backlogged at
        // this instant, so count it as such for this one dispatch.
        let was_queued = self.xprts[xi as usize].as_ref().expect("live").queued;
        if !was_queued {
            self.enqueue(xi, ts);
        }
        let x = self.xprts[xi as usize].as_mut().expect("live transport");
        x.dispatches += 1;
        let own_wait_ns = was_queued.then(|| ts.saturating_sub(x.enqueued_ns));
        let (ps, cs) = (x.peer, x.class);

        self.peer_clock.v += 1.0 / self.peer_clock.backlogged.max(1) as f64;
        self.class_clock.v += 1.0 / self.class_clock.backlogged.max(1) as f64;
        self.dispatches += 1;

        if let Some(w) = own_wait_ns {
            self.saw_own_wait = true;
            self.own_wait_total.record_us(w / 1000);
        }
        let wait_bucket = match qtime_ns {
            Some(q) => {
                self.saw_qtime = true;
                Some(bucket_of(q / 1000))
            }
            None => own_wait_ns.map(|w| bucket_of(w / 1000)),
        };
        {
            let p = self.peers.get_mut(ps);
            p.dispatches += 1;
            p.last_active_ns = ts;
            if let Some(b) = wait_bucket {
                p.wait_interval.record_bucket(b);
            }
        }
        {
            let c = self.classes.get_mut(cs);
            c.dispatches += 1;
            c.last_active_ns = ts;
            // The cumulative histograms (`wait_total`) take each
            // interval's at the snapshot that ends it.
            if let Some(b) = wait_bucket {
                c.wait_interval.record_bucket(b);
            }
        }
        if let Some(b) = wait_bucket {
            self.wait_interval.record_bucket(b);
        }
        self.unqueue(xi, ts);
    }
}

fn mark_queued(e: &mut Entity, clock: &mut FairClock, ts: u64) {
    e.queued += 1;
    if e.queued == 1 {
        e.v_start = clock.v;
        e.backlog_since_ns = ts;
        clock.backlogged += 1;
    }
    e.last_active_ns = ts;
}

fn mark_unqueued(e: &mut Entity, clock: &mut FairClock, ts: u64) {
    e.queued -= 1;
    if e.queued == 0 {
        e.entitled_done += clock.v - e.v_start;
        e.backlogged_ns += ts.saturating_sub(e.backlog_since_ns);
        clock.backlogged -= 1;
    }
    e.last_active_ns = ts;
}

pub(super) fn entitled_now(e: &Entity, clock: &FairClock) -> f64 {
    if e.queued > 0 {
        e.entitled_done + (clock.v - e.v_start)
    } else {
        e.entitled_done
    }
}
