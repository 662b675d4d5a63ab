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
    let full = |ts: u64, ptr: u64, port: u16, settled: ExecTotals| {
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
    };
    let settled = |owner, gen, count| ExecTotals {
        owner,
        gen,
        count,
        ..ExecTotals::default()
    };
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
