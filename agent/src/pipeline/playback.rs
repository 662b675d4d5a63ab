//! Playback control of a virtual source (a replay or the demo) paced in
//! real time: pause, step one interval, seek and change speed. A view
//! holds a [`Handle`] and sends [`Command`]s; the pipeline takes them at
//! the top of each turn and publishes a [`Status`] (position, speed,
//! paused) on the same handle. The [`Clock`] maps wall time to source
//! time across pauses and changes of speed.
//!
//! Seeking forward reads the source up to the new position (its events
//! all reach the aggregator, so cumulative numbers stay whole); seeking
//! back starts the source and the aggregator again from the beginning
//! (a recording is read sequentially) and reads up to the new position.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::model::Snapshot;

/// Commands a handle queues at most (a key held down cannot grow it).
const MAX_QUEUED: usize = 64;

/// Slowest and fastest speed [`Command::Faster`]/[`Command::Slower`] reach.
pub const MIN_SPEED: f64 = 1.0 / 16.0;
pub const MAX_SPEED: f64 = 64.0;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Command {
    TogglePause,
    /// Pause (if running) and advance one interval of source time.
    Step,
    /// Move the source by this many nanoseconds (negative: back).
    Seek(i64),
    /// Double or halve the speed.
    Faster,
    Slower,
}

/// What the pipeline last said about the playback.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Status {
    pub paused: bool,
    pub speed: f64,
    /// Source time since the start, in seconds.
    pub position_s: f64,
    /// The recording's length, where known.
    pub length_s: Option<f64>,
    /// What the last command could not do (e.g. no way back).
    pub note: Option<String>,
    /// The source has nothing more (a seek back starts it again).
    pub ended: bool,
}

#[derive(Debug, Default)]
struct Shared {
    commands: VecDeque<Command>,
    status: Status,
}

/// The view's end and the pipeline's end are clones of one handle.
#[derive(Clone, Debug, Default)]
pub struct Handle(Arc<Mutex<Shared>>);

impl Handle {
    pub fn new(speed: f64) -> Handle {
        let h = Handle::default();
        h.lock().status.speed = speed;
        h
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        // A panic elsewhere cannot leave these plain values half-written.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn send(&self, c: Command) {
        let mut s = self.lock();
        if s.commands.len() < MAX_QUEUED {
            s.commands.push_back(c);
        }
    }

    pub fn status(&self) -> Status {
        self.lock().status.clone()
    }

    pub(crate) fn take(&self) -> Vec<Command> {
        self.lock().commands.drain(..).collect()
    }

    pub(crate) fn publish(&self, f: impl FnOnce(&mut Status)) {
        f(&mut self.lock().status);
    }
}

/// Source time as a function of wall time: `base_src` at `base_wall`,
/// running `speed` times as fast, or standing still while paused.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    base_src: u64,
    base_wall: Instant,
    pub speed: f64,
    pub paused: bool,
}

impl Clock {
    pub fn new(src: u64, wall: Instant, speed: f64) -> Clock {
        Clock {
            base_src: src,
            base_wall: wall,
            speed,
            paused: false,
        }
    }

    pub fn at(&self, wall: Instant) -> u64 {
        if self.paused {
            return self.base_src;
        }
        let el = wall.saturating_duration_since(self.base_wall);
        self.base_src
            .saturating_add((el.as_nanos() as f64 * self.speed) as u64)
    }

    /// Carry on from `src` at `wall` (after a pause, a seek, a new speed).
    pub fn rebase(&mut self, src: u64, wall: Instant) {
        self.base_src = src;
        self.base_wall = wall;
    }

    pub fn set_speed(&mut self, speed: f64, wall: Instant) {
        let now = self.at(wall);
        self.rebase(now, wall);
        self.speed = speed.clamp(MIN_SPEED, MAX_SPEED);
    }
}

/// The pipeline's side of the playback, between turns.
#[derive(Debug)]
pub(crate) struct Playing {
    pub clock: Clock,
    /// Deliver a snapshot at this source time next (a step, a seek).
    pub step_to: Option<u64>,
    pub at_end: bool,
    pub note: Option<String>,
    length_ns: Option<u64>,
}

/// What a command did that the pipeline must know about.
#[derive(Default)]
pub(crate) struct Moved {
    /// The source and aggregator were started again.
    pub restarted: bool,
    /// The last snapshot taken (not delivered) on the way to a new
    /// position: cumulative numbers up to one interval before it.
    pub skipped: Option<Snapshot>,
}

impl Playing {
    pub fn new(clock: Clock, length_ns: Option<u64>) -> Playing {
        Playing {
            clock,
            step_to: None,
            at_end: false,
            note: None,
            length_ns,
        }
    }

    pub fn publish(&self, st: &mut Status, position_ns: u64) {
        st.paused = self.clock.paused;
        st.speed = self.clock.speed;
        st.position_s = position_ns as f64 / 1e9;
        st.note = self.note.clone();
        st.ended = self.at_end;
        st.length_s = self.length_ns.map(|n| n as f64 / 1e9);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_clock_stands_still_while_paused_and_keeps_its_place_across_speeds() {
        let w0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut c = Clock::new(1_000, w0, 1.0);
        assert_eq!(c.at(w0 + s), 1_000 + 1_000_000_000);
        c.set_speed(2.0, w0 + s);
        assert_eq!(c.at(w0 + 2 * s), 1_000 + 3_000_000_000);
        let here = c.at(w0 + 2 * s);
        c.paused = true;
        c.rebase(here, w0 + 2 * s);
        assert_eq!(c.at(w0 + 10 * s), here);
        c.paused = false;
        c.rebase(here, w0 + 10 * s);
        assert_eq!(c.at(w0 + 11 * s), here + 2_000_000_000);
        c.set_speed(1000.0, w0 + 11 * s);
        assert_eq!(c.speed, MAX_SPEED);
    }

    /// The demo under playback control, as the TUI drives it: paused
    /// from the start, stepped, sought on and back. The simulator is
    /// deterministic, so seeking back to a place gives the numbers it
    /// had there.
    #[test]
    fn pause_step_and_seek_drive_the_pipeline() {
        use crate::aggregate::{Aggregator, Limits};
        use crate::pipeline::{Flow, Pace, Pipeline};
        use crate::source::SourceSpec;
        use std::sync::mpsc;

        let spec = SourceSpec::Demo {
            scenario: "seed-k8".into(),
            policy: None,
        };
        let fresh = || Aggregator::new(Default::default(), Limits::default());
        let h = Handle::new(1.0);
        h.send(Command::TogglePause);
        let (tx, rx) = mpsc::channel();
        let (ctx, crx) = mpsc::channel();
        let pipe_h = h.clone();
        let spec2 = spec.clone();
        let t = std::thread::spawn(move || {
            let p = Pipeline {
                pace: Pace::Realtime { speed: 1.0 },
                playback: Some(pipe_h),
                restart: Some(Box::new(move || Ok((spec2.open()?, fresh())))),
                ..Pipeline::new(spec.open().unwrap(), fresh(), Duration::from_millis(500))
            };
            p.run(Some(crx), move |s| {
                if tx.send(s).is_err() {
                    Flow::Stop
                } else {
                    Flow::Continue
                }
            })
            .map(|_| ())
        });
        let deadline = Duration::from_secs(20);
        let at = |want: f64| {
            let start = Instant::now();
            while (h.status().position_s - want).abs() > 1e-6 {
                assert!(
                    start.elapsed() < deadline,
                    "at {:?}, not {want}",
                    h.status()
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        // Paused from the start: no snapshot in a second of wall time.
        assert!(rx.recv_timeout(Duration::from_secs(1)).is_err());
        assert!(h.status().paused);
        let mut steps = Vec::new();
        for i in 1..=2 {
            h.send(Command::Step);
            let s = rx.recv_timeout(deadline).expect("a snapshot per step");
            assert!((s.interval_s - 0.5).abs() < 1e-9, "{}", s.interval_s);
            at(0.5 * i as f64);
            steps.push(s.totals.dispatches);
        }
        assert!(steps[1] > steps[0] && steps[0] > 0, "{steps:?}");
        h.send(Command::Seek(10_000_000_000));
        let s = rx.recv_timeout(deadline).expect("a snapshot after a seek");
        at(11.0);
        assert!((s.interval_s - 0.5).abs() < 1e-9, "only the last interval");
        assert!(
            s.totals.dispatches > steps[1] * 5,
            "every event read on the way"
        );
        h.send(Command::Seek(-10_000_000_000));
        let s = rx
            .recv_timeout(deadline)
            .expect("a snapshot after seeking back");
        at(1.0);
        assert_eq!(
            s.totals.dispatches, steps[1],
            "the same place, the same numbers"
        );
        assert!(h.status().paused, "seeking keeps the pause");
        h.send(Command::Faster);
        let start = Instant::now();
        while h.status().speed != 2.0 {
            assert!(start.elapsed() < deadline);
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(ctx);
        t.join().unwrap().unwrap();
    }

    #[test]
    fn a_handle_queues_a_bounded_number_of_commands() {
        let h = Handle::new(1.0);
        for _ in 0..1000 {
            h.send(Command::Step);
        }
        assert_eq!(h.take().len(), MAX_QUEUED);
        assert!(h.take().is_empty());
        h.publish(|s| s.paused = true);
        assert!(h.status().paused);
    }
}
