//! How the live source watches nfsd, as a value: which events are on raw
//! tracepoints, what is folded in the kernel, why a slot stayed classic,
//! and the hand-overs to classic tracepoints while running. Rendered to
//! text only at the edge (the source's `detail`, docs/json.md), where
//! `cargo xtask vm-test` reads it.

use std::fmt;

use nfsdtop_common::Slot;

use super::raw::Tracepoints;

/// The live source's attach report (see the module comment).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AccessReport {
    /// What the user asked for (`--classic-tracepoints` or the default).
    pub asked: Tracepoints,
    /// The slots on raw tracepoints at start, in attach order; empty: all
    /// classic.
    pub raw: Vec<Slot>,
    /// svc_stats_latency hits of known transports are added up in the
    /// kernel (`nfsdtop_common::exec`).
    pub folds_exec: bool,
    /// Why they are sent per request instead though the plan folded them
    /// (the kernel's totals cannot be read).
    pub fold_unavailable: Option<String>,
    /// The raw slots that have a typed program (`super::typed`): whether
    /// it reads the slot, or why the raw program does; in attach order.
    pub typed: Vec<(Slot, Result<(), String>)>,
    /// The requests' bytes received and sent are measured (the raw
    /// svc_stats_latency program reads their lengths); else they are
    /// absent (null in JSON), never 0.
    pub measures_bytes: bool,
    /// The raw enqueue program reads the transport's requests in flight
    /// (`xpt_nr_rqsts`); else the depth at enqueue is absent (null).
    pub measures_depth: bool,
    /// The raw svc_stats_latency program reads each request's procedure
    /// (`super::procs`).
    pub measures_procedures: bool,
    /// The classic svc_stats_latency record names the procedure.
    pub record_procedures: bool,
    /// Why slots that could have been raw are classic, one line each.
    pub kept_classic: Vec<String>,
    /// What happened to raw slots whose programs missed hits, in order.
    pub hand_overs: Vec<HandOver>,
    /// The raw slots were kept on a kernel that can preempt their
    /// programs (`--keep-raw-tracepoints`): misses are lost, not handed
    /// over.
    pub kept_raw: bool,
    /// Slots whose programs have a rescue program on this kernel, which
    /// can preempt them (`nfsdtop_common::twin`).
    pub twinned: Vec<Slot>,
    /// svc_xprt_enqueue is not hooked: the ready queue is rebuilt from
    /// the dequeues' `qtime` (see `super::rebuild`).
    pub dequeues_only: bool,
    /// How busy threads per pool are measured, or why not (see
    /// `super::pools::plan`); empty: not said (tests' categories).
    pub pools: String,
}

/// A raw slot's program missed hits (the kernel preempts tracepoint
/// programs): see `attach::Attachment::hand_over_all`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HandOver {
    /// These slots moved to their classic tracepoints; the raw programs
    /// had missed `missed` hits (counted as lost).
    Moved { slots: Vec<Slot>, missed: u64 },
    /// The slot could not be moved (`error`): its raw program stays and
    /// its misses go on being counted as lost.
    Failed { slot: Slot, error: String },
}

impl AccessReport {
    /// Note a hand-over that failed, once per slot and error.
    pub fn hand_over_failed(&mut self, slot: Slot, error: String) {
        let h = HandOver::Failed { slot, error };
        if !self.hand_overs.contains(&h) {
            self.hand_overs.push(h);
        }
    }

    /// Whether slot `s` moved to its classic tracepoint while running.
    pub fn moved(&self, s: Slot) -> bool {
        self.hand_overs
            .iter()
            .any(|h| matches!(h, HandOver::Moved { slots, .. } if slots.contains(&s)))
    }

    /// Whether any slot moved to its classic tracepoint while running.
    pub fn handed_over(&self) -> bool {
        self.hand_overs
            .iter()
            .any(|h| matches!(h, HandOver::Moved { .. }))
    }
}

fn names(slots: &[Slot]) -> String {
    slots
        .iter()
        .map(|s| s.name())
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for AccessReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.raw.is_empty(), self.asked) {
            (true, Tracepoints::Classic) => f.write_str("classic tracepoints")?,
            (true, Tracepoints::Raw) => {
                f.write_str("classic tracepoints (raw ones not possible here)")?
            }
            (false, _) if self.kept_raw => write!(
                f,
                "raw tracepoints (BTF offsets) for {}, kept although this kernel can preempt \
                 their programs (--keep-raw-tracepoints): the hits it skips are counted as lost",
                names(&self.raw)
            )?,
            (false, _) => write!(
                f,
                "raw tracepoints (BTF offsets) for {} (the default)",
                names(&self.raw)
            )?,
        }
        let stats = Slot::StatsLatency.name();
        let typed: Vec<Slot> = self
            .typed
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(s, _)| *s)
            .collect();
        if !typed.is_empty() {
            write!(f, "; typed programs (tp_btf) for {}", names(&typed))?;
        }
        for (s, r) in &self.typed {
            if let Err(why) = r {
                write!(
                    f,
                    "; {} read by its raw program (typed one not used: {why})",
                    s.name()
                )?;
            }
        }
        if !self.twinned.is_empty() {
            write!(
                f,
                "; this kernel can preempt tracepoint programs: a second program on {} does \
                 the hits the kernel skips for the first (what neither does is counted as lost)",
                names(&self.twinned)
            )?;
        }
        if self.folds_exec {
            write!(f, "; {stats} of known transports added up in the kernel")?;
        }
        if let Some(e) = &self.fold_unavailable {
            write!(
                f,
                "; {stats} sent per request (the kernel's totals cannot be read: {e})"
            )?;
        }
        if self.measures_bytes {
            f.write_str("; bytes in/out from rq_arg.len/rq_res.len")?;
            if self.moved(Slot::StatsLatency) {
                write!(
                    f,
                    " until {stats} moved to its classic tracepoint (not counted since)"
                )?;
            }
        } else {
            write!(
                f,
                "; bytes in/out not measured (the {stats} record has no lengths: they are \
                 read at svc_rqst offsets from the kernel's BTF)"
            )?;
        }
        if self.measures_depth {
            f.write_str("; depth at enqueue from xpt_nr_rqsts")?;
            if self.moved(Slot::Enqueue) {
                write!(
                    f,
                    " until {} moved to its classic tracepoint (not measured since)",
                    Slot::Enqueue.name()
                )?;
            }
        }
        let raw_stats = self.raw.contains(&Slot::StatsLatency);
        if raw_stats && self.measures_procedures {
            f.write_str("; procedures from rq_prog/rq_vers/rq_proc")?;
            if self.moved(Slot::StatsLatency) && self.record_procedures {
                write!(f, ", then from the {stats} record")?;
            }
        } else if !raw_stats && self.record_procedures {
            write!(f, "; procedures from the {stats} record")?;
        } else {
            f.write_str(if raw_stats {
                "; procedures not counted (the kernel's BTF has no svc_rqst.rq_prog, rq_vers, \
                 rq_proc)"
            } else {
                "; procedures not counted (the svc_stats_latency record names none)"
            })?;
        }
        if self.dequeues_only {
            write!(
                f,
                "; ready queue rebuilt from dequeues (qtime), svc_xprt_enqueue not hooked: \
                 events held {} s, so a snapshot covers up to then (--enqueue-hooks hooks it)",
                super::rebuild::WINDOW_NS / 1_000_000_000
            )?;
        }
        if !self.pools.is_empty() {
            write!(f, "; {}", self.pools)?;
        }
        for why in &self.kept_classic {
            write!(f, "; classic: {why}")?;
        }
        for h in &self.hand_overs {
            match h {
                HandOver::Failed { slot, error } => {
                    write!(f, "; {}: raw tracepoint misses hits, {error}", slot.name())?
                }
                HandOver::Moved { slots, missed } => write!(
                    f,
                    "; moved to classic tracepoints: {} (raw ones missed {missed} hits: this \
                     kernel preempts tracepoint programs)",
                    names(slots)
                )?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text `cargo xtask vm-test` and users read, from each part.
    #[test]
    fn renders_every_part_in_order() {
        let classic = AccessReport {
            asked: Tracepoints::Classic,
            ..AccessReport::default()
        };
        assert_eq!(
            classic.to_string(),
            "classic tracepoints; bytes in/out not measured (the svc_stats_latency record has \
             no lengths: they are read at svc_rqst offsets from the kernel's BTF); procedures \
             not counted (the svc_stats_latency record names none)"
        );
        let mut r = AccessReport {
            asked: Tracepoints::Raw,
            raw: vec![Slot::Close, Slot::Accept, Slot::Dequeue],
            typed: Vec::new(),
            folds_exec: true,
            fold_unavailable: None,
            measures_bytes: true,
            measures_depth: false,
            measures_procedures: true,
            record_procedures: true,
            kept_classic: vec!["svc_stats_latency: why".into()],
            hand_overs: Vec::new(),
            kept_raw: false,
            twinned: Vec::new(),
            dequeues_only: true,
            pools: "busy threads per pool from rq_pool".into(),
        };
        r.hand_over_failed(Slot::Dequeue, "EBUSY".into());
        r.hand_over_failed(Slot::Dequeue, "EBUSY".into());
        assert!(!r.handed_over());
        r.hand_overs.push(HandOver::Moved {
            slots: vec![Slot::Close, Slot::Accept],
            missed: 3,
        });
        assert!(r.handed_over());
        assert!(r.moved(Slot::Accept) && !r.moved(Slot::StatsLatency));
        assert_eq!(
            r.to_string(),
            "raw tracepoints (BTF offsets) for svc_xprt_free, svc_xprt_accept, svc_xprt_dequeue \
             (the default); svc_stats_latency of known transports added up in the kernel; \
             bytes in/out from rq_arg.len/rq_res.len; procedures from the svc_stats_latency \
             record; ready queue rebuilt from dequeues \
             (qtime), svc_xprt_enqueue not hooked: events held 1 s, so a snapshot covers up to \
             then (--enqueue-hooks hooks it); busy threads per pool from rq_pool; \
             classic: svc_stats_latency: why; svc_xprt_dequeue: raw tracepoint misses hits, \
             EBUSY; moved to classic tracepoints: svc_xprt_free, svc_xprt_accept (raw ones \
             missed 3 hits: this kernel preempts tracepoint programs)"
        );
        // Raw tracepoints kept on a kernel that preempts their programs.
        let kept = AccessReport {
            asked: Tracepoints::Raw,
            raw: vec![Slot::Dequeue, Slot::StatsLatency],
            kept_raw: true,
            ..AccessReport::default()
        };
        assert!(
            kept.to_string().starts_with(
                "raw tracepoints (BTF offsets) for svc_xprt_dequeue, svc_stats_latency, kept \
                 although this kernel can preempt their programs (--keep-raw-tracepoints): the \
                 hits it skips are counted as lost;"
            ),
            "{kept}"
        );
        // Twin programs where the kernel preempts tracepoint programs.
        let twins = AccessReport {
            asked: Tracepoints::Raw,
            raw: vec![Slot::Close, Slot::Dequeue, Slot::StatsLatency],
            twinned: vec![Slot::Dequeue, Slot::StatsLatency],
            ..AccessReport::default()
        };
        assert!(
            twins.to_string().starts_with(
                "raw tracepoints (BTF offsets) for svc_xprt_free, svc_xprt_dequeue, \
                 svc_stats_latency (the default); this kernel can preempt tracepoint programs: \
                 a second program on svc_xprt_dequeue, svc_stats_latency does the hits the \
                 kernel skips for the first (what neither does is counted as lost);"
            ),
            "{twins}"
        );
        // Which slots typed programs read, and why the others' do not.
        let t = AccessReport {
            asked: Tracepoints::Raw,
            raw: vec![Slot::Dequeue, Slot::StatsLatency],
            typed: vec![
                (Slot::Dequeue, Err("no BTF".to_string())),
                (Slot::StatsLatency, Ok(())),
            ],
            ..AccessReport::default()
        };
        let text = t.to_string();
        assert!(
            text.contains(
                "; typed programs (tp_btf) for svc_stats_latency; svc_xprt_dequeue read by its \
                 raw program (typed one not used: no BTF);"
            ),
            "{text}"
        );
        // The depth at enqueue, and where it stops.
        let mut d = AccessReport {
            asked: Tracepoints::Raw,
            raw: vec![Slot::Enqueue],
            measures_depth: true,
            ..AccessReport::default()
        };
        assert!(
            d.to_string()
                .contains("; depth at enqueue from xpt_nr_rqsts;"),
            "{d}"
        );
        d.hand_overs.push(HandOver::Moved {
            slots: vec![Slot::Enqueue],
            missed: 1,
        });
        assert!(
            d.to_string().contains(
                "; depth at enqueue from xpt_nr_rqsts until svc_xprt_enqueue moved to its \
                 classic tracepoint (not measured since);"
            ),
            "{d}"
        );
        // Bytes stop being measured when svc_stats_latency moves.
        let mut m = AccessReport {
            asked: Tracepoints::Raw,
            raw: vec![Slot::StatsLatency],
            measures_bytes: true,
            ..AccessReport::default()
        };
        m.hand_overs.push(HandOver::Moved {
            slots: vec![Slot::StatsLatency],
            missed: 1,
        });
        assert!(
            m.to_string().contains(
                "; bytes in/out from rq_arg.len/rq_res.len until svc_stats_latency moved to its \
                 classic tracepoint (not counted since);"
            ),
            "{m}"
        );
        let none = AccessReport {
            fold_unavailable: Some("no map".into()),
            ..AccessReport::default()
        };
        assert_eq!(
            none.to_string(),
            "classic tracepoints (raw ones not possible here); svc_stats_latency sent per \
             request (the kernel's totals cannot be read: no map); bytes in/out not measured \
             (the svc_stats_latency record has no lengths: they are read at svc_rqst offsets \
             from the kernel's BTF); procedures not counted (the svc_stats_latency record \
             names none)"
        );
    }
}
