//! `nfsdtop doctor`: what this host supports, without attaching anything.
//! The BPF programs are loaded into the kernel (the verifier runs) even
//! where nfsd is missing, so a host can be checked before nfsd runs.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use super::error::LiveError;
use super::format::Format;
use super::host::{self, Caps};
use super::layout::{self, Layout};
use super::{bpf, LiveOptions};

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct EventReport {
    pub present: bool,
    pub fields: Vec<String>,
}

/// The keys of `doctor --format json`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Diagnosis {
    pub tracefs: bool,
    pub tracefs_path: Option<PathBuf>,
    pub sunrpc_loaded: bool,
    /// nfsd itself (sunrpc alone may only serve the NFS client).
    pub nfsd_loaded: bool,
    pub generation: Option<String>,
    pub wait_source: Option<String>,
    pub kernel_class: bool,
    /// Events nfsdtop watches through raw tracepoints (the kernel's BTF
    /// gives the fields' offsets); the others go on classic ones.
    pub raw_tracepoints: Vec<String>,
    /// Whether this kernel can preempt raw tracepoint programs (which
    /// makes them miss hits) and so which kind nfsdtop starts on, and why.
    pub tracepoint_preemption: String,
    pub events: BTreeMap<String, EventReport>,
    pub bpf_object: bool,
    pub bpf_programs_verified: bool,
    pub bpf_programs: Vec<String>,
    pub bpf_error: Option<String>,
    pub privileges_ok: bool,
    pub capabilities: Caps,
    pub kernel: String,
    /// What stops the live source, each with what to do; empty = ready.
    pub problems: Vec<String>,
    /// Things that work, but less well than they could.
    pub notes: Vec<String>,
}

impl Diagnosis {
    pub fn ready(&self) -> bool {
        self.problems.is_empty()
    }
}

pub fn diagnose(opts: &LiveOptions) -> Diagnosis {
    let mut problems = Vec::new();
    let mut notes = Vec::new();
    let tracefs_path = host::find_tracefs(opts.tracefs.as_deref());
    let caps = Caps::current();
    let privileges_ok = caps.sufficient();
    if !privileges_ok {
        problems.push(
            LiveError::Privileges {
                detail: format!("this process lacks {}", caps.missing()),
            }
            .to_string(),
        );
    }

    let mut events = BTreeMap::new();
    let mut formats = BTreeMap::new();
    for ev in layout::event_names() {
        let fmt = tracefs_path
            .as_ref()
            .map(|t| t.join("events/sunrpc").join(ev).join("format"))
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|s| Format::parse(&s).ok());
        if fmt.is_none() && layout::is_old_name(ev) {
            continue; // an older kernel's name: only worth showing where it exists
        }
        events.insert(
            ev.to_string(),
            EventReport {
                present: fmt.is_some(),
                fields: fmt.as_ref().map(Format::own_fields).unwrap_or_default(),
            },
        );
        if let Some(f) = fmt {
            formats.insert(ev.to_string(), f);
        }
    }

    let sunrpc_loaded = match &tracefs_path {
        Some(t) => host::sunrpc_events_present(t),
        None => opts.tracefs.is_none() && host::sunrpc_module_present(),
    };
    let nfsd_loaded = match &opts.tracefs {
        Some(_) => sunrpc_loaded,
        None => host::nfsd_module_present(),
    };
    if sunrpc_loaded && !nfsd_loaded {
        problems.push(
            LiveError::NoSunrpc {
                detail: "the sunrpc module is loaded (for the NFS client, perhaps) but nfsd is \
                         not (/sys/module/nfsd does not exist)"
                    .into(),
            }
            .to_string(),
        );
    }
    let (mut generation, mut wait_source, mut kernel_class) = (None, None, false);
    let mut raw_tracepoints = Vec::new();
    let preempt = super::preempt::Verdict::probe();
    match (&tracefs_path, sunrpc_loaded) {
        (None, _) => match super::locate_tracefs(opts) {
            Err(e) => problems.push(e.to_string()),
            Ok(_) => problems.push("tracefs disappeared while checking".into()),
        },
        (Some(t), false) => problems.push(
            LiveError::NoSunrpc {
                detail: format!(
                    "{} does not exist (the sunrpc module is not loaded)",
                    t.join("events/sunrpc").display()
                ),
            }
            .to_string(),
        ),
        (Some(t), true) => {
            match Layout::from_formats(&formats, &t.join("events/sunrpc")) {
                Ok(l) => {
                    generation = Some(l.label());
                    wait_source = Some(l.wait_source().as_str().to_string());
                    kernel_class = l.kernel_class;
                    notes.extend(l.notes.iter().cloned());
                    match super::raw::KernelOffsets::from_sys(&opts.btf_dir) {
                        Ok(k) => {
                            let p = if preempt.raw_misses {
                                super::raw::RawPlan::twinned(&l, &k, preempt.reason.clone())
                            } else {
                                super::raw::plan(&l, &k, super::Tracepoints::Raw)
                            };
                            let twins: Vec<&str> = super::raw::attach_order()
                                .filter(|&s| p.is_twinned(s))
                                .map(|s| s.name())
                                .collect();
                            if !twins.is_empty() {
                                notes.push(format!(
                                    "{}: a second program on {} does the hits the kernel skips \
                                     for the first",
                                    preempt.reason,
                                    twins.join(", ")
                                ));
                            }
                            for s in super::raw::attach_order() {
                                if p.is_raw(s) {
                                    raw_tracepoints.push(s.name().to_string());
                                }
                            }
                            for why in p.kept_classic {
                                notes.push(format!("classic tracepoint kept for {why}"));
                            }
                        }
                        Err(why) => notes.push(format!(
                            "no raw tracepoints, classic ones for every event: {why}"
                        )),
                    }
                    // Only where svc_stats_latency can be raw at all.
                    if !preempt.raw_misses {
                        notes.push(match bpf::verify_typed(&opts.btf_dir) {
                            Ok(()) => "typed programs (tp_btf) verify: svc_xprt_dequeue's and \
                                       svc_stats_latency's requests are read with plain loads"
                                .into(),
                            Err(why) => format!(
                                "typed programs cannot be used ({why}): raw programs read \
                                 requests with helper calls"
                            ),
                        });
                    }
                    if nfsd_loaded {
                        notes.push(super::threads::doctor_note(t));
                        notes.push(match super::nfs4ops::offsets(&opts.btf_dir) {
                        Ok(_) => "--nfs4-ops can count NFSv4 operations (nfsd's BTF has what it reads)".into(),
                        Err(why) => format!("--nfs4-ops cannot count NFSv4 operations: {why}"),
                    });
                    }
                }
                Err(e) => problems.push(e.to_string()),
            }
        }
    }

    let bpf_object = !bpf::OBJECT.is_empty();
    let (bpf_programs, bpf_error) = match bpf::verify_all(64 * 1024) {
        Ok(p) => (p, None),
        Err(e) => {
            // Missing privileges are already a problem of their own.
            if privileges_ok || !matches!(e, LiveError::Privileges { .. }) {
                problems.push(e.to_string());
            }
            (Vec::new(), Some(e.to_string()))
        }
    };
    let all_programs = bpf::program_names().count();
    let bpf_programs_verified = bpf_error.is_none() && bpf_programs.len() == all_programs;

    Diagnosis {
        tracefs: tracefs_path.is_some(),
        tracefs_path,
        sunrpc_loaded,
        nfsd_loaded,
        generation,
        wait_source,
        kernel_class,
        raw_tracepoints,
        tracepoint_preemption: preempt.reason,
        events,
        bpf_object,
        bpf_programs_verified,
        bpf_programs,
        bpf_error,
        privileges_ok,
        capabilities: caps,
        kernel: host::kernel_release(),
        problems,
        notes,
    }
}
