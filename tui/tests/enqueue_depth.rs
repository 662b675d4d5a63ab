//! In-flight depth at enqueue in the drill-down (ratatui's TestBackend at
//! 100x30): the interval's share at depth 0 and mean, and the since-start
//! shares, from a hand-made histogram; no line where it is not measured.

mod common;

use std::time::Duration;

use common::screen::{demo_snapshots, lines, open_detail};
use nfsdtop::state::State;
use nfsdtop_agent::aggregate::{Aggregator, Limits};
use nfsdtop_agent::model::{DepthHistogram, Snapshot, SourceInfo};

const PEER: &str = "10.0.0.2";

fn drill_down(mut snaps: Vec<Snapshot>) -> String {
    let mut st = State::new(Duration::from_secs(2), None);
    for s in snaps.drain(..) {
        st.on_snapshot(Box::new(s));
    }
    open_detail(&mut st, PEER);
    lines(&mut st, 100, 30).join("\n")
}

#[test]
fn the_drill_down_shows_the_depth_at_enqueue_where_measured() {
    let agg = Aggregator::new(Default::default(), Limits::default());
    let info = SourceInfo::default();
    let mut snaps = demo_snapshots("seed-k4", agg, |a, now, t| a.snapshot(now, t, &info));
    // Depths 0, 0, 1, 3, 70 since the start: 40% at 0, 20% at 1, 20% in
    // 2-7, 20% at 8 or more; this interval two of five at 0, mean 14.8.
    let mut d = DepthHistogram::default();
    for depth in [0, 0, 1, 3, 70] {
        d.record(depth);
    }
    let last = snaps.last_mut().unwrap();
    let peer = last.peers.iter_mut().find(|e| e.name == PEER).unwrap();
    peer.enqueue_depth = Some(d);
    peer.depth0_share = d.depth0_share();
    peer.enqueue_depth_mean = d.mean();
    peer.enqueue_depth_max = Some(70);
    let text = drill_down(snaps.clone());
    assert!(
        text.contains(
            "at enqueue: 40.0% at depth 0, mean 14.80, max 70; since start 0|1|2-7|8+: 40|20|20|20%"
        ),
        "{text}"
    );
    let last = snaps.last_mut().unwrap();
    let peer = last.peers.iter_mut().find(|e| e.name == PEER).unwrap();
    peer.enqueue_depth = None;
    assert!(!drill_down(snaps).contains("at enqueue"));
}
