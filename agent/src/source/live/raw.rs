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

use nfsdtop_common::{rawrec, slot, RawConfig, SlotConfig, OFF_NONE};

use super::btf::{Arg, Btf};
use super::layout::Layout;

pub const BTF_DIR: &str = "/sys/kernel/btf";

/// The slots that have a raw program, and the tracepoint each attaches to,
/// in attach order: svc_xprt_free and svc_xprt_accept first, so that no
/// transport the others send in full can be freed unseen (its pointer
/// would stay known, and a new transport at the same address would get
/// short records). Both make the kernel side forget the pointer.
pub const RAW_SLOTS: [(u8, &str); 5] = [
    (slot::CLOSE, "svc_xprt_free"),
    (slot::ACCEPT, "svc_xprt_accept"),
    (slot::ENQUEUE, "svc_xprt_enqueue"),
    (slot::DEQUEUE, "svc_xprt_dequeue"),
    (slot::STATS_LATENCY, "svc_stats_latency"),
];

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
    /// Per slot: its tracepoint's arguments, as the kernel's BTF declares
    /// them (a raw program reads them as `plan` says).
    pub args: [Option<Vec<Arg>>; slot::COUNT],
}

impl KernelOffsets {
    pub fn from_btf(btf: &Btf) -> Result<KernelOffsets, String> {
        let need = |s: &str, path: &[&str]| {
            btf.offset_of(s, path)
                .ok_or_else(|| format!("the kernel's BTF has no {s}.{}", path.join(".")))
        };
        let local = need("svc_xprt", &["xpt_local"])?;
        // The programs read both addresses and lengths in one go, so they
        // must be where they have always been: in a row after xpt_local.
        for (field, rel) in [
            ("xpt_locallen", rawrec::LOCALLEN_REL),
            ("xpt_remote", rawrec::REMOTE_REL),
            ("xpt_remotelen", rawrec::REMOTELEN_REL),
        ] {
            let at = need("svc_xprt", &[field])?;
            if at != local + rel as u32 {
                return Err(format!(
                    "svc_xprt.{field} is at byte {at}, not xpt_local + {rel} where nfsdtop reads it"
                ));
            }
        }
        Ok(KernelOffsets {
            rq_xprt: need("svc_rqst", &["rq_xprt"])?,
            rq_stime: need("svc_rqst", &["rq_stime"])?,
            xpt_flags: need("svc_xprt", &["xpt_flags"])?,
            xpt_net: need("svc_xprt", &["xpt_net"])?,
            net_ns_inum: need("net", &["ns", "inum"])?,
            xpt_local: local,
            xpt_qtime: btf.offset_of("svc_xprt", &["xpt_qtime"]),
            args: std::array::from_fn(|i| {
                let (_, event) = RAW_SLOTS.iter().find(|(s, _)| *s as usize == i)?;
                btf.tracepoint_args(event)
            }),
        })
    }

    /// svc_xprt_enqueue's arguments are `(xprt, flags)` (6.6+), not
    /// `(xprt, rqst)`.
    pub fn enqueue_flags_arg(&self) -> bool {
        self.args[slot::ENQUEUE as usize].as_deref()
            == Some(&[Arg::Ptr("svc_xprt".into()), Arg::Int(8)])
    }

    /// Slot `s`'s tracepoint's first argument points to struct `name`.
    fn first_arg_is(&self, s: usize, name: &str) -> bool {
        matches!(
            self.args[s].as_deref().and_then(<[Arg]>::first),
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
    pub configs: [RawConfig; slot::COUNT],
    pub decode: Layout,
    /// Why a slot that could have been raw is not (for the user).
    pub kept_classic: Vec<String>,
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
            configs: [RawConfig::default(); slot::COUNT],
            decode: layout.clone(),
            kept_classic: Vec::new(),
        }
    }

    pub fn is_raw(&self, s: usize) -> bool {
        self.configs[s].enabled == 1
    }

    /// The classic programs' configs: `classic`'s, with the slots a raw
    /// program owns disabled.
    pub fn classic_configs(&self, classic: &Layout) -> [SlotConfig; slot::COUNT] {
        std::array::from_fn(|i| {
            if self.is_raw(i) {
                SlotConfig::DISABLED
            } else {
                classic.slots[i]
            }
        })
    }

    /// Put slot `s` back on its classic tracepoint (its raw attach failed).
    pub fn revert(&mut self, s: usize, classic: &Layout, why: String) {
        self.configs[s] = RawConfig::default();
        self.decode.slots[s] = classic.slots[s];
        self.kept_classic.push(why);
        if s == slot::CLOSE as usize {
            self.full_records_only();
        }
    }

    /// Slot `s`'s classic program records from now on (its raw one
    /// missed hits); the decoder's layout stays, for records in flight.
    pub fn hand_over(&mut self, s: usize) {
        self.configs[s].enabled = 0;
        if s == slot::CLOSE as usize {
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
        }
    }

    /// Whether svc_stats_latency hits of known transports are folded.
    pub fn folds_exec(&self) -> bool {
        self.configs
            .iter()
            .any(|c| c.enabled == 1 && c.fold_exec == 1)
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
    for (s, event) in RAW_SLOTS {
        let i = s as usize;
        let classic = &layout.slots[i];
        if classic.enabled == 0 || layout.events[i].as_deref() != Some(event) {
            continue;
        }
        if choice == Tracepoints::Classic {
            continue;
        }
        let flags_arg = s == slot::ENQUEUE && k.enqueue_flags_arg();
        let wants = if s == slot::DEQUEUE || s == slot::STATS_LATENCY {
            "svc_rqst"
        } else {
            "svc_xprt"
        };
        if !k.first_arg_is(i, wants) {
            p.kept_classic.push(format!(
                "{event}: the kernel's BTF does not declare its first argument a struct {wants} *"
            ));
            continue;
        }
        let value = match s {
            slot::DEQUEUE if layout.kernel_class => {
                p.kept_classic.push(format!(
                    "{event}: the kernel's class field is in its record only"
                ));
                continue;
            }
            slot::DEQUEUE if layout.qtime => match k.xpt_qtime {
                Some(_) => rawrec::VALUE_QTIME,
                None => {
                    p.kept_classic.push(format!(
                        "{event}: it has qtime but the kernel's BTF has no svc_xprt.xpt_qtime"
                    ));
                    continue;
                }
            },
            slot::STATS_LATENCY => rawrec::VALUE_EXECUTE,
            _ => rawrec::VALUE_NONE,
        };
        p.configs[i] = RawConfig {
            enabled: 1,
            arg_is_rqst: u32::from(s == slot::DEQUEUE || s == slot::STATS_LATENCY),
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
            flags_arg: u32::from(flags_arg),
            short_records: 0,
            fold_exec: 0,
            _pad: 0,
        };
        p.decode.slots[i] = raw_record_layout(classic, value != rawrec::VALUE_NONE);
    }
    if p.is_raw(slot::CLOSE as usize) {
        for c in p.configs.iter_mut().filter(|c| c.enabled == 1) {
            c.short_records = 1;
        }
        // A known transport's execution times are added up in the kernel
        // (`nfsdtop_common::exec`): one record fewer per request.
        let stats = &mut p.configs[slot::STATS_LATENCY as usize];
        if stats.enabled == 1 {
            stats.fold_exec = 1;
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Endpoint, EventKind};
    use crate::source::live::btf::tests::Builder;
    use crate::source::live::decode::{self, TraceFields};
    use nfsdtop_common::RecordView;

    fn fixture(gen: &str) -> Layout {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/formats");
        Layout::from_tracefs(&dir.join(gen)).unwrap()
    }

    fn ptr(name: &str) -> Arg {
        Arg::Ptr(name.into())
    }

    /// The raw tracepoints' arguments as 6.1 declares them (and `btf`).
    fn args_61() -> [Option<Vec<Arg>>; slot::COUNT] {
        let (x, r) = (ptr("svc_xprt"), ptr("svc_rqst"));
        [
            Some(vec![x.clone(), r.clone()]),
            Some(vec![r.clone()]),
            Some(vec![r]),
            Some(vec![x.clone(), x.clone()]),
            Some(vec![x]),
        ]
    }

    /// A kernel's BTF as the test needs it: svc_xprt with the address
    /// block at `local`, svc_rqst, net with ns.inum.
    fn btf(local: u32, remote_rel: u32, qtime: bool) -> Btf {
        let mut b = Builder::new();
        let u32t = b.int("unsigned int", 4);
        let u64t = b.int("long unsigned int", 8);
        let ns = b.composite(false, "ns_common", 24, false, &[("inum", u32t, 8 * 16)]);
        let net = b.composite(false, "net", 200, false, &[("ns", ns, 8 * 120)]);
        let netp = b.ptr(net);
        let mut xprt_members = vec![
            ("xpt_flags", u64t, 8 * 72),
            ("xpt_local", u64t, 8 * local),
            ("xpt_locallen", u64t, 8 * (local + 128)),
            ("xpt_remote", u64t, 8 * (local + remote_rel)),
            ("xpt_remotelen", u64t, 8 * (local + 264)),
            ("xpt_net", netp, 8 * 700),
        ];
        if qtime {
            xprt_members.push(("xpt_qtime", u64t, 8 * 24));
        }
        let xprt = b.composite(false, "svc_xprt", 800, false, &xprt_members);
        let xprtp = b.ptr(xprt);
        let rqst = b.composite(
            false,
            "svc_rqst",
            900,
            false,
            &[("rq_xprt", xprtp, 8 * 40), ("rq_stime", u64t, 8 * 300)],
        );
        let rqstp = b.ptr(rqst);
        // The raw tracepoints' prototypes, as 6.1 declares them.
        b.tracepoint("svc_xprt_enqueue", &[xprtp, rqstp]);
        b.tracepoint("svc_xprt_dequeue", &[rqstp]);
        b.tracepoint("svc_stats_latency", &[rqstp]);
        b.tracepoint("svc_xprt_accept", &[xprtp, xprtp]);
        b.tracepoint("svc_xprt_free", &[xprtp]);
        Btf::parse(&b.build(), None).unwrap()
    }

    #[test]
    fn offsets_from_btf_and_the_address_block_check() {
        let k = KernelOffsets::from_btf(&btf(160, 136, true)).unwrap();
        assert_eq!(
            k,
            KernelOffsets {
                rq_xprt: 40,
                rq_stime: 300,
                xpt_flags: 72,
                xpt_net: 700,
                net_ns_inum: 136,
                xpt_local: 160,
                xpt_qtime: Some(24),
                args: args_61(),
            }
        );
        assert_eq!(
            KernelOffsets::from_btf(&btf(160, 136, false))
                .unwrap()
                .xpt_qtime,
            None
        );
        let e = KernelOffsets::from_btf(&btf(160, 144, true)).unwrap_err();
        assert!(e.contains("xpt_remote is at byte 304"), "{e}");
        let empty = Builder::new();
        let e = KernelOffsets::from_btf(&Btf::parse(&empty.build(), None).unwrap()).unwrap_err();
        assert!(e.contains("no svc_xprt.xpt_local"), "{e}");
    }

    #[test]
    fn plan_per_generation() {
        let k = KernelOffsets::from_btf(&btf(160, 136, true)).unwrap();
        // 6.6+: every slot raw; with free raw, every raw slot sends short
        // records.
        let l = fixture("6.6+");
        let p = plan(&l, &k, Tracepoints::Raw);
        assert_eq!(RAW_SLOTS.len(), slot::COUNT);
        for (s, _) in RAW_SLOTS {
            assert!(p.is_raw(s as usize), "slot {s}");
            assert_eq!(p.configs[s as usize].short_records, 1, "slot {s}");
        }
        for s in [slot::CLOSE, slot::ACCEPT] {
            let c = p.configs[s as usize];
            assert_eq!(
                (c.arg_is_rqst, c.value),
                (0, rawrec::VALUE_NONE),
                "slot {s}"
            );
        }
        // A prototype that is not what the raw program reads (here a
        // dequeue taking the pool first): that slot stays classic.
        let mut odd = k.clone();
        odd.args[slot::DEQUEUE as usize] = Some(vec![ptr("svc_pool"), ptr("svc_rqst")]);
        let q = plan(&l, &odd, Tracepoints::Raw);
        assert!(!q.is_raw(slot::DEQUEUE as usize) && q.is_raw(slot::STATS_LATENCY as usize));
        assert!(
            q.kept_classic[0].contains("struct svc_rqst"),
            "{:?}",
            q.kept_classic
        );
        // svc_xprt_free back on its classic tracepoint (its attach
        // failed) turns short records off.
        let mut q = p.clone();
        q.revert(slot::CLOSE as usize, &l, "test".into());
        assert!(q.configs.iter().all(|c| c.short_records == 0));
        assert!(q.is_raw(slot::DEQUEUE as usize));
        let enq = p.configs[slot::ENQUEUE as usize];
        assert_eq!((enq.arg_is_rqst, enq.value), (0, rawrec::VALUE_NONE));
        assert_eq!(enq.drop_mask, l.slots[slot::ENQUEUE as usize].drop_mask);
        assert_ne!(enq.need_mask, 0);
        assert_eq!(p.configs[slot::DEQUEUE as usize].value, rawrec::VALUE_NONE);
        assert_eq!(
            p.configs[slot::STATS_LATENCY as usize].value,
            rawrec::VALUE_EXECUTE
        );
        // 6.16+: dequeue's qtime from xpt_qtime; without it, classic.
        let l = fixture("6.16+");
        assert_eq!(
            plan(&l, &k, Tracepoints::Raw).configs[slot::DEQUEUE as usize].value,
            rawrec::VALUE_QTIME
        );
        let no_qtime = KernelOffsets {
            xpt_qtime: None,
            ..k.clone()
        };
        let p = plan(&l, &no_qtime, Tracepoints::Raw);
        assert!(!p.is_raw(slot::DEQUEUE as usize));
        assert!(
            p.kept_classic[0].contains("xpt_qtime"),
            "{:?}",
            p.kept_classic
        );
        // The proposed class field exists only in the record: classic.
        assert!(!plan(&fixture("class"), &k, Tracepoints::Raw).is_raw(slot::DEQUEUE as usize));
    }

    /// svc_xprt_enqueue's BUSY attempts are dropped on the flags argument
    /// where the prototype has one (6.6+), read from the transport before.
    #[test]
    fn enqueue_flags_argument_by_prototype() {
        let old = KernelOffsets::from_btf(&btf(160, 136, true)).unwrap();
        assert!(!old.enqueue_flags_arg());
        let mut k = old.clone();
        k.args[slot::ENQUEUE as usize] = Some(vec![ptr("svc_xprt"), Arg::Int(8)]);
        assert!(k.enqueue_flags_arg());
        for gen in ["6.6+", "6.16+", "debian-6.12", "debian-7.2"] {
            let p = plan(&fixture(gen), &k, Tracepoints::Raw);
            let enq = p.configs[slot::ENQUEUE as usize];
            assert_eq!(
                (enq.enabled, enq.flags_arg, enq.arg_is_rqst),
                (1, 1, 0),
                "{gen}"
            );
            assert_ne!(enq.drop_mask, 0, "{gen}");
            assert_eq!(p.configs[slot::DEQUEUE as usize].flags_arg, 0, "{gen}");
        }
        // 5.18-6.5: enqueue fires only on real enqueues, (xprt, rqst).
        for gen in ["5.18-6.5", "debian-6.1"] {
            let p = plan(&fixture(gen), &old, Tracepoints::Raw);
            let enq = p.configs[slot::ENQUEUE as usize];
            assert_eq!((enq.enabled, enq.flags_arg), (1, 0), "{gen}");
        }
        // --classic-tracepoints: nothing raw, the kernel's layout as is.
        let p = plan(&fixture("6.6+"), &k, Tracepoints::Classic);
        assert!((0..slot::COUNT).all(|i| !p.is_raw(i)));
        assert_eq!(p.decode, fixture("6.6+"));
    }

    /// Short records name their transport by pointer: known after its
    /// full record, forgotten at its svc_xprt_free, never guessed.
    #[test]
    fn short_records_need_a_full_one_first() {
        let k = KernelOffsets::from_btf(&btf(160, 136, true)).unwrap();
        let l = fixture("6.16+");
        let p = plan(&l, &k, Tracepoints::Raw);
        let f = TraceFields {
            flags: 1 << 3,
            netns: 7,
            value: 250,
            class: 0,
            client: Endpoint::V4 {
                ip: [10, 0, 0, 2],
                port: 700,
            },
            server: Endpoint::V4 {
                ip: [10, 0, 0, 1],
                port: 2049,
            },
        };
        let ptr: u64 = 0xffff_8880_1234_5600;
        let full = |s: u8, ts: u64| {
            let mut r = decode::kernel_record(&p.decode.slots[s as usize], s, ts, &f);
            r.raw_kind = rawrec::FULL;
            r.raw[rawrec::XPRT as usize..][..8].copy_from_slice(&ptr.to_ne_bytes());
            r.to_bytes()
        };
        let short = |s: u8, ts: u64, value: u64| {
            let mut r = nfsdtop_common::Record::new(ts, s);
            r.raw_kind = rawrec::SHORT;
            r.raw[rawrec::FLAGS as usize..][..8].copy_from_slice(&f.flags.to_ne_bytes());
            r.raw[rawrec::VALUE as usize..][..8].copy_from_slice(&value.to_ne_bytes());
            r.raw[rawrec::XPRT as usize..][..8].copy_from_slice(&ptr.to_ne_bytes());
            r.to_bytes()
        };
        let mut known = decode::KnownXprts::default();
        let mut run = |b: [u8; nfsdtop_common::Record::SIZE]| {
            let mut out = Vec::new();
            known.decode(&RecordView::new(&b).unwrap(), &p.decode, &mut out);
            assert!(out.len() <= 1, "{out:?}");
            out.pop()
        };
        // Unknown pointer: no event (counted by the caller as lost).
        assert_eq!(run(short(slot::DEQUEUE, 1, 9)), None);
        let enq = run(full(slot::ENQUEUE, 2)).unwrap();
        assert_eq!(enq.kind, EventKind::Enqueue);
        let deq = run(short(slot::DEQUEUE, 3, 40)).unwrap();
        assert_eq!(deq.xprt, enq.xprt, "the transport of the full record");
        assert_eq!(
            deq.kind,
            EventKind::Dequeue {
                qtime_ns: Some(40_000),
                class: None
            }
        );
        assert_eq!(deq.ts_ns, 3);
        let exec = run(short(slot::STATS_LATENCY, 4, 12)).unwrap();
        assert_eq!(
            exec.kind,
            EventKind::Executed {
                exec_ns: 12_000,
                requests: 1
            }
        );
        // A BUSY attempt is not an enqueue, short or not.
        let mut busy = short(slot::ENQUEUE, 5, 0);
        busy[nfsdtop_common::Record::RAW_AT + rawrec::FLAGS as usize] |= 1;
        assert_eq!(run(busy), None);
        let closed = run(full(slot::CLOSE, 6)).unwrap();
        assert_eq!((closed.kind, closed.xprt), (EventKind::Closed, enq.xprt));
        assert_eq!(run(short(slot::DEQUEUE, 7, 1)), None, "forgotten at free");
        assert_eq!(known.unknown[slot::DEQUEUE as usize], 2);
        assert!(known.is_empty());
    }

    /// Execution times folded in the kernel reach the agent once each:
    /// swept from the running totals of the claim the agent knows,
    /// settled by the record that ends the claim, never from a claim
    /// whose full record it has not decoded, and counted lost for one it
    /// never saw.
    #[test]
    fn folded_execution_totals_are_reported_once() {
        use nfsdtop_common::exec::ExecTotals;
        let k = KernelOffsets::from_btf(&btf(160, 136, false)).unwrap();
        let l = fixture("6.6+");
        let p = plan(&l, &k, Tracepoints::Raw);
        assert!(p.folds_exec());
        let client = |port| TraceFields {
            flags: 1 << 3,
            netns: 7,
            client: Endpoint::V4 {
                ip: [10, 0, 0, 2],
                port,
            },
            ..TraceFields::default()
        };
        let (a, b): (u64, u64) = (0xffff_8880_1234_5600, 0xffff_8880_9999_5600);
        // A full record of `ptr`, settling `settled`.
        let full = |s: u8, ts: u64, ptr: u64, port: u16, settled: ExecTotals| {
            let mut r = decode::kernel_record(&p.decode.slots[s as usize], s, ts, &client(port));
            r.raw_kind = rawrec::FULL;
            let mut put = |off: u16, v: u64| {
                r.raw[off as usize..][..8].copy_from_slice(&v.to_ne_bytes());
            };
            put(rawrec::XPRT, ptr);
            put(rawrec::EXEC_OWNER, settled.owner);
            put(rawrec::EXEC_GEN, settled.gen);
            put(rawrec::EXEC_US, settled.us);
            put(rawrec::EXEC_COUNT, settled.count);
            r.to_bytes()
        };
        let totals = |owner, gen, us, count| ExecTotals {
            owner,
            gen,
            us,
            count,
        };
        let exec = |ev: &crate::model::Event| match ev.kind {
            EventKind::Executed { exec_ns, requests } => (ev.xprt.client.port(), exec_ns, requests),
            _ => panic!("not an execution: {ev:?}"),
        };
        let mut known = decode::KnownXprts::default();
        let mut out = Vec::new();
        let decode = |known: &mut decode::KnownXprts, b: [u8; nfsdtop_common::Record::SIZE]| {
            let mut out = Vec::new();
            known.decode(&RecordView::new(&b).unwrap(), &p.decode, &mut out);
            out
        };
        // A's first record claims its entry (gen = the record's time).
        let ev = decode(
            &mut known,
            full(slot::DEQUEUE, 2, a, 700, ExecTotals::default()),
        );
        assert_eq!(ev.len(), 1);
        let entry = std::cell::Cell::new(totals(a, 2, 30, 2));
        let read = |i: u32| (i == nfsdtop_common::xprt_table::slot(a)).then(|| entry.get());
        known.sweep(read, 10, &mut out);
        assert_eq!(out.iter().map(exec).collect::<Vec<_>>(), [(700, 30_000, 2)]);
        out.clear();
        known.sweep(read, 11, &mut out);
        assert!(out.is_empty(), "nothing grew: {out:?}");
        // A claim whose full record is not decoded yet waits.
        entry.set(totals(a, 99, 500, 9));
        known.sweep(read, 12, &mut out);
        assert!(out.is_empty(), "{out:?}");
        entry.set(totals(a, 2, 50, 3));
        known.sweep(read, 13, &mut out);
        assert_eq!(out.iter().map(exec).collect::<Vec<_>>(), [(700, 20_000, 1)]);
        // B claims the entry: its full record settles A's claim first.
        let ev = decode(
            &mut known,
            full(slot::ENQUEUE, 20, b, 701, totals(a, 2, 80, 5)),
        );
        assert_eq!(
            ev.iter().take(1).map(exec).collect::<Vec<_>>(),
            [(700, 30_000, 2)]
        );
        assert_eq!((ev.len(), ev[1].kind), (2, EventKind::Enqueue));
        // B is freed: its free settles its own claim, then closes it.
        let ev = decode(
            &mut known,
            full(slot::CLOSE, 30, b, 701, totals(b, 20, 7, 1)),
        );
        assert_eq!(
            ev.iter().take(1).map(exec).collect::<Vec<_>>(),
            [(701, 7_000, 1)]
        );
        assert_eq!((ev.len(), ev[1].kind), (2, EventKind::Closed));
        // Totals of a claim never seen: counted as lost requests.
        let ev = decode(
            &mut known,
            full(slot::ENQUEUE, 40, a, 700, totals(b, 20, 9, 4)),
        );
        assert_eq!(ev.len(), 1);
        assert_eq!(known.unknown[slot::STATS_LATENCY as usize], 4);
    }

    /// What a raw program writes decodes to the event the classic record
    /// of the same hit does.
    #[test]
    fn raw_records_decode_like_classic_ones() {
        let k = KernelOffsets::from_btf(&btf(160, 136, true)).unwrap();
        let l = fixture("6.16+");
        let p = plan(&l, &k, Tracepoints::Raw);
        let f = TraceFields {
            flags: 1 << 3,
            netns: 4026531840,
            value: 250,
            class: 0,
            client: Endpoint::V6 {
                ip: [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
                port: 700,
            },
            server: Endpoint::V4 {
                ip: [10, 0, 0, 1],
                port: 2049,
            },
        };
        for s in [slot::ENQUEUE, slot::DEQUEUE, slot::STATS_LATENCY] {
            let i = s as usize;
            let classic = decode::kernel_record(&l.slots[i], s, 7, &f).to_bytes();
            let raw = decode::kernel_record(&p.decode.slots[i], s, 7, &f).to_bytes();
            let a = decode::decode(&RecordView::new(&classic).unwrap(), &l);
            let b = decode::decode(&RecordView::new(&raw).unwrap(), &p.decode);
            assert_eq!(a, b, "slot {s}");
            assert!(a.is_some());
        }
        // The synthetic layout puts the addresses where the program does.
        let raw = decode::kernel_record(&p.decode.slots[1], slot::DEQUEUE, 7, &f);
        let loc = u32::from_ne_bytes(raw.raw[8..12].try_into().unwrap());
        assert_eq!(loc & 0xffff, rawrec::SERVER_AT as u32);
        let ev = decode::decode(&RecordView::new(&raw.to_bytes()).unwrap(), &p.decode).unwrap();
        assert!(matches!(
            ev.kind,
            EventKind::Dequeue {
                qtime_ns: Some(250_000),
                ..
            }
        ));
    }
}
