//! NFSv4 client names in nfsdtopd's outputs: the snapshot API carries
//! them on each peer, `--redact` turns them into pseudonyms there, and
//! /metrics never has them (no label of unbounded, identifying values).

mod common;

use common::Daemon;

/// A stand-in for nfsd's clients directory: one NFSv4 client at 10.0.0.2.
fn clients_dir(tag: &str) -> std::path::PathBuf {
    nfsdtop_testkit::nfsd_clients_dir(
        &format!("nfsdtopd-{tag}"),
        &[nfsdtop_testkit::NfsdClient {
            id: 1,
            address: "10.0.0.2:812",
            name: "Linux NFSv4.2 secret-host",
            implementation: "Linux 6.12 secret-build",
        }],
    )
}

fn daemon(dir: &std::path::Path, extra: &[&str]) -> Daemon {
    let mut args = vec![
        "--demo",
        "seed-k16",
        "--listen",
        "127.0.0.1:0",
        "--nfsd-clients",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    Daemon::start(&args)
}

fn peer_with_names(s: &serde_json::Value) -> Option<serde_json::Value> {
    s["peers"]
        .as_array()?
        .iter()
        .find(|p| p.get("client_names").is_some())
        .cloned()
}

#[test]
fn the_snapshot_api_names_the_client_and_metrics_do_not() {
    let dir = clients_dir("plain");
    let d = daemon(&dir, &[]);
    let p = d.wait_for("a peer with its client's name", 20, |d| {
        peer_with_names(&d.snapshot(""))
    });
    assert_eq!(p["name"], "10.0.0.2");
    assert_eq!(p["client_names"][0]["name"], "Linux NFSv4.2 secret-host");
    assert_eq!(p["client_names"][0]["minor_version"], 2);
    assert_eq!(
        p["client_names"][0]["implementation"],
        "Linux 6.12 secret-build"
    );
    let s = d.snapshot("");
    let other = s["peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "10.0.0.3");
    assert!(other.unwrap().get("client_names").is_none(), "{s}");
    let m = d.get("/metrics").body;
    assert!(m.contains("10.0.0.2") && !m.contains("secret"), "{m}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn redact_makes_the_names_pseudonyms_everywhere() {
    let dir = clients_dir("redact");
    let d = daemon(&dir, &["--redact"]);
    let p = d.wait_for("a peer with its client's name", 20, |d| {
        peer_with_names(&d.snapshot(""))
    });
    let name = p["client_names"][0]["name"].as_str().unwrap().to_string();
    assert!(name.starts_with("anon-"), "{p}");
    assert_eq!(p["client_names"][0]["minor_version"], 2);
    for out in [d.snapshot("").to_string(), d.get("/metrics").body] {
        assert!(
            !out.contains("secret") && !out.contains("10.0.0.2"),
            "{out}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
