//! Bounds on what a snapshot read from elsewhere may hold (`nfsdtop
//! --connect` reads an agent's): peers and classes, transports, and
//! histograms that take a dense 1 KiB in memory (more than 8 buckets,
//! however few bytes of JSON they came in). A hostile agent could
//! otherwise make a 256 MiB event cost gigabytes once read.
//!
//! The bounds are counted while the JSON is read, so a snapshot past one
//! fails before it is all in memory: [`read_bounded`] sets them for one
//! read on this thread; everywhere else (the agent's own snapshots, the
//! tests) nothing is counted.

use std::cell::Cell;

use serde::de::{Deserializer, SeqAccess, Visitor};
use serde::Deserialize;

/// What one snapshot may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Peers and classes together.
    pub entities: usize,
    /// Transports of all entities together.
    pub transports: usize,
    /// Histograms of more than 8 buckets (dense in memory).
    pub dense_histograms: usize,
}

/// `nfsdtop --connect`'s: four times the peers and classes and the
/// transports an agent tracks by default (65,536 peers and as many
/// classes, 262,144 transports), and a dense histogram for each entity it
/// tracks by default. At these a snapshot takes about 550 MiB in memory,
/// besides its event (256 MiB at most).
pub const REMOTE: Bounds = Bounds {
    entities: 524_288,
    transports: 1_048_576,
    dense_histograms: 131_072,
};

thread_local! {
    /// What is left of the bounds of the read under way, if one is.
    static LEFT: Cell<Option<Bounds>> = const { Cell::new(None) };
    /// Which bound the last read went past.
    static PAST: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// Run `read` (a deserialisation) within `bounds`; then
/// [`past`] says which one it went past, if its error is for that.
pub fn read_bounded<T>(bounds: Bounds, read: impl FnOnce() -> T) -> T {
    LEFT.with(|l| l.set(Some(bounds)));
    PAST.with(|p| p.set(None));
    let out = read();
    LEFT.with(|l| l.set(None));
    out
}

/// The bound the last [`read_bounded`] on this thread went past: "peers
/// and classes", "transports" or "histograms of more than 8 buckets",
/// with its value.
pub fn past() -> Option<&'static str> {
    PAST.with(|p| p.get())
}

#[derive(Clone, Copy)]
pub(crate) enum What {
    Entity,
    Transport,
    DenseHistogram,
}

/// Count one more of `what` against the read under way: an error past its
/// bound.
pub(crate) fn take<E: serde::de::Error>(what: What) -> Result<(), E> {
    LEFT.with(|l| {
        let Some(mut b) = l.get() else { return Ok(()) };
        let (left, name) = match what {
            What::Entity => (&mut b.entities, "peers and classes"),
            What::Transport => (&mut b.transports, "transports"),
            What::DenseHistogram => (&mut b.dense_histograms, "histograms of more than 8 buckets"),
        };
        if *left == 0 {
            PAST.with(|p| p.set(Some(name)));
            return Err(E::custom(format!("more {name} than the bound")));
        }
        *left -= 1;
        l.set(Some(b));
        Ok(())
    })
}

/// A list whose every element counts as `what`.
fn counted<'de, D, T>(d: D, what: What) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct List<T>(What, std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for List<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut out = Vec::new();
            while let Some(e) = seq.next_element()? {
                take::<A::Error>(self.0)?;
                out.push(e);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(List(what, std::marker::PhantomData))
}

/// `deserialize_with` of the peer and class lists.
pub(crate) fn entities<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    counted(d, What::Entity)
}

/// `deserialize_with` of an entity's transports.
pub(crate) fn transports<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    counted(d, What::Transport)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Snapshot;

    fn snapshot_json(peers: usize, buckets: usize) -> String {
        let hist: Vec<String> = (0..buckets).map(|i| format!("[{i},1]")).collect();
        let peer = format!(
            "{{\"name\":\"p\",\"kind\":\"peer\",\"class\":\"c\",\"dispatches\":0,\
\"dispatch_rate\":0,\"share\":0,\"entitled\":0,\"wait_p50_us\":0,\"wait_p99_us\":0,\
\"exec_share\":0,\"connections\":0,\"wait_histogram\":[{}]}}",
            hist.join(",")
        );
        let mut s = serde_json::to_value(Snapshot::default()).unwrap();
        let peer: serde_json::Value = serde_json::from_str(&peer).unwrap();
        s["peers"] = serde_json::Value::Array(vec![peer; peers]);
        s.to_string()
    }

    const SMALL: Bounds = Bounds {
        entities: 10,
        transports: 10,
        dense_histograms: 3,
    };

    #[test]
    fn a_snapshot_past_a_bound_fails_to_read_and_says_which() {
        let read = |json: &str| read_bounded(SMALL, || serde_json::from_str::<Snapshot>(json));
        assert_eq!(
            read(&snapshot_json(10, 9))
                .map(|_| ())
                .err()
                .map(|_| past()),
            Some(Some("histograms of more than 8 buckets"))
        );
        assert!(
            read(&snapshot_json(10, 8)).is_ok(),
            "sparse ones are not counted"
        );
        assert!(read(&snapshot_json(3, 9)).is_ok());
        assert!(read(&snapshot_json(11, 1)).is_err());
        assert_eq!(past(), Some("peers and classes"));
        // Outside a bounded read nothing is counted.
        assert!(serde_json::from_str::<Snapshot>(&snapshot_json(50, 9)).is_ok());
    }
}
