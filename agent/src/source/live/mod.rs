//! The live source: this host's nfsd through BPF programs on the sunrpc
//! tracepoints, by lifecycle.
//!
//! Opening it: find tracefs and this kernel's event layout ([`probe`],
//! [`host`], [`format`], [`layout`]), load the BPF object built by
//! agent/build.rs ([`bpf`]), decide which slots go on raw tracepoints and
//! attach ([`attach`], [`raw`], [`btf`]), seed connections from the socket
//! table ([`seed`]). Running it: a thread drains the ring buffer
//! ([`drain`]); `poll` decodes what arrived ([`decode`]), turns the
//! kernel's loss counters and skipped runs into `Lost` events ([`loss`])
//! and hands raw slots over to classic tracepoints when the kernel makes
//! raw programs miss hits ([`attach`]). What it watches, and how, is a
//! typed report ([`report`]). The benchmark's partial pipelines are a
//! source of their own ([`bench`]). This file owns the options and the
//! source that ties these together.

pub mod attach;
pub mod bench;
pub mod bpf;
pub mod btf;
pub mod decode;
pub mod doctor;
pub mod drain;
pub mod error;
pub mod format;
pub mod host;
pub mod intake;
pub mod layout;
pub mod loss;
pub mod mapped;
pub mod nfs4ops;
pub mod options;
pub mod pools;
pub mod preempt;
pub mod probe;
pub mod procs;
pub mod raw;
pub mod rebuild;
pub mod report;
pub mod seed;
pub mod threads;
pub mod typed;

use std::path::{Path, PathBuf};
use std::sync::mpsc::TryRecvError;
use std::time::Duration;

use nfsdtop_common::{Record, RecordView, Slot};

pub use bench::BenchSource;
pub use error::LiveError;
pub use layout::{Generation, Layout};
pub use options::{BenchStage, LiveOptions};
pub use probe::{locate_tracefs, probe};
pub use raw::Tracepoints;
pub use report::{AccessReport, HandOver};

use super::{BpfProgramStats, Poll, Source};
use crate::model::{Event, SourceInfo, SourceKind};

/// Open the live source `opts` ask for: [`LiveSource`], or for a
/// benchmark stage the [`BenchSource`] that stops where it says.
pub fn open(opts: &LiveOptions) -> Result<Box<dyn Source>, LiveError> {
    Ok(match opts.stage {
        BenchStage::Full => Box::new(LiveSource::open(opts)?),
        _ => Box::new(BenchSource::open(opts)?),
    })
}

pub struct LiveSource {
    attach: attach::Attachment,
    loss: loss::Loss,
    /// The raw programs' transports, for their short records.
    known: decode::KnownXprts,
    kernel: String,
    tracefs: PathBuf,
    // Field order is drop order: stop the reader before the programs go.
    drain: drain::Drain,
    counters: bpf::Counters,
    ebpf: aya::Ebpf,
    _stats: Option<std::os::fd::OwnedFd>,
    /// Socket-table connections, delivered by the first poll.
    seeded: Vec<Event>,
    /// A chunk `wait` received, for the next `poll`.
    pending: Option<Vec<u8>>,
    /// The kernel's per-transport execution totals (see `decode::KnownXprts::sweep`).
    exec_totals: Option<bpf::ExecTotalsMap>,
    /// The kernel's per-pool execution totals, where folded.
    pool_totals: Option<pools::PoolTotalsMap>,
    /// How far the kernel's records have been read and, without enqueue
    /// hooks, the decoded events held and reordered.
    intake: intake::Intake,
    decoded: Vec<Event>,
    /// NFSv4 operations counted (`--nfs4-ops`), or why they are not.
    nfs4ops: Option<Result<nfs4ops::Nfs4Ops, String>>,
    /// nfsd's threads as they come and go, where they do (7.0+).
    threads: Option<Result<threads::Threads, String>>,
    /// Known transports forgotten after missed lifecycle hits.
    forgotten: Forgotten,
}

/// What [`LiveSource::forget_known_transports`] did, for `source.detail`.
#[derive(Default)]
struct Forgotten {
    times: u64,
    entries: u64,
    /// The last failure to write the table.
    failed: Option<String>,
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
        let mut src = LiveSource::attached(opts, tracefs, layout, category)?;
        src.seed(opts);
        Ok(src)
    }

    /// Seed connections from the socket table, for the first poll. After
    /// attaching: a connection accepted in between is seen twice, which
    /// is idempotent; one seen by neither is impossible.
    fn seed(&mut self, opts: &LiveOptions) {
        self.seeded = seed::seed(&opts.proc_root, host::monotonic_ns());
    }

    /// [`LiveSource::start`] without the seeding.
    fn attached(
        opts: &LiveOptions,
        tracefs: PathBuf,
        mut layout: Layout,
        category: &str,
    ) -> Result<LiveSource, LiveError> {
        let dequeues_only = category == "sunrpc" && layout.qtime && !opts.enqueue_hooks;
        if dequeues_only {
            layout.unhook(Slot::Enqueue);
        }
        let caps = host::Caps::current();
        if !caps.sufficient() {
            return Err(LiveError::Privileges {
                detail: format!("this process lacks {}", caps.missing()),
            });
        }
        let typed_offsets = raw::KernelOffsets::from_sys(&opts.btf_dir)
            .map(|k| typed::offsets(&k))
            .unwrap_or_default();
        // Chosen before the object is opened: it sizes a map.
        let plan = attach::choose_plan(opts, &layout, category);
        let hosting = if Slot::ALL.iter().any(|&s| plan.is_twinned(s)) {
            bpf::Hosting::Twinned
        } else {
            bpf::Hosting::None
        };
        let mut ebpf = bpf::open(opts.ring_bytes, typed_offsets, hosting)?;
        // Before any map is taken out of the object (see typed::prepare).
        let typed_program = typed::prepare(&ebpf, bpf::OBJECT, typed_offsets, &opts.btf_dir);
        // Kernel run-time statistics per program, where the kernel allows
        // and the user asked (they cost every hit two clock reads).
        let stats = if opts.kernel_stats {
            aya::sys::enable_stats(aya::sys::Stats::RunTime).ok()
        } else {
            None
        };
        let counters = bpf::Counters::map(&ebpf)?;
        let drain = drain::Drain::start(&mut ebpf, opts.drain_period, opts.ring_bytes)?;
        let intake = intake::Intake::new(dequeues_only, drain.caught_up_ns());
        let exec_totals = bpf::ExecTotalsMap::map(&ebpf);
        let (pool_totals, pools_note) = Self::fold_pools(&mut ebpf, opts, category)?;
        let mut attach = attach::Attachment::attach(
            &mut ebpf,
            opts,
            layout,
            plan,
            category,
            exec_totals.as_ref().err(),
            typed_program,
        )?;
        attach.report.pools = pools_note;
        attach.report.dequeues_only = dequeues_only;
        let nfs4ops = (opts.nfs4_ops && category == "sunrpc").then(|| {
            nfs4ops::Nfs4Ops::attach(&mut ebpf, &opts.btf_dir).map_err(|e| nfs4ops::not_counted(&e))
        });
        let threads = (category == "sunrpc")
            .then(|| threads::Threads::attach(&mut ebpf, &tracefs, &opts.proc_root))
            .flatten();
        let mut known = decode::KnownXprts::default();
        if attach.plan.decode_folds_procedures() {
            // Unmapped, every request's procedure comes in its record.
            if let Ok(rows) = procs::map_rows(&ebpf) {
                known.procs.set_memory(rows);
            }
        }
        Ok(LiveSource {
            attach,
            loss: loss::Loss::default(),
            known,
            kernel: host::kernel_release(),
            tracefs,
            drain,
            counters,
            ebpf,
            _stats: stats,
            seeded: Vec::new(),
            pending: None,
            exec_totals: exec_totals.ok(),
            pool_totals,
            intake,
            decoded: Vec::new(),
            nfs4ops,
            threads,
            forgotten: Forgotten::default(),
        })
    }

    /// Sets the programs folding execution time per thread pool where
    /// nfsd has several (see [`pools`]); the mapped totals, and what to
    /// tell the user.
    fn fold_pools(
        ebpf: &mut aya::Ebpf,
        opts: &LiveOptions,
        category: &str,
    ) -> Result<(Option<pools::PoolTotalsMap>, String), LiveError> {
        if category != "sunrpc" {
            return Ok((None, String::new()));
        }
        let threads = crate::server::read_proc(Path::new(crate::server::PROC_NFSD));
        let (cfg, note) = pools::plan(&opts.btf_dir, threads.pools);
        if cfg.enabled == 0 {
            return Ok((None, note));
        }
        match pools::PoolTotalsMap::map(ebpf) {
            Ok(m) => {
                bpf::write_pool_config(ebpf, cfg)?;
                Ok((Some(m), note))
            }
            Err(e) => Ok((None, format!("busy threads per pool not measured: {e}"))),
        }
    }

    pub fn layout(&self) -> &Layout {
        &self.attach.layout
    }

    pub fn tracefs(&self) -> &Path {
        &self.tracefs
    }

    /// How each event is watched (see [`AccessReport`]).
    pub fn report(&self) -> &AccessReport {
        &self.attach.report
    }

    /// Per-slot kernel counters (hits, records, lost, BUSY attempts).
    pub fn counts(&self) -> [bpf::SlotCounts; Slot::COUNT] {
        self.counters.read()
    }

    /// The next chunk of ring records, if one is waiting.
    fn next_chunk(&mut self) -> anyhow::Result<Option<Vec<u8>>> {
        if let Some(c) = self.pending.take() {
            return Ok(Some(c));
        }
        match self.drain.try_recv() {
            Ok(c) => Ok(Some(c)),
            Err(TryRecvError::Empty) => Ok(None),
            Err(TryRecvError::Disconnected) => {
                anyhow::bail!("the BPF ring buffer reader stopped unexpectedly")
            }
        }
    }

    /// The events in a chunk of ring records, in ring order.
    fn decode_chunk(&mut self, chunk: &[u8], out: &mut Vec<Event>) {
        for raw in chunk.chunks_exact(Record::SIZE) {
            let Some(r) = RecordView::new(raw) else {
                continue;
            };
            if r.raw_kind() == nfsdtop_common::nfs4ops::RECORD_KIND {
                nfs4ops::decode(&r, out);
            } else if r.raw_kind() == nfsdtop_common::threads::RECORD_KIND {
                if let Some(Ok(t)) = &self.threads {
                    t.take(&r);
                }
            } else if r.is_raw() {
                self.known.decode(&r, &self.attach.plan.decode, out);
            } else if let Some(mut ev) = decode::decode(&r, &self.attach.layout) {
                decode::name_procedure(&r, &self.attach.layout, &mut ev);
                out.push(ev);
            }
        }
    }

    /// Execution times folded in the kernel that grew since the last
    /// sweep (after the records decoded before it: a claim is swept only
    /// once its full record is known).
    fn sweep_exec_totals(&mut self, out: &mut Vec<Event>) {
        if let Some(t) = &self.exec_totals {
            if !self.known.is_empty() {
                self.known.sweep(
                    |i| t.read(i),
                    &self.attach.plan.decode,
                    host::monotonic_ns(),
                    out,
                );
            }
            self.known
                .procs
                .sweep(|i| t.claim(i), host::monotonic_ns(), out);
        }
    }

    /// Claim the kernel's procedure rows for the transports just decoded.
    fn claim_proc_rows(&mut self, out: &mut Vec<Event>) {
        if let Some(t) = &self.exec_totals {
            self.known
                .procs
                .claim(|i| t.claim(i), host::monotonic_ns(), out);
        }
    }

    /// Records the ring could not take, and short records of transports
    /// never sent in full, as `Lost` events.
    fn ring_losses(&mut self, out: &mut Vec<Event>) {
        let counts = self.counters.read();
        self.loss
            .ring(&counts, &self.known.unknown, host::monotonic_ns(), out);
    }

    /// Runs the kernel skipped are events nfsdtop never saw: reported as
    /// lost, like a full ring; a twinned slot's misses only where its
    /// rescue program did not do them (`nfsdtop_common::twin`). A raw
    /// program that misses hits also hands the raw slots over to their
    /// classic programs, unless they run on a kernel known to preempt them
    /// (twinned, or kept raw with `--keep-raw-tracepoints`).
    fn skipped_runs(&mut self, out: &mut Vec<Event>) {
        let now = host::monotonic_ns();
        let mut missed = [0u64; Slot::COUNT];
        // The kernel's misses before the rescues: a rescue follows its
        // miss, so none counted here is rescued unseen (a rescue of a
        // later miss only makes this poll's loss low until the next).
        let misses: [Option<u64>; Slot::COUNT] = std::array::from_fn(|i| {
            let s = Slot::ALL[i];
            self.attach
                .watching_raw(s)
                .then(|| self.attach.raw_recursion_misses(&self.ebpf, s))
                .flatten()
        });
        let counts = self.counters.read();
        for s in Slot::ALL {
            self.loss.classic_misses(&self.ebpf, s, now, out);
            if self.attach.watching_raw(s) {
                let mut misses = misses[s as usize];
                if self.attach.plan.is_twinned(s) {
                    misses = misses.map(|m| m.saturating_sub(counts[s as usize].rescued));
                }
                missed[s as usize] = self.loss.raw_misses(misses, s, now, out);
            }
        }
        let preempts = self.attach.plan.kept_raw || self.attach.plan.twinned.is_some();
        let respond = loss::respond_to_misses(&missed, preempts);
        if respond.hand_over {
            let total = missed.iter().fold(0u64, |a, &m| a.saturating_add(m));
            self.attach
                .hand_over_all(&mut self.ebpf, &mut self.loss, total, now, out);
        }
        if respond.forget_known {
            self.forget_known_transports();
        }
    }

    /// A raw svc_xprt_free or svc_xprt_accept hit was missed: every
    /// transport the raw programs know sends a full record again (see
    /// `bpf::forget_known`), so a freed pointer reused since is learnt
    /// afresh by the next poll instead of standing for the old transport
    /// for as long as the new one lives.
    fn forget_known_transports(&mut self) {
        match bpf::forget_known(&mut self.ebpf, self.known.pointers()) {
            Ok(n) => {
                self.forgotten.times += 1;
                self.forgotten.entries += n as u64;
            }
            Err(e) => self.forgotten.failed = Some(e.to_string()),
        }
    }
}

impl Source for LiveSource {
    fn nfsd_ports(&self) -> Option<crate::aggregate::services::NfsdPorts> {
        crate::server::read_proc(Path::new(crate::server::PROC_NFSD)).ports
    }

    fn nfsd_threads(&self) -> crate::server::NfsdThreads {
        let mut t = crate::server::read_proc(Path::new(crate::server::PROC_NFSD));
        if let (Some(m), Some(n)) = (&self.pool_totals, t.pools) {
            let (each, unattributed) = m.read(n);
            t.pool_exec_seconds = Some(each.iter().map(|e| e.0).collect());
            t.pool_requests = Some(each.iter().map(|e| e.1).collect());
            t.unattributed_exec_seconds = unattributed;
        }
        if let Some(Ok(ops)) = &self.nfs4ops {
            let (counted, lost) = ops.counts();
            let skipped = nfs4ops::Nfs4Ops::skipped(&self.ebpf);
            t.nfs4_operations = Some(crate::model::OperationTotals {
                counted,
                lost: lost.saturating_add(skipped),
            });
        }
        if let Some(Ok(threads)) = &self.threads {
            t.running = threads.read();
        }
        t
    }

    fn info(&self) -> SourceInfo {
        let layout = &self.attach.layout;
        let mut detail = format!("tracefs {}; {}", self.tracefs.display(), self.attach.report);
        if layout.kernel_class {
            detail.push_str("; kernel classes");
        }
        for n in &layout.notes {
            detail.push_str("; ");
            detail.push_str(n);
        }
        match &self.nfs4ops {
            Some(Ok(_)) => {
                detail.push_str("; NFSv4 operations counted (nfsd_compound, nfsd_compound_status)")
            }
            Some(Err(why)) => {
                detail.push_str("; ");
                detail.push_str(why);
            }
            None => {}
        }
        match &self.threads {
            Some(Ok(_)) => detail.push_str(
                "; threads that come and go from nfsd_dynthread_start, nfsd_dynthread_kill",
            ),
            Some(Err(why)) => {
                detail.push_str("; ");
                detail.push_str(why);
            }
            None => {}
        }
        let f = &self.forgotten;
        if f.times > 0 {
            detail.push_str(&format!(
                "; known transports sent in full again {} times ({} entries) after missed svc_xprt_free or svc_xprt_accept hits",
                f.times, f.entries
            ));
        }
        if let Some(why) = &f.failed {
            detail.push_str(&format!("; known transports not forgotten: {why}"));
        }
        if !self.attach.report.twinned.is_empty() {
            let counts = self.counters.read();
            let rescued: Vec<String> = self
                .attach
                .report
                .twinned
                .iter()
                .map(|&s| format!("{} {}", s.name(), counts[s as usize].rescued))
                .collect();
            detail.push_str(&format!("; hits rescued: {}", rescued.join(", ")));
        }
        self.intake.describe(&mut detail);
        SourceInfo {
            kind: SourceKind::Live,
            kernel: self.kernel.clone(),
            generation: layout.label(),
            wait_source: layout.wait_source(),
            detail,
            host: rustix::system::uname()
                .nodename()
                .to_string_lossy()
                .into_owned(),
        }
    }

    fn poll(&mut self, until_ns: u64, out: &mut Vec<Event>) -> anyhow::Result<Poll> {
        // Before the chunks are taken: it holds for what they bring.
        let caught_up = self.drain.caught_up_ns();
        // Decoded straight into `out`, or first into the reorder buffer.
        let mut decoded = std::mem::take(&mut self.decoded);
        let to = if self.intake.reorders() {
            &mut decoded
        } else {
            &mut *out
        };
        to.append(&mut self.seeded);
        let read_from = to.len();
        while let Some(chunk) = self.next_chunk()? {
            self.decode_chunk(&chunk, to);
            self.drain.recycle(chunk);
        }
        self.intake
            .read(&to[read_from..], caught_up, host::monotonic_ns());
        self.claim_proc_rows(to);
        if self.loss.due() {
            self.sweep_exec_totals(to);
            self.ring_losses(to);
            self.skipped_runs(to);
        }
        self.intake.release(&mut decoded, until_ns, out);
        self.decoded = decoded;
        Ok(Poll::Pending)
    }

    /// With the reorder buffer, the time up to which events can be
    /// released (one window behind the frontier): snapshots are cut on
    /// it, so one of a late agent covers what it would have covered on
    /// time. Otherwise the kernel's clock now.
    fn now_ns(&self) -> u64 {
        self.intake.clock_ns(host::monotonic_ns())
    }

    fn releases_in_order(&self) -> bool {
        self.intake.reorders()
    }

    fn recorded_wall_clock(&self, now_ns: u64) -> Option<f64> {
        let behind = host::monotonic_ns().saturating_sub(now_ns) as f64 / 1e9;
        Some(crate::source::unix_now() - behind)
    }

    fn lag_ns(&self, at_ns: u64) -> Option<u64> {
        Some(self.intake.lag_ns(at_ns, host::monotonic_ns()))
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
        let layout = &self.attach.layout;
        let mut out = Vec::new();
        for s in Slot::ALL {
            let i = s as usize;
            let Some(ev) = &layout.events[i] else {
                continue;
            };
            if layout.slots[i].enabled == 0 {
                continue;
            }
            let run = self.attach.run_stats(&self.ebpf, s);
            let c = counts[i];
            out.push(BpfProgramStats {
                program: ev.clone(),
                hits: c.seen,
                records: c.submitted,
                lost: c.lost,
                busy_dropped: c.busy,
                run_time_ns: run.map_or(0, |r| r.0),
                runs: run.map_or(0, |r| r.1),
            });
        }
        out
    }

    fn is_virtual(&self) -> bool {
        false
    }
}
