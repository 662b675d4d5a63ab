//! A load stated in a small TOML file (`cargo xtask vm-test --load FILE`;
//! examples in scripts/vm/loads/): the NFS clients (how many of each
//! kind: NFS version, nconnect, IP family, and fio's job: rw, bs,
//! iodepth), nfsd's threads and pool mode, fio's seconds and an optional
//! class map. The same file runs unchanged on every kernel.
//!
//! ```toml
//! description = "one connection against four against sixteen"
//! nfsd_threads = 2
//! pool_mode = "global"          # global | percpu | pernode | auto
//! seconds = 8                   # fio's run time per client
//! class_map = "10.99.3.0/24 bulk"
//! [[client]]
//! nconnect = 1
//! [[client]]
//! count = 2                     # two clients like this
//! nfs = "4.2"                   # 3 (default), 4.0, 4.1, 4.2
//! nconnect = 16
//! family = 6                    # 4 (default) or 6
//! rw = "randwrite"              # fio --rw (default randread)
//! bs = "64k"                    # fio --bs (default 4k)
//! iodepth = 32                  # fio --iodepth (default 16)
//! ```

use std::fs;
use std::path::Path;

use anyhow::{anyhow, bail, Context};
use serde::Deserialize;

use super::clients::{self, Client, Fio, MAX_CLIENTS};

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct LoadFile {
    #[serde(default)]
    description: String,
    nfsd_threads: Option<u32>,
    pool_mode: Option<String>,
    seconds: Option<u32>,
    class_map: Option<String>,
    #[serde(rename = "client", default)]
    clients: Vec<ClientGroup>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct ClientGroup {
    count: Option<usize>,
    nfs: Option<String>,
    nconnect: Option<u32>,
    family: Option<u8>,
    rw: Option<String>,
    bs: Option<String>,
    iodepth: Option<u32>,
}

/// A load, checked: what the run config takes from it.
#[derive(Clone, Debug, PartialEq)]
pub struct Load {
    pub description: String,
    pub clients: Vec<Client>,
    pub nfsd_threads: u32,
    pub pool_mode: Option<String>,
    pub seconds: Option<u32>,
    pub class_map: Option<String>,
}

const NFS_VERSIONS: [&str; 4] = ["3", "4.0", "4.1", "4.2"];
const POOL_MODES: [&str; 4] = ["global", "percpu", "pernode", "auto"];
const RW: [&str; 6] = ["randread", "randwrite", "randrw", "read", "write", "rw"];
/// nfsd's threads when the file says nothing: few, so clients contend.
pub const DEFAULT_NFSD_THREADS: u32 = 2;

pub fn read(path: &Path) -> anyhow::Result<Load> {
    let text = fs::read_to_string(path)
        .with_context(|| format!("cannot read the load file {}", path.display()))?;
    parse(&text).map_err(|e| anyhow!("{}: {e:#}", path.display()))
}

pub fn parse(text: &str) -> anyhow::Result<Load> {
    let file: LoadFile = toml::from_str(text).map_err(|e| anyhow!("{e}"))?;
    if file.clients.is_empty() {
        bail!("no [[client]]: a load needs at least one client");
    }
    let mut out = vec![];
    for (g, group) in file.clients.iter().enumerate() {
        let at = format!("[[client]] number {}", g + 1);
        let nfs = group.nfs.clone().unwrap_or_else(|| "3".into());
        if !NFS_VERSIONS.contains(&nfs.as_str()) {
            bail!("{at}: nfs = {nfs:?}: one of {NFS_VERSIONS:?}");
        }
        let nconnect = group.nconnect.unwrap_or(1);
        if !(1..=16).contains(&nconnect) {
            bail!("{at}: nconnect = {nconnect}: the NFS client allows 1 to 16");
        }
        let family = group.family.unwrap_or(4);
        if family != 4 && family != 6 {
            bail!("{at}: family = {family}: 4 or 6");
        }
        let fio = Fio {
            rw: group.rw.clone().unwrap_or_else(|| Fio::default().rw),
            bs: group.bs.clone().unwrap_or_else(|| Fio::default().bs),
            iodepth: group.iodepth.unwrap_or(Fio::default().iodepth),
        };
        if !RW.contains(&fio.rw.as_str()) {
            bail!("{at}: rw = {:?}: one of {RW:?}", fio.rw);
        }
        let digits = fio.bs.trim_end_matches(['k', 'K', 'm', 'M']);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || fio.bs.len() > 8 {
            bail!("{at}: bs = {:?}: a size such as 4k or 1m", fio.bs);
        }
        if !(1..=256).contains(&fio.iodepth) {
            bail!("{at}: iodepth = {}: 1 to 256", fio.iodepth);
        }
        for _ in 0..group.count.unwrap_or(1) {
            let i = out.len() + 1;
            if i > MAX_CLIENTS {
                bail!("{at}: more than {MAX_CLIENTS} clients in all");
            }
            out.push(clients::make(i, family, nconnect, &nfs, fio.clone()));
        }
    }
    if let Some(m) = &file.pool_mode {
        if !POOL_MODES.contains(&m.as_str()) {
            bail!("pool_mode = {m:?}: one of {POOL_MODES:?}");
        }
    }
    let nfsd_threads = file.nfsd_threads.unwrap_or(DEFAULT_NFSD_THREADS);
    if !(1..=64).contains(&nfsd_threads) {
        bail!("nfsd_threads = {nfsd_threads}: 1 to 64");
    }
    if file.seconds.is_some_and(|s| !(1..=600).contains(&s)) {
        bail!("seconds = {:?}: 1 to 600", file.seconds);
    }
    Ok(Load {
        description: file.description,
        clients: out,
        nfsd_threads,
        pool_mode: file.pool_mode,
        seconds: file.seconds,
        class_map: file.class_map,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_become_numbered_clients() {
        let load = parse(
            "nfsd_threads = 3\n[[client]]\n[[client]]\ncount = 2\nnfs = \"4.2\"\nnconnect = 16\nfamily = 6\nbs = \"64k\"\n",
        )
        .unwrap();
        assert_eq!(load.nfsd_threads, 3);
        let names: Vec<String> = load
            .clients
            .iter()
            .map(|c| format!("{} {} {} {} {}", c.name, c.ip, c.nconnect, c.vers, c.fio.bs))
            .collect();
        assert_eq!(
            names,
            [
                "c1 10.99.1.2 1 3 4k",
                "c2 fd99:2::2 16 4.2 64k",
                "c3 fd99:3::2 16 4.2 64k"
            ]
        );
    }

    #[test]
    fn every_bad_value_is_refused_with_where_and_what() {
        for (text, says) in [
            ("", "no [[client]]"),
            (
                "[[client]]\nnconnect = 17\n",
                "[[client]] number 1: nconnect = 17",
            ),
            ("[[client]]\nnfs = \"2\"\n", "nfs = \"2\""),
            ("[[client]]\nrw = \"trim\"\n", "rw = \"trim\""),
            ("[[client]]\nbs = \"4k; rm\"\n", "bs = "),
            ("[[client]]\ncount = 40\n", "more than 32 clients"),
            ("pool_mode = \"odd\"\n[[client]]\n", "pool_mode"),
            (
                "nfsd_thread = 3\n[[client]]\n",
                "unknown field `nfsd_thread`",
            ),
        ] {
            let e = format!("{:#}", parse(text).unwrap_err());
            assert!(e.contains(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn the_shipped_loads_parse() {
        let dir = crate::root().join("scripts/vm/loads");
        let mut n = 0;
        for e in fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                read(&p).unwrap();
                n += 1;
            }
        }
        assert!(n >= 2, "{} has {n} loads", dir.display());
    }
}
