//! The attach plan and the hand-over: which slots go on raw tracepoints
//! and which on classic ones ([`choose_plan`], the one place that
//! decides), configuring and attaching the programs accordingly, and, while
//! running, moving raw slots to their classic tracepoints when the kernel
//! makes raw programs miss hits.

use nfsdtop_common::Slot;

use super::error::LiveError;
use super::layout::Layout;
use super::loss::Loss;
use super::raw::{self, KernelOffsets, RawPlan, Tracepoints};
use super::report::{AccessReport, HandOver};
use super::{bpf, typed, LiveOptions};
use crate::model::Event;

/// How a raw slot's program is attached.
#[derive(Debug)]
enum RawLink {
    /// The raw program, attached by aya.
    Raw(aya::programs::raw_trace_point::RawTracePointLinkId),
    /// The typed svc_stats_latency program (see [`typed`]); dropping
    /// it detaches it.
    Typed(typed::TypedLink),
}

/// Which slots go raw, before anything is attached: none with
/// `--classic-tracepoints` or off the sunrpc category (tests), else those
/// the kernel's BTF allows (see [`raw::plan`]).
pub fn choose_plan(opts: &LiveOptions, layout: &Layout, category: &str) -> RawPlan {
    if opts.tracepoints == Tracepoints::Classic || category != "sunrpc" {
        return RawPlan::none(layout);
    }
    // Where raw programs can be preempted into skipped hits, twin programs
    // rescue them (or, asked to keep them, they are counted as lost).
    let preempted = super::preempt::Verdict::probe().classic_because();
    plan_for(
        opts,
        layout,
        KernelOffsets::from_sys(&opts.btf_dir),
        preempted,
    )
}

/// [`choose_plan`] once the kernel's offsets and whether it can preempt
/// raw programs (`preempted`: why, if it can) are known.
pub(super) fn plan_for(
    opts: &LiveOptions,
    layout: &Layout,
    offsets: Result<KernelOffsets, String>,
    preempted: Option<String>,
) -> RawPlan {
    match (offsets, preempted) {
        (Ok(k), Some(_)) if opts.keep_raw => RawPlan {
            kept_raw: true,
            ..raw::plan(layout, &k, opts.tracepoints)
        },
        (Ok(k), Some(why)) => RawPlan::twinned(layout, &k, why),
        (Ok(k), None) => raw::plan(layout, &k, opts.tracepoints),
        (Err(_), Some(why)) | (Err(why), None) => RawPlan::classic(layout, why),
    }
}

/// The programs as attached: which slot records through which program.
pub struct Attachment {
    /// The kernel's layout: classic programs' records are read with it.
    pub layout: Layout,
    /// The raw programs' configs (a slot is raw while its config is
    /// enabled; it goes back to classic when its raw program misses hits)
    /// and the layout their records are read with (`rawrec` offsets).
    pub plan: RawPlan,
    links: [Option<RawLink>; Slot::COUNT],
    category: String,
    pub report: AccessReport,
}

impl Attachment {
    /// Configure and attach every slot in use as `plan` (from
    /// [`choose_plan`]) says, a slot whose raw attach fails on its classic
    /// tracepoint.
    /// `exec_totals`: why the kernel's execution totals cannot be read,
    /// if they cannot (then nothing is folded).
    pub fn attach(
        ebpf: &mut aya::Ebpf,
        opts: &LiveOptions,
        layout: Layout,
        mut plan: RawPlan,
        category: &str,
        exec_totals: Option<&LiveError>,
        typed: Result<typed::Prepared, String>,
    ) -> Result<Attachment, LiveError> {
        let mut report = AccessReport {
            asked: opts.tracepoints,
            ..AccessReport::default()
        };
        if let (true, Some(e)) = (plan.folds_exec(), exec_totals) {
            plan.no_folding();
            report.fold_unavailable = Some(e.to_string());
        }
        // Raw first: a slot whose raw attach fails goes back to classic.
        let mut links: [Option<RawLink>; Slot::COUNT] = Default::default();
        // Rescue programs verified before their slots' programs attach:
        // between the two attaches the first's skipped hits are lost, so
        // that moment must be one call, not a verification.
        let twinned: Vec<Slot> = raw::attach_order()
            .filter(|&s| plan.is_twinned(s))
            .collect();
        for s in twinned {
            if let Err(e) =
                raw::rescue_program_name(s).map_or(Ok(()), |name| bpf::load_raw_named(ebpf, name))
            {
                plan.revert(s, &layout, format!("{}: {e}", s.name()));
            }
        }
        bpf::write_raw_config(ebpf, &plan.configs)?;
        for s in raw::attach_order() {
            if !plan.is_raw(s) {
                continue;
            }
            let mut attached = false;
            if typed::program_name(s).is_some() {
                match attach_typed(&typed, s, opts) {
                    Ok(link) => {
                        links[s as usize] = Some(RawLink::Typed(link));
                        report.typed.push((s, Ok(())));
                        attached = true;
                    }
                    Err(why) => report.typed.push((s, Err(why))),
                }
            }
            if !attached {
                match bpf::attach_raw(ebpf, s, s.name()) {
                    Ok(link) => links[s as usize] = Some(RawLink::Raw(link)),
                    Err(e) => {
                        plan.revert(s, &layout, format!("{}: {e}", s.name()));
                        bpf::write_raw_config(ebpf, &plan.configs)?;
                        continue;
                    }
                }
            }
            if plan.is_twinned(s) {
                // After the slot's own program: the kernel runs them in
                // that order on every hit.
                if let Err(e) = attach_rescue(ebpf, s) {
                    // Without its twin, the program would lose the hits
                    // the kernel skips: the slot goes classic.
                    if let Some(link) = links[s as usize].take() {
                        detach(ebpf, s, link);
                    }
                    plan.revert(s, &layout, format!("{}: {e}", s.name()));
                    bpf::write_raw_config(ebpf, &plan.configs)?;
                }
            }
        }
        // The raw slots' classic fallbacks, verified now rather than
        // during a hand-over under load.
        for s in raw::attach_order() {
            if plan.is_raw(s) {
                bpf::load_classic(ebpf, s)?;
            }
        }
        let classic = plan.classic_configs(&layout);
        bpf::write_config(ebpf, &classic)?;
        for s in Slot::ALL {
            if let (Some(ev), 1) = (&layout.events[s as usize], classic[s as usize].enabled) {
                bpf::attach_slot(ebpf, s, category, ev)?;
            }
        }
        report.raw = raw::attach_order().filter(|&s| plan.is_raw(s)).collect();
        report.folds_exec = plan.folds_exec();
        report.measures_bytes = plan.measures_bytes();
        report.measures_depth = plan.measures_depth();
        report.measures_procedures = plan.measures_procedures();
        report.record_procedures = layout.procedure_loc != nfsdtop_common::OFF_NONE;
        report.kept_classic = plan.kept_classic.clone();
        report.kept_raw = plan.kept_raw && !report.raw.is_empty();
        report.twinned = raw::attach_order()
            .filter(|&s| plan.is_twinned(s))
            .collect();
        Ok(Attachment {
            layout,
            plan,
            links,
            category: category.to_string(),
            report,
        })
    }

    /// Whether slot `s`'s raw program is attached (it may have handed
    /// the slot over, and still run until detached).
    pub fn watching_raw(&self, s: Slot) -> bool {
        self.plan.is_raw(s) || self.links[s as usize].is_some()
    }

    /// The program that records slot `s` now.
    pub fn program(&self, s: Slot) -> &'static str {
        match (bpf::raw_program_name(s), &self.links[s as usize]) {
            (Some(raw), Some(RawLink::Typed(_))) if self.plan.is_raw(s) => {
                typed::program_name(s).unwrap_or(raw)
            }
            (Some(raw), _) if self.plan.is_raw(s) => raw,
            _ => s.info().program,
        }
    }

    /// The kernel's run time (ns) and run count of the program that
    /// records slot `s` now, where it keeps them (`kernel.bpf_stats_enabled`).
    pub fn run_stats(&self, ebpf: &aya::Ebpf, s: Slot) -> Option<(u64, u64)> {
        if let (true, Some(RawLink::Typed(t))) = (self.plan.is_raw(s), &self.links[s as usize]) {
            let fd = t.prog_fd();
            return Some((bpf::fdinfo(fd, "run_time_ns")?, bpf::fdinfo(fd, "run_cnt")?));
        }
        let info = ebpf.program(self.program(s))?.info().ok()?;
        Some((info.run_time().as_nanos() as u64, info.run_count()))
    }

    /// Runs slot `s`'s raw (or typed) program's kernel skipped, in all
    /// (`recursion_misses`; None where the kernel does not say).
    pub fn raw_recursion_misses(&self, ebpf: &aya::Ebpf, s: Slot) -> Option<u64> {
        match &self.links[s as usize] {
            Some(RawLink::Typed(t)) => bpf::fd_recursion_misses(t.prog_fd()),
            _ => bpf::recursion_misses(ebpf, bpf::raw_program_name(s)?),
        }
    }

    /// Raw programs missed `missed` hits: a kernel that makes one miss
    /// makes them all miss, so every raw slot goes to its classic
    /// tracepoint at once (one map word, read by both programs on every
    /// hit, decides). Misses between the count and the hand-over are
    /// lost too (into `out`). A slot that cannot be moved keeps its raw
    /// program, whose misses go on being counted as lost; the hand-over is
    /// tried again at the next miss.
    pub fn hand_over_all(
        &mut self,
        ebpf: &mut aya::Ebpf,
        loss: &mut Loss,
        mut missed: u64,
        now: u64,
        out: &mut Vec<Event>,
    ) {
        let mut moved = Vec::new();
        for s in Slot::ALL {
            if !self.plan.is_raw(s) {
                continue;
            }
            match self.move_to_classic(ebpf, s) {
                Ok(()) => {
                    let misses = self.raw_recursion_misses(ebpf, s);
                    missed = missed.saturating_add(loss.raw_misses(misses, s, now, out));
                    if let Some(RawLink::Raw(link)) = self.links[s as usize].take() {
                        let _ = bpf::detach_raw(ebpf, s, link);
                    }
                    moved.push(s);
                }
                Err(e) => self.report.hand_over_failed(s, e.to_string()),
            }
        }
        if !moved.is_empty() {
            self.report.hand_overs.push(HandOver::Moved {
                slots: moved,
                missed,
            });
        }
    }

    /// Attach slot `s`'s classic program (it yields while the raw one owns
    /// the slot), then flip the slot's owner.
    fn move_to_classic(&mut self, ebpf: &mut aya::Ebpf, s: Slot) -> Result<(), LiveError> {
        let event = self.layout.events[s as usize].clone().unwrap_or_default();
        let mut classic = self.plan.classic_configs(&self.layout);
        classic[s as usize] = self.layout.slots[s as usize];
        bpf::write_config(ebpf, &classic)?;
        bpf::attach_slot(ebpf, s, &self.category, &event)?;
        let mut raw = self.plan.clone();
        raw.hand_over(s);
        bpf::write_raw_config(ebpf, &raw.configs)?;
        self.plan = raw;
        Ok(())
    }
}

/// Load and attach slot `s`'s rescue program (`nfsdtop_common::twin`)
/// after its own. Its link lives as long as the object: the program
/// does nothing once the slot's config is not raw.
fn attach_rescue(ebpf: &mut aya::Ebpf, s: Slot) -> Result<(), LiveError> {
    let name = raw::rescue_program_name(s).ok_or_else(|| LiveError::Bpf {
        context: "attach".into(),
        detail: format!("no rescue program for {}", s.name()),
    })?;
    bpf::attach_raw_named(ebpf, name, s.name()).map(drop)
}

/// Detach slot `s`'s raw or typed program.
fn detach(ebpf: &mut aya::Ebpf, s: Slot, link: RawLink) {
    match link {
        RawLink::Raw(link) => {
            let _ = bpf::detach_raw(ebpf, s, link);
        }
        RawLink::Typed(link) => drop(link),
    }
}

/// Load and attach slot `s`'s typed program (see [`typed`]), or say why
/// not.
fn attach_typed(
    prepared: &Result<typed::Prepared, String>,
    s: Slot,
    opts: &LiveOptions,
) -> Result<typed::TypedLink, String> {
    if !opts.typed_program {
        return Err("not asked for (--no-typed-program)".into());
    }
    typed::attach(prepared.as_ref()?, s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decision before anything is attached: classic when asked, off
    /// sunrpc, or without the kernel's BTF (saying why).
    #[test]
    fn plan_is_classic_when_asked_off_sunrpc_or_without_btf() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let layout = Layout::from_tracefs(&dir.join("formats/6.6+")).unwrap();
        let no_btf = LiveOptions {
            btf_dir: dir.join("no-such-btf"),
            ..LiveOptions::default()
        };
        let classic = LiveOptions {
            tracepoints: Tracepoints::Classic,
            ..no_btf.clone()
        };
        for (opts, category) in [(&classic, "sunrpc"), (&no_btf, "sched")] {
            let p = choose_plan(opts, &layout, category);
            assert_eq!(p, RawPlan::none(&layout), "{category}");
        }
        let p = choose_plan(&no_btf, &layout, "sunrpc");
        assert!(Slot::ALL.iter().all(|&s| !p.is_raw(s)));
        assert_eq!(p.kept_classic.len(), 1, "{:?}", p.kept_classic);
        assert_eq!(p.decode, layout);
    }
}
