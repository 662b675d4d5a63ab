//! Tests of the label rule and the smoothed fairness ratio.

use super::*;
use nfsdtop_agent::model::EntityKind;

/// Cumulative state of one simulated entity.
#[derive(Clone)]
struct Sim {
    name: String,
    rate: u64,
    entitled_rate: f64,
    dispatches: u64,
    entitled: f64,
}

fn sim(name: &str, rate: u64, entitled_rate: f64) -> Sim {
    Sim {
        name: name.into(),
        rate,
        entitled_rate,
        dispatches: 0,
        entitled: 0.0,
    }
}

/// One second of every entity; returns the snapshot's entities and the
/// total dispatch delta.
fn step(sims: &mut [Sim]) -> (Vec<EntityStats>, u64) {
    let mut total = 0;
    let list = sims
        .iter_mut()
        .map(|s| {
            s.dispatches += s.rate;
            s.entitled += s.entitled_rate;
            total += s.rate;
            EntityStats {
                name: s.name.clone(),
                kind: EntityKind::Peer,
                class: s.name.clone(),
                dispatches: s.dispatches,
                interval_dispatches: s.rate,
                entitled: s.entitled,
                interval_entitled: s.entitled_rate,
                backlogged: s.entitled_rate > 0.0,
                ..EntityStats::default()
            }
        })
        .collect();
    (list, total)
}

fn labels(f: &Folder) -> Vec<String> {
    let mut v: Vec<String> = f
        .series()
        .iter()
        .map(|s| s.name.clone())
        .filter(|n| n != OTHER)
        .collect();
    v.sort();
    v
}

fn other_dispatches(f: &Folder) -> u64 {
    f.series().last().map(|s| s.counts.dispatches).unwrap()
}

#[test]
fn victims_get_labels_ahead_of_the_busiest() {
    // Four busy clients at their fair share, two starved ones (10 of
    // the 100 dispatches a second they are entitled to), three labels.
    let mut sims = vec![
        sim("a", 200, 190.0),
        sim("b", 190, 180.0),
        sim("c", 180, 170.0),
        sim("d", 170, 160.0),
        sim("v1", 10, 100.0),
        sim("v2", 20, 100.0),
    ];
    let mut f = Folder::new(3, false, 0.5);
    let (e, total) = step(&mut sims);
    f.update(&e, 1.0, total, 0.0, None);
    // Busiest-first would give a, b, c and hide both victims in "other".
    assert_eq!(labels(&f), ["a", "v1", "v2"]);
    assert_eq!((f.unfair_now, f.unfair_folded), (2, 0));
    // Stable: the same labels next time.
    let (e, total) = step(&mut sims);
    f.update(&e, 1.0, total, 0.0, None);
    assert_eq!(labels(&f), ["a", "v1", "v2"]);
    let labelled: u64 = f.series().iter().map(|s| s.counts.dispatches).sum();
    assert_eq!(labelled, 2 * 770, "labelled + other = every dispatch");
}

#[test]
fn a_label_moves_to_a_new_victim_and_other_stays_monotonic() {
    // Three fair clients, two labels: c folded.
    let mut sims = vec![sim("a", 100, 100.0), sim("b", 90, 90.0), sim("c", 80, 80.0)];
    let mut f = Folder::new(2, false, 0.5);
    let (e, total) = step(&mut sims);
    f.update(&e, 1.0, total, 0.0, None);
    assert_eq!(labels(&f), ["a", "b"]);
    // c stops being served while still entitled: it becomes a victim
    // as its smoothed ratio falls, and takes b's label (b is the least
    // busy of the labelled non-victims).
    sims[2].rate = 0;
    let mut other = other_dispatches(&f);
    let mut moved_at = None;
    for round in 0..30 {
        let (e, total) = step(&mut sims);
        f.update(&e, 1.0, total, 0.0, None);
        let o = other_dispatches(&f);
        assert!(o >= other, "other went back from {other} to {o}");
        other = o;
        if labels(&f) == ["a", "c"] {
            moved_at = Some(round);
            break;
        }
        assert_eq!(labels(&f), ["a", "b"], "round {round}");
    }
    let round = moved_at.expect("c never got a label");
    assert!(round < 10, "c waited {round} rounds for a label");
    // b's counts go on in "other" from now on.
    let before = other_dispatches(&f);
    let (e, total) = step(&mut sims);
    f.update(&e, 1.0, total, 0.0, None);
    assert_eq!(other_dispatches(&f), before + 90);
    assert_eq!(f.folds_total, 2, "c folded at first, then b");
}

#[test]
fn near_equal_victims_do_not_swap_and_a_much_worse_one_displaces() {
    let mut sims = vec![
        sim("v1", 40, 100.0),
        sim("v2", 30, 100.0),
        sim("v3", 35, 100.0),
    ];
    let mut f = Folder::new(2, false, 0.5);
    for _ in 0..5 {
        let (e, total) = step(&mut sims);
        f.update(&e, 1.0, total, 0.0, None);
        assert_eq!(labels(&f), ["v2", "v3"], "the two worst");
    }
    // v1 gets slightly worse than v3: no swap.
    sims[0].rate = 33;
    for _ in 0..120 {
        let (e, total) = step(&mut sims);
        f.update(&e, 1.0, total, 0.0, None);
        assert_eq!(labels(&f), ["v2", "v3"]);
    }
    // v1 starves outright: it displaces v3 (the better of the two).
    sims[0].rate = 0;
    let mut swapped = false;
    for _ in 0..60 {
        let (e, total) = step(&mut sims);
        f.update(&e, 1.0, total, 0.0, None);
        if labels(&f) == ["v1", "v2"] {
            swapped = true;
            break;
        }
    }
    assert!(swapped, "labels stayed {:?}", labels(&f));
    // All three are below 0.5 of their fair share; v3 has no series.
    assert_eq!((f.unfair_now, f.unfair_folded), (3, 1));
}

#[test]
fn the_smoothed_ratio_is_the_mean_until_the_time_constant_then_decays() {
    let mut s = Smooth::default();
    s.add(1.0, 10, 100.0, true);
    assert_eq!(s.ratio(), Some(0.1));
    s.add(1.0, 190, 100.0, true);
    assert_eq!(s.ratio(), Some(1.0), "the mean of the first two seconds");
    for _ in 0..600 {
        s.add(1.0, 50, 100.0, true);
    }
    assert!((s.ratio().unwrap() - 0.5).abs() < 1e-3, "{:?}", s.ratio());
    assert_eq!(s.below(0.9), Some(s.ratio().unwrap()));
    s.add(1.0, 0, 0.0, false);
    assert_eq!(s.below(0.9), None, "not backlogged: no victim");
    // Too little entitlement to judge.
    let mut t = Smooth::default();
    t.add(1.0, 0, 0.5, true);
    assert_eq!(t.ratio(), None);
}

#[test]
fn every_starved_client_of_ten_thousand_gets_a_label() {
    // 9,990 clients at their fair share with busy interval counts, ten
    // starved ones (a quarter of their share), fifty labels.
    let names: Vec<String> = (0..10_000)
        .map(|i| format!("10.{}.{}.{}", i / 65536, (i / 256) % 256, i % 256))
        .collect();
    let mut sims: Vec<Sim> = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            if i % 1000 == 7 {
                sim(n, 1, 4.0)
            } else {
                sim(n, 4 + (i % 5) as u64, 4.0 + (i % 5) as f64)
            }
        })
        .collect();
    let starved: Vec<&String> = names.iter().skip(7).step_by(1000).collect();
    let mut f = Folder::new(50, false, 0.5);
    for _ in 0..3 {
        let (e, total) = step(&mut sims);
        f.update(&e, 1.0, total, 0.0, None);
    }
    let l = labels(&f);
    assert_eq!(l.len(), 50);
    for s in &starved {
        assert!(l.contains(*s), "{s} folded; labels: {l:?}");
    }
    assert_eq!((f.unfair_now, f.unfair_folded), (10, 0));
    assert_eq!(f.folded_now, 9_950);
}

/// Requests and bytes have no aggregator-wide total: labelled series plus
/// "other" must add up to what every entity counted, through labels
/// moving, and a series whose bytes were never measured has none.
#[test]
fn requests_and_bytes_add_up_across_labels_and_unmeasured_bytes_stay_absent() {
    let mut f = Folder::new(2, false, 0.5);
    let names = ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"];
    let mut want = (0u64, 0u64, 0u64);
    for round in 1..=6u64 {
        let entities: Vec<EntityStats> = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let i = i as u64 + 1;
                // The busiest changes every round, so labels move.
                let rate = if (round + i).is_multiple_of(4) {
                    100
                } else {
                    i
                };
                let measured = *n != "10.0.0.4";
                EntityStats {
                    name: (*n).into(),
                    kind: EntityKind::Peer,
                    class: (*n).into(),
                    dispatches: round * 10 * i,
                    interval_dispatches: rate,
                    requests: round * 10 * i,
                    bytes_in: measured.then_some(round * 300 * i),
                    bytes_out: measured.then_some(round * 5000 * i),
                    ..EntityStats::default()
                }
            })
            .collect();
        let total: u64 = (1..=4).map(|i| 10 * i).sum();
        f.update(&entities, 1.0, total, 0.0, None);
        // Requests: 10 × (1+2+3+4) a round; bytes only from the three
        // measured entities: 300 and 5000 × (1+2+3) a round.
        want = (round * 100, round * 300 * 6, round * 5000 * 6);
    }
    let series = f.series();
    let requests: u64 = series.iter().map(|s| s.counts.requests).sum();
    let received: u64 = series.iter().filter_map(|s| s.counts.bytes_in).sum();
    let sent: u64 = series.iter().filter_map(|s| s.counts.bytes_out).sum();
    assert_eq!((requests, received, sent), want);
    if let Some(s) = series.iter().find(|s| s.name == "10.0.0.4") {
        assert_eq!(
            (s.counts.bytes_in, s.counts.bytes_out),
            (None, None),
            "{s:?}"
        );
    }
}
