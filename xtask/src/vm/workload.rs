//! The workload check of one vm-test measurement: per client, nfsdtop's
//! `requests` against ftrace's svc_stats_latency records, and its
//! `bytes_out`/`bytes_in` against the data fio read/wrote. The bytes are
//! on the wire (`rq_res.len`, `rq_arg.len`: RPC and NFS headers
//! included), so each lies between fio's data and that plus 1 KiB a
//! request; where nfsdtop says it does not measure bytes, they must be
//! null (never 0). Reads the agent's typed batch entity
//! (`nfsdtop_agent::present::output::BatchEntity`); pure but for reading fio's
//! JSON, so the host can test it without a guest.

use std::net::IpAddr;
use std::path::Path;

use nfsdtop_agent::present::output::BatchEntity;
use serde_json::Value;

/// What nfsdtop's `source.detail` says when it measures bytes (the live
/// source's attach report).
pub const BYTES_MEASURED: &str = "bytes in/out from rq_arg.len/rq_res.len";

/// Header bytes allowed per request above fio's data.
/// The clause that lists the slots typed (tp_btf) programs read.
const TYPED_CLAUSE: &str = "typed programs (tp_btf) for ";

/// The events a clause of `detail` that starts with `head` lists.
fn clause_events<'a>(detail: &'a str, head: &str) -> Vec<&'a str> {
    detail
        .split(';')
        .map(str::trim)
        .find_map(|c| c.strip_prefix(head))
        .map(|list| {
            list.split(',')
                .map(|e| e.trim().trim_end_matches(" (the default)"))
                .collect()
        })
        .unwrap_or_default()
}

/// The slots with a typed program that `detail` puts on raw tracepoints
/// at start but that their typed programs do not read (empty: all are).
pub fn untyped_raw_slots(detail: &str) -> Vec<&str> {
    let raw = clause_events(detail, "raw tracepoints (BTF offsets) for ");
    let typed = clause_events(detail, TYPED_CLAUSE);
    nfsdtop_common::Slot::ALL
        .into_iter()
        .filter(|s| s.info().raw.is_some_and(|r| r.typed.is_some()))
        .map(|s| s.name())
        .filter(|e| raw.contains(e) && !typed.contains(e))
        .collect()
}

pub const HEADER_SLACK: u64 = 1024;

/// One client of the measurement.
pub struct ClientLoad<'a> {
    pub name: &'a str,
    pub ip: IpAddr,
    /// fio's data: (bytes read, bytes written); None if fio left no output.
    pub fio: Option<(u64, u64)>,
    /// ftrace's nfsd svc_stats_latency records for the client.
    pub ftrace_requests: u64,
}

/// Bytes fio read and wrote over all its jobs (`io_bytes`).
pub fn fio_bytes(path: &Path) -> Option<(u64, u64)> {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    let jobs = v["jobs"].as_array()?;
    let sum = |dir: &str| -> Option<u64> {
        jobs.iter()
            .map(|j| j[dir]["io_bytes"].as_u64())
            .sum::<Option<u64>>()
    };
    Some((sum("read")?, sum("write")?))
}

/// The checks, each `(passed, what)`, for the batch record's `entities`
/// (peers) of the measurement's last line; `measured`: the line's
/// `source.detail` contains [`BYTES_MEASURED`]. A line without the
/// workload fields (an agent from before them) reads them as `None`:
/// requests then fail, and measured bytes too.
pub fn check(
    entities: &[BatchEntity],
    measured: bool,
    clients: &[ClientLoad],
) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    for c in clients {
        let ip = c.ip.to_string();
        let Some(e) = entities.iter().find(|e| e.name == ip.as_str()) else {
            out.push((false, format!("{} ({ip}): no nfsdtop entity", c.name)));
            continue;
        };
        // None: a line from before the field.
        let requests = e.has("requests").then_some(e.requests);
        out.push((
            requests == Some(c.ftrace_requests) && c.ftrace_requests > 0,
            format!(
                "{} ({ip}): nfsdtop {requests:?} requests == ftrace {} svc_stats_latency",
                c.name, c.ftrace_requests
            ),
        ));
        let (bin, bout) = (e.bytes_in, e.bytes_out);
        if !measured {
            out.push((
                bin.is_none() && bout.is_none(),
                format!(
                    "{} ({ip}): bytes not measured: bytes_in {bin:?}, bytes_out {bout:?} are null",
                    c.name
                ),
            ));
            continue;
        }
        let Some((read, written)) = c.fio else {
            out.push((false, format!("{} ({ip}): no fio output", c.name)));
            continue;
        };
        let slack = requests.unwrap_or(0).saturating_mul(HEADER_SLACK);
        for (what, got, data) in [("sent", bout, read), ("received", bin, written)] {
            let top = data.saturating_add(slack);
            out.push((
                got.is_some_and(|g| (data..=top).contains(&g)),
                format!(
                    "{} ({ip}): bytes {what} {got:?} in [{data}, {top}] (fio's data + {HEADER_SLACK} B \
                     x {} requests){}",
                    c.name,
                    requests.unwrap_or(0),
                    got.zip(requests.filter(|&n| n > 0))
                        .map(|(g, n)| format!(
                            ": {:+.0} B a request",
                            (g as f64 - data as f64) / n as f64
                        ))
                        .unwrap_or_default()
                ),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfsdtop_agent::model::EntityStats;

    /// The raw and typed clauses, wherever they stand (a source names
    /// tracefs first), as a 6.12 guest's nfsdtop wrote them.
    #[test]
    fn untyped_raw_slots_from_the_clauses() {
        let d = "tracefs /sys/kernel/tracing; raw tracepoints (BTF offsets) for svc_xprt_free, \
                 svc_xprt_dequeue, svc_stats_latency (the default); typed programs (tp_btf) for \
                 svc_xprt_dequeue, svc_stats_latency; bytes in/out from rq_arg.len/rq_res.len";
        assert!(
            untyped_raw_slots(d).is_empty(),
            "{:?}",
            untyped_raw_slots(d)
        );
        let one = "tracefs /t; raw tracepoints (BTF offsets) for svc_xprt_dequeue, \
                   svc_stats_latency (the default); typed programs (tp_btf) for \
                   svc_stats_latency; svc_xprt_dequeue read by its raw program (typed one not \
                   used: why)";
        assert_eq!(untyped_raw_slots(one), ["svc_xprt_dequeue"]);
        let none = "tracefs /t; raw tracepoints (BTF offsets) for svc_xprt_free, \
                    svc_stats_latency (the default)";
        assert_eq!(untyped_raw_slots(none), ["svc_stats_latency"]);
        assert!(untyped_raw_slots("tracefs /t; classic tracepoints; x").is_empty());
    }

    fn client(fio: Option<(u64, u64)>, ftrace_requests: u64) -> ClientLoad<'static> {
        ClientLoad {
            name: "c1",
            ip: "10.99.1.2".parse().unwrap(),
            fio,
            ftrace_requests,
        }
    }

    fn failed(r: &[(bool, String)]) -> Vec<&str> {
        r.iter()
            .filter(|(ok, _)| !ok)
            .map(|(_, w)| w.as_str())
            .collect()
    }

    #[test]
    fn bytes_between_the_data_and_a_kib_of_headers_a_request() {
        // 1000 reads of 4 KiB: 4096000 B of data, at most 1024000 B of
        // headers; one 100-byte request each (no data written).
        let entity = |requests: u64, bytes: Option<(u64, u64)>| {
            BatchEntity::from(EntityStats {
                name: "10.99.1.2".into(),
                requests,
                bytes_out: bytes.map(|b| b.0),
                bytes_in: bytes.map(|b| b.1),
                ..EntityStats::default()
            })
        };
        let e = |sent: u64, received: u64, requests: u64| {
            vec![entity(requests, Some((sent, received)))]
        };
        let c = [client(Some((4_096_000, 0)), 1000)];
        assert!(failed(&check(&e(4_200_000, 100_000, 1000), true, &c)).is_empty());
        // Less than fio read: data was not counted.
        let r = check(&e(4_095_999, 100_000, 1000), true, &c);
        assert_eq!(failed(&r).len(), 1, "{r:?}");
        assert!(failed(&r)[0].contains("bytes sent"));
        // More than a KiB a request of headers.
        assert_eq!(
            failed(&check(&e(4_096_000 + 1_024_001, 0, 1000), true, &c)).len(),
            1
        );
        // Requests differ from ftrace's.
        let r = check(&e(4_200_000, 0, 999), true, &c);
        assert!(failed(&r)[0].contains("requests == ftrace 1000"), "{r:?}");
        // Not measured: null passes, 0 does not.
        let null = vec![entity(1000, None)];
        assert!(failed(&check(&null, false, &c)).is_empty());
        assert_eq!(failed(&check(&e(0, 0, 1000), false, &c)).len(), 1);
        // Measured but null, a missing entity, no fio output: failures.
        assert_eq!(failed(&check(&null, true, &c)).len(), 2);
        assert_eq!(failed(&check(&[], true, &c)).len(), 1);
        // A line from before the workload fields: no requests to compare.
        let old = [BatchEntity::from(EntityStats {
            name: "10.99.1.2".into(),
            ..EntityStats::default()
        })
        .without(&["requests", "bytes_in", "bytes_out"])];
        assert!(failed(&check(&old, false, &c))[0].contains("None requests"));
        let no_fio = [client(None, 1000)];
        assert_eq!(
            failed(&check(&e(4_200_000, 0, 1000), true, &no_fio)).len(),
            1
        );
    }

    #[test]
    fn fio_bytes_sums_the_jobs() {
        let dir = std::env::temp_dir().join(format!("nfsdtop-workload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("fio.json");
        std::fs::write(
            &p,
            r#"{"jobs": [{"read": {"io_bytes": 4096}, "write": {"io_bytes": 0}},
                         {"read": {"io_bytes": 8192}, "write": {"io_bytes": 512}}]}"#,
        )
        .unwrap();
        assert_eq!(fio_bytes(&p), Some((12_288, 512)));
        std::fs::write(&p, "not json").unwrap();
        assert_eq!(fio_bytes(&p), None);
        assert_eq!(fio_bytes(&dir.join("missing.json")), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
