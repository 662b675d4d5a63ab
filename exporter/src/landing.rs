//! The paths nfsdtopd serves, said once: the landing page at `/` (plain
//! HTML, no scripts, as other exporters answer there) and the 404's
//! suggestions both read [`PATHS`].

use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};

/// (path a link opens, what it answers). The first column must be a path
/// the router serves.
pub const PATHS: [(&str, &str); 5] = [
    ("/metrics", "Prometheus metrics (OpenMetrics, protobuf with native histograms, or text 0.0.4, as the scraper asks)"),
    ("/api/v1/snapshot", "the latest snapshot as JSON (?group=peer|class, ?top=N)"),
    ("/api/v1/stream", "server-sent events: each new snapshot (what nfsdtop --connect reads)"),
    ("/api/v1/unfair", "every peer and class below its fair share, worst first (?group=, ?below=R)"),
    ("/healthz", "ok while snapshots keep coming"),
];

/// Where the documentation is on a host with the nfsdtop package.
const DOCS: [(&str, &str); 3] = [
    ("man nfsdtopd", "the daemon's options"),
    (
        "/usr/share/doc/nfsdtop/docs/metrics.md",
        "this HTTP API and every metric",
    ),
    (
        "/usr/share/nfsdtop/runbooks/RUNBOOKS.md",
        "what to do when an alert fires",
    ),
];

/// The paths as a sentence, for the 404's message.
pub fn path_list() -> String {
    let paths: Vec<&str> = PATHS.iter().map(|p| p.0).collect();
    match paths.split_last() {
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

fn page() -> String {
    let mut html = String::from(concat!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\">",
        "<title>nfsdtopd</title></head>\n<body>\n<h1>nfsdtopd</h1>\n",
        "<p>Who gets this NFS server's threads, who waits, and whether that is fair. Version ",
        env!("CARGO_PKG_VERSION"),
        ".</p>\n<ul>\n"
    ));
    for (path, what) in PATHS {
        html.push_str(&format!("<li><a href=\"{path}\">{path}</a>: {what}</li>\n"));
    }
    html.push_str("</ul>\n<p>Documentation:</p>\n<ul>\n");
    for (place, what) in DOCS {
        html.push_str(&format!("<li><code>{place}</code>: {what}</li>\n"));
    }
    html.push_str("</ul>\n</body>\n</html>\n");
    html
}

pub async fn handler() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        )],
        page(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_links_every_path_and_has_no_script() {
        let html = page();
        for (path, _) in PATHS {
            assert!(html.contains(&format!("<a href=\"{path}\">")), "{path}");
        }
        assert!(html.contains("metrics.md"));
        assert!(!html.to_ascii_lowercase().contains("<script"));
        assert_eq!(
            path_list(),
            "/metrics, /api/v1/snapshot, /api/v1/stream, /api/v1/unfair or /healthz"
        );
    }
}
