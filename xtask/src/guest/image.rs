//! The cached Debian guest image: built once per suite by
//! scripts/vm/build-image.sh (debootstrap), keyed by a hash of the suite,
//! the package list and the two scripts baked into it, and found again by
//! its manifest.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{anyhow, bail, Context};
use clap::{Args, ValueEnum};

use super::{cache_root, read_kv};
use crate::root;

/// Packages of every image. No initramfs-tools: sid's kernel
/// pulls in dracut and the two conflict; the others get it by dependency.
/// bpftool: the fault test checks that a killed agent leaves no program.
const PACKAGES: &str = "linux-image-amd64,nfs-kernel-server,nfs-common,rpcbind,fio,iproute2,\
                        kmod,procps,util-linux,bpftool";
const DEFAULT_MIRROR: &str = "http://deb.debian.org/debian";

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum Suite {
    /// Debian 12, kernel 6.1 (tracepoint generation 5.18–6.5)
    Bookworm,
    /// Debian 13, kernel 6.12 (generation 6.6–6.15)
    Trixie,
    /// Debian unstable, kernel ≥ 6.16 (qtime)
    Sid,
}

impl Suite {
    pub fn name(self) -> &'static str {
        match self {
            Suite::Bookworm => "bookworm",
            Suite::Trixie => "trixie",
            Suite::Sid => "sid",
        }
    }
}

#[derive(Args, Debug)]
pub struct ImageArgs {
    /// Debian suite of the image.
    #[arg(long, value_enum, default_value_t = Suite::Trixie)]
    pub suite: Suite,
    /// Build again even if a valid cached image exists.
    #[arg(long)]
    pub rebuild: bool,
}

fn fnv1a(data: &[u8], mut h: u64) -> u64 {
    for b in data {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// The cache key: suite, package list and the scripts that shape the image.
fn image_key(suite: Suite) -> anyhow::Result<String> {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    h = fnv1a(suite.name().as_bytes(), h);
    h = fnv1a(PACKAGES.as_bytes(), h);
    for s in ["scripts/vm/build-image.sh", "scripts/vm/guest-boot.sh"] {
        let text = fs::read(root().join(s)).with_context(|| format!("reading {s}"))?;
        h = fnv1a(&text, h);
    }
    Ok(format!("{:016x}", h))
}

#[derive(Debug)]
pub struct Image {
    pub dir: PathBuf,
    pub kernel: String,
}

/// A cached image is valid when its manifest (written last, after an atomic
/// rename) and all its files are there.
fn valid_image(dir: &Path, suite: Suite) -> Option<Image> {
    let m = read_kv(&dir.join("manifest")).ok()?;
    if m.get("suite").map(String::as_str) != Some(suite.name()) {
        return None;
    }
    for f in ["vmlinuz", "initrd.img", "root.img"] {
        if !dir.join(f).is_file() {
            return None;
        }
    }
    Some(Image {
        dir: dir.to_path_buf(),
        kernel: m.get("kernel")?.clone(),
    })
}

pub fn ensure_image(suite: Suite, rebuild: bool) -> anyhow::Result<Image> {
    let dir = cache_root().join(format!("{}-{}", suite.name(), image_key(suite)?));
    if !rebuild {
        if let Some(img) = valid_image(&dir, suite) {
            eprintln!(
                "vm: cached {} image {} (kernel {})",
                suite.name(),
                dir.display(),
                img.kernel
            );
            return Ok(img);
        }
    }
    fs::create_dir_all(cache_root())?;
    let mirror = std::env::var("NFSDTOP_DEBIAN_MIRROR").unwrap_or_else(|_| DEFAULT_MIRROR.into());
    let started = Instant::now();
    eprintln!(
        "vm: building the {} image in {} (debootstrap, about 4-5 minutes)",
        suite.name(),
        dir.display()
    );
    let status = Command::new("bash")
        .arg(root().join("scripts/vm/build-image.sh"))
        .args([suite.name(), &dir.display().to_string(), &mirror, PACKAGES])
        .status()
        .context("cannot run scripts/vm/build-image.sh")?;
    if !status.success() {
        bail!("building the {} image failed ({status})", suite.name());
    }
    let img = valid_image(&dir, suite)
        .ok_or_else(|| anyhow!("image build finished but {} is not valid", dir.display()))?;
    prune(suite, &dir);
    eprintln!(
        "vm: {} image built in {:.0?} (kernel {})",
        suite.name(),
        started.elapsed(),
        img.kernel
    );
    Ok(img)
}

/// Removes this suite's images under other keys (older package lists or
/// scripts) and builds left behind by a process that no longer exists.
fn prune(suite: Suite, keep: &Path) {
    let Ok(entries) = fs::read_dir(cache_root()) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().to_string();
        let Some(rest) = name.strip_prefix(&format!("{}-", suite.name())) else {
            continue;
        };
        let stale = match rest.split_once(".tmp-") {
            // An interrupted build: stale once its builder is gone.
            Some((_, pid)) => !Path::new("/proc").join(pid).exists(),
            None => rest.len() == 16 && path != keep,
        };
        if stale {
            eprintln!("vm: removing stale {}", path.display());
            let _ = fs::remove_dir_all(&path);
        }
    }
}

pub fn image(args: ImageArgs) -> anyhow::Result<()> {
    ensure_image(args.suite, args.rebuild).map(|_| ())
}
