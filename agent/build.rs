//! Builds the BPF programs (`ebpf/nfsdtop-ebpf`) for `bpfel-unknown-none`
//! with aya-build and leaves the object at `$OUT_DIR/nfsdtop-ebpf`, which
//! `source::live` embeds.
//!
//! The BPF build needs a nightly toolchain with rust-src and bpf-linker
//! built against rustc's LLVM (`scripts/setup.sh` installs both). Without
//! them the rest of nfsdtop still builds: this script warns and embeds an
//! empty object, and the live source says at run time that this build has
//! no BPF programs. `NFSDTOP_NO_BPF=1` does the same on purpose.

use std::path::{Path, PathBuf};
use std::process::Command;

const OBJECT: &str = "nfsdtop-ebpf";

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    let ebpf_dir = manifest.join("../ebpf/nfsdtop-ebpf");
    let common_dir = manifest.join("../ebpf/nfsdtop-common");
    println!("cargo:rerun-if-changed=build.rs");
    println!(
        "cargo:rerun-if-changed={}",
        common_dir.join("src").display()
    );
    println!(
        "cargo:rerun-if-changed={}",
        common_dir.join("Cargo.toml").display()
    );
    println!("cargo:rerun-if-env-changed=NFSDTOP_NO_BPF");

    if std::env::var_os("NFSDTOP_NO_BPF").is_some_and(|v| v == "1") {
        return without_bpf(&out, "NFSDTOP_NO_BPF=1");
    }
    if let Err(missing) = toolchain_ready() {
        return without_bpf(&out, &missing);
    }

    // aya-build runs `cargo build --package nfsdtop-ebpf` in the current
    // directory; the crate is its own workspace (excluded from the root
    // one, with its own Cargo.lock), so build from there.
    if let Err(e) = std::env::set_current_dir(&ebpf_dir) {
        return without_bpf(&out, &format!("cannot enter {}: {e}", ebpf_dir.display()));
    }
    // The nested cargo's progress lines would each become a cargo warning;
    // its compiler errors still come through (as JSON messages).
    std::env::set_var("CARGO_TERM_QUIET", "true");
    let root = ebpf_dir.to_string_lossy().into_owned();
    let package = aya_build::Package {
        name: "nfsdtop-ebpf",
        root_dir: &root,
        ..Default::default()
    };
    if let Err(e) = aya_build::build_ebpf([package], aya_build::Toolchain::default()) {
        // The toolchain is there, so this is a real error in the BPF code:
        // fail loudly rather than ship a binary that cannot watch nfsd.
        panic!("building the BPF programs failed: {e:#} (see the warnings above)");
    }
    if !out.join(OBJECT).exists() {
        panic!("aya-build produced no {OBJECT} object in {}", out.display());
    }
}

/// Ok if `bpf-linker` runs and the nightly toolchain has rust-src; else a
/// description of what is missing.
fn toolchain_ready() -> Result<(), String> {
    let linker = Command::new("bpf-linker").arg("--version").output();
    match linker {
        Ok(o) if o.status.success() => {
            if let Some(p) = which("bpf-linker") {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
        _ => {
            // A path that does not exist makes cargo rerun this script on
            // every build, so installing bpf-linker later is picked up.
            println!("cargo:rerun-if-changed=/nonexistent/nfsdtop/bpf-linker");
            return Err("bpf-linker is not installed".into());
        }
    }
    let sysroot = Command::new("rustup")
        .args(["run", "nightly", "rustc", "--print", "sysroot"])
        .output();
    let sysroot = match sysroot {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => {
            println!("cargo:rerun-if-changed=/nonexistent/nfsdtop/nightly");
            return Err("there is no nightly Rust toolchain".into());
        }
    };
    let core = Path::new(&sysroot).join("lib/rustlib/src/rust/library/core");
    if !core.exists() {
        println!("cargo:rerun-if-changed={}", core.display());
        return Err("the nightly toolchain has no rust-src component".into());
    }
    Ok(())
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

fn without_bpf(out: &Path, why: &str) {
    println!(
        "cargo:warning=nfsdtop is built without its BPF programs ({why}): \
         the live source will not work; run scripts/setup.sh and rebuild"
    );
    if let Err(e) = std::fs::write(out.join(OBJECT), b"") {
        panic!("cannot write {}: {e}", out.join(OBJECT).display());
    }
}
