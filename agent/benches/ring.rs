//! The ring buffer's delivery rate at saturation, on this machine's real
//! kernel (no nfsd needed): nfsdtop's BPF program is attached, with a
//! hand-made slot config as in agent/tests/live_ring.rs, to
//! `syscalls/sys_enter_fcntl`, a thread calls fcntl() as fast as it
//! can, and the live source is polled as fast as possible (its drain
//! thread on its normal 10 ms timer). Prints records produced, delivered
//! (decoded events out of `poll`) and lost per second.
//!
//! `cargo bench -p nfsdtop-agent --bench ring` (root; `-- --quick`: 0.5 s).
//! Where tracefs is not mounted it re-runs itself in a private mount
//! namespace (`unshare -m`) with tracefs mounted there.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nfsdtop_agent::model::EventKind;
use nfsdtop_agent::source::live::{host, Layout, LiveOptions, LiveSource};
use nfsdtop_agent::source::Source;
use nfsdtop_common::{Slot, SlotConfig};

const TRACEFS: &str = "/sys/kernel/tracing";
const EVENT: &str = "events/syscalls/sys_enter_fcntl/format";
const REEXEC: &str = "NFSDTOP_BENCH_IN_PRIVATE_MOUNTNS";

/// `busy`: every hit is dropped in the program as a BUSY enqueue would be
/// (flags = `fd`, 2 for the producer's fcntl(stderr), against a mask with
/// bit 1). sys_enter_fcntl, not a syscall without arguments: the programs
/// load the flags word from the record itself, which the kernel allows only
/// within the record's fixed fields (fcntl's end at byte 40, as nfsd's do
/// at 28 or later; getppid's at 12).
fn layout(busy: bool) -> Layout {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/formats/6.6+");
    let mut l = Layout::from_tracefs(&fixture).expect("fixture layout");
    l.slots = [SlotConfig::DISABLED; Slot::COUNT];
    l.events = Default::default();
    // __syscall_nr as netns, cmd as value, fd as flags; no addresses.
    l.slots[Slot::Dequeue as usize] = SlotConfig {
        enabled: 1,
        netns_off: 8,
        netns_size: 4,
        value_off: 24,
        value_size: 8,
        flags_off: 16,
        flags_size: 4,
        drop_mask: if busy { 0x2 } else { 0 },
        ..SlotConfig::DISABLED
    };
    l.events[Slot::Dequeue as usize] = Some("sys_enter_fcntl".into());
    l
}

/// One tracepoint hit: fcntl(2, F_GETFD), a syscall that does nothing.
fn produce() {
    let _ = std::hint::black_box(rustix::io::fcntl_getfd(std::io::stderr()));
}

/// utime + stime in clock ticks from a /proc stat file.
fn ticks(path: &str) -> u64 {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    let Some(i) = stat.rfind(')') else { return 0 };
    let f: Vec<&str> = stat[i + 2..].split_whitespace().collect();
    let n = |k: usize| f.get(k).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
    n(11) + n(12)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    if !host::Caps::current().sufficient() {
        println!("skipped: needs CAP_BPF+CAP_PERFMON or CAP_SYS_ADMIN");
        return;
    }
    if !Path::new(TRACEFS).join(EVENT).exists() {
        if std::env::var_os(REEXEC).is_some() || !Path::new(TRACEFS).is_dir() {
            println!("skipped: no {EVENT} under {TRACEFS}");
            return;
        }
        let exe = std::env::current_exe().expect("bench binary");
        let status = Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c"])
            .arg(format!(
                "mount -t tracefs nodev {TRACEFS} && exec \"$0\" {}",
                if quick { "--quick" } else { "" }
            ))
            .arg(&exe)
            .env(REEXEC, "1")
            .status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => println!("skipped: the run in a private mount namespace failed ({s})"),
            Err(e) => println!("skipped: cannot run unshare ({e})"),
        }
        return;
    }
    let secs = if quick { 0.5 } else { 3.0 };
    println!(
        "| ring | drain period | producer threads | producer calls/s | BPF records/s | delivered/s | lost/s | lost | agent CPU per record | BPF ns per run |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    // (ring bytes, drain period, producer threads, every hit BUSY)
    let cases: &[(u32, u64, usize, bool)] = if quick {
        &[(16 << 20, 10, 1, false)]
    } else {
        &[
            (16 << 20, 10, 1, false),
            (16 << 20, 1, 1, false),
            (16 << 20, 10, 2, false),
            (64 << 20, 10, 2, false),
            (16 << 20, 10, 1, true),
        ]
    };
    for &(ring, period_ms, threads, busy) in cases {
        let opts = LiveOptions {
            ring_bytes: ring,
            drain_period: Duration::from_millis(period_ms),
            kernel_stats: true,
            ..LiveOptions::default()
        };
        let mut src = LiveSource::start(&opts, TRACEFS.into(), layout(busy), "syscalls")
            .expect("attach to sys_enter_fcntl");
        let stop = Arc::new(AtomicBool::new(false));
        let calls = Arc::new(AtomicU64::new(0));
        let producer_ticks = Arc::new(AtomicU64::new(0));
        let p0 = ticks("/proc/self/stat");
        let producers: Vec<_> = (0..threads)
            .map(|_| {
                let (stop, calls) = (stop.clone(), calls.clone());
                let producer_ticks = producer_ticks.clone();
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..256 {
                            produce();
                        }
                        n += 256;
                    }
                    calls.fetch_add(n, Ordering::Relaxed);
                    producer_ticks.fetch_add(ticks("/proc/thread-self/stat"), Ordering::Relaxed);
                })
            })
            .collect();
        let c0 = src.counts()[Slot::Dequeue as usize];
        let b0 = src.bpf_stats();
        let t0 = Instant::now();
        let mut delivered = 0u64;
        let mut out = Vec::with_capacity(1 << 16);
        while t0.elapsed().as_secs_f64() < secs {
            out.clear();
            src.poll(0, &mut out).expect("poll");
            delivered += out
                .iter()
                .filter(|e| matches!(e.kind, EventKind::Dequeue { .. }))
                .count() as u64;
            if out.is_empty() {
                // Pacing of a timer-drained ring, as the pipeline does.
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let el = t0.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        for p in producers {
            p.join().expect("producer");
        }
        let c1 = src.counts()[Slot::Dequeue as usize];
        let b1 = src.bpf_stats();
        let bpf_ns = match (b0.first(), b1.first()) {
            (Some(a), Some(b)) if b.runs > a.runs => {
                format!(
                    "{:.0}",
                    (b.run_time_ns - a.run_time_ns) as f64 / (b.runs - a.runs) as f64
                )
            }
            _ => "–".into(),
        };
        // The agent's side (ring reader thread, poll, decode): the process's
        // CPU time minus the producers' (whose syscalls run the BPF program).
        let agent_ticks = ticks("/proc/self/stat")
            .saturating_sub(p0)
            .saturating_sub(producer_ticks.load(Ordering::Relaxed));
        let submitted = c1.submitted - c0.submitted;
        let lost = c1.lost - c0.lost;
        let n = calls.load(Ordering::Relaxed) as f64;
        println!(
            "| {} MiB{} | {period_ms} ms | {threads} | {:.2} M | {:.2} M | {:.2} M | {:.2} M | {:.2}% | {} | {bpf_ns} |",
            ring >> 20,
            if busy { " (every hit BUSY, dropped)" } else { "" },
            n / el / 1e6,
            submitted as f64 / el / 1e6,
            delivered as f64 / el / 1e6,
            lost as f64 / el / 1e6,
            lost as f64 * 100.0 / (submitted + lost).max(1) as f64,
            if delivered > 0 {
                format!("{:.0} ns", agent_ticks as f64 / 100.0 / delivered as f64 * 1e9)
            } else {
                "–".into()
            }
        );
        assert!(busy || delivered > 0, "nothing delivered");
    }
    steady(quick);
}

/// The whole agent at a steady record rate, as nfsdtop runs it: the live
/// source in the real pipeline (woken by the ring reader, a snapshot a
/// second, each turned into a JSON line), with a producer calling
/// fcntl() at a fixed rate. Agent CPU = the process's CPU minus the
/// producer thread's (whose syscalls run the BPF program).
fn steady(quick: bool) {
    use nfsdtop_agent::aggregate::Aggregator;
    use nfsdtop_agent::model::EntityKind;
    use nfsdtop_agent::pipeline::{Control, Flow, Pipeline};
    use nfsdtop_agent::present::output::json_line;

    let secs = if quick { 1.0 } else { 5.0 };
    println!();
    println!("| records/s (paced) | dispatches/s in the snapshots | agent CPU s/s | agent CPU per record | JSON lines |");
    println!("|---|---|---|---|---|");
    let rates: &[u64] = if quick {
        &[30_000]
    } else {
        &[3_000, 30_000, 300_000]
    };
    for &rate in rates {
        let src = LiveSource::start(
            &LiveOptions::default(),
            TRACEFS.into(),
            layout(false),
            "syscalls",
        )
        .expect("attach to sys_enter_fcntl");
        let (ctl_tx, ctl_rx) = std::sync::mpsc::channel();
        let lines = Arc::new(AtomicU64::new(0));
        let dispatches = Arc::new(AtomicU64::new(0));
        let last_at_ms = Arc::new(AtomicU64::new(0));
        let (l2, d2, at2) = (lines.clone(), dispatches.clone(), last_at_ms.clone());
        let t0 = Instant::now();
        let pipeline = std::thread::spawn(move || {
            let p = Pipeline::new(Box::new(src), Aggregator::default(), Duration::from_secs(1));
            p.run(Some(ctl_rx), |snap| {
                let line = json_line(&snap, EntityKind::Peer, None);
                std::hint::black_box(&line);
                l2.fetch_add(1, Ordering::Relaxed);
                d2.store(snap.totals.dispatches, Ordering::Relaxed);
                at2.store(t0.elapsed().as_millis() as u64, Ordering::Relaxed);
                Flow::Continue
            })
            .expect("pipeline");
        });
        let p0 = process_runtime_ns();
        // Batches of 100 calls at fixed deadlines.
        let batch = 100u64;
        let period = Duration::from_secs_f64(batch as f64 / rate as f64);
        let mut next = Instant::now();
        let mut calls = 0u64;
        let producer0 = runtime_ns("/proc/thread-self/schedstat");
        while t0.elapsed().as_secs_f64() < secs {
            for _ in 0..batch {
                produce();
            }
            calls += batch;
            next += period;
            if let Some(d) = next.checked_duration_since(Instant::now()) {
                std::thread::sleep(d);
            }
        }
        let producer = runtime_ns("/proc/thread-self/schedstat") - producer0;
        let el = t0.elapsed().as_secs_f64();
        let agent = process_runtime_ns()
            .saturating_sub(p0)
            .saturating_sub(producer);
        let _ = ctl_tx.send(Control::Stop);
        pipeline.join().expect("pipeline thread");
        let agent_s = agent as f64 / 1e9;
        println!(
            "| {:.0} k | {:.0} k | {:.4} | {:.0} ns | {} |",
            calls as f64 / el / 1e3,
            dispatches.load(Ordering::Relaxed) as f64
                / (last_at_ms.load(Ordering::Relaxed).max(1) as f64 / 1e3)
                / 1e3,
            agent_s / el,
            agent_s / calls.max(1) as f64 * 1e9,
            lines.load(Ordering::Relaxed)
        );
    }
}

/// Time on CPU in ns from a schedstat file (its first field): exact, where
/// /proc's stat counts 10 ms ticks.
fn runtime_ns(path: &str) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// All of this process's threads (the agent's reader and pipeline threads
/// are alive while it is read).
fn process_runtime_ns() -> u64 {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| runtime_ns(&format!("{}/schedstat", e.path().display())))
                .sum()
        })
        .unwrap_or(0)
}
