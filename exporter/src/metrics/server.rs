//! The server families: nfsd's threads, the mean busy threads of the
//! latest interval (over all pools and per pool), the busy thread-seconds since the start and the
//! network namespaces of the peers; and the host name lookups dropped
//! under `resolve` (one self-contained piece: update from each snapshot,
//! encode on a scrape). A family whose value is unknown (a
//! source that cannot tell, no snapshot yet) is left out rather than
//! exported as 0.

use nfsdtop_agent::model::Snapshot;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

/// The `port` of the row that sums the services beyond those counted apart.
const OTHER_PORTS: &str = "other";

#[derive(Debug, Default)]
pub struct ServerMetrics {
    threads: Option<u32>,
    busy_threads: Option<f64>,
    /// Σ busy_threads × interval over the snapshots that knew it.
    busy_thread_seconds: f64,
    pool_threads: Vec<(u32, u32)>,
    /// Each pool's busy threads in the latest interval, where known.
    pool_busy: Vec<(u32, f64)>,
    /// Σ a pool's busy_threads × interval, by pool id (pools come and go
    /// only with an nfsd restart; at most 4,096, as the server view).
    pool_busy_seconds: std::collections::BTreeMap<u32, f64>,
    /// Namespaces of the latest snapshot's peers; `None` before the first.
    netns: Option<usize>,
    /// Reverse-DNS lookups dropped for a full queue; `None` without
    /// `resolve`.
    hostname_lookups_dropped: Option<u64>,
    /// How far the latest snapshot was behind the kernel (live only).
    lag_s: Option<f64>,
    /// Per RPC service (nfsd, and each other service's port); at most 66.
    services: Vec<ServiceRow>,
    /// The threads that ran in the latest interval, where nfsd starts and
    /// stops them; and Σ mean × interval over the snapshots that said.
    running: Option<nfsdtop_agent::model::ThreadsRunning>,
    running_thread_seconds: f64,
}

/// One `server.services` row as labels and cumulative counts.
#[derive(Debug)]
struct ServiceRow {
    service: String,
    /// The service's server ports, comma-separated (nfsd's numbers are
    /// over all of its ports); "other" for the row of the ports beyond
    /// those counted apart. Never empty: an empty label value is no label
    /// to PromQL, and a family's series keep the same label names.
    port: String,
    dispatches: u64,
    requests: u64,
    /// A service other than nfsd: the peers its row lists (at most 32),
    /// with their dispatches and entitled dispatches among its own peers.
    peers: Vec<(String, u64, f64)>,
}

impl ServiceRow {
    /// `service`, `port`, and `peer` if given.
    fn labels(&self, peer: Option<&str>) -> Vec<(&'static str, String)> {
        let mut l = vec![
            ("service", self.service.clone()),
            ("port", self.port.clone()),
        ];
        l.extend(peer.map(|p| ("peer", p.to_string())));
        l
    }
}

/// A service's peers as unique `peer` label values: the same
/// address in two network namespaces is two peers, the second
/// `ADDR@netns:INODE` as nfsd's are.
fn service_peer_labels(peers: &[nfsdtop_agent::model::ServicePeer]) -> Vec<(String, u64, f64)> {
    let mut seen = std::collections::HashSet::new();
    peers
        .iter()
        .map(|p| {
            let mut label = p.peer.clone();
            if !seen.insert(label.clone()) {
                label = format!("{label}@netns:{}", p.netns);
                seen.insert(label.clone());
            }
            (label, p.dispatches, p.entitled)
        })
        .collect()
}

impl ServerMetrics {
    pub fn update(&mut self, s: &Snapshot) {
        let v = &s.server;
        self.threads = v.threads;
        self.busy_threads = v.busy_threads;
        if let Some(b) = v.busy_threads.filter(|b| b.is_finite()) {
            self.busy_thread_seconds += b * s.interval_s.max(0.0);
        }
        self.pool_threads = v
            .pools
            .iter()
            .filter_map(|p| Some((p.pool, p.threads?)))
            .collect();
        self.pool_busy = v
            .pools
            .iter()
            .filter_map(|p| Some((p.pool, p.busy_threads.filter(|b| b.is_finite())?)))
            .collect();
        for (pool, b) in &self.pool_busy {
            *self.pool_busy_seconds.entry(*pool).or_default() += b * s.interval_s.max(0.0);
        }
        if let Some(r) = v.threads_running.filter(|r| r.mean.is_finite()) {
            self.running_thread_seconds += r.mean * s.interval_s.max(0.0);
        }
        self.running = v.threads_running;
        self.netns = Some(v.netns.len());
        self.hostname_lookups_dropped = s.totals.hostname_lookups_dropped;
        self.lag_s = s.totals.lag_s.filter(|l| l.is_finite());
        self.services = v
            .services
            .iter()
            .map(|r| {
                let port = match (r.service.as_str(), r.ports.as_slice()) {
                    ("nfsd", []) => "all".to_string(),
                    (_, []) => OTHER_PORTS.to_string(),
                    (_, ports) => {
                        let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
                        ports.join(",")
                    }
                };
                ServiceRow {
                    service: r.service.clone(),
                    port,
                    dispatches: r.dispatches,
                    requests: r.requests,
                    peers: service_peer_labels(&r.peers),
                }
            })
            .collect();
    }

    pub fn encode(&self, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        if let Some(n) = self.threads {
            enc.encode_descriptor(
                "nfsdtop_server_threads",
                "nfsd threads over all pools (/proc/fs/nfsd/threads; the demo's, or the recording's).",
                None,
                MetricType::Gauge,
            )?
            .encode_gauge(&f64::from(n))?;
        }
        if let Some(b) = self.busy_threads {
            enc.encode_descriptor(
                "nfsdtop_server_busy_threads",
                "Mean nfsd threads in service over the latest interval (execution time / interval, at most nfsdtop_server_threads: the excess counts in the next interval); over nfsdtop_server_threads it is the saturation.",
                None,
                MetricType::Gauge,
            )?
            .encode_gauge(&b)?;
            let mut m = enc.encode_descriptor(
                "nfsdtop_server_busy_thread",
                "nfsd thread-seconds spent executing requests (rate() of it is the mean busy threads).",
                Some(&Unit::Seconds),
                MetricType::Counter,
            )?;
            m.encode_counter::<NoLabelSet, _, f64>(&self.busy_thread_seconds, None)?;
        }
        if let Some(r) = &self.running {
            self.encode_running(enc, r)?;
        }
        if let Some(n) = self.netns {
            enc.encode_descriptor(
                "nfsdtop_server_network_namespaces",
                "Network namespaces with NFS traffic: those of the peers nfsdtop tracks now (more than 1: nfsd serves several containers).",
                None,
                MetricType::Gauge,
            )?
            .encode_gauge(&(n as f64))?;
        }
        if let Some(lag) = self.lag_s {
            enc.encode_descriptor(
                "nfsdtop_lag",
                "How far the latest snapshot was behind the kernel when it was made, beyond the reorder window held by design (live source; tens of ms when the agent keeps up). Above the snapshot interval the agent is behind: its numbers stay right but arrive late.",
                Some(&Unit::Seconds),
                MetricType::Gauge,
            )?
            .encode_gauge(&lag)?;
        }
        if let Some(n) = self.hostname_lookups_dropped {
            let mut m = enc.encode_descriptor(
                "nfsdtop_hostname_lookups_dropped",
                "Reverse-DNS lookups (resolve) not asked because the lookup queue was full; those peers are asked again later.",
                None,
                MetricType::Counter,
            )?;
            m.encode_counter::<NoLabelSet, _, u64>(&n, None)?;
        }
        per_pool(
            enc,
            "nfsdtop_server_pool_threads",
            "nfsd threads of each pool (/proc/fs/nfsd/pool_threads).",
            None,
            MetricType::Gauge,
            self.pool_threads.iter().map(|&(p, n)| (p, f64::from(n))),
        )?;
        per_pool(
            enc,
            "nfsdtop_server_pool_busy_threads",
            "Mean threads of each nfsd pool in service over the latest interval (at most its nfsdtop_server_pool_threads).",
            None,
            MetricType::Gauge,
            self.pool_busy.iter().copied(),
        )?;
        per_pool(
            enc,
            "nfsdtop_server_pool_busy_thread",
            "Thread-seconds each nfsd pool spent executing requests (rate() of it is the pool's mean busy threads).",
            Some(Unit::Seconds),
            MetricType::Counter,
            self.pool_busy_seconds.iter().map(|(&p, &s)| (p, s)),
        )?;
        type Pick = fn(&ServiceRow) -> u64;
        let families: [(&str, &str, Pick); 2] = [
            (
                "nfsdtop_service_dispatches",
                "Dispatches of each RPC service by server port, counted apart from nfsd's: nfsd, lockd and the NFS callback service (nfs_callback) once a request named one of their procedures, else \"other\".",
                |r| r.dispatches,
            ),
            (
                "nfsdtop_service_requests",
                "Requests each RPC service completed (svc_stats_latency), by service as nfsdtop_service_dispatches.",
                |r| r.requests,
            ),
        ];
        for (name, help, pick) in families {
            if self.services.is_empty() {
                break;
            }
            let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
            for r in &self.services {
                m.encode_family(&r.labels(None))?
                    .encode_counter::<NoLabelSet, _, u64>(&pick(r), None)?;
            }
        }
        self.encode_service_peers(enc)
    }

    /// nfsd's threads as they come and go (Linux 7.0+; absent elsewhere).
    fn encode_running(
        &self,
        enc: &mut DescriptorEncoder,
        r: &nfsdtop_agent::model::ThreadsRunning,
    ) -> std::fmt::Result {
        enc.encode_descriptor(
            "nfsdtop_server_threads_running",
            "nfsd threads running, time-weighted mean over the latest interval, where nfsd starts and stops threads (Linux 7.0+ with min-threads below threads); nfsdtop_server_busy_threads over it is the saturation.",
            None,
            MetricType::Gauge,
        )?
        .encode_gauge(&r.mean)?;
        let mut m = enc.encode_descriptor(
            "nfsdtop_server_running_thread",
            "nfsd thread-seconds run where threads come and go (rate() of it is the mean threads running; rate(nfsdtop_server_busy_thread_seconds_total) over it is the saturation).",
            Some(&Unit::Seconds),
            MetricType::Counter,
        )?;
        m.encode_counter::<NoLabelSet, _, f64>(&self.running_thread_seconds, None)?;
        type Pick = fn(&nfsdtop_agent::model::ThreadsRunning) -> u64;
        let counters: [(&str, &str, Pick); 2] = [
            (
                "nfsdtop_server_thread_starts",
                "nfsd threads started because every thread was busy (nfsd_dynthread_start): a saturation signal of its own.",
                |r| r.starts_total,
            ),
            (
                "nfsdtop_server_thread_exits",
                "nfsd threads that exited after idling above the pool's minimum (nfsd_dynthread_kill).",
                |r| r.exits_total,
            ),
        ];
        for (name, help, pick) in counters {
            let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
            m.encode_counter::<NoLabelSet, _, u64>(&pick(r), None)?;
        }
        let bounds: Vec<(&str, u32)> = [("min", r.configured_min), ("max", r.configured_max)]
            .into_iter()
            .filter_map(|(b, v)| Some((b, v?)))
            .collect();
        if !bounds.is_empty() {
            let mut m = enc.encode_descriptor(
                "nfsdtop_server_threads_configured",
                "nfsd's configured thread bounds over all pools (min-threads and threads), as the latest thread start or exit gave them.",
                None,
                MetricType::Gauge,
            )?;
            for (bound, v) in bounds {
                m.encode_family(&[("bound", bound)])?
                    .encode_gauge(&f64::from(v))?;
            }
        }
        Ok(())
    }

    /// Each other service's busiest peers: their dispatches and entitled
    /// dispatches among that service's own peers, so its fairness ratio
    /// is one division away, as nfsd's is.
    fn encode_service_peers(&self, enc: &mut DescriptorEncoder) -> std::fmt::Result {
        if self.services.iter().all(|r| r.peers.is_empty()) {
            return Ok(());
        }
        /// Dispatches (whole) or entitled dispatches (fractional).
        enum Value {
            Whole(u64),
            Part(f64),
        }
        type Pick = fn(&(String, u64, f64)) -> Value;
        let families: [(&str, &str, Pick); 2] = [
            (
                "nfsdtop_service_peer_dispatches",
                "Dispatches of a peer of an RPC service other than nfsd (lockd, the NFS callback service, \"other\" by server port); its 32 busiest peers.",
                |p| Value::Whole(p.1),
            ),
            (
                "nfsdtop_service_peer_entitled_dispatches",
                "Fair share of a peer of an RPC service other than nfsd, among that service's backlogged peers (as nfsdtop_peer_entitled_dispatches for nfsd's).",
                |p| Value::Part(p.2),
            ),
        ];
        for (name, help, pick) in families {
            let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
            for r in &self.services {
                for p in &r.peers {
                    let labels = r.labels(Some(&p.0));
                    let mut f = m.encode_family(&labels)?;
                    match pick(p) {
                        Value::Whole(v) => f.encode_counter::<NoLabelSet, _, u64>(&v, None)?,
                        Value::Part(v) => f.encode_counter::<NoLabelSet, _, f64>(&v, None)?,
                    }
                }
            }
        }
        Ok(())
    }
}

/// One value per pool (label `pool`), a gauge or a counter; nothing where
/// no pool has one.
fn per_pool(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<Unit>,
    ty: MetricType,
    values: impl Iterator<Item = (u32, f64)>,
) -> std::fmt::Result {
    let mut values = values.peekable();
    if values.peek().is_none() {
        return Ok(());
    }
    let mut m = enc.encode_descriptor(name, help, unit.as_ref(), ty)?;
    for (pool, v) in values {
        let l = [("pool", pool.to_string())];
        let mut f = m.encode_family(&l)?;
        match ty {
            MetricType::Counter => f.encode_counter::<NoLabelSet, _, f64>(&v, None)?,
            _ => f.encode_gauge(&v)?,
        }
    }
    Ok(())
}
