//! The interactive UI's event loop: snapshots from the connection and
//! key presses from the terminal, neither ever blocking the other. The
//! channel is drained with `try_recv`; the terminal is polled with a short
//! timeout; the screen is redrawn when something changed (and a few times
//! a second, so "stale" appears on time).

use std::io::{self, IsTerminal};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::TryRecvError;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossterm::event::{self, Event};
use nfsdtop::state::{Action, RemoteStatus, State};
use nfsdtop::view;
use nfsdtop_agent::pipeline::Control;
use ratatui::backend::Backend;
use ratatui::Terminal;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use crate::cli::ViewArgs;
use crate::conn::{self, Connection, Update};

/// Key poll timeout: the longest a snapshot waits to be noticed.
const POLL: Duration = Duration::from_millis(50);
/// Redraw at least this often even when nothing arrives.
const REDRAW: Duration = Duration::from_millis(250);
/// Updates taken per turn, so a flood of snapshots cannot starve keys.
const MAX_UPDATES_PER_TURN: usize = 64;

pub fn run(args: &ViewArgs) -> anyhow::Result<()> {
    if !io::stdout().is_terminal() {
        anyhow::bail!("the interactive UI needs a terminal: use -b for batch output");
    }
    let interval = Duration::from_secs_f64(args.delay);
    // Open the source before touching the terminal, so errors print plainly.
    let conn = conn::connect(&args.source, interval)?;
    let mut state = State::new(interval, conn.notice.clone());
    state.group = args.group.into();
    state.top = args.top;
    if let Some(policy) = args.whatif {
        state.whatif = Some(crate::whatif::replay_columns(&args.source, policy)?);
    }
    if let Some(url) = &args.source.connect {
        state.on_status(RemoteStatus::Connecting { url: url.clone() });
    }

    // SIGTERM / SIGHUP / SIGINT (e.g. `kill`, a closed terminal window)
    // end the loop like `q`, so the terminal is restored on the way out.
    let signalled = Arc::new(AtomicBool::new(false));
    for sig in [SIGTERM, SIGHUP, SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(&signalled))?;
    }

    let mut terminal = match ratatui::try_init() {
        Ok(t) => t,
        Err(e) => {
            ratatui::restore();
            return Err(anyhow::anyhow!("cannot set up the terminal: {e}"));
        }
    };
    // ratatui's hook leaves the alternate screen and raw mode; show the
    // cursor again too, before the panic message is printed.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = crossterm::execute!(io::stdout(), crossterm::cursor::Show);
        hook(info);
    }));
    let result = event_loop(&mut terminal, &mut state, &conn, &signalled);
    ratatui::restore();
    let _ = crossterm::execute!(io::stdout(), crossterm::cursor::Show);
    conn.join();
    if let Some(Err(e)) = &state.ended {
        eprintln!("nfsdtop: the source stopped: {e}");
    }
    result
}

/// Apply what has arrived; true if anything did.
pub fn drain(conn: &Connection, state: &mut State) -> bool {
    let mut changed = false;
    for _ in 0..MAX_UPDATES_PER_TURN {
        match conn.updates.try_recv() {
            Ok(Update::Snapshot(s)) => state.on_snapshot(s),
            Ok(Update::Status(s)) => state.on_status(s),
            Ok(Update::Ended(r)) => state.on_ended(r),
            Err(TryRecvError::Empty) => break,
            Err(TryRecvError::Disconnected) => {
                if state.ended.is_none() {
                    state.on_ended(Err("the source thread went away".into()));
                    changed = true;
                }
                break;
            }
        }
        changed = true;
    }
    changed
}

fn event_loop<B: Backend>(
    terminal: &mut Terminal<B>,
    state: &mut State,
    conn: &Connection,
    signalled: &AtomicBool,
) -> anyhow::Result<()> {
    let mut dirty = true;
    let mut last_draw: Option<Instant> = None;
    // For the end-to-end test of the panic hook: panic once the UI is up.
    let panic_for_test = std::env::var_os("NFSDTOP_TEST_PANIC_AFTER_DRAW").is_some();
    loop {
        if signalled.load(Ordering::Relaxed) {
            return Ok(());
        }
        state.tick(Instant::now());
        dirty |= drain(conn, state);
        if dirty || last_draw.is_none_or(|t| t.elapsed() >= REDRAW) {
            terminal.draw(|f| view::draw(f, state))?;
            dirty = false;
            last_draw = Some(Instant::now());
            if panic_for_test && state.snapshot().is_some() {
                panic!("test panic (NFSDTOP_TEST_PANIC_AFTER_DRAW is set)");
            }
        }
        if !event::poll(POLL)? {
            continue;
        }
        // Take every event that is already waiting before drawing again.
        loop {
            match event::read()? {
                Event::Key(k) => match state.on_key(k) {
                    Action::Quit => return Ok(()),
                    Action::SetInterval(d) => {
                        // A closed channel means the source has ended:
                        // nothing left to pace.
                        let _ = conn.control.send(Control::SetInterval(d));
                    }
                    Action::Redraw | Action::None => {}
                },
                Event::Resize(..) => terminal.autoresize()?,
                _ => {}
            }
            dirty = true;
            if !event::poll(Duration::ZERO)? {
                break;
            }
        }
    }
}
