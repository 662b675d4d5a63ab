//! Loss accounting: every event nfsdtop did not see becomes a `Lost`
//! event of its tracepoint, counted once. Three causes: records the
//! programs could not put in the ring (the kernel's per-CPU `LOST`
//! counters), short records of a transport never sent in full (counted by
//! the raw decoder), and runs the kernel skipped (`recursion_misses`: the
//! program, or on classic tracepoints any BPF program, was already running
//! on that CPU, which kernels that preempt tracepoint programs make
//! happen).

use std::time::{Duration, Instant};

use nfsdtop_common::Slot;

use super::bpf;
use crate::model::{Event, EventKind};

/// The counters are a few syscalls: read at most this often.
const READ_EVERY: Duration = Duration::from_millis(100);

/// What has been reported lost so far, per slot.
#[derive(Default)]
pub struct Loss {
    lost_seen: [u64; Slot::COUNT],
    unknown_seen: [u64; Slot::COUNT],
    classic_misses_seen: [u64; Slot::COUNT],
    raw_misses_seen: [u64; Slot::COUNT],
    last_read: Option<Instant>,
}

/// `count` events of slot `s` that never reached the agent.
pub fn lost_event(now: u64, s: Slot, count: u64) -> Event {
    Event {
        ts_ns: now,
        xprt: Default::default(),
        kind: EventKind::Lost {
            tracepoint: s,
            count,
        },
    }
}

/// Runs a program skipped since `seen` was last updated, its kernel
/// count so far being `misses` (None where the kernel does not say).
fn new_misses(misses: Option<u64>, seen: &mut u64) -> Option<u64> {
    let misses = misses?;
    let delta = misses.saturating_sub(*seen);
    // Never lower: a twinned slot's count (misses less rescues) can dip
    // for a poll, and what was reported must not be reported again.
    *seen = misses.max(*seen);
    Some(delta)
}

impl Loss {
    /// True (and the clock restarted) when the counters are due a read.
    pub fn due(&mut self) -> bool {
        let due = self.last_read.is_none_or(|t| t.elapsed() >= READ_EVERY);
        if due {
            self.last_read = Some(Instant::now());
        }
        due
    }

    /// What grew of the ring's loss counters and of the decoder's count
    /// of `unknown` short records, as `Lost` events.
    pub fn ring(
        &mut self,
        counts: &[bpf::SlotCounts; Slot::COUNT],
        unknown: &[u64; Slot::COUNT],
        now: u64,
        out: &mut Vec<Event>,
    ) {
        for s in Slot::ALL {
            let i = s as usize;
            let delta = counts[i].lost.saturating_sub(self.lost_seen[i]);
            if delta > 0 {
                self.lost_seen[i] = counts[i].lost;
                out.push(lost_event(now, s, delta));
            }
            let unknown_delta = unknown[i].saturating_sub(self.unknown_seen[i]);
            if unknown_delta > 0 {
                self.unknown_seen[i] = unknown[i];
                out.push(lost_event(now, s, unknown_delta));
            }
        }
    }

    /// Runs slot `s`'s classic program skipped since the last call, as a
    /// `Lost` event (where the program is loaded).
    pub fn classic_misses(&mut self, ebpf: &aya::Ebpf, s: Slot, now: u64, out: &mut Vec<Event>) {
        let seen = &mut self.classic_misses_seen[s as usize];
        let misses = bpf::recursion_misses(ebpf, s.info().program);
        if let Some(delta) = new_misses(misses, seen).filter(|&d| d > 0) {
            out.push(lost_event(now, s, delta));
        }
    }

    /// Runs slot `s`'s raw program skipped since the last call (its
    /// kernel count so far is `misses`), as a `Lost` event; returns how
    /// many (0 where the kernel does not say).
    pub fn raw_misses(
        &mut self,
        misses: Option<u64>,
        s: Slot,
        now: u64,
        out: &mut Vec<Event>,
    ) -> u64 {
        let seen = &mut self.raw_misses_seen[s as usize];
        match new_misses(misses, seen) {
            Some(delta) if delta > 0 => {
                out.push(lost_event(now, s, delta));
                delta
            }
            _ => 0,
        }
    }
}

/// What the live source does about the runs its raw programs missed in
/// one poll (`missed`: each slot's, as [`Loss::raw_misses`] returned).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct MissResponse {
    /// Hand every raw slot over to its classic program: raw programs
    /// missed runs on a kernel not known to preempt them (`preempts`:
    /// twinned, or kept raw by `--keep-raw-tracepoints`), where classic
    /// programs lose nothing.
    pub hand_over: bool,
    /// Make every known transport send a full record again: a missed
    /// svc_xprt_free or svc_xprt_accept may have left a freed pointer
    /// known, which a new transport at that address would be taken for.
    pub forget_known: bool,
}

pub fn respond_to_misses(missed: &[u64; Slot::COUNT], preempts: bool) -> MissResponse {
    let any = missed.iter().any(|&m| m > 0);
    MissResponse {
        hand_over: any && !preempts,
        forget_known: missed[Slot::Close as usize] > 0 || missed[Slot::Accept as usize] > 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where raw programs stay (twins, `--keep-raw-tracepoints`) a missed
    /// free or accept still makes the programs forget what they know; a
    /// missed dispatch alone does not; elsewhere any miss hands over.
    #[test]
    fn a_missed_lifecycle_hit_forgets_known_transports_even_where_raw_stays() {
        let mut missed = [0u64; Slot::COUNT];
        assert_eq!(respond_to_misses(&missed, true), MissResponse::default());
        missed[Slot::Dequeue as usize] = 4;
        assert_eq!(respond_to_misses(&missed, true), MissResponse::default());
        let hand_over_only = MissResponse {
            hand_over: true,
            forget_known: false,
        };
        assert_eq!(respond_to_misses(&missed, false), hand_over_only);
        for s in [Slot::Close, Slot::Accept] {
            let mut missed = [0u64; Slot::COUNT];
            missed[s as usize] = 1;
            let r = respond_to_misses(&missed, true);
            assert_eq!((r.hand_over, r.forget_known), (false, true), "{s:?}");
            let r = respond_to_misses(&missed, false);
            assert_eq!((r.hand_over, r.forget_known), (true, true), "{s:?}");
        }
    }

    fn lost(out: &[Event]) -> Vec<(Slot, u64)> {
        out.iter()
            .map(|e| match e.kind {
                EventKind::Lost { tracepoint, count } => (tracepoint, count),
                _ => panic!("not a loss: {e:?}"),
            })
            .collect()
    }

    /// A twinned slot's count (misses less rescues) dips for a poll when a
    /// rescue is read before its miss: what was reported is not reported
    /// again when it comes back.
    #[test]
    fn a_dip_in_misses_is_not_reported_twice() {
        let mut l = Loss::default();
        let mut out = Vec::new();
        let s = Slot::Dequeue;
        assert_eq!(l.raw_misses(Some(3), s, 1, &mut out), 3);
        assert_eq!(l.raw_misses(Some(2), s, 2, &mut out), 0);
        assert_eq!(l.raw_misses(Some(3), s, 3, &mut out), 0);
        assert_eq!(l.raw_misses(Some(5), s, 4, &mut out), 2);
        assert_eq!(l.raw_misses(None, s, 5, &mut out), 0);
        assert_eq!(lost(&out), [(s, 3), (s, 2)]);
    }

    /// Counters only grow: each loss is reported once, as the growth.
    #[test]
    fn ring_losses_are_reported_as_deltas() {
        let mut l = Loss::default();
        let mut counts = [bpf::SlotCounts::default(); Slot::COUNT];
        let mut unknown = [0; Slot::COUNT];
        counts[Slot::Dequeue as usize].lost = 5;
        unknown[Slot::StatsLatency as usize] = 2;
        let mut out = Vec::new();
        l.ring(&counts, &unknown, 1, &mut out);
        assert_eq!(lost(&out), [(Slot::Dequeue, 5), (Slot::StatsLatency, 2)]);
        out.clear();
        l.ring(&counts, &unknown, 2, &mut out);
        assert!(out.is_empty(), "{out:?}");
        counts[Slot::Dequeue as usize].lost = 7;
        l.ring(&counts, &unknown, 3, &mut out);
        assert_eq!(lost(&out), [(Slot::Dequeue, 2)]);
        assert!(l.due());
        assert!(!l.due(), "read at most every {READ_EVERY:?}");
    }
}
