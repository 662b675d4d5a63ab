//! `/api/v1/unfair` and `nfsdtop_unfair_entities` against the real daemon:
//! the K=16 demo under the flat queue (10.0.0.2 at 0.22 of its fair
//! share, 10.0.0.3 at 1.78), and under round-robin (nobody below).

mod common;

use common::Daemon;

fn demo(policy: &str, extra: &[&str]) -> Daemon {
    let mut args = vec![
        "--demo",
        "seed-k16",
        "--policy",
        policy,
        "--listen",
        "127.0.0.1:0",
        "--speed",
        "8",
        "--interval",
        "0.25",
    ];
    args.extend_from_slice(extra);
    Daemon::start(&args)
}

fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

#[test]
fn the_starved_client_is_listed_and_counted() {
    let d = demo("flat", &[]);
    let u = d.wait_for("10.0.0.2 listed as unfairly served", 20, |d| {
        let r = d.get("/api/v1/unfair");
        (r.status == 200 && r.json()["counts"]["peers"] == 1).then(|| r.json())
    });
    assert_eq!(u["below"], 0.5, "the default --unfair-ratio");
    for list in ["peers", "classes"] {
        let rows = u[list].as_array().unwrap();
        assert_eq!(rows.len(), 1, "{list}: {u}");
        let r = &rows[0];
        assert_eq!(r["name"], "10.0.0.2");
        assert_eq!(r["series"], "10.0.0.2", "it has its own series");
        let ratio = r["ratio"].as_f64().unwrap();
        assert!((0.15..0.3).contains(&ratio), "{list}: ratio {ratio}");
        assert_eq!(r["connections"], 2);
        assert_eq!(r["backlogged"], true);
    }
    // The busy client appears once the threshold is above its ratio.
    let r = d.get("/api/v1/unfair?group=peer&below=2");
    let v = r.json();
    assert_eq!(v["counts"]["peers"], 2, "{v}");
    assert_eq!(v["peers"][0]["name"], "10.0.0.2", "worst first");
    assert_eq!(v["classes"].as_array().unwrap().len(), 0, "group=peer");

    let m = d.get("/metrics").body;
    assert_eq!(
        metric(&m, "nfsdtop_unfair_entities{kind=\"peer\"}"),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        metric(&m, "nfsdtop_unfair_entities{kind=\"class\"}"),
        Some(1.0)
    );
    assert_eq!(
        metric(&m, "nfsdtop_unfair_entities_folded{kind=\"class\"}"),
        Some(0.0)
    );
    assert_eq!(metric(&m, "nfsdtop_unfair_threshold_ratio"), Some(0.5));
}

#[test]
fn round_robin_lists_nobody_and_the_threshold_is_configurable() {
    let d = demo("rr-peer", &["--unfair-ratio", "0.9"]);
    d.snapshot("");
    let m = d.wait_for("a scrape with dispatches", 20, |d| {
        let m = d.get("/metrics").body;
        (metric(&m, "nfsdtop_dispatches_total").unwrap_or(0.0) > 0.0).then_some(m)
    });
    assert_eq!(metric(&m, "nfsdtop_unfair_threshold_ratio"), Some(0.9));
    assert_eq!(
        metric(&m, "nfsdtop_unfair_entities{kind=\"peer\"}"),
        Some(0.0)
    );
    let u = d.get("/api/v1/unfair").json();
    assert_eq!(u["below"], 0.9);
    assert_eq!(u["counts"]["peers"], 0, "{u}");
    assert_eq!(u["counts"]["classes"], 0, "{u}");
}

#[test]
fn bad_queries_get_a_json_400() {
    let d = demo("flat", &[]);
    for q in [
        "?below=abc",
        "?below=0",
        "?group=node",
        "?top=3",
        "?below=1&below=2",
    ] {
        let r = d.get(&format!("/api/v1/unfair{q}"));
        assert_eq!(r.status, 400, "{q}: {r:?}");
        assert!(
            r.json()["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{q}: {r:?}"
        );
    }
}

/// Each query is encoded once per snapshot and shared; past 8 distinct
/// queries (`below`) in one interval the agent says it is overloaded
/// (a 503 with Retry-After) instead of encoding each, and the queries it
/// took are still answered.
#[test]
fn distinct_queries_past_the_bound_are_refused_as_overload() {
    let d = common::demo(&["--interval", "5"]);
    d.wait_for("an unfair list", 30, |d| {
        (d.get("/api/v1/unfair").status == 200).then_some(())
    });
    // 20 distinct queries in one 5 s interval, or 10 in one of two.
    let answers: Vec<_> = (0..20)
        .map(|i| d.get(&format!("/api/v1/unfair?below=0.{}", 11 + i)))
        .collect();
    let refused: Vec<_> = answers.iter().filter(|r| r.status == 503).collect();
    assert!(
        answers.iter().all(|r| r.status == 200 || r.status == 503),
        "{answers:?}"
    );
    let r = refused.first().expect("a query past the bound was refused");
    assert!(
        r.body.contains("nfsdtopd is overloaded") && r.body.contains("8 distinct"),
        "{r:?}"
    );
    assert_eq!(r.header("retry-after"), Some("1"));
    // (The query that found the list may have been one of the 8.)
    let ok = answers.iter().filter(|r| r.status == 200).count();
    assert!(ok >= 7, "{ok} answered");
}
