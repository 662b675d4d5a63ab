//! Scenario "names" (scripts/vm/scenario-names.sh): the first client
//! mounts with NFSv4.2 while nfsdtop runs. nfsd's own record of the client
//! (`/proc/fs/nfsd/clients/*/info`, copied out of the guest) is the truth:
//! nfsdtop's lines must show, on that client's address, the name and
//! minor version nfsd lists for it. The same span's ftrace and
//! /proc/net/rpc/nfsd check the NFSv4.2 client's requests per procedure
//! (COMPOUND, NULL) as vm/procedures.rs checks the NFSv3 ones.

use std::collections::BTreeMap;
use std::fs;
use std::net::IpAddr;
use std::path::Path;

use super::batch;
use super::clients;
use super::ftrace::{ftrace_losses, parse_trace};
use super::operations;
use super::procedures;
use super::report::Report;

/// One client of nfsd's list: its address, name and minor version, read
/// here independently of the agent's parser (`address: "IP:PORT"` or
/// `"[IP]:PORT"`, `name: "..."`, `minor version: N`).
#[derive(Debug, Default, PartialEq)]
struct Listed {
    address: Option<IpAddr>,
    name: Option<String>,
    minor: Option<u32>,
}

fn unquote(v: &str) -> &str {
    v.trim().trim_matches('"')
}

fn parse(text: &str) -> Vec<Listed> {
    text.split("\n--")
        .map(|block| {
            let mut c = Listed::default();
            for line in block.lines() {
                let Some((k, v)) = line.split_once(':') else {
                    continue;
                };
                match k.trim() {
                    "address" => {
                        let a = unquote(v);
                        let host = match a.strip_prefix('[') {
                            Some(r) => r.split(']').next().unwrap_or(""),
                            None => a.rsplit_once(':').map_or(a, |(h, _)| h),
                        };
                        c.address = host.parse().ok();
                    }
                    "name" => c.name = Some(unquote(v).to_string()),
                    "minor version" => c.minor = v.trim().parse().ok(),
                    _ => {}
                }
            }
            c
        })
        .filter(|c| c.address.is_some())
        .collect()
}

pub fn check(results: &Path, summary: &BTreeMap<String, String>, rep: &mut Report) {
    if let Some(e) = summary.get("names.error") {
        rep.check(false, format!("names: {e}"));
        return;
    }
    let Some(first) = clients::from_summary(summary).into_iter().next() else {
        rep.check(false, "names: the run's summary names no client");
        return;
    };
    let mounted = summary.get("names.mounted").map(String::as_str);
    rep.check(
        mounted == Some("yes"),
        format!("names: NFSv4.2 mount from {} ({mounted:?})", first.name),
    );
    let ip = first.ip;
    let listed = parse(&fs::read_to_string(results.join("nfsd-clients.txt")).unwrap_or_default());
    let Some(truth) = listed.iter().find(|c| c.address == Some(ip)) else {
        rep.check(
            false,
            format!(
                "names: nfsd lists no client at {ip} ({} listed)",
                listed.len()
            ),
        );
        return;
    };
    let lines = match batch::read(&results.join("nfsdtop-names.jsonl")) {
        Ok(l) => l,
        Err(e) => return rep.check(false, format!("names: {e}")),
    };
    // The name shows while the client is mounted; after its umount
    // (DESTROY_CLIENTID) nfsd forgets it, and so does nfsdtop's next
    // refresh: any line may carry it, the last ones need not.
    let shown: Vec<(String, Option<u32>)> = lines
        .iter()
        .flat_map(|l| l.entities.iter())
        .filter(|e| e.name == ip.to_string())
        .flat_map(|e| e.client_names.iter())
        .map(|c| (c.name.clone(), c.minor_version))
        .collect();
    if lines.is_empty() {
        return rep.check(false, "names: no nfsdtop line".to_string());
    }
    let want = (truth.name.clone().unwrap_or_default(), truth.minor);
    rep.check(
        shown.contains(&want),
        format!(
            "names: {ip}: nfsdtop showed {} names, nfsd lists {:?} (minor version {:?})",
            shown.len(),
            want.0,
            want.1
        ),
    );
    if let Some(last) = lines.last() {
        check_procedures(results, last, (&first.name, ip), rep);
        // Its last requests, folded in the kernel, are reported before
        // its close, not after it (which would bring its transport back).
        let left = (last.entities.iter())
            .find(|e| e.name == ip.to_string())
            .map(|e| e.connections);
        rep.check(
            left == Some(0),
            format!("names: {ip}: no connection left after its umount in nfsdtop's last line ({left:?})"),
        );
    }
}

/// The NFSv4.2 client's requests per procedure in nfsdtop's last line
/// against ftrace's `proc=` and the kernel's `proc4` counters.
fn check_procedures(
    results: &Path,
    last: &batch::Line,
    (name, ip): (&str, IpAddr),
    rep: &mut Report,
) {
    let read = |f: &str| fs::read_to_string(results.join(f)).ok();
    let stats = read("ftrace-stats-names.txt").unwrap_or_default();
    let lost = ftrace_losses(&stats);
    rep.check(
        lost == Some(0),
        format!("names: ftrace lost no records ({lost:?})"),
    );
    let ft = parse_trace(&read("trace-names.txt").unwrap_or_default());
    let compounds = ft
        .procs_per_client
        .get(&ip)
        .and_then(|p| p.get("COMPOUND"))
        .copied()
        .unwrap_or(0);
    rep.check(
        compounds > 0,
        format!("names: ftrace saw NFSv4 COMPOUNDs from {ip}: {compounds}"),
    );
    let counts = last.source.detail.contains(procedures::PROCEDURES_MEASURED);
    let (before, after) = (
        read("rpc-nfsd-before-names.txt"),
        read("rpc-nfsd-after-names.txt"),
    );
    let rpc = before.as_deref().zip(after.as_deref());
    let named = [(name, ip)];
    for (ok, what) in procedures::check(&last.entities, counts, &ft.procs_per_client, &named, rpc) {
        rep.check(ok, format!("names: NFSv4.2: {what}"));
    }
    if counts {
        for (ok, what) in
            procedures::check_p99(&last.entities, &ft.exec_us_per_client_proc, &named, false)
        {
            rep.check(ok, format!("names: NFSv4.2: {what}"));
        }
    }
    for (ok, what) in operations::check(&last.entities, last.server.nfs4_operations, ip, rpc) {
        rep.check(
            ok,
            format!("names: NFSv4.2 operations (--nfs4-ops): {what}"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nfsd_client_lists_parse_for_ipv4_and_ipv6() {
        let text = "clientid: 0xc3a1\naddress: \"10.99.1.2:753\"\nstatus: confirmed\n\
                    name: \"Linux NFSv4.2 nfsdtop-vm\"\nminor version: 2\n--\n\
                    address: \"[fd99:3::2]:812\"\nname: \"Linux NFSv4.1 x\"\nminor version: 1\n--\n";
        let l = parse(text);
        assert_eq!(l.len(), 2, "{l:?}");
        assert_eq!(l[0].address, Some("10.99.1.2".parse().unwrap()));
        assert_eq!(l[0].name.as_deref(), Some("Linux NFSv4.2 nfsdtop-vm"));
        assert_eq!(l[0].minor, Some(2));
        assert_eq!(l[1].address, Some("fd99:3::2".parse().unwrap()));
        assert_eq!(l[1].minor, Some(1));
    }
}
