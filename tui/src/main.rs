//! nfsdtop: the terminal UI and batch front end of the nfsdtop pipeline.

mod app;
mod batch;
mod cli;
mod conn;
mod doctor;
mod record;

use clap::Parser;

use cli::{Cli, Command};

fn main() {
    let cli = Cli::parse();
    let result = match &cli.command {
        Some(Command::Record(args)) => record::run(args),
        Some(Command::Doctor(args)) => doctor::run(args),
        None if cli.view.batch => batch::run(&cli.view),
        None => app::run(&cli.view),
    };
    if let Err(e) = result {
        eprintln!("nfsdtop: {e:#}");
        std::process::exit(1);
    }
}
