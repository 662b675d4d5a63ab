//! The interactive UI's event loop: snapshots from the connection and
//! key presses from the terminal, neither ever blocking the other. The
//! channel is drained with `try_recv`; the terminal is polled with a short
//! timeout; the screen is redrawn when something changed (and a few times
//! a second, so "stale" appears on time).
//!
//! Leaving: `q` and SIGTERM / SIGINT restore the terminal on the way out
//! (a signal gets [`GRACE`] to do so, then the process exits regardless,
//! wherever the main thread is); SIGHUP, a hung-up terminal or a failed
//! draw mean the terminal is gone: exit at once, restoring nothing.

use std::io::{self, IsTerminal};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc::TryRecvError;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossterm::event::{self, DisableMouseCapture, EnableMouseCapture, Event};
use nfsdtop::prefs::{self, Prefs};
use nfsdtop::state::{Action, RemoteStatus, State};
use nfsdtop::view;
use nfsdtop_agent::pipeline::Control;
use ratatui::backend::Backend;
use ratatui::Terminal;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use crate::cli::ViewArgs;
use crate::conn::{self, Connection, Update, Viewer};
use crate::out;
use crate::tty::{Ready, Tty};

/// Key poll timeout: the longest a snapshot waits to be noticed.
const POLL: Duration = Duration::from_millis(50);
/// Redraw at least this often even when nothing arrives.
const REDRAW: Duration = Duration::from_millis(250);
/// Updates taken per turn, so a flood of snapshots cannot starve keys.
const MAX_UPDATES_PER_TURN: usize = 64;
/// Terminal events taken per turn, so a flood of input cannot starve the
/// checks for signals.
const MAX_EVENTS_PER_TURN: usize = 256;
/// How long SIGTERM / SIGINT give the UI to restore the terminal.
const GRACE: Duration = Duration::from_millis(1000);
/// Exit status when the terminal hangs up (as SIGHUP's default would).
const HANGUP_STATUS: i32 = 128 + SIGHUP;

/// Why the event loop ended.
enum End {
    /// `q`, or SIGTERM / SIGINT: both restore the terminal, status 0.
    Quit,
    /// The terminal is gone.
    Hangup,
}

pub fn run(args: &ViewArgs) -> anyhow::Result<()> {
    if !io::stdout().is_terminal() {
        anyhow::bail!("the interactive UI needs a terminal: use -b for batch output");
    }
    // The preferences first: they may set the interval the source runs at.
    // A file that cannot be used is left alone (not saved over) and said.
    let mut state = State::new(Duration::from_secs_f64(args.delay()), None);
    state.group = args.group().into();
    let mut save_to = prefs::path();
    let mut problem = None;
    match save_to.as_deref().map(prefs::load) {
        Some(Ok(Some(p))) => p.apply(&mut state, args.group.is_some(), args.delay.is_some()),
        Some(Err(e)) => {
            problem = Some(format!("preferences ignored: {e}"));
            save_to = None;
        }
        Some(Ok(None)) | None => {}
    }
    // Open the source before touching the terminal, so errors print plainly.
    // (`--format`, output meant for a program, needs -b: never here.)
    let conn = conn::connect(&args.source, state.interval, Viewer::Interactive)?;
    state.notice = conn.notice.clone();
    state.message = problem;
    state.top = args.top;
    if let Some(policy) = args.whatif {
        state.whatif = Some(crate::whatif::replay_columns(&args.source, policy)?);
    }
    if let Some(url) = &conn.remote {
        state.on_status(RemoteStatus::Connecting { url: url.clone() });
    }
    let tty =
        Tty::open().map_err(|e| anyhow::anyhow!("cannot open the terminal for input: {e}"))?;
    let signalled = watch_signals()?;
    watch_hangup()?;

    let mut terminal = match ratatui::try_init() {
        Ok(t) => t,
        Err(e) => {
            ratatui::restore();
            return Err(anyhow::anyhow!("cannot set up the terminal: {e}"));
        }
    };
    // Clicks and the wheel come as events (see State::on_mouse); the
    // terminal gets its own mouse handling back on every way out.
    let _ = crossterm::execute!(io::stdout(), EnableMouseCapture);
    // ratatui's hook leaves the alternate screen and raw mode; show the
    // cursor again too, before the panic message is printed.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = crossterm::execute!(io::stdout(), DisableMouseCapture, crossterm::cursor::Show);
        hook(info);
    }));
    let end = event_loop(&mut terminal, &mut state, &conn, &signalled, &tty);
    if matches!(end, Ok(End::Hangup)) {
        std::process::exit(HANGUP_STATUS);
    }
    let _ = crossterm::execute!(io::stdout(), DisableMouseCapture);
    ratatui::restore();
    let _ = crossterm::execute!(io::stdout(), crossterm::cursor::Show);
    conn.join();
    if let Some(path) = save_to.filter(|_| end.is_ok()) {
        if let Err(e) = Prefs::of(&state).save(&path) {
            out::warn(format_args!(
                "cannot keep the preferences in {}: {e}",
                path.display()
            ));
        }
    }
    if let Some(Err(e)) = &state.ended {
        out::warn(format_args!("the source stopped: {e}"));
    }
    end.map(|_| ())
}

/// A terminal that hangs up ends the process at once, wherever the main
/// thread is (e.g. inside crossterm's read).
fn watch_hangup() -> anyhow::Result<()> {
    let tty = Tty::open()?;
    std::thread::Builder::new()
        .name("nfsdtop-hangup".into())
        .spawn(move || {
            tty.wait_gone();
            std::process::exit(HANGUP_STATUS);
        })?;
    Ok(())
}

/// SIGTERM / SIGINT (e.g. `kill`) end the loop like `q`, and if the main
/// thread cannot get there within [`GRACE`] (a write to a terminal that
/// reads nothing), the process ends anyway. SIGHUP with the terminal gone
/// ends it at once; a SIGHUP sent by hand to a live terminal is a SIGTERM.
/// The returned flag holds the signal, 0 before one.
fn watch_signals() -> anyhow::Result<Arc<AtomicI32>> {
    let signalled = Arc::new(AtomicI32::new(0));
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGHUP, SIGINT])?;
    let tty = Tty::open().ok();
    let flag = Arc::clone(&signalled);
    std::thread::Builder::new()
        .name("nfsdtop-signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                let gone = tty
                    .as_ref()
                    .is_none_or(|t| t.wait(Duration::ZERO) == Ready::Gone);
                if sig == SIGHUP && gone {
                    std::process::exit(HANGUP_STATUS);
                }
                flag.store(sig, Ordering::Relaxed);
                // The grace period for the UI to restore the terminal.
                std::thread::sleep(GRACE);
                std::process::exit(128 + sig);
            }
        })?;
    Ok(signalled)
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
    signalled: &AtomicI32,
    tty: &Tty,
) -> anyhow::Result<End> {
    let mut dirty = true;
    let mut last_draw: Option<Instant> = None;
    // For the end-to-end test of the panic hook: panic once the UI is up.
    let panic_for_test = std::env::var_os("NFSDTOP_TEST_PANIC_AFTER_DRAW").is_some();
    loop {
        if signalled.load(Ordering::Relaxed) != 0 {
            return Ok(End::Quit);
        }
        state.tick(Instant::now());
        dirty |= drain(conn, state);
        if let Some(h) = &conn.playback {
            let now = h.status();
            if state.playback.as_ref() != Some(&now) {
                if now.note.is_some() {
                    state.message = now.note.clone();
                }
                state.playback = Some(now);
                dirty = true;
            }
        }
        if dirty || last_draw.is_none_or(|t| t.elapsed() >= REDRAW) {
            if terminal.draw(|f| view::draw(f, state)).is_err() {
                // Nothing can be shown any more (EIO: the terminal is gone).
                return Ok(End::Hangup);
            }
            dirty = false;
            last_draw = Some(Instant::now());
            if panic_for_test && state.snapshot().is_some() {
                panic!("test panic (NFSDTOP_TEST_PANIC_AFTER_DRAW is set)");
            }
        }
        if tty.wait(POLL) == Ready::Gone {
            return Ok(End::Hangup);
        }
        // Take the events already waiting (and resizes) before drawing again.
        for _ in 0..MAX_EVENTS_PER_TURN {
            match event::poll(Duration::ZERO) {
                Ok(true) => {}
                Ok(false) => break,
                Err(_) => return Ok(End::Hangup),
            }
            let Ok(ev) = event::read() else {
                return Ok(End::Hangup);
            };
            match ev {
                Event::Key(k) => match state.on_key(k) {
                    Action::Quit => return Ok(End::Quit),
                    Action::SetInterval(d) => {
                        // A closed channel means the source has ended:
                        // nothing left to pace.
                        let _ = conn.control.send(Control::SetInterval(d));
                    }
                    Action::Playback(c) => {
                        if let Some(h) = &conn.playback {
                            h.send(c);
                        }
                    }
                    Action::Redraw | Action::None => {}
                },
                Event::Mouse(m) => {
                    state.on_mouse(m);
                }
                Event::Resize(..) if terminal.autoresize().is_err() => return Ok(End::Hangup),
                _ => {}
            }
            dirty = true;
        }
    }
}
