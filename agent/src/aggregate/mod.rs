//! Events → per-peer and per-class numbers, exactly as docs/json.md defines
//! them. Every event costs O(1): one transport lookup, a few field updates.
//!
//! Fair share uses a virtual clock per grouping: at each dispatch, with n
//! entities backlogged, the clock advances by 1/n, and an entity's
//! entitled dispatches are the clock's advance over the periods it was
//! backlogged. So "each backlogged entity earns 1/n" never needs a loop
//! over entities.

pub mod histogram;
mod table;

use rustc_hash::FxHashMap;

use crate::classify::ClassMap;
use crate::model::{
    EntityKind, EntityStats, Event, EventKind, PeerKey, PerTracepoint, Snapshot, SourceInfo,
    Totals, Tracepoint, TransportStats, WaitSource, XprtKey,
};
use crate::redact::Redactor;
use histogram::WaitHistogram;
use table::{Entity, EntityTable};

/// Memory bounds. Defaults keep a flood of short-lived peers to a few
/// tens of MiB.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_peers: usize,
    pub max_classes: usize,
    pub max_transports: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_peers: 65_536,
            max_classes: 65_536,
            max_transports: 262_144,
        }
    }
}

#[derive(Debug, Default)]
struct FairClock {
    /// Virtual time: dispatches each continuously backlogged entity is owed.
    v: f64,
    backlogged: u64,
}

#[derive(Debug)]
struct Xprt {
    key: XprtKey,
    peer: u32,
    class: u32,
    queued: bool,
    enqueued_ns: u64,
    dispatches: u64,
    last_ns: u64,
    /// The kernel class word this transport was last seen with.
    kernel_class: Option<u32>,
}

pub struct Aggregator {
    classmap: ClassMap,
    limits: Limits,
    xprt_index: FxHashMap<XprtKey, u32>,
    xprts: Vec<Option<Xprt>>,
    xprt_free: Vec<u32>,
    transports_evicted: u64,
    /// Amortises transport eviction as EntityTable does for entities.
    xprt_next_scan_at: usize,
    peers: EntityTable<PeerKey>,
    classes: EntityTable<String>,
    peer_clock: FairClock,
    class_clock: FairClock,
    dispatches: u64,
    prev_dispatches: u64,
    exec_ns: u64,
    prev_exec_ns: u64,
    events: [u64; Tracepoint::COUNT],
    lost: [u64; Tracepoint::COUNT],
    wait_interval: WaitHistogram,
    wait_total: WaitHistogram,
    /// The agent's own enqueue→dequeue waits, kept even when the kernel
    /// gives `qtime`, so the two can be compared.
    own_wait_total: WaitHistogram,
    saw_qtime: bool,
    saw_own_wait: bool,
    last_ts: u64,
    last_snapshot_ns: Option<u64>,
    redactor: Option<Redactor>,
}

impl Default for Aggregator {
    fn default() -> Self {
        Aggregator::new(ClassMap::default(), Limits::default())
    }
}

impl Aggregator {
    pub fn new(classmap: ClassMap, limits: Limits) -> Self {
        Aggregator {
            classmap,
            limits,
            xprt_index: FxHashMap::default(),
            xprts: Vec::new(),
            xprt_free: Vec::new(),
            transports_evicted: 0,
            xprt_next_scan_at: limits.max_transports,
            peers: EntityTable::new(limits.max_peers),
            classes: EntityTable::new(limits.max_classes),
            peer_clock: FairClock::default(),
            class_clock: FairClock::default(),
            dispatches: 0,
            prev_dispatches: 0,
            exec_ns: 0,
            prev_exec_ns: 0,
            events: [0; Tracepoint::COUNT],
            lost: [0; Tracepoint::COUNT],
            wait_interval: WaitHistogram::dense(),
            wait_total: WaitHistogram::dense(),
            own_wait_total: WaitHistogram::dense(),
            saw_qtime: false,
            saw_own_wait: false,
            last_ts: 0,
            last_snapshot_ns: None,
            redactor: None,
        }
    }

    /// Show client addresses only as keyed-hash pseudonyms, in every name
    /// this aggregator produces (peers, per-peer classes, transports).
    /// Classification still sees the real address, so class maps work.
    pub fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = Some(redactor);
        self
    }

    fn shown(&self, peer: &PeerKey) -> String {
        match (&self.redactor, peer.addr.ip()) {
            (Some(r), _) => r.peer_name(peer),
            (None, Some(ip)) => ip.to_string(),
            (None, None) => peer.to_string(),
        }
    }

    pub fn classmap(&self) -> &ClassMap {
        &self.classmap
    }

    /// Swap the class map (SIGHUP) without losing counts: peers keep their
    /// totals; from now on their dispatches count for their new class.
    pub fn set_classmap(&mut self, classmap: ClassMap) {
        self.classmap = classmap;
        let peers: Vec<(u32, PeerKey)> = self.peers.iter().map(|(s, k, _)| (s, *k)).collect();
        // One pass over the transports, grouped by peer: a scan per peer
        // would be quadratic on a SIGHUP with 100k peers.
        let mut by_peer: FxHashMap<u32, Vec<u32>> = FxHashMap::default();
        for (i, x) in self.xprts.iter().enumerate() {
            if let Some(x) = x.as_ref().filter(|x| x.kernel_class.is_none()) {
                by_peer.entry(x.peer).or_default().push(i as u32);
            }
        }
        let ts = self.last_ts;
        for (ps, key) in peers {
            let new_class = self.class_slot_for(&key, None);
            let old_class = self.peers.get(ps).class_slot;
            if new_class == old_class {
                continue;
            }
            for xi in by_peer.remove(&ps).unwrap_or_default() {
                self.move_xprt_class(xi, new_class, ts);
            }
            self.classes.get_mut(old_class).members -= 1;
            self.classes.get_mut(new_class).members += 1;
            let class_name = self.classes.get(new_class).class.clone();
            let p = self.peers.get_mut(ps);
            p.class_slot = new_class;
            p.class = class_name;
        }
    }

    /// The first snapshot's interval starts here (a live source's clock
    /// counts from boot, not from when the agent started).
    pub fn start_clock(&mut self, now_ns: u64) {
        if self.last_snapshot_ns.is_none() {
            self.last_snapshot_ns = Some(now_ns);
        }
    }

    pub fn wait_source(&self) -> WaitSource {
        if self.saw_qtime {
            WaitSource::Qtime
        } else if self.saw_own_wait {
            WaitSource::EnqueueDequeue
        } else {
            WaitSource::None
        }
    }

    pub fn own_wait_histogram(&self) -> &WaitHistogram {
        &self.own_wait_total
    }

    pub fn dispatches(&self) -> u64 {
        self.dispatches
    }

    pub fn ingest_all(&mut self, events: &[Event]) {
        for e in events {
            self.ingest(e);
        }
    }

    pub fn ingest(&mut self, ev: &Event) {
        self.last_ts = self.last_ts.max(ev.ts_ns);
        let ts = ev.ts_ns;
        match ev.kind {
            EventKind::Enqueue => {
                self.events[Tracepoint::Enqueue.index()] += 1;
                let xi = self.xprt(&ev.xprt, ts);
                self.enqueue(xi, ts);
            }
            EventKind::Dequeue { qtime_ns, class } => {
                self.events[Tracepoint::Dequeue.index()] += 1;
                let xi = self.xprt(&ev.xprt, ts);
                self.dequeue(xi, ts, qtime_ns, class);
            }
            // Counts and times from the kernel or a file saturate: a
            // corrupt word can pin a counter at its maximum, never wrap it.
            EventKind::Executed {
                exec_ns,
                requests,
                bytes,
            } => {
                let n = &mut self.events[Tracepoint::StatsLatency.index()];
                *n = n.saturating_add(requests);
                let xi = self.xprt(&ev.xprt, ts);
                let (ps, cs) = self.owners(xi);
                for e in [self.peers.get_mut(ps), self.classes.get_mut(cs)] {
                    e.exec_ns = e.exec_ns.saturating_add(exec_ns);
                    e.executions = e.executions.saturating_add(requests);
                    if let Some(b) = bytes {
                        let t = e.bytes.get_or_insert_default();
                        t.received = t.received.saturating_add(b.received);
                        t.sent = t.sent.saturating_add(b.sent);
                    }
                }
                self.exec_ns = self.exec_ns.saturating_add(exec_ns);
            }
            EventKind::Accepted => {
                self.events[Tracepoint::Accept.index()] += 1;
                self.xprt(&ev.xprt, ts);
            }
            EventKind::Closed => {
                self.events[Tracepoint::Close.index()] += 1;
                if let Some(&xi) = self.xprt_index.get(&ev.xprt) {
                    self.remove_xprt(xi, ts);
                }
            }
            EventKind::Lost { tracepoint, count } => {
                let n = &mut self.lost[tracepoint.index()];
                *n = n.saturating_add(count);
            }
        }
    }

    fn owners(&self, xi: u32) -> (u32, u32) {
        let x = self.xprts[xi as usize].as_ref().expect("live transport");
        (x.peer, x.class)
    }

    fn xprt(&mut self, key: &XprtKey, ts: u64) -> u32 {
        if let Some(&xi) = self.xprt_index.get(key) {
            if let Some(x) = self.xprts[xi as usize].as_mut() {
                x.last_ns = ts;
            }
            return xi;
        }
        if self.xprt_index.len() >= self.xprt_next_scan_at {
            self.evict_transports(ts);
        }
        let peer_key = key.peer();
        let peer = self.peer_slot(&peer_key, ts);
        let class = self.peers.get(peer).class_slot;
        {
            let p = self.peers.get_mut(peer);
            p.members += 1;
            p.connections += 1;
        }
        self.classes.get_mut(class).connections += 1;
        let x = Xprt {
            key: *key,
            peer,
            class,
            queued: false,
            enqueued_ns: 0,
            dispatches: 0,
            last_ns: ts,
            kernel_class: None,
        };
        let xi = match self.xprt_free.pop() {
            Some(i) => {
                self.xprts[i as usize] = Some(x);
                i
            }
            None => {
                self.xprts.push(Some(x));
                (self.xprts.len() - 1) as u32
            }
        };
        self.xprt_index.insert(*key, xi);
        xi
    }

    fn peer_slot(&mut self, key: &PeerKey, ts: u64) -> u32 {
        if let Some(s) = self.peers.slot_of(key) {
            return s;
        }
        if self.peers.is_full() {
            for gone in self.peers.evict_idle() {
                self.classes.get_mut(gone.class_slot).members -= 1;
            }
        }
        let class_slot = self.class_slot_for(key, None);
        let class = self.classes.get(class_slot).class.clone();
        self.classes.get_mut(class_slot).members += 1;
        let name = self.shown(key);
        let (slot, _) = self.peers.get_or_insert(key, || Entity {
            name,
            class,
            netns: key.netns,
            class_slot,
            last_active_ns: ts,
            ..Entity::default()
        });
        slot
    }

    fn class_slot_for(&mut self, peer: &PeerKey, kernel_class: Option<u32>) -> u32 {
        let shown = self.shown(peer);
        let a = match kernel_class {
            Some(word) => ClassMap::kernel_class(word, &shown),
            None => self.classmap.classify_as(peer, &shown),
        };
        if let Some(s) = self.classes.slot_of(&a.entity) {
            return s;
        }
        if self.classes.is_full() {
            self.classes.evict_idle();
        }
        let ts = self.last_ts;
        self.classes
            .get_or_insert(&a.entity, || Entity {
                name: a.entity.clone(),
                class: a.class.clone(),
                netns: peer.netns,
                last_active_ns: ts,
                ..Entity::default()
            })
            .0
    }

    fn evict_transports(&mut self, ts: u64) {
        let mut idle: Vec<(u64, u32)> = self
            .xprts
            .iter()
            .enumerate()
            .filter_map(|(i, x)| {
                x.as_ref()
                    .filter(|x| !x.queued)
                    .map(|x| (x.last_ns, i as u32))
            })
            .collect();
        let cap = self.limits.max_transports;
        let n = (cap / 8).max(1).min(idle.len());
        self.xprt_next_scan_at = cap.max(self.xprt_index.len() - n + cap / 8);
        if n == 0 {
            return;
        }
        idle.select_nth_unstable(n - 1);
        for &(_, xi) in &idle[..n] {
            self.remove_xprt(xi, ts);
            self.transports_evicted += 1;
        }
    }

    fn remove_xprt(&mut self, xi: u32, ts: u64) {
        let Some(x) = self.xprts[xi as usize].as_ref() else {
            return;
        };
        if x.queued {
            self.unqueue(xi, ts);
        }
        let x = self.xprts[xi as usize].take().expect("checked above");
        self.xprt_index.remove(&x.key);
        self.xprt_free.push(xi);
        let p = self.peers.get_mut(x.peer);
        p.members -= 1;
        p.connections -= 1;
        p.last_active_ns = ts;
        self.classes.get_mut(x.class).connections -= 1;
    }

    fn enqueue(&mut self, xi: u32, ts: u64) {
        let x = self.xprts[xi as usize].as_mut().expect("live transport");
        // Idempotent: a duplicate or racy enqueue record cannot count twice.
        if x.queued {
            return;
        }
        x.queued = true;
        x.enqueued_ns = ts;
        let (ps, cs) = (x.peer, x.class);
        mark_queued(self.peers.get_mut(ps), &mut self.peer_clock, ts);
        mark_queued(self.classes.get_mut(cs), &mut self.class_clock, ts);
    }

    fn unqueue(&mut self, xi: u32, ts: u64) {
        let x = self.xprts[xi as usize].as_mut().expect("live transport");
        if !x.queued {
            return;
        }
        x.queued = false;
        let (ps, cs) = (x.peer, x.class);
        mark_unqueued(self.peers.get_mut(ps), &mut self.peer_clock, ts);
        mark_unqueued(self.classes.get_mut(cs), &mut self.class_clock, ts);
    }

    fn move_xprt_class(&mut self, xi: u32, new_class: u32, ts: u64) {
        let x = self.xprts[xi as usize].as_ref().expect("live transport");
        let (old, queued) = (x.class, x.queued);
        if old == new_class {
            return;
        }
        if queued {
            mark_unqueued(self.classes.get_mut(old), &mut self.class_clock, ts);
            mark_queued(self.classes.get_mut(new_class), &mut self.class_clock, ts);
        }
        self.classes.get_mut(old).connections -= 1;
        self.classes.get_mut(new_class).connections += 1;
        self.xprts[xi as usize].as_mut().expect("live").class = new_class;
    }

    fn dequeue(&mut self, xi: u32, ts: u64, qtime_ns: Option<u64>, class: Option<u32>) {
        if let Some(word) = class {
            let x = self.xprts[xi as usize].as_ref().expect("live transport");
            if x.kernel_class != Some(word) {
                let peer_key = x.key.peer();
                let cs = self.class_slot_for(&peer_key, Some(word));
                self.move_xprt_class(xi, cs, ts);
                self.xprts[xi as usize].as_mut().expect("live").kernel_class = Some(word);
            }
        }
        // A dequeue of a transport we never saw queued (the agent started
        // mid-queue, or the enqueue record was lost): it was backlogged at
        // this instant, so count it as such for this one dispatch.
        let was_queued = self.xprts[xi as usize].as_ref().expect("live").queued;
        if !was_queued {
            self.enqueue(xi, ts);
        }
        let x = self.xprts[xi as usize].as_mut().expect("live transport");
        x.dispatches += 1;
        let own_wait_ns = was_queued.then(|| ts.saturating_sub(x.enqueued_ns));
        let (ps, cs) = (x.peer, x.class);

        self.peer_clock.v += 1.0 / self.peer_clock.backlogged.max(1) as f64;
        self.class_clock.v += 1.0 / self.class_clock.backlogged.max(1) as f64;
        self.dispatches += 1;

        if let Some(w) = own_wait_ns {
            self.saw_own_wait = true;
            self.own_wait_total.record_us(w / 1000);
        }
        let wait_ns = match qtime_ns {
            Some(q) => {
                self.saw_qtime = true;
                Some(q)
            }
            None => own_wait_ns,
        };
        {
            let p = self.peers.get_mut(ps);
            p.dispatches += 1;
            p.last_active_ns = ts;
            if let Some(w) = wait_ns {
                p.wait_interval.record_us(w / 1000);
            }
        }
        {
            let c = self.classes.get_mut(cs);
            c.dispatches += 1;
            c.last_active_ns = ts;
            if let Some(w) = wait_ns {
                c.wait_interval.record_us(w / 1000);
                c.wait_total.record_us(w / 1000);
            }
        }
        if let Some(w) = wait_ns {
            self.wait_interval.record_us(w / 1000);
            self.wait_total.record_us(w / 1000);
        }
        self.unqueue(xi, ts);
    }

    /// The numbers since the previous snapshot (or since the start). `now_ns`
    /// is on the source clock; `wall_time` is Unix seconds for the output.
    pub fn snapshot(&mut self, now_ns: u64, wall_time: f64, source: &SourceInfo) -> Snapshot {
        let now_ns = now_ns.max(self.last_ts);
        let since = self.last_snapshot_ns.unwrap_or(0);
        let interval_s = now_ns.saturating_sub(since) as f64 / 1e9;
        self.last_snapshot_ns = Some(now_ns);
        let interval_dispatches = self.dispatches - self.prev_dispatches;
        let interval_exec = self.exec_ns - self.prev_exec_ns;
        self.prev_dispatches = self.dispatches;
        self.prev_exec_ns = self.exec_ns;

        let ctx = IntervalCtx {
            now_ns,
            interval_s,
            dispatches: interval_dispatches,
            exec_ns: interval_exec,
        };
        let mut transports: FxHashMap<u32, Vec<TransportStats>> = FxHashMap::default();
        for x in self.xprts.iter().flatten() {
            let list = transports.entry(x.peer).or_default();
            if list.len() < 64 {
                list.push(TransportStats {
                    client: match &self.redactor {
                        Some(r) => r.endpoint_name(&x.key.client),
                        None => x.key.client.to_string(),
                    },
                    server: x.key.server.to_string(),
                    dispatches: x.dispatches,
                    queued: x.queued,
                });
            }
        }
        let (peers, jain_peers) = entity_stats(
            &mut self.peers,
            &self.peer_clock,
            EntityKind::Peer,
            &ctx,
            Some(&mut transports),
        );
        let (classes, jain_classes) = entity_stats(
            &mut self.classes,
            &self.class_clock,
            EntityKind::Class,
            &ctx,
            None,
        );

        let mut source = source.clone();
        if source.wait_source == WaitSource::None {
            source.wait_source = self.wait_source();
        }
        let totals = Totals {
            dispatches: self.dispatches,
            dispatch_rate: rate(interval_dispatches, interval_s),
            backlogged: self.peer_clock.backlogged,
            jain: jain_peers,
            wait_p50_us: self.wait_interval.quantile_us(0.5),
            wait_p99_us: self.wait_interval.quantile_us(0.99),
            events_lost: self.lost.iter().fold(0u64, |a, &b| a.saturating_add(b)),
            backlogged_classes: self.class_clock.backlogged,
            jain_classes,
            peers: self.peers.len() as u64,
            classes: self.classes.len() as u64,
            transports: self.xprt_index.len() as u64,
            peers_evicted: self.peers.evicted,
            transports_evicted: self.transports_evicted,
            events: PerTracepoint(self.events),
            lost_by_tracepoint: PerTracepoint(self.lost),
            exec_seconds: self.exec_ns as f64 / 1e9,
            wait_histogram: self.wait_total.clone(),
            own_wait_histogram: self.own_wait_total.clone(),
            bpf: Vec::new(),
        };
        self.wait_interval.clear();
        Snapshot {
            time: wall_time,
            interval_s,
            source,
            totals,
            peers,
            classes,
        }
    }
}

struct IntervalCtx {
    now_ns: u64,
    interval_s: f64,
    dispatches: u64,
    exec_ns: u64,
}

fn rate(count: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        count as f64 / secs
    } else {
        0.0
    }
}

fn mark_queued(e: &mut Entity, clock: &mut FairClock, ts: u64) {
    e.queued += 1;
    if e.queued == 1 {
        e.v_start = clock.v;
        e.backlog_since_ns = ts;
        clock.backlogged += 1;
    }
    e.last_active_ns = ts;
}

fn mark_unqueued(e: &mut Entity, clock: &mut FairClock, ts: u64) {
    e.queued -= 1;
    if e.queued == 0 {
        e.entitled_done += clock.v - e.v_start;
        e.backlogged_ns += ts.saturating_sub(e.backlog_since_ns);
        clock.backlogged -= 1;
    }
    e.last_active_ns = ts;
}

fn entitled_now(e: &Entity, clock: &FairClock) -> f64 {
    if e.queued > 0 {
        e.entitled_done + (clock.v - e.v_start)
    } else {
        e.entitled_done
    }
}

/// Jain's fairness index of `xs`: (Σx)² / (n·Σx²), 1.0 for fewer than two.
pub fn jain_index(xs: impl IntoIterator<Item = f64>) -> f64 {
    let (mut n, mut sum, mut sq) = (0u64, 0.0, 0.0);
    for x in xs {
        n += 1;
        sum += x;
        sq += x * x;
    }
    if n < 2 || sq == 0.0 {
        return 1.0;
    }
    sum * sum / (n as f64 * sq)
}

fn entity_stats<K: std::hash::Hash + Eq + Clone>(
    table: &mut EntityTable<K>,
    clock: &FairClock,
    kind: EntityKind,
    ctx: &IntervalCtx,
    mut transports: Option<&mut FxHashMap<u32, Vec<TransportStats>>>,
) -> (Vec<EntityStats>, f64) {
    let mut out = Vec::with_capacity(table.len());
    let mut ratios = Vec::new();
    let slots: Vec<u32> = table.iter().map(|(s, _, _)| s).collect();
    for slot in slots {
        let e = table.get_mut(slot);
        let entitled = entitled_now(e, clock);
        let d = e.dispatches - e.prev_dispatches;
        let de = entitled - e.prev_entitled;
        let dexec = e.exec_ns - e.prev_exec_ns;
        let dreq = e.executions.saturating_sub(e.prev_executions);
        let bytes = e.bytes;
        let byte_rates = bytes.map(|b| {
            let r = (
                rate(
                    b.received.saturating_sub(e.prev_bytes.received),
                    ctx.interval_s,
                ),
                rate(b.sent.saturating_sub(e.prev_bytes.sent), ctx.interval_s),
            );
            e.prev_bytes = b;
            r
        });
        e.prev_dispatches = e.dispatches;
        e.prev_entitled = entitled;
        e.prev_exec_ns = e.exec_ns;
        e.prev_executions = e.executions;
        // Tiny residues of floating-point subtraction are not a backlog.
        let fairness = if de > 1e-9 { Some(d as f64 / de) } else { None };
        if let Some(f) = fairness {
            ratios.push(f);
        }
        let backlogged_ns = e.backlogged_ns
            + if e.queued > 0 {
                ctx.now_ns.saturating_sub(e.backlog_since_ns)
            } else {
                0
            };
        let wait_histogram = match kind {
            EntityKind::Peer => e.wait_interval.clone(),
            EntityKind::Class => e.wait_total.clone(),
        };
        let stats = EntityStats {
            name: e.name.clone(),
            kind,
            class: e.class.clone(),
            dispatches: e.dispatches,
            dispatch_rate: rate(d, ctx.interval_s),
            share: if ctx.dispatches > 0 {
                d as f64 / ctx.dispatches as f64
            } else {
                0.0
            },
            entitled,
            fairness,
            wait_p50_us: e.wait_interval.quantile_us(0.5),
            wait_p99_us: e.wait_interval.quantile_us(0.99),
            exec_share: if ctx.exec_ns > 0 {
                dexec as f64 / ctx.exec_ns as f64
            } else {
                0.0
            },
            connections: e.connections,
            netns: e.netns,
            interval_dispatches: d,
            interval_entitled: de.max(0.0),
            fair_share: if ctx.dispatches > 0 {
                de.max(0.0) / ctx.dispatches as f64
            } else {
                0.0
            },
            backlogged: e.queued > 0,
            queued_transports: e.queued as u64,
            exec_seconds: e.exec_ns as f64 / 1e9,
            executions: e.executions,
            requests: e.executions,
            request_rate: rate(dreq, ctx.interval_s),
            bytes_in: bytes.map(|b| b.received),
            bytes_out: bytes.map(|b| b.sent),
            bytes_in_rate: byte_rates.map(|r| r.0),
            bytes_out_rate: byte_rates.map(|r| r.1),
            backlogged_seconds: backlogged_ns as f64 / 1e9,
            wait_histogram,
            transports: transports
                .as_mut()
                .and_then(|t| t.remove(&slot))
                .unwrap_or_default(),
        };
        e.wait_interval.clear();
        out.push(stats);
    }
    out.sort_by(|a, b| {
        b.interval_dispatches
            .cmp(&a.interval_dispatches)
            .then_with(|| a.name.cmp(&b.name))
    });
    (out, jain_index(ratios))
}

#[cfg(test)]
mod tests;
