//! `--resolve` in nfsdtopd: the snapshot API gives a peer at 127.0.0.1
//! the system resolver's name for it (localhost, from /etc/hosts), as a
//! pseudonym under `--redact`; /metrics never carries host names.

mod common;

use common::Daemon;

fn scenario(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("nfsdtopd-resolve-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("loopback.toml");
    std::fs::write(
        &path,
        "name = \"loopback\"\n[[client]]\naddress = \"127.0.0.1\"\nconnections = 1\ninflight = 4\n\
         [[client]]\naddress = \"10.0.0.2\"\nconnections = 1\ninflight = 4\n",
    )
    .unwrap();
    path
}

fn daemon(path: &std::path::Path, extra: &[&str]) -> Daemon {
    let mut args = vec![
        "--demo",
        path.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--resolve",
    ];
    args.extend_from_slice(extra);
    Daemon::start(&args)
}

fn named_peer(s: &serde_json::Value) -> Option<serde_json::Value> {
    s["peers"]
        .as_array()?
        .iter()
        .find(|p| p.get("hostname").is_some())
        .cloned()
}

fn localhost() -> String {
    nfsdtop_agent::enrich::resolve::system_lookup("127.0.0.1".parse().unwrap()).expect(
        "the system resolver has no name for 127.0.0.1: /etc/hosts needs \"127.0.0.1 localhost\"",
    )
}

#[test]
fn the_snapshot_api_names_the_peer_and_metrics_do_not() {
    let name = localhost();
    let path = scenario("plain");
    let d = daemon(&path, &[]);
    let p = d.wait_for("a peer with its host name", 20, |d| {
        named_peer(&d.snapshot(""))
    });
    assert_eq!(p["name"], "127.0.0.1");
    assert_eq!(p["hostname"], name.as_str());
    let m = d.get("/metrics").body;
    // The name is in no label (the lookups-dropped counter is there).
    assert!(
        m.contains("127.0.0.1") && !m.contains("hostname=") && !m.contains(&format!("\"{name}\"")),
        "{m}"
    );
    assert!(
        m.contains("nfsdtop_hostname_lookups_dropped_total 0"),
        "{m}"
    );
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[test]
fn redact_makes_the_host_name_a_pseudonym() {
    let name = localhost();
    let path = scenario("redact");
    let d = daemon(&path, &["--redact"]);
    let p = d.wait_for("a peer with its host name", 20, |d| {
        named_peer(&d.snapshot(""))
    });
    assert!(p["hostname"].as_str().unwrap().starts_with("anon-"), "{p}");
    for out in [d.snapshot("").to_string(), d.get("/metrics").body] {
        assert!(
            !out.contains(&format!("\"{name}\"")) && !out.contains("127.0.0.1"),
            "{out}"
        );
    }
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}
