//! The thread programs (nfsd_dynthread_start and _kill, see
//! `nfsdtop_common::threads`) on this machine's real kernel, with
//! `sched/sched_process_exec` standing in for nfsd's event: each exec
//! is a "thread start" whose pool is the new process's pid (the record's
//! `pid`) and whose count is its `old_pid`. The test's own children are
//! known; other processes exec too, so it asserts that each of its own
//! comes through, and that the kernel's count is never below what the
//! ring delivered.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use nfsdtop_agent::source::live::format::Format;
use nfsdtop_agent::source::live::threads::{Fields, Threads};
use nfsdtop_agent::source::live::{bpf, drain};
use nfsdtop_common::{Record, RecordView};

// Shared with the other live tests, which use more of it.
#[allow(dead_code)]
mod ring;
use ring::{ready, spawn_true, EVENT, TRACEFS};

/// A format of nfsd's shape at sched_process_exec's offsets: the pool is
/// `pid`, the count `old_pid`, the bounds `pid` again.
fn stand_in_fields() -> Fields {
    let text = std::fs::read_to_string(Path::new(TRACEFS).join(EVENT)).unwrap();
    let f = Format::parse(&text).unwrap();
    let at = |name: &str| f.field(name).unwrap().offset;
    let line = |name: &str, off: u32| {
        format!("\tfield:unsigned int {name};\toffset:{off};\tsize:4;\tsigned:0;\n")
    };
    let nfsd_shape = format!(
        "name: stand_in\nID: 1\nformat:\n{}{}{}{}\nprint fmt: \"\"\n",
        line("pool_id", at("pid")),
        line("nrthreads", at("old_pid")),
        line("nrthrmin", at("pid")),
        line("nrthrmax", at("pid")),
    );
    Fields::parse(&nfsd_shape).unwrap()
}

#[test]
fn thread_programs_count_and_send_each_hit() {
    if !ready("thread_programs_count_and_send_each_hit") {
        return;
    }
    let mut ebpf =
        bpf::open(1 << 20, Default::default(), bpf::Hosting::None).expect("load the BPF object");
    let drain = drain::Drain::start(&mut ebpf, Duration::from_millis(10), 1 << 20).unwrap();
    let threads = Threads::attach_to(
        &mut ebpf,
        stand_in_fields(),
        &[("nfsd_dynthread_start", "sched", "sched_process_exec")],
        3,
    )
    .expect("the kernel takes the thread program");
    let children = spawn_true(20);

    // Every child exec'd before spawn_true returned: its record is in the
    // ring, drained within the period.
    let mut pools = BTreeSet::new();
    let mut delivered = 0u64;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !children.is_subset(&pools) && Instant::now() < deadline {
        let Ok(chunk) = drain.recv_timeout(Duration::from_millis(100)) else {
            continue;
        };
        for raw in chunk.chunks_exact(Record::SIZE) {
            let r = RecordView::new(raw).unwrap();
            let e = threads.fields().decode(&r).expect("a thread record");
            assert!(e.start, "the start program's records are starts");
            assert!(threads.take(&r));
            pools.insert(e.pool);
            delivered += 1;
        }
    }
    let missing: Vec<_> = children.difference(&pools).collect();
    assert!(missing.is_empty(), "no record of the children {missing:?}");
    let read = threads.read().expect("the ledger");
    assert!(
        read.starts >= 20,
        "the kernel counted {} starts",
        read.starts
    );
    assert!(
        delivered + read.lost <= read.starts,
        "delivered {delivered} + lost {} > counted {}: a record without its count",
        read.lost,
        read.starts
    );
    assert_eq!(read.exits, 0, "no exit program attached");
    // Each record was a first event of its "pool": one thread more each,
    // from the 3 the ledger started with.
    assert!(
        read.now >= 3 + 20,
        "the ledger runs {} threads after {} starts",
        read.now,
        delivered
    );
}
