//! The benchmark's partial pipelines (`--bench-stage`, used by `cargo
//! xtask bench` to split what watching nfsd costs into its parts, each
//! measured in the same run): a source of its own around [`LiveSource`],
//! so that the production `poll` never asks which stage it is in.

use std::path::PathBuf;
use std::time::Duration;

use nfsdtop_common::{RawConfig, Record, Slot, SlotConfig, OFF_NONE};

use super::{bpf, probe, BenchStage, Layout, LiveError, LiveOptions, LiveSource};
use crate::model::{Event, SourceInfo};
use crate::source::{BpfProgramStats, Poll, Source};

/// The live source stopped at a [`BenchStage`].
pub struct BenchSource {
    inner: LiveSource,
    stage: BenchStage,
    /// Records drained and thrown away ([`BenchStage::Discard`]).
    discarded: u64,
}

impl BenchSource {
    pub fn open(opts: &LiveOptions) -> Result<BenchSource, LiveError> {
        let (tracefs, layout) = probe(opts)?;
        BenchSource::start(opts, tracefs, layout, "sunrpc")
    }

    /// As [`LiveSource::start`], then stopped at `opts.stage`.
    pub fn start(
        opts: &LiveOptions,
        tracefs: PathBuf,
        layout: Layout,
        category: &str,
    ) -> Result<BenchSource, LiveError> {
        let mut inner = LiveSource::attached(opts, tracefs, layout, category)?;
        if opts.stage == BenchStage::NoWorkload {
            // As where the kernel's BTF lacks the members: the raw
            // programs read no procedure and no lengths, and the classic
            // records' procedure string goes unread.
            let mut configs = inner.attach.plan.configs;
            for c in &mut configs {
                (c.rq_prog, c.rq_vers, c.rq_proc, c.fold_procs) = (0, 0, 0, 0);
                (c.rq_arg_len, c.rq_res_len) = (0, 0);
            }
            bpf::write_raw_config(&mut inner.ebpf, &configs)?;
            inner.attach.plan.configs = configs;
            inner.attach.layout.procedure_loc = OFF_NONE;
        }
        if opts.stage == BenchStage::Hooked {
            // Every program attached as a user's run attaches them, each
            // returning at its config's lookup: raw ones see `enabled` 0,
            // classic ones count the hit as disabled.
            bpf::write_raw_config(&mut inner.ebpf, &[RawConfig::default(); Slot::COUNT])?;
            bpf::write_config(&mut inner.ebpf, &[SlotConfig::DISABLED; Slot::COUNT])?;
        }
        inner.seed(opts);
        Ok(BenchSource {
            inner,
            stage: opts.stage,
            discarded: 0,
        })
    }

    pub fn stage(&self) -> BenchStage {
        self.stage
    }

    /// Per-slot kernel counters (see [`LiveSource::counts`]).
    pub fn counts(&self) -> [bpf::SlotCounts; Slot::COUNT] {
        self.inner.counts()
    }

    /// Records drained and thrown away undecoded ([`BenchStage::Discard`]).
    pub fn records_discarded(&self) -> u64 {
        self.discarded
    }
}

impl BenchSource {
    fn decodes(&self) -> bool {
        matches!(self.stage, BenchStage::Full | BenchStage::NoWorkload)
    }
}

impl Source for BenchSource {
    fn info(&self) -> SourceInfo {
        let mut info = self.inner.info();
        info.detail.push_str(match self.stage {
            BenchStage::Full => "",
            BenchStage::Hooked => " [benchmark: programs attached but idle]",
            BenchStage::Discard => " [benchmark: records drained and discarded undecoded]",
            BenchStage::NoWorkload => " [benchmark: no procedures or bytes read]",
        });
        info
    }

    fn poll(&mut self, until_ns: u64, out: &mut Vec<Event>) -> anyhow::Result<Poll> {
        if self.decodes() {
            return self.inner.poll(until_ns, out);
        }
        let src = &mut self.inner;
        out.append(&mut src.seeded);
        while let Some(chunk) = src.next_chunk()? {
            self.discarded += (chunk.len() / Record::SIZE) as u64;
            src.drain.recycle(chunk);
        }
        if src.loss.due() {
            // Nothing is decoded, so nothing is known or folded to sweep.
            src.ring_losses(out);
            // Idle programs cannot miss hits worth a hand-over.
            if self.stage != BenchStage::Hooked {
                src.skipped_runs(out);
            }
        }
        Ok(Poll::Pending)
    }

    /// The stages that decode run the source's own clock and order; the
    /// others read nothing, so the kernel's clock now.
    fn now_ns(&self) -> u64 {
        if self.decodes() {
            self.inner.now_ns()
        } else {
            super::host::monotonic_ns()
        }
    }

    fn releases_in_order(&self) -> bool {
        self.decodes() && self.inner.releases_in_order()
    }

    fn recorded_wall_clock(&self, now_ns: u64) -> Option<f64> {
        self.inner.recorded_wall_clock(now_ns)
    }

    fn lag_ns(&self, at_ns: u64) -> Option<u64> {
        self.decodes().then(|| self.inner.lag_ns(at_ns)).flatten()
    }

    fn wait(&mut self, timeout: Duration) {
        self.inner.wait(timeout);
    }

    fn bpf_stats(&self) -> Vec<BpfProgramStats> {
        self.inner.bpf_stats()
    }

    /// Read as in a user's run, so every stage pays for it (and reports
    /// the threads and pools) as the full pipeline does.
    fn nfsd_threads(&self) -> crate::server::NfsdThreads {
        self.inner.nfsd_threads()
    }

    fn nfsd_ports(&self) -> Option<crate::aggregate::services::NfsdPorts> {
        self.inner.nfsd_ports()
    }

    fn is_virtual(&self) -> bool {
        false
    }
}
