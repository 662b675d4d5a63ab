//! Records the raw-tracepoint programs wrote: full ones (decoded like a
//! classic record, at the `rawrec` offsets) and short ones, which name
//! their transport by its `struct svc_xprt` pointer; and the execution
//! totals the kernel folds per transport (`nfsdtop_common::exec`).

use nfsdtop_common::exec::ExecTotals;
use nfsdtop_common::{rawrec, xprt_table, RecordView, Slot};
use rustc_hash::FxHashMap;

use super::{classic::decode, kind};
use crate::model::{Bytes, Event, EventKind, XprtKey};
use crate::source::live::layout::Layout;
use crate::source::live::procs::{self, RowClaims};

/// The transports the raw programs have sent in full, by their `struct
/// svc_xprt` pointer: a short record (`rawrec::SHORT`) names its transport
/// by pointer only. A raw svc_xprt_free record forgets the pointer; the
/// BPF side forgets it at the free and again at svc_xprt_accept, so a
/// transport at a reused address starts with a full record, which
/// replaces the old one here.
///
/// Also what has been reported of each transport's execution totals
/// folded in the kernel (`nfsdtop_common::exec`): the totals of the
/// entry a full record claimed (its `gen` is the record's time), read by
/// [`KnownXprts::sweep`] and settled by the record that ends the claim.
#[derive(Default)]
pub struct KnownXprts {
    keys: FxHashMap<u64, Known>,
    /// Short records whose pointer was never sent in full, and folded
    /// requests of a claim never seen, per slot (never expected: counted
    /// as lost events, not guessed at).
    pub unknown: [u64; Slot::COUNT],
    /// The kernel's per-transport procedure rows the agent claimed.
    pub procs: RowClaims,
}

#[derive(Clone, Copy, Debug)]
struct Known {
    key: XprtKey,
    /// The claim of the transport's last full record.
    claim: Claim,
    /// The claim of its full record before, where two of the same
    /// transport raced: each program resets and claims the entry after
    /// reserving its record, so the entry can end with the earlier
    /// record's claim (a program preempted between the two, while another
    /// sent the same transport in full).
    before: Option<Claim>,
}

/// One claim on a transport's `EXEC_TOTALS` entry, and what was reported
/// of it.
#[derive(Clone, Copy, Debug, Default)]
struct Claim {
    /// The time of the full record that claimed the entry.
    gen: u64,
    /// Folded µs, requests and bytes reported so far for that claim.
    us: u64,
    count: u64,
    bytes_in: u64,
    bytes_out: u64,
}

impl Known {
    /// The claim of this transport's that `t`, the entry of the transport
    /// at `ptr`, holds, if it holds one.
    fn holding(&mut self, ptr: u64, t: &ExecTotals) -> Option<&mut Claim> {
        if t.owner != ptr {
            return None;
        }
        self.claim_of(t.gen)
    }

    /// Its claim made at `gen`, if it made one.
    fn claim_of(&mut self, gen: u64) -> Option<&mut Claim> {
        if self.claim.gen == gen {
            return Some(&mut self.claim);
        }
        self.before.as_mut().filter(|c| c.gen == gen)
    }
}

impl Claim {
    /// What grew of `t` (this claim's totals) since last reported.
    /// `measures_bytes`: the kernel folds the lengths too (else its byte
    /// sums are 0 and mean "not measured").
    fn report(
        &mut self,
        key: XprtKey,
        t: &ExecTotals,
        measures_bytes: bool,
        ts_ns: u64,
        out: &mut Vec<Event>,
    ) {
        let grew = |now: u64, seen: &mut u64| {
            let d = now.saturating_sub(*seen);
            *seen = (*seen).max(now);
            d
        };
        let us = grew(t.us, &mut self.us);
        let count = grew(t.count, &mut self.count);
        let bytes = Bytes {
            received: grew(t.bytes_in, &mut self.bytes_in),
            sent: grew(t.bytes_out, &mut self.bytes_out),
        };
        if us > 0 || count > 0 || bytes != Bytes::default() {
            out.push(Event {
                ts_ns,
                xprt: key,
                kind: EventKind::Executed {
                    exec_ns: us.saturating_mul(1000),
                    requests: count,
                    bytes: measures_bytes.then_some(bytes),
                    procedure: None,
                },
            });
        }
    }
}

impl KnownXprts {
    /// Decode a raw program's record (full or short) with the raw layout
    /// into `out`: its event, after the execution totals it settles.
    pub fn decode(&mut self, rec: &RecordView<'_>, layout: &Layout, out: &mut Vec<Event>) {
        let ptr = rec.field(rawrec::XPRT, 8).unwrap_or(0);
        if rec.raw_kind() == rawrec::SHORT {
            let Some(s) = rec.slot() else {
                return;
            };
            let cfg = &layout.slots[s as usize];
            let Some(known) = self.keys.get(&ptr) else {
                self.unknown[s as usize] += 1;
                return;
            };
            if let Some(kind) = kind(rec, s, cfg, layout) {
                let mut ev = Event {
                    ts_ns: rec.ts_ns(),
                    xprt: known.key,
                    kind,
                };
                procs::name_from_record(rec, &mut ev);
                out.push(ev);
            }
            return;
        }
        let settled = ExecTotals {
            owner: rec.field(rawrec::EXEC_OWNER, 8).unwrap_or(0),
            gen: rec.field(rawrec::EXEC_GEN, 8).unwrap_or(0),
            us: rec.field(rawrec::EXEC_US, 8).unwrap_or(0),
            count: rec.field(rawrec::EXEC_COUNT, 8).unwrap_or(0),
            bytes_in: rec.field(rawrec::EXEC_BYTES_IN, 8).unwrap_or(0),
            bytes_out: rec.field(rawrec::EXEC_BYTES_OUT, 8).unwrap_or(0),
        };
        let bytes = measures_bytes(layout);
        if settled.owner != 0 {
            let known = self.keys.get_mut(&settled.owner);
            match known.and_then(|k| Some((k.key, k.claim_of(settled.gen)?))) {
                Some((key, c)) => c.report(key, &settled, bytes, rec.ts_ns(), out),
                None => {
                    let n = &mut self.unknown[Slot::StatsLatency as usize];
                    *n = n.saturating_add(settled.count);
                }
            }
        }
        let Some(mut ev) = decode(rec, layout) else {
            return;
        };
        procs::name_from_record(rec, &mut ev);
        if ptr != 0 {
            if ev.kind == EventKind::Closed {
                self.forget(ptr);
                self.procs.settle(ptr, rec.ts_ns(), out);
            } else {
                self.procs.want(ptr, rec.ts_ns(), ev.xprt);
                let before = self
                    .keys
                    .remove(&ptr)
                    .filter(|k| k.key == ev.xprt)
                    .map(|k| k.claim);
                self.keys.insert(
                    ptr,
                    Known {
                        key: ev.xprt,
                        claim: Claim {
                            gen: rec.ts_ns(),
                            ..Claim::default()
                        },
                        before,
                    },
                );
            }
        }
        out.push(ev);
    }

    /// The pointers of the transports sent in full (the entries
    /// `KNOWN_XPRTS` can hold).
    pub fn pointers(&self) -> impl Iterator<Item = u64> + '_ {
        self.keys.keys().copied()
    }

    /// Report what grew of every known transport's folded totals;
    /// `read` gives an entry of the kernel's `EXEC_TOTALS` (None while it
    /// changes hands). An entry that another claim holds, or whose claim's
    /// full record has not been decoded yet, waits for a later sweep or
    /// for the record that settles it.
    pub fn sweep(
        &mut self,
        read: impl Fn(u32) -> Option<ExecTotals>,
        layout: &Layout,
        now_ns: u64,
        out: &mut Vec<Event>,
    ) {
        let bytes = measures_bytes(layout);
        for (&ptr, k) in self.keys.iter_mut() {
            let Some(t) = read(xprt_table::slot(ptr)) else {
                continue;
            };
            let key = k.key;
            if let Some(c) = k.holding(ptr, &t) {
                c.report(key, &t, bytes, now_ns, out);
            }
        }
    }

    /// Forget the transport known at `ptr`.
    fn forget(&mut self, ptr: u64) {
        self.keys.remove(&ptr);
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// Whether the raw svc_stats_latency program reads the requests' lengths:
/// its decoding layout then has the [`rawrec::LENS`] word.
fn measures_bytes(layout: &Layout) -> bool {
    layout.slots[Slot::StatsLatency as usize].flags_off == rawrec::LENS
}
