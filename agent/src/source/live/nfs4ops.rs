//! NFSv4 operations per client, the agent's side (`--nfs4-ops`; the
//! kernel's is `nfsdtop_common::nfs4ops`): the offsets the programs need
//! (sunrpc's and nfsd's BTF), attaching them to nfsd's raw tracepoints,
//! decoding their records into [`EventKind::Operation`]s, and their
//! counters (operations sent, lost), read from memory like the slots'.

use std::path::Path;

use aya::Ebpf;
use nfsdtop_common::nfs4ops::{self, counter, OpsConfig, OPS_PER_RECORD, TRACEPOINTS};
use nfsdtop_common::{rawrec, RecordView};

use super::bpf;
use super::btf::Btf;
use super::decode::endpoint_at;
use super::error::LiveError;
use super::mapped::Mapped;
use crate::model::{Event, EventKind, XprtKey};

/// The programs' offsets from the running kernel's BTF: `svc_rqst` and
/// `svc_xprt` (vmlinux or the sunrpc module), `nfsd4_compoundargs` and
/// `nfsd4_op` (the nfsd module, which must be loaded).
pub fn offsets(btf_dir: &Path) -> Result<OpsConfig, String> {
    let sunrpc = dir_module(btf_dir, "sunrpc");
    let rpc = Btf::load(btf_dir, sunrpc).map_err(|e| e.to_string())?;
    let nfsd = Btf::load(btf_dir, dir_module(btf_dir, "nfsd")).map_err(|e| e.to_string())?;
    let need = |btf: &Btf, s: &str, path: &[&str]| {
        btf.offset_of(s, path)
            .ok_or_else(|| format!("the kernel's BTF has no {s}.{}", path.join(".")))
    };
    let local = super::raw::xpt_local(&rpc)?;
    Ok(OpsConfig {
        enabled: 1,
        rq_xprt: need(&rpc, "svc_rqst", &["rq_xprt"])?,
        rq_argp: need(&rpc, "svc_rqst", &["rq_argp"])?,
        args_ops: need(&nfsd, "nfsd4_compoundargs", &["ops"])?,
        op_size: nfsd
            .size_of("nfsd4_op")
            .filter(|&n| n > 0)
            .ok_or("the kernel's BTF has no struct nfsd4_op (is nfsd loaded?)")?,
        op_opnum: need(&nfsd, "nfsd4_op", &["opnum"])?,
        xpt_net: need(&rpc, "svc_xprt", &["xpt_net"])?,
        net_ns_inum: need(&rpc, "net", &["ns", "inum"])?,
        xpt_local: local,
        _pad: 0,
    })
}

/// `Some(module)` where the module has its own BTF file.
fn dir_module<'a>(dir: &Path, module: &'a str) -> Option<&'a str> {
    dir.join(module).exists().then_some(module)
}

/// The attached programs and their counters.
pub struct Nfs4Ops {
    counters: Mapped,
    cpus: usize,
}

impl Nfs4Ops {
    /// Configure and attach both programs (nfsd's tracepoints exist only
    /// while nfsd is loaded).
    pub fn attach(ebpf: &mut Ebpf, btf_dir: &Path) -> Result<Nfs4Ops, LiveError> {
        let cfg = offsets(btf_dir).map_err(|detail| LiveError::Bpf {
            context: "--nfs4-ops".into(),
            detail,
        })?;
        let cpus = bpf::Counters::cpus()?;
        let counters = Mapped::map(ebpf, "OPS_COUNTERS", cpus * counter::STRIDE as usize * 8)?;
        bpf::write_ops_config(ebpf, cfg)?;
        for tp in TRACEPOINTS {
            bpf::attach_ops(ebpf, tp.program, tp.event)?;
        }
        Ok(Nfs4Ops { counters, cpus })
    }

    /// Operations (sent, lost) so far, over every CPU.
    pub fn counts(&self) -> (u64, u64) {
        let sum = |c: u32| {
            (0..self.cpus)
                .map(|cpu| {
                    self.counters
                        .word(cpu * counter::STRIDE as usize + c as usize)
                })
                .fold(0u64, u64::saturating_add)
        };
        (sum(counter::SENT), sum(counter::LOST))
    }

    /// Runs of the programs the kernel skipped (preempted mid-run): each
    /// is an operation, or a COMPOUND's start, not counted.
    pub fn skipped(ebpf: &Ebpf) -> u64 {
        TRACEPOINTS
            .iter()
            .filter_map(|tp| bpf::recursion_misses(ebpf, tp.program))
            .sum()
    }
}

/// A record of the `nfsd_compound_status` program: one event per
/// operation it lists, of its transport (nothing for a record that does
/// not hold together).
pub fn decode(rec: &RecordView<'_>, out: &mut Vec<Event>) {
    let (Some(server), Some(client)) = (
        endpoint_at(rec, rawrec::SERVER_LOC),
        endpoint_at(rec, rawrec::CLIENT_LOC),
    ) else {
        return;
    };
    let xprt = XprtKey {
        netns: rec.field(rawrec::NETNS, 4).unwrap_or(0) as u32,
        server,
        client,
    };
    let n = rec.field(nfs4ops::COUNT_AT, 8).unwrap_or(0) as usize;
    let Some(list) = rec
        .raw()
        .get(nfs4ops::OPS_AT as usize..nfs4ops::OPS_AT as usize + n.min(OPS_PER_RECORD))
    else {
        return;
    };
    let mut ops = [0u8; OPS_PER_RECORD];
    let ops = &mut ops[..list.len()];
    ops.copy_from_slice(list);
    ops.sort_unstable();
    for run in ops.chunk_by(|a, b| a == b) {
        out.push(Event {
            ts_ns: rec.ts_ns(),
            xprt,
            kind: EventKind::Operation {
                op: run[0],
                count: run.len() as u32,
            },
        });
    }
}

/// Why `--nfs4-ops` could not be honoured, for `source.detail`.
pub fn not_counted(e: &LiveError) -> String {
    format!("NFSv4 operations not counted: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Endpoint;
    use crate::source::live::decode::sockaddr_bytes;
    use nfsdtop_common::Record;

    /// What the `nfsd_compound_status` program writes for `ops` of the
    /// transport `server` ← `client` in namespace 7.
    fn record(server: Endpoint, client: Endpoint, ops: &[u8], count: u64) -> Record {
        let mut r = Record::new(99, nfsdtop_common::Slot::StatsLatency);
        r.raw_kind = nfs4ops::RECORD_KIND;
        let (s, slen) = sockaddr_bytes(&server);
        let (c, clen) = sockaddr_bytes(&client);
        let loc = |len: u8, at: u16| (u32::from(len) << 16 | u32::from(at)).to_ne_bytes();
        r.raw[8..12].copy_from_slice(&loc(slen, rawrec::SERVER_AT));
        r.raw[12..16].copy_from_slice(&loc(clen, rawrec::CLIENT_AT));
        r.raw[24..28].copy_from_slice(&7u32.to_ne_bytes());
        r.raw[40..68].copy_from_slice(&s);
        r.raw[68..96].copy_from_slice(&c);
        r.raw[96..104].copy_from_slice(&count.to_ne_bytes());
        r.raw[104..104 + ops.len()].copy_from_slice(ops);
        r
    }

    fn decoded(r: &Record) -> Vec<(Endpoint, u8, u32)> {
        let b = r.to_bytes();
        let mut out = Vec::new();
        decode(&RecordView::new(&b).unwrap(), &mut out);
        out.iter()
            .map(|e| match e.kind {
                EventKind::Operation { op, count } => {
                    assert_eq!((e.xprt.netns, e.ts_ns), (7, 99));
                    (e.xprt.client, op, count)
                }
                k => panic!("{k:?}"),
            })
            .collect()
    }

    #[test]
    fn a_compound_becomes_one_event_per_operation_number() {
        let server = Endpoint::from_socket_addr("10.0.0.1:2049".parse().unwrap());
        let client = Endpoint::from_socket_addr("[fd00::9]:801".parse().unwrap());
        // SEQUENCE PUTFH READ GETATTR PUTFH READ, and one unknown.
        let ops = [53, 22, 25, 9, 22, 25, nfs4ops::OP_UNKNOWN];
        let got = decoded(&record(server, client, &ops, ops.len() as u64));
        assert_eq!(
            got,
            vec![
                (client, 9, 1),
                (client, 22, 2),
                (client, 25, 2),
                (client, 53, 1),
                (client, nfs4ops::OP_UNKNOWN, 1)
            ]
        );
        // The count bounds what is read: never past the list.
        let got = decoded(&record(server, client, &ops, 2));
        assert_eq!(got, vec![(client, 22, 1), (client, 53, 1)]);
        let got = decoded(&record(server, client, &ops, u64::MAX));
        assert_eq!(got.iter().map(|g| g.2).sum::<u32>(), OPS_PER_RECORD as u32);
    }
}
