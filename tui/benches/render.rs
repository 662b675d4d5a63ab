//! Frame render time with 10,000 peers (target: under 10 ms a frame).
//!
//! `cargo bench -p nfsdtop --bench render` (release). The snapshot comes
//! from the demo simulator and the aggregator, as in the live UI; frames
//! are drawn on ratatui's TestBackend, so this measures nfsdtop's own
//! work (layout, cells, widgets), not a terminal's.

use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use nfsdtop::state::State;
use nfsdtop::view;
use nfsdtop_agent::aggregate::{Aggregator, Limits};
use nfsdtop_agent::model::Snapshot;
use nfsdtop_agent::source::demo::{Scenario, Simulator};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

const PEERS: u32 = 10_000;

fn snapshots(n: usize) -> Vec<Snapshot> {
    let toml = format!(
        "name = \"bench-10k\"\nthreads = 64\nservice_ms = 1.0\njitter = 0.5\n\
         [[client]]\naddress = \"10.0.0.1\"\ncount = {}\nconnections = 1\ninflight = 2\n\
         [[client]]\naddress = \"10.200.0.1\"\ncount = 40\nconnections = 8\ninflight = 64\n",
        PEERS - 40
    );
    let scenario = Scenario::parse(&toml, "bench").expect("scenario");
    let classmap = scenario.class_map().expect("class map");
    let mut sim = Simulator::new(scenario);
    let mut agg = Aggregator::new(classmap, Limits::default());
    let mut buf = Vec::new();
    let mut out = Vec::new();
    for i in 1..=n as u64 + 1 {
        buf.clear();
        sim.run_until(i * 1_000_000_000, &mut buf);
        agg.ingest_all(&buf);
        let s = agg.snapshot(sim.now_ns(), i as f64, &Default::default());
        if i > 1 {
            out.push(s);
        }
    }
    out
}

/// This thread's CPU time (user + system) in seconds, from
/// /proc/thread-self/stat in clock ticks (USER_HZ, 100 on Linux). Time
/// spent preempted by other processes does not count, so the mean CPU per
/// frame is meaningful on a busy machine where wall-clock p99 is not.
fn thread_cpu_s() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After "pid (comm) ", field 3 is state; utime and stime are 14 and 15.
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

fn cpu_per(name: &str, cpu0: Option<f64>, n: usize) {
    if let (Some(a), Some(b)) = (cpu0, thread_cpu_s()) {
        println!(
            "{name:<40} cpu time per op (mean, 10 ms ticks over {n}): {:.3} ms",
            (b - a) / n as f64 * 1e3
        );
    }
}

fn stats(name: &str, mut xs: Vec<Duration>) -> (f64, f64) {
    xs.sort();
    let mean = xs.iter().map(|d| d.as_secs_f64()).sum::<f64>() / xs.len() as f64 * 1e3;
    let q = |q: f64| {
        xs[((xs.len() as f64 * q).ceil() as usize).clamp(1, xs.len()) - 1].as_secs_f64() * 1e3
    };
    let (p50, p99) = (q(0.5), q(0.99));
    let max = xs[xs.len() - 1].as_secs_f64() * 1e3;
    println!(
        "{name:<40} n={:<5} mean {mean:>7.3} ms  p50 {p50:>7.3} ms  p99 {p99:>7.3} ms  max {max:>7.3} ms",
        xs.len()
    );
    (mean, p99)
}

fn main() {
    // `cargo test --benches` runs this with --bench absent: keep it short.
    let quick = !std::env::args().any(|a| a == "--bench");
    let frames = if quick { 20 } else { 3000 };
    let snaps = snapshots(if quick { 2 } else { 10 });
    let peers = snaps[0].peers.len();
    if let Ok(l) = std::fs::read_to_string("/proc/loadavg") {
        println!("load average before: {}", l.trim());
    }
    println!(
        "TUI frame time: {peers} peers, {} classes",
        snaps[0].classes.len()
    );
    assert!(peers >= PEERS as usize - 10, "only {peers} peers");

    let mut state = State::new(Duration::from_secs(1), None);
    // Snapshot arrival: history, filter, sort, lints (once per snapshot).
    let mut arrivals = Vec::new();
    for s in snaps {
        let s = Box::new(s);
        let t = Instant::now();
        state.on_snapshot(s);
        arrivals.push(t.elapsed());
    }
    stats("snapshot arrival (history+sort+lints)", arrivals);

    for (w, h) in [(80u16, 24u16), (200, 60)] {
        let mut term = Terminal::new(TestBackend::new(w, h)).expect("terminal");
        let mut times = Vec::with_capacity(frames);
        let cpu0 = thread_cpu_s();
        for i in 0..frames {
            // Scroll as a user would, so rows change from frame to frame.
            let code = if i % 50 < 25 {
                KeyCode::Down
            } else {
                KeyCode::PageDown
            };
            state.on_key(KeyEvent::new(code, KeyModifiers::NONE));
            let t = Instant::now();
            term.draw(|f| view::draw(f, &mut state)).expect("draw");
            times.push(t.elapsed());
        }
        cpu_per(&format!("frame {w}x{h}, table"), cpu0, frames);
        stats(&format!("frame {w}x{h}, table"), times);
    }
    // The drill-down: chart over the history, histogram, transports.
    state.on_key(KeyEvent::new(KeyCode::Home, KeyModifiers::NONE));
    state.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    let mut term = Terminal::new(TestBackend::new(200, 60)).expect("terminal");
    let mut times = Vec::with_capacity(frames);
    let cpu0 = thread_cpu_s();
    for _ in 0..frames {
        let t = Instant::now();
        term.draw(|f| view::draw(f, &mut state)).expect("draw");
        times.push(t.elapsed());
    }
    cpu_per("frame 200x60, drill-down", cpu0, frames);
    let (_, p99) = stats("frame 200x60, drill-down", times);
    // Sort changes re-sort all 10,000 rows once, then draw.
    let mut times = Vec::new();
    for _ in 0..if quick { 5 } else { 50 } {
        let t = Instant::now();
        state.on_key(KeyEvent::new(KeyCode::Char('s'), KeyModifiers::NONE));
        term.draw(|f| view::draw(f, &mut state)).expect("draw");
        times.push(t.elapsed());
    }
    stats("key 's' (re-sort 10k) + frame", times);
    if !quick && p99 > 10.0 {
        eprintln!("frame p99 {p99:.3} ms is over the 10 ms target");
    }
}
