//! Reading a recording for the model: first its loaded part, then the
//! events of that part, pass by pass.
//!
//! A recording often begins before the load does (it was started, then
//! the clients mounted and began) and goes on after it ends. No policy
//! changes anything there, yet the idle time and the mounts' few requests
//! would be fitted as every client's demand: think times of seconds drawn
//! at random, in step with nobody. So the model and the measured column
//! cover the loaded part only: from the first to the last stretch of the
//! recording (a hundredth of it, at least a millisecond) that began or
//! ended [`SUSTAINED`] in a row each carrying at least [`LOADED_SHARE`] of
//! the dispatches of its busy stretches (the 90th percentile): a mount's
//! requests, a few dozen at once, can fill one. Quiet stretches between
//! stay: that is the clients' demand.

use std::path::Path;

use anyhow::Context as _;

use crate::model::{Event, EventKind};
use crate::record::{Damage, Reader};

/// A stretch is loaded when it carried at least this share of the
/// dispatches of the recording's busy stretches.
pub const LOADED_SHARE: f64 = 0.25;
/// Stretches the recording is cut into to find its loaded part.
const STRETCHES: usize = 100;
/// Loaded stretches in a row that make the load begin (or end).
const SUSTAINED: usize = 3;
/// Most buckets counted while reading (each then covers more time).
const MAX_BUCKETS: usize = 1 << 16;

/// Dispatches counted per bucket of time, in bounded memory: when the
/// buckets run out, neighbours merge and each covers twice the time.
#[derive(Debug)]
pub struct LoadProfile {
    origin: Option<u64>,
    width_ns: u64,
    counts: Vec<u64>,
}

impl Default for LoadProfile {
    fn default() -> Self {
        LoadProfile {
            origin: None,
            width_ns: 1_000_000,
            counts: Vec::new(),
        }
    }
}

impl LoadProfile {
    pub fn add(&mut self, ts_ns: u64) {
        let origin = *self.origin.get_or_insert(ts_ns);
        let mut i = (ts_ns.saturating_sub(origin) / self.width_ns) as usize;
        while i >= MAX_BUCKETS {
            self.counts = self.counts.chunks(2).map(|c| c.iter().sum()).collect();
            self.width_ns *= 2;
            i = (ts_ns.saturating_sub(origin) / self.width_ns) as usize;
        }
        if self.counts.len() <= i {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += 1;
    }

    /// The loaded part, `[from, to)` in ns: `None` for no dispatches. An
    /// end that is not cut is open (0, or `u64::MAX`), so that the events
    /// around the first and last dispatch stay.
    pub fn loaded(&self) -> Option<(u64, u64)> {
        let origin = self.origin?;
        let per = self.counts.len().div_ceil(STRETCHES).max(1);
        let stretches: Vec<u64> = self.counts.chunks(per).map(|c| c.iter().sum()).collect();
        let mut sorted = stretches.clone();
        sorted.sort_unstable();
        let busy = sorted[(sorted.len() - 1) * 9 / 10];
        let loaded: Vec<bool> = stretches
            .iter()
            .map(|&n| n > 0 && n as f64 >= LOADED_SHARE * busy as f64)
            .collect();
        // Sustained: a mount's requests can fill one stretch.
        let run = SUSTAINED.min(loaded.len());
        let sustained = |w: &[bool]| w.iter().all(|&l| l);
        let first = loaded.windows(run).position(sustained)?;
        let last = loaded.windows(run).rposition(sustained)? + run - 1;
        let at = |i: usize| origin + (i * per) as u64 * self.width_ns;
        let from = if first == 0 { 0 } else { at(first) };
        let to = if last + 1 == stretches.len() {
            u64::MAX
        } else {
            at(last + 1)
        };
        Some((from, to))
    }
}

/// The loaded part of the recording at `path` (see [`LoadProfile`]), and
/// when its events begin and end.
pub struct Window {
    pub from_ns: u64,
    pub to_ns: u64,
    /// Left out before and after it (ns).
    pub lead_ns: u64,
    pub tail_ns: u64,
}

impl Window {
    pub fn of(path: &Path) -> anyhow::Result<Window> {
        let mut reader =
            Reader::open(path).with_context(|| format!("cannot read {}", path.display()))?;
        let mut profile = LoadProfile::default();
        let (mut first, mut last) = (u64::MAX, 0);
        let mut buf = Vec::with_capacity(8192);
        // Damage is reported by the pass that models the events.
        while let Ok(Some(_)) = reader.read_frame(&mut buf) {
            for e in &buf {
                first = first.min(e.ts_ns);
                last = last.max(e.ts_ns);
                if matches!(e.kind, EventKind::Dequeue { .. }) {
                    profile.add(e.ts_ns);
                }
            }
            buf.clear();
        }
        let (from_ns, to_ns) = profile.loaded().unwrap_or((0, u64::MAX));
        Ok(Window {
            from_ns,
            to_ns,
            lead_ns: from_ns.saturating_sub(first.min(last)),
            tail_ns: last.saturating_sub(to_ns),
        })
    }

    fn holds(&self, ts_ns: u64) -> bool {
        (self.from_ns..self.to_ns).contains(&ts_ns)
    }

    /// Every frame's events in the window, in order, to `f`; the damage
    /// that ended the reading early, if any.
    pub fn each(
        &self,
        reader: &mut Reader<impl std::io::Read>,
        mut f: impl FnMut(&[Event]),
    ) -> Option<Damage> {
        let mut buf: Vec<Event> = Vec::with_capacity(8192);
        loop {
            buf.clear();
            match reader.read_frame(&mut buf) {
                Ok(Some(_)) => {
                    buf.retain(|e| self.holds(e.ts_ns));
                    if !buf.is_empty() {
                        f(&buf);
                    }
                }
                Ok(None) => return None,
                Err(d) => return Some(d),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_time_and_a_trickle_before_and_after_the_load_are_cut() {
        let mut p = LoadProfile::default();
        // 3 s of a request every 100 ms, 10 s of one every ms, 1 s more
        // of the trickle.
        let ms = 1_000_000u64;
        (0..30).for_each(|i| p.add(i * 100 * ms));
        // A mount: 40 requests within 10 ms.
        (0..40).for_each(|i| p.add(1_000 * ms + i * ms / 4));
        (0..10_000).for_each(|i| p.add(3_000 * ms + i * ms));
        (0..10).for_each(|i| p.add(13_000 * ms + i * 100 * ms));
        let (from, to) = p.loaded().unwrap();
        assert!((2_800 * ms..=3_000 * ms).contains(&from), "{from}");
        assert!((13_000 * ms..=13_200 * ms).contains(&to), "{to}");

        // Steady throughout: nothing is cut, and the ends stay open.
        let mut p = LoadProfile::default();
        (0..20_000).for_each(|i| p.add(5 * ms + i * ms));
        assert_eq!(p.loaded(), Some((0, u64::MAX)));
        assert_eq!(LoadProfile::default().loaded(), None);
    }

    #[test]
    fn a_long_recording_is_counted_in_bounded_buckets() {
        let mut p = LoadProfile::default();
        let s = 1_000_000_000u64;
        // A day, with the load in its second half.
        (0..12 * 3600).for_each(|i| p.add(i * 2 * s));
        (0..12 * 3600 * 10).for_each(|i| p.add(12 * 3600 * s + i * s / 10));
        assert!(p.counts.len() <= MAX_BUCKETS);
        let (from, to) = p.loaded().unwrap();
        let h = 3600 * s;
        // To a stretch (a hundredth of the day).
        assert!(
            (12 * h - h / 4..=12 * h + h / 4).contains(&from),
            "{}",
            from / s
        );
        assert_eq!(to, u64::MAX);
    }
}
