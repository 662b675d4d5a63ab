//! nfsdtopd's own `process_*` metrics, as the Prometheus client libraries
//! (client_golang, client_python) define them: CPU seconds, resident and
//! virtual memory, open and maximum file descriptors, start time. Read
//! from /proc/self at each scrape (one small file, one directory listing
//! bounded by the descriptor limit, one getrlimit), not per snapshot, so a
//! scrape sees the daemon as it is. A value /proc cannot give is left out,
//! never exported as 0.

use std::sync::LazyLock;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

/// What one scrape reads.
#[derive(Debug, Default, PartialEq)]
pub struct ProcessSample {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<u64>,
    pub virtual_bytes: Option<u64>,
    pub open_fds: Option<u64>,
    pub max_fds: Option<u64>,
    pub start_time_seconds: Option<f64>,
}

/// The start time never changes: read once.
static START_TIME: LazyLock<Option<f64>> = LazyLock::new(|| {
    let stat = procfs::process::Process::myself().ok()?.stat().ok()?;
    let boot = procfs::boot_time_secs().ok()?;
    Some(boot as f64 + stat.starttime as f64 / procfs::ticks_per_second() as f64)
});

impl ProcessSample {
    /// This process, now.
    pub fn read() -> ProcessSample {
        let me = procfs::process::Process::myself().ok();
        let stat = me.as_ref().and_then(|p| p.stat().ok());
        let ticks = procfs::ticks_per_second() as f64;
        let max_fds = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
        ProcessSample {
            cpu_seconds: stat.as_ref().map(|s| (s.utime + s.stime) as f64 / ticks),
            resident_bytes: stat.as_ref().map(|s| s.rss * procfs::page_size()),
            virtual_bytes: stat.as_ref().map(|s| s.vsize),
            open_fds: me
                .as_ref()
                .and_then(|p| p.fd_count().ok())
                .map(|n| n as u64),
            // Unlimited (None) has no number to give, as client_golang's.
            max_fds,
            start_time_seconds: *START_TIME,
        }
    }
}

/// One family: (name, help, unit, type, value read).
type Row = (
    &'static str,
    &'static str,
    Option<Unit>,
    MetricType,
    fn(&ProcessSample) -> Option<f64>,
);

/// The families, with the client libraries' names and help.
const FAMILIES: [Row; 6] = [
    (
        "process_cpu",
        "Total user and system CPU time spent in seconds.",
        Some(Unit::Seconds),
        MetricType::Counter,
        |s| s.cpu_seconds,
    ),
    (
        "process_resident_memory",
        "Resident memory size in bytes.",
        Some(Unit::Bytes),
        MetricType::Gauge,
        |s| s.resident_bytes.map(|v| v as f64),
    ),
    (
        "process_virtual_memory",
        "Virtual memory size in bytes.",
        Some(Unit::Bytes),
        MetricType::Gauge,
        |s| s.virtual_bytes.map(|v| v as f64),
    ),
    (
        "process_open_fds",
        "Number of open file descriptors.",
        None,
        MetricType::Gauge,
        |s| s.open_fds.map(|v| v as f64),
    ),
    (
        "process_max_fds",
        "Maximum number of open file descriptors.",
        None,
        MetricType::Gauge,
        |s| s.max_fds.map(|v| v as f64),
    ),
    (
        "process_start_time",
        "Start time of the process since unix epoch in seconds.",
        Some(Unit::Seconds),
        MetricType::Gauge,
        |s| s.start_time_seconds,
    ),
];

/// Reads /proc/self whenever a registry holding it is encoded.
#[derive(Debug)]
struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> std::fmt::Result {
        let sample = ProcessSample::read();
        for (name, help, unit, ty, read) in FAMILIES {
            let Some(v) = read(&sample) else { continue };
            let mut m = enc.encode_descriptor(name, help, unit.as_ref(), ty)?;
            match ty {
                MetricType::Counter => m.encode_counter::<NoLabelSet, _, f64>(&v, None)?,
                _ => m.encode_gauge(&v)?,
            }
        }
        Ok(())
    }
}

/// The registry of the `process_*` families, encoded at each scrape.
pub static PROCESS: LazyLock<Registry> = LazyLock::new(|| {
    let mut r = Registry::default();
    r.register_collector(Box::new(ProcessCollector));
    r
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_every_value_and_they_are_plausible() {
        let s = ProcessSample::read();
        let rss = s.resident_bytes.expect("rss");
        assert!(
            rss > 1 << 20,
            "a Rust test binary has over 1 MiB resident: {rss}"
        );
        assert!(s.virtual_bytes.expect("vsize") >= rss);
        let open = s.open_fds.expect("open fds");
        assert!(open >= 3, "stdin, stdout, stderr at least: {open}");
        assert!(open <= s.max_fds.expect("a limit on this machine"));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = s.start_time_seconds.expect("start time");
        assert!(
            start <= now + 1.0 && start > now - 86_400.0,
            "{start} vs {now}"
        );
        // CPU time only grows: spin until the clock ticks (bounded).
        let before = s.cpu_seconds.expect("cpu");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut x = 0u64;
        while ProcessSample::read().cpu_seconds.unwrap() <= before {
            for i in 0..100_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
            assert!(std::time::Instant::now() < deadline, "CPU time never grew");
        }
        std::hint::black_box(x);
    }

    #[test]
    fn the_families_are_named_as_the_client_libraries_name_them() {
        let mut om = String::new();
        prometheus_client::encoding::text::encode_registry(&mut om, &PROCESS).unwrap();
        for name in [
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_virtual_memory_bytes ",
            "process_open_fds ",
            "process_max_fds ",
            "process_start_time_seconds ",
        ] {
            assert!(om.lines().any(|l| l.starts_with(name)), "no {name}in\n{om}");
        }
    }
}
