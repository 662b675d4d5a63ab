//! The plan and the decoding where svc_stats_latency's classic program
//! does its raw program's work (`nfsdtop_common::HOSTED`).

use super::tests::{btf, fixture};
use super::*;
use crate::model::Endpoint;
use crate::source::live::decode::{self, TraceFields, FORGET_AFTER_NS};
use nfsdtop_common::RecordView;

/// A 6.16+ kernel's layout, and offsets whose BTF has the thread's.
fn kernel() -> (Layout, KernelOffsets) {
    let k = KernelOffsets {
        thread: Some((1200, 1208)),
        ..KernelOffsets::from_btf(&btf(160, 136, true)).unwrap()
    };
    (fixture("6.16+"), k)
}

/// On a kernel that preempts raw programs: every slot classic, and
/// svc_stats_latency's classic program doing the raw one's work (reading
/// the request through the nfsd thread, folding known transports'
/// requests) where the BTF has the thread's offsets; without them, plain
/// classic.
#[test]
fn hosted_plan_on_a_preempting_kernel() {
    let (l, k) = kernel();
    let p = RawPlan::hosted(&l, &k, "preempts".into());
    let s = Slot::StatsLatency;
    assert!(Slot::ALL.iter().all(|&x| !p.is_raw(x)));
    assert!(p.is_hosted(s) && !p.is_hosted(Slot::Dequeue));
    let c = &p.configs[s as usize];
    assert_eq!(
        (c.task_kthread, c.kthread_data, c.rq_xprt, c.value),
        (1200, 1208, 40, rawrec::VALUE_EXECUTE)
    );
    assert_eq!((c.short_records, c.fold_exec, c.fold_procs), (1, 1, 1));
    assert!(p.folds_exec() && p.measures_bytes() && p.measures_procedures());
    // Its classic program stays attached; its records decode as raw ones.
    assert_eq!(p.classic_configs(&l)[s as usize], l.slots[s as usize]);
    assert_eq!(p.decode.slots[s as usize].flags_off, rawrec::LENS);
    assert_eq!(p.kept_classic, ["preempts"]);
    let no_thread = KernelOffsets { thread: None, ..k };
    let q = RawPlan::hosted(&l, &no_thread, "preempts".into());
    assert_eq!(q.configs, RawPlan::none(&l).configs);
    assert!(
        q.kept_classic[1].contains("worker_private"),
        "{:?}",
        q.kept_classic
    );
}

/// With svc_stats_latency hosted by its classic program there is no raw
/// svc_xprt_free record: a transport whose claim on its entry ended is
/// forgotten once `FORGET_AFTER_NS` has passed, and not before (a record
/// in flight may still settle it).
#[test]
fn hosted_transports_are_forgotten_after_their_claims_end() {
    use nfsdtop_common::exec::ExecTotals;
    let (l, k) = kernel();
    let p = RawPlan::hosted(&l, &k, "preempts".into());
    let s = Slot::StatsLatency;
    let full = |ts, ptr, port, settled| full_record(&p, ts, ptr, port, settled);
    let settled = totals;
    let (a, b, c): (u64, u64, u64) = (0xffff_8880_1234_5600, 0xffff_8880_1234_9a00, 0x77);
    let lost = |known: &decode::KnownXprts| known.unknown[s as usize];
    for forget in [true, false] {
        let mut known = decode::KnownXprts::default();
        known.forget_ended_claims = forget;
        let mut out = Vec::new();
        let mut decode = |known: &mut decode::KnownXprts,
                          rec: [u8; nfsdtop_common::Record::SIZE]| {
            known.decode(&RecordView::new(&rec).unwrap(), &p.decode, &mut out);
        };
        decode(&mut known, full(2, a, 700, ExecTotals::default()));
        // b holds a's entry now.
        let read = |_| Some(settled(b, 50, 0));
        let t0 = 100;
        known.sweep(read, &p.decode, t0, &mut Vec::new());
        known.sweep(read, &p.decode, t0 + FORGET_AFTER_NS - 1, &mut Vec::new());
        // b's full record, in flight until now, settles a's claim.
        decode(&mut known, full(50, b, 701, settled(a, 2, 3)));
        assert_eq!(lost(&known), 0);
        known.sweep(read, &p.decode, t0 + FORGET_AFTER_NS, &mut Vec::new());
        // A record settling a's claim now finds a forgotten (or not).
        decode(&mut known, full(60, c, 702, settled(a, 2, 4)));
        assert_eq!(lost(&known), if forget { 4 } else { 0 }, "forget {forget}");
    }
}

/// A full svc_stats_latency record of the hosted plan `p` at `ts`, of the
/// transport at `ptr` (client 10.0.0.2:`port`), settling `settled`.
fn full_record(
    p: &RawPlan,
    ts: u64,
    ptr: u64,
    port: u16,
    settled: nfsdtop_common::exec::ExecTotals,
) -> [u8; nfsdtop_common::Record::SIZE] {
    let s = Slot::StatsLatency;
    let f = TraceFields {
        netns: 7,
        client: Endpoint::V4 {
            ip: [10, 0, 0, 2],
            port,
        },
        ..TraceFields::default()
    };
    let mut r = decode::kernel_record(&p.decode.slots[s as usize], s, ts, &f);
    r.raw_kind = rawrec::FULL;
    for (off, v) in [
        (rawrec::XPRT, ptr),
        (rawrec::EXEC_OWNER, settled.owner),
        (rawrec::EXEC_GEN, settled.gen),
        (rawrec::EXEC_COUNT, settled.count),
    ] {
        r.raw[off as usize..][..8].copy_from_slice(&v.to_ne_bytes());
    }
    r.to_bytes()
}

/// `EXEC_TOTALS` entry of the claim (`owner`, `gen`), `count` requests.
fn totals(owner: u64, gen: u64, count: u64) -> nfsdtop_common::exec::ExecTotals {
    nfsdtop_common::exec::ExecTotals {
        owner,
        gen,
        count,
        ..Default::default()
    }
}

/// The transport of a hosted plan at [`CLAIMED`], sent in full at time 2
/// (so its claim's gen is 2) and known to `KnownXprts` that forget ended
/// claims; and its key.
fn claimed() -> (RawPlan, decode::KnownXprts, crate::model::XprtKey) {
    let (l, k) = kernel();
    let p = RawPlan::hosted(&l, &k, "preempts".into());
    let mut known = decode::KnownXprts::default();
    known.forget_ended_claims = true;
    let mut out = Vec::new();
    let rec = full_record(&p, 2, CLAIMED, 700, totals(0, 0, 0));
    known.decode(&RecordView::new(&rec).unwrap(), &p.decode, &mut out);
    let key = out[0].xprt;
    (p, known, key)
}
const CLAIMED: u64 = 0xffff_8880_1234_5600;

/// A read of [`CLAIMED`]'s entry holding its claim with `count` requests.
fn claim_of(count: u64) -> impl Fn(u32) -> Option<nfsdtop_common::exec::ExecTotals> {
    move |_| Some(totals(CLAIMED, 2, count))
}

/// The requests of `Executed` events in `out`, and the last one's time.
fn executed(out: &[crate::model::Event]) -> (u64, u64) {
    out.iter().fold((0, 0), |(n, ts), e| match e.kind {
        crate::model::EventKind::Executed { requests, .. } => (n + requests, e.ts_ns),
        _ => (n, ts),
    })
}

/// A transport's close comes as a classic record where the requests are
/// folded by svc_stats_latency's classic program: what was folded since
/// the last sweep is reported at the close, before it, not by a later
/// sweep (which would bring the transport back after its close); a
/// transport never sent in full settles nothing.
#[test]
fn a_hosted_close_reports_what_was_folded_before_it() {
    let (p, mut known, key) = claimed();
    let mut swept = Vec::new();
    known.sweep(claim_of(3), &p.decode, 10, &mut swept);
    assert_eq!(executed(&swept), (3, 10));
    // Two more folded, then the close.
    let mut at_close = Vec::new();
    known.settle_closed(&key, claim_of(5), &p.decode, 20, &mut at_close);
    assert_eq!(executed(&at_close), (2, 20));
    let mut later = Vec::new();
    known.sweep(claim_of(5), &p.decode, 30, &mut later);
    assert!(later.is_empty(), "{later:?}");
    let other = crate::model::XprtKey { netns: 8, ..key };
    known.settle_closed(&other, claim_of(9), &p.decode, 40, &mut later);
    assert!(later.is_empty(), "{later:?}");
}

/// A sweep that reads a transport's entry while another claim is being
/// written (or before its own is) is not the end of its claim: the claim
/// read again later keeps it, however long after, so a second such read
/// does not forget it at once.
#[test]
fn a_read_while_the_entry_changes_hands_is_not_an_end() {
    let (p, mut known, _) = claimed();
    let changing = |_| Some(totals(0, 0, 0));
    let t0 = 100;
    known.sweep(changing, &p.decode, t0, &mut Vec::new());
    known.sweep(claim_of(1), &p.decode, t0 + 1, &mut Vec::new());
    known.sweep(
        changing,
        &p.decode,
        t0 + 5 * FORGET_AFTER_NS,
        &mut Vec::new(),
    );
    let mut out = Vec::new();
    known.sweep(
        claim_of(4),
        &p.decode,
        t0 + 5 * FORGET_AFTER_NS + 1,
        &mut out,
    );
    assert_eq!(executed(&out).0, 3, "still known: {out:?}");
}

/// `--keep-raw-tracepoints` on a kernel that preempts raw programs: the
/// default's raw plan, marked kept (its misses are then counted as lost
/// and nothing is handed over); without it, the raw plan with twin
/// programs on the slots that have a rescue program; on a kernel that
/// does not preempt them, the flag changes nothing.
#[test]
fn raw_tracepoints_are_kept_where_asked_on_a_preempting_kernel() {
    use crate::source::live::{attach::plan_for, LiveOptions};
    let (l, k) = kernel();
    let keep = LiveOptions {
        keep_raw: true,
        ..LiveOptions::default()
    };
    let preempts = || Some("preempts".to_string());
    let kept = plan_for(&keep, &l, Ok(k.clone()), preempts());
    let raw = plan(&l, &k, Tracepoints::Raw);
    assert!(kept.kept_raw);
    assert_eq!(
        (&kept.configs, &kept.decode),
        (&raw.configs, &raw.decode),
        "the default's raw plan"
    );
    assert!(kept.is_raw(Slot::Dequeue) && kept.is_raw(Slot::StatsLatency));
    assert!(Slot::ALL.iter().all(|&s| !kept.is_twinned(s)));
    let twins = plan_for(&LiveOptions::default(), &l, Ok(k.clone()), preempts());
    assert!(!twins.kept_raw && twins.twinned.as_deref() == Some("preempts"));
    for s in Slot::ALL {
        let rescued = matches!(s, Slot::Dequeue | Slot::StatsLatency);
        assert_eq!(twins.is_twinned(s), rescued, "{s:?}");
        assert_eq!(twins.is_raw(s), raw.is_raw(s), "{s:?}");
        let mut c = twins.configs[s as usize];
        c.twin = 0;
        assert_eq!(c, raw.configs[s as usize], "otherwise the raw plan: {s:?}");
    }
    assert!(!calm_twinned(&l, &k));
    let calm = plan_for(&keep, &l, Ok(k.clone()), None);
    assert!(!calm.kept_raw);
    assert_eq!(calm, raw);
    // Without the kernel's BTF the flag cannot keep anything raw.
    let no_btf = plan_for(&keep, &l, Err("no BTF".into()), preempts());
    assert!(!no_btf.kept_raw && Slot::ALL.iter().all(|&s| !no_btf.is_raw(s)));
}

/// On a kernel that does not preempt raw programs, no twins.
fn calm_twinned(l: &Layout, k: &KernelOffsets) -> bool {
    use crate::source::live::{attach::plan_for, LiveOptions};
    let p = plan_for(&LiveOptions::default(), l, Ok(k.clone()), None);
    p.twinned.is_some() || Slot::ALL.iter().any(|&s| p.is_twinned(s))
}
