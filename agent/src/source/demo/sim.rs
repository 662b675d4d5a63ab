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
//! round-robin series.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};

use super::scenario::{Policy, Scenario};
use crate::model::{Endpoint, Event, EventKind, XprtKey};

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
}

struct Client {
    transports: Vec<usize>,
    next_conn: usize,
    burst: Option<u32>,
    think_ns: u64,
    outstanding: u32,
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
        let classmap = scenario.class_map().unwrap_or_default();
        let server_v4 = Endpoint::from_socket_addr("10.0.0.1:2049".parse().expect("literal"));
        let server_v6 = Endpoint::from_socket_addr("[fd00::1]:2049".parse().expect("literal"));
        let mut transports = Vec::new();
        let mut clients = Vec::new();
        let mut groups: HashMap<String, usize> = HashMap::new();
        for (ci, (addr, spec)) in scenario.expanded_clients().into_iter().enumerate() {
            let mut ts = Vec::new();
            for conn in 0..spec.connections {
                // Distinct for every connection the scenario allows.
                let port = 665 + conn as u16;
                let client = Endpoint::from_socket_addr(SocketAddr::new(addr, port));
                let key = XprtKey {
                    netns: DEMO_NETNS,
                    server: if matches!(addr, IpAddr::V4(_)) {
                        server_v4
                    } else {
                        server_v6
                    },
                    client,
                };
                let group_name = match scenario.policy {
                    Policy::Flat => format!("xprt-{}", transports.len()),
                    Policy::RrPeer => format!("peer-{addr}"),
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
                });
            }
            clients.push(Client {
                transports: ts,
                next_conn: 0,
                burst: spec.burst,
                think_ns: (spec.think_ms * 1e6) as u64,
                outstanding: spec.inflight.unwrap_or(0),
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
            if self.clients[ci].burst.is_some() {
                self.schedule(self.rtt_ns / 2, SimEvent::BurstStarts { client: ci });
            } else {
                // Stagger the first requests by a microsecond each so the
                // start is not one giant tie.
                for r in 0..self.clients[ci].outstanding {
                    let t = self.next_transport(ci);
                    let at = self.rtt_ns / 2 + (ci as u64 * 7 + r as u64) * 1_000;
                    self.schedule(at, SimEvent::RequestArrives { transport: t });
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
        if !self.started {
            self.start(out);
        }
        while let Some(Reverse((at, _, _))) = self.heap.peek() {
            if *at > until_ns {
                break;
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
                    out.push(Event {
                        ts_ns: at,
                        xprt: self.transports[transport].key,
                        kind: EventKind::Executed {
                            exec_ns,
                            requests: 1,
                        },
                    });
                    self.idle_threads += 1;
                    let ci = self.transports[transport].client;
                    self.reply_reaches_client(ci);
                    self.dispatch(out);
                }
                SimEvent::BurstStarts { client } => {
                    let n = self.clients[client].burst.unwrap_or(0);
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
    }

    fn reply_reaches_client(&mut self, ci: usize) {
        let at = self.now + self.rtt_ns;
        if self.clients[ci].burst.is_some() {
            let c = &mut self.clients[ci];
            c.outstanding = c.outstanding.saturating_sub(1);
            if c.outstanding == 0 {
                let think = c.think_ns;
                self.schedule(at + think, SimEvent::BurstStarts { client: ci });
            }
        } else {
            let t = self.next_transport(ci);
            self.schedule(at, SimEvent::RequestArrives { transport: t });
        }
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
            kind: EventKind::Enqueue,
        });
        self.group_queues[g].push_back(t);
        if !self.group_ready[g] {
            self.group_ready[g] = true;
            self.ready_groups.push_back(g);
        }
    }

    fn dispatch(&mut self, out: &mut Vec<Event>) {
        while self.idle_threads > 0 {
            let Some(g) = self.ready_groups.pop_front() else {
                return;
            };
            let Some(t) = self.group_queues[g].pop_front() else {
                self.group_ready[g] = false;
                continue;
            };
            if self.group_queues[g].is_empty() {
                self.group_ready[g] = false;
            } else {
                self.ready_groups.push_back(g);
            }
            self.idle_threads -= 1;
            self.dispatches[t] += 1;
            let tr = &mut self.transports[t];
            tr.queued = false;
            tr.pending -= 1;
            out.push(Event {
                ts_ns: self.now,
                xprt: tr.key,
                kind: EventKind::Dequeue {
                    qtime_ns: None,
                    class: None,
                },
            });
            let base = self.scenario.service_ms * 1e6;
            let j = self.scenario.jitter;
            let service = if j > 0.0 {
                base * (1.0 - j + 2.0 * j * self.rng.next_f64())
            } else {
                base
            };
            let exec_ns = service.max(1.0) as u64;
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
