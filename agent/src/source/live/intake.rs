//! What a live source runs its decoded events through: how far the agent
//! has read the kernel's records (its *frontier*), and, without enqueue
//! hooks on a 6.16+ kernel, the reorder buffer ([`super::rebuild`]) whose
//! window is measured from that frontier, never from the agent's clock.
//! From the frontier come the source's clock (what its snapshots are cut
//! on) and how far a snapshot is behind the kernel.

use super::rebuild::{horizon, Rebuild, MAX_HELD, WINDOW_NS};
use crate::model::Event;

/// How far the agent has read the kernel's records: the newest record
/// read, or the last moment the ring reader found the ring empty,
/// whichever is later. The reorder window is measured from it, and the
/// agent is behind the kernel by the clock's distance from it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Frontier {
    newest_ns: u64,
    caught_up_ns: u64,
}

impl Frontier {
    /// A record stamped `ts_ns` was read, at `now_ns` (a stamp from the
    /// future, which only a damaged record could carry, counts as now).
    pub fn read(&mut self, ts_ns: u64, now_ns: u64) {
        self.newest_ns = self.newest_ns.max(ts_ns.min(now_ns));
    }

    /// Every record stamped before `at_ns` has been read.
    pub fn caught_up(&mut self, at_ns: u64) {
        self.caught_up_ns = self.caught_up_ns.max(at_ns);
    }

    pub fn at(&self) -> u64 {
        self.newest_ns.max(self.caught_up_ns)
    }

    /// How far reading is behind the kernel at `now_ns`.
    pub fn lag_ns(&self, now_ns: u64) -> u64 {
        now_ns.saturating_sub(self.at())
    }
}

/// What a live source runs its events through: how far the kernel's
/// records have been read, and, without enqueue hooks, the reorder buffer.
pub struct Intake {
    frontier: Frontier,
    rebuild: Option<Rebuild>,
}

impl Intake {
    /// `reorder`: hold and reorder (no enqueue hooks on a qtime kernel);
    /// `start_ns`: no record is older (the programs' attach).
    pub fn new(reorder: bool, start_ns: u64) -> Intake {
        let mut frontier = Frontier::default();
        frontier.caught_up(start_ns);
        Intake {
            frontier,
            rebuild: reorder.then(Rebuild::default),
        }
    }

    pub fn reorders(&self) -> bool {
        self.rebuild.is_some()
    }

    pub fn rebuild(&self) -> Option<&Rebuild> {
        self.rebuild.as_ref()
    }

    /// The kernel's records just read, at `now_ns`; `caught_up_ns`: every
    /// record stamped before it has been read (the ring reader's stamp,
    /// taken before these records were taken).
    pub fn read(&mut self, records: &[Event], caught_up_ns: u64, now_ns: u64) {
        for ev in records {
            self.frontier.read(ev.ts_ns, now_ns);
        }
        self.frontier.caught_up(caught_up_ns);
    }

    /// Without reordering, nothing to do (events went straight out);
    /// with it, `decoded` is held and what is complete up to `until_ns`
    /// goes out in time order. The window runs on the frontier, never on
    /// the agent's clock: an agent that reads late still releases in
    /// order.
    pub fn release(&mut self, decoded: &mut Vec<Event>, until_ns: u64, out: &mut Vec<Event>) {
        if let Some(r) = &mut self.rebuild {
            for ev in decoded.drain(..) {
                r.push(ev);
            }
            r.release(self.frontier.at(), until_ns, out);
        }
    }

    /// The source's clock: with reordering, the time up to which events
    /// are complete (one window behind the frontier); else `now_ns`.
    pub fn clock_ns(&self, now_ns: u64) -> u64 {
        match self.rebuild {
            Some(_) => horizon(self.frontier.at()),
            None => now_ns,
        }
    }

    /// What `source.detail` says of the reordering: events released
    /// late or early, where there were any.
    pub fn describe(&self, detail: &mut String) {
        let Some(r) = &self.rebuild else { return };
        let window = WINDOW_NS / 1_000_000_000;
        if r.late > 0 {
            detail.push_str(&format!(
                "; {} enqueues released late (their transport was queued longer than the {window} s reorder window, so it counts as backlogged only from its release)",
                r.late
            ));
        }
        if r.early > 0 {
            detail.push_str(&format!(
                "; {} events released before the {window} s reorder window passed (more than {MAX_HELD} were held at once)",
                r.early
            ));
        }
    }

    /// How far a snapshot cut at `at_ns` is behind the kernel at
    /// `now_ns`, beyond the window it holds by design: with reordering,
    /// its age past the window (a snapshot of a late agent, which may have
    /// caught up its reading by now, is still late); else how far reading
    /// is behind.
    pub fn lag_ns(&self, at_ns: u64, now_ns: u64) -> u64 {
        match self.rebuild {
            Some(_) => now_ns.saturating_sub(at_ns.saturating_add(WINDOW_NS)),
            None => self.frontier.lag_ns(now_ns),
        }
    }
}
