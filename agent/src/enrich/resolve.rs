//! Reverse DNS of the peers' addresses, only when asked (`--resolve`):
//! address → host name through the system resolver (`getnameinfo` with
//! `NI_NAMEREQD`: an address without a name has none, never its numeric
//! form), asynchronously and cached.
//!
//! The snapshot path never waits for a lookup. [`Resolver`] lives with the
//! pipeline and owns the [`Cache`] outright (no lock): a snapshot reads
//! it, and asks for the addresses it lacks (or whose entry is out of date)
//! through a bounded queue that a small fixed pool of threads
//! ([`Options::workers`]) serves. The answers come back on a channel,
//! taken off before each snapshot, the way `crate::enrich::clients` hands its maps
//! over. When the queue is full a request is dropped and counted, never
//! waited for; a lookup that hangs only keeps its thread busy.
//!
//! Names are made printable (`crate::text::printable`): a PTR record
//! can hold anything, a terminal's escapes among it.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::mpsc::{Receiver, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A lookup: the name of `ip`, or `None` (no name, or an error).
pub type LookupFn = Arc<dyn Fn(IpAddr) -> Option<String> + Send + Sync>;

/// The pool, queue and cache sizes and how long answers hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Threads doing lookups.
    pub workers: usize,
    /// Requests waiting for a thread; more are dropped (and counted).
    pub queue: usize,
    /// Addresses cached; the oldest entry goes first.
    pub capacity: usize,
    /// How long a name holds.
    pub ttl_name: Duration,
    /// How long "no name" holds.
    pub ttl_none: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            workers: 2,
            queue: 1024,
            capacity: 100_000,
            ttl_name: Duration::from_secs(600),
            ttl_none: Duration::from_secs(60),
        }
    }
}

/// The system resolver's name for `ip` (`/etc/hosts`, DNS, whatever
/// nsswitch says); `None` where it has none.
pub fn system_lookup(ip: IpAddr) -> Option<String> {
    let name = dns_lookup::lookup_addr(&ip).ok()?;
    // NI_NAMEREQD already refuses the numeric form; be sure of it.
    if name.parse::<IpAddr>().is_ok() {
        return None;
    }
    Some(name)
}

/// What the cache holds for an address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cached<'a> {
    /// Never looked up (or evicted).
    Miss,
    /// Looked up, still within its TTL: the name or `None`.
    Fresh(Option<&'a str>),
    /// Looked up, past its TTL: worth looking up again, shown meanwhile.
    Stale(Option<&'a str>),
}

#[derive(Debug)]
struct Entry {
    name: Option<String>,
    expires: Instant,
    generation: u64,
}

/// Answers by address, with a TTL each and a bound on their number (the
/// oldest inserted goes first). Times are passed in, so tests choose
/// the clock.
#[derive(Debug)]
pub struct Cache {
    entries: HashMap<IpAddr, Entry>,
    /// Insertion order; entries replaced since are skipped (generation).
    order: VecDeque<(u64, IpAddr)>,
    generation: u64,
    capacity: usize,
    ttl_name: Duration,
    ttl_none: Duration,
    /// Entries evicted to stay within `capacity`.
    pub evicted: u64,
}

impl Cache {
    pub fn new(capacity: usize, ttl_name: Duration, ttl_none: Duration) -> Cache {
        Cache {
            entries: HashMap::new(),
            order: VecDeque::new(),
            generation: 0,
            capacity: capacity.max(1),
            ttl_name,
            ttl_none,
            evicted: 0,
        }
    }

    pub fn get(&self, ip: IpAddr, now: Instant) -> Cached<'_> {
        match self.entries.get(&ip.to_canonical()) {
            None => Cached::Miss,
            Some(e) if now < e.expires => Cached::Fresh(e.name.as_deref()),
            Some(e) => Cached::Stale(e.name.as_deref()),
        }
    }

    /// Keep the answer for `ip` found at `now`.
    pub fn insert(&mut self, ip: IpAddr, name: Option<String>, now: Instant) {
        let ip = ip.to_canonical();
        let ttl = if name.is_some() {
            self.ttl_name
        } else {
            self.ttl_none
        };
        self.generation += 1;
        let replaced = self
            .entries
            .insert(
                ip,
                Entry {
                    name,
                    expires: now + ttl,
                    generation: self.generation,
                },
            )
            .is_some();
        self.order.push_back((self.generation, ip));
        if !replaced {
            while self.entries.len() > self.capacity {
                let Some((g, old)) = self.order.pop_front() else {
                    break;
                };
                if self.entries.get(&old).is_some_and(|e| e.generation == g) {
                    self.entries.remove(&old);
                    self.evicted += 1;
                }
            }
        }
        // Replaced entries leave stale places in the order: drop them
        // before the order outgrows the entries by much.
        if self.order.len() > 2 * self.entries.len() + 64 {
            let entries = &self.entries;
            self.order
                .retain(|(g, ip)| entries.get(ip).is_some_and(|e| e.generation == *g));
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The lookups of one pipeline: the cache, the queue to the pool and the
/// answers coming back. Dropping it ends the idle threads (a thread in a
/// lookup ends when the lookup does).
pub struct Resolver {
    cache: Cache,
    requests: SyncSender<IpAddr>,
    answers: Receiver<(IpAddr, Option<String>)>,
    /// Asked and not answered yet: at most the queue plus the pool.
    pending: HashSet<IpAddr>,
    dropped: u64,
}

impl Resolver {
    /// The system resolver, default sizes.
    pub fn system() -> Resolver {
        Resolver::start(Arc::new(system_lookup), Options::default())
    }

    /// `lookup` on `opts.workers` threads of their own.
    pub fn start(lookup: LookupFn, opts: Options) -> Resolver {
        let (requests, queue) = std::sync::mpsc::sync_channel::<IpAddr>(opts.queue.max(1));
        let (tx, answers) = std::sync::mpsc::channel();
        let queue = Arc::new(Mutex::new(queue));
        for i in 0..opts.workers.max(1) {
            let (queue, tx, lookup) = (queue.clone(), tx.clone(), lookup.clone());
            let spawned = std::thread::Builder::new()
                .name(format!("resolve-{i}"))
                .spawn(move || work(&queue, &tx, &*lookup));
            // Fewer threads, or none: names come slower, or not at all.
            if let Err(e) = spawned {
                eprintln!("nfsdtop: cannot start a host name lookup thread: {e}");
            }
        }
        Resolver {
            cache: Cache::new(opts.capacity, opts.ttl_name, opts.ttl_none),
            requests,
            answers,
            pending: HashSet::new(),
            dropped: 0,
        }
    }

    /// Take the answers that came in since (never waits); how many.
    pub fn collect(&mut self) -> usize {
        let mut n = 0;
        while let Ok(answer) = self.answers.try_recv() {
            self.keep(answer);
            n += 1;
        }
        n
    }

    /// Wait up to `timeout` for an answer, then take all there are
    /// (tests; the pipeline never waits).
    pub fn collect_waiting(&mut self, timeout: Duration) -> usize {
        match self.answers.recv_timeout(timeout) {
            Ok(answer) => {
                self.keep(answer);
                1 + self.collect()
            }
            Err(_) => 0,
        }
    }

    fn keep(&mut self, (ip, name): (IpAddr, Option<String>)) {
        self.pending.remove(&ip);
        let name = name
            .map(|n| crate::text::printable(&n))
            .filter(|n| !n.is_empty());
        self.cache.insert(ip, name, Instant::now());
    }

    /// The name of `ip` as far as known now; asks for it (or for a fresh
    /// answer) without waiting, if not asked already.
    pub fn hostname(&mut self, ip: IpAddr) -> Option<String> {
        let ip = ip.to_canonical();
        let (name, ask) = match self.cache.get(ip, Instant::now()) {
            Cached::Fresh(n) => (n.map(str::to_string), false),
            Cached::Stale(n) => (n.map(str::to_string), true),
            Cached::Miss => (None, true),
        };
        if ask && !self.pending.contains(&ip) {
            match self.requests.try_send(ip) {
                Ok(()) => {
                    self.pending.insert(ip);
                }
                Err(TrySendError::Full(_)) => self.dropped += 1,
                Err(TrySendError::Disconnected(_)) => {}
            }
        }
        name
    }

    /// Requests dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    pub fn cache(&self) -> &Cache {
        &self.cache
    }
}

fn work(
    queue: &Mutex<Receiver<IpAddr>>,
    answers: &Sender<(IpAddr, Option<String>)>,
    lookup: &(dyn Fn(IpAddr) -> Option<String> + Send + Sync),
) {
    loop {
        // The lock is held while waiting for a request only, never during
        // a lookup; the producer never takes it.
        let next = match queue.lock() {
            Ok(q) => q.recv(),
            Err(_) => return,
        };
        let Ok(ip) = next else {
            return;
        };
        if answers.send((ip, lookup(ip))).is_err() {
            return;
        }
    }
}

#[cfg(test)]
#[path = "resolve_tests.rs"]
mod tests;
