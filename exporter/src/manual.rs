//! The parts of nfsdtopd(8) clap cannot derive from the options: the
//! endpoints, the configuration file, signals, files, examples, exit codes
//! (roff, inserted after the generated OPTIONS by `nfsdtopd --manpage`).

use std::io::Write;

use clap::Command;

const NFSDTOPD: &str = r#".SH ENDPOINTS
nfsdtopd serves on 127.0.0.1:9847 unless told otherwise; any other address
needs \fB\-\-expose\fR. Every path answers GET, and needs the basic\-auth
users when the configuration file has some.
.TP
\fB/metrics\fR
OpenMetrics when asked for (Prometheus does), else the Prometheus text format 0.0.4: per class and per peer dispatches, entitled (fair\-share) dispatches, thread time, backlogged time, connections, the queue\-wait histogram (per class), and nfsdtopd's own health. At most \fB\-\-top\-k\fR peers and \fB\-\-top\-k\-classes\fR classes have series of their own, the rest are summed into peer="other" / class="other"; clients below their fair share get series first, so that the alerts see them. \fBnfsdtop_unfair_entities\fR counts every entity below \fB\-\-unfair\-ratio\fR of its fair share, labelled or not.
.TP
\fB/api/v1/snapshot\fR[\fB?group=peer\fR|\fBclass\fR][\fB&top=\fR\fIN\fR]
the latest snapshot as JSON
.TP
\fB/api/v1/stream\fR
server\-sent events, one snapshot each (what \fBnfsdtop \-\-connect\fR reads)
.TP
\fB/api/v1/unfair\fR[\fB?group=peer\fR|\fBclass\fR][\fB&below=\fR\fIR\fR]
every peer and class below \fIR\fR of its fair share (default \fB\-\-unfair\-ratio\fR), worst first, with its series label or null when folded
.TP
\fB/healthz\fR
200 while snapshots keep coming, else 503 and why
.PP
Errors are JSON, {"error": "..."}. Every field and metric is defined in the
project's docs/json.md and docs/metrics.md (installed under
/usr/share/doc/nfsdtop/docs/).
.SH CONFIGURATION FILE
TOML (\fB\-\-config\fR; flags override it). Every long flag above is a key,
its name with _ for \- (ring_size = "64M" is \fB\-\-ring\-size 64M\fR, resolve = true
is \fB\-\-resolve\fR, listen is \fB\-\-web.listen\-address\fR); the old
typed_program and raw_tracepoints (false: \fB\-\-no\-typed\-program\fR,
\fB\-\-classic\-tracepoints\fR) still work, with a warning. The file's own:
redact_key, [source] (kind = "live" | "demo" |
"replay", scenario, policy, path), [tls_server_config] (cert_file, key_file), [http]
and [basic_auth_users] (user = bcrypt hash or "sha256:<hex>"). Relative
paths are relative to the file. Mistakes are reported as
FILE:LINE:COLUMN: reason, and nfsdtopd does not start.
.SH SIGNALS
.TP
SIGHUP
read the class map again and apply it without losing counts (systemctl reload nfsdtopd); a bad file is reported and the old map kept
.TP
SIGTERM, SIGINT
stop: open streams end, the server shuts down gracefully
.SH FILES
.TP
/etc/nfsdtop/nfsdtopd.toml
the configuration the systemd unit passes
.TP
/usr/share/nfsdtop/rules/nfsdtop.rules.yml
Prometheus recording and alert rules (the generator and its thresholds: /usr/share/nfsdtop/tools/generate.py, /usr/share/nfsdtop/rules/)
.TP
/usr/share/nfsdtop/grafana/
the Grafana dashboards, and provisioning examples in grafana/provisioning/
.TP
/usr/share/nfsdtop/prometheus/prometheus.yml
a Prometheus configuration scraping nfsdtopd with those rules
.TP
/usr/share/nfsdtop/runbooks/RUNBOOKS.md
what to do when each alert fires
.SH EXAMPLES
.TP
\fBsystemctl enable \-\-now nfsdtopd\fR
the packaged service: this host's nfsd, /etc/nfsdtop/nfsdtopd.toml
.TP
\fBnfsdtopd \-\-listen 0.0.0.0:9847 \-\-expose \-\-tls\-cert c.pem \-\-tls\-key k.pem\fR
serve other hosts, over TLS
.TP
\fBnfsdtopd \-\-demo seed\-k16 \-\-policy flat\fR
a simulated server whose client 10.0.0.2 gets 22% of its fair share
.TP
\fBcurl \-s http://127.0.0.1:9847/api/v1/unfair?group=class\fR
the classes below their fair share, however many are folded in /metrics
.TP
\fBnfsdtopd \-\-ring\-size 64M\fR
a larger ring buffer for a server whose events are being lost
.SH EXIT STATUS
.TP
0
stopped by SIGTERM or SIGINT
.TP
1
an error, explained on standard error: no nfsd (nfsdtopd never falls back to the demo), missing privileges, a bad configuration file, the address in use
.TP
2
invalid command\-line usage
.SH SEE ALSO
nfsdtop(1), systemd.service(5), prometheus(1)
"#;

/// nfsdtopd(8): clap's sections, then this module's.
pub fn render(page: Command, out: &mut dyn Write) -> std::io::Result<()> {
    let man = clap_mangen::Man::new(page).section("8");
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    out.write_all(NFSDTOPD.as_bytes())?;
    man.render_version_section(out)
}
