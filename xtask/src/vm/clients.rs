//! The NFS clients of a run: which there are (`--clients N`), how the
//! guest is told (its config's CLIENTS), and how the checks learn them
//! back from the run's own summary (`client.NAME=ADDR nconnect=N vers=V`),
//! so an earlier run is rechecked against the clients it really had.
//!
//! Client i (1-based) gets 10.99.i.2 or fd99:i::2 in network namespace
//! `ci` and mounts the server at .1.

use std::collections::BTreeMap;
use std::net::IpAddr;

/// The three clients of every default run: one connection, four, and
/// eight over IPv6 (all NFSv3).
const DEFAULT: [(u8, u32, &str); 3] = [(4, 1, "3"), (4, 4, "3"), (6, 8, "3")];
/// Past the first three: nconnect cycles through these.
const MORE_NCONNECT: [u32; 5] = [1, 2, 4, 8, 16];
/// The most clients a run makes (veth pairs, files and fio jobs in a
/// 3 GiB guest; the guest's /24 and /64 numbering).
pub const MAX_CLIENTS: usize = 32;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Client {
    pub name: String,
    pub ip: IpAddr,
    pub nconnect: u32,
    /// The NFS version it mounts with ("3", "4.2").
    pub vers: String,
    pub fio: Fio,
}

/// The client's fio job (O_DIRECT, libaio, on a file of its own).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fio {
    pub rw: String,
    pub bs: String,
    pub iodepth: u32,
}

impl Default for Fio {
    fn default() -> Fio {
        Fio {
            rw: "randread".into(),
            bs: "4k".into(),
            iodepth: 16,
        }
    }
}

/// Client `i` (1-based).
pub fn make(i: usize, fam: u8, nconnect: u32, vers: &str, fio: Fio) -> Client {
    Client {
        name: format!("c{i}"),
        ip: addr(i, fam),
        nconnect,
        vers: vers.into(),
        fio,
    }
}

/// The `n` clients of a run: today's three first, then a mix of NFSv3
/// and NFSv4.2 (every second one), IPv6 every fourth, nconnect from 1 to
/// 16: the "many clients" kind of load, where a server's threads are
/// shared by clients that differ in every way the kernel sees.
pub fn for_count(n: usize) -> Vec<Client> {
    (1..=n.clamp(1, MAX_CLIENTS))
        .map(|i| {
            let (fam, nconnect, vers) = match DEFAULT.get(i - 1) {
                Some(&(f, c, v)) => (f, c, v),
                None => (
                    if i % 4 == 0 { 6 } else { 4 },
                    MORE_NCONNECT[(i - 4) % MORE_NCONNECT.len()],
                    if i % 2 == 0 { "4.2" } else { "3" },
                ),
            };
            make(i, fam, nconnect, vers, Fio::default())
        })
        .collect()
}

fn addr(i: usize, fam: u8) -> IpAddr {
    let s = if fam == 6 {
        format!("fd99:{i}::2")
    } else {
        format!("10.99.{i}.2")
    };
    s.parse().expect("a valid address")
}

/// The guest config's CLIENTS: `name:family:nconnect:vers:rw:bs:iodepth`
/// each.
pub fn guest_config(clients: &[Client]) -> String {
    clients
        .iter()
        .map(|c| {
            let fam = if c.ip.is_ipv6() { 6 } else { 4 };
            let f = &c.fio;
            format!(
                "{}:{fam}:{}:{}:{}:{}:{}",
                c.name, c.nconnect, c.vers, f.rw, f.bs, f.iodepth
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The clients the guest made, from its summary, in their order (c1, c2,
/// ... c10). A run from before the summary said `vers` and `fio` mounted
/// NFSv3 and ran the default job.
pub fn from_summary(summary: &BTreeMap<String, String>) -> Vec<Client> {
    let mut out: Vec<(usize, Client)> = summary
        .iter()
        .filter_map(|(k, v)| {
            let name = k.strip_prefix("client.")?;
            let index: usize = name.strip_prefix('c')?.parse().ok()?;
            let mut words = v.split_whitespace();
            let ip = words.next()?.parse().ok()?;
            let mut client = Client {
                name: name.into(),
                ip,
                nconnect: 1,
                vers: "3".into(),
                fio: Fio::default(),
            };
            for w in words {
                if let Some(n) = w.strip_prefix("nconnect=") {
                    client.nconnect = n.parse().ok()?;
                } else if let Some(v) = w.strip_prefix("vers=") {
                    client.vers = v.into();
                } else if let Some(f) = w.strip_prefix("fio=") {
                    let mut it = f.split('/');
                    client.fio = Fio {
                        rw: it.next()?.into(),
                        bs: it.next()?.into(),
                        iodepth: it.next()?.parse().ok()?,
                    };
                }
            }
            Some((index, client))
        })
        .collect();
    out.sort_by_key(|(i, _)| *i);
    out.into_iter().map(|(_, c)| c).collect()
}
