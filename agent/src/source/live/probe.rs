//! Finding what to watch before anything is loaded: tracefs, the sunrpc
//! events and nfsd (waiting for them with `--wait`), and this kernel's
//! event layout from the format files.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::error::LiveError;
use super::host;
use super::layout::Layout;
use super::LiveOptions;

/// The tracefs to use, or why there is none. Without tracefs, a host
/// without the sunrpc module is reported as "no nfsd" (the demo fallback
/// applies), a host with it as "mount tracefs".
pub fn locate_tracefs(opts: &LiveOptions) -> Result<PathBuf, LiveError> {
    match host::find_tracefs(opts.tracefs.as_deref()) {
        Some(t) => Ok(t),
        None if opts.tracefs.is_none() && !host::sunrpc_module_present() => {
            Err(LiveError::NoSunrpc {
                detail: "the sunrpc module is not loaded (/sys/module/sunrpc does not exist) and \
                     tracefs is not mounted at /sys/kernel/tracing"
                    .into(),
            })
        }
        None => Err(LiveError::NoTracefs {
            path: opts
                .tracefs
                .clone()
                .unwrap_or_else(|| PathBuf::from(host::TRACEFS_PATHS[0])),
        }),
    }
}

/// Find tracefs and the sunrpc events, waiting for them if asked to.
/// Returns the tracefs path and the layout of this kernel's events.
pub fn probe(opts: &LiveOptions) -> Result<(PathBuf, Layout), LiveError> {
    let deadline = opts.wait_for_nfsd.map(|d| Instant::now().checked_add(d));
    loop {
        let attempt = locate_tracefs(opts).and_then(|t| {
            // On the real tracefs, sunrpc without nfsd is an NFS client:
            // nothing to watch (yet). A tracefs given for tests is taken
            // as it is.
            if opts.tracefs.is_none()
                && host::sunrpc_events_present(&t)
                && !host::nfsd_module_present()
            {
                return Err(LiveError::NoSunrpc {
                    detail: "the sunrpc module is loaded (for the NFS client, perhaps) but nfsd \
                             is not (/sys/module/nfsd does not exist)"
                        .into(),
                });
            }
            Layout::from_tracefs(&t).map(|l| (t, l))
        });
        match attempt {
            Err(e) if e.is_no_nfsd() => match deadline {
                Some(d) if d.is_none_or(|d| Instant::now() < d) => {
                    // Polling for a module to appear: there is no event to
                    // wait on, so check four times a second.
                    std::thread::sleep(Duration::from_millis(250));
                }
                Some(_) => {
                    return Err(LiveError::NoSunrpc {
                        detail: format!(
                            "waited {:.0?} and its tracepoints did not appear",
                            opts.wait_for_nfsd.unwrap_or_default()
                        ),
                    })
                }
                None => return Err(e),
            },
            other => return other,
        }
    }
}
