//! `cargo xtask bench [--quick]`: every benchmark of nfsdtop in one run,
//! written as BENCHMARKS.md (or, with `--quick`, target/bench-quick.md).
//! This module owns the command line and the document's assembly; each
//! part is a file of its own, its prose a template in bench/text/, and the
//! dated record of what the numbers led to is docs/benchmark-history.md
//! (appended to the generated file).
//!
//! Parts, each a section of the generated file:
//!   A/B  [`guest`]: the real kernel: fio IOPS over a loopback NFS mount in
//!        the QEMU guest with nothing attached, with nfsdtop attached and
//!        with the same sunrpc events in ftrace, alternated; BPF run time
//!        per event from the kernel's BPF statistics
//!   C    [`aggregator`]: the aggregator's throughput against the ring's
//!        delivery rate
//!   D    [`daemon`]: nfsdtopd's CPU and memory at steady dispatch rates,
//!        and with 100,000 peers (exporter/tests/scale.rs)
//!   E    [`frames`]: TUI frame time and /metrics encode time with 10,000
//!        peers
//!   F    [`whatif`]: the what-if model's fit and prediction
//!
//! `--quick` runs every part small (seconds, no VM) and only checks that
//! the machinery works: non-zero rates, tables parsed.

mod against;
mod aggregator;
mod daemon;
mod frames;
mod guest;
mod kept;
mod rounds;
mod text;
mod util;
mod whatif;

use std::fs;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::Args;

use crate::guest::image::Suite;
use crate::root;
use text::fill;
use util::{commit, cpu_model, loadavg, nproc, sh};

/// The dated record of what the numbers led to, appended to the output.
const HISTORY: &str = "docs/benchmark-history.md";

#[derive(Args)]
pub struct BenchArgs {
    /// Small and fast: check the machinery, write target/bench-quick.md.
    #[arg(long)]
    pub quick: bool,
    /// Skip the QEMU part (A/B) in a full run; the output keeps the A/B
    /// part it had, marked with the run it came from.
    #[arg(long)]
    pub no_vm: bool,
    /// Only the QEMU part (A/B), for working on it.
    #[arg(long)]
    pub vm_only: bool,
    /// fio seconds per run in the guest.
    #[arg(long, default_value_t = 10)]
    pub fio_secs: u32,
    /// Rounds of (none, nfsdtop, classic, ftrace, hooked, discard, noworkload) in the guest.
    #[arg(long, default_value_t = 4)]
    pub reps: u32,
    /// Output file (default BENCHMARKS.md, or target/bench-quick.md).
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Only part A's NFSv4 operations section, for working on it
    /// (default output target/bench-nfs4ops.md).
    #[arg(long, conflicts_with_all = ["quick", "no_vm", "vm_only"])]
    pub nfs4_ops_only: bool,
    /// Only the workload view's cost, from paired rounds of none /
    /// nfsdtop / noworkload in one guest (`--suite`; default output
    /// target/bench-workload.md).
    #[arg(long, conflicts_with_all = ["quick", "no_vm", "vm_only", "nfs4_ops_only"])]
    pub workload_view_only: bool,
    /// Only this tree's nfsdtop against another nfsdtop binary (built
    /// from the tree before a change), from paired rounds in one guest
    /// (`--suite`; default output target/bench-against.md).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["quick", "no_vm", "vm_only", "nfs4_ops_only", "workload_view_only"])]
    pub against: Option<PathBuf>,
    /// The guest of `--workload-view-only` and `--against`.
    #[arg(long, value_enum, default_value_t = Suite::Trixie)]
    pub suite: Suite,
}

impl BenchArgs {
    /// `cargo xtask bench --quick` (a step of `cargo xtask test`).
    pub fn quick() -> BenchArgs {
        BenchArgs {
            quick: true,
            no_vm: false,
            vm_only: false,
            fio_secs: 10,
            reps: 4,
            output: None,
            nfs4_ops_only: false,
            workload_view_only: false,
            against: None,
            suite: Suite::Trixie,
        }
    }
}

/// A part run on its own (`--nfs4-ops-only`, `--workload-view-only`):
/// its text, given nfsdtop built for the guest.
type Section = fn(&BenchArgs, &std::path::Path) -> anyhow::Result<String>;

pub fn bench(args: BenchArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let only: Option<(&str, Section)> = if args.nfs4_ops_only {
        Some(("target/bench-nfs4ops.md", guest::nfs4ops::section))
    } else if args.workload_view_only {
        Some(("target/bench-workload.md", guest::workload::section))
    } else if args.against.is_some() {
        Some(("target/bench-against.md", against::section))
    } else {
        None
    };
    if let Some((default_out, section)) = only {
        let out = (args.output.clone()).unwrap_or_else(|| root().join(default_out));
        let nfsdtop = crate::guest::run::build_nfsdtop()?;
        fs::write(&out, section(&args, &nfsdtop)?)
            .with_context(|| format!("writing {}", out.display()))?;
        eprintln!(
            "bench: wrote {} in {:.0?}",
            out.display(),
            started.elapsed()
        );
        return Ok(());
    }
    let out = args.output.clone().unwrap_or_else(|| {
        if args.quick {
            root().join("target/bench-quick.md")
        } else {
            root().join("BENCHMARKS.md")
        }
    });
    let history =
        fs::read_to_string(root().join(HISTORY)).with_context(|| format!("reading {HISTORY}"))?;
    let load_start = loadavg();
    let mut results = Results::default();
    let skipped = || "Skipped (`--vm-only`).\n".to_string();

    let agg = if args.vm_only {
        skipped()
    } else {
        aggregator::part(args.quick, &mut results)?
    };
    let vmpart = if args.quick {
        "Skipped in quick mode (`cargo xtask bench` runs it: one QEMU boot, a few minutes).\n"
            .to_string()
    } else if args.no_vm {
        kept::vm_part(&fs::read_to_string(&out).unwrap_or_default())
            .unwrap_or_else(|| "Skipped (`--no-vm`).\n".to_string())
    } else {
        guest::part(&args, &mut results)?
    };
    let (daemon, frames) = if args.vm_only {
        (skipped(), skipped())
    } else {
        (daemon::part(args.quick)?, frames::part(args.quick)?)
    };
    let whatif = if args.vm_only {
        skipped()
    } else {
        whatif::part(args.quick)?
    };
    let ring = aggregator::ring_vs_aggregator(&results)?;

    let load_end = loadavg();
    let mut doc = fill(
        text::HEADER,
        "head",
        &[
            ("quick", &if args.quick { " --quick" } else { "" }),
            ("date", &sh("date -u '+%Y-%m-%d %H:%M'")),
            ("commit", &commit()),
            ("nproc", &nproc()),
            ("cpu", &cpu_model()),
            ("kernel", &sh("uname -r")),
            ("rustc", &sh("rustc --version")),
            ("load_start", &load_start),
            ("load_end", &load_end),
            (
                "seconds",
                &format!("{:.0}", started.elapsed().as_secs_f64()),
            ),
            ("vm", &vmpart),
            ("aggregator", &agg),
            ("ring", &ring),
            ("daemon", &daemon),
            ("frames", &frames),
            ("whatif", &whatif),
        ],
    )?;
    doc.push_str(&history);
    if let Some(dir) = out.parent() {
        fs::create_dir_all(dir)?;
    }
    fs::write(&out, &doc).with_context(|| format!("writing {}", out.display()))?;
    eprintln!(
        "bench: wrote {} in {:.0?}",
        out.display(),
        started.elapsed()
    );
    Ok(())
}

#[derive(Default)]
pub struct Results {
    /// Aggregator events per second (one core), per case.
    agg_rates: Vec<(String, f64)>,
    /// Ring: records (program runs) per second at the heaviest guest load.
    ring_rate: Option<f64>,
    /// Ring on this host at saturation (agent/benches/ring.rs): delivered/s,
    /// lost/s, and the markdown table.
    host_ring: Option<(f64, f64, String)>,
}
