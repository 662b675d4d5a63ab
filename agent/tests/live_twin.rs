//! Twin programs (`nfsdtop_common::twin`) on this machine's real kernel,
//! without nfsd: each twinned slot's raw program and its rescue program
//! on the stand-in tracepoint `sched_process_exec`, whose hits come in the
//! exec'ing thread's own context as nfsd's come in its threads'. With
//! both attached each hit is done once, by the first; with only the
//! rescue program attached (as if the kernel skipped the first for every
//! hit) each hit is done once, by the rescue, and counted as rescued.
//!
//! Needs root, tracefs and /sys/kernel/btf/vmlinux (see live_ring.rs for
//! the private mount namespace).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use nfsdtop_agent::source::live::btf::Btf;
use nfsdtop_agent::source::live::{bpf, drain, raw};
use nfsdtop_common::{twin, RawConfig, Record, RecordView, Slot};

// Shared with live_ring.rs and live_raw.rs; these tests use a part of it.
#[allow(dead_code)]
mod ring;
use ring::{ready, spawn_true, stable};

const CHILDREN: usize = 20;

/// The slots that have twins.
fn twinned() -> impl Iterator<Item = Slot> {
    Slot::ALL
        .into_iter()
        .filter(|&s| raw::rescue_program_name(s).is_some())
}

/// Records per spawned child, and slot `s`'s counters, with the slot's
/// own program attached or not (its rescue program always is).
fn run(
    s: Slot,
    first_attached: bool,
) -> Option<(BTreeMap<u32, u32>, BTreeSet<u32>, bpf::SlotCounts)> {
    let dir = Path::new("/sys/kernel/btf");
    if !dir.join("vmlinux").exists() {
        nfsdtop_agent::testing::skip("no /sys/kernel/btf/vmlinux");
        return None;
    }
    let btf = Btf::load(dir, None).expect("this kernel's BTF");
    let pid_at = btf
        .offset_of("task_struct", &["pid"])
        .expect("task_struct.pid");
    let mut ebpf =
        bpf::open(1 << 20, Default::default(), bpf::Hosting::Twinned).expect("load the BPF object");
    let counters = bpf::Counters::map(&ebpf).unwrap();
    let drain = drain::Drain::start(&mut ebpf, Duration::from_millis(10), 1 << 20).unwrap();
    let mut configs = [RawConfig::default(); Slot::COUNT];
    // Argument 0 (the task) stands for the transport; its pid is read as
    // the "flags", so that each record names its child.
    configs[s as usize] = RawConfig {
        enabled: 1,
        xpt_flags: pid_at,
        need_mask: u64::MAX,
        twin: 1,
        ..RawConfig::default()
    };
    bpf::write_raw_config(&mut ebpf, &configs).unwrap();
    if first_attached {
        bpf::attach_raw(&mut ebpf, s, "sched_process_exec").unwrap();
    }
    let rescue = raw::rescue_program_name(s).expect("a twinned slot");
    bpf::attach_raw_named(&mut ebpf, rescue, "sched_process_exec").unwrap();

    let spawned = spawn_true(CHILDREN);
    let mut records: BTreeMap<u32, u32> = BTreeMap::new();
    // Each child exec'd before spawn_true returned: its record is in the
    // ring, in exec order; a second record of a child would come before
    // the last child's first.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !spawned.iter().all(|p| records.contains_key(p)) && Instant::now() < deadline {
        let Ok(chunk) = drain.recv_timeout(Duration::from_millis(100)) else {
            continue;
        };
        for item in chunk.chunks_exact(Record::SIZE) {
            let r = RecordView::new(item).unwrap();
            assert_eq!(r.slot(), Some(s));
            let pid = r.field(16, 4).unwrap() as u32;
            if spawned.contains(&pid) {
                *records.entry(pid).or_default() += 1;
            }
        }
    }
    let counts = stable(|| counters.read())[s as usize];
    Some((records, spawned, counts))
}

/// Every child's exec reached the ring, each once.
fn each_exec_once(s: Slot, records: &BTreeMap<u32, u32>, spawned: &BTreeSet<u32>) {
    assert_eq!(
        &records.keys().copied().collect::<BTreeSet<_>>(),
        spawned,
        "{s:?}: every exec reached the ring"
    );
    assert!(
        records.values().all(|&n| n == 1),
        "{s:?}: no hit done twice: {records:?}"
    );
}

#[test]
fn with_both_twins_the_first_does_each_hit_once() {
    if !ready("with_both_twins_the_first_does_each_hit_once") {
        return;
    }
    assert_eq!(twinned().count(), twin::LANES as usize);
    for s in twinned() {
        let Some((records, spawned, counts)) = run(s, true) else {
            return;
        };
        each_exec_once(s, &records, &spawned);
        assert_eq!(
            counts.rescued, 0,
            "{s:?}: nothing to rescue where the kernel skipped nothing: {counts:?}"
        );
    }
}

#[test]
fn a_hit_skipped_for_the_first_is_done_by_the_rescue() {
    if !ready("a_hit_skipped_for_the_first_is_done_by_the_rescue") {
        return;
    }
    for s in twinned() {
        let Some((records, spawned, counts)) = run(s, false) else {
            return;
        };
        each_exec_once(s, &records, &spawned);
        // Other processes exec too: every hit here was rescued.
        assert!(
            counts.rescued >= CHILDREN as u64 && counts.rescued == counts.submitted,
            "{s:?}: {counts:?}"
        );
    }
}

/// The table of the threads' marks (`TWIN`, 8 bytes an entry, one lane of
/// 65,536 per twinned slot: 2 MiB at full size) is created at full size
/// only where twins run: the kernel's own record of the map says so.
#[test]
fn twin_table_is_full_size_only_where_twins_run() {
    if !ready("twin_table_is_full_size_only_where_twins_run") {
        return;
    }
    for (hosting, entries) in [
        (bpf::Hosting::None, 1),
        (bpf::Hosting::Twinned, twin::ENTRIES),
    ] {
        let ebpf = bpf::open(1 << 20, Default::default(), hosting).expect("load the BPF object");
        let Some(aya::maps::Map::Array(map)) = ebpf.map("TWIN") else {
            panic!("the object has an array TWIN");
        };
        let info = map.info().expect("the kernel's information on TWIN");
        assert_eq!(info.max_entries(), entries, "{hosting:?}");
        assert_eq!(info.value_size(), 8);
    }
    assert_eq!(twin::ENTRIES as usize * 8, 2 << 20, "four lanes of 512 KiB");
}

/// A thread's mark is one word: its id and whether the first ran, so a
/// thread sharing the entry never reads as this one.
#[test]
fn marks_name_their_thread() {
    assert_ne!(twin::mark(7, true), twin::mark(7, false));
    assert_ne!(
        twin::mark(7, false),
        twin::mark(7 + twin::THREAD_ENTRIES, false)
    );
    assert_eq!(
        twin::index(Slot::Dequeue, 7),
        twin::index(Slot::Dequeue, 7 + twin::THREAD_ENTRIES)
    );
}
