//! One guest run from start to results: the input directory (the guest
//! script as `init.sh`, the shared prelude `guest-lib.sh`, more scripts,
//! the config, a stripped nfsdtop, any host files), the disks, QEMU, the console, and the
//! results unpacked into `RUN_DIR/results`. Also the nfsdtop build the
//! guest runs and the run directories under the cache.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{anyhow, bail, Context};
use serde_json::Value;

use super::cache_root;
use super::console::{self, Deadlines, Times};
use super::disk::{make_input_disk, make_output_disk, set_exec, unpack_output};
use super::image::Image;
use super::qemu::{qemu_command, Boot, Qemu};
use crate::root;

/// The sourced prelude of every guest script (scripts/vm/guest-lib.sh).
const GUEST_LIB: &str = "guest-lib.sh";

/// What to run in the guest.
pub struct Spec<'a> {
    /// Prefix of the host's progress lines ("vm", "bench").
    pub label: &'a str,
    /// The guest script, a file of scripts/vm/ (it becomes `/vm/init.sh`).
    pub script: &'a str,
    /// More files of scripts/vm/ to put beside it (same names, executable).
    pub extra: Vec<String>,
    /// Files from anywhere on the host to put beside it (same names).
    pub host_files: Vec<PathBuf>,
    pub boot: Boot,
    /// Shell assignments for `/vm/config` (`RUN_ID` comes first, from the
    /// run directory's name).
    pub config: String,
    /// The nfsdtop binary (`/vm/nfsdtop`), if the run has one.
    pub nfsdtop: Option<&'a Path>,
    /// More binaries, as (name in `/vm`, file): nfsdtopd for the
    /// scenarios that poll its HTTP API, an older nfsdtop to compare with.
    pub more_bins: Vec<(&'static str, &'a Path)>,
    /// Boot the image's root disk writable (its changes kept), not as a
    /// snapshot: for making an image.
    pub writable_root: bool,
    pub output_bytes: u64,
    /// `-icount` options, for a guest clock that counts instructions.
    pub icount: Option<String>,
    pub limits: Deadlines,
}

/// A new directory `runs/NAME-<unix time>` in the cache; the newest 20
/// run directories are kept.
pub fn new_run_dir(name: &str) -> anyhow::Result<PathBuf> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let runs = cache_root().join("runs");
    prune_runs(&runs, 20);
    let dir = runs.join(format!("{name}-{stamp}"));
    fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Keeps the newest `keep` run directories (each holds a full ftrace text).
fn prune_runs(runs: &Path, keep: usize) {
    let Ok(entries) = fs::read_dir(runs) else {
        return;
    };
    let mut dirs: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    dirs.sort();
    let n = dirs.len().saturating_sub(keep);
    for (_, d) in dirs.into_iter().take(n) {
        let _ = fs::remove_dir_all(d);
    }
}

/// Boots `img` with `spec` in `run_dir`; the guest's results end up in
/// `run_dir/results`.
pub fn run(img: &Image, spec: &Spec, run_dir: &Path) -> anyhow::Result<Times> {
    let input = run_dir.join("input");
    fs::create_dir_all(&input)?;
    let vm_scripts = root().join("scripts/vm");
    let mut files = vec![(spec.script, "init.sh"), (GUEST_LIB, GUEST_LIB)];
    files.extend(spec.extra.iter().map(|f| (f.as_str(), f.as_str())));
    for (from, to) in files {
        fs::copy(vm_scripts.join(from), input.join(to))
            .with_context(|| format!("copying scripts/vm/{from}"))?;
        set_exec(&input.join(to))?;
    }
    // Copies, on the input disk once it is made: removed then.
    let mut bins = vec![];
    for f in &spec.host_files {
        let name = f
            .file_name()
            .ok_or_else(|| anyhow!("{} names no file", f.display()))?;
        fs::copy(f, input.join(name)).with_context(|| format!("copying {}", f.display()))?;
        bins.push(input.join(name));
    }
    for (name, file) in spec
        .nfsdtop
        .map(|n| ("nfsdtop", n))
        .iter()
        .chain(&spec.more_bins)
    {
        bins.push(put_binary(file, &input.join(name))?);
    }
    let run_id = run_dir.file_name().unwrap_or_default().to_string_lossy();
    fs::write(
        input.join("config"),
        format!("RUN_ID={run_id}\n{}", spec.config),
    )?;
    let in_disk = run_dir.join("input.img");
    make_input_disk(&input, &in_disk)?;
    for b in bins {
        let _ = fs::remove_file(b); // on the input disk now
    }
    let out_disk = run_dir.join("output.img");
    make_output_disk(&out_disk, spec.output_bytes)?;

    let mut cmd = qemu_command(
        img,
        &in_disk,
        &out_disk,
        run_dir,
        spec.icount.as_deref(),
        spec.writable_root,
        spec.boot,
    )?;
    let child = Qemu(cmd.spawn().context("cannot start qemu-system-x86_64")?);
    let times = console::watch(child, run_dir, spec.label, spec.limits)?;
    unpack_output(&out_disk, &run_dir.join("results"))?;
    // The disks are large and can be rebuilt; keep the results.
    let _ = fs::remove_file(&out_disk);
    let _ = fs::remove_file(&in_disk);
    Ok(times)
}

/// A stripped copy of `from` at `to` (it boots faster: a smaller input
/// disk to unpack), or a plain copy where `strip` fails.
fn put_binary(from: &Path, to: &Path) -> anyhow::Result<PathBuf> {
    let stripped = Command::new("strip")
        .arg("-o")
        .arg(to)
        .arg(from)
        .status()
        .is_ok_and(|s| s.success());
    if !stripped {
        fs::copy(from, to).with_context(|| format!("copying {}", from.display()))?;
    }
    Ok(to.to_path_buf())
}

/// `cargo build --release -p nfsdtop --bin nfsdtop`: the binary every guest runs.
pub fn build_nfsdtop() -> anyhow::Result<PathBuf> {
    build_release_bin("nfsdtop", "nfsdtop")
}

/// `cargo build --release -p nfsdtop-exporter --bin nfsdtopd`.
pub fn build_nfsdtopd() -> anyhow::Result<PathBuf> {
    build_release_bin("nfsdtop-exporter", "nfsdtopd")
}

fn build_release_bin(package: &str, bin: &str) -> anyhow::Result<PathBuf> {
    let started = Instant::now();
    eprintln!("vm: cargo build --release -p {package} --bin {bin}");
    let out = crate::cargo()
        .args([
            "build",
            "--release",
            "-p",
            package,
            "--bin",
            bin,
            "--message-format=json-render-diagnostics",
        ])
        .current_dir(root())
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run cargo build")?;
    if !out.status.success() {
        bail!("cargo build --release -p {package} failed ({})", out.status);
    }
    let mut exe = None;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if v["reason"] == "compiler-artifact" && v["target"]["name"] == bin {
            if let Some(p) = v["executable"].as_str() {
                exe = Some(PathBuf::from(p));
            }
        }
    }
    let exe = exe.ok_or_else(|| anyhow!("cargo build did not report the {bin} executable"))?;
    eprintln!(
        "vm: {bin} built in {:.0?}: {}",
        started.elapsed(),
        exe.display()
    );
    Ok(exe)
}
