//! source → aggregator → snapshots, on a thread of its own. Views never
//! touch the source or the aggregator: they get snapshots through `sink`
//! and steer through [`Control`] messages; a virtual source is paced and
//! steered (pause, step, seek, speed) by its [`playback`].

use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

use crate::aggregate::Aggregator;
use crate::enrich::classify::ClassMap;
use crate::model::{Event, Snapshot};
use crate::source::{unix_now, Poll, Source};
use playback::{Clock, Command, Handle, Moved, Playing};

pub mod playback;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pace {
    /// Follow the wall clock; a virtual source's clock runs `speed` times
    /// as fast (1.0 = real time).
    Realtime { speed: f64 },
    /// Run a virtual source as fast as possible, a snapshot every
    /// `interval` of source time (tests, replays, benchmarks).
    AsFastAsPossible,
}

pub enum Control {
    SetInterval(Duration),
    SetClassMap(ClassMap),
    Stop,
}

/// What a sink tells the pipeline after each snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Stop,
}

pub type Tap<'a> = Box<dyn FnMut(&[Event]) -> anyhow::Result<()> + Send + 'a>;

/// Opens the source again with a fresh aggregator (to seek back).
pub type Restart<'a> =
    Box<dyn FnMut() -> anyhow::Result<(Box<dyn Source + 'a>, Aggregator)> + Send + 'a>;

pub struct Pipeline<'a> {
    pub source: Box<dyn Source + 'a>,
    pub aggregator: Aggregator,
    pub interval: Duration,
    pub pace: Pace,
    /// Sees every batch of events before the aggregator does (recording).
    pub tap: Option<Tap<'a>>,
    /// Stop after this much source time (recording `--duration`).
    pub max_source_ns: Option<u64>,
    /// Pause, step, seek and speed, from a view (a virtual source paced
    /// in real time only; see `crate::pipeline::playback`).
    pub playback: Option<Handle>,
    /// How to start again from the beginning, for seeking back.
    pub restart: Option<Restart<'a>>,
    /// Where the peers' NFSv4 client names come from, if anywhere.
    pub clients: Option<crate::enrich::clients::Refresher>,
    /// The peers' host names (`--resolve`), if asked for.
    pub resolver: Option<crate::enrich::resolve::Resolver>,
}

impl<'a> Pipeline<'a> {
    /// The aggregator counts only nfsd's transports as nfsd's: it learns
    /// nfsd's ports wherever the source knows them.
    fn learn_nfsd_ports(&mut self, ports: Option<&crate::aggregate::services::NfsdPorts>) {
        if let Some(p) = ports {
            self.aggregator.add_nfsd_ports(p);
        }
    }

    pub fn new(source: Box<dyn Source + 'a>, aggregator: Aggregator, interval: Duration) -> Self {
        Pipeline {
            source,
            aggregator,
            interval,
            pace: Pace::Realtime { speed: 1.0 },
            tap: None,
            max_source_ns: None,
            playback: None,
            restart: None,
            clients: None,
            resolver: None,
        }
    }

    /// Run until the sink says stop, a `Control::Stop` arrives, or the
    /// source finishes (a final snapshot is always delivered then).
    pub fn run(
        mut self,
        control: Option<Receiver<Control>>,
        mut sink: impl FnMut(Snapshot) -> Flow,
    ) -> anyhow::Result<Aggregator> {
        let wall0 = Instant::now();
        let unix0 = unix_now();
        let src0 = self.source.now_ns();
        self.aggregator.start_clock(src0);
        self.learn_nfsd_ports(self.source.nfsd_ports().as_ref());
        let mut buf: Vec<Event> = Vec::with_capacity(64 * 1024);
        let mut next_snapshot = self.interval;
        let mut last_target = src0;
        let mut server = crate::server::Tracker::default();
        let speed = match self.pace {
            Pace::Realtime { speed } => speed,
            Pace::AsFastAsPossible => 1.0,
        };
        let mut play = Playing::new(Clock::new(src0, wall0, speed), self.source.length_ns());
        // A source that releases in order is cut on its own clock: the
        // next snapshot's time, in source time.
        let ordered = self.source.releases_in_order();
        let mut next_cut = src0.saturating_add(self.interval.as_nanos() as u64);
        loop {
            if let Some(rx) = &control {
                loop {
                    match rx.try_recv() {
                        Ok(Control::SetInterval(d)) => {
                            self.interval = d.max(Duration::from_millis(50));
                        }
                        Ok(Control::SetClassMap(m)) => self.aggregator.set_classmap(m),
                        Ok(Control::Stop) | Err(TryRecvError::Disconnected) => {
                            return Ok(self.aggregator)
                        }
                        Err(TryRecvError::Empty) => break,
                    }
                }
            }
            if let (Some(h), Pace::Realtime { .. }) = (self.playback.clone(), self.pace) {
                for c in h.take() {
                    let moved = self.command(c, &mut play, &mut last_target)?;
                    if moved.restarted {
                        server = crate::server::Tracker::default();
                        self.learn_nfsd_ports(self.source.nfsd_ports().as_ref());
                    }
                    if let Some(s) = &moved.skipped {
                        server.skip(s);
                    }
                    next_snapshot = wall0.elapsed() + self.interval;
                }
                h.publish(|st| play.publish(st, last_target.saturating_sub(src0)));
            }
            let (target, snapshot_due, wall) = match self.pace {
                Pace::AsFastAsPossible => {
                    // Saturating: a recording's clock may start near the
                    // end of its range.
                    let t = last_target.saturating_add(self.interval.as_nanos() as u64);
                    (t, true, unix0 + (t - src0) as f64 / 1e9)
                }
                Pace::Realtime { .. } => {
                    let el = wall0.elapsed();
                    match play.step_to.take() {
                        Some(t) => (t, true, unix_now()),
                        None if play.clock.paused || play.at_end => {
                            self.source.wait(Duration::from_millis(20));
                            continue;
                        }
                        // Due once the source's events are complete up
                        // to it, known only after the poll.
                        None if ordered => (next_cut, false, unix_now()),
                        None => (
                            play.clock.at(Instant::now()),
                            el >= next_snapshot,
                            unix_now(),
                        ),
                    }
                }
            };
            let target = match self.max_source_ns {
                Some(max) => target.min(src0.saturating_add(max)),
                None => target,
            };
            buf.clear();
            let status = self.source.poll(target, &mut buf)?;
            if let Some(tap) = self.tap.as_mut() {
                tap(&buf)?;
            }
            self.aggregator.ingest_all(&buf);
            last_target = target;
            let reached_max = self
                .max_source_ns
                .is_some_and(|max| self.source.now_ns() >= src0.saturating_add(max));
            let finished = status == Poll::Finished || reached_max;
            let snapshot_due = snapshot_due || (ordered && self.source.now_ns() >= target);
            if snapshot_due || finished {
                let now = if ordered {
                    target
                } else if !self.source.is_virtual() {
                    self.source.now_ns()
                } else if status == Poll::Finished {
                    // The recording ended inside this step: its last
                    // snapshot ends with its last event, not a whole step
                    // past it (which would understate that stretch's rates).
                    let since = self.aggregator.last_snapshot_ns().unwrap_or(src0);
                    self.source.now_ns().max(since).min(target)
                } else {
                    target
                };
                let wall = self.source.recorded_wall_clock(now).unwrap_or(wall);
                // Asked each time: a live source can change how it watches
                // an event while it runs (a raw tracepoint handed over).
                let info = self.source.info();
                // Set each time: a seek back starts a fresh aggregator.
                // The first snapshot waits briefly for the first read.
                if let Some(c) = self.clients.as_mut() {
                    if let Some(names) = c.latest(Duration::from_secs(2)) {
                        self.aggregator.set_client_names(names);
                    }
                }
                // Only what the cache holds: lookups run on their own.
                let mut snap = match self.resolver.as_mut() {
                    Some(r) => {
                        let _ = r.collect();
                        let mut snap =
                            self.aggregator
                                .snapshot_resolving(now, wall, &info, &mut |ip| r.hostname(ip));
                        snap.totals.hostname_lookups_dropped = Some(r.dropped());
                        snap
                    }
                    None => self.aggregator.snapshot(now, wall, &info),
                };
                snap.totals.bpf = self.source.bpf_stats();
                snap.totals.lag_s = self.source.lag_ns(now).map(|n| n as f64 / 1e9);
                let threads = self.source.nfsd_threads();
                self.learn_nfsd_ports(threads.ports.as_ref());
                snap.server = server.view(&threads, &snap);
                snap.server.services = self.aggregator.services();
                if sink(snap) == Flow::Stop {
                    return Ok(self.aggregator);
                }
                if finished {
                    // Under playback control the end is one more place
                    // to seek back from.
                    if self.playback.is_none() || self.max_source_ns.is_some() {
                        return Ok(self.aggregator);
                    }
                    play.at_end = true;
                }
                if ordered {
                    next_cut = next_cut.saturating_add(self.interval.as_nanos() as u64);
                } else if let Pace::Realtime { .. } = self.pace {
                    next_snapshot += self.interval;
                    let el = wall0.elapsed();
                    if next_snapshot < el {
                        next_snapshot = el + self.interval;
                    }
                }
            }
            if let Pace::Realtime { .. } = self.pace {
                // A live source wakes this as soon as records arrive; the
                // cap bounds how long a control message (stop, interval)
                // waits. Virtual sources are polled every 20 ms.
                let cap = if self.source.is_virtual() {
                    Duration::from_millis(20)
                } else {
                    Duration::from_millis(100)
                };
                let until_snapshot = if ordered {
                    // Catching up: the next cut may be complete already.
                    match next_cut.checked_sub(self.source.now_ns()) {
                        Some(ahead) if ahead > 0 => Duration::from_nanos(ahead),
                        _ => continue,
                    }
                } else {
                    next_snapshot.saturating_sub(wall0.elapsed())
                };
                self.source.wait(until_snapshot.min(cap));
            }
        }
    }
}

/// Playback control (see [`crate::pipeline::playback`]), applied to the pipeline.
impl Pipeline<'_> {
    /// Apply one playback command; `last` is the source time read up to.
    pub(crate) fn command(
        &mut self,
        c: Command,
        play: &mut Playing,
        last: &mut u64,
    ) -> anyhow::Result<Moved> {
        let now = Instant::now();
        let iv = (self.interval.as_nanos() as u64).max(1);
        let mut moved = Moved::default();
        play.note = None;
        match c {
            Command::TogglePause => play.clock.paused = !play.clock.paused,
            Command::Faster => play.clock.set_speed(play.clock.speed * 2.0, now),
            Command::Slower => play.clock.set_speed(play.clock.speed / 2.0, now),
            Command::Step | Command::Seek(0..) if play.at_end => {
                play.note = Some("at the end: seek back (Left) to see more".into());
            }
            Command::Step => {
                play.clock.paused = true;
                play.step_to = Some(last.saturating_add(iv));
            }
            Command::Seek(d @ 0..) => {
                let to = last.saturating_add(d as u64);
                moved.skipped = self.fast_forward(to.saturating_sub(iv), last)?;
                play.step_to = Some(to.max(last.saturating_add(1)));
            }
            Command::Seek(d) => {
                let Some(restart) = self.restart.as_mut() else {
                    play.note = Some("this source cannot seek back".into());
                    return Ok(moved);
                };
                let before = *last;
                let (source, aggregator) = restart()?;
                self.source = source;
                self.aggregator = aggregator;
                let start = self.source.now_ns();
                self.aggregator.start_clock(start);
                *last = start;
                moved.restarted = true;
                play.at_end = false;
                let to = before
                    .saturating_sub(d.unsigned_abs())
                    .max(start.saturating_add(iv));
                moved.skipped = self.fast_forward(to - iv, last)?;
                play.step_to = Some(to);
            }
        }
        let at = play.step_to.unwrap_or(*last);
        play.clock.rebase(at, now);
        Ok(moved)
    }

    /// Read the source up to `to` an interval at a time, taking (and
    /// keeping back) a snapshot after each, so that the next delivered
    /// one covers only its own interval. Returns the last one taken.
    fn fast_forward(&mut self, to: u64, last: &mut u64) -> anyhow::Result<Option<Snapshot>> {
        let iv = (self.interval.as_nanos() as u64).max(1);
        let mut buf = Vec::new();
        let mut taken = None;
        while *last < to {
            let t = last.saturating_add(iv).min(to);
            buf.clear();
            let status = self.source.poll(t, &mut buf)?;
            if let Some(tap) = self.tap.as_mut() {
                tap(&buf)?;
            }
            self.aggregator.ingest_all(&buf);
            *last = t;
            taken = Some(self.aggregator.snapshot(t, 0.0, &self.source.info()));
            if status == Poll::Finished {
                break;
            }
        }
        Ok(taken)
    }
}
