//! Who each peer is: the NFSv4 clients nfsd knows, read from
//! `/proc/fs/nfsd/clients/*/info` (one directory per client, written by
//! the kernel's `client_info_show`), as address → [`ClientName`]s.
//!
//! The files are read defensively, because a test or a hostile mount may
//! put anything there: at most [`MAX_INFO_BYTES`] of each file, at most
//! [`MAX_CLIENTS`] directories, only regular files (a FIFO would block),
//! any bytes (the kernel escapes its quoted strings as `\xNN`; control
//! characters never reach a terminal). Reading happens on a thread of its
//! own ([`Refresher`]), so a slow directory never holds up a snapshot; the
//! pipeline only takes the newest finished map off a channel.
//!
//! NFSv3 clients have no such name: their peers stay without one.

use std::collections::HashMap;
use std::io::Read as _;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, SyncSender};
use std::sync::Arc;
use std::time::Duration;

pub use crate::model::ClientName;
use crate::text::printable;

/// Where a live host's nfsd lists its NFSv4 clients.
pub const PROC_NFSD_CLIENTS: &str = "/proc/fs/nfsd/clients";
/// How often the live source reads the directory again.
pub const REFRESH: Duration = Duration::from_secs(5);
/// Bytes read of one `info` file: a real one is a few hundred.
pub const MAX_INFO_BYTES: u64 = 4096;
/// Client directories read per refresh.
pub const MAX_CLIENTS: usize = 100_000;
/// Names kept per address (many clients behind one NAT address).
pub const MAX_NAMES_PER_ADDRESS: usize = 8;

/// The NFSv4 clients of one nfsd, by address.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientMap {
    /// The network namespace (inode) whose nfsd this is; `None`: names
    /// apply to peers of any namespace (a test's directory, the demo).
    pub netns: Option<u32>,
    by_addr: HashMap<IpAddr, Vec<ClientName>>,
}

impl ClientMap {
    pub fn new(netns: Option<u32>) -> ClientMap {
        ClientMap {
            netns,
            by_addr: HashMap::new(),
        }
    }

    /// Add one client: names per address stay sorted, unique and bounded.
    pub fn insert(&mut self, ip: IpAddr, c: ClientName) {
        let v = self.by_addr.entry(ip.to_canonical()).or_default();
        if let Err(i) = v.binary_search(&c) {
            v.insert(i, c);
            v.truncate(MAX_NAMES_PER_ADDRESS);
        }
    }

    /// The clients at `ip` as seen from namespace `netns` (empty if none).
    pub fn get(&self, netns: u32, ip: IpAddr) -> &[ClientName] {
        if self.netns.is_some_and(|n| n != netns) {
            return &[];
        }
        self.by_addr
            .get(&ip.to_canonical())
            .map_or(&[], Vec::as_slice)
    }

    /// Addresses with at least one client.
    pub fn len(&self) -> usize {
        self.by_addr.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_addr.is_empty()
    }
}

/// One `info` file → the client's address and name; `None` when either
/// is missing or unreadable (truncated, garbage).
pub fn parse_info(bytes: &[u8]) -> Option<(IpAddr, ClientName)> {
    let (mut addr, mut name, mut minor, mut implementation) = (None, None, None, None);
    for line in bytes.split(|b| *b == b'\n') {
        let line = String::from_utf8_lossy(line);
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key.trim().to_ascii_lowercase().as_str() {
            "address" => addr = parse_address(value),
            "name" => name = unquote(value).filter(|n| !n.is_empty()),
            "minor version" => minor = value.parse().ok(),
            "implementation name" => implementation = unquote(value).filter(|n| !n.is_empty()),
            _ => {}
        }
    }
    Some((
        addr?,
        ClientName {
            name: name?,
            minor_version: minor,
            implementation,
        },
    ))
}

/// `"10.0.0.2:876"`, `"[fd00::2]:876"` (quoted since 5.x; bare before),
/// or an address without a port.
fn parse_address(value: &str) -> Option<IpAddr> {
    let v = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(value);
    v.parse::<SocketAddr>()
        .map(|a| a.ip())
        .or_else(|_| v.parse::<IpAddr>())
        .ok()
        .map(|ip| ip.to_canonical())
}

/// A string as the kernel's `seq_quote_mem` writes it: in double quotes,
/// `\"`, `\\` and `\xNN` escaped. `None` without both quotes (a line cut
/// short). The result is printable: control characters become `?`.
fn unquote(value: &str) -> Option<String> {
    let inner = value.strip_prefix('"')?.strip_suffix('"')?;
    let src = inner.as_bytes();
    let mut out = Vec::with_capacity(src.len());
    let mut i = 0;
    while i < src.len() {
        let b = src[i];
        if b != b'\\' || i + 1 == src.len() {
            out.push(b);
            i += 1;
            continue;
        }
        let next = src[i + 1];
        let hex = |j: usize| src.get(j).and_then(|c| (*c as char).to_digit(16));
        match next {
            b'x' => match (hex(i + 2), hex(i + 3)) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 4;
                }
                _ => {
                    out.push(b'\\');
                    i += 1;
                }
            },
            b'n' | b't' | b'r' => {
                out.push(b' ');
                i += 2;
            }
            _ => {
                out.push(next);
                i += 2;
            }
        }
    }
    Some(printable(&String::from_utf8_lossy(&out)))
}

/// Read every client directory under `root` (normally
/// [`PROC_NFSD_CLIENTS`]); what cannot be read is left out. `netns` is
/// the namespace whose nfsd `root` belongs to, where known.
pub fn read_dir(root: &Path, netns: Option<u32>) -> ClientMap {
    let mut map = ClientMap::new(netns);
    let Ok(entries) = std::fs::read_dir(root) else {
        return map;
    };
    for entry in entries.take(MAX_CLIENTS).flatten() {
        if let Some((ip, c)) = read_info(&entry.path().join("info")) {
            map.insert(ip, c);
        }
    }
    map
}

fn read_info(path: &Path) -> Option<(IpAddr, ClientName)> {
    // Not a FIFO or a device: those could block or never end.
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let mut buf = Vec::with_capacity(1024);
    std::fs::File::open(path)
        .ok()?
        .take(MAX_INFO_BYTES)
        .read_to_end(&mut buf)
        .ok()?;
    parse_info(&buf)
}

/// This process's network namespace (the one whose `/proc/fs/nfsd` it
/// sees, as a rule).
pub fn own_netns() -> Option<u32> {
    let link = std::fs::read_link("/proc/self/ns/net").ok()?;
    let link = link.to_string_lossy();
    link.strip_prefix("net:[")?.strip_suffix(']')?.parse().ok()
}

/// The newest [`ClientMap`], kept fresh by a thread that reads a
/// directory every so often (or a fixed map, for the demo). Dropping it
/// ends the thread.
pub struct Refresher {
    rx: Receiver<ClientMap>,
    latest: Option<Arc<ClientMap>>,
    waited: bool,
    _stop: Option<Sender<()>>,
}

impl Refresher {
    /// Read `dir` now and then every `every`, on a thread of its own.
    pub fn start(dir: PathBuf, netns: Option<u32>, every: Duration) -> Refresher {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("nfsd-clients".into())
            .spawn(move || refresh(&dir, netns, every, &tx, &stopped));
        // Without a thread there are no names: not worth failing for.
        if let Err(e) = spawned {
            eprintln!("nfsdtop: cannot read NFSv4 client names: {e}");
        }
        Refresher {
            rx,
            latest: None,
            waited: false,
            _stop: Some(stop),
        }
    }

    /// Always the same names (the demo's).
    pub fn fixed(map: ClientMap) -> Refresher {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let _ = tx.send(map);
        Refresher {
            rx,
            latest: None,
            waited: false,
            _stop: None,
        }
    }

    /// The newest map read so far. The first call waits up to `first`
    /// for the first read, so that the first snapshot already has names;
    /// later calls never wait.
    pub fn latest(&mut self, first: Duration) -> Option<Arc<ClientMap>> {
        if !self.waited {
            self.waited = true;
            if let Ok(m) = self.rx.recv_timeout(first) {
                self.latest = Some(Arc::new(m));
            }
        }
        while let Ok(m) = self.rx.try_recv() {
            self.latest = Some(Arc::new(m));
        }
        self.latest.clone()
    }
}

fn refresh(
    dir: &Path,
    netns: Option<u32>,
    every: Duration,
    tx: &SyncSender<ClientMap>,
    stopped: &Receiver<()>,
) {
    loop {
        if tx.send(read_dir(dir, netns)).is_err() {
            return;
        }
        match stopped.recv_timeout(every) {
            Err(RecvTimeoutError::Timeout) => continue,
            _ => return,
        }
    }
}

#[cfg(test)]
#[path = "clients_tests.rs"]
mod tests;
