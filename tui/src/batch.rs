//! `nfsdtop -b`: snapshots printed like `top -b`, as text, JSON lines or CSV.

use std::io::Write;
use std::time::Duration;

use nfsdtop_agent::model::EntityKind;
use nfsdtop_agent::output::{self, Format};

use crate::cli::ViewArgs;
use crate::conn::{self, Update};

pub fn run(args: &ViewArgs) -> anyhow::Result<()> {
    let conn = conn::connect(&args.source, Duration::from_secs_f64(args.delay))?;
    if let Some(n) = &conn.notice {
        eprintln!("nfsdtop: {n}");
    }
    let group: EntityKind = args.group.into();
    let format: Format = args.format.into();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if format == Format::Csv {
        writeln!(out, "{}", output::CSV_HEADER)?;
    }
    let mut printed = 0u64;
    let mut result = Ok(());
    while let Ok(update) = conn.updates.recv() {
        match update {
            Update::Snapshot(s) => {
                let text = match format {
                    Format::Json => output::json_line(&s, group, args.top) + "\n",
                    Format::Text => output::text_block(&s, group, args.top) + "\n",
                    Format::Csv => output::csv_rows(&s, group, args.top),
                };
                if out
                    .write_all(text.as_bytes())
                    .and_then(|_| out.flush())
                    .is_err()
                {
                    break; // stdout closed (e.g. piped into head): stop quietly
                }
                printed += 1;
                if args.iterations.is_some_and(|n| printed >= n) {
                    break;
                }
            }
            Update::Ended(r) => {
                result = r.map_err(|e| anyhow::anyhow!(e));
                break;
            }
            Update::Status(s) => eprintln!("nfsdtop: {s}"),
        }
    }
    conn.join();
    result
}
