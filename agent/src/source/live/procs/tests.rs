//! Row claims against a plain array standing in for `PROC_ROWS`, with the
//! BPF program's folds done by hand: counts per procedure name exactly as
//! folded, a row settled at its transport's free and when its transport
//! loses its `EXEC_TOTALS` claim, never taken from a live transport.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::*;
use crate::model::Endpoint;

struct Array(Arc<Vec<AtomicU64>>);

impl Words for Array {
    fn load(&self, w: usize) -> u64 {
        self.0[w].load(Ordering::Relaxed)
    }
    fn store(&self, w: usize, v: u64) {
        self.0[w].store(v, Ordering::Relaxed)
    }
}

/// A zeroed stand-in for `PROC_ROWS`, shared with the claims under test.
fn rows() -> Arc<Vec<AtomicU64>> {
    Arc::new(
        (0..ROWS as usize * ROW_WORDS)
            .map(|_| AtomicU64::new(0))
            .collect(),
    )
}

fn key(last: u8) -> XprtKey {
    XprtKey {
        netns: 1,
        server: Endpoint::V4 {
            ip: [10, 0, 0, 1],
            port: 2049,
        },
        client: Endpoint::V4 {
            ip: [10, 0, 0, last],
            port: 700,
        },
    }
}

/// What the raw program does for a request of procedure index `idx` of
/// the transport at `ptr` whose EXEC_TOTALS claim is `gen`: fold it if
/// its row is claimed for that claim (true), else send a record (false).
fn fold(mem: &[AtomicU64], ptr: u64, gen: u64, idx: usize, us: u64) -> bool {
    let base = procs::row(xprt_table::slot(ptr)) as usize * ROW_WORDS;
    let owned =
        mem[base].load(Ordering::Relaxed) == ptr && mem[base + 1].load(Ordering::Relaxed) == gen;
    if owned {
        mem[base + 2 + 2 * idx].fetch_add(1, Ordering::Relaxed);
        mem[base + 3 + 2 * idx].fetch_add(us, Ordering::Relaxed);
    }
    owned
}

/// (name, requests, exec_ns) per Procedure event, in order.
fn procedures(out: &[Event]) -> Vec<(String, u64, u64, u8)> {
    out.iter()
        .map(|e| match e.kind {
            EventKind::Procedure {
                name,
                requests,
                exec_ns,
            } => {
                let Endpoint::V4 { ip, .. } = e.xprt.client else {
                    panic!("{e:?}")
                };
                (name.to_string(), requests, exec_ns, ip[3])
            }
            _ => panic!("not a procedure: {e:?}"),
        })
        .collect()
}

#[test]
fn claimed_rows_count_each_procedure_and_settle_at_the_free() {
    let mem = rows();
    // The kernel's EXEC_TOTALS claims: entry -> (owner, gen).
    let exec: Rc<RefCell<FxHashMap<u32, (u64, u64)>>> = Rc::default();
    let lookup = |e: &Rc<RefCell<FxHashMap<u32, (u64, u64)>>>| {
        let e = e.clone();
        move |i: u32| e.borrow().get(&i).copied()
    };
    let mut c = RowClaims::default();
    c.set_memory(Box::new(Array(mem.clone())));
    let a = 0xffff_8880_0000_1000u64;
    let b = a + (u64::from(ROWS) << 6);
    // Two transports whose EXEC_TOTALS entries differ but share a row.
    assert_ne!(xprt_table::slot(a), xprt_table::slot(b));
    assert_eq!(
        procs::row(xprt_table::slot(a)),
        procs::row(xprt_table::slot(b))
    );
    exec.borrow_mut().insert(xprt_table::slot(a), (a, 100));
    exec.borrow_mut().insert(xprt_table::slot(b), (b, 200));
    // Before the claim nothing folds: the requests go in records.
    assert!(!fold(&mem, a, 100, 6, 50));
    let mut out = Vec::new();
    c.want(a, 100, key(1));
    c.want(b, 200, key(2));
    c.claim(lookup(&exec), 1, &mut out);
    assert!(out.is_empty());
    assert_eq!(c.claimed(), 1, "a live transport's row is not taken");
    assert!(fold(&mem, a, 100, 6, 50)); // READ
    assert!(fold(&mem, a, 100, 6, 70));
    assert!(fold(&mem, a, 100, 7, 10)); // WRITE
    assert!(!fold(&mem, b, 200, 6, 1), "b has no row");
    assert!(
        !fold(&mem, a, 99, 6, 1),
        "an older claim of a's pointer does not fold"
    );
    c.sweep(lookup(&exec), 2, &mut out);
    assert_eq!(
        procedures(&out),
        [
            ("READ".into(), 2, 120_000, 1),
            ("WRITE".into(), 1, 10_000, 1)
        ]
    );
    out.clear();
    c.sweep(lookup(&exec), 3, &mut out);
    assert!(out.is_empty(), "nothing grew");
    // a is freed: its last counts, then its row is free for b.
    assert!(fold(&mem, a, 100, 1, 5)); // GETATTR
    exec.borrow_mut().remove(&xprt_table::slot(a));
    c.settle(a, 4, &mut out);
    assert_eq!(procedures(&out), [("GETATTR".into(), 1, 5_000, 1)]);
    out.clear();
    c.want(b, 200, key(2));
    c.claim(lookup(&exec), 5, &mut out);
    assert!(fold(&mem, b, 200, 23, 9)); // COMPOUND
    assert!(!fold(&mem, a, 100, 1, 5));
    // b loses its EXEC_TOTALS entry to another transport: its row is
    // settled (with what it had) and released at the next sweep.
    exec.borrow_mut()
        .insert(xprt_table::slot(b), (0xdead_0000, 300));
    c.sweep(lookup(&exec), 6, &mut out);
    assert_eq!(procedures(&out), [("COMPOUND".into(), 1, 9_000, 2)]);
    assert_eq!(c.claimed(), 0);
}

#[test]
fn without_memory_nothing_is_claimed() {
    let mut c = RowClaims::default();
    c.want(1 << 12, 1, key(1));
    let mut out = Vec::new();
    c.claim(|_| Some((1 << 12, 1)), 1, &mut out);
    assert_eq!((c.claimed(), out.len()), (0, 0));
}

/// The program submits a full record before it writes the claim: a want
/// decoded in between waits for later passes, and gets its row once the
/// claim is there; a want whose claim was superseded, or never comes, is
/// dropped (after `WANT_TRIES` passes).
#[test]
fn a_want_decoded_before_its_claim_is_written_gets_its_row_later() {
    let mem = rows();
    let entry: Rc<RefCell<(u64, u64)>> = Rc::new(RefCell::new((0xdead_0000, 50)));
    let lookup = |e: &Rc<RefCell<(u64, u64)>>| {
        let e = e.clone();
        move |_: u32| Some(*e.borrow())
    };
    let mut c = RowClaims::default();
    c.set_memory(Box::new(Array(mem.clone())));
    let a = 0xffff_8880_0000_1000u64;
    let mut out = Vec::new();
    c.want(a, 100, key(1));
    // The entry still shows the last owner's claim (gen 50), then the
    // owner cleared with this claim's gen written: not yet, twice.
    c.claim(lookup(&entry), 1, &mut out);
    *entry.borrow_mut() = (0, 100);
    c.claim(lookup(&entry), 2, &mut out);
    assert_eq!(c.claimed(), 0);
    *entry.borrow_mut() = (a, 100);
    c.claim(lookup(&entry), 3, &mut out);
    assert_eq!(c.claimed(), 1, "claimed once the claim is written");
    assert!(fold(&mem, a, 100, 6, 50));
    c.sweep(lookup(&entry), 4, &mut out);
    assert_eq!(procedures(&out), [("READ".into(), 1, 50_000, 1)]);

    // Superseded (a later gen holds the entry): dropped at once.
    let b = a + 8;
    let mut c = RowClaims::default();
    c.set_memory(Box::new(Array(mem.clone())));
    *entry.borrow_mut() = (0xdead_0000, 300);
    c.want(b, 200, key(2));
    c.claim(lookup(&entry), 5, &mut out);
    *entry.borrow_mut() = (b, 200);
    c.claim(lookup(&entry), 6, &mut out);
    assert_eq!(c.claimed(), 0, "a superseded claim is not waited for");

    // Never written: waited for WANT_TRIES passes, then dropped.
    *entry.borrow_mut() = (0, 50);
    c.want(b, 200, key(2));
    for pass in 0..=WANT_TRIES {
        c.claim(lookup(&entry), 7 + u64::from(pass), &mut out);
    }
    *entry.borrow_mut() = (b, 200);
    c.claim(lookup(&entry), 100, &mut out);
    assert_eq!(
        c.claimed(),
        0,
        "a want is waited for a bounded number of passes"
    );
}
