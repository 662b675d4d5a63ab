//! Twin programs: exact counts where the kernel can preempt a raw or
//! typed program (7.0+ with preemption full, lazy or RT).
//!
//! The kernel skips a hit for a program that is already running on that
//! CPU (`recursion_misses`); there a thread preempted inside the program
//! makes the next thread's hit on that CPU miss. So each slot that counts
//! dispatches or requests, or starts or ends a transport, has a second
//! program (`RawProgram::rescue`), attached after the first: the kernel
//! runs both on every hit, and skips each only while a run of that same
//! program is under way on the CPU. The first program marks the hit in
//! the thread's `TWIN` entry (`mark(tid, true)`) as it starts; the second
//! finds that mark and clears it, or finds it clear (`mark(tid, false)`,
//! or 0 for an entry never written): then the first was skipped for this
//! hit, and the second does its work. Each such slot has its own lane of
//! entries. A thread's hits of one tracepoint come one after another
//! (these tracepoints fire in nfsd's and lockd's threads, never inside an
//! interrupt), so its entry cannot change between its two programs but by
//! a thread whose id shares the entry; then the second does nothing.
//! Hits lost are those both programs missed, and those whose entry
//! another thread held: `recursion_misses` of the first minus
//! [`crate::counter::RESCUED`]. No hit is done twice.

use super::{Slot, SLOTS};

/// Entries per lane: a thread's entry is its id's low bits.
pub const THREAD_ENTRIES: u32 = 1 << 16;
/// Lanes: one per slot that has a rescue program.
pub const LANES: u32 = rescues_before(SLOTS.len());
/// Entries of `TWIN` where twins run (the agent sizes it at load, to
/// one entry elsewhere).
pub const ENTRIES: u32 = LANES * THREAD_ENTRIES;

const fn has_rescue(i: usize) -> bool {
    matches!(SLOTS[i].raw, Some(r) if r.rescue.is_some())
}

/// How many of the first `n` slots have a rescue program.
const fn rescues_before(n: usize) -> u32 {
    let mut count = 0;
    let mut i = 0;
    while i < n {
        if has_rescue(i) {
            count += 1;
        }
        i += 1;
    }
    count
}

/// Slot `slot`'s lane: how many slots before it have a rescue program
/// (None: it has none, and no twin). A constant in each program.
#[inline(always)]
pub const fn lane(slot: Slot) -> Option<u32> {
    if has_rescue(slot as usize) {
        Some(rescues_before(slot as usize))
    } else {
        None
    }
}

/// Thread `tid`'s entry for slot `slot` (None: the slot has no twin).
#[inline(always)]
pub const fn index(slot: Slot, tid: u32) -> Option<u32> {
    match lane(slot) {
        Some(l) => Some(l * THREAD_ENTRIES + (tid & (THREAD_ENTRIES - 1))),
        None => None,
    }
}

/// The entry's word for thread `tid`: whether its first program ran
/// for the hit under way.
#[inline(always)]
pub const fn mark(tid: u32, ran: bool) -> u64 {
    (tid as u64) << 1 | ran as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each slot with a rescue program has its own lane, in range.
    #[test]
    fn lanes_are_distinct_and_in_range() {
        let lanes: [Option<u32>; Slot::COUNT] = Slot::ALL.map(lane);
        let mut used: [bool; Slot::COUNT] = [false; Slot::COUNT];
        for (s, l) in Slot::ALL.iter().zip(lanes) {
            assert_eq!(
                l.is_some(),
                s.info().raw.is_some_and(|r| r.rescue.is_some())
            );
            if let Some(l) = l {
                assert!(l < LANES);
                assert!(!used[l as usize], "lane {l} twice");
                used[l as usize] = true;
            }
        }
        assert_eq!(LANES, 4, "dequeue, svc_stats_latency, accept and free");
        assert_eq!(index(Slot::Enqueue, 7), None);
        assert_eq!(
            index(Slot::StatsLatency, 0x1_0007),
            Some(THREAD_ENTRIES + 7)
        );
    }
}
