//! Project tasks: `cargo xtask run` (nfsdtop, with set-up),
//! `cargo xtask test` (every test, with set-up) and the others below
//! (`cargo xtask --help`). See README.md.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};

mod bench;
mod compare;
mod deb;
mod guest;
mod imports;
mod install;
mod vm;

#[derive(Parser)]
#[command(about = "nfsdtop project tasks")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Install what the build and tests need (idempotent).
    Setup,
    /// Check that no files of a crate import each other in a circle
    /// (also a step of `test`).
    Imports,
    /// Build and run nfsdtop; arguments after `--` go to nfsdtop.
    Run {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run every test: format, lints, unit and integration tests, and the
    /// end-to-end tests against real components.
    Test,
    /// Build (once; cached) the Debian guest image for the real-kernel tests.
    VmImage(guest::image::ImageArgs),
    /// Real-kernel tests: nfsd in QEMU, nfsdtop checked against ftrace.
    VmTest(vm::TestArgs),
    /// The same load on two kernels (before and after a dispatch patch),
    /// each checked against ftrace, and one report of what changed.
    Compare(compare::CompareArgs),
    /// Install binaries, man pages, completions, the systemd unit and an
    /// example config (`--prefix /usr --destdir DIR` to stage).
    Install(install::InstallArgs),
    /// Build the Debian package of the installed tree (lintian-clean;
    /// the service enabled and started on install).
    Deb(deb::DebArgs),
    /// Every benchmark in one run, written to BENCHMARKS.md (`--quick`:
    /// small, no VM, into target/bench-quick.md).
    Bench(bench::BenchArgs),
}

pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

fn run(step: &str, cmd: &mut Command) -> anyhow::Result<()> {
    let started = Instant::now();
    eprintln!("==> {step}");
    let status = cmd
        .current_dir(root())
        .status()
        .with_context(|| format!("cannot start {step}"))?;
    eprintln!("<== {step}: {status} in {:.0?}", started.elapsed());
    if !status.success() {
        bail!("{step} failed ({status})");
    }
    Ok(())
}

/// Set by `cargo xtask test`: a skipped BPF test or bench is a failure.
pub(crate) use nfsdtop_agent::testing::REQUIRE_BPF;

pub(crate) fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

fn setup(what: &str) -> anyhow::Result<()> {
    run(
        &format!("set-up ({what})"),
        Command::new("bash").arg("scripts/setup.sh").arg(what),
    )
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().task {
        Task::Setup => setup("all"),
        Task::Imports => imports::check(&root()),
        Task::Run { args } => {
            setup("build")?;
            run(
                "nfsdtop",
                cargo()
                    .args(["run", "--quiet", "--release", "-p", "nfsdtop", "--"])
                    .args(args),
            )
        }
        Task::Test => {
            // This suite runs as root with BPF (CI does): a test or bench
            // that would skip for want of BPF, tracefs or root fails here
            // instead (agent/src/testing.rs; every step inherits it).
            std::env::set_var(REQUIRE_BPF, "1");
            setup("all")?;
            eprintln!("==> imports");
            imports::check(&root())?;
            run(
                "cargo fmt --check",
                cargo().args(["fmt", "--all", "--", "--check"]),
            )?;
            run(
                "cargo clippy",
                cargo().args([
                    "clippy",
                    "--workspace",
                    "--all-targets",
                    "--",
                    "-D",
                    "warnings",
                ]),
            )?;
            run("cargo test", cargo().args(["test", "--workspace"]))?;
            bench::bench(bench::BenchArgs::quick())?;
            // End-to-end checks that drive real components from a shell
            // (each script exits non-zero on failure).
            let mut scripts: Vec<PathBuf> = std::fs::read_dir(root().join("scripts/e2e"))
                .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
                .unwrap_or_default();
            scripts.retain(|p| p.extension().is_some_and(|e| e == "sh"));
            scripts.sort();
            for s in scripts {
                run(&s.display().to_string(), Command::new("bash").arg(&s))?;
            }
            // The real kernel: nfsd in QEMU, nfsdtop against ftrace (trixie,
            // short load; `cargo xtask vm-test --kernel all` is the matrix).
            let started = Instant::now();
            eprintln!("==> vm-test --kernel trixie --quick");
            vm::test(vm::TestArgs::readme())?;
            eprintln!("<== vm-test: ok in {:.0?}", started.elapsed());
            Ok(())
        }
        Task::VmImage(args) => {
            setup("all")?;
            guest::image::image(args)
        }
        Task::VmTest(args) => {
            setup("all")?;
            vm::test(args)
        }
        Task::Compare(args) => {
            setup("all")?;
            compare::compare(args)
        }
        Task::Install(args) => {
            setup("build")?;
            install::install(&args)
        }
        Task::Deb(args) => {
            setup("build")?;
            deb::deb(&args).map(|_| ())
        }
        Task::Bench(args) => {
            setup("all")?;
            bench::bench(args)
        }
    }
}
