//! What can go wrong opening the live source. Every message says what
//! failed, where, and what to do about it; a loader's error is told a
//! permission problem or not here ([`bpf_err`]).

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error(
        "tracefs is not mounted (looked in {}{}): mount it with \
         `mount -t tracefs nodev /sys/kernel/tracing`",
        path.display(),
        if path.ends_with("sys/kernel/tracing") { " and /sys/kernel/debug/tracing" } else { "" }
    )]
    NoTracefs { path: PathBuf },

    #[error(
        "nfsd is not running on this host: {detail}. Load it with `modprobe nfsd` \
         and start the NFS server, or run with --wait to wait for it"
    )]
    NoSunrpc { detail: String },

    #[error(
        "missing privileges: {detail}. {program} needs CAP_BPF and CAP_PERFMON (or \
         CAP_SYS_ADMIN, which older kernels require) and read access to tracefs: \
         run it as root or grant them, e.g. \
         `setcap cap_bpf,cap_perfmon,cap_dac_read_search+ep $(command -v {program})`",
        program = this_program()
    )]
    Privileges { detail: String },

    #[error(
        "the {event} tracepoint ({path}) has a format this version of nfsdtop cannot use: \
         {reason}. Please report it with the file's contents"
    )]
    UnsupportedFormat {
        event: String,
        /// The field that is missing or unusable, if it is one field.
        field: Option<String>,
        reason: String,
        path: PathBuf,
    },

    #[error(
        "this build has no BPF object: run scripts/setup.sh (it installs bpf-linker and \
         nightly rust-src) and rebuild nfsdtop"
    )]
    NoBpfObject,

    #[error("{context}: {detail}")]
    Bpf { context: String, detail: String },

    #[error("cannot read {}: {reason}", path.display())]
    Io { path: PathBuf, reason: String },
}

/// The binary to grant the capabilities to: the one running (the TUI or
/// the daemon), named from a fixed list, never from what argv[0] says.
fn this_program() -> &'static str {
    let exe = std::env::current_exe().ok();
    match exe.as_deref().and_then(|p| p.file_name()?.to_str()) {
        Some("nfsdtopd") => "nfsdtopd",
        _ => "nfsdtop",
    }
}

impl LiveError {
    /// True when the host simply has no nfsd (the one case where showing
    /// the demo instead is right); false for faults the user must see.
    pub fn is_no_nfsd(&self) -> bool {
        matches!(self, LiveError::NoSunrpc { .. })
    }

    /// Is `e` (anywhere in its chain) a "no nfsd on this host" error?
    pub fn chain_is_no_nfsd(e: &anyhow::Error) -> bool {
        e.chain().any(|c| {
            c.downcast_ref::<LiveError>()
                .is_some_and(LiveError::is_no_nfsd)
        })
    }
}

/// Map a loader error: permission problems become [`LiveError::Privileges`].
pub(super) fn bpf_err(context: &str, e: &(dyn std::error::Error + 'static)) -> LiveError {
    let mut detail = e.to_string();
    let mut cur = e.source();
    let mut eperm = is_eperm(e);
    while let Some(c) = cur {
        detail.push_str(": ");
        detail.push_str(&c.to_string());
        eperm |= is_eperm(c);
        cur = c.source();
    }
    if eperm {
        LiveError::Privileges {
            detail: format!("{context}: {detail}"),
        }
    } else {
        LiveError::Bpf {
            context: context.to_string(),
            detail,
        }
    }
}

fn is_eperm(e: &(dyn std::error::Error + 'static)) -> bool {
    let io = e.downcast_ref::<std::io::Error>();
    io.and_then(|io| io.raw_os_error())
        .is_some_and(|c| c == 1 /* EPERM */ || c == 13 /* EACCES */)
        || io.is_some_and(|io| io.kind() == std::io::ErrorKind::PermissionDenied)
        || e.to_string().contains("Operation not permitted")
}
