//! `nfsdtop -b`: snapshots printed like `top -b`, as text, JSON lines or CSV.

use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use nfsdtop_agent::model::EntityKind;
use nfsdtop_agent::output::{self, Format};

use nfsdtop::state::RemoteStatus;

use crate::cli::ViewArgs;
use crate::conn::{self, Update, Viewer};
use crate::out;

pub fn run(args: &ViewArgs) -> anyhow::Result<()> {
    let conn = conn::connect(
        &args.source,
        Duration::from_secs_f64(args.delay),
        Viewer::Batch,
    )?;
    if let Some(n) = &conn.notice {
        out::warn(n);
    }
    let group: EntityKind = args.group.into();
    let format: Format = args.format.into();
    let write = |text: &str| -> anyhow::Result<()> {
        out::stdout(text.as_bytes())
            .map_err(|e| anyhow::Error::from(e).context("cannot write the output"))
    };
    if format == Format::Csv {
        write(&format!("{}\n", output::CSV_HEADER))?;
    }
    // A remote agent that stays unreachable ends the run: since when has
    // no link held (None while connected)?
    let give_up = Duration::from_secs_f64(args.give_up_after);
    let mut down_since = conn.remote.is_some().then(Instant::now);
    let mut last_error = String::new();
    let mut printed = 0u64;
    let mut result = Ok(());
    loop {
        let update = match down_since {
            Some(t) => match conn
                .updates
                .recv_timeout(give_up.saturating_sub(t.elapsed()))
            {
                Ok(u) => u,
                Err(RecvTimeoutError::Timeout) => {
                    let url = conn.remote.as_deref().unwrap_or("the agent");
                    let why = if last_error.is_empty() {
                        String::new()
                    } else {
                        format!(" (last error: {last_error})")
                    };
                    result = Err(anyhow::anyhow!(
                        "giving up on {url}: no link for {}s{why}; --give-up-after SECS waits longer",
                        args.give_up_after
                    ));
                    break;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            },
            None => match conn.updates.recv() {
                Ok(u) => u,
                Err(_) => break,
            },
        };
        match update {
            Update::Snapshot(s) => {
                let text = match format {
                    Format::Json => output::json_line(&s, group, args.top) + "\n",
                    Format::Text => output::text_block(&s, group, args.top) + "\n",
                    Format::Csv => output::csv_rows(&s, group, args.top),
                };
                if let Err(e) = write(&text) {
                    // stdout closed (e.g. piped into head) ends the run
                    // quietly, in `main`.
                    result = Err(e);
                    break;
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
            Update::Status(s) => {
                match &s {
                    RemoteStatus::Connected { .. } => down_since = None,
                    RemoteStatus::Reconnecting { error, .. } => {
                        last_error = error.clone();
                        down_since.get_or_insert_with(Instant::now);
                    }
                    RemoteStatus::Connecting { .. } => {}
                }
                out::warn(s);
            }
        }
    }
    conn.join();
    result
}
