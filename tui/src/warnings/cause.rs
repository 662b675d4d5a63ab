//! Why an entity gets less (or more) than its fair share, where the
//! snapshot shows it, so a warning says the reason rather than leaving it
//! to be worked out from the CONN column:
//!
//! - connection counts: the kernel's one FIFO of ready transports serves
//!   connections in turn, so a client with 2 connections against one
//!   with 16 gets 2/18 of the threads, not half;
//! - a class map that puts several clients in one class: under
//!   round-robin by class they share that class's one turn;
//! - one client holding most of the backlogged transports.
//!
//! Each cause is named only when the numbers agree with it (the ratio is
//! about what the cause predicts), never as a guess.

use nfsdtop_agent::model::{EntityKind, EntityStats, Snapshot};

/// A connection share this far under the fair share explains a ratio
/// (and a ratio within a factor of [`AGREES`] of it agrees with it).
const EXPLAINS: f64 = 0.75;
const AGREES: f64 = 1.5;

/// The entities that shared this interval's dispatches (entitled to some).
fn competitors(s: &Snapshot, kind: EntityKind) -> impl Iterator<Item = &EntityStats> {
    s.entities(kind)
        .iter()
        .filter(|e| e.interval_entitled > 0.0)
}

fn connections_word(n: u64) -> &'static str {
    if n == 1 {
        "connection"
    } else {
        "connections"
    }
}

/// The source's dispatch policy is round-robin (a demo or a recording
/// that says so): connection counts then do not decide the shares.
fn round_robin(s: &Snapshot) -> bool {
    s.source.detail.contains("policy=rr-")
}

/// Why `e` is below its fair share, in a few words, where it can be seen.
pub fn below_share(s: &Snapshot, kind: EntityKind, e: &EntityStats) -> Option<String> {
    fewer_connections(s, kind, e)
        .or_else(|| merged_class(s, e))
        .or_else(|| transports_held(s, kind, e))
}

/// "2 connections against 16 (the flat queue serves connections, not
/// clients)": `e`'s share of the connections is about its ratio times its
/// fair share.
fn fewer_connections(s: &Snapshot, kind: EntityKind, e: &EntityStats) -> Option<String> {
    if round_robin(s) || e.connections == 0 || e.fair_share <= 0.0 {
        return None;
    }
    let all: Vec<&EntityStats> = competitors(s, kind).collect();
    let total: u64 = all.iter().map(|c| c.connections).sum();
    let most = all
        .iter()
        .filter(|c| !(c.name == e.name && c.netns == e.netns))
        .max_by_key(|c| c.connections)?;
    if total == 0 || most.connections <= e.connections {
        return None;
    }
    let expected = e.connections as f64 / total as f64 / e.fair_share;
    let ratio = e.fairness?;
    if expected >= EXPLAINS || ratio > expected * AGREES || ratio < expected / AGREES {
        return None;
    }
    let whose = if all.len() > 2 {
        format!(" for {}", most.name)
    } else {
        String::new()
    };
    Some(format!(
        "{} {} against {}{whose} (the flat queue serves connections, not clients)",
        e.connections,
        connections_word(e.connections),
        most.connections
    ))
}

/// "class movers puts 6 clients in one share": a peer whose class
/// (not per-peer) holds other peers, the class itself not below half.
fn merged_class(s: &Snapshot, e: &EntityStats) -> Option<String> {
    if e.kind != EntityKind::Peer || e.class.is_empty() {
        return None;
    }
    let class = s
        .classes
        .iter()
        .find(|c| c.name == e.class && c.netns == e.netns)?;
    if class
        .fairness
        .is_some_and(|r| r < nfsdtop_agent::present::fairness::BELOW_HALF)
    {
        return None;
    }
    let members = s
        .peers
        .iter()
        .filter(|p| p.class == e.class && p.netns == e.netns)
        .count();
    (members > 1).then(|| {
        format!(
            "class {} puts {members} clients in one share (the class map)",
            e.class
        )
    })
}

/// "10.0.0.3 holds 16 of 18 backlogged transports".
fn transports_held(s: &Snapshot, kind: EntityKind, e: &EntityStats) -> Option<String> {
    let all: Vec<&EntityStats> = competitors(s, kind).collect();
    let total: u64 = all.iter().map(|c| c.queued_transports).sum();
    let most = all
        .iter()
        .filter(|c| !(c.name == e.name && c.netns == e.netns))
        .max_by_key(|c| c.queued_transports)?;
    (total > 0 && most.queued_transports * 2 > total).then(|| {
        format!(
            "{} holds {} of {total} backlogged transports",
            most.name, most.queued_transports
        )
    })
}

/// Why the top offender takes more than its share: "16 of 18
/// connections", where its share of the connections says so.
pub fn above_share(s: &Snapshot, kind: EntityKind, e: &EntityStats) -> Option<String> {
    if round_robin(s) || e.fair_share <= 0.0 {
        return None;
    }
    let total: u64 = competitors(s, kind).map(|c| c.connections).sum();
    if total == 0 {
        return None;
    }
    let share = e.connections as f64 / total as f64;
    (share >= e.fair_share / EXPLAINS)
        .then(|| format!("{} of {total} {}", e.connections, connections_word(total)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ent(name: &str, conns: u64, disp: u64, entitled: f64, total: f64) -> EntityStats {
        EntityStats {
            name: name.into(),
            connections: conns,
            interval_dispatches: disp,
            interval_entitled: entitled,
            fair_share: entitled / total,
            fairness: Some(disp as f64 / entitled),
            backlogged: true,
            ..Default::default()
        }
    }

    /// seed-k16 under the flat queue: 2 of 18 connections, half the share.
    fn seed_k16() -> Snapshot {
        Snapshot {
            peers: vec![
                ent("10.0.0.2", 2, 178, 800.0, 1600.0),
                ent("10.0.0.3", 16, 1422, 800.0, 1600.0),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn fewer_connections_under_the_flat_queue_are_named() {
        let s = seed_k16();
        assert_eq!(
            below_share(&s, EntityKind::Peer, &s.peers[0]).as_deref(),
            Some("2 connections against 16 (the flat queue serves connections, not clients)")
        );
        assert_eq!(
            above_share(&s, EntityKind::Peer, &s.peers[1]).as_deref(),
            Some("16 of 18 connections")
        );
    }

    #[test]
    fn no_cause_where_the_numbers_do_not_agree() {
        // Under round-robin, or when the ratio is not what the connection
        // counts predict, nothing is claimed.
        let mut s = seed_k16();
        s.source.detail = "seed-k16 policy=rr-peer".into();
        assert_eq!(below_share(&s, EntityKind::Peer, &s.peers[0]), None);
        let mut s = seed_k16();
        s.peers[0].connections = 16;
        assert_eq!(below_share(&s, EntityKind::Peer, &s.peers[0]), None);
    }

    #[test]
    fn a_class_that_merges_clients_is_named() {
        let mut a = ent("10.1.0.1", 4, 30, 100.0, 1000.0);
        a.class = "movers".into();
        let mut b = a.clone();
        b.name = "10.1.0.2".into();
        let mut c = ent("movers", 8, 200, 200.0, 1000.0);
        c.kind = EntityKind::Class;
        let s = Snapshot {
            peers: vec![a, b],
            classes: vec![c],
            ..Default::default()
        };
        assert_eq!(
            below_share(&s, EntityKind::Peer, &s.peers[0]).as_deref(),
            Some("class movers puts 2 clients in one share (the class map)")
        );
    }

    #[test]
    fn one_client_holding_most_backlogged_transports_is_named() {
        let mut a = ent("a", 4, 10, 100.0, 300.0);
        let mut b = ent("b", 4, 190, 100.0, 300.0);
        let c = ent("c", 4, 100, 100.0, 300.0);
        a.queued_transports = 1;
        b.queued_transports = 9;
        let s = Snapshot {
            peers: vec![a, b, c],
            ..Default::default()
        };
        assert_eq!(
            below_share(&s, EntityKind::Peer, &s.peers[0]).as_deref(),
            Some("b holds 9 of 10 backlogged transports")
        );
    }
}
