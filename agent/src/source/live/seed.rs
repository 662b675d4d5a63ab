//! Seed connections at start from the socket table, so connections that
//! stay idle while nfsdtop runs are counted too: every ESTABLISHED TCP
//! socket whose local port is an NFS port becomes an `Accepted` event.
//!
//! `/proc/<pid>/net/tcp{,6}` shows the socket table of that process's
//! network namespace, so one process per distinct `/proc/<pid>/ns/net`
//! inode covers every namespace (bounded, see [`MAX_NETNS`]).

use std::collections::BTreeMap;
use std::path::Path;

use crate::model::{Endpoint, Event, EventKind, XprtKey};

/// The NFS port.
pub const NFS_PORT: u16 = 2049;
/// At most this many network namespaces are scanned.
pub const MAX_NETNS: usize = 256;
const TCP_ESTABLISHED: u8 = 1;

/// Accepted events (at `ts_ns`) for the established NFS connections of
/// every network namespace visible under `proc`.
pub fn seed(proc: &Path, ts_ns: u64) -> Vec<Event> {
    let mut out = Vec::new();
    for (ino, pid) in namespaces(proc) {
        for table in ["tcp", "tcp6"] {
            let p = proc.join(&pid).join("net").join(table);
            if let Ok(text) = std::fs::read_to_string(&p) {
                for (server, client) in parse_table(&text, NFS_PORT) {
                    out.push(Event {
                        ts_ns,
                        xprt: XprtKey {
                            netns: ino,
                            server,
                            client,
                        },
                        kind: EventKind::Accepted,
                    });
                }
            }
        }
    }
    out
}

/// netns inode → one pid (as a /proc entry name) living in it; our own
/// namespace first.
fn namespaces(proc: &Path) -> BTreeMap<u32, String> {
    let mut out = BTreeMap::new();
    let mut add = |entry: &str| {
        if out.len() >= MAX_NETNS {
            return;
        }
        if let Some(ino) = std::fs::read_link(proc.join(entry).join("ns/net"))
            .ok()
            .and_then(|l| netns_inode(&l.to_string_lossy()))
        {
            out.entry(ino).or_insert_with(|| entry.to_string());
        }
    };
    add("self");
    if let Ok(dir) = std::fs::read_dir(proc) {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.bytes().all(|b| b.is_ascii_digit()) {
                add(&name);
            }
        }
    }
    out
}

/// "net:[4026531840]" → 4026531840.
pub fn netns_inode(link: &str) -> Option<u32> {
    link.strip_prefix("net:[")?.strip_suffix(']')?.parse().ok()
}

/// (server, client) of each ESTABLISHED socket with local port `port` in
/// the text of /proc/net/tcp or tcp6. Lines it cannot read are skipped.
pub fn parse_table(text: &str, port: u16) -> Vec<(Endpoint, Endpoint)> {
    let mut out = Vec::new();
    for line in text.lines().skip(1) {
        let mut cols = line.split_whitespace();
        let (Some(_sl), Some(local), Some(remote), Some(state)) =
            (cols.next(), cols.next(), cols.next(), cols.next())
        else {
            continue;
        };
        if u8::from_str_radix(state, 16).ok() != Some(TCP_ESTABLISHED) {
            continue;
        }
        let (Some(l), Some(r)) = (hex_endpoint(local), hex_endpoint(remote)) else {
            continue;
        };
        if l.port() == port {
            out.push((l, r));
        }
    }
    out
}

/// "0100007F:0801" (IPv4) or 32 hex digits ":" port (IPv6). The address
/// words are printed as native-endian u32s of network-order bytes.
fn hex_endpoint(s: &str) -> Option<Endpoint> {
    let (addr, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        let h = addr.get(i * 8..i * 8 + 8)?;
        Some(u32::from_str_radix(h, 16).ok()?.to_ne_bytes())
    };
    match addr.len() {
        8 => Some(Endpoint::V4 { ip: word(0)?, port }),
        32 => {
            let mut ip = [0u8; 16];
            for i in 0..4 {
                ip[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            Some(Endpoint::V6 { ip, port })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_established_nfs_sockets_only() {
        // 127.0.0.1:2049 <- 127.0.0.1:724 established; a listener; an
        // established socket on another port.
        let v4 = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 00000000:0801 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 10 0\n\
   1: 0100007F:0801 0100007F:02D4 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0 10 0\n\
   2: 0100007F:0016 0100007F:A000 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0 10 0\n\
   3: garbage\n";
        let got = parse_table(v4, NFS_PORT);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0.to_string(), "127.0.0.1:2049");
        assert_eq!(got[0].1.to_string(), "127.0.0.1:724");
        let v6 = "  sl  local_address                         remote_address                        st\n\
   0: 000080FE00000000FF000002020000FE:0801 000080FE00000000FF00000300000000:0300 01 0\n";
        let got = parse_table(v6, NFS_PORT);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0.to_string(), "[fe80::200:ff:fe00:2]:2049");
        assert_eq!(got[0].1.port(), 0x300);
    }

    #[test]
    fn reads_this_kernels_socket_table() {
        // A real loopback connection must show up exactly as the kernel's
        // tracepoints would name it (IPv4, and IPv6 where the host has it).
        for (bind, table) in [("127.0.0.1:0", "tcp"), ("[::1]:0", "tcp6")] {
            let Ok(listener) = std::net::TcpListener::bind(bind) else {
                continue; // no IPv6 here
            };
            let server = listener.local_addr().unwrap();
            let client = std::net::TcpStream::connect(server).unwrap();
            let (_accepted, _) = listener.accept().unwrap();
            let text = std::fs::read_to_string(format!("/proc/self/net/{table}")).unwrap();
            let got = parse_table(&text, server.port());
            let want = (
                Endpoint::from_socket_addr(server),
                Endpoint::from_socket_addr(client.local_addr().unwrap()),
            );
            assert!(got.contains(&want), "{table}: {got:?} lacks {want:?}");
        }
    }

    #[test]
    fn netns_links() {
        assert_eq!(netns_inode("net:[4026531840]"), Some(4026531840));
        assert_eq!(netns_inode("mnt:[1]"), None);
        assert_eq!(netns_inode("net:[x]"), None);
    }

    #[test]
    fn seeding_this_host_does_not_fail() {
        // Whatever this machine has, seeding reads without panicking and
        // only ever yields NFS-port connections.
        let evs = seed(Path::new("/proc"), 5);
        assert!(evs
            .iter()
            .all(|e| e.xprt.server.port() == NFS_PORT && e.ts_ns == 5));
    }
}
