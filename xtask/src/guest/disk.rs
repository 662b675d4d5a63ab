//! The guest's two data disks: the input, a plain tar archive of a
//! directory (script, config, binary) padded to whole MiB, and the output,
//! an empty raw disk the guest writes its results to as a tar archive,
//! unpacked on the host afterwards.

use std::fs::{self, File};
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context};

pub fn set_exec(p: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(p, fs::Permissions::from_mode(0o755))
        .with_context(|| format!("chmod {}", p.display()))
}

/// A raw disk holding `tar` of `dir`, padded to whole MiB.
pub fn make_input_disk(dir: &Path, disk: &Path) -> anyhow::Result<()> {
    let status = Command::new("tar")
        .arg("-cf")
        .arg(disk)
        .arg("-C")
        .arg(dir)
        .arg(".")
        .status()
        .context("cannot run tar")?;
    if !status.success() {
        bail!("tar of the input disk failed");
    }
    let f = fs::OpenOptions::new().write(true).open(disk)?;
    let len = f.metadata()?.len();
    f.set_len(len.div_ceil(1 << 20) * (1 << 20))?;
    Ok(())
}

/// An empty (sparse) output disk of `bytes`.
pub fn make_output_disk(disk: &Path, bytes: u64) -> anyhow::Result<()> {
    File::create(disk)?.set_len(bytes)?;
    Ok(())
}

/// Unpacks the tar archive the guest wrote to `disk` into `dir`.
pub fn unpack_output(disk: &Path, dir: &Path) -> anyhow::Result<()> {
    fs::create_dir_all(dir)?;
    let status = Command::new("tar")
        .arg("-xf")
        .arg(disk)
        .arg("-C")
        .arg(dir)
        .status()?;
    if !status.success() {
        bail!("cannot unpack the guest's output disk {}", disk.display());
    }
    Ok(())
}
