//! Raw tracepoints, where the kernel's BTF says where nfsd's fields are:
//! how nfsdtop watches every sunrpc event it reads by default.
//!
//! A classic tracepoint with a program attached makes the kernel build the
//! event's record (addresses copied, strings formatted) on every hit before
//! the program runs. A raw tracepoint hands the program the tracepoint's
//! arguments (the transport or request pointer) and nothing else; the
//! program reads the few fields nfsdtop needs at offsets found here, and
//! writes a record laid out as `rawrec` says, which the same decoder reads
//! through the synthetic slot configs made here. Two things make it the
//! cheaper way (measured in the benchmark guest, BENCHMARKS.md):
//! svc_xprt_enqueue's BUSY attempts (most hits on 6.6+) are dropped on the
//! flags argument without reading anything, and a transport's addresses
//! and namespace are read and sent once: later records of the same
//! `struct svc_xprt` are short (its pointer, the flags and the time), until
//! svc_xprt_free, whose raw program forgets the pointer before the memory
//! can be reused (svc_xprt_accept's forgets it too, for a reused address).
//!
//! Anything missing (no BTF, a field renamed, an unexpected struct layout)
//! leaves that slot on its classic tracepoint; `--classic-tracepoints`
//! puts every slot there.

use std::path::Path;

use nfsdtop_common::{rawrec, RawArg, RawConfig, Slot, SlotConfig, OFF_NONE};

use super::btf::{Arg, Btf};
use super::layout::Layout;

pub const BTF_DIR: &str = "/sys/kernel/btf";

/// The slots that have a raw program, in attach order (see
/// `nfsdtop_common::RawProgram::attach_rank`: svc_xprt_free and
/// svc_xprt_accept first). Each attaches to the raw tracepoint of its
/// event's name.
pub fn attach_order() -> impl Iterator<Item = Slot> {
    let mut s: Vec<(u8, Slot)> = Slot::ALL
        .into_iter()
        .filter_map(|s| s.info().raw.map(|r| (r.attach_rank, s)))
        .collect();
    s.sort_unstable();
    s.into_iter().map(|(_, s)| s)
}

/// How nfsdtop watches the sunrpc events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Tracepoints {
    /// Raw tracepoints for every event (svc_xprt_free, accept, enqueue,
    /// dequeue, svc_stats_latency) where the kernel's BTF allows, classic
    /// ones for the rest (the default).
    #[default]
    Raw,
    /// Every event on its classic tracepoint (`--classic-tracepoints`).
    Classic,
}

/// Where nfsd's fields are in this kernel (byte offsets).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelOffsets {
    pub rq_xprt: u32,
    pub rq_stime: u32,
    pub xpt_flags: u32,
    pub xpt_net: u32,
    pub net_ns_inum: u32,
    pub xpt_local: u32,
    /// 6.16+ (the transport's enqueue time, for `qtime`).
    pub xpt_qtime: Option<u32>,
    /// `svc_xprt.xpt_nr_rqsts` (its requests in flight, read at each
    /// enqueue); without it the depth at enqueue is not measured.
    pub xpt_nr_rqsts: Option<u32>,
    /// `svc_rqst.rq_arg.len` and `rq_res.len` (bytes received and sent),
    /// both or neither: without them bytes are not measured.
    pub rq_lens: Option<(u32, u32)>,
    /// `svc_rqst.rq_prog`, `rq_vers`, `rq_proc` (the request's
    /// procedure); without them procedures are not counted on raw
    /// tracepoints.
    pub rq_procs: Option<[u32; 3]>,
    /// `task_struct.worker_private` and `kthread.data`: where a classic
    /// program finds the request an RPC service thread runs.
    pub thread: Option<(u32, u32)>,
    /// Per slot: its tracepoint's arguments, as the kernel's BTF declares
    /// them (a raw program reads them as `plan` says).
    pub args: [Option<Vec<Arg>>; Slot::COUNT],
}

/// `svc_xprt.xpt_local`, where the programs read a transport's addresses
/// and their lengths in one go (`rawrec::ADDRS_SPAN`): so they must be
/// where they have always been, in a row after it.
pub fn xpt_local(btf: &Btf) -> Result<u32, String> {
    let need = |field: &str| {
        btf.offset_of("svc_xprt", &[field])
            .ok_or_else(|| format!("the kernel's BTF has no svc_xprt.{field}"))
    };
    let local = need("xpt_local")?;
    for (field, rel) in [
        ("xpt_locallen", rawrec::LOCALLEN_REL),
        ("xpt_remote", rawrec::REMOTE_REL),
        ("xpt_remotelen", rawrec::REMOTELEN_REL),
    ] {
        let at = need(field)?;
        if at != local + rel as u32 {
            return Err(format!(
                "svc_xprt.{field} is at byte {at}, not xpt_local + {rel} where nfsdtop reads it"
            ));
        }
    }
    Ok(local)
}

impl KernelOffsets {
    pub fn from_btf(btf: &Btf) -> Result<KernelOffsets, String> {
        let need = |s: &str, path: &[&str]| {
            btf.offset_of(s, path)
                .ok_or_else(|| format!("the kernel's BTF has no {s}.{}", path.join(".")))
        };
        let local = xpt_local(btf)?;
        Ok(KernelOffsets {
            rq_xprt: need("svc_rqst", &["rq_xprt"])?,
            rq_stime: need("svc_rqst", &["rq_stime"])?,
            xpt_flags: need("svc_xprt", &["xpt_flags"])?,
            xpt_net: need("svc_xprt", &["xpt_net"])?,
            net_ns_inum: need("net", &["ns", "inum"])?,
            xpt_local: local,
            xpt_qtime: btf.offset_of("svc_xprt", &["xpt_qtime"]),
            xpt_nr_rqsts: btf.offset_of("svc_xprt", &["xpt_nr_rqsts"]),
            rq_lens: btf
                .offset_of("svc_rqst", &["rq_arg", "len"])
                .zip(btf.offset_of("svc_rqst", &["rq_res", "len"])),
            rq_procs: ["rq_prog", "rq_vers", "rq_proc"]
                .map(|f| btf.offset_of("svc_rqst", &[f]))
                .into_iter()
                .collect::<Option<Vec<u32>>>()
                .and_then(|v| v.try_into().ok()),
            thread: btf
                .offset_of("task_struct", &["worker_private"])
                .zip(btf.offset_of("kthread", &["data"])),
            args: std::array::from_fn(|i| {
                let s = Slot::ALL[i];
                s.info().raw?;
                btf.tracepoint_args(s.name())
            }),
        })
    }

    /// Slot `s`'s tracepoint's arguments are `(xprt, flags)` (svc_xprt_enqueue
    /// on 6.6+), not `(xprt, rqst)`, and its raw program may read the flags.
    pub fn flags_arg(&self, s: Slot) -> bool {
        s.raw_flags_arg()
            && self.args[s as usize].as_deref()
                == Some(&[Arg::Ptr(RawArg::Xprt.btf_struct().into()), Arg::Int(8)])
    }

    /// Slot `s`'s tracepoint's first argument points to struct `name`.
    fn first_arg_is(&self, s: Slot, name: &str) -> bool {
        matches!(
            self.args[s as usize].as_deref().and_then(<[Arg]>::first),
            Some(Arg::Ptr(n)) if n == name
        )
    }

    /// From `/sys/kernel/btf` (vmlinux, plus the sunrpc module's split BTF
    /// when sunrpc is a module).
    pub fn from_sys(dir: &Path) -> Result<KernelOffsets, String> {
        let module = dir.join("sunrpc").exists().then_some("sunrpc");
        let btf = Btf::load(dir, module).map_err(|e| e.to_string())?;
        KernelOffsets::from_btf(&btf)
    }
}

/// Which slots go raw, their programs' configs, and the layout the decoder
/// uses (classic slots unchanged, raw slots with `rawrec` offsets).
#[derive(Clone, Debug, PartialEq)]
pub struct RawPlan {
    pub configs: [RawConfig; Slot::COUNT],
    pub decode: Layout,
    /// Why a slot that could have been raw is not (for the user).
    pub kept_classic: Vec<String>,
    /// Raw slots kept on a kernel that can preempt their programs
    /// (`--keep-raw-tracepoints`): their misses are lost, not handed over.
    pub kept_raw: bool,
    /// Why this kernel can preempt raw programs, where the plan runs twin
    /// programs against it ([`RawPlan::twinned`]): misses are rescued or
    /// counted, not handed over.
    pub twinned: Option<String>,
}

/// Slot `s`'s rescue program's name (`nfsdtop_common::twin`), if it has one.
pub fn rescue_program_name(s: Slot) -> Option<&'static str> {
    s.info().raw?.rescue
}

impl RawPlan {
    /// Every slot classic, for `why`.
    pub fn classic(layout: &Layout, why: String) -> RawPlan {
        RawPlan {
            kept_classic: vec![why],
            ..RawPlan::none(layout)
        }
    }

    /// No raw slot (raw tracepoints not asked for).
    pub fn none(layout: &Layout) -> RawPlan {
        RawPlan {
            configs: [RawConfig::default(); Slot::COUNT],
            decode: layout.clone(),
            kept_classic: Vec::new(),
            kept_raw: false,
            twinned: None,
        }
    }

    /// Raw (and typed) slots on a kernel that can preempt their programs
    /// (`preempts`: why it can), made exact by twin programs (`nfsdtop_common::twin`):
    /// each slot that has a rescue program marks its hits for it. Misses
    /// are rescued or counted, never handed over to classic tracepoints;
    /// svc_xprt_free's and svc_xprt_accept's that neither program did make
    /// the kernel forget its known transports.
    pub fn twinned(layout: &Layout, k: &KernelOffsets, preempts: String) -> RawPlan {
        let mut p = plan(layout, k, Tracepoints::Raw);
        p.twinned = Some(preempts);
        for s in Slot::ALL {
            if p.is_raw(s) && rescue_program_name(s).is_some() {
                p.configs[s as usize].twin = 1;
            }
        }
        p
    }

    /// Whether slot `s`'s program marks its hits for a rescue program.
    pub fn is_twinned(&self, s: Slot) -> bool {
        self.is_raw(s) && self.configs[s as usize].twin == 1
    }

    pub fn is_raw(&self, s: Slot) -> bool {
        self.configs[s as usize].enabled == 1
    }

    /// The classic programs' configs: `classic`'s, with the slots a raw
    /// program owns disabled.
    pub fn classic_configs(&self, classic: &Layout) -> [SlotConfig; Slot::COUNT] {
        std::array::from_fn(|i| {
            if self.is_raw(Slot::ALL[i]) {
                SlotConfig::DISABLED
            } else {
                classic.slots[i]
            }
        })
    }

    /// Put slot `s` back on its classic tracepoint (its raw attach failed).
    pub fn revert(&mut self, s: Slot, classic: &Layout, why: String) {
        self.configs[s as usize] = RawConfig::default();
        self.decode.slots[s as usize] = classic.slots[s as usize];
        self.kept_classic.push(why);
        if s == Slot::Close {
            self.full_records_only();
        }
    }

    /// Slot `s`'s classic program records from now on (its raw one
    /// missed hits); the decoder's layout stays, for records in flight.
    pub fn hand_over(&mut self, s: Slot) {
        self.configs[s as usize].enabled = 0;
        if s == Slot::Close {
            self.full_records_only();
        }
    }

    /// Short records need the raw svc_xprt_free program to forget freed
    /// transports; without it every record is sent in full (and nothing
    /// is folded: a free would not settle its transport's totals).
    fn full_records_only(&mut self) {
        for c in &mut self.configs {
            c.short_records = 0;
        }
        self.no_folding();
    }

    /// Every svc_stats_latency hit sent as a record (the agent cannot read
    /// the kernel's running totals).
    pub fn no_folding(&mut self) {
        for c in &mut self.configs {
            c.fold_exec = 0;
            c.fold_procs = 0;
        }
    }

    /// Whether known transports' requests are folded per procedure (the
    /// agent then claims the kernel's rows).
    pub fn decode_folds_procedures(&self) -> bool {
        self.configs[Slot::StatsLatency as usize].fold_procs == 1
    }

    /// Whether requests are counted per procedure (the raw
    /// svc_stats_latency program reads them).
    pub fn measures_procedures(&self) -> bool {
        let c = &self.configs[Slot::StatsLatency as usize];
        c.enabled != 0 && c.rq_prog != 0
    }

    /// Whether the requests' bytes received and sent are measured (the
    /// raw svc_stats_latency program reads their lengths).
    pub fn measures_bytes(&self) -> bool {
        let c = &self.configs[Slot::StatsLatency as usize];
        c.enabled != 0 && c.rq_arg_len != 0
    }

    /// Whether the raw enqueue program reads the depth at enqueue.
    pub fn measures_depth(&self) -> bool {
        let c = &self.configs[Slot::Enqueue as usize];
        c.enabled != 0 && c.value == rawrec::VALUE_INFLIGHT
    }

    /// Whether svc_stats_latency hits of known transports are folded.
    pub fn folds_exec(&self) -> bool {
        self.configs
            .iter()
            .any(|c| c.enabled != 0 && c.fold_exec == 1)
    }
}

/// The record layout of a raw slot, for the decoder.
pub fn raw_record_layout(classic: &SlotConfig, has_value: bool) -> SlotConfig {
    SlotConfig {
        enabled: 1,
        server_off: rawrec::SERVER_LOC,
        client_off: rawrec::CLIENT_LOC,
        flags_off: rawrec::FLAGS,
        flags_size: 8,
        netns_off: rawrec::NETNS,
        netns_size: 4,
        value_off: if has_value { rawrec::VALUE } else { OFF_NONE },
        value_size: if has_value { 8 } else { 0 },
        class_off: OFF_NONE,
        class_size: 0,
        drop_mask: classic.drop_mask,
        need_mask: classic.need_mask,
    }
}

/// Which slots go raw for `choice` on this kernel.
pub fn plan(layout: &Layout, k: &KernelOffsets, choice: Tracepoints) -> RawPlan {
    let mut p = RawPlan::none(layout);
    for s in attach_order() {
        let (i, event) = (s as usize, s.name());
        let Some(prog) = s.info().raw else { continue };
        let classic = &layout.slots[i];
        if classic.enabled == 0 || layout.events[i].as_deref() != Some(event) {
            continue;
        }
        if choice == Tracepoints::Classic {
            continue;
        }
        let wants = prog.arg.btf_struct();
        if !k.first_arg_is(s, wants) {
            p.kept_classic.push(format!(
                "{event}: the kernel's BTF does not declare its first argument a struct {wants} *"
            ));
            continue;
        }
        let value = match s {
            Slot::Dequeue if layout.kernel_class => {
                p.kept_classic.push(format!(
                    "{event}: the kernel's class field is in its record only"
                ));
                continue;
            }
            Slot::Dequeue if layout.qtime => match k.xpt_qtime {
                Some(_) => rawrec::VALUE_QTIME,
                None => {
                    p.kept_classic.push(format!(
                        "{event}: it has qtime but the kernel's BTF has no svc_xprt.xpt_qtime"
                    ));
                    continue;
                }
            },
            Slot::StatsLatency => rawrec::VALUE_EXECUTE,
            Slot::Enqueue if k.xpt_nr_rqsts.is_some() => rawrec::VALUE_INFLIGHT,
            _ => rawrec::VALUE_NONE,
        };
        p.configs[i] = RawConfig {
            enabled: 1,
            arg_is_rqst: u32::from(prog.arg == RawArg::Rqst),
            rq_xprt: k.rq_xprt,
            rq_stime: k.rq_stime,
            xpt_flags: k.xpt_flags,
            xpt_net: k.xpt_net,
            net_ns_inum: k.net_ns_inum,
            xpt_local: k.xpt_local,
            xpt_qtime: k.xpt_qtime.unwrap_or(0),
            value,
            drop_mask: classic.drop_mask,
            need_mask: classic.need_mask,
            flags_arg: u32::from(k.flags_arg(s)),
            short_records: 0,
            fold_exec: 0,
            rq_arg_len: 0,
            rq_res_len: 0,
            rq_prog: 0,
            rq_vers: 0,
            rq_proc: 0,
            fold_procs: 0,
            twin: 0,
            xpt_nr_rqsts: k.xpt_nr_rqsts.unwrap_or(0),
        };
        p.decode.slots[i] = raw_record_layout(classic, value != rawrec::VALUE_NONE);
        if s == Slot::StatsLatency {
            // The lengths go in the flags word (`rawrec::LENS`); without
            // their offsets the decoder's layout has no such word, and
            // bytes are not measured.
            match k.rq_lens {
                Some((arg, res)) => {
                    p.configs[i].rq_arg_len = arg;
                    p.configs[i].rq_res_len = res;
                }
                None => {
                    p.decode.slots[i].flags_off = OFF_NONE;
                    p.decode.slots[i].flags_size = 0;
                }
            }
            if let Some([prog, vers, proc]) = k.rq_procs {
                (
                    p.configs[i].rq_prog,
                    p.configs[i].rq_vers,
                    p.configs[i].rq_proc,
                ) = (prog, vers, proc);
            }
        }
    }
    if p.is_raw(Slot::Close) {
        for c in p.configs.iter_mut().filter(|c| c.enabled == 1) {
            c.short_records = 1;
        }
        // A known transport's execution times are added up in the kernel
        // (`nfsdtop_common::exec`): one record fewer per request.
        let stats = &mut p.configs[Slot::StatsLatency as usize];
        if stats.enabled == 1 {
            stats.fold_exec = 1;
            // And its requests per procedure (`nfsdtop_common::procs`):
            // a request is folded only where its procedure is too.
            stats.fold_procs = u32::from(stats.rq_prog != 0);
        }
    }
    p
}

#[cfg(test)]
mod preempt_tests;
#[cfg(test)]
mod tests;
