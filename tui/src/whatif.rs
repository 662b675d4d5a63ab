//! `nfsdtop whatif FILE`: the command line of the agent's what-if model
//! (nfsdtop_agent::whatif): fit the recording, run it under each policy,
//! print the columns.

use anyhow::Context as _;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use nfsdtop::state::whatif::WhatIf;
use nfsdtop_agent::classify::ClassMap;
use nfsdtop_agent::source::demo::Policy;
use nfsdtop_agent::whatif::{self, report, Options};

use crate::cli::SourceArgs;

#[derive(Args, Debug, Clone)]
pub struct WhatifArgs {
    /// A recording made by `nfsdtop record`.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Policies to predict, comma-separated (flat, rr-peer, rr-class, sparse-flow).
    #[arg(long, value_delimiter = ',', value_parser = crate::cli::PolicyParser, default_value = "flat,rr-peer,rr-class")]
    pub policy: Vec<Policy>,
    /// Class map file for rr-class and the per-class rows (default: the one recorded).
    #[arg(long, value_name = "FILE")]
    pub class_map: Option<PathBuf>,
    /// nfsd threads of the modelled server (default: the recorded count).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub threads: Option<u32>,
    /// Seed of the simulation's random draws.
    #[arg(long, default_value_t = 1, hide = true)]
    pub seed: u64,
    /// Keep the model as fitted: do not calibrate its think times against
    /// the recording's shares (the fit column then shows the fit's own miss).
    #[arg(long)]
    pub no_calibrate: bool,
    /// Output: a table, or JSON for scripts.
    #[arg(long, value_enum, default_value_t = WhatifFormat::Text)]
    pub format: WhatifFormat,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum WhatifFormat {
    Text,
    Json,
}

/// The what-if columns for a replay (`--replay FILE --whatif POLICY`):
/// the whole recording fitted once, before the UI starts.
pub fn replay_columns(source: &SourceArgs, policy: Policy) -> anyhow::Result<WhatIf> {
    let Some(file) = &source.local.replay else {
        anyhow::bail!("--whatif needs --replay FILE: the prediction is made from a recording");
    };
    let opts = Options {
        policies: vec![policy],
        class_map: source
            .local
            .class_map
            .as_deref()
            .map(ClassMap::load)
            .transpose()?,
        ..Options::default()
    };
    crate::out::warn(format_args!(
        "fitting {} for the {policy} columns...",
        file.display()
    ));
    let r = whatif::run_file(file, &opts)?;
    WhatIf::from_report(&r, &policy.to_string())
        .ok_or_else(|| anyhow::anyhow!("the what-if report has no {policy} prediction"))
}

/// One stage of the fit, on stderr.
fn progress(what: &str) {
    crate::out::warn(format_args!("whatif: {what}..."));
}

pub fn run(args: &WhatifArgs) -> anyhow::Result<()> {
    let mut opts = Options {
        policies: args.policy.clone(),
        class_map: args.class_map.as_deref().map(ClassMap::load).transpose()?,
        threads: args.threads,
        seed: args.seed,
        ..Options::default()
    };
    if args.no_calibrate {
        opts.calibrate_above_points = f64::INFINITY;
    }
    // Where someone watches: a crafted recording takes minutes (README,
    // "what-if"). Not into a log or a pipe, which want the report alone.
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        opts.progress = Some(progress);
    }
    let r = whatif::run_file(&args.file, &opts)?;
    let text = match args.format {
        WhatifFormat::Text => report::text(&r),
        WhatifFormat::Json => report::json(&r) + "\n",
    };
    // A closed pipe (`| head`) ends quietly in `main`; any other failure
    // (a full disk, /dev/full) is an error: the report was not written.
    crate::out::stdout(text.as_bytes()).context("cannot write the report to stdout")
}
