//! nfsdtop: the terminal UI and batch front end of the nfsdtop pipeline.

mod app;
mod batch;
mod cli;
mod conn;
mod doctor;
mod manual;
mod record;

use clap::Parser;

use cli::{Cli, Command};

fn main() {
    let cli = Cli::parse();
    let result = match &cli.command {
        Some(Command::Record(args)) => record::run(args),
        Some(Command::Doctor(args)) => doctor::run(args),
        Some(Command::Completions { shell }) => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(*shell, &mut cmd, "nfsdtop", &mut std::io::stdout());
            Ok(())
        }
        Some(Command::Manpage { dir }) => manpages(dir.as_deref()),
        None if cli.view.batch => batch::run(&cli.view),
        None => app::run(&cli.view),
    };
    if let Err(e) = result {
        eprintln!("nfsdtop: {e:#}");
        std::process::exit(1);
    }
}

fn manpages(dir: Option<&std::path::Path>) -> anyhow::Result<()> {
    let cmd = <Cli as clap::CommandFactory>::command();
    let Some(dir) = dir else {
        return Ok(manual::render("nfsdtop", cmd, &mut std::io::stdout())?);
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
