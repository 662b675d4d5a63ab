//! The snapshot views, their shared encodings and the response budget.

use super::*;

fn snap() -> Snapshot {
    let e = |name: &str, kind, rate| EntityStats {
        name: name.into(),
        kind,
        class: name.into(),
        dispatch_rate: rate,
        dispatches: 7,
        ..EntityStats::default()
    };
    Snapshot {
        time: 12.5,
        interval_s: 1.0,
        peers: vec![
            e("10.0.0.1", EntityKind::Peer, 1.0),
            e("10.0.0.2", EntityKind::Peer, 3.0),
        ],
        classes: vec![e("lab", EntityKind::Class, 4.0)],
        ..Snapshot::default()
    }
}

#[test]
fn the_full_view_is_the_snapshot_json() {
    let s = snap();
    let got = View::default().render(&s);
    assert_eq!(&got[..], serde_json::to_string(&s).unwrap().as_bytes());
}

#[test]
fn views_pick_a_group_and_the_top_n() {
    let s = snap();
    let v = View {
        group: Some(EntityKind::Peer),
        top: Some(1),
    };
    let got: Snapshot = serde_json::from_slice(&v.render(&s)).unwrap();
    assert!(got.classes.is_empty());
    assert_eq!(got.peers.len(), 1);
    assert_eq!(got.peers[0].name, "10.0.0.2");
    assert_eq!(got.totals, s.totals);
}

#[tokio::test]
async fn a_small_view_does_not_wait_behind_a_large_encoding() {
    let mut big = snap();
    let peer = big.peers[0].clone();
    big.peers = vec![peer; SMALL_VIEW + 1];
    let (_tx, rx) = tokio::sync::watch::channel(Some(Arc::new(Published::new(big))));
    let enc = Arc::new(Encoder::default());
    // A large encoding holds its lane for as long as this test runs.
    let _busy = enc.permits.clone().try_acquire_owned().unwrap();
    let classes = View {
        group: Some(EntityKind::Class),
        top: None,
    };
    // A bound on a test that would otherwise hang, not a pacing.
    let got = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        enc.encoded(&rx, classes),
    )
    .await
    .expect("the class view waited behind the large encoding")
    .unwrap()
    .unwrap();
    let got: Snapshot = serde_json::from_slice(&got.json).unwrap();
    assert_eq!(got.classes.len(), 1);
    // The full view is large: it waits for the held lane.
    let waiting = enc.encoded(&rx, View::default());
    assert!(futures_util::FutureExt::now_or_never(waiting).is_none());
}

#[tokio::test]
async fn one_encoding_per_view_is_shared() {
    let (tx, rx) = tokio::sync::watch::channel(None);
    let enc = Arc::new(Encoder::default());
    assert!(enc.encoded(&rx, View::default()).await.is_none());
    tx.send_replace(Some(Arc::new(Published::new(snap()))));
    let get = |v: View| {
        let (rx, enc) = (rx.clone(), enc.clone());
        async move { enc.encoded(&rx, v).await.unwrap().unwrap().json }
    };
    let full = View::default();
    let (a, b) = (get(full).await, get(full).await);
    // The same allocation, not an equal copy.
    assert_eq!(a.as_ptr(), b.as_ptr());
    let top1 = View {
        top: Some(1),
        ..View::default()
    };
    assert_ne!(a.as_ptr(), get(top1).await.as_ptr());
    // Every top at or above the entity count is one view: one encoding.
    let all = get(View {
        top: Some(2),
        ..View::default()
    })
    .await;
    for n in [3, 20_001, MAX_TOP] {
        let again = get(View {
            top: Some(n),
            ..View::default()
        })
        .await;
        assert_eq!(all.as_ptr(), again.as_ptr(), "top={n}");
    }
    let last = View {
        top: Some(MAX_TOP),
        ..View::default()
    };
    let p = rx.borrow().clone().unwrap();
    // The encoder remembers the newest of each view.
    assert!(enc.newest(last, p.seq).is_some());
    assert!(
        enc.newest(last, p.seq + 1).is_none(),
        "not older than asked"
    );
    // A new snapshot: a new encoding, told apart by its seq.
    let first = enc.encoded(&rx, full).await.unwrap().unwrap();
    tx.send_replace(Some(Arc::new(Published::new(snap()))));
    let second = enc.encoded(&rx, full).await.unwrap().unwrap();
    assert!(second.seq > first.seq);
    assert_ne!(first.json.as_ptr(), second.json.as_ptr());
}

/// Distinct views past [`MAX_SHARED_VIEWS`] in one interval are refused
/// (a 503 saying nfsdtopd is overloaded), not encoded one by one; the
/// views admitted are still served, and the next snapshot admits anew.
#[tokio::test]
async fn distinct_views_past_the_bound_are_refused_until_the_next_snapshot() {
    let big = || peers(MAX_SHARED_VIEWS + 10);
    let (tx, rx) = tokio::sync::watch::channel(Some(Arc::new(Published::new(big()))));
    let enc = Arc::new(Encoder::default());
    for n in 1..=MAX_SHARED_VIEWS {
        let r = enc.encoded(&rx, top(n)).await.unwrap();
        assert!(r.is_ok(), "top={n}");
    }
    let over = enc.encoded(&rx, top(MAX_SHARED_VIEWS + 1)).await.unwrap();
    assert!(matches!(over, Err(EncodeError::TooManyViews)), "{over:?}");
    assert!(enc.encoded(&rx, top(1)).await.unwrap().is_ok(), "admitted");
    let full = enc.encoded(&rx, View::default()).await.unwrap();
    assert!(full.is_ok(), "the full view always has a place: {full:?}");
    let r = too_many_views(&views_bound());
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.headers()[header::RETRY_AFTER], "1");
    let body = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
    let body = String::from_utf8_lossy(&body);
    assert!(body.contains("nfsdtopd is overloaded"), "{body}");
    tx.send_replace(Some(Arc::new(Published::new(big()))));
    let next = enc.encoded(&rx, top(MAX_SHARED_VIEWS + 1)).await.unwrap();
    assert!(next.is_ok(), "a new interval: {next:?}");
}

/// Large views (more than [`SMALL_VIEW`] entities) each cost about as
/// much as the full one: at most [`MAX_LARGE_VIEWS`] a snapshot, and the
/// full view is always admitted, in a lane of its own.
#[tokio::test]
async fn large_distinct_views_are_bounded_more_and_never_bar_the_full_view() {
    let (_tx, rx) =
        tokio::sync::watch::channel(Some(Arc::new(Published::new(peers(SMALL_VIEW + 100)))));
    let enc = Arc::new(Encoder::default());
    for n in 0..MAX_LARGE_VIEWS {
        let r = enc.encoded(&rx, top(SMALL_VIEW + 1 + n)).await.unwrap();
        assert!(r.is_ok(), "large view {n}");
    }
    let over = enc.encoded(&rx, top(SMALL_VIEW + 50)).await.unwrap();
    assert!(matches!(over, Err(EncodeError::TooManyViews)), "{over:?}");
    assert!(
        enc.encoded(&rx, top(10)).await.unwrap().is_ok(),
        "a small one"
    );
    // Held lanes for the others: the full view does not wait for them.
    // (Once its rest after the last encoding is over.)
    let _large = enc.permits.clone().acquire_owned().await.unwrap();
    let _small = enc.small_permits.clone().try_acquire_owned().unwrap();
    let full = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        enc.encoded(&rx, View::default()),
    )
    .await
    .expect("the full view waited behind the other lanes");
    assert!(full.unwrap().is_ok());
}

/// Any number of requests for one large view may wait for the lane (they
/// will share its encoding); past [`MAX_LARGE_VIEWS`] distinct views
/// waiting, a new one is refused at once rather than queued for ever.
#[tokio::test]
async fn requests_wait_for_the_large_lane_per_view_and_few_views_wait() {
    let big = || Some(Arc::new(Published::new(peers(SMALL_VIEW + 100))));
    let (tx, rx) = tokio::sync::watch::channel(big());
    let enc = Arc::new(Encoder::default());
    let busy = enc.permits.clone().try_acquire_owned().unwrap();
    let mut waiting = Vec::new();
    for n in 0..MAX_LARGE_VIEWS {
        for _ in 0..3 {
            let (enc, rx) = (enc.clone(), rx.clone());
            waiting.push(tokio::spawn(async move {
                enc.encoded(&rx, top(SMALL_VIEW + 1 + n)).await
            }));
        }
    }
    // Until every one of them waits (a bounded turn of the runtime each).
    for _ in 0..1000 {
        let w = enc
            .large_waiting
            .lock()
            .unwrap()
            .iter()
            .map(|(_, k)| k)
            .sum::<usize>();
        if w == 3 * MAX_LARGE_VIEWS {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(enc.large_waiting.lock().unwrap().len(), MAX_LARGE_VIEWS);
    // A new snapshot admits a fifth distinct view, but it would wait
    // behind four others: refused at once.
    tx.send_replace(big());
    let refused = enc.encoded(&rx, top(SMALL_VIEW + 50)).await.unwrap();
    assert!(
        matches!(refused, Err(EncodeError::TooManyViews)),
        "{refused:?}"
    );
    drop(busy);
    for w in waiting {
        assert!(w.await.unwrap().unwrap().is_ok());
    }
    assert!(enc.large_waiting.lock().unwrap().is_empty());
}

/// A snapshot of `n` peers.
fn peers(n: usize) -> Snapshot {
    let mut s = snap();
    let peer = s.peers[0].clone();
    s.peers = (0..n)
        .map(|i| EntityStats {
            name: format!("10.1.{}.{}", i / 256, i % 256),
            dispatch_rate: i as f64,
            ..peer.clone()
        })
        .collect();
    s
}

fn top(n: usize) -> View {
    View {
        top: Some(n),
        ..View::default()
    }
}

#[tokio::test]
async fn encodings_held_by_unread_responses_stay_within_the_budget() {
    let s = peers(2_000);
    let one = top(1_998).render(&s).len();
    // Room for two encodings of the whole list, not three.
    let limit = one * 5 / 2;
    let enc = Arc::new(Encoder::new(limit));
    let (_tx, rx) = tokio::sync::watch::channel(Some(Arc::new(Published::new(s))));
    // As a client that asks for many views on as many connections and
    // reads none of them: each answer is held.
    let mut held = Vec::new();
    let mut refused = 0;
    for i in 0..40 {
        // Distinct views (below the entity count, which is one view).
        match enc.encoded(&rx, top(1_999 - i)).await.unwrap() {
            Ok(e) => held.push(e),
            Err(EncodeError::Busy(o)) => {
                assert_eq!(o.limit, limit);
                refused += 1;
            }
            Err(EncodeError::TooManyViews) => refused += 1,
            Err(EncodeError::Failed(e)) => panic!("{e}"),
        }
        let used = enc.budget().used();
        assert!(used <= limit, "{used} bytes held, over {limit}");
    }
    assert_eq!((held.len(), refused), (2, 38));
    let bytes: usize = held.iter().map(|e| e.json.len()).sum();
    assert!(bytes <= limit && bytes >= 2 * one);
    // Once their clients have read them, the budget is free again.
    held.clear();
    assert_eq!(enc.budget().used(), 0, "no cache keeps what was refused");
    let e = enc.encoded(&rx, top(1_999)).await.unwrap().unwrap();
    assert_eq!(enc.budget().used(), e.json.len());
}

#[tokio::test]
async fn a_view_past_the_budget_is_a_503_saying_what_to_do() {
    use tower::ServiceExt as _;
    let s = peers(2_000);
    let one = top(2_000).render(&s).len();
    let (_tx, latest) = tokio::sync::watch::channel(Some(Arc::new(Published::new(s))));
    let (_mtx, metrics) =
        tokio::sync::watch::channel(Arc::new(crate::metrics::Exposition::new(String::new())));
    let (_stx, shutdown) = tokio::sync::watch::channel(false);
    let app = crate::server::router(crate::server::AppState {
        latest,
        metrics,
        auth: Arc::new(crate::auth::Auth::new(Default::default())),
        interval: std::time::Duration::from_secs(1),
        shutdown,
        streams: Arc::new(crate::stream::Streams::new(4, false)),
        encoder: Arc::new(Encoder::new(one * 3 / 2)),
    });
    let get = |n: usize| {
        let req = axum::http::Request::get(format!("/api/v1/snapshot?top={n}"))
            .body(axum::body::Body::empty())
            .unwrap();
        app.clone().oneshot(req)
    };
    // Its body not read: it holds the encoding.
    let unread = get(1_999).await.unwrap();
    assert_eq!(unread.status(), StatusCode::OK);
    let r = get(1_998).await.unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(r.headers()[header::RETRY_AFTER], "5");
    let body = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
    let msg: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let msg = msg["error"].as_str().unwrap();
    assert!(
        msg.contains("response budget") && msg.contains("response_memory_mib"),
        "{msg}"
    );
    // A stream of a view that does not fit either is told why it gets no
    // snapshot (its link is fine, and says so).
    let req = axum::http::Request::get("/api/v1/stream?top=899998")
        .body(axum::body::Body::empty())
        .unwrap();
    let stream = app.clone().oneshot(req).await.unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    let mut body = stream.into_body().into_data_stream();
    let said = loop {
        use futures_util::StreamExt as _;
        let d = tokio::time::timeout(std::time::Duration::from_secs(10), body.next())
            .await
            .expect("a frame within 10 s")
            .expect("the stream goes on")
            .unwrap();
        let text = String::from_utf8_lossy(&d).into_owned();
        if text.contains("event:") {
            break text;
        }
    };
    assert!(
        said.starts_with("event: skipped\ndata: nfsdtopd skipped a snapshot: its JSON")
            && said.contains("response_memory_mib"),
        "{said}"
    );
    drop(body);
    // A small view still fits beside it.
    assert_eq!(get(10).await.unwrap().status(), StatusCode::OK);
    drop(unread);
    assert_eq!(get(899_999).await.unwrap().status(), StatusCode::OK);
}
