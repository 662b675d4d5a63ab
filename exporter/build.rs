//! Build facts for `nfsdtop_build_info`: the git revision the daemon is
//! built from and the rustc that builds it. A build outside a git checkout
//! of this repository (a source tarball, a vendored copy inside another
//! repository) says revision "unknown" rather than failing or naming
//! another repository's commit.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let workspace = manifest.parent().unwrap_or(&manifest).to_path_buf();
    let revision = match git(&workspace, &["rev-parse", "--show-toplevel"]) {
        Some(top) if same_dir(Path::new(&top), &workspace) => {
            rerun_when_head_moves(&workspace);
            git(&workspace, &["rev-parse", "HEAD"])
                .filter(|r| r.len() == 40 && r.bytes().all(|b| b.is_ascii_hexdigit()))
        }
        _ => None,
    };
    println!(
        "cargo:rustc-env=NFSDTOP_BUILD_REVISION={}",
        revision.as_deref().unwrap_or("unknown")
    );
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|v| v.trim().trim_start_matches("rustc ").to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=NFSDTOP_BUILD_RUSTC={version}");
    println!("cargo:rerun-if-env-changed=RUSTC");
}

/// A git command's trimmed output in `dir`, None if git fails or is absent.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn same_dir(a: &Path, b: &Path) -> bool {
    matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b)
}

/// Build again when HEAD moves: HEAD itself (a checkout), the branch it
/// names (a commit) and packed-refs (a gc). Only files that exist: cargo
/// reruns every time for a missing one.
fn rerun_when_head_moves(workspace: &Path) {
    let mut refs = vec!["HEAD".to_string(), "packed-refs".to_string()];
    refs.extend(git(workspace, &["symbolic-ref", "-q", "HEAD"]));
    for r in refs {
        if let Some(p) = git(workspace, &["rev-parse", "--git-path", &r]) {
            let p = workspace.join(p);
            if p.exists() {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }
}
