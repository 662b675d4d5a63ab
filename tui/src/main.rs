//! nfsdtop: the terminal UI and batch front end of the nfsdtop pipeline.
//!
//! Exit status: 0 on success, also when stdout's reader goes away (e.g.
//! `nfsdtop -b | head -4`; not for `record`, whose file it cuts short); 1
//! on an error (said on stderr in one line);
//! 2 for a bad command line (clap); 3 from `doctor` when the live source
//! cannot start here (the report says why); 129 when the UI's terminal hangs up;
//! 128+N when the UI, sent signal N (TERM, INT), could not restore the
//! terminal within a second (it ends then anyway; in time, the status is 0).

// `eprintln!` panics when stderr is closed: messages go through `out`.
#![deny(clippy::print_stderr, clippy::print_stdout)]

mod app;
mod batch;
mod cli;
mod conn;
mod doctor;
mod manual;
mod out;
mod record;
mod tty;
mod whatif;

use cli::{Cli, Command};

fn main() {
    let cli: Cli = nfsdtop_agent::session::args::parse_command_line(|io| {
        out::warn(format_args!("cannot write to stdout: {io}"))
    });
    let result = match &cli.command {
        Some(Command::Record(args)) => record::run(args),
        Some(Command::Doctor(args)) => match doctor::run(args) {
            // The report says why, each problem with what to do.
            Ok(false) => std::process::exit(doctor::NOT_READY),
            other => other.map(drop),
        },
        Some(Command::Whatif(args)) => whatif::run(args),
        Some(Command::Completions { shell }) => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            // Into memory first: clap_complete panics on a failed write.
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut cmd, "nfsdtop", &mut script);
            out::stdout(&script).map_err(anyhow::Error::from)
        }
        Some(Command::Manpage { dir }) => manpages(dir.as_deref()),
        None if cli.view.batch => batch::run(&cli.view),
        None => app::run(&cli.view),
    };
    // A recording is the product itself: one cut short because its reader
    // went away (`record -o /dev/stdout | ...`) is an error to report.
    let records = matches!(cli.command, Some(Command::Record(_)));
    match result {
        Ok(()) => {}
        // Whoever read stdout has stopped: nothing is wrong.
        Err(e) if !records && out::closed_pipe(&e) => {}
        Err(e) => {
            out::warn(format_args!("{e:#}"));
            std::process::exit(1);
        }
    }
}

fn manpages(dir: Option<&std::path::Path>) -> anyhow::Result<()> {
    let cmd = <Cli as clap::CommandFactory>::command();
    let Some(dir) = dir else {
        let mut page = Vec::new();
        manual::render("nfsdtop", cmd, &mut page)?;
        return Ok(out::stdout(&page)?);
    };
    std::fs::create_dir_all(dir)?;
    let mut pages = vec![("nfsdtop".to_string(), cmd.clone())];
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("nfsdtop-{}", sub.get_name());
        let page = sub.clone().name(name.clone()).bin_name(name.clone());
        pages.push((name, page));
    }
    for (name, page) in pages {
        let path = dir.join(format!("{name}.1"));
        let mut out = std::fs::File::create(&path)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        manual::render(&name, page, &mut out)?;
    }
    Ok(())
}
