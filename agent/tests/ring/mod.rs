//! What the tests of the BPF programs on this machine's real kernel
//! (live_ring.rs: the classic programs and the ring; live_raw.rs: the raw
//! programs) share: the stand-in tracepoint `sched/sched_process_exec`,
//! a slot config and layout pointed at it, the private-mount-namespace
//! re-run where tracefs is not mounted, and counters read when they hold
//! still.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use nfsdtop_agent::source::live::{format::Format, host, Layout};
use nfsdtop_common::{Slot, SlotConfig, OFF_NONE};

pub const TRACEFS: &str = "/sys/kernel/tracing";
pub const EVENT: &str = "events/sched/sched_process_exec/format";
pub const REEXEC: &str = "NFSDTOP_TEST_IN_PRIVATE_MOUNTNS";

/// True: run the test body here. False: skipped (reason printed) or run
/// in a child process (whose result was asserted).
pub fn ready(test: &str) -> bool {
    if !host::Caps::current().sufficient() {
        nfsdtop_agent::testing::skip("needs CAP_BPF+CAP_PERFMON or CAP_SYS_ADMIN");
        return false;
    }
    if Path::new(TRACEFS).join(EVENT).exists() {
        return true;
    }
    if std::env::var_os(REEXEC).is_some() {
        nfsdtop_agent::testing::skip("tracefs could not be mounted in a private mount namespace");
        return false;
    }
    if !Path::new(TRACEFS).is_dir() {
        nfsdtop_agent::testing::skip(&format!("{TRACEFS} does not exist on this host"));
        return false;
    }
    let exe = std::env::current_exe().expect("test binary path");
    let out = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mount -t tracefs nodev {TRACEFS} && exec \"$0\" {test} --exact --nocapture --test-threads=1"
        ))
        .arg(&exe)
        .env(REEXEC, "1")
        .output();
    match out {
        Ok(o) => {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            println!("(ran in a private mount namespace)\n{text}");
            if text.contains("mount: ") && !o.status.success() && !text.contains("test result") {
                nfsdtop_agent::testing::skip("cannot mount tracefs here");
                return false;
            }
            assert!(
                o.status.success(),
                "the test failed in its mount namespace:\n{text}"
            );
        }
        Err(e) => nfsdtop_agent::testing::skip(&format!("cannot run unshare ({e})")),
    }
    false
}

/// A slot config reading sched_process_exec: `filename` as the client
/// address, `pid` as netns and value, `old_pid` as flags.
#[allow(dead_code)] // not live_folded.rs
pub fn exec_config(drop_mask: u64) -> SlotConfig {
    let text = std::fs::read_to_string(Path::new(TRACEFS).join(EVENT)).unwrap();
    let f = Format::parse(&text).unwrap();
    let filename = f.field("filename").unwrap();
    let pid = f.field("pid").unwrap();
    let old_pid = f.field("old_pid").unwrap();
    assert!(filename.data_loc);
    SlotConfig {
        enabled: 1,
        server_off: OFF_NONE,
        client_off: filename.offset as u16,
        flags_off: old_pid.offset as u16,
        flags_size: old_pid.size as u16,
        netns_off: pid.offset as u16,
        netns_size: pid.size as u16,
        value_off: pid.offset as u16,
        value_size: pid.size as u16,
        class_off: OFF_NONE,
        class_size: 0,
        drop_mask,
        need_mask: 0,
    }
}

pub fn spawn_true(n: usize) -> BTreeSet<u32> {
    (0..n)
        .map(|_| {
            let mut c = Command::new("/bin/true").spawn().expect("spawn /bin/true");
            let pid = c.id();
            c.wait().unwrap();
            pid
        })
        .collect()
}

/// Counters read twice in a row with the same result: other processes on
/// the machine exec too, and one read is several syscalls.
pub fn stable<T: PartialEq>(mut read: impl FnMut() -> T) -> T {
    let mut last = read();
    for _ in 0..1000 {
        let now = read();
        if now == last {
            return now;
        }
        last = now;
    }
    panic!("the counters never held still");
}

/// The fixture 6.6+ layout with only the dequeue slot in use, pointed at
/// sched_process_exec.
#[allow(dead_code)] // not live_raw.rs
pub fn exec_layout() -> Layout {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/formats/6.6+");
    let mut l = Layout::from_tracefs(&fixture).unwrap();
    l.slots = [SlotConfig::DISABLED; Slot::COUNT];
    l.events = Default::default();
    l.slots[Slot::Dequeue as usize] = exec_config(0);
    l.events[Slot::Dequeue as usize] = Some("sched_process_exec".into());
    l
}

/// This kernel's BTF, whose `struct task_struct` stands in for nfsd's
/// structs here; None (a skip, which fails where BPF is required) without
/// /sys/kernel/btf/vmlinux.
#[allow(dead_code)] // the raw programs' tests only
pub fn task_btf() -> Option<nfsdtop_agent::source::live::btf::Btf> {
    let dir = Path::new("/sys/kernel/btf");
    if !dir.join("vmlinux").exists() {
        nfsdtop_agent::testing::skip("no /sys/kernel/btf/vmlinux");
        return None;
    }
    Some(nfsdtop_agent::source::live::btf::Btf::load(dir, None).expect("this kernel's BTF"))
}

/// The offset of `path` inside `struct task_struct`.
#[allow(dead_code)] // the raw programs' tests only
pub fn task_offset(btf: &nfsdtop_agent::source::live::btf::Btf, path: &[&str]) -> u32 {
    btf.offset_of("task_struct", path)
        .expect("task_struct field")
}
