//! The daemon's life: resolve the configuration, open the source (a live
//! nfsd unless told otherwise: never a silent demo), run the pipeline on a
//! thread of its own, publish each snapshot to the metrics state and the
//! HTTP views, reload the class map on SIGHUP, stop on SIGINT/SIGTERM.
//! Every line it logs goes through [`log`], which cannot fail.

use std::process::ExitCode;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Context as _};
use nfsdtop_agent::enrich::redact::Redactor;
use nfsdtop_agent::pipeline::{Control, Flow};
use nfsdtop_agent::session::{NoNfsd, Session, SourceChoice};
use nfsdtop_agent::source::SourceSpec;
use tokio::sync::watch;

use crate::auth::Auth;
use crate::config::{Cli, Config};
use crate::log::log;
use crate::metrics::{self, MetricsState};
use crate::server::{self, AppState};
use crate::snapshot::{Encoder, Published};
use crate::stream::Streams;

pub fn main() -> ExitCode {
    let cli: Cli = nfsdtop_agent::session::args::parse_command_line(|io| {
        log(format_args!("cannot write to stdout: {io}"))
    });
    if let Some(shell) = cli.completions {
        let mut cmd = <Cli as clap::CommandFactory>::command();
        clap_complete::generate(shell, &mut cmd, "nfsdtopd", &mut std::io::stdout());
        return ExitCode::SUCCESS;
    }
    if let Some(dir) = &cli.manpage {
        let cmd = <Cli as clap::CommandFactory>::command();
        let path = dir.join("nfsdtopd.8");
        let written = std::fs::create_dir_all(dir)
            .and_then(|_| std::fs::File::create(&path))
            .and_then(|mut f| crate::manual::render(cmd, &mut f));
        if let Err(e) = written {
            log(format_args!("cannot write {}: {e}", path.display()));
            return ExitCode::FAILURE;
        }
        return ExitCode::SUCCESS;
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            log(format_args!("{e:#}"));
            ExitCode::FAILURE
        }
    }
}

/// Open the source the configuration names: never the demo in place of
/// a missing nfsd.
pub fn open_source(cfg: &Config) -> anyhow::Result<Session> {
    let session = match Session::open(&cfg.session, NoNfsd::Fail) {
        Ok(s) => s,
        Err(e) if cfg.session.source == SourceChoice::Live => {
            return Err(anyhow!(
                "{e:#}\n\
nfsdtopd never falls back to the demo server on its own: pass --demo [SCENARIO] to serve the \
simulated one, or --replay FILE for a recording"
            ))
        }
        Err(e) => return Err(e),
    };
    // E.g. a replay's gaps or damage: said once, at the start.
    if let Some(n) = session.notice() {
        crate::log::log(n);
    }
    Ok(session)
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let cfg = Config::resolve(&cli)?;
    let mut session = open_source(&cfg)?;
    let spec = session.spec().clone();
    if matches!(spec, SourceSpec::Live(_)) {
        // Attached: give up what attaching needed, before any other thread
        // (pipeline, HTTP) starts and inherits it.
        match crate::privileges::drop_after_attach() {
            Ok(Some(kept)) => log(format_args!(
                "attached; dropped capabilities (kept {})",
                if kept.is_empty() {
                    "none".to_string()
                } else {
                    kept.join(", ")
                }
            )),
            Ok(None) => {}
            Err(e) => log(format_args!("warning: cannot drop capabilities: {e}")),
        }
    }
    session.load_class_map()?;
    let auth = Arc::new(Auth::with_limits(cfg.users.clone(), cfg.http.failures));
    let web = Arc::new(crate::web_config::source(&cfg, auth.clone())?);
    for w in crate::web_config::start_warnings(&cfg, &web.last_good()) {
        log(w);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;

    let metrics_state = Arc::new(Mutex::new(MetricsState::with_unfair_below(
        cfg.top_k,
        cfg.top_k_classes,
        cfg.unfair_ratio,
    )));
    let unfair = crate::unfair::UnfairSource::new(metrics_state.clone(), cfg.unfair_ratio);
    let registry = Arc::new(metrics::registry(metrics_state.clone()));
    let (metrics_tx, metrics_rx) = watch::channel(Arc::new(metrics::Exposition::encode(&registry)));
    let (tx, rx) = watch::channel::<Option<Arc<Published>>>(None);
    let tx = Arc::new(tx);
    let streams = Arc::new(Streams::new(cfg.max_streams, cfg.redact.is_some()));
    let (ctl_tx, ctl_rx) = mpsc::channel::<Control>();

    // One redactor for the outputs and the log lines: the same pseudonyms.
    let redactor = cfg.redact.as_ref().map(|key| match key {
        Some(key) => Redactor::with_key(key),
        None => Redactor::random(),
    });
    let stopping = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let pipeline_thread = {
        let tx = tx.clone();
        let stopping = stopping.clone();
        let state = metrics_state.clone();
        let streams = streams.clone();
        session.with_redactor(redactor.clone()).spawn(
            "nfsdtopd-pipeline",
            ctl_rx,
            move |snap| {
                state
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .update(&snap);
                // Encode here, once per snapshot: scrapes just copy.
                metrics_tx.send_replace(Arc::new(metrics::Exposition::encode(&registry)));
                let published = Arc::new(Published::new(snap));
                let seq = published.seq;
                tx.send_replace(Some(published));
                streams.published(seq);
                Flow::Continue
            },
            move |res| match res {
                Ok(()) if stopping.load(std::sync::atomic::Ordering::SeqCst) => {}
                Ok(()) => log("the event source has ended; serving the last snapshot"),
                Err(e) => log(format_args!(
                    "the pipeline stopped: {e}; serving the last snapshot"
                )),
            },
        )?
    };

    let (stop_tx, stop_rx) = watch::channel(false);
    let app = AppState {
        latest: rx,
        metrics: metrics_rx,
        auth,
        interval: cfg.session.interval,
        shutdown: stop_rx,
        streams,
        encoder: Arc::new(Encoder::new(cfg.http.response_memory)),
    };
    // /api/v1/unfair reads the pipeline's unfair list from an extension.
    let router = server::router(app).layer(axum::Extension(unfair));
    let result = rt.block_on(serve(
        cfg,
        spec,
        router,
        web,
        redactor,
        ctl_tx.clone(),
        stop_tx,
    ));
    // Without waiting for encodings still running on the blocking threads
    // (seconds for a large snapshot): the clients they were for are gone,
    // and SIGTERM must end the daemon promptly.
    rt.shutdown_background();
    stopping.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = ctl_tx.send(Control::Stop);
    drop(ctl_tx);
    let _ = pipeline_thread.join();
    drop(tx);
    result
}

/// Why `addr` cannot be listened on, in one line that says what to do:
/// the usual causes get words of their own rather than the OS's bare
/// "Address already in use (os error 98)".
fn listen_error(addr: std::net::SocketAddr, e: &std::io::Error) -> anyhow::Error {
    use std::io::ErrorKind;
    let what = match e.kind() {
        ErrorKind::AddrInUse => format!(
            "port {} is already in use (another nfsdtopd?): stop what holds it (`ss -ltnp \
             'sport = :{}'` names it) or choose another address with --web.listen-address (listen = \
             in the config file)",
            addr.port(),
            addr.port()
        ),
        ErrorKind::PermissionDenied => format!(
            "not allowed ({e}): a port below 1024 needs root or CAP_NET_BIND_SERVICE; choose \
             another with --web.listen-address"
        ),
        ErrorKind::AddrNotAvailable => format!(
            "no interface of this host has the address {} ({e}): choose one it has with --web.listen-address",
            addr.ip()
        ),
        _ => e.to_string(),
    };
    anyhow::anyhow!("cannot listen on {addr}: {what}")
}

async fn serve(
    cfg: Config,
    spec: SourceSpec,
    router: axum::Router,
    web: Arc<crate::web_config::watch::WebSource>,
    redactor: Option<Redactor>,
    ctl: mpsc::Sender<Control>,
    stop: watch::Sender<bool>,
) -> anyhow::Result<()> {
    let listener = crate::listener::bind(cfg.listen).map_err(|e| listen_error(cfg.listen, &e))?;
    let local = listener.local_addr()?;
    let scheme = if web.last_good().tls.is_some() {
        "https"
    } else {
        "http"
    };
    log(format_args!("listening on {scheme}://{local}"));

    tokio::spawn(reload_on_sighup(cfg.clone(), spec, ctl));

    let shutdown = async move {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = match signal(SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => return std::future::pending().await,
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        log("stopping");
        // End the open streams, so the graceful shutdown can finish.
        stop.send_replace(true);
    };
    crate::listener::serve(listener, router, web, cfg.http.clone(), redactor, shutdown).await?;
    Ok(())
}

/// SIGHUP: read the class map again and hand it to the pipeline, which
/// keeps every count (peers keep their totals; their dispatches count for
/// their new class from then on). A bad file is reported and ignored. The
/// map is read and parsed on a blocking thread: however big it is, the
/// async workers, and so /metrics, keep answering meanwhile. Whatever
/// happens to one reload, the loop goes on to the next SIGHUP.
async fn reload_on_sighup(cfg: Config, spec: SourceSpec, ctl: mpsc::Sender<Control>) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        log("cannot handle SIGHUP: class map reloads are off");
        return;
    };
    let cfg = Arc::new(cfg);
    let spec = Arc::new(spec);
    while hup.recv().await.is_some() {
        if cfg.session.class_map.is_none() {
            log("SIGHUP: no class map configured (--class-map), nothing to reload");
            continue;
        }
        let (c, s) = (cfg.clone(), spec.clone());
        match tokio::task::spawn_blocking(move || c.session.load_class_map(&s)).await {
            Ok(Ok(m)) => {
                let n = m.rules().len();
                if ctl.send(Control::SetClassMap(m)).is_err() {
                    log("SIGHUP: the pipeline has stopped; class map not applied");
                } else {
                    log(format_args!("SIGHUP: class map reloaded ({n} rules)"));
                }
            }
            Ok(Err(e)) => log(format_args!("SIGHUP: keeping the current class map: {e:#}")),
            Err(e) => log(format_args!(
                "SIGHUP: keeping the current class map: reading it failed: {e}"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use nfsdtop_agent::source::live::LiveOptions;

    #[test]
    fn ring_size_reaches_the_live_source() {
        let cfg = Config::resolve(&Cli::parse_from(["nfsdtopd", "--ring-size", "64M"])).unwrap();
        match cfg.session.spec() {
            SourceSpec::Live(o) => assert_eq!(o.ring_bytes, 64 << 20),
            other => panic!("not the live source: {other:?}"),
        }
        let cfg = Config::resolve(&Cli::parse_from(["nfsdtopd"])).unwrap();
        match cfg.session.spec() {
            SourceSpec::Live(o) => assert_eq!(o.ring_bytes, LiveOptions::default().ring_bytes),
            other => panic!("not the live source: {other:?}"),
        }
    }
}
