//! The QEMU guest harness shared by `vm-test` and `bench`: the cached
//! Debian image ([`image`]), the QEMU command line ([`qemu`]), the input
//! and output disks ([`disk`]), the serial console and its markers
//! ([`console`]) and one whole guest run ([`run`]). What a guest does is
//! its script's business (scripts/vm/); what its results mean is the
//! caller's.

pub mod console;
pub mod disk;
pub mod image;
pub mod kernel;
pub mod qemu;
pub mod run;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Context;

/// Where images and run directories live: `$NFSDTOP_VM_CACHE`, else
/// `$XDG_CACHE_HOME/nfsdtop-vm` or `~/.cache/nfsdtop-vm`.
pub fn cache_root() -> PathBuf {
    if let Some(d) = std::env::var_os("NFSDTOP_VM_CACHE") {
        return PathBuf::from(d);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/var/tmp"));
    base.join("nfsdtop-vm")
}

/// A `key=value` file (an image's manifest, a guest's summary.txt).
pub fn read_kv(path: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(parse_kv(&text))
}

fn parse_kv(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// Read IOPS of the first job of a fio JSON output file.
pub fn fio_iops(path: &Path) -> Option<f64> {
    let v: serde_json::Value = serde_json::from_str(&fs::read_to_string(path).ok()?).ok()?;
    v["jobs"][0]["read"]["iops"].as_f64()
}
