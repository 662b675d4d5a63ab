//! `cargo xtask compare A B --load FILE`: the same load on two kernels
//! (before and after a dispatch patch), each run checked against the
//! kernel's own ftrace as `vm-test` checks it, and one report of what
//! changed per client (report.rs: text and JSON; plot.rs: SVG), with
//! what `nfsdtop whatif` predicted from the first kernel's recording.
//! A kernel is a suite (its own kernel) or Debian package files
//! (comma-separated, installed into the `--userland` suite's image).

mod plot;
pub mod report;

use std::fs;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};

use crate::guest::image::Suite;
use crate::guest::read_kv;
use crate::vm::{load, run_load, Target};
use report::KernelRun;

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The first kernel ("before"): trixie, bookworm or sid (that suite's
    /// own kernel), or kernel package files, comma-separated
    /// (linux-image-*.deb; Debian's 7.x come as four: give them all).
    pub a: String,
    /// The second kernel ("after"), as the first.
    pub b: String,
    /// The load, run unchanged on both (scripts/vm/loads/*.toml).
    #[arg(long, value_name = "FILE")]
    pub load: PathBuf,
    /// The Debian userland kernel packages are installed into.
    #[arg(long, value_enum, default_value_t = Suite::Trixie)]
    pub userland: Suite,
    /// Use this nfsdtop binary instead of building it.
    #[arg(long, value_name = "FILE")]
    pub nfsdtop: Option<PathBuf>,
    /// Where the report goes (default target/compare/A-vs-B-TIME/).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

fn target(spec: &str, userland: Suite) -> anyhow::Result<Target> {
    if let Ok(suite) = Suite::from_str(spec, true) {
        return Ok(Target {
            suite,
            packages: vec![],
        });
    }
    let packages: Vec<PathBuf> = spec.split(',').map(PathBuf::from).collect();
    for p in &packages {
        if !p.is_file() {
            bail!(
                "{}: neither a suite (trixie, bookworm, sid) nor a kernel package file",
                p.display()
            );
        }
    }
    Ok(Target {
        suite: userland,
        packages,
    })
}

pub fn compare(args: CompareArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let load = load::read(&args.load)?;
    let targets = [
        target(&args.a, args.userland)?,
        target(&args.b, args.userland)?,
    ];
    // Both images first: a kernel that lacks what nfsdtop needs is
    // refused before anything runs.
    for t in &targets {
        t.image()?;
    }
    let nfsdtop = match args.nfsdtop {
        Some(p) => p,
        None => crate::guest::run::build_nfsdtop()?,
    };
    let mut runs = vec![];
    for (i, t) in targets.iter().enumerate() {
        eprintln!("compare: {} on {}", args.load.display(), t.name());
        let (rep, results) = run_load(t, &nfsdtop, load.clone(), i == 0)?;
        for l in &rep.lines {
            eprintln!("{l}");
        }
        let summary = read_kv(&results.join("summary.txt"))?;
        let dispatches = crate::vm::batch::read(&results.join("nfsdtop-main.jsonl"))
            .ok()
            .and_then(|l| l.last().map(|l| l.totals.dispatches))
            .unwrap_or(0);
        runs.push(KernelRun {
            label: t.name(),
            kernel: summary.get("kernel").cloned().unwrap_or_default(),
            results: results.display().to_string(),
            checked: rep.failures.is_empty(),
            failures: rep.failures,
            dispatches,
        });
    }
    let runs: [KernelRun; 2] = runs.try_into().map_err(|_| anyhow::anyhow!("two runs"))?;
    let failed = runs.iter().any(|r| !r.checked);
    let c = report::build(&args.load.display().to_string(), runs).map_err(anyhow::Error::msg)?;
    let out = args.out.unwrap_or_else(|| {
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        crate::root().join(format!(
            "target/compare/{}-vs-{}-{stamp}",
            targets[0].name(),
            targets[1].name()
        ))
    });
    fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let text = report::text(&c);
    fs::write(out.join("report.txt"), &text)?;
    fs::write(out.join("report.json"), serde_json::to_string_pretty(&c)?)?;
    fs::write(out.join("report.svg"), plot::svg(&c))?;
    println!("{text}");
    eprintln!(
        "compare: report in {} (report.txt, report.json, report.svg), {:.0?} in all",
        out.display(),
        started.elapsed()
    );
    if failed {
        bail!(
            "a run's checks against ftrace failed: its numbers are not to be trusted (see above)"
        );
    }
    Ok(())
}
