//! What this host offers the live source: tracefs, the sunrpc module,
//! privileges, kernel release, the monotonic clock.

use std::path::{Path, PathBuf};

/// Where tracefs is normally mounted, newest first.
pub const TRACEFS_PATHS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The mounted tracefs: `override_` if given (tests), else the first
/// standard path that has an `events` directory.
pub fn find_tracefs(override_: Option<&Path>) -> Option<PathBuf> {
    match override_ {
        Some(p) => p.join("events").is_dir().then(|| p.to_path_buf()),
        None => TRACEFS_PATHS
            .iter()
            .map(PathBuf::from)
            .find(|p| p.join("events").is_dir()),
    }
}

/// Whether the sunrpc module is loaded (or built in), without tracefs.
pub fn sunrpc_module_present() -> bool {
    Path::new("/sys/module/sunrpc").exists()
}

/// Whether nfsd is loaded (or built in). The sunrpc module alone may only
/// serve the NFS client.
pub fn nfsd_module_present() -> bool {
    // (/proc/fs/nfsd is no sign: kernels built with nfsd as a module
    // create that mount point at boot.)
    Path::new("/sys/module/nfsd").exists()
}

/// Whether the sunrpc tracepoints exist under `tracefs`.
pub fn sunrpc_events_present(tracefs: &Path) -> bool {
    tracefs.join("events/sunrpc/svc_xprt_dequeue").is_dir()
}

/// `uname -r`.
pub fn kernel_release() -> String {
    rustix::system::uname()
        .release()
        .to_string_lossy()
        .into_owned()
}

/// CLOCK_MONOTONIC in nanoseconds: the clock of `bpf_ktime_get_ns()`.
pub fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_nsec as u64)
}

/// Effective capabilities relevant to loading and attaching BPF.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Caps {
    pub cap_sys_admin: bool,
    pub cap_perfmon: bool,
    pub cap_bpf: bool,
}

const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

impl Caps {
    /// From `CapEff:` in /proc/self/status; all false if unreadable.
    pub fn current() -> Caps {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| Caps::from_status(&s))
            .unwrap_or_default()
    }

    pub fn from_status(status: &str) -> Option<Caps> {
        let hex = status
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))?
            .trim();
        let bits = u64::from_str_radix(hex, 16).ok()?;
        let has = |n: u32| bits & (1u64 << n) != 0;
        Some(Caps {
            cap_sys_admin: has(CAP_SYS_ADMIN),
            cap_perfmon: has(CAP_PERFMON),
            cap_bpf: has(CAP_BPF),
        })
    }

    /// Enough to load and attach tracepoint programs: CAP_SYS_ADMIN (all
    /// kernels), or CAP_BPF + CAP_PERFMON (5.8+).
    pub fn sufficient(&self) -> bool {
        self.cap_sys_admin || (self.cap_bpf && self.cap_perfmon)
    }

    /// The missing ones, for messages.
    pub fn missing(&self) -> String {
        let mut m = Vec::new();
        if !self.cap_bpf {
            m.push("CAP_BPF");
        }
        if !self.cap_perfmon {
            m.push("CAP_PERFMON");
        }
        if !self.cap_sys_admin {
            m.push("CAP_SYS_ADMIN");
        }
        m.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_from_status() {
        let root = Caps::from_status("Name:\tx\nCapEff:\t000001ffffffffff\n").unwrap();
        assert!(root.sufficient());
        let none = Caps::from_status("CapEff:\t0000000000000000\n").unwrap();
        assert!(!none.sufficient());
        assert_eq!(none.missing(), "CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN");
        let bpf_only = Caps::from_status("CapEff:\t000000c000000000\n").unwrap();
        assert!(bpf_only.sufficient() && !bpf_only.cap_sys_admin);
        assert!(Caps::from_status("nothing").is_none());
    }

    #[test]
    fn monotonic_clock_moves_forward() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(a > 0 && b >= a);
    }
}
