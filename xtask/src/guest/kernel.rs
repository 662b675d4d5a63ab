//! A kernel the user gives as Debian package files (`linux-image-*.deb`,
//! as `make bindeb-pkg` builds one from a patched tree; Debian's own from
//! 7.x on come as several: linux-image, -binary, -modules and -base, all
//! of which are given): checked for what nfsdtop needs before any boot,
//! then installed with dpkg into a copy of a suite's image, in a chroot
//! on the host (scripts/vm/install-kernel.sh: a loop mount, so root, as
//! the image's debootstrap already needs), whose own kernel it then
//! boots. Cached under `kernels/` by the packages' contents and the base
//! image.

use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{anyhow, bail, ensure, Context};

use super::image::{ensure_image, Image, Suite};
use super::{cache_root, read_kv};

/// What nfsdtop needs of a kernel's configuration, and why: each missing
/// one is named in the refusal.
const NEEDS: [(&str, &str); 6] = [
    ("CONFIG_SUNRPC", "the sunrpc tracepoints nfsdtop reads"),
    ("CONFIG_NFSD", "an NFS server to watch"),
    ("CONFIG_BPF_SYSCALL", "BPF programs"),
    ("CONFIG_BPF_EVENTS", "BPF programs on tracepoints"),
    ("CONFIG_DEBUG_INFO_BTF", "the kernel's BTF (field offsets)"),
    ("CONFIG_TRACEPOINTS", "tracepoints"),
];

/// What a package lacks, one line each (empty: nothing): from its
/// `boot/config-*` text and its file list.
pub fn lacks(config: &str, files: &[String]) -> Vec<String> {
    let value = |key: &str| {
        config.lines().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == key).then(|| v.trim().to_string())
        })
    };
    let mut out = vec![];
    for (key, why) in NEEDS {
        match value(key).as_deref() {
            Some("y") | Some("m") => {}
            other => out.push(format!(
                "{key} is {} (needed for {why})",
                other.map_or("not set".to_string(), |v| format!("{v:?}"))
            )),
        }
    }
    // A module's types are in its own BTF only with this.
    let modules = ["CONFIG_NFSD", "CONFIG_SUNRPC"]
        .iter()
        .filter(|k| value(k).as_deref() == Some("m"))
        .collect::<Vec<_>>();
    if !modules.is_empty() && value("CONFIG_DEBUG_INFO_BTF_MODULES").as_deref() != Some("y") {
        out.push(
            "CONFIG_DEBUG_INFO_BTF_MODULES is not set (nfsd and sunrpc are modules: their BTF is needed)"
                .into(),
        );
    }
    for (key, module) in [("CONFIG_NFSD", "nfsd.ko"), ("CONFIG_SUNRPC", "sunrpc.ko")] {
        let shipped = files
            .iter()
            .any(|f| f.rsplit('/').next().is_some_and(|n| n.starts_with(module)));
        if value(key).as_deref() == Some("m") && !shipped {
            out.push(format!("{key}=m but the package has no {module} module"));
        }
    }
    out
}

/// The package's file list and its `boot/config-*` text ("" where it has
/// none: of a kernel in several packages, one holds the config).
fn contents(deb: &Path) -> anyhow::Result<(Vec<String>, String)> {
    let tar = |args: &[&str]| -> anyhow::Result<Vec<u8>> {
        let mut dpkg = Command::new("dpkg-deb")
            .arg("--fsys-tarfile")
            .arg(deb)
            .stdout(Stdio::piped())
            .spawn()
            .context("cannot run dpkg-deb")?;
        let out = Command::new("tar")
            .args(args)
            .stdin(dpkg.stdout.take().context("dpkg-deb's output")?)
            .output()
            .context("cannot run tar")?;
        let ok = dpkg.wait()?.success();
        ensure!(
            ok,
            "{}: not a Debian package dpkg-deb can read",
            deb.display()
        );
        Ok(out.stdout)
    };
    let files: Vec<String> = String::from_utf8_lossy(&tar(&["-t"])?)
        .lines()
        .map(str::to_string)
        .collect();
    // boot/config-VERSION; from Debian's 7.x on (usr/)lib/modules/VERSION/config.
    let is_config = |f: &str| {
        let f = f.trim_start_matches("./");
        let modules = f.trim_start_matches("usr/").strip_prefix("lib/modules/");
        f.starts_with("boot/config-")
            || modules.is_some_and(|m| m.ends_with("/config") && m.matches('/').count() == 1)
    };
    let Some(config) = files.iter().find(|f| is_config(f)) else {
        return Ok((files, String::new()));
    };
    let text = tar(&["-xO", config])?;
    Ok((files, String::from_utf8_lossy(&text).into_owned()))
}

/// A short content hash of the package file (FNV-1a over its bytes).
fn package_key(deb: &Path) -> anyhow::Result<String> {
    let mut f = fs::File::open(deb).with_context(|| format!("cannot open {}", deb.display()))?;
    let (mut h, mut buf) = (0xcbf2_9ce4_8422_2325u64, vec![0u8; 1 << 20]);
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        for b in &buf[..n] {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x100_0000_01b3);
        }
    }
    Ok(format!("{h:016x}"))
}

/// How many package files one kernel may come as.
const MAX_PACKAGES: usize = 8;

/// The image that boots the kernel of `debs` on `base`'s userland:
/// cached, or made now (refused at once, with what is missing, if the
/// packages lack what nfsdtop needs).
pub fn ensure_kernel_image(base: Suite, debs: &[PathBuf]) -> anyhow::Result<Image> {
    ensure!(
        (1..=MAX_PACKAGES).contains(&debs.len()),
        "a kernel comes as 1 to {MAX_PACKAGES} package files, not {}",
        debs.len()
    );
    let (mut files, mut config) = (vec![], String::new());
    for deb in debs {
        let (f, c) = contents(deb)?;
        files.extend(f);
        config.push_str(&c);
    }
    let named = debs
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(" ");
    if !config.contains("CONFIG_") {
        bail!("{named}: no boot/config-* in the packages: give the linux-image package (and, for Debian's 7.x, its linux-binary, linux-modules and linux-base packages)");
    }
    let missing = lacks(&config, &files);
    if !missing.is_empty() {
        bail!(
            "{named}: this kernel lacks what nfsdtop needs: {}",
            missing.join("; ")
        );
    }
    let base_img = ensure_image(base, false)?;
    let base_key = base_img
        .dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut key = String::new();
    for deb in debs {
        key.push_str(&package_key(deb)?[..8]);
    }
    let dir = cache_root()
        .join("kernels")
        .join(format!("{base_key}-{key}"));
    if let Some(img) = valid(&dir) {
        eprintln!(
            "vm: cached kernel image {} (kernel {})",
            dir.display(),
            img.kernel
        );
        return Ok(img);
    }
    let tmp = dir.with_extension(format!("tmp-{}", std::process::id()));
    let _ = fs::remove_dir_all(&tmp);
    fs::create_dir_all(&tmp)?;
    eprintln!(
        "vm: installing {named} into a copy of the {} image (dpkg in a chroot, on the host)",
        base.name()
    );
    let started = Instant::now();
    let copied = Command::new("cp")
        .arg("--sparse=always")
        .arg(base_img.dir.join("root.img"))
        .arg(tmp.join("root.img"))
        .status()?;
    ensure!(copied.success(), "cannot copy the {} image", base.name());
    // Its own mount namespace: the loop mount and the chroot's /proc,
    // /sys and /dev go away with the script, however it ends.
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "bash"])
        .arg(crate::root().join("scripts/vm/install-kernel.sh"))
        .arg(tmp.join("root.img"))
        .arg(&tmp)
        .args(debs)
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run unshare (util-linux) for scripts/vm/install-kernel.sh")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let installed = stdout
        .lines()
        .find_map(|l| l.strip_prefix("installed="))
        .map(str::to_string);
    let Some(kernel) = installed.filter(|_| out.status.success()) else {
        let log = fs::read_to_string(tmp.join("dpkg.log")).unwrap_or_default();
        let hint = if log.contains("depends on") {
            format!(
                "; the {} userland is older than this kernel needs: install it into a newer one (--userland sid)",
                base.name()
            )
        } else {
            String::new()
        };
        bail!(
            "installing {named} failed ({}){hint}; dpkg's log: {}",
            out.status,
            tmp.join("dpkg.log").display()
        );
    };
    eprintln!("vm: kernel {kernel} installed in {:.0?}", started.elapsed());
    fs::write(
        tmp.join("manifest"),
        format!("suite={}\nkernel={kernel}\npackages={named}\n", base.name()),
    )?;
    let _ = fs::remove_dir_all(&dir);
    fs::rename(&tmp, &dir)?;
    valid(&dir).ok_or_else(|| anyhow!("{} is not a valid image", dir.display()))
}

fn valid(dir: &Path) -> Option<Image> {
    let m = read_kv(&dir.join("manifest")).ok()?;
    ["vmlinuz", "initrd.img", "root.img"]
        .iter()
        .all(|f| dir.join(f).is_file())
        .then(|| Image {
            dir: dir.to_path_buf(),
            kernel: m.get("kernel").cloned().unwrap_or_default(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "CONFIG_SUNRPC=m\nCONFIG_NFSD=m\nCONFIG_BPF_SYSCALL=y\nCONFIG_BPF_EVENTS=y\n\
                        CONFIG_DEBUG_INFO_BTF=y\nCONFIG_DEBUG_INFO_BTF_MODULES=y\nCONFIG_TRACEPOINTS=y\n";

    fn files() -> Vec<String> {
        [
            "./lib/modules/7.2.0/kernel/fs/nfsd/nfsd.ko.xz",
            "./lib/modules/7.2.0/kernel/net/sunrpc/sunrpc.ko.xz",
        ]
        .map(String::from)
        .to_vec()
    }

    #[test]
    fn a_kernel_with_everything_lacks_nothing() {
        assert!(lacks(GOOD, &files()).is_empty());
    }

    #[test]
    fn each_missing_piece_is_named() {
        let no_nfsd = GOOD.replace("CONFIG_NFSD=m", "# CONFIG_NFSD is not set");
        let l = lacks(&no_nfsd, &files());
        assert_eq!(l.len(), 1, "{l:?}");
        assert!(l[0].starts_with("CONFIG_NFSD is not set"), "{l:?}");
        let no_btf = GOOD.replace("CONFIG_DEBUG_INFO_BTF_MODULES=y\n", "");
        assert!(lacks(&no_btf, &files())[0].contains("CONFIG_DEBUG_INFO_BTF_MODULES"));
        let l = lacks(GOOD, &files()[..1]);
        assert_eq!(
            l,
            ["CONFIG_SUNRPC=m but the package has no sunrpc.ko module"]
        );
        let built_in = GOOD
            .replace("CONFIG_SUNRPC=m", "CONFIG_SUNRPC=y")
            .replace("CONFIG_NFSD=m", "CONFIG_NFSD=y")
            .replace("CONFIG_DEBUG_INFO_BTF_MODULES=y\n", "");
        assert!(
            lacks(&built_in, &[]).is_empty(),
            "built in: vmlinux's BTF is enough"
        );
    }
}

#[cfg(test)]
mod package_tests {
    use super::*;

    /// A real package file, made with dpkg-deb, holding a config and
    /// (optionally) the modules: what `ensure_kernel_image` reads first.
    fn package(dir: &Path, config: &str, modules: &[&str]) -> PathBuf {
        let root = dir.join("root");
        fs::create_dir_all(root.join("DEBIAN")).unwrap();
        fs::write(
            root.join("DEBIAN/control"),
            "Package: linux-image-9.9.9-test\nVersion: 1\nArchitecture: amd64\nMaintainer: test <test@localhost>\nDescription: test\n",
        )
        .unwrap();
        fs::create_dir_all(root.join("boot")).unwrap();
        fs::write(root.join("boot/config-9.9.9-test"), config).unwrap();
        for m in modules {
            let p = root.join("lib/modules/9.9.9-test/kernel").join(m);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, b"").unwrap();
        }
        let deb = dir.join("k.deb");
        let ok = Command::new("dpkg-deb")
            .args(["--root-owner-group", "-b"])
            .arg(&root)
            .arg(&deb)
            .stdout(Stdio::null())
            .status()
            .unwrap()
            .success();
        assert!(ok, "dpkg-deb -b");
        deb
    }

    #[test]
    fn a_package_without_btf_or_sunrpc_is_refused_before_any_boot() {
        let dir = std::env::temp_dir().join(format!("nfsdtop-kdeb-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let config = "CONFIG_NFSD=m\nCONFIG_SUNRPC=m\nCONFIG_BPF_SYSCALL=y\nCONFIG_BPF_EVENTS=y\nCONFIG_TRACEPOINTS=y\n";
        let deb = package(&dir, config, &["fs/nfsd/nfsd.ko.xz"]);
        let e = format!(
            "{:#}",
            ensure_kernel_image(Suite::Trixie, &[deb]).unwrap_err()
        );
        fs::remove_dir_all(&dir).unwrap();
        for says in [
            "this kernel lacks what nfsdtop needs",
            "CONFIG_DEBUG_INFO_BTF is not set",
            "CONFIG_DEBUG_INFO_BTF_MODULES is not set",
            "CONFIG_SUNRPC=m but the package has no sunrpc.ko module",
        ] {
            assert!(e.contains(says), "{says:?} in {e}");
        }
        assert!(!e.contains("nfsd.ko"), "nfsd.ko is there: {e}");
    }
}
