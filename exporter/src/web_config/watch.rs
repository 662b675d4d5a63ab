//! The web configuration a new connection is served with. exporter-toolkit
//! reads its file again for every connection, so a renewed certificate or
//! a new user takes effect at once; nfsdtopd does the same, cheaply: it
//! looks at the file's (and the certificate, key and CA files') identity
//! and size and times on each connection, and reads them again only when
//! one changed. A file that turns bad is logged, once per change, and the
//! last good configuration goes on serving. Whether TLS is on is fixed at
//! start (a change of it is refused, as a bad file: restart to make it).

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::WebConfig;
use crate::auth::Auth;
use crate::log::log;

/// What changes when a file is replaced or rewritten.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileStamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// The watched files' stamps, in order (None: not there).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stamp(Vec<Option<FileStamp>>);

fn stamp(paths: &[&Path]) -> Stamp {
    Stamp(
        paths
            .iter()
            .map(|p| {
                std::fs::metadata(p).ok().map(|m| FileStamp {
                    dev: m.dev(),
                    ino: m.ino(),
                    size: m.size(),
                    mtime: (m.mtime(), m.mtime_nsec()),
                    ctime: (m.ctime(), m.ctime_nsec()),
                })
            })
            .collect(),
    )
}

struct Seen {
    /// The stamp of the files when last read (good or bad).
    stamp: Stamp,
    good: Arc<WebConfig>,
}

/// Where connections get their configuration: fixed (from the TOML
/// config and flags) or a web config file, re-read when it changes.
pub struct WebSource {
    path: Option<PathBuf>,
    seen: Mutex<Seen>,
    /// One reading at a time; the others wait for it.
    reading: tokio::sync::Mutex<()>,
    /// The login check, told of new users.
    auth: Arc<Auth>,
}

impl WebSource {
    /// A configuration that never changes.
    pub fn fixed(web: WebConfig, auth: Arc<Auth>) -> WebSource {
        WebSource {
            path: None,
            seen: Mutex::new(Seen {
                stamp: Stamp(Vec::new()),
                good: Arc::new(web),
            }),
            reading: tokio::sync::Mutex::new(()),
            auth,
        }
    }

    /// `path`, read now (an error here stops the start); `auth` gets its
    /// users, now and on every change.
    pub fn watch(path: PathBuf, auth: Arc<Auth>) -> anyhow::Result<WebSource> {
        let before = stamp(&[&path]);
        let web = super::load(&path)?;
        let mut paths: Vec<&Path> = vec![&path];
        paths.extend(web.files.iter().map(PathBuf::as_path));
        let stamp = if before.0[0] == stamp(&[&path]).0[0] {
            stamp(&paths)
        } else {
            // Changed while read: read again on the first connection.
            Stamp(Vec::new())
        };
        auth.set_users(web.users.clone());
        Ok(WebSource {
            seen: Mutex::new(Seen {
                stamp,
                good: Arc::new(web),
            }),
            path: Some(path),
            reading: tokio::sync::Mutex::new(()),
            auth,
        })
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The last good configuration, without looking at the files.
    pub fn last_good(&self) -> Arc<WebConfig> {
        self.seen().good.clone()
    }

    /// The stamp of the files the last good configuration came from.
    fn now(&self, path: &Path) -> Stamp {
        let good = self.last_good();
        let mut paths: Vec<&Path> = vec![path];
        paths.extend(good.files.iter().map(PathBuf::as_path));
        stamp(&paths)
    }

    /// The configuration for a new connection: the file's, read again if
    /// it (or a file it names) changed since last read.
    pub async fn current(&self) -> Arc<WebConfig> {
        let Some(path) = &self.path else {
            return self.last_good();
        };
        if self.now(path) == self.seen().stamp {
            return self.last_good();
        }
        let _one = self.reading.lock().await;
        let stamp = self.now(path);
        if stamp == self.seen().stamp {
            return self.last_good();
        }
        let p = path.clone();
        let read = tokio::task::spawn_blocking(move || super::load(&p)).await;
        let tls_before = self.last_good().tls.is_some();
        let outcome = match read {
            Ok(Ok(web)) if web.tls.is_some() == tls_before => Ok(web),
            Ok(Ok(_)) => Err(format!(
                "{}: TLS cannot be switched {} while nfsdtopd runs: restart it",
                path.display(),
                if tls_before { "off" } else { "on" }
            )),
            Ok(Err(e)) => Err(format!("{e:#}")),
            Err(e) => Err(format!("{}: reading failed: {e}", path.display())),
        };
        // The files a good reading named are the ones to watch from now.
        let stamp = match &outcome {
            Ok(web) => {
                let mut paths: Vec<&Path> = vec![path];
                paths.extend(web.files.iter().map(PathBuf::as_path));
                let now = self::stamp(&paths);
                if now.0[0] == stamp.0[0] {
                    now
                } else {
                    Stamp(Vec::new())
                }
            }
            Err(_) => stamp,
        };
        let mut seen = self.seen();
        seen.stamp = stamp;
        match outcome {
            Ok(web) => {
                self.auth.set_users(web.users.clone());
                seen.good = Arc::new(web);
                log(format_args!("web config {} read again", path.display()));
            }
            Err(e) => log(format_args!(
                "web config not applied, serving with the last good one: {e}"
            )),
        }
        seen.good.clone()
    }
}
