//! `nfsdtop whatif FILE` (its arguments in cli.rs): the agent's what-if model
//! (nfsdtop_agent::whatif): fit the recording, run it under each policy,
//! print the columns.

use anyhow::Context as _;

use nfsdtop::state::whatif::WhatIf;
use nfsdtop_agent::enrich::classify::ClassMap;
use nfsdtop_agent::source::demo::Policy;
use nfsdtop_agent::whatif::{self, report, Options};

use crate::cli::{SourceArgs, WhatifArgs, WhatifFormat};

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
