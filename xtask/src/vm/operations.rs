//! The NFSv4 operation check of the names scenario (nfsdtop run with
//! `--nfs4-ops` while an NFSv4.2 client mounts and reads attributes):
//! summed over clients, nfsdtop's operations per name equal what the
//! kernel's own `proc4ops` counters (/proc/net/rpc/nfsd, saved before and
//! after) grew by — exactly when nfsdtop lost none, else within what it
//! says it lost — and the client's own operations include the ones every
//! NFSv4.1+ mount sends.

use std::collections::BTreeMap;
use std::net::IpAddr;

use nfsdtop_agent::model::OperationTotals;
use nfsdtop_agent::present::output::BatchEntity;
use nfsdtop_common::nfs4ops::NAMES;

/// Operations per name in /proc/net/rpc/nfsd's `proc4ops` line
/// (`proc4ops COUNT n0 n1 ...`, by operation number).
pub fn proc4ops(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let mut tok = line.split_whitespace();
        if tok.next() != Some("proc4ops") {
            continue;
        }
        for (name, n) in NAMES.iter().zip(tok.skip(1)) {
            if !name.is_empty() {
                *out.entry(name.to_string()).or_default() += n.parse::<u64>().unwrap_or(0);
            }
        }
    }
    out
}

/// The checks, each `(passed, what)`: `entities` and `totals` of
/// nfsdtop's last line, the NFSv4 `client`, /proc/net/rpc/nfsd before and
/// after.
pub fn check(
    entities: &[BatchEntity],
    totals: Option<OperationTotals>,
    client: IpAddr,
    rpc: Option<(&str, &str)>,
) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    let Some(totals) = totals else {
        return vec![(
            false,
            "NFSv4 operations counted (server.nfs4_operations in the batch JSON)".into(),
        )];
    };
    out.push((
        totals.counted > 0,
        format!("nfsdtop counted NFSv4 operations: {totals:?}"),
    ));
    let ours: BTreeMap<&str, u64> = entities
        .iter()
        .find(|e| e.name == client.to_string().as_str())
        .map(|e| {
            e.nfs4_operations
                .iter()
                .map(|(n, s)| (n, s.count))
                .collect()
        })
        .unwrap_or_default();
    out.push((
        ["SEQUENCE", "PUTROOTFH", "GETATTR"]
            .iter()
            .all(|n| ours.get(n).is_some_and(|&c| c > 0)),
        format!("{client}: its operations include SEQUENCE, PUTROOTFH and GETATTR: {ours:?}"),
    ));
    let mut summed = BTreeMap::<String, u64>::new();
    for e in entities
        .iter()
        .filter(|e| e.kind == nfsdtop_agent::model::EntityKind::Peer)
    {
        for (n, s) in e.nfs4_operations.iter() {
            *summed.entry(n.to_string()).or_default() += s.count;
        }
    }
    let Some((before, after)) = rpc else {
        out.push((false, "/proc/net/rpc/nfsd saved before and after".into()));
        return out;
    };
    let grew = super::procedures::grew(&proc4ops(before), &proc4ops(after));
    let names = grew.keys().chain(summed.keys());
    let off: u64 = names
        .map(|n| {
            let (a, b) = (
                summed.get(n).copied().unwrap_or(0),
                grew.get(n).copied().unwrap_or(0),
            );
            a.abs_diff(b)
        })
        .sum::<u64>()
        / 2;
    let exact = summed == grew;
    out.push((
        !grew.is_empty() && (exact || totals.lost > 0 && off <= totals.lost),
        format!(
            "summed over clients, NFSv4 operations {summed:?} == the kernel's proc4ops delta \
             {grew:?} ({} lost; exact unless some were)",
            totals.lost
        ),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc4ops_names_counts_by_operation_number() {
        let line = |seq: u64, get: u64| {
            let mut v = vec![0u64; 76];
            v[53] = seq;
            v[9] = get;
            format!(
                "proc4 2 0 10\nproc4ops 76 {}\nwdeleg_getattr 0\n",
                v.iter().map(u64::to_string).collect::<Vec<_>>().join(" ")
            )
        };
        let t = proc4ops(&line(5, 2));
        assert_eq!((t["SEQUENCE"], t["GETATTR"], t["READ"]), (5, 2, 0));
        assert!(!t.contains_key(""));
    }
}
