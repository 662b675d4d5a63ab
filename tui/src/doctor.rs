//! `nfsdtop doctor`: what this host supports, as text or JSON (keys in
//! nfsdtop-doctor(1)). It attaches nothing; it does load the BPF programs into the
//! kernel so the verifier's verdict is known even where nfsd is missing.
//! Where nfsdtopd's config file is, it also notes a setup that would send
//! passwords in clear.

use anyhow::Context as _;
use std::net::SocketAddr;
use std::path::Path;

use nfsdtop_agent::model::Schema;
use nfsdtop_agent::source::live::doctor::{diagnose, Diagnosis};
use nfsdtop_agent::source::live::LiveOptions;

use crate::cli::{DoctorArgs, OutputFormat};

/// The exit status when the report was written but the live source cannot
/// start here (0 when it can; 1 when the report cannot be made or written).
pub const NOT_READY: i32 = 3;

/// Write the report; whether the live source can start here.
pub fn run(args: &DoctorArgs) -> anyhow::Result<bool> {
    let opts = LiveOptions {
        tracefs: args.tracefs.clone(),
        ..LiveOptions::default()
    };
    let mut d = diagnose(&opts);
    d.notes.extend(nfsdtopd_note(&args.nfsdtopd_config));
    let text = match args.format {
        OutputFormat::Json => {
            serde_json::to_string(&Json {
                schema: Schema::default(),
                diagnosis: &d,
            })? + "\n"
        }
        OutputFormat::Text => text(&d),
        OutputFormat::Csv => anyhow::bail!("doctor prints text or json, not csv"),
    };
    // A closed pipe (`| head`) ends quietly in `main`; any other failure
    // (a full disk, /dev/full) is an error: the report was not written.
    crate::out::stdout(text.as_bytes()).context("cannot write the report to stdout")?;
    Ok(d.ready())
}

/// doctor's JSON: the schema (docs/json.md), then the diagnosis's keys.
#[derive(serde::Serialize)]
struct Json<'a> {
    schema: Schema,
    #[serde(flatten)]
    diagnosis: &'a Diagnosis,
}

/// The warning nfsdtopd itself prints at start-up, for its config file:
/// basic auth users on a non-loopback address without TLS. A file that
/// does not parse is left to nfsdtopd, which reports it with its line.
fn nfsdtopd_note(path: &Path) -> Option<String> {
    let v: toml::Table = std::fs::read_to_string(path).ok()?.parse().ok()?;
    let users = v
        .get("basic_auth_users")
        .and_then(|u| u.as_table())
        .is_some_and(|t| !t.is_empty());
    let listen = v
        .get("listen")
        .and_then(|l| l.as_str())
        .unwrap_or("127.0.0.1:9847");
    let loopback = match listen.parse::<SocketAddr>() {
        Ok(a) => a.ip().is_loopback(),
        Err(_) => listen.starts_with("localhost:"),
    };
    (users && !loopback && !v.contains_key("tls_server_config")).then(|| {
        format!(
            "{}: basic_auth_users without [tls_server_config] on {listen}: nfsdtopd's \
passwords cross the network in clear",
            path.display()
        )
    })
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

pub fn text(d: &Diagnosis) -> String {
    let mut s = String::new();
    let mut line = |k: &str, v: String| s.push_str(&format!("  {k:<22} {v}\n"));
    line("kernel", d.kernel.clone());
    line(
        "tracefs",
        match &d.tracefs_path {
            Some(p) => format!("yes ({})", p.display()),
            None => "no (not mounted)".into(),
        },
    );
    line("sunrpc loaded", yes_no(d.sunrpc_loaded).into());
    line("nfsd loaded", yes_no(d.nfsd_loaded).into());
    line(
        "generation",
        d.generation.clone().unwrap_or_else(|| "-".into()),
    );
    line(
        "wait source",
        d.wait_source.clone().unwrap_or_else(|| "-".into()),
    );
    line("kernel classes", yes_no(d.kernel_class).into());
    // Which events can go on raw tracepoints is known only once nfsd's
    // sunrpc events exist; where none can, preemption does not matter.
    let events_known = d.events.values().any(|e| e.present);
    let (raw, preemption) = if !d.raw_tracepoints.is_empty() {
        (
            d.raw_tracepoints.join(", "),
            d.tracepoint_preemption.clone(),
        )
    } else if events_known {
        (
            "none possible here: every event on a classic tracepoint (see the notes)".into(),
            "does not matter here: no raw tracepoints".into(),
        )
    } else {
        (
            "not known until nfsd's sunrpc events exist".into(),
            d.tracepoint_preemption.clone(),
        )
    };
    line("raw tracepoints", raw);
    line("tracepoint preemption", preemption);
    for (name, ev) in &d.events {
        let v = if ev.present {
            format!("present: {}", ev.fields.join(", "))
        } else {
            "missing".into()
        };
        line(name, v);
    }
    line(
        "BPF object",
        if d.bpf_object {
            "built in".into()
        } else {
            "missing from this build (run scripts/setup.sh and rebuild)".into()
        },
    );
    line(
        "BPF programs",
        if d.bpf_programs_verified {
            format!(
                "{} accepted by the kernel's verifier (loaded, not attached): {}",
                d.bpf_programs.len(),
                d.bpf_programs.join(", ")
            )
        } else {
            format!(
                "not verified: {}",
                d.bpf_error.clone().unwrap_or_else(|| "unknown".into())
            )
        },
    );
    let c = &d.capabilities;
    line(
        "privileges",
        format!(
            "{} (CAP_BPF {}, CAP_PERFMON {}, CAP_SYS_ADMIN {})",
            if d.privileges_ok {
                "ok"
            } else {
                "insufficient"
            },
            yes_no(c.cap_bpf),
            yes_no(c.cap_perfmon),
            yes_no(c.cap_sys_admin)
        ),
    );
    let mut out = String::from("nfsdtop doctor\n");
    out.push_str(&s);
    for n in &d.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    if d.ready() {
        out.push_str("verdict: ready: `nfsdtop` will watch this host's nfsd\n");
    } else {
        for p in &d.problems {
            out.push_str(&format!("problem: {p}\n"));
        }
        out.push_str(
            "verdict: the live source cannot start here yet (see the problems above); \
             `nfsdtop --demo` works anywhere\n",
        );
    }
    out
}
