//! What recording costs: events/s on one core of the aggregator alone and
//! of the aggregator with the recording writer (the `nfsdtop record` tap),
//! measured side by side in one run (interleaved rounds, best of each), and
//! the file size per event and per million events. Also the writer alone,
//! the reader alone (decode from memory) and a replay (reader + aggregator).
//!
//! Run: `cargo bench -p nfsdtop-agent --bench record` (release). Without
//! `--bench` (`cargo test --benches`) it runs a small smoke version.
//! Results: BENCHMARKS.md, section "Recording".

use std::hint::black_box;
use std::time::{Duration, Instant};

use nfsdtop_agent::aggregate::{Aggregator, Limits};
use nfsdtop_agent::enrich::classify::ClassMap;
use nfsdtop_agent::model::{Endpoint, Event, EventKind, SourceKind, WaitSource, XprtKey};
use nfsdtop_agent::record::{Header, Reader, Writer};
use nfsdtop_agent::source::demo::{Scenario, Simulator};

/// The pipeline hands the tap and the aggregator batches; 4096 is typical
/// of a busy server's 20 ms poll.
const BATCH: usize = 4096;

fn header() -> Header {
    Header {
        host: "bench".into(),
        kernel: "6.12".into(),
        generation: "6.6+".into(),
        wait_source: WaitSource::EnqueueDequeue,
        source_kind: SourceKind::Demo,
        recorded_by: "bench".into(),
        file_id: 1,
        ..Header::default()
    }
}

/// Thread CPU time: the machine may be shared, so wall time alone would
/// charge us for other processes' time slices.
fn cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

struct Timing {
    wall: f64,
    cpu: f64,
}

fn time(f: impl FnOnce()) -> Timing {
    let (w, c) = (Instant::now(), cpu());
    f();
    Timing {
        wall: w.elapsed().as_secs_f64(),
        cpu: (cpu() - c).as_secs_f64(),
    }
}

fn demo(name: &str, secs: u64) -> (Vec<Event>, ClassMap) {
    let s = Scenario::builtin(name).unwrap();
    let classmap = s.class_map().unwrap();
    let mut sim = Simulator::new(s);
    let mut events = Vec::new();
    sim.run_until(secs * 1_000_000_000, &mut events);
    (events, classmap)
}

/// Many short-lived clients: 50,000 peers, each accepted, dispatched a
/// few times and closed, with timestamps jittered across CPUs.
fn churn(n_peers: u32) -> Vec<Event> {
    let server = Endpoint::V4 {
        ip: [10, 0, 0, 1],
        port: 2049,
    };
    let mut out = Vec::new();
    let mut ts = 1_000_000u64;
    let mut rng = 0x1234_5678_9abc_def0u64;
    for p in 0..n_peers {
        let k = XprtKey {
            netns: 4026531840,
            server,
            client: Endpoint::V4 {
                ip: [10, (p >> 16) as u8, (p >> 8) as u8, p as u8],
                port: 700 + (p % 300) as u16,
            },
        };
        out.push(Event {
            ts_ns: ts,
            xprt: k,
            kind: EventKind::Accepted,
        });
        for _ in 0..4 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            ts += 2_000 + rng % 50_000;
            out.push(Event {
                ts_ns: ts,
                xprt: k,
                kind: EventKind::Enqueue { inflight: None },
            });
            out.push(Event {
                ts_ns: ts + rng % 30_000,
                xprt: k,
                kind: EventKind::Dequeue {
                    qtime_ns: Some(rng % 30_000),
                    class: None,
                },
            });
            out.push(Event {
                ts_ns: ts + 40_000 - rng % 1000,
                xprt: k,
                kind: EventKind::Executed {
                    exec_ns: 100_000 + rng % 4_000_000,
                    requests: 1,
                    bytes: Some(nfsdtop_agent::model::Bytes {
                        received: 200 + rng % 1000,
                        sent: 100 + rng % 65536,
                    }),
                    procedure: None,
                },
            });
        }
        out.push(Event {
            ts_ns: ts + 50_000,
            xprt: k,
            kind: EventKind::Closed,
        });
    }
    out
}

fn aggregate_only(events: &[Event], classmap: &ClassMap) -> Timing {
    time(|| {
        let mut agg = Aggregator::new(classmap.clone(), Limits::default());
        for b in events.chunks(BATCH) {
            agg.ingest_all(black_box(b));
        }
        black_box(agg.dispatches());
    })
}

fn aggregate_and_record(events: &[Event], classmap: &ClassMap, path: &std::path::Path) -> Timing {
    time(|| {
        let mut agg = Aggregator::new(classmap.clone(), Limits::default());
        let mut w = Writer::create(path, &header()).unwrap();
        for b in events.chunks(BATCH) {
            w.write_all(black_box(b)).unwrap();
            agg.ingest_all(b);
        }
        let (bw, _) = w.finish().unwrap();
        drop(bw.into_inner().unwrap());
        black_box(agg.dispatches());
    })
}

fn write_only(events: &[Event]) -> (Timing, Vec<u8>) {
    let mut bytes = Vec::new();
    let t = time(|| {
        let mut w = Writer::new(Vec::with_capacity(events.len() * 6), &header()).unwrap();
        w.write_all(black_box(events)).unwrap();
        bytes = w.finish().unwrap().0;
    });
    (t, bytes)
}

fn read_only(bytes: &[u8], n: usize) -> Timing {
    time(|| {
        let mut r = Reader::new(bytes).unwrap();
        let mut buf = Vec::with_capacity(BATCH);
        let mut got = 0;
        while let Some(k) = r.read_frame(&mut buf).unwrap() {
            got += k;
            black_box(&buf);
            buf.clear();
        }
        assert_eq!(got, n);
    })
}

fn replay(bytes: &[u8], classmap: &ClassMap) -> Timing {
    time(|| {
        let mut r = Reader::new(bytes).unwrap();
        let mut agg = Aggregator::new(classmap.clone(), Limits::default());
        let mut buf = Vec::with_capacity(BATCH);
        while r.read_frame(&mut buf).unwrap().is_some() {
            agg.ingest_all(&buf);
            buf.clear();
        }
        black_box(agg.dispatches());
    })
}

#[derive(Default)]
struct Best {
    wall: f64,
    cpu: f64,
}

impl Best {
    fn new() -> Self {
        Best {
            wall: f64::MAX,
            cpu: f64::MAX,
        }
    }
    fn add(&mut self, t: Timing) {
        self.wall = self.wall.min(t.wall);
        self.cpu = self.cpu.min(t.cpu);
    }
    /// Million events per second of thread CPU time.
    fn rate(&self, n: usize) -> f64 {
        n as f64 / self.cpu.max(1e-9) / 1e6
    }
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (secs, peers, rounds) = if full {
        (600, 250_000, 5)
    } else {
        (5, 2_000, 1)
    };
    let path = std::env::temp_dir().join(format!("nfsdtop-bench-{}.nfsdrec", std::process::id()));
    let mut workloads: Vec<(String, Vec<Event>, ClassMap)> = Vec::new();
    for name in ["seed-k8", "movers", "burst"] {
        let (events, classmap) = demo(name, secs);
        workloads.push((format!("demo {name}, {secs} s"), events, classmap));
    }
    workloads.push((
        format!("churn: {peers} short-lived peers"),
        churn(peers),
        ClassMap::default(),
    ));

    println!(
        "| workload | events | aggregator alone | aggregator + writer | overhead | \
         writer alone | reader alone | replay (reader + aggregator) | bytes/event | MB per 1M events |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (name, events, classmap) in &workloads {
        let n = events.len();
        let (mut agg, mut rec, mut wr, mut rd, mut rp) = (
            Best::new(),
            Best::new(),
            Best::new(),
            Best::new(),
            Best::new(),
        );
        let mut bytes = Vec::new();
        // Interleaved rounds: every variant sees the same machine state.
        for _ in 0..rounds {
            agg.add(aggregate_only(events, classmap));
            rec.add(aggregate_and_record(events, classmap, &path));
            let (t, b) = write_only(events);
            wr.add(t);
            bytes = b;
            rd.add(read_only(&bytes, n));
            rp.add(replay(&bytes, classmap));
        }
        let file_len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        assert_eq!(file_len, bytes.len() as u64);
        let bpe = bytes.len() as f64 / n as f64;
        println!(
            "| {name} | {n} | {:.1} M/s | {:.1} M/s | +{:.0}% CPU | {:.1} M/s | {:.1} M/s | {:.1} M/s | {bpe:.2} | {:.2} |",
            agg.rate(n),
            rec.rate(n),
            (rec.cpu / agg.cpu - 1.0) * 100.0,
            wr.rate(n),
            rd.rate(n),
            rp.rate(n),
            bpe,
        );
        eprintln!(
            "  ({name}: wall best: aggregator {:.0} ms, +writer {:.0} ms; cpu best {:.0} / {:.0} ms)",
            agg.wall * 1e3,
            rec.wall * 1e3,
            agg.cpu * 1e3,
            rec.cpu * 1e3
        );
    }
    let _ = std::fs::remove_file(&path);
}
