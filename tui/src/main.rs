//! nfsdtop: the terminal UI and batch front end of the nfsdtop pipeline.

mod app;
mod batch;
mod cli;
mod conn;

use clap::Parser;

use cli::{Cli, Command};

fn main() {
    let cli = Cli::parse();
    let result = match &cli.command {
        Some(Command::Record(_)) => Err(anyhow::anyhow!(
            "`nfsdtop record` is not available in this build yet"
        )),
        Some(Command::Doctor(_)) => Err(anyhow::anyhow!(
            "`nfsdtop doctor` is not available in this build yet"
        )),
        None if cli.view.batch => batch::run(&cli.view),
        None => app::run(&cli.view),
    };
    if let Err(e) = result {
        eprintln!("nfsdtop: {e:#}");
        std::process::exit(1);
    }
}
