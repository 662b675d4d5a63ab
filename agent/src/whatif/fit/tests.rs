//! The fit's tests: hand-made event streams, then the simulator's own
//! clients (backlogged, closed loop, bursts) told apart.

use super::*;
use crate::model::Endpoint;
use crate::source::demo::{Scenario, Simulator};

fn key(port: u16) -> XprtKey {
    XprtKey {
        netns: 1,
        server: Endpoint::None,
        client: Endpoint::from_socket_addr(format!("10.0.0.2:{port}").parse().unwrap()),
    }
}

fn ev(ts: u64, port: u16, kind: EventKind) -> Event {
    Event {
        ts_ns: ts,
        xprt: key(port),
        kind,
    }
}

const DQ: EventKind = EventKind::Dequeue {
    qtime_ns: None,
    class: None,
};
const EX: EventKind = EventKind::Executed {
    exec_ns: 1_000,
    requests: 1,
    bytes: None,
    procedure: None,
};

#[test]
fn bursts_and_think_times_are_read_from_busy_periods() {
    let mut f = Fitter::new();
    let mut t = 0;
    for _ in 0..4 {
        // A burst of 3: enqueue, three dispatches (re-enqueued), idle.
        f.ingest(&ev(t, 700, EventKind::Enqueue { inflight: None }));
        for i in 0..3 {
            f.ingest(&ev(t + i * 1_000, 700, DQ));
            if i < 2 {
                f.ingest(&ev(
                    t + i * 1_000,
                    700,
                    EventKind::Enqueue { inflight: None },
                ));
            }
            f.ingest(&ev(t + i * 1_000 + 1_000, 700, EX));
        }
        t += 50_000;
    }
    let fit = f.finish();
    assert_eq!(fit.dispatches, 12);
    assert_eq!(fit.peak_in_service, 1);
    let FittedDemand::Bursts { sizes, thinks_ns } = &fit.transports[0].demand else {
        panic!("{:?}", fit.transports[0].demand);
    };
    // The first burst may have begun before the recording: left out.
    assert_eq!(sizes, &vec![3, 3, 3]);
    assert_eq!(thinks_ns, &vec![47_000, 47_000, 47_000]);
    assert_eq!(fit.transports[0].service_ns.len(), 12);
}

#[test]
fn a_transport_that_never_ran_dry_is_backlogged() {
    let mut f = Fitter::new();
    f.ingest(&ev(0, 800, EventKind::Enqueue { inflight: None }));
    for i in 0..100 {
        f.ingest(&ev(i * 10, 800, DQ));
        f.ingest(&ev(i * 10, 800, EventKind::Enqueue { inflight: None }));
        f.ingest(&ev(i * 10 + 5, 800, EX));
    }
    let fit = f.finish();
    assert_eq!(fit.transports[0].demand, FittedDemand::Backlogged);
}

/// A mount's first connection: a few requests, then closed (or quiet)
/// while another transport carries the load to the end of the
/// recording. Had it been taken as backlogged, the model would keep a
/// request waiting on it throughout.
#[test]
fn a_transport_that_sent_once_and_went_quiet_is_one_burst_not_backlogged() {
    const US: u64 = 1_000;
    // Closed after a burst of 3, or quiet after it; and a mount's
    // connection as a live recording had it: its third request came
    // 0.9 ms after the second was dispatched (an arrival while one was
    // in service, too little for a closed loop), one execution seen.
    fn burst(f: &mut Fitter) {
        f.ingest(&ev(0, 700, EventKind::Enqueue { inflight: None }));
        for i in 0..3 {
            f.ingest(&ev(i * US, 700, DQ));
            if i < 2 {
                f.ingest(&ev(i * US, 700, EventKind::Enqueue { inflight: None }));
            }
            f.ingest(&ev(i * US + US, 700, EX));
        }
    }
    fn mount(f: &mut Fitter) {
        for (t, kind) in [
            (4_700, EventKind::Enqueue { inflight: None }),
            (8_500, DQ),
            (8_600, EventKind::Enqueue { inflight: None }),
            (10_000, DQ),
            (10_900, EventKind::Enqueue { inflight: None }),
            (13_600, DQ),
            (14_400, EX),
        ] {
            f.ingest(&ev(t * US, 700, kind));
        }
    }
    type Send = fn(&mut Fitter);
    let cases: [(&str, Send, Option<u64>, u64); 3] = [
        ("closed", burst, Some(10 * US), 10 * US),
        ("quiet", burst, None, 3 * US),
        ("mount", mount, Some(14_400 * US), 14_400 * US),
    ];
    for (what, send, close, quiet) in cases {
        let mut f = Fitter::new();
        send(&mut f);
        if let Some(t) = close {
            f.ingest(&ev(t, 700, EventKind::Closed));
        }
        // The load, backlogged to the end at 1 s.
        f.ingest(&ev(
            20 * 1_000 * US,
            800,
            EventKind::Enqueue { inflight: None },
        ));
        let end = 1_000_000 * US;
        for i in 0..98 {
            let t = 20 * 1_000 * US + i * 10_000 * US;
            f.ingest(&ev(t, 800, DQ));
            f.ingest(&ev(t, 800, EventKind::Enqueue { inflight: None }));
            f.ingest(&ev(t + 5, 800, EX));
        }
        f.ingest(&ev(end, 800, DQ));
        let fit = f.finish();
        assert_eq!(
            fit.transports[0].demand,
            FittedDemand::Bursts {
                sizes: vec![3],
                thinks_ns: vec![end - quiet]
            },
            "{what}"
        );
        assert_eq!(fit.transports[1].demand, FittedDemand::Backlogged);
    }
}

#[test]
fn reservoirs_stay_bounded_and_uniform() {
    let mut r = Reservoir::new(100, 3);
    for i in 0..100_000u64 {
        r.push(i);
    }
    assert_eq!(r.items().len(), 100);
    assert_eq!(r.seen(), 100_000);
    let mean = r.items().iter().sum::<u64>() as f64 / 100.0;
    assert!((30_000.0..70_000.0).contains(&mean), "{mean}");
}

/// The fit of `s`'s first 20 s, by client address.
fn fit_of(s: Scenario) -> Vec<(String, FittedDemand)> {
    let mut sim = Simulator::new(s);
    let mut out = Vec::new();
    sim.run_until(20_000_000_000, &mut out);
    let mut f = Fitter::new();
    f.ingest_all(&out);
    f.finish()
        .transports
        .into_iter()
        .map(|t| (t.key.peer().to_string(), t.demand))
        .collect()
}

#[test]
fn the_simulators_three_kinds_of_client_are_told_apart() {
    let burst = fit_of(Scenario::builtin("burst").unwrap());
    for (peer, d) in &burst {
        match (peer.as_str(), d) {
            ("fd00::9", FittedDemand::Bursts { sizes, thinks_ns }) => {
                assert!(sizes.iter().all(|&n| n == 32), "{sizes:?}");
                // 200 ms think plus the 100 µs round trip.
                assert!(thinks_ns
                    .iter()
                    .all(|&t| (200_000_000..201_000_000).contains(&t)));
            }
            ("10.0.0.3", FittedDemand::Backlogged) => {}
            other => panic!("{other:?}"),
        }
    }
    let text = "name = \"loop\"\nthreads = 8\nservice_ms = 5.0\njitter = 0.5\nrtt_us = 20000.0\n\
                [[client]]\naddress = \"10.0.0.2\"\nconnections = 1\ninflight = 4\n\
                [[client]]\naddress = \"10.0.0.3\"\nconnections = 8\ninflight = 64\n";
    let lp = fit_of(Scenario::parse(text, "loop.toml").unwrap());
    let (_, small) = lp.iter().find(|(p, _)| p == "10.0.0.2").unwrap();
    let FittedDemand::Closed {
        inflight,
        thinks_ns,
    } = small
    else {
        panic!("{small:?}");
    };
    assert_eq!(*inflight, 4);
    assert!(thinks_ns
        .iter()
        .all(|&t| (19_900_000..20_100_000).contains(&t)));
}

/// Two transports always queued on one thread that takes 1 ms a request
/// while nfsd's `execute` says 0.25 ms (receiving and replying are outside
/// it): the service times are scaled to the thread's time; with the
/// thread's own time recorded, nothing changes.
#[test]
fn service_times_scale_to_a_saturated_threads_time_per_request() {
    let stream = |exec_ns: u64| {
        let mut f = Fitter::new();
        f.ingest(&ev(0, 700, EventKind::Enqueue { inflight: None }));
        f.ingest(&ev(0, 701, EventKind::Enqueue { inflight: None }));
        for i in 0..400u64 {
            let port = 700 + (i % 2) as u16;
            let t = i * 1_000_000;
            f.ingest(&ev(t, port, DQ));
            f.ingest(&ev(t + 1, port, EventKind::Enqueue { inflight: None }));
            f.ingest(&ev(
                t + exec_ns,
                port,
                EventKind::Executed {
                    exec_ns,
                    requests: 1,
                    bytes: None,
                    procedure: None,
                },
            ));
        }
        f.finish()
    };
    let mut fit = stream(250_000);
    let k = fit
        .scale_to_occupancy(1)
        .expect("a thread's time is 4x execute");
    assert!((k - 4.0).abs() < 0.05, "{k}");
    let s = &fit.transports[0].service_ns;
    assert!(
        s.iter().all(|&x| (990_000..=1_010_000).contains(&x)),
        "{s:?}"
    );
    let mut fit = stream(1_000_000);
    assert_eq!(
        fit.scale_to_occupancy(1),
        None,
        "execute is the thread's time"
    );
}

/// Requests waited only while the thread ran slowly: 200 dispatches 4 ms
/// apart while a transport stayed queued, then 600 with nothing waiting,
/// 1 ms apart. The waiting periods alone say about 4 ms a request; the
/// whole recording (one thread, 800 dispatches in 1.4 s) allows at most
/// 1.75 ms: the ratio to `execute` (0.25 ms) is capped there, at about 7.
#[test]
fn a_threads_time_per_request_is_capped_by_the_whole_recording() {
    let mut f = Fitter::new();
    let exec = |_: u64| EventKind::Executed {
        exec_ns: 250_000,
        requests: 1,
        bytes: None,
        procedure: None,
    };
    f.ingest(&ev(0, 700, EventKind::Enqueue { inflight: None }));
    f.ingest(&ev(0, 701, EventKind::Enqueue { inflight: None }));
    let mut t = 0;
    for i in 0..200u64 {
        let port = 700 + (i % 2) as u16;
        f.ingest(&ev(t, port, DQ));
        f.ingest(&ev(t + 1, port, EventKind::Enqueue { inflight: None }));
        f.ingest(&ev(t + 250_000, port, exec(t)));
        t += 4_000_000;
    }
    // The queue drains: the last two dispatches take the queued transports.
    f.ingest(&ev(t, 700, DQ));
    f.ingest(&ev(t + 250_000, 700, exec(t)));
    t += 1_000_000;
    f.ingest(&ev(t, 701, DQ));
    f.ingest(&ev(t + 250_000, 701, exec(t)));
    for _ in 0..598u64 {
        t += 1_000_000;
        f.ingest(&ev(t, 700, EventKind::Enqueue { inflight: None }));
        f.ingest(&ev(t + 1, 700, DQ));
        f.ingest(&ev(t + 250_000, 700, exec(t)));
    }
    let fit = f.finish();
    // From the first dispatch to the one that emptied the queue (801 ms),
    // over the 201 dispatches after the first.
    assert_eq!(
        (fit.saturated_ns, fit.saturated_dispatches),
        (801_000_000, 201)
    );
    let whole = fit.span_ns as f64 / fit.dispatches as f64;
    assert!(whole < 2e6, "{whole}");
    let k = fit.occupancy_ratio(1).expect("well above execute");
    assert!(
        (k - whole / 250_000.0).abs() < 1e-6,
        "{k} vs {}",
        whole / 250_000.0
    );
}

/// Fitted again with a known scale, a live recording's estimated
/// completions and service times are a thread's time, not `execute`.
#[test]
fn a_scaled_second_pass_completes_requests_a_threads_time_later() {
    let mut f = Fitter::with_estimated_completions_scaled(4.0);
    for i in 0..10u64 {
        let t = i * 10_000_000;
        f.ingest(&ev(t, 700, EventKind::Enqueue { inflight: None }));
        f.ingest(&ev(t + 1, 700, DQ));
        f.ingest(&ev(
            t + 2,
            700,
            EventKind::Executed {
                exec_ns: 250_000,
                requests: 1,
                bytes: None,
                procedure: None,
            },
        ));
    }
    let fit = f.finish();
    assert!(fit.completions_estimated);
    assert!(
        (fit.mean_service_ns - 1_000_000.0).abs() < 1.0,
        "{}",
        fit.mean_service_ns
    );
    assert!(fit.transports[0].service_ns.iter().all(|&x| x == 1_000_000));
    let FittedDemand::Bursts { thinks_ns, .. } = &fit.transports[0].demand else {
        panic!("{:?}", fit.transports[0].demand);
    };
    // Each request done 1 ms after its dispatch, the next 10 ms after it
    // (the first request, before any execution was seen, is taken as the
    // default 1 ms times the scale).
    assert!(
        thinks_ns[1..]
            .iter()
            .all(|&t| (8_900_000..=9_100_000).contains(&t)),
        "{thinks_ns:?}"
    );
}
