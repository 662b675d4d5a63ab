//! The live source: this host's nfsd through BPF programs on the sunrpc
//! tracepoints.
//!
//! Opening it: find tracefs ([`host`]), parse the sunrpc format files
//! ([`format`]) and derive the kernel generation and per-event field
//! layout ([`layout`]), load the BPF object built by agent/build.rs, write
//! the layout into its `CONFIG` map and attach one program per tracepoint
//! ([`bpf`]), seed connections from the socket table ([`seed`]). Running
//! it: a thread drains the ring buffer every few milliseconds; `poll`
//! decodes what arrived ([`decode`]) and turns the kernel's per-CPU loss
//! counters into `Lost` events.

pub mod bpf;
pub mod btf;
pub mod decode;
pub mod doctor;
pub mod error;
pub mod format;
pub mod host;
pub mod layout;
pub mod preempt;
pub mod raw;
pub mod seed;

use std::path::{Path, PathBuf};
use std::sync::mpsc::TryRecvError;
use std::time::{Duration, Instant};

use nfsdtop_common::{slot, RawConfig, Record, RecordView, SlotConfig};

pub use error::LiveError;
pub use layout::{Generation, Layout};
pub use raw::Tracepoints;

use super::{BpfProgramStats, Poll, Source};
use crate::model::{Event, EventKind, SourceInfo, SourceKind, Tracepoint};

/// How to open the live source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveOptions {
    /// tracefs mount point (default: /sys/kernel/tracing, then
    /// /sys/kernel/debug/tracing). Tests point it at fixture trees.
    pub tracefs: Option<PathBuf>,
    /// Ring buffer size in bytes (rounded up to a power of two).
    pub ring_bytes: u32,
    /// Wait this long for nfsd's tracepoints to appear (`--wait`);
    /// `Duration::MAX` waits for ever.
    pub wait_for_nfsd: Option<Duration>,
    /// The longest the ring waits to be drained (the reader drains more
    /// often while records arrive fast; see `bpf::next_wait`).
    pub drain_period: Duration,
    /// Seed connections from the socket table under this /proc.
    pub proc_root: PathBuf,
    /// Turn on the kernel's BPF run-time statistics while attached
    /// (`--bpf-stats`): the per-program run time in the output, at the cost
    /// of two clock reads on every tracepoint hit, so off by default.
    pub kernel_stats: bool,
    /// Raw tracepoints where the kernel's BTF allows (the default), or
    /// every event classic (see `raw`).
    pub tracepoints: Tracepoints,
    /// Where the kernel's BTF is (tests point it elsewhere).
    pub btf_dir: PathBuf,
    /// How much of the pipeline runs: all of it, except for the
    /// benchmark's cost breakdown (see [`BenchStage`]).
    pub stage: BenchStage,
}

/// How far the live source goes, so `cargo xtask bench` can split what
/// watching nfsd costs into its parts, each measured in the same run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BenchStage {
    /// Everything: what users run.
    #[default]
    Full,
    /// The programs attached but returning at their first instruction's
    /// map lookup: what merely hooking these tracepoints costs.
    Hooked,
    /// Records streamed and drained, then thrown away undecoded: the
    /// kernel side and the ring reader without the agent's decoding and
    /// aggregation.
    Discard,
}

impl Default for LiveOptions {
    fn default() -> Self {
        LiveOptions {
            tracefs: None,
            ring_bytes: bpf::DEFAULT_RING_BYTES,
            wait_for_nfsd: None,
            drain_period: bpf::DEFAULT_DRAIN_PERIOD,
            proc_root: PathBuf::from("/proc"),
            kernel_stats: false,
            tracepoints: Tracepoints::Raw,
            btf_dir: PathBuf::from(raw::BTF_DIR),
            stage: BenchStage::Full,
        }
    }
}

/// The tracefs to use, or why there is none. Without tracefs, a host
/// without the sunrpc module is reported as "no nfsd" (the demo fallback
/// applies), a host with it as "mount tracefs".
pub fn locate_tracefs(opts: &LiveOptions) -> Result<PathBuf, LiveError> {
    match host::find_tracefs(opts.tracefs.as_deref()) {
        Some(t) => Ok(t),
        None if opts.tracefs.is_none() && !host::sunrpc_module_present() => {
            Err(LiveError::NoSunrpc {
                detail: "the sunrpc module is not loaded (/sys/module/sunrpc does not exist) and \
                     tracefs is not mounted at /sys/kernel/tracing"
                    .into(),
            })
        }
        None => Err(LiveError::NoTracefs {
            path: opts
                .tracefs
                .clone()
                .unwrap_or_else(|| PathBuf::from(host::TRACEFS_PATHS[0])),
        }),
    }
}

/// Find tracefs and the sunrpc events, waiting for them if asked to.
/// Returns the tracefs path and the layout of this kernel's events.
pub fn probe(opts: &LiveOptions) -> Result<(PathBuf, Layout), LiveError> {
    let deadline = opts.wait_for_nfsd.map(|d| Instant::now().checked_add(d));
    loop {
        let attempt = locate_tracefs(opts).and_then(|t| {
            // On the real tracefs, sunrpc without nfsd is an NFS client:
            // nothing to watch (yet). A tracefs given for tests is taken
            // as it is.
            if opts.tracefs.is_none()
                && host::sunrpc_events_present(&t)
                && !host::nfsd_module_present()
            {
                return Err(LiveError::NoSunrpc {
                    detail: "the sunrpc module is loaded (for the NFS client, perhaps) but nfsd \
                             is not (/sys/module/nfsd does not exist)"
                        .into(),
                });
            }
            Layout::from_tracefs(&t).map(|l| (t, l))
        });
        match attempt {
            Err(e) if e.is_no_nfsd() => match deadline {
                Some(d) if d.is_none_or(|d| Instant::now() < d) => {
                    // Polling for a module to appear: there is no event to
                    // wait on, so check four times a second.
                    std::thread::sleep(Duration::from_millis(250));
                }
                Some(_) => {
                    return Err(LiveError::NoSunrpc {
                        detail: format!(
                            "waited {:.0?} and its tracepoints did not appear",
                            opts.wait_for_nfsd.unwrap_or_default()
                        ),
                    })
                }
                None => return Err(e),
            },
            other => return other,
        }
    }
}

pub struct LiveSource {
    /// The kernel's layout: classic programs' records are read with it.
    layout: Layout,
    /// The raw programs' configs (a slot is raw while its config is
    /// enabled; it goes back to classic when its raw program misses hits)
    /// and the layout their records are read with (`rawrec` offsets).
    raw: raw::RawPlan,
    /// How each event is watched, for the user.
    access: String,
    misses_seen: [u64; slot::COUNT],
    classic_misses_seen: [u64; slot::COUNT],
    raw_links: [Option<RawLink>; slot::COUNT],
    category: String,
    kernel: String,
    tracefs: PathBuf,
    // Field order is drop order: stop the reader before the programs go.
    drain: bpf::Drain,
    counters: bpf::Counters,
    ebpf: aya::Ebpf,
    _stats: Option<std::os::fd::OwnedFd>,
    /// Socket-table connections, delivered by the first poll.
    seeded: Vec<Event>,
    lost_seen: [u64; slot::COUNT],
    last_counters: Option<Instant>,
    /// A chunk `wait` received, for the next `poll`.
    pending: Option<Vec<u8>>,
    /// The raw programs' transports, for their short records.
    known: decode::KnownXprts,
    unknown_seen: [u64; slot::COUNT],
    stage: BenchStage,
    /// Records drained and thrown away ([`BenchStage::Discard`]).
    discarded: u64,
    /// The kernel's per-transport execution totals (see `decode::KnownXprts::sweep`).
    exec_totals: Option<bpf::ExecTotalsMap>,
}

type RawLink = aya::programs::raw_trace_point::RawTracePointLinkId;

/// Configure and attach every slot in use: raw tracepoints where the
/// kernel's BTF allows (see `raw`), classic ones elsewhere or when a raw
/// attach fails. Returns the decoder's layout and a line for the user.
fn attach_all(
    ebpf: &mut aya::Ebpf,
    opts: &LiveOptions,
    layout: &Layout,
    category: &str,
    exec_totals: &Result<bpf::ExecTotalsMap, LiveError>,
) -> Result<(raw::RawPlan, String, [Option<RawLink>; slot::COUNT]), LiveError> {
    let mut plan = if opts.tracepoints == raw::Tracepoints::Classic || category != "sunrpc" {
        raw::RawPlan::none(layout)
    } else if let Some(why) = preempt::Verdict::probe().classic_because() {
        raw::RawPlan::classic(layout, why)
    } else {
        match raw::KernelOffsets::from_sys(&opts.btf_dir) {
            Ok(k) => raw::plan(layout, &k, opts.tracepoints),
            Err(why) => raw::RawPlan::classic(layout, why),
        }
    };
    let mut fold_note = None;
    if let (true, Err(e)) = (plan.folds_exec(), exec_totals) {
        plan.no_folding();
        fold_note = Some(format!(
            "svc_stats_latency sent per request (the kernel's totals cannot be read: {e})"
        ));
    }
    // Raw first: a slot whose raw attach fails goes back to classic.
    let mut links: [Option<RawLink>; slot::COUNT] = Default::default();
    bpf::write_raw_config(ebpf, &plan.configs)?;
    for (s, event) in raw::RAW_SLOTS {
        let i = s as usize;
        if !plan.is_raw(i) {
            continue;
        }
        match bpf::attach_raw(ebpf, i, event) {
            Ok(link) => links[i] = Some(link),
            Err(e) => {
                plan.revert(i, layout, format!("{event}: {e}"));
                bpf::write_raw_config(ebpf, &plan.configs)?;
            }
        }
    }
    // The raw slots' classic fallbacks, verified now rather than during a
    // hand-over under load.
    for (s, _) in raw::RAW_SLOTS {
        if plan.is_raw(s as usize) {
            bpf::load_classic(ebpf, s as usize)?;
        }
    }
    let classic = plan.classic_configs(layout);
    bpf::write_config(ebpf, &classic)?;
    for (i, ev) in layout.events.iter().enumerate() {
        if let (Some(ev), 1) = (ev, classic[i].enabled) {
            bpf::attach_slot(ebpf, i, category, ev)?;
        }
    }
    let raw_events: Vec<&str> = raw::RAW_SLOTS
        .iter()
        .filter(|(s, _)| plan.is_raw(*s as usize))
        .map(|(_, e)| *e)
        .collect();
    let mut access = match (raw_events.is_empty(), opts.tracepoints) {
        (true, raw::Tracepoints::Classic) => "classic tracepoints".to_string(),
        (true, raw::Tracepoints::Raw) => "classic tracepoints (raw ones not possible here)".into(),
        (false, _) => format!(
            "raw tracepoints (BTF offsets) for {} (the default)",
            raw_events.join(", ")
        ),
    };
    if plan.folds_exec() {
        access.push_str("; svc_stats_latency of known transports added up in the kernel");
    }
    if let Some(n) = fold_note {
        access.push_str("; ");
        access.push_str(&n);
    }
    for why in &plan.kept_classic {
        access.push_str("; classic: ");
        access.push_str(why);
    }
    Ok((plan, access, links))
}

/// Runs of program `name` the kernel skipped since `seen` was last
/// updated (None where it does not say).
fn new_misses(ebpf: &aya::Ebpf, name: &str, seen: &mut u64) -> Option<u64> {
    let misses = bpf::recursion_misses(ebpf, name)?;
    let delta = misses.saturating_sub(*seen);
    *seen = misses;
    Some(delta)
}

/// `count` events of slot `s` that never reached the agent.
fn lost_event(now: u64, s: usize, count: u64) -> Event {
    Event {
        ts_ns: now,
        xprt: Default::default(),
        kind: EventKind::Lost {
            tracepoint: slot_tracepoint(s),
            count,
        },
    }
}

/// Slot → model tracepoint (for `Lost` events).
pub fn slot_tracepoint(s: usize) -> Tracepoint {
    match s as u8 {
        slot::ENQUEUE => Tracepoint::Enqueue,
        slot::DEQUEUE => Tracepoint::Dequeue,
        slot::STATS_LATENCY => Tracepoint::StatsLatency,
        slot::ACCEPT => Tracepoint::Accept,
        _ => Tracepoint::Close,
    }
}

impl LiveSource {
    pub fn open(opts: &LiveOptions) -> Result<LiveSource, LiveError> {
        let (tracefs, layout) = probe(opts)?;
        LiveSource::start(opts, tracefs, layout, "sunrpc")
    }

    /// Load, configure and attach for `layout`, whose events are in
    /// tracepoint category `category` ("sunrpc"; tests use others).
    pub fn start(
        opts: &LiveOptions,
        tracefs: PathBuf,
        layout: Layout,
        category: &str,
    ) -> Result<LiveSource, LiveError> {
        let caps = host::Caps::current();
        if !caps.sufficient() {
            return Err(LiveError::Privileges {
                detail: format!("this process lacks {}", caps.missing()),
            });
        }
        let mut ebpf = bpf::open(opts.ring_bytes)?;
        // Kernel run-time statistics per program, where the kernel allows
        // and the user asked (they cost every hit two clock reads).
        let stats = if opts.kernel_stats {
            aya::sys::enable_stats(aya::sys::Stats::RunTime).ok()
        } else {
            None
        };
        let counters = bpf::Counters::take(&mut ebpf)?;
        let drain = bpf::Drain::start(&mut ebpf, opts.drain_period, opts.ring_bytes)?;
        let exec_totals = bpf::ExecTotalsMap::map(&ebpf);
        let (raw, mut access, raw_links) =
            attach_all(&mut ebpf, opts, &layout, category, &exec_totals)?;
        if opts.stage == BenchStage::Hooked {
            // Every program attached as above, each returning at its
            // config's lookup: raw ones see `enabled` 0, classic ones count
            // the hit as disabled.
            bpf::write_raw_config(&mut ebpf, &[RawConfig::default(); slot::COUNT])?;
            bpf::write_config(&mut ebpf, &[SlotConfig::DISABLED; slot::COUNT])?;
            access.push_str(" [benchmark: programs attached but idle]");
        }
        // Seed after attaching: a connection accepted in between is seen
        // twice, which is idempotent; one seen by neither is impossible.
        let seeded = seed::seed(&opts.proc_root, host::monotonic_ns());
        Ok(LiveSource {
            raw,
            layout,
            access,
            misses_seen: [0; slot::COUNT],
            classic_misses_seen: [0; slot::COUNT],
            raw_links,
            category: category.to_string(),
            kernel: host::kernel_release(),
            tracefs,
            drain,
            counters,
            ebpf,
            _stats: stats,
            seeded,
            lost_seen: [0; slot::COUNT],
            last_counters: None,
            pending: None,
            known: decode::KnownXprts::default(),
            unknown_seen: [0; slot::COUNT],
            stage: opts.stage,
            discarded: 0,
            exec_totals: exec_totals.ok(),
        })
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    pub fn tracefs(&self) -> &Path {
        &self.tracefs
    }

    /// Per-slot kernel counters (hits, records, lost, BUSY attempts).
    pub fn counts(&self) -> [bpf::SlotCounts; slot::COUNT] {
        self.counters.read()
    }

    /// Records drained and thrown away undecoded ([`BenchStage::Discard`]).
    pub fn records_discarded(&self) -> u64 {
        self.discarded
    }

    /// The events in a chunk of ring records, in ring order.
    fn decode_chunk(&mut self, chunk: &[u8], out: &mut Vec<Event>) {
        for raw in chunk.chunks_exact(Record::SIZE) {
            let Some(r) = RecordView::new(raw) else {
                continue;
            };
            if r.is_raw() {
                self.known.decode(&r, &self.raw.decode, out);
            } else if let Some(ev) = decode::decode(&r, &self.layout) {
                out.push(ev);
            }
        }
    }

    fn lost_events(&mut self, now: u64, out: &mut Vec<Event>) {
        for (s, c) in self.counters.read().iter().enumerate() {
            let delta = c.lost.saturating_sub(self.lost_seen[s]);
            if delta > 0 {
                self.lost_seen[s] = c.lost;
                out.push(lost_event(now, s, delta));
            }
            // Short records of a transport never sent in full.
            let unknown = self.known.unknown[s] - self.unknown_seen[s];
            if unknown > 0 {
                self.unknown_seen[s] = self.known.unknown[s];
                out.push(lost_event(now, s, unknown));
            }
        }
    }
}

impl LiveSource {
    /// Runs the kernel skipped (`recursion_misses`: the program, or on
    /// classic tracepoints any BPF program, was already running on that
    /// CPU; kernels that preempt tracepoint programs make this happen)
    /// are events nfsdtop never saw: reported as lost, like a full ring.
    /// A raw program that misses hits also hands its slot to the classic
    /// program, which records every hit from then on (one map word, read
    /// by both programs on every hit, decides).
    fn count_skipped_runs(&mut self, now: u64, out: &mut Vec<Event>) {
        let mut missed = 0u64;
        for i in 0..slot::COUNT {
            // The classic program, where it is loaded.
            let seen = &mut self.classic_misses_seen[i];
            if let Some(delta) = new_misses(&self.ebpf, bpf::PROGRAMS[i], seen) {
                if delta > 0 {
                    out.push(lost_event(now, i, delta));
                }
            }
            if let Some(delta) = self.raw_misses(i) {
                if delta > 0 {
                    out.push(lost_event(now, i, delta));
                    missed = missed.saturating_add(delta);
                }
            }
        }
        if missed == 0 {
            return;
        }
        // A kernel that makes one raw program miss makes them all miss:
        // every raw slot goes to its classic tracepoint at once.
        let mut moved = Vec::new();
        for i in 0..slot::COUNT {
            if !self.raw.is_raw(i) {
                continue;
            }
            let event = self.layout.events[i].clone().unwrap_or_default();
            match self.move_to_classic(i, &event) {
                Ok(()) => {
                    // Misses between the reading above and the hand-over:
                    // lost too.
                    if let Some(late) = self.raw_misses(i).filter(|&d| d > 0) {
                        out.push(lost_event(now, i, late));
                        missed = missed.saturating_add(late);
                    }
                    if let Some(link) = self.raw_links[i].take() {
                        let _ = bpf::detach_raw(&mut self.ebpf, i, link);
                    }
                    moved.push(event);
                }
                // The raw program stays attached and owns the slot: its
                // misses go on being counted as lost (the hand-over is
                // tried again at the next miss; the user is told once).
                Err(e) => {
                    let note = format!("; {event}: raw tracepoint misses hits, {e}");
                    if !self.access.contains(&note) {
                        self.access.push_str(&note);
                    }
                }
            }
        }
        if !moved.is_empty() {
            self.access.push_str(&format!(
                "; moved to classic tracepoints: {} (raw ones missed {missed} hits: this \
                 kernel preempts tracepoint programs)",
                moved.join(", ")
            ));
        }
    }

    /// Runs slot `i`'s raw program skipped since the last call (None if it
    /// is not watching through one).
    fn raw_misses(&mut self, i: usize) -> Option<u64> {
        if !self.raw.is_raw(i) && self.raw_links[i].is_none() {
            return None;
        }
        new_misses(&self.ebpf, bpf::RAW_PROGRAMS[i]?, &mut self.misses_seen[i])
    }

    /// Attach slot `i`'s classic program (it yields while the raw one owns
    /// the slot), then flip the slot's owner.
    fn move_to_classic(&mut self, i: usize, event: &str) -> Result<(), LiveError> {
        let mut classic = self.raw.classic_configs(&self.layout);
        classic[i] = self.layout.slots[i];
        bpf::write_config(&mut self.ebpf, &classic)?;
        bpf::attach_slot(&mut self.ebpf, i, &self.category, event)?;
        let mut raw = self.raw.clone();
        raw.hand_over(i);
        bpf::write_raw_config(&mut self.ebpf, &raw.configs)?;
        self.raw = raw;
        Ok(())
    }
}

impl Source for LiveSource {
    fn info(&self) -> SourceInfo {
        let mut detail = format!("tracefs {}; {}", self.tracefs.display(), self.access);
        if self.layout.kernel_class {
            detail.push_str("; kernel classes");
        }
        for n in &self.layout.notes {
            detail.push_str("; ");
            detail.push_str(n);
        }
        SourceInfo {
            kind: SourceKind::Live,
            kernel: self.kernel.clone(),
            generation: self.layout.label(),
            wait_source: self.layout.wait_source(),
            detail,
            host: rustix::system::uname()
                .nodename()
                .to_string_lossy()
                .into_owned(),
        }
    }

    fn poll(&mut self, _until_ns: u64, out: &mut Vec<Event>) -> anyhow::Result<Poll> {
        out.append(&mut self.seeded);
        let discard = self.stage == BenchStage::Discard;
        loop {
            let next = match self.pending.take() {
                Some(c) => Ok(c),
                None => self.drain.try_recv(),
            };
            let chunk = match next {
                Ok(c) => c,
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    anyhow::bail!("the BPF ring buffer reader stopped unexpectedly")
                }
            };
            if discard {
                self.discarded += (chunk.len() / Record::SIZE) as u64;
            } else {
                self.decode_chunk(&chunk, out);
            }
            self.drain.recycle(chunk);
        }
        // Loss counters: a few syscalls, so at most every 100 ms.
        if self
            .last_counters
            .is_none_or(|t| t.elapsed() >= Duration::from_millis(100))
        {
            self.last_counters = Some(Instant::now());
            // After the records decoded above: a claim is swept only once
            // its full record is known.
            if let Some(t) = &self.exec_totals {
                // (Empty with `Discard`: nothing is decoded.)
                if !self.known.is_empty() {
                    self.known.sweep(|i| t.read(i), host::monotonic_ns(), out);
                }
            }
            self.lost_events(host::monotonic_ns(), out);
            if self.stage != BenchStage::Hooked {
                self.count_skipped_runs(host::monotonic_ns(), out);
            }
        }
        Ok(Poll::Pending)
    }

    fn now_ns(&self) -> u64 {
        host::monotonic_ns()
    }

    /// Sleep until the ring reader hands over records, or `timeout`: the
    /// pipeline wakes for data, not on a fixed tick.
    fn wait(&mut self, timeout: Duration) {
        if self.pending.is_none() {
            self.pending = self.drain.recv_timeout(timeout).ok();
        }
    }

    fn bpf_stats(&self) -> Vec<BpfProgramStats> {
        let counts = self.counters.read();
        let mut out = Vec::new();
        for (i, ev) in self.layout.events.iter().enumerate() {
            let Some(ev) = ev else { continue };
            if self.layout.slots[i].enabled == 0 {
                continue;
            }
            let name = match bpf::RAW_PROGRAMS[i] {
                Some(raw) if self.raw.is_raw(i) => raw,
                _ => bpf::PROGRAMS[i],
            };
            let info = self.ebpf.program(name).and_then(|p| p.info().ok());
            let c = counts[i];
            out.push(BpfProgramStats {
                program: ev.clone(),
                hits: c.seen,
                records: c.submitted,
                lost: c.lost,
                busy_dropped: c.busy,
                run_time_ns: info.as_ref().map_or(0, |i| i.run_time().as_nanos() as u64),
                runs: info.as_ref().map_or(0, |i| i.run_count()),
            });
        }
        out
    }

    fn is_virtual(&self) -> bool {
        false
    }
}
