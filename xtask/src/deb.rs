//! `cargo xtask deb`: the tree `cargo xtask install --prefix /usr` lays
//! out, made into the Debian package Debian's own tools would make of it:
//! stripped binaries, compressed man pages and changelogs, a
//! machine-readable copyright file, `Depends` from `dpkg-shlibdeps`, and
//! maintainer scripts that handle nfsdtopd.service as `dh_installsystemd`
//! does (enabled and started on install, restarted on upgrade, stopped on
//! remove, its state removed on purge). Written here rather than with
//! cargo-deb because the tree is made by `install` (man pages and
//! completions from the built binaries, rewritten operator files, the
//! book): cargo-deb would only pack it, and every Debian rule it applies
//! is a few lines below.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};
use clap::Args;

use crate::install::{copy_mode, install, InstallArgs};
use crate::{root, run};

#[derive(Args, Debug, Clone)]
pub struct DebArgs {
    /// Where to write the .deb.
    #[arg(long, default_value = "target/debian")]
    pub out: PathBuf,
    #[arg(long)]
    pub debug: bool,
    /// As for install.
    #[arg(long, value_name = "URL")]
    pub runbook_base: Option<String>,
    /// Appended to the version (letters, digits, '.', '+', '~'): `+local1`
    /// makes a rebuilt package that upgrades an installed one.
    #[arg(long, value_name = "SUFFIX")]
    pub version_suffix: Option<String>,
    /// The package's Maintainer, whoever builds it (the project has no
    /// address of its own) [default: "$DEBFULLNAME <$DEBEMAIL>", as
    /// Debian's own tools take it].
    #[arg(long, value_name = "NAME <ADDRESS>")]
    pub maintainer: Option<String>,
}

/// The package's name, also its documentation directory's.
const PACKAGE: &str = "nfsdtop";
/// The service the maintainer scripts handle.
const UNIT: &str = "nfsdtopd.service";
/// The Debian revision: the package is built from the upstream tree, so
/// the Debian changelog is changelog.Debian and the upstream one
/// (CHANGELOG.md) changelog.
const DEBIAN_REVISION: &str = "1";
/// What the extras need: the dashboard tools (python3) and what nfsdtopd
/// watches (nfsd). Recommends, not Depends: the monitor runs without
/// them. Only packages a minimal Debian with NFS usually has are
/// Recommends, so `apt install ./nfsdtop_*.deb` needs no download there.
const RECOMMENDS: &str = "nfs-kernel-server, python3";
/// A Prometheus server for the rules and dashboards: usually elsewhere.
const SUGGESTS: &str = "prometheus";

pub fn deb(a: &DebArgs) -> anyhow::Result<PathBuf> {
    let version = version(a.version_suffix.as_deref())?;
    let maintainer = maintainer(a.maintainer.as_deref())?;
    let out = root().join(&a.out);
    let stage = out.join("stage");
    if stage.exists() {
        fs::remove_dir_all(&stage)?;
    }
    install(&InstallArgs {
        prefix: PathBuf::from("/usr"),
        destdir: Some(stage.clone()),
        debug: a.debug,
        runbook_base: a.runbook_base.clone(),
    })?;
    let bins: Vec<PathBuf> = ["nfsdtop", "nfsdtopd"]
        .iter()
        .map(|b| stage.join("usr/bin").join(b))
        .collect();
    for bin in &bins {
        // What dh_strip does to an executable (debug info stays in target/).
        run(
            &format!("strip {}", bin.display()),
            Command::new("strip")
                .args([
                    "--remove-section=.comment",
                    "--remove-section=.note",
                    "--strip-unneeded",
                ])
                .arg(bin),
        )?;
    }
    for dir in ["man1", "man8"] {
        for e in fs::read_dir(stage.join("usr/share/man").join(dir))? {
            gzip(&e?.path())?;
        }
    }
    let doc = stage.join("usr/share/doc").join(PACKAGE);
    let dist = root().join("dist/debian");
    copy_mode(&dist.join("copyright"), &doc.join("copyright"), 0o644)?;
    copy_mode(&root().join("CHANGELOG.md"), &doc.join("changelog"), 0o644)?;
    gzip(&doc.join("changelog"))?;
    fs::write(
        doc.join("changelog.Debian"),
        changelog(&version, &maintainer)?,
    )?;
    gzip(&doc.join("changelog.Debian"))?;
    copy_mode(
        &dist.join("lintian-overrides"),
        &stage.join("usr/share/lintian/overrides").join(PACKAGE),
        0o644,
    )?;

    let depends = shlib_depends(&out, &bins)?;
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let size_kb = dir_size(&stage)?.div_ceil(1024);
    let control = format!(
        "Package: {PACKAGE}\nVersion: {version}\nArchitecture: {arch}\nMaintainer: {maintainer}\n\
Installed-Size: {size_kb}\nDepends: {depends}\nRecommends: {RECOMMENDS}\nSuggests: {SUGGESTS}\n\
Section: admin\nPriority: optional\n\
Description: who gets a Linux NFS server's threads, and whether that is fair\n \
nfsdtop shows per-client and per-class shares of nfsd's RPC dispatch, fair\n \
shares, queue waits and thread time, from BPF programs on the sunrpc\n \
tracepoints: a terminal UI (nfsdtop) and a Prometheus agent (nfsdtopd).\n"
    );
    let debian = stage.join("DEBIAN");
    fs::create_dir_all(&debian)?;
    fs::write(debian.join("control"), control)?;
    fs::write(debian.join("conffiles"), "/etc/nfsdtop/nfsdtopd.toml\n")?;
    for (name, text) in maintainer_scripts() {
        let path = debian.join(name);
        fs::write(&path, text)?;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755))?;
    }
    md5sums(&stage)?;
    let deb = out.join(format!("{PACKAGE}_{version}_{arch}.deb"));
    run(
        "dpkg-deb --build",
        Command::new("dpkg-deb")
            .args(["--root-owner-group", "--build"])
            .arg(&stage)
            .arg(&deb),
    )?;
    eprintln!("wrote {}", deb.display());
    Ok(deb)
}

/// The workspace version, the Debian revision and `suffix` (which must
/// sort after nothing: no '-', no ':').
pub(crate) fn version(suffix: Option<&str>) -> anyhow::Result<String> {
    let suffix = suffix.unwrap_or("");
    if let Some(c) = suffix
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '~')))
    {
        bail!("--version-suffix {suffix:?}: {c:?} is not allowed in a Debian version; use letters, digits, '.', '+' or '~' (e.g. +local1)");
    }
    Ok(format!(
        "{}-{DEBIAN_REVISION}{suffix}",
        env!("CARGO_PKG_VERSION")
    ))
}

/// `--maintainer`, else `$DEBFULLNAME <$DEBEMAIL>` (or a `DEBEMAIL` that
/// is already `NAME <ADDRESS>`), checked to be of that form.
fn maintainer(given: Option<&str>) -> anyhow::Result<String> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let contact = match (given, env("DEBEMAIL")) {
        (Some(m), _) => m.trim().to_string(),
        (None, Some(mail)) if mail.contains('<') => mail.trim().to_string(),
        (None, Some(mail)) => match env("DEBFULLNAME") {
            Some(name) => format!("{} <{}>", name.trim(), mail.trim()),
            None => bail!("DEBEMAIL is set but DEBFULLNAME is not: Debian's Maintainer field is \"NAME <ADDRESS>\"; set DEBFULLNAME too, or pass --maintainer \"Your Name <{}>\"", mail.trim()),
        },
        (None, None) => bail!("no maintainer for the package: Debian requires one with a mail address, and the nfsdtop project has none, so it is whoever builds the package: pass --maintainer \"Your Name <you@your.domain>\" or set DEBFULLNAME and DEBEMAIL"),
    };
    let well_formed = contact
        .strip_suffix('>')
        .and_then(|c| c.split_once(" <"))
        .is_some_and(|(name, addr)| {
            !name.trim().is_empty()
                && addr
                    .split_once('@')
                    .is_some_and(|(u, h)| !u.is_empty() && h.contains('.'))
                && !contact.contains(['\n', ',', '"'])
        });
    if !well_formed {
        bail!("maintainer {contact:?}: expected \"NAME <USER@DOMAIN>\" (one person or team, a mail address with a dot in its domain), e.g. \"Jane Doe <jane@example.org>\"");
    }
    Ok(contact)
}

/// gzip -9n FILE → FILE.gz, as dh_compress does (-n: no name or time
/// inside, so a rebuild is the same file).
fn gzip(path: &Path) -> anyhow::Result<()> {
    run(
        &format!("gzip {}", path.display()),
        Command::new("gzip").arg("-9nf").arg(path),
    )
}

/// The Debian changelog of this native package: one entry for this
/// version, dated by the last commit (the same tree, the same date).
fn changelog(version: &str, maintainer: &str) -> anyhow::Result<String> {
    let date = Command::new("git")
        .args(["log", "-1", "--format=%cD"])
        .current_dir(root())
        .output()
        .context("cannot run git for the changelog's date")?;
    let date = String::from_utf8_lossy(&date.stdout).trim().to_string();
    if date.is_empty() {
        bail!("the Debian changelog is dated by the last commit, and `git log -1` in {} gave none: build from a git checkout", root().display());
    }
    Ok(format!(
        "{PACKAGE} ({version}) unstable; urgency=medium\n\n  \
* Built from the nfsdtop sources with `cargo xtask deb`; the changes\n    \
are in /usr/share/doc/{PACKAGE}/changelog.gz.\n\n -- {maintainer}  {date}\n"
    ))
}

/// `dpkg-shlibdeps` on the binaries: the libraries and the lowest
/// versions of them that provide every symbol version they use (it reads
/// debian/control, hence the scratch directory).
fn shlib_depends(out: &Path, bins: &[PathBuf]) -> anyhow::Result<String> {
    let work = out.join("shlibdeps");
    fs::create_dir_all(work.join("debian"))?;
    fs::write(
        work.join("debian/control"),
        format!("Source: {PACKAGE}\n\nPackage: {PACKAGE}\nArchitecture: any\n"),
    )?;
    let o = Command::new("dpkg-shlibdeps")
        .arg("-O")
        .args(bins)
        .current_dir(&work)
        .output()
        .context("cannot run dpkg-shlibdeps (package dpkg-dev)")?;
    if !o.status.success() {
        bail!(
            "dpkg-shlibdeps failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let text = String::from_utf8_lossy(&o.stdout);
    match text.lines().find_map(|l| l.strip_prefix("shlibs:Depends=")) {
        Some(d) if !d.trim().is_empty() => Ok(d.trim().to_string()),
        _ => bail!("dpkg-shlibdeps gave no shlibs:Depends: {text}"),
    }
}

/// DEBIAN/md5sums: every file's checksum, as dh_md5sums writes it.
fn md5sums(stage: &Path) -> anyhow::Result<()> {
    let mut files = Vec::new();
    let mut dirs = vec![stage.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for e in fs::read_dir(&dir)? {
            let p = e?.path();
            if p.is_dir() {
                if p != stage.join("DEBIAN") {
                    dirs.push(p);
                }
            } else if !p.starts_with(stage.join("etc")) {
                // conffiles are checked by their own record, not md5sums.
                files.push(p.strip_prefix(stage)?.to_path_buf());
            }
        }
    }
    files.sort();
    let o = Command::new("md5sum")
        .args(&files)
        .current_dir(stage)
        .output()
        .context("cannot run md5sum")?;
    if !o.status.success() {
        bail!("md5sum failed: {}", String::from_utf8_lossy(&o.stderr));
    }
    fs::write(stage.join("DEBIAN/md5sums"), o.stdout)?;
    Ok(())
}

/// postinst, prerm and postrm as dh_installsystemd (debhelper 13) writes
/// them for a unit to enable and start, restarting after an upgrade.
fn maintainer_scripts() -> [(&'static str, String); 3] {
    let postinst = format!(
        r#"#!/bin/sh
set -e
if [ "$1" = "configure" ] || [ "$1" = "abort-upgrade" ] || [ "$1" = "abort-deconfigure" ] || [ "$1" = "abort-remove" ]; then
	deb-systemd-helper unmask '{UNIT}' >/dev/null || true
	# was-enabled is true on a first install: enable; on an upgrade keep
	# the administrator's choice.
	if deb-systemd-helper --quiet was-enabled '{UNIT}'; then
		deb-systemd-helper enable '{UNIT}' >/dev/null || true
	else
		deb-systemd-helper update-state '{UNIT}' >/dev/null || true
	fi
	if [ -d /run/systemd/system ]; then
		systemctl --system daemon-reload >/dev/null || true
		if [ -n "$2" ]; then action=restart; else action=start; fi
		deb-systemd-invoke $action '{UNIT}' >/dev/null || true
		if [ ! -d /sys/module/nfsd ]; then
			echo "nfsdtopd: nfsd is not running yet; the service waits for it (--wait 300, then restarts) and attaches once nfs-server.service is up"
		fi
	fi
fi
exit 0
"#
    );
    let prerm = format!(
        r#"#!/bin/sh
set -e
if [ -z "${{DPKG_ROOT:-}}" ] && [ "$1" = remove ] && [ -d /run/systemd/system ]; then
	deb-systemd-invoke stop '{UNIT}' >/dev/null || true
fi
exit 0
"#
    );
    let postrm = format!(
        r#"#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
	systemctl --system daemon-reload >/dev/null || true
fi
if [ "$1" = purge ] && command -v deb-systemd-helper >/dev/null; then
	deb-systemd-helper purge '{UNIT}' >/dev/null || true
fi
exit 0
"#
    );
    [("postinst", postinst), ("prerm", prerm), ("postrm", postrm)]
}

fn dir_size(p: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for e in fs::read_dir(p)? {
        let e = e?;
        let m = e.metadata()?;
        total += if m.is_dir() {
            dir_size(&e.path())?
        } else {
            m.len()
        };
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_suffix_outside_debians_characters_is_refused_with_what_to_use() {
        assert_eq!(
            version(Some("+local1")).unwrap(),
            format!("{}-1+local1", env!("CARGO_PKG_VERSION"))
        );
        let e = version(Some("-1")).unwrap_err().to_string();
        assert!(
            e.contains("'-' is not allowed") && e.contains("+local1"),
            "{e}"
        );
    }

    #[test]
    fn a_maintainer_must_be_a_name_and_a_mail_address() {
        let ok = "Jane Doe <jane@example.org>";
        assert_eq!(maintainer(Some(ok)).unwrap(), ok);
        for bad in [
            "Jane Doe",
            "<jane@example.org>",
            "Jane <jane>",
            "Jane <jane@example.org",
        ] {
            let e = maintainer(Some(bad)).unwrap_err().to_string();
            assert!(e.contains("expected \"NAME <USER@DOMAIN>\""), "{bad}: {e}");
        }
    }
}
