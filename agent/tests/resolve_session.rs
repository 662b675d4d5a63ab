//! `--resolve` through a whole session (the demo, as fast as it goes)
//! with a fake lookup: peers get their host names once looked up, a
//! redacted session shows only pseudonyms, a lookup that never returns
//! leaves the snapshots coming, and without `--resolve` nothing is
//! looked up.

use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nfsdtop_agent::enrich::redact::Redactor;
use nfsdtop_agent::enrich::resolve::LookupFn;
use nfsdtop_agent::model::Snapshot;
use nfsdtop_agent::pipeline::{Control, Flow};
use nfsdtop_agent::session::{NoNfsd, Session, SessionConfig, SourceChoice};

const DEADLINE: Duration = Duration::from_secs(60);

fn config(resolve: bool) -> SessionConfig {
    SessionConfig {
        source: SourceChoice::Demo {
            scenario: "seed-k4".into(),
            policy: None,
        },
        speed: 0.0,
        resolve,
        ..SessionConfig::default()
    }
}

/// The session's snapshots on a channel (the pipeline on its own
/// thread); dropping the sender of `Control` ends it.
fn run(
    cfg: &SessionConfig,
    lookup: LookupFn,
    redactor: Option<Redactor>,
) -> (Receiver<Snapshot>, std::sync::mpsc::Sender<Control>) {
    let session = Session::open(cfg, NoNfsd::Fail)
        .unwrap()
        .with_lookup(lookup)
        .with_redactor(redactor);
    let (tx, rx) = std::sync::mpsc::sync_channel(4);
    let (control, control_rx) = std::sync::mpsc::channel();
    session
        .spawn(
            "test-pipeline",
            control_rx,
            move |s| match tx.send(s) {
                Ok(()) => Flow::Continue,
                Err(_) => Flow::Stop,
            },
            |_| {},
        )
        .unwrap();
    (rx, control)
}

/// The first snapshot `want` accepts, within the deadline.
fn wait_for(rx: &Receiver<Snapshot>, want: impl Fn(&Snapshot) -> bool) -> Snapshot {
    let end = Instant::now() + DEADLINE;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(s) if want(&s) => return s,
            Ok(_) => continue,
            Err(RecvTimeoutError::Timeout) => panic!("no such snapshot within {DEADLINE:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("the pipeline ended"),
        }
    }
}

fn fake() -> LookupFn {
    Arc::new(|ip: IpAddr| match ip.to_string().as_str() {
        "10.0.0.2" => Some("secret-two.example.org".into()),
        _ => None,
    })
}

fn hostname_of<'a>(s: &'a Snapshot, peer: &str) -> Option<&'a str> {
    s.peers
        .iter()
        .find(|p| p.name == peer)
        .and_then(|p| p.hostname.as_deref())
}

#[test]
fn peers_get_their_host_names_where_they_have_one() {
    let (rx, _control) = run(&config(true), fake(), None);
    let s = wait_for(&rx, |s| hostname_of(s, "10.0.0.2").is_some());
    assert_eq!(hostname_of(&s, "10.0.0.2"), Some("secret-two.example.org"));
    assert!(s.peers.iter().any(|p| p.name == "10.0.0.3"), "{s:?}");
    assert_eq!(hostname_of(&s, "10.0.0.3"), None, "no name: none shown");
    assert!(s.classes.iter().all(|c| c.hostname.is_none()));
    let json = serde_json::to_string(&s).unwrap();
    assert!(
        json.contains("\"hostname\":\"secret-two.example.org\""),
        "{json}"
    );
}

#[test]
fn a_redacted_session_shows_pseudonyms_only() {
    let r = Redactor::with_key("a test key, long enough");
    let (rx, _control) = run(&config(true), fake(), Some(r.clone()));
    let s = wait_for(&rx, |s| s.peers.iter().any(|p| p.hostname.is_some()));
    let json = serde_json::to_string(&s).unwrap();
    assert!(
        !json.contains("secret") && !json.contains("10.0.0.2"),
        "{json}"
    );
    let want = r.hostname("secret-two.example.org");
    assert!(json.contains(&format!("\"hostname\":\"{want}\"")), "{json}");
}

#[test]
fn a_lookup_that_never_returns_leaves_the_snapshots_coming() {
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let gate = Mutex::new(gate);
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let hang: LookupFn = Arc::new(move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        let _ = gate.lock().unwrap().recv();
        None
    });
    // More peers than the lookup queue (1,024) and its two threads hold:
    // the rest are not asked, and the snapshots count them.
    let dir = std::env::temp_dir().join(format!("nfsdtop-resolve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let scenario = dir.join("many.toml");
    std::fs::write(
        &scenario,
        "name = \"many\"\nthreads = 16\nservice_ms = 1.0\n\
         [[client]]\naddress = \"10.1.0.1\"\ncount = 1100\nconnections = 1\ninflight = 1\n",
    )
    .unwrap();
    let mut cfg = config(true);
    cfg.source = SourceChoice::Demo {
        scenario: scenario.display().to_string(),
        policy: None,
    };
    let (rx, control) = run(&cfg, hang, None);
    let mut dropped = 0;
    for _ in 0..200 {
        let s = rx.recv_timeout(DEADLINE).expect("snapshots keep coming");
        assert!(s.peers.iter().all(|p| p.hostname.is_none()));
        let now = s
            .totals
            .hostname_lookups_dropped
            .expect("counted with --resolve");
        assert!(now >= dropped, "cumulative: {now} after {dropped}");
        dropped = now;
    }
    assert!(calls.load(Ordering::SeqCst) >= 1, "the lookup was asked");
    // 1,100 peers, at most 1,026 asked: the rest dropped at every snapshot.
    assert!(dropped >= 74, "dropped {dropped}");
    let _ = std::fs::remove_dir_all(&dir);
    drop(control);
    drop(rx);
    drop(release);
}

#[test]
fn without_resolve_nothing_is_looked_up() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let f: LookupFn = Arc::new(move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        Some("never.example".into())
    });
    let (rx, _control) = run(&config(false), f, None);
    for _ in 0..50 {
        let s = rx.recv_timeout(DEADLINE).expect("a snapshot");
        assert!(s.peers.iter().all(|p| p.hostname.is_none()));
        assert_eq!(s.totals.hostname_lookups_dropped, None);
    }
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}
