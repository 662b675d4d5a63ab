//! Recorded events → a closed-loop model of each transport's demand, in
//! one pass and bounded memory (every distribution is a fixed-size
//! reservoir sample).
//!
//! An arrival is visible when it finds its transport off the ready queue
//! (an enqueue that is not the re-enqueue right after a dequeue). Three
//! shapes of demand are told apart:
//!
//! - *backlogged*: no arrival was ever visible after the first, and it
//!   was still busy when the recording ended, so the transport always had
//!   a request waiting. That only says its demand exceeded what it was
//!   given: it keeps requests waiting under any policy. One that went
//!   quiet (or closed) before the end and fits no other shape (a mount's
//!   first connection) is one burst of all it sent, the rest of the
//!   recording its think time;
//! - *closed loop*: arrivals come while its own requests are in service
//!   (each reply sends the next request a think time later). Its
//!   outstanding requests N are the N for which "the arrival answers the
//!   completion N − (requests in service) before it" gives the most
//!   consistent think times (their spread is least at the true N); the
//!   think times at that N are its distribution;
//! - *bursts*: arrivals come only when it was idle. A busy period (queued,
//!   or requests of it in service) is one burst of the requests
//!   dispatched in it; the gap from its last completion to the next
//!   arrival is the think time.
//!
//! Service times are the transport's recorded executions. Where the
//! recording times executions only in batches (the live source settles
//! what the kernel added up every 100 ms), a request is taken to complete
//! its transport's mean service time after its dispatch
//! ([`Fitter::with_estimated_completions`]).

use std::collections::VecDeque;

mod closed;
mod occupancy;

use crate::model::{Event, EventKind, XprtKey};

pub use super::reservoir::Reservoir;
use closed::{closed_loop, Arrival, GAPS};

/// Samples kept per distribution and transport.
const SERVICE_SAMPLES: usize = 256;
const BURST_SAMPLES: usize = 128;
const ARRIVAL_SAMPLES: usize = 32;
/// An enqueue this soon after a dequeue, with no completion between, is
/// the kernel putting the transport back (more data waiting), not an
/// arrival (svc_xprt_received).
const REENQUEUE_NS: u64 = 100_000;
/// Most transports fitted; beyond this the rest of the recording's new
/// transports are counted, not modelled (memory stays bounded).
/// (At most about 7 KiB each: 224 MiB for the lot.)
pub const MAX_TRANSPORTS: usize = 32_768;

/// What a transport's recording says of its demand.
#[derive(Clone, Debug, PartialEq)]
pub enum FittedDemand {
    /// Never idle while recorded: it always had a request waiting.
    Backlogged,
    /// Bursts of these sizes, separated by these think times (ns).
    Bursts {
        sizes: Vec<u32>,
        thinks_ns: Vec<u64>,
    },
    /// `inflight` requests, each followed by the next after a think time.
    Closed { inflight: u32, thinks_ns: Vec<u64> },
}

/// The think time (ns) below which [`FittedDemand::scale_thinks`] scales
/// as if the think were this much longer: a round trip on a local
/// network, the least a client answering "at once" takes. So a think
/// fitted as 0 can grow, and the scale stays continuous at 1.
pub const THINK_OFFSET_NS: u64 = 100_000;

impl FittedDemand {
    /// Every think time t becomes (t + [`THINK_OFFSET_NS`]) × k −
    /// [`THINK_OFFSET_NS`] (at least 0): times `k` for long thinks, and a
    /// think of 0 grows with k > 1. A backlogged transport has none.
    pub fn scale_thinks(&mut self, k: f64) {
        match self {
            FittedDemand::Bursts { thinks_ns, .. } | FittedDemand::Closed { thinks_ns, .. } => {
                let off = THINK_OFFSET_NS as f64;
                for t in thinks_ns {
                    let v = ((*t as f64 + off) * k - off).max(0.0);
                    *t = v.round().min(u64::MAX as f64) as u64;
                }
            }
            FittedDemand::Backlogged => {}
        }
    }
}

#[derive(Clone, Debug)]
pub struct TransportFit {
    pub key: XprtKey,
    pub dispatches: u64,
    pub demand: FittedDemand,
    /// Per-request service times (ns), a sample of the recorded ones;
    /// empty when none were recorded for it.
    pub service_ns: Vec<u64>,
}

/// The fitted model of a whole recording.
#[derive(Clone, Debug, Default)]
pub struct Fit {
    pub transports: Vec<TransportFit>,
    /// Span of the recorded events (ns).
    pub span_ns: u64,
    pub dispatches: u64,
    pub executions: u64,
    /// Most requests in service at once (dequeues not yet answered): a
    /// lower bound of the thread count.
    pub peak_in_service: u32,
    pub events_lost: u64,
    /// Transports beyond [`MAX_TRANSPORTS`], not modelled.
    pub transports_dropped: u64,
    /// Service times of every transport, for those without their own.
    pub pooled_service_ns: Vec<u64>,
    /// Time during which some transport waited on the ready queue (so
    /// every thread was busy), between the first and last dispatch of each
    /// such period, and the dispatches after the first in it: a thread's
    /// time per request is threads × this time / these dispatches.
    pub saturated_ns: u64,
    pub saturated_dispatches: u64,
    /// Mean recorded execution time per request (ns).
    pub mean_service_ns: f64,
    /// Completions were estimated from dispatches (see
    /// [`Fitter::with_estimated_completions`]).
    pub completions_estimated: bool,
}

struct State {
    key: XprtKey,
    queued: bool,
    in_service: u64,
    busy: bool,
    burst: u32,
    /// When the transport last went idle (its last completion).
    idle_since: Option<u64>,
    /// When it closed, unless it was busy again since.
    closed_at: Option<u64>,
    /// The first busy period may have begun before the recording did.
    first_burst: Option<u32>,
    sizes: Reservoir<u32>,
    thinks: Reservoir<u64>,
    service: Reservoir<u64>,
    dispatches: u64,
    first_dequeue_ns: Option<u64>,
    last_dequeue_ns: u64,
    completed_since_dequeue: bool,
    /// Its last completions, newest last.
    recent: VecDeque<u64>,
    arrivals: Reservoir<Arrival>,
    /// Visible arrivals while requests of it were in service.
    mid_busy_arrivals: u64,
    /// Estimated completion times of its requests in service (see
    /// `Fitter::estimated`), oldest first.
    due: VecDeque<u64>,
    service_sum_ns: u64,
    service_n: u64,
}

#[derive(Default)]
pub struct Fitter {
    /// Seeded: a recording's transports are its clients' choice (`crate::keyhash`).
    index: crate::keyhash::PeerHashMap<XprtKey, usize>,
    states: Vec<State>,
    first_ts: Option<u64>,
    last_ts: u64,
    in_service: u64,
    peak_in_service: u64,
    dispatches: u64,
    executions: u64,
    lost: u64,
    dropped: u64,
    pooled: Option<Reservoir<u64>>,
    /// Completions estimated from dispatches, not taken from executions.
    estimated: bool,
    /// A thread's time per request over the recorded execution time,
    /// known from a first pass ([`Fitter::with_estimated_completions_scaled`]).
    occupancy_scale: Option<f64>,
    /// Events of other services' transports (lockd's) are not the
    /// clients' demand on nfsd: left out.
    nfsd_ports: crate::aggregate::services::NfsdPorts,
    service_sum_ns: u64,
    service_n: u64,
    /// Transports on the ready queue now; the first and last dispatch and
    /// the dispatches since one was; the totals over such periods.
    queued_now: u64,
    period_first: u64,
    period_last: u64,
    period_dispatches: u64,
    saturated_ns: u64,
    saturated_dispatches: u64,
}

/// Requests in service remembered per transport when completions are
/// estimated (more are taken as done).
const MAX_DUE: usize = 4096;

impl Fitter {
    pub fn new() -> Self {
        Fitter::default()
    }

    /// For recordings whose executions arrive in batches: each request is
    /// taken to complete its transport's mean service time after its
    /// dispatch, and executions only give the service times.
    pub fn with_estimated_completions() -> Self {
        Fitter {
            estimated: true,
            ..Fitter::default()
        }
    }

    /// As [`Fitter::with_estimated_completions`], a request taking `k` times
    /// its transport's mean execution time (a thread's time per request,
    /// from [`Fit::occupancy_ratio`] of a first pass); service times come
    /// out scaled by `k`.
    pub fn with_estimated_completions_scaled(k: f64) -> Self {
        Fitter {
            estimated: true,
            occupancy_scale: Some(k),
            ..Fitter::default()
        }
    }

    /// nfsd's ports besides 2049 (from the recording's header).
    pub fn with_nfsd_ports(mut self, ports: Option<crate::aggregate::services::NfsdPorts>) -> Self {
        if let Some(p) = ports {
            let mut all = self.nfsd_ports.ports().to_vec();
            all.extend_from_slice(p.ports());
            self.nfsd_ports = crate::aggregate::services::NfsdPorts::from_ports(&all);
        }
        self
    }

    fn state(&mut self, key: &XprtKey) -> Option<&mut State> {
        if let Some(&i) = self.index.get(key) {
            return self.states.get_mut(i);
        }
        if self.states.len() >= MAX_TRANSPORTS {
            self.dropped += 1;
            return None;
        }
        let seed = self.states.len() as u64 + 1;
        self.index.insert(*key, self.states.len());
        self.states.push(State {
            key: *key,
            queued: false,
            in_service: 0,
            busy: false,
            burst: 0,
            idle_since: None,
            closed_at: None,
            first_burst: None,
            sizes: Reservoir::new(BURST_SAMPLES, seed),
            thinks: Reservoir::new(BURST_SAMPLES, seed << 1),
            service: Reservoir::new(SERVICE_SAMPLES, seed << 2),
            dispatches: 0,
            first_dequeue_ns: None,
            last_dequeue_ns: 0,
            completed_since_dequeue: false,
            recent: VecDeque::new(),
            arrivals: Reservoir::new(ARRIVAL_SAMPLES, seed << 3),
            mid_busy_arrivals: 0,
            due: VecDeque::new(),
            service_sum_ns: 0,
            service_n: 0,
        });
        self.states.last_mut()
    }

    pub fn ingest_all(&mut self, events: &[Event]) {
        for e in events {
            self.ingest(e);
        }
    }

    pub fn ingest(&mut self, ev: &Event) {
        // A breakdown of Executed events already counted, stamped when the
        // kernel's totals were read: not a moment of the transport's life.
        if matches!(
            ev.kind,
            EventKind::Procedure { .. } | EventKind::Operation { .. }
        ) || !self.nfsd_ports.is_nfsd(ev.xprt.server.port())
        {
            return;
        }
        let ts = ev.ts_ns;
        self.first_ts.get_or_insert(ts);
        self.last_ts = self.last_ts.max(ts);
        if self.estimated {
            if let Some(&i) = self.index.get(&ev.xprt) {
                settle(&mut self.states[i], ts);
            }
        }
        match ev.kind {
            EventKind::Enqueue { .. } => {
                let mut newly = false;
                if let Some(s) = self.state(&ev.xprt) {
                    if !s.queued {
                        arrival(s, ts);
                        newly = true;
                    }
                    s.queued = true;
                    begin_burst(s, ts);
                }
                if newly {
                    self.queued_now += 1;
                }
            }
            EventKind::Dequeue { .. } => {
                self.dispatches += 1;
                self.in_service += 1;
                self.peak_in_service = self.peak_in_service.max(self.in_service);
                let (estimated, sum, n) = (self.estimated, self.service_sum_ns, self.service_n);
                let k = self.occupancy_scale.unwrap_or(1.0);
                let mut was_queued = false;
                if let Some(s) = self.state(&ev.xprt) {
                    begin_burst(s, ts);
                    was_queued = s.queued;
                    s.queued = false;
                    s.in_service += 1;
                    s.burst = s.burst.saturating_add(1);
                    s.dispatches += 1;
                    s.first_dequeue_ns.get_or_insert(ts);
                    s.last_dequeue_ns = ts;
                    s.completed_since_dequeue = false;
                    if estimated {
                        // Its own mean, else everyone's, else 1 ms.
                        let mean = match (s.service_n, n) {
                            (k @ 1.., _) => s.service_sum_ns / k,
                            (0, k @ 1..) => sum / k,
                            _ => 1_000_000,
                        };
                        let mean = (mean as f64 * k) as u64;
                        let at = (ts + mean.max(1)).max(s.due.back().copied().unwrap_or(0));
                        if s.due.len() >= MAX_DUE {
                            if let Some(t) = s.due.pop_front() {
                                complete(s, t.min(ts), 1);
                            }
                        }
                        s.due.push_back(at);
                    }
                }
                if was_queued {
                    if self.period_dispatches == 0 {
                        self.period_first = ts;
                    }
                    self.period_last = ts;
                    self.period_dispatches += 1;
                    self.unqueued();
                }
            }
            EventKind::Executed {
                exec_ns, requests, ..
            } => {
                let requests = requests.max(1);
                self.executions += requests;
                self.in_service = self.in_service.saturating_sub(requests);
                let per = exec_ns / requests;
                let pooled = self
                    .pooled
                    .get_or_insert_with(|| Reservoir::new(SERVICE_SAMPLES * 4, 0x5eed));
                // A batch the kernel added up stands for `requests` of its
                // mean; a few copies weigh it without a loop per request.
                for _ in 0..requests.min(8) {
                    pooled.push(per);
                }
                self.service_sum_ns = self.service_sum_ns.saturating_add(exec_ns);
                self.service_n += requests;
                let estimated = self.estimated;
                if let Some(s) = self.state(&ev.xprt) {
                    for _ in 0..requests.min(8) {
                        s.service.push(per);
                    }
                    s.service_sum_ns = s.service_sum_ns.saturating_add(exec_ns);
                    s.service_n += requests;
                    if !estimated {
                        complete(s, ts, requests);
                    }
                }
            }
            EventKind::Closed => {
                if let Some(&i) = self.index.get(&ev.xprt) {
                    let s = &mut self.states[i];
                    let was_queued = s.queued;
                    // Its last busy period was cut by the close: not a burst.
                    s.busy = false;
                    s.queued = false;
                    self.in_service = self.in_service.saturating_sub(s.in_service);
                    s.in_service = 0;
                    s.due.clear();
                    s.idle_since = None;
                    s.closed_at = Some(ts);
                    if was_queued {
                        self.unqueued();
                    }
                }
            }
            EventKind::Accepted => {
                let _ = self.state(&ev.xprt);
            }
            EventKind::Lost { count, .. } => self.lost += count,
            EventKind::Procedure { .. } | EventKind::Operation { .. } => {}
        }
    }

    /// A transport left the ready queue. When the queue empties, a period
    /// with requests waiting ends: from its first to its last dispatch every
    /// thread was busy (the first may have been an idle thread's, woken
    /// by the arrival, so the rate is taken between them).
    fn unqueued(&mut self) {
        self.queued_now = self.queued_now.saturating_sub(1);
        if self.queued_now == 0 {
            self.end_period();
        }
    }

    fn end_period(&mut self) {
        if self.period_dispatches >= 2 {
            self.saturated_ns += self.period_last - self.period_first;
            self.saturated_dispatches += self.period_dispatches - 1;
        }
        self.period_dispatches = 0;
    }

    pub fn finish(mut self) -> Fit {
        for s in &mut self.states {
            settle(s, self.last_ts);
        }
        self.end_period();
        let k = self.occupancy_scale.unwrap_or(1.0);
        let scaled = |v: &[u64]| -> Vec<u64> { v.iter().map(|&x| (x as f64 * k) as u64).collect() };
        let span_ns = self
            .last_ts
            .saturating_sub(self.first_ts.unwrap_or(self.last_ts));
        let last_ts = self.last_ts;
        let transports = self
            .states
            .into_iter()
            .filter(|s| s.dispatches > 0)
            .map(|s| {
                let mut sizes = s.sizes.items().to_vec();
                if sizes.is_empty() {
                    sizes.extend(s.first_burst);
                }
                let periods = s.sizes.seen() + u64::from(s.first_burst.is_some());
                // Where nothing else fits: backlogged if it was still busy
                // at the end; if it had gone quiet (or closed), one burst
                // of all it sent, the rest of the recording its think time.
                let quiet_since = (!s.busy).then_some(s.idle_since.or(s.closed_at)).flatten();
                let otherwise = || match quiet_since {
                    Some(t) => FittedDemand::Bursts {
                        sizes: vec![u32::try_from(s.dispatches).unwrap_or(u32::MAX)],
                        thinks_ns: vec![last_ts.saturating_sub(t)],
                    },
                    None => FittedDemand::Backlogged,
                };
                let demand = if s.arrivals.seen() <= 1 {
                    otherwise()
                } else if s.mid_busy_arrivals * 2 >= periods.max(1) {
                    closed_loop(s.arrivals.items(), spacing(&s)).unwrap_or_else(otherwise)
                } else if s.thinks.items().is_empty() || sizes.is_empty() {
                    otherwise()
                } else {
                    FittedDemand::Bursts {
                        sizes,
                        thinks_ns: s.thinks.items().to_vec(),
                    }
                };
                TransportFit {
                    key: s.key,
                    dispatches: s.dispatches,
                    demand,
                    service_ns: scaled(s.service.items()),
                }
            })
            .collect();
        Fit {
            transports,
            span_ns,
            dispatches: self.dispatches,
            executions: self.executions,
            peak_in_service: u32::try_from(self.peak_in_service).unwrap_or(u32::MAX),
            events_lost: self.lost,
            transports_dropped: self.dropped,
            pooled_service_ns: self.pooled.map(|r| scaled(r.items())).unwrap_or_default(),
            saturated_ns: self.saturated_ns,
            saturated_dispatches: self.saturated_dispatches,
            mean_service_ns: k * self.service_sum_ns as f64 / self.service_n.max(1) as f64,
            completions_estimated: self.estimated,
        }
    }
}

/// Its mean time per dispatch, first to last (completions follow
/// dispatches one for one): `None` for fewer than two.
fn spacing(s: &State) -> Option<f64> {
    let first = s.first_dequeue_ns?;
    (s.dispatches >= 2 && s.last_dequeue_ns > first)
        .then(|| (s.last_dequeue_ns - first) as f64 / (s.dispatches - 1) as f64)
}

/// `n` requests of `s` completed at `ts`.
fn complete(s: &mut State, ts: u64, n: u64) {
    for _ in 0..n.min(8) {
        if s.recent.len() == GAPS {
            s.recent.pop_front();
        }
        s.recent.push_back(ts);
    }
    s.completed_since_dequeue = true;
    s.in_service = s.in_service.saturating_sub(n);
    if s.busy && !s.queued && s.in_service == 0 {
        end_burst(s, ts);
    }
}

/// The estimated completions of `s` due by `now`.
fn settle(s: &mut State, now: u64) {
    while let Some(&t) = s.due.front() {
        if t > now {
            break;
        }
        s.due.pop_front();
        complete(s, t, 1);
    }
}

/// An enqueue of a transport that was off the queue: an arrival, unless
/// it is the re-enqueue that follows a dequeue.
fn arrival(s: &mut State, ts: u64) {
    let reenqueue = s.in_service > 0
        && !s.completed_since_dequeue
        && ts.saturating_sub(s.last_dequeue_ns) <= REENQUEUE_NS;
    if reenqueue {
        return;
    }
    if s.busy && s.in_service > 0 {
        s.mid_busy_arrivals += 1;
    }
    s.arrivals.push(Arrival::new(ts, s.in_service, &s.recent));
}

fn begin_burst(s: &mut State, ts: u64) {
    if s.busy {
        return;
    }
    s.busy = true;
    s.burst = 0;
    s.closed_at = None;
    if let Some(t0) = s.idle_since.take() {
        s.thinks.push(ts.saturating_sub(t0));
    }
}

fn end_burst(s: &mut State, ts: u64) {
    s.busy = false;
    if s.sizes.seen() == 0 && s.first_burst.is_none() && s.thinks.seen() == 0 {
        s.first_burst = Some(s.burst);
    } else {
        s.sizes.push(s.burst);
    }
    s.idle_since = Some(ts);
}

#[cfg(test)]
mod tests;
