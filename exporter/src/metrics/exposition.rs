//! /metrics's bodies: which format a scraper gets (the `Accept` header's
//! best match among OpenMetrics 1.0, the Prometheus protobuf format and
//! the Prometheus text format 0.0.4), one snapshot's encodings, shared by
//! every scrape of that snapshot, and the `process_*` families read at
//! each scrape and added to them.

use std::fmt::Write as _;
use std::sync::{Arc, OnceLock};

use prometheus_client::encoding::prometheus_protobuf;
use prometheus_client::registry::Registry;

use super::process::PROCESS;

/// A body format of /metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `application/openmetrics-text; version=1.0.0`: Prometheus's
    /// default; classic histogram buckets.
    OpenMetrics,
    /// The length-delimited `io.prometheus.client.MetricFamily` protobuf:
    /// what Prometheus asks for first with native histograms on; the
    /// queue-wait histograms carry native buckets beside the classic ones.
    Protobuf,
    /// `text/plain; version=0.0.4`, for everything else (promtool, curl).
    Text,
}

const PROTOBUF_ESSENCE: &str = "application/vnd.google.protobuf";
const PROTOBUF_PROTO: &str = "io.prometheus.client.MetricFamily";

impl Format {
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Protobuf => "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited",
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
        }
    }

    /// The format the `Accept` header values rate highest (`q`, 1 when
    /// absent; on a tie protobuf, then OpenMetrics); the text format when
    /// they name neither of the others (`*/*`, none, or unparsable).
    pub fn negotiate<'a>(accept: impl Iterator<Item = &'a str>) -> Format {
        let mut best: Option<(f32, Format)> = None;
        for range in accept.flat_map(|v| v.split(',')) {
            let Ok(m) = range.trim().parse::<mime::Mime>() else {
                continue;
            };
            let q = m
                .get_param("q")
                .and_then(|q| q.as_str().parse::<f32>().ok())
                .unwrap_or(1.0);
            let format = match m.essence_str() {
                "application/openmetrics-text" => Format::OpenMetrics,
                PROTOBUF_ESSENCE
                    if m.get_param("proto").map(|p| p.as_str()) == Some(PROTOBUF_PROTO)
                        && m.get_param("encoding").map(|p| p.as_str()) == Some("delimited") =>
                {
                    Format::Protobuf
                }
                _ => continue,
            };
            let rank = |f: Format| match f {
                Format::Protobuf => 2,
                Format::OpenMetrics => 1,
                Format::Text => 0,
            };
            let better = match best {
                None => true,
                Some((bq, bf)) => q > bq || (q == bq && rank(format) > rank(bf)),
            };
            if q > 0.0 && better {
                best = Some((q, format));
            }
        }
        best.map_or(Format::Text, |(_, f)| f)
    }
}

/// OpenMetrics text (application/openmetrics-text; version=1.0.0).
pub fn encode_openmetrics(registry: &Registry) -> String {
    let mut out = String::with_capacity(64 * 1024);
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, registry);
    out
}

/// One snapshot's /metrics: the OpenMetrics text the pipeline encoded; the
/// Prometheus 0.0.4 text made from it by the first scrape that asks for
/// it; the protobuf encoded by the first protobuf scrape from the registry
/// (the state as it then is: this snapshot's, or the next one's if it has
/// just been applied). Each is made at most once and then shared by the
/// snapshot's later scrapes (`OnceLock`s): scrapers cost no encoding of
/// their own, however many.
#[derive(Debug, Default)]
pub struct Exposition {
    openmetrics: String,
    text: OnceLock<String>,
    protobuf: OnceLock<Vec<u8>>,
    /// None: no protobuf (the scrapers get OpenMetrics instead).
    registry: Option<Arc<Registry>>,
}

impl Exposition {
    /// An exposition of this OpenMetrics text only.
    pub fn new(openmetrics: String) -> Exposition {
        Exposition {
            openmetrics,
            ..Exposition::default()
        }
    }

    /// The registry's state now, in every format.
    pub fn encode(registry: &Arc<Registry>) -> Exposition {
        Exposition {
            openmetrics: encode_openmetrics(registry),
            registry: Some(registry.clone()),
            ..Exposition::default()
        }
    }

    pub fn openmetrics(&self) -> &str {
        &self.openmetrics
    }

    /// The 0.0.4 text ([`openmetrics_to_text`]), converted once.
    pub fn text(&self) -> &str {
        self.text
            .get_or_init(|| openmetrics_to_text(&self.openmetrics))
    }

    /// The protobuf, encoded once; None without a registry.
    pub fn protobuf(&self) -> Option<&[u8]> {
        let registry = self.registry.as_ref()?;
        let bytes = self.protobuf.get_or_init(|| {
            prometheus_protobuf::encode_to_vec(registry).unwrap_or_else(|e| {
                crate::log::log(format_args!("cannot encode /metrics as protobuf: {e}"));
                Vec::new()
            })
        });
        (!bytes.is_empty()).then_some(bytes.as_slice())
    }

    /// A scrape's body in `format` (OpenMetrics where protobuf is not
    /// available), and the format it is in: this snapshot's families,
    /// then the `process_*` ones read now.
    pub fn body(&self, format: Format) -> (Format, Vec<u8>) {
        match format {
            Format::Protobuf => {
                if let Some(families) = self.protobuf() {
                    let mut out = families.to_vec();
                    match prometheus_protobuf::encode_to_vec(&PROCESS) {
                        Ok(process) => out.extend_from_slice(&process),
                        Err(e) => crate::log::log(format_args!(
                            "cannot encode the process metrics as protobuf: {e}"
                        )),
                    }
                    return (Format::Protobuf, out);
                }
                self.body(Format::OpenMetrics)
            }
            Format::OpenMetrics => {
                let families = self
                    .openmetrics
                    .strip_suffix("# EOF\n")
                    .unwrap_or(&self.openmetrics);
                let mut out = String::with_capacity(families.len() + 2048);
                out.push_str(families);
                out.push_str(&process_openmetrics());
                out.push_str("# EOF\n");
                (Format::OpenMetrics, out.into_bytes())
            }
            Format::Text => {
                let mut out = String::with_capacity(self.text().len() + 2048);
                out.push_str(self.text());
                out.push_str(&openmetrics_to_text(&process_openmetrics()));
                (Format::Text, out.into_bytes())
            }
        }
    }
}

/// The `process_*` families, read now, as OpenMetrics without `# EOF`.
fn process_openmetrics() -> String {
    let mut out = String::with_capacity(2048);
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode_registry(&mut out, &PROCESS);
    out
}

/// The Prometheus text format 0.0.4 from prometheus-client's OpenMetrics
/// output, for clients that do not ask for OpenMetrics (promtool, curl):
/// counters' metadata names gain `_total`, `info` becomes a gauge named
/// `*_info`, `# UNIT` and `# EOF` lines go (0.0.4 has neither).
pub fn openmetrics_to_text(om: &str) -> String {
    let mut out = String::with_capacity(om.len());
    let mut pending_help: Option<(&str, &str)> = None;
    for line in om.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            pending_help = Some((name, help));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, ty) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (name, ty) = match ty {
                "counter" => (format!("{name}_total"), "counter"),
                "info" => (format!("{name}_info"), "gauge"),
                "histogram" | "gauge" | "summary" => (name.to_string(), ty),
                _ => (name.to_string(), "untyped"),
            };
            if let Some((_, help)) = pending_help.take() {
                let _ = writeln!(out, "# HELP {name} {help}");
            }
            let _ = writeln!(out, "# TYPE {name} {ty}");
            continue;
        }
        if line.contains("_created") {
            if let Some(first) = line.split(['{', ' ']).next() {
                if first.ends_with("_created") {
                    continue;
                }
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}
