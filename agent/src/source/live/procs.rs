//! Requests per RPC procedure on raw tracepoints: the procedure a raw
//! svc_stats_latency record carries, and the kernel's per-transport
//! procedure rows (`nfsdtop_common::procs`). The agent is the only writer
//! of a row's ownership: it claims a row for a transport whose
//! `EXEC_TOTALS` claim it has decoded, reports what grew in it, and
//! settles a row's last counts (at its transport's free, or once that
//! transport can no longer be folded into it) before claiming it again.

use nfsdtop_common::procs::{self, ProcSlot, ROWS, ROW_SLOTS, ROW_WORDS};
use nfsdtop_common::{rawrec, xprt_table, RecordView};
use rustc_hash::FxHashMap;

use super::error::LiveError;
use super::mapped::Mapped;
pub use super::mapped::Words;
use crate::model::{Event, EventKind, ProcName, XprtKey};

/// The `PROC_ROWS` array, mapped for reading and writing.
pub fn map_rows(ebpf: &aya::Ebpf) -> Result<Box<dyn Words + Send>, LiveError> {
    let rows = Mapped::map_writable(ebpf, "PROC_ROWS", ROWS as usize * ROW_WORDS * 8)?;
    Ok(Box::new(rows))
}

/// The name of procedure index `i` (`procs::OTHER` and unknown ones are
/// `(other)`).
fn name(i: u32) -> ProcName {
    ProcName::new(procs::name(i).unwrap_or(ProcName::OTHER))
}

/// Names, in `ev` (a raw svc_stats_latency record decoded), the
/// procedure of its request that the record carries in `rawrec::PROC`;
/// left unnamed where the program does not read procedures.
pub fn name_from_record(rec: &RecordView<'_>, ev: &mut Event) {
    if let EventKind::Executed { procedure, .. } = &mut ev.kind {
        *procedure = rec
            .field(rawrec::PROC, 4)
            .map(|w| w as u32)
            .filter(|w| w & rawrec::PROC_MEASURED != 0)
            .map(|w| name(w & 0xff));
    }
}

struct Claim {
    ptr: u64,
    gen: u64,
    key: XprtKey,
    /// Counts reported so far, per procedure index.
    seen: Box<[ProcSlot; ROW_SLOTS]>,
}

/// Whether the transport at `ptr` still holds its `EXEC_TOTALS` claim
/// `gen` (`exec(entry)`: that entry's owner and gen): only then does the
/// program fold its requests into a row claimed for that claim.
fn holds(exec: impl Fn(u32) -> Option<(u64, u64)>, ptr: u64, gen: u64) -> bool {
    exec(xprt_table::slot(ptr)) == Some((ptr, gen))
}

/// Whether claim `gen` may still come to hold its entry: the program
/// submits a full record before it writes the claim (owner cleared, gen,
/// then owner), so the record can be decoded while the entry still shows
/// an older claim, or this one without its owner yet. A later gen there
/// means the claim was superseded.
fn not_yet_written(exec: impl Fn(u32) -> Option<(u64, u64)>, ptr: u64, gen: u64) -> bool {
    matches!(exec(xprt_table::slot(ptr)), Some((owner, g)) if g < gen || (g == gen && owner == 0))
}

/// Claim passes a want waits for its claim to be written before it is
/// dropped (its transport's requests then come as records).
const WANT_TRIES: u8 = 8;

/// The rows the agent has claimed, by row.
#[derive(Default)]
pub struct RowClaims {
    mem: Option<Box<dyn Words + Send>>,
    claims: FxHashMap<u32, Claim>,
    /// Transports decoded since the last claim pass, or whose claim was
    /// not yet written at it.
    pending: Vec<Want>,
}

/// A transport that wants a row: its pointer, its `EXEC_TOTALS` claim,
/// its key, and the claim passes it has waited.
struct Want {
    ptr: u64,
    gen: u64,
    key: XprtKey,
    tries: u8,
}

/// Transports waiting for a row at most (a burst of new connections
/// beyond it is folded later, by a later claim, or sent as records).
const PENDING_MAX: usize = 1 << 16;

impl RowClaims {
    /// Rows in `mem` (the mapped `PROC_ROWS`); without it nothing is
    /// claimed and every request's procedure comes in its record.
    pub fn set_memory(&mut self, mem: Box<dyn Words + Send>) {
        self.mem = Some(mem);
    }

    /// The transport at `ptr` has the `EXEC_TOTALS` claim `gen`.
    pub fn want(&mut self, ptr: u64, gen: u64, key: XprtKey) {
        if self.mem.is_some() && self.pending.len() < PENDING_MAX {
            self.pending.push(Want {
                ptr,
                gen,
                key,
                tries: 0,
            });
        }
    }

    /// Claim a row for each transport that wants one and still [`holds`]
    /// its `EXEC_TOTALS` claim, unless a live transport holds the row; a row whose owner can no
    /// longer be folded into is settled first. A want whose claim is
    /// [`not_yet_written`] waits for the next pass (up to [`WANT_TRIES`]).
    pub fn claim(
        &mut self,
        exec: impl Fn(u32) -> Option<(u64, u64)>,
        now_ns: u64,
        out: &mut Vec<Event>,
    ) {
        let Some(mem) = self.mem.as_deref() else {
            return;
        };
        let mut waiting = Vec::new();
        for want in self.pending.drain(..) {
            let Want { ptr, gen, key, .. } = want;
            if !holds(&exec, ptr, gen) {
                if want.tries < WANT_TRIES && not_yet_written(&exec, ptr, gen) {
                    waiting.push(Want {
                        tries: want.tries + 1,
                        ..want
                    });
                }
                continue;
            }
            let r = procs::row(xprt_table::slot(ptr));
            if self
                .claims
                .get(&r)
                .is_some_and(|c| (c.ptr, c.gen) == (ptr, gen) || holds(&exec, c.ptr, c.gen))
            {
                continue;
            }
            if let Some(mut old) = self.claims.remove(&r) {
                report(mem, r, &mut old, now_ns, out);
            }
            let base = r as usize * ROW_WORDS;
            for w in 2..ROW_WORDS {
                mem.store(base + w, 0);
            }
            mem.store(base + 1, gen);
            mem.store(base, ptr);
            self.claims.insert(
                r,
                Claim {
                    ptr,
                    gen,
                    key,
                    seen: Box::new([ProcSlot::default(); ROW_SLOTS]),
                },
            );
        }
        let room = PENDING_MAX.saturating_sub(self.pending.len());
        self.pending.extend(waiting.into_iter().take(room));
    }

    /// Report what grew in every claimed row; a row whose transport can
    /// no longer be folded into is settled and released.
    pub fn sweep(
        &mut self,
        exec: impl Fn(u32) -> Option<(u64, u64)>,
        now_ns: u64,
        out: &mut Vec<Event>,
    ) {
        let Some(mem) = self.mem.as_deref() else {
            return;
        };
        self.claims.retain(|&r, c| {
            report(mem, r, c, now_ns, out);
            holds(&exec, c.ptr, c.gen)
        });
    }

    /// The transport at `ptr` was freed: its row's last counts, before
    /// its close is reported (nothing is folded after a free).
    pub fn settle(&mut self, ptr: u64, now_ns: u64, out: &mut Vec<Event>) {
        let Some(mem) = self.mem.as_deref() else {
            return;
        };
        let r = procs::row(xprt_table::slot(ptr));
        if self.claims.get(&r).is_some_and(|c| c.ptr == ptr) {
            if let Some(mut c) = self.claims.remove(&r) {
                report(mem, r, &mut c, now_ns, out);
                mem.store(r as usize * ROW_WORDS, 0);
            }
        }
    }

    pub fn claimed(&self) -> usize {
        self.claims.len()
    }
}

/// What grew in row `r` since `c` last saw it, as `Procedure` events.
fn report(mem: &dyn Words, r: u32, c: &mut Claim, now_ns: u64, out: &mut Vec<Event>) {
    let base = r as usize * ROW_WORDS + 2;
    for (i, seen) in c.seen.iter_mut().enumerate() {
        let (count, us) = (mem.load(base + 2 * i), mem.load(base + 2 * i + 1));
        let (dc, dus) = (count.saturating_sub(seen.count), us.saturating_sub(seen.us));
        if dc == 0 && dus == 0 {
            continue;
        }
        (seen.count, seen.us) = (seen.count.max(count), seen.us.max(us));
        out.push(Event {
            ts_ns: now_ns,
            xprt: c.key,
            kind: EventKind::Procedure {
                name: name(i as u32),
                requests: dc,
                exec_ns: dus.saturating_mul(1000),
            },
        });
    }
}

#[cfg(test)]
mod tests;
