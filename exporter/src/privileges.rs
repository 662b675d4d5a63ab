//! Dropping privileges once the live source is attached: the daemon keeps
//! nothing it no longer needs after attaching.
//!
//! Attaching needs CAP_BPF, CAP_PERFMON, CAP_DAC_READ_SEARCH (tracefs
//! format files) and, before 5.11, CAP_SYS_RESOURCE. Afterwards the agent
//! still makes bpf() calls (per-CPU counters, program statistics), which
//! kernels with `kernel.unprivileged_bpf_disabled` refuse without CAP_BPF
//! (CAP_SYS_ADMIN before 5.8): that one is kept, everything else goes from
//! the effective, permitted, inheritable and ambient sets.
//!
//! Capabilities are per thread: this runs on the main thread before the
//! pipeline thread and the HTTP runtime are started, so those inherit the
//! reduced sets. (The live source's own ring-buffer thread, started while
//! attaching, keeps what it had; it reads shared memory only.)

use caps::{CapSet, Capability, CapsHashSet};

/// Drop every capability but the one bpf() needs. Returns what was kept,
/// or None when the process had no capabilities to drop.
pub fn drop_after_attach() -> Result<Option<Vec<String>>, String> {
    let permitted = caps::read(None, CapSet::Permitted).map_err(|e| e.to_string())?;
    if permitted.is_empty() {
        return Ok(None);
    }
    let needed = if permitted.contains(&Capability::CAP_BPF) {
        Capability::CAP_BPF
    } else {
        Capability::CAP_SYS_ADMIN
    };
    let keep: CapsHashSet = permitted.iter().copied().filter(|c| *c == needed).collect();
    caps::clear(None, CapSet::Ambient).map_err(|e| format!("ambient: {e}"))?;
    caps::clear(None, CapSet::Inheritable).map_err(|e| format!("inheritable: {e}"))?;
    caps::set(None, CapSet::Effective, &keep).map_err(|e| format!("effective: {e}"))?;
    caps::set(None, CapSet::Permitted, &keep).map_err(|e| format!("permitted: {e}"))?;
    let now = caps::read(None, CapSet::Permitted).map_err(|e| e.to_string())?;
    if now.iter().any(|c| !keep.contains(c)) {
        return Err(format!("capabilities still permitted: {now:?}"));
    }
    Ok(Some(keep.iter().map(|c| c.to_string()).collect()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn dropping_in_a_thread_leaves_only_bpf() {
        // Capabilities are per thread: try it in a thread of its own so the
        // test process keeps its own.
        let r = std::thread::spawn(super::drop_after_attach).join().unwrap();
        match r {
            Ok(None) => {} // not privileged: nothing to drop
            Ok(Some(kept)) => assert!(
                kept.iter().all(|c| c == "CAP_BPF" || c == "CAP_SYS_ADMIN"),
                "{kept:?}"
            ),
            Err(e) => panic!("{e}"),
        }
    }
}
