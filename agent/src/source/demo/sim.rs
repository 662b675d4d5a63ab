//! A discrete-event simulation of one nfsd pool, emitting the events the
//! kernel's tracepoints would.
//!
//! The model follows svc_recv: a thread dequeues a ready transport, reads
//! one request from it and re-enqueues the transport at once if more
//! requests are waiting (svc_xprt_received), then works on the request for
//! its service time. So one dispatch is one request, and a transport with
//! work pending competes for threads like any other ready transport.
//!
//! The three policies share one two-level queue: ready groups in FIFO
//! order, each with a FIFO of its ready transports. `flat` makes every
//! transport its own group (one FIFO of transports, today's kernel);
//! `rr-peer` groups by peer and `rr-class` by class entity, as in the
//! round-robin series. `sparse-flow` puts a transport enqueued with
//! nothing in flight (the kernel's `xpt_nr_rqsts`: dispatched and not yet
//! done) on a priority queue drained first, with a budget of
//! [`SPARSE_FLOW_CREDIT`] dispatches spent by each of its dispatches and
//! refilled only at an enqueue that again finds nothing in flight (the
//! sparse-flow RFC's cover letter); without budget it joins the flat queue.
//!
//! Clients come from a scenario, or as parts ([`Simulator::from_parts`],
//! what `nfsdtop whatif` runs its fitted model with): each with its
//! transports, a [`Demand`] and, optionally, service times to draw from.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};

use super::scenario::{Policy, Scenario, SPARSE_FLOW_CREDIT};
use crate::enrich::classify::ClassMap;
use crate::model::{Bytes, Endpoint, Event, EventKind, ProcName, XprtKey};

/// The initial network namespace's inode on most systems.
pub const DEMO_NETNS: u32 = 4_026_531_840;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum SimEvent {
    RequestArrives { transport: usize },
    ServiceDone { transport: usize, exec_ns: u64 },
    BurstStarts { client: usize },
}

struct Transport {
    key: XprtKey,
    client: usize,
    group: usize,
    pending: u32,
    queued: bool,
    /// Dispatched and not yet done (the kernel's `xpt_nr_rqsts`).
    inflight: u32,
    /// sparse-flow: priority dispatches left.
    credit: u32,
}

struct Client {
    transports: Vec<usize>,
    next_conn: usize,
    demand: Demand,
    outstanding: u32,
    first_at_ns: u64,
    /// Empirical service times to draw from; empty: the scenario's.
    service_ns: Vec<u64>,
    request_bytes: Option<Bytes>,
    /// Requests it has had served (for their procedures).
    served: u64,
    /// An NFSv4 client (the scenario names it, `nfs_name`): each request
    /// is a COMPOUND, its operations reported too.
    nfs4: bool,
}

/// How a client loads the server.
#[derive(Clone, Debug, PartialEq)]
pub enum Demand {
    /// Keeps this many requests in flight: each reply is followed, a
    /// round trip later, by the next request (a backlogged client).
    Inflight(u32),
    /// Sends a burst of requests; once all are answered it thinks, then
    /// sends the next. Sizes and think times are drawn from these lists
    /// (one entry: fixed).
    Bursts {
        sizes: Vec<u32>,
        thinks_ns: Vec<u64>,
    },
    /// Keeps `inflight` requests in flight, each followed, after a think
    /// time drawn from the list (round trip included), by the next.
    Closed { inflight: u32, thinks_ns: Vec<u64> },
    /// Always has a request waiting on each of its transports, however
    /// many threads serve it (a client whose demand exceeds any share).
    Unbounded,
}

/// One client of a simulation built from parts (`Simulator::from_parts`):
/// its transports, its demand, and optionally the empirical distribution
/// of its service times.
#[derive(Clone, Debug)]
pub struct SimClient {
    pub transports: Vec<XprtKey>,
    pub demand: Demand,
    /// When its first request (or burst) arrives.
    pub first_at_ns: u64,
    /// Service times (ns) drawn uniformly; empty: the scenario's
    /// `service_ms` and `jitter`.
    pub service_ns: Vec<u64>,
    /// What each request receives and its reply sends; None: no sizes
    /// (the `Executed` events say bytes were not measured).
    pub request_bytes: Option<Bytes>,
}

impl Simulator {
    /// The procedure of client `ci`'s next served request, where it has
    /// sizes (a demo client; whatif's have none): READs (WRITEs where a
    /// request is larger than its reply), every 8th a GETATTR and every
    /// 32nd an ACCESS, as a file-serving client's mix looks.
    fn procedure(&mut self, ci: usize) -> Option<ProcName> {
        let c = &mut self.clients[ci];
        let b = c.request_bytes?;
        c.served += 1;
        Some(ProcName::new(match c.served {
            _ if c.nfs4 => "COMPOUND",
            n if n % 32 == 0 => "ACCESS",
            n if n % 8 == 0 => "GETATTR",
            _ if b.received > b.sent => "WRITE",
            _ => "READ",
        }))
    }

    /// The NFSv4 operations of client `ci`'s request just served, where
    /// it is an NFSv4 client: SEQUENCE, PUTFH and the same mix as an
    /// NFSv3 client's procedures (ACCESS 3, GETATTR 9, WRITE 38, READ 25:
    /// `nfsdtop_common::nfs4ops` numbers).
    fn operations(&self, ci: usize) -> &'static [u8] {
        let c = &self.clients[ci];
        if !c.nfs4 {
            return &[];
        }
        const SEQUENCE: u8 = 53;
        const PUTFH: u8 = 22;
        match c.served {
            n if n % 32 == 0 => &[SEQUENCE, PUTFH, 3],
            n if n % 8 == 0 => &[SEQUENCE, PUTFH, 9],
            _ if c.request_bytes.is_some_and(|b| b.received > b.sent) => &[SEQUENCE, PUTFH, 38],
            _ => &[SEQUENCE, PUTFH, 25],
        }
    }
}

/// SplitMix64: tiny, deterministic, good enough for service-time jitter.
struct Rng(u64);

impl Rng {
    fn next_f64(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// One of `xs`, uniformly; a one-entry list costs no draw (the
    /// built-in scenarios' sequences stay as they were).
    fn pick<T: Copy>(&mut self, xs: &[T]) -> Option<T> {
        match xs {
            [] => None,
            [x] => Some(*x),
            _ => {
                let i = (self.next_f64() * xs.len() as f64) as usize;
                xs.get(i.min(xs.len() - 1)).copied()
            }
        }
    }
}

pub struct Simulator {
    scenario: Scenario,
    now: u64,
    seq: u64,
    heap: BinaryHeap<Reverse<(u64, u64, SimEvent)>>,
    transports: Vec<Transport>,
    clients: Vec<Client>,
    group_queues: Vec<VecDeque<usize>>,
    group_ready: Vec<bool>,
    ready_groups: VecDeque<usize>,
    /// sparse-flow's priority queue of transports, drained first.
    priority: VecDeque<usize>,
    idle_threads: u32,
    rng: Rng,
    rtt_ns: u64,
    /// The simulator's own count of dispatches per transport: the
    /// independent truth the aggregator is checked against.
    dispatches: Vec<u64>,
    started: bool,
}

impl Simulator {
    pub fn new(scenario: Scenario) -> Simulator {
        let server_v4 = Endpoint::from_socket_addr("10.0.0.1:2049".parse().expect("literal"));
        let server_v6 = Endpoint::from_socket_addr("[fd00::1]:2049".parse().expect("literal"));
        let rtt_ns = (scenario.rtt_us * 1e3) as u64;
        let clients = scenario
            .expanded_clients()
            .into_iter()
            .enumerate()
            .map(|(ci, (addr, spec))| SimClient {
                transports: (0..spec.connections)
                    .map(|conn| XprtKey {
                        netns: DEMO_NETNS,
                        server: if matches!(addr, IpAddr::V4(_)) {
                            server_v4
                        } else {
                            server_v6
                        },
                        // Distinct for every connection the scenario allows.
                        client: Endpoint::from_socket_addr(SocketAddr::new(
                            addr,
                            665 + conn as u16,
                        )),
                    })
                    .collect(),
                demand: match spec.burst {
                    Some(b) => Demand::Bursts {
                        sizes: vec![b],
                        thinks_ns: vec![(spec.think_ms * 1e6) as u64],
                    },
                    None => Demand::Inflight(spec.inflight.unwrap_or(0)),
                },
                // Stagger the first requests of backlogged clients by a
                // microsecond each so the start is not one giant tie.
                first_at_ns: rtt_ns / 2
                    + if spec.burst.is_some() {
                        0
                    } else {
                        ci as u64 * 7_000
                    },
                service_ns: Vec::new(),
                request_bytes: Some(Bytes {
                    received: spec.request_bytes,
                    sent: spec.reply_bytes,
                }),
            })
            .collect();
        let nfs4: Vec<bool> = scenario
            .expanded_clients()
            .iter()
            .map(|(_, spec)| spec.nfs_name.is_some())
            .collect();
        let classmap = scenario.class_map().unwrap_or_default();
        let mut sim = Simulator::from_parts(scenario, &classmap, clients);
        for (c, v4) in sim.clients.iter_mut().zip(nfs4) {
            c.nfs4 = v4;
        }
        sim
    }

    /// A simulation of `clients` (their own transports, demands and
    /// service times) under `scenario`'s threads, policy, round trip and
    /// seed; `scenario.clients` is not used. `classmap` groups transports
    /// for `rr-class`.
    pub fn from_parts(scenario: Scenario, classmap: &ClassMap, specs: Vec<SimClient>) -> Simulator {
        let mut transports = Vec::new();
        let mut clients = Vec::new();
        let mut groups: HashMap<String, usize> = HashMap::new();
        for (ci, spec) in specs.into_iter().enumerate() {
            let mut ts = Vec::new();
            for key in spec.transports {
                let group_name = match scenario.policy {
                    Policy::Flat | Policy::SparseFlow => format!("xprt-{}", transports.len()),
                    Policy::RrPeer => format!("peer-{}-{}", key.netns, key.peer()),
                    Policy::RrClass => classmap.classify(&key.peer()).entity,
                };
                let n = groups.len();
                let group = *groups.entry(group_name).or_insert(n);
                ts.push(transports.len());
                transports.push(Transport {
                    key,
                    client: ci,
                    group,
                    pending: 0,
                    queued: false,
                    inflight: 0,
                    credit: 0,
                });
            }
            clients.push(Client {
                transports: ts,
                next_conn: 0,
                outstanding: match spec.demand {
                    Demand::Inflight(n) => n,
                    Demand::Bursts { .. } | Demand::Closed { .. } | Demand::Unbounded => 0,
                },
                demand: spec.demand,
                first_at_ns: spec.first_at_ns,
                service_ns: spec.service_ns,
                request_bytes: spec.request_bytes,
                served: 0,
                nfs4: false,
            });
        }
        let ngroups = groups.len();
        let ntrans = transports.len();
        Simulator {
            rng: Rng(scenario.seed),
            rtt_ns: (scenario.rtt_us * 1e3) as u64,
            idle_threads: scenario.threads,
            scenario,
            now: 0,
            seq: 0,
            heap: BinaryHeap::new(),
            transports,
            clients,
            group_queues: vec![VecDeque::new(); ngroups],
            group_ready: vec![false; ngroups],
            ready_groups: VecDeque::new(),
            priority: VecDeque::new(),
            dispatches: vec![0; ntrans],
            started: false,
        }
    }

    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    pub fn now_ns(&self) -> u64 {
        self.now
    }

    /// The simulator's own dispatch count per peer address.
    pub fn dispatches_by_peer(&self) -> HashMap<String, u64> {
        let mut out = HashMap::new();
        for (t, n) in self.transports.iter().zip(&self.dispatches) {
            *out.entry(t.key.peer().to_string()).or_insert(0) += n;
        }
        out
    }

    pub fn total_dispatches(&self) -> u64 {
        self.dispatches.iter().sum()
    }

    fn schedule(&mut self, at: u64, ev: SimEvent) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, ev)));
    }

    fn start(&mut self, out: &mut Vec<Event>) {
        self.started = true;
        for t in &self.transports {
            out.push(Event {
                ts_ns: 0,
                xprt: t.key,
                kind: EventKind::Accepted,
            });
        }
        for ci in 0..self.clients.len() {
            let first = self.clients[ci].first_at_ns;
            match self.clients[ci].demand {
                Demand::Bursts { .. } => self.schedule(first, SimEvent::BurstStarts { client: ci }),
                Demand::Inflight(n) | Demand::Closed { inflight: n, .. } => {
                    for r in 0..n {
                        let t = self.next_transport(ci);
                        let at = first + r as u64 * 1_000;
                        self.schedule(at, SimEvent::RequestArrives { transport: t });
                    }
                }
                // One request each, never used up (see `dispatch`).
                Demand::Unbounded => {
                    for r in 0..self.clients[ci].transports.len() {
                        let t = self.clients[ci].transports[r];
                        self.schedule(first, SimEvent::RequestArrives { transport: t });
                    }
                }
            }
        }
    }

    fn next_transport(&mut self, ci: usize) -> usize {
        let c = &mut self.clients[ci];
        let t = c.transports[c.next_conn % c.transports.len()];
        c.next_conn += 1;
        t
    }

    /// Run the simulation up to `until_ns`, appending the kernel's view.
    pub fn run_until(&mut self, until_ns: u64, out: &mut Vec<Event>) {
        self.run_bounded(until_ns, usize::MAX, out);
    }

    /// As `run_until`, but stop once `max_events` more events are in
    /// `out` (a model with near-zero service times makes billions a
    /// second): true if the simulation reached `until_ns`.
    pub fn run_bounded(&mut self, until_ns: u64, max_events: usize, out: &mut Vec<Event>) -> bool {
        if !self.started {
            self.start(out);
        }
        let limit = out.len().saturating_add(max_events);
        while let Some(Reverse((at, _, _))) = self.heap.peek() {
            if *at > until_ns {
                break;
            }
            if out.len() >= limit {
                return false;
            }
            let Some(Reverse((at, _, ev))) = self.heap.pop() else {
                break;
            };
            self.now = at;
            match ev {
                SimEvent::RequestArrives { transport } => {
                    self.transports[transport].pending += 1;
                    self.enqueue(transport, out);
                    self.dispatch(out);
                }
                SimEvent::ServiceDone { transport, exec_ns } => {
                    let ci = self.transports[transport].client;
                    let ev = Event {
                        ts_ns: at,
                        xprt: self.transports[transport].key,
                        kind: EventKind::Executed {
                            exec_ns,
                            requests: 1,
                            bytes: self.clients[ci].request_bytes,
                            procedure: self.procedure(ci),
                        },
                    };
                    out.push(ev);
                    let tr = &mut self.transports[transport];
                    tr.inflight = tr.inflight.saturating_sub(1);
                    for &op in self.operations(ci) {
                        out.push(Event {
                            kind: EventKind::Operation { op, count: 1 },
                            ..ev
                        });
                    }
                    self.idle_threads += 1;
                    self.reply_reaches_client(ci);
                    self.dispatch(out);
                }
                SimEvent::BurstStarts { client } => {
                    let n = match &self.clients[client].demand {
                        Demand::Bursts { sizes, .. } => self.rng.pick(sizes).unwrap_or(1).max(1),
                        _ => 0,
                    };
                    self.clients[client].outstanding = n;
                    for _ in 0..n {
                        let t = self.next_transport(client);
                        self.schedule(
                            at + self.rtt_ns / 2,
                            SimEvent::RequestArrives { transport: t },
                        );
                    }
                }
            }
        }
        self.now = self.now.max(until_ns);
        true
    }

    fn reply_reaches_client(&mut self, ci: usize) {
        let at = self.now + self.rtt_ns;
        let c = &mut self.clients[ci];
        match &c.demand {
            Demand::Bursts { thinks_ns, .. } => {
                c.outstanding = c.outstanding.saturating_sub(1);
                if c.outstanding == 0 {
                    let think = self.rng.pick(thinks_ns).unwrap_or(0);
                    self.schedule(
                        at.saturating_add(think),
                        SimEvent::BurstStarts { client: ci },
                    );
                }
            }
            Demand::Inflight(_) => {
                let t = self.next_transport(ci);
                self.schedule(at, SimEvent::RequestArrives { transport: t });
            }
            Demand::Closed { thinks_ns, .. } => {
                let think = self.rng.pick(thinks_ns).unwrap_or(0);
                let t = self.next_transport(ci);
                self.schedule(
                    at.saturating_add(think),
                    SimEvent::RequestArrives { transport: t },
                );
            }
            Demand::Unbounded => {}
        }
    }

    /// A service time for a request of transport `t`: from its client's
    /// empirical distribution, or the scenario's time and jitter.
    fn service_ns(&mut self, t: usize) -> u64 {
        let samples = &self.clients[self.transports[t].client].service_ns;
        if let Some(ns) = self.rng.pick(samples) {
            return ns.max(1);
        }
        let base = self.scenario.service_ms * 1e6;
        let j = self.scenario.jitter;
        let service = if j > 0.0 {
            base * (1.0 - j + 2.0 * j * self.rng.next_f64())
        } else {
            base
        };
        service.max(1.0) as u64
    }

    fn enqueue(&mut self, t: usize, out: &mut Vec<Event>) {
        let tr = &mut self.transports[t];
        if tr.queued || tr.pending == 0 {
            return;
        }
        tr.queued = true;
        let g = tr.group;
        out.push(Event {
            ts_ns: self.now,
            xprt: tr.key,
            kind: EventKind::Enqueue {
                inflight: Some(tr.inflight),
            },
        });
        if self.scenario.policy == Policy::SparseFlow {
            if tr.inflight == 0 {
                tr.credit = SPARSE_FLOW_CREDIT;
            }
            if tr.credit > 0 {
                self.priority.push_back(t);
                return;
            }
        }
        self.group_queues[g].push_back(t);
        if !self.group_ready[g] {
            self.group_ready[g] = true;
            self.ready_groups.push_back(g);
        }
    }

    /// The ready transport the policy serves next, off its queue.
    fn next_ready(&mut self) -> Option<usize> {
        if let Some(t) = self.priority.pop_front() {
            return Some(t);
        }
        loop {
            let g = self.ready_groups.pop_front()?;
            let Some(t) = self.group_queues[g].pop_front() else {
                self.group_ready[g] = false;
                continue;
            };
            if self.group_queues[g].is_empty() {
                self.group_ready[g] = false;
            } else {
                self.ready_groups.push_back(g);
            }
            return Some(t);
        }
    }

    fn dispatch(&mut self, out: &mut Vec<Event>) {
        while self.idle_threads > 0 {
            let Some(t) = self.next_ready() else {
                return;
            };
            self.idle_threads -= 1;
            self.dispatches[t] += 1;
            let tr = &mut self.transports[t];
            tr.queued = false;
            // Counted before svc_xprt_received re-enqueues it, as the
            // kernel reserves the slot before receiving.
            tr.inflight += 1;
            tr.credit = tr.credit.saturating_sub(1);
            if self.clients[tr.client].demand != Demand::Unbounded {
                tr.pending -= 1;
            }
            out.push(Event {
                ts_ns: self.now,
                xprt: tr.key,
                kind: EventKind::Dequeue {
                    qtime_ns: None,
                    class: None,
                },
            });
            let exec_ns = self.service_ns(t);
            self.schedule(
                self.now + exec_ns,
                SimEvent::ServiceDone {
                    transport: t,
                    exec_ns,
                },
            );
            // svc_xprt_received: more waiting on this transport → back on
            // the ready queue straight away.
            self.enqueue(t, out);
        }
    }
}
