//! `nfsdtop whatif FILE`: what share and what waits each client of a
//! recorded server would get under another dispatch policy.
//!
//! The recording's loaded part is found first ([`load`]); the aggregator
//! measures that part (the first column) while [`fit`] fits a closed-loop
//! model of every transport (bursts, think times, service times). The
//! model then runs in the demo simulator ([`run`]) under the recording's
//! own policy — the fit check: it must reproduce what was measured — and
//! under each policy asked for; the aggregator measures each run the way
//! it measured the recording.
//! [`report`] prints the result as text or JSON. The book's What if
//! chapter (docs/book/src/whatif.md) states the model and its limits.

pub mod bursts;
pub mod calibrate;
pub mod fit;
pub mod load;
pub mod report;
pub mod reservoir;
mod rows;
pub mod run;

use std::path::Path;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::aggregate::{Aggregator, Limits};
use crate::enrich::classify::ClassMap;
use crate::model::{EntityStats, Snapshot, SourceKind};
use crate::record::Reader;
use crate::source::demo::Policy;

/// Points of share by which the model under the recording's own policy
/// may miss a client before its predictions are flagged as untrustworthy.
pub const FIT_TOLERANCE_POINTS: f64 = 3.0;
/// How far a backlogged client's fairness ratio under the model may be
/// from the measured one (this much plus [`FIT_RATIO_RELATIVE`] of it)
/// before its predictions are flagged: calibration aims at shares, not
/// at ratios, so a model that reaches the shares for the wrong reason (a
/// server that already dispatched round-robin, taken for flat) shows here.
pub const FIT_RATIO_ABSOLUTE: f64 = 0.1;
pub const FIT_RATIO_RELATIVE: f64 = 0.2;
/// How far the model's total dispatch rate may be from the recording's
/// (a fraction) before every prediction is flagged: calibration does not
/// aim at it, and a thread count or service time the model gets wrong
/// shows here.
pub const FIT_RATE_TOLERANCE: f64 = 0.25;
/// Most simulated time per policy: longer recordings are summarised by
/// their fitted distributions, not replayed in full.
pub const MAX_HORIZON_NS: u64 = 120_000_000_000;
/// Least simulated time per policy, however short the recording: a
/// simulation as short as a 10 s recording moves a client's share by
/// points from one seed to the next.
pub const MIN_HORIZON_NS: u64 = 60_000_000_000;

#[derive(Clone, Debug)]
pub struct Options {
    pub policies: Vec<Policy>,
    /// Overrides the recorded class map.
    pub class_map: Option<ClassMap>,
    /// Overrides the recorded thread count.
    pub threads: Option<u32>,
    pub seed: u64,
    /// Think times are calibrated while the model misses a client by more
    /// than this (points; [`calibrate::CALIBRATE_ABOVE_POINTS`]): infinite
    /// keeps the model as fitted, below 0 calibrates every round.
    pub calibrate_above_points: f64,
    /// Told each stage as it starts (reading, calibrating, each policy's
    /// simulation): a crafted or large recording takes minutes.
    pub progress: Option<fn(&str)>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            policies: vec![Policy::Flat, Policy::RrPeer, Policy::RrClass],
            class_map: None,
            threads: None,
            seed: 1,
            calibrate_above_points: calibrate::CALIBRATE_ABOVE_POINTS,
            progress: None,
        }
    }
}

/// One column's numbers for one client or class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Numbers {
    /// Fraction of all dispatches (0..1).
    pub share: f64,
    /// Dispatches / fair share while backlogged; `None`: never backlogged.
    pub fairness: Option<f64>,
    pub wait_p50_us: f64,
    pub wait_p99_us: f64,
    pub requests_per_s: f64,
    /// Burst completion (µs), peers only: from an enqueue that finds the
    /// transport with nothing in flight to the next moment it has nothing
    /// in flight or queued ([`bursts`]); `None`: no burst completed, or
    /// not measured exactly (a live recording's measured column).
    #[serde(default)]
    pub burst_p50_us: Option<f64>,
    #[serde(default)]
    pub burst_p99_us: Option<f64>,
    /// Peers only: the share of its enqueues that found nothing in flight.
    #[serde(default)]
    pub depth0_share: Option<f64>,
}

impl Numbers {
    fn of(e: &EntityStats) -> Numbers {
        Numbers {
            share: e.share,
            fairness: e.fairness,
            wait_p50_us: e.wait_p50_us,
            wait_p99_us: e.wait_p99_us,
            requests_per_s: e.dispatch_rate,
            ..Numbers::default()
        }
    }

    fn with_bursts(self, b: Option<&bursts::PeerBursts>) -> Numbers {
        Numbers {
            burst_p50_us: b.and_then(|b| b.completion_us(0.5)),
            burst_p99_us: b.and_then(|b| b.completion_us(0.99)),
            depth0_share: b.and_then(|b| b.depth0_share()),
            ..self
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Predicted {
    pub policy: String,
    #[serde(flatten)]
    pub numbers: Numbers,
}

/// A client (peer) or class, column by column.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub name: String,
    pub class: String,
    pub connections: u64,
    /// What the model made of its transports (peers only), e.g.
    /// "2 backlogged" or "1 closed loop: 4 in flight, think p50 20.0 ms".
    #[serde(default)]
    pub demand: String,
    pub measured: Numbers,
    /// The model under the recording's own policy.
    pub fit: Numbers,
    /// fit.share − measured.share, in points (percent of all dispatches).
    pub fit_error_points: f64,
    /// |fit_error_points| ≤ [`FIT_TOLERANCE_POINTS`].
    pub fit_ok: bool,
    pub predicted: Vec<Predicted>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recording {
    pub file: String,
    pub source_kind: String,
    pub kernel: String,
    pub generation: String,
    pub seconds: f64,
    pub events: u64,
    pub dispatches: u64,
    pub transports: u64,
    /// The policy the recorded server dispatched with.
    pub policy: String,
    pub threads: u32,
    /// "recorded", "--threads", or what was assumed and why.
    pub threads_from: String,
    pub pools: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelSummary {
    pub transports: u64,
    /// Never idle while recorded: modelled as always having work waiting.
    pub backlogged: u64,
    /// Modelled as closed loops: N requests, each followed by the next
    /// after a think time.
    pub closed_loops: u64,
    /// Modelled as bursts separated by think times.
    pub bursty: u64,
    pub simulated_seconds: f64,
    pub warmup_seconds: f64,
    pub seed: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FitCheck {
    pub policy: String,
    pub tolerance_points: f64,
    pub max_error_points: f64,
    /// The client the model misses most.
    pub worst: Option<String>,
    pub ok: bool,
    /// The worst miss of the model as fitted, before its think times were
    /// calibrated ([`calibrate`]); equal to `max_error_points` when
    /// `calibration_rounds` is 0.
    #[serde(default)]
    pub fitted_error_points: f64,
    /// The round of calibration kept (0: none needed, or none helped).
    #[serde(default)]
    pub calibration_rounds: u32,
    /// Rounds of calibration simulated.
    #[serde(default)]
    pub calibration_rounds_run: u32,
    /// The model's total dispatch rate over the recording's.
    #[serde(default)]
    pub rate_ratio: f64,
    /// Why the check failed (`ok` false), in words.
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The JSON's schema (docs/json.md).
    #[serde(default = "crate::model::Schema::before_the_field")]
    pub schema: crate::model::Schema,
    pub recording: Recording,
    pub model: ModelSummary,
    pub fit: FitCheck,
    /// The predicted policies, in the order asked for.
    pub policies: Vec<String>,
    pub peers: Vec<Row>,
    pub classes: Vec<Row>,
    /// What was assumed, and anything that makes the numbers less sure.
    pub notes: Vec<String>,
}

/// Fit the recording at `path` and predict each policy of `opts`.
pub fn run_file(path: &Path, opts: &Options) -> anyhow::Result<Report> {
    let say = |what: &str| {
        if let Some(p) = opts.progress {
            p(what)
        }
    };
    say(&format!("reading and fitting {}", path.display()));
    let mut reader =
        Reader::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let header = reader.header().clone();
    let mut notes = Vec::new();
    let classmap = match &opts.class_map {
        Some(m) => m.clone(),
        None => header.class_map(&format!("class map recorded in {}", path.display()))?,
    };
    // The live source settles execution times in batches (what the kernel
    // added up, every 100 ms): there, completions are estimated.
    if classmap.is_empty() && opts.policies.contains(&Policy::RrClass) {
        notes.push(
            "no class map (none recorded, no --class-map): rr-class puts each peer in a \
             class of its own, as rr-peer does"
                .into(),
        );
    }
    let mut fitter = if header.source_kind == SourceKind::Live {
        notes.push(
            "execution times of a live recording arrive in batches: each request is taken \
             to complete its transport's mean service time after its dispatch, and the \
             measured column gives no burst completion (requests in flight are not known \
             exactly)"
                .into(),
        );
        fit::Fitter::with_estimated_completions()
    } else {
        fit::Fitter::new()
    }
    .with_nfsd_ports(header.nfsd.ports);
    let window = load::Window::of(path)?;
    let mut agg = Aggregator::new(classmap.clone(), Limits::default());
    if let Some(p) = &header.nfsd.ports {
        agg.add_nfsd_ports(p);
    }
    // A live source's execution times come in batches: in flight, hence
    // bursts, are not known exactly there.
    let exact_bursts = header.source_kind != SourceKind::Live;
    let mut measured_bursts = bursts::Bursts::default();
    let start_ns = header.start_mono_ns.max(window.from_ns);
    agg.start_clock(start_ns);
    let (mut first_ts, mut last_ts) = (None::<u64>, start_ns);
    let damage = window.each(&mut reader, |events| {
        fitter.ingest_all(events);
        agg.ingest_all(events);
        if exact_bursts {
            measured_bursts.ingest_all(events);
        }
        if first_ts.is_none() {
            first_ts = events.first().map(|e| e.ts_ns);
        }
        last_ts = events.iter().map(|e| e.ts_ns).fold(last_ts, u64::max);
    });
    if let Some(d) = damage {
        notes.push(format!(
            "{} is {d}: modelled from the {} events before it",
            path.display(),
            d.events_before
        ));
    }
    if window.lead_ns > 0 || window.tail_ns > 0 {
        notes.push(format!(
            "the first {:.1} s and the last {:.1} s of the recording carried under a quarter of \
             its busy rate (the load had not begun, or had ended): the measured column and the \
             model leave them out",
            window.lead_ns as f64 / 1e9,
            window.tail_ns as f64 / 1e9
        ));
    }
    let span_ns = last_ts.saturating_sub(first_ts.unwrap_or(last_ts).min(start_ns));
    let info = crate::model::SourceInfo {
        kind: header.source_kind,
        kernel: header.kernel.clone(),
        generation: header.generation.clone(),
        wait_source: header.wait_source,
        detail: header.source_detail.clone(),
        host: header.host.clone(),
    };
    let measured = agg.snapshot(last_ts, span_ns as f64 / 1e9, &info);
    let mut fit = fitter.finish();
    if fit.dispatches == 0 {
        anyhow::bail!(
            "{} holds no dispatches (no svc_xprt_dequeue events): there is nothing to model; \
             record while clients use the server",
            path.display()
        );
    }
    if span_ns < 1_000_000_000 {
        anyhow::bail!(
            "{} covers only {:.2} s: too short to fit a model; record at least a few seconds \
             (better a minute) of traffic",
            path.display(),
            span_ns as f64 / 1e9
        );
    }
    if fit.executions == 0 {
        anyhow::bail!(
            "{} holds no execution times (svc_stats_latency events): the model needs the \
             service times; record with a source that has them",
            path.display()
        );
    }
    if fit.events_lost > 0 {
        notes.push(format!(
            "the recording lost {} events (ring buffer full): bursts and shares are fitted \
             from what arrived",
            fit.events_lost
        ));
    }
    if fit.transports_dropped > 0 {
        notes.push(format!(
            "only the first {} transports are modelled; {} events of later ones were left out",
            fit::MAX_TRANSPORTS,
            fit.transports_dropped
        ));
    }

    let (threads, threads_from) = match (opts.threads, header.nfsd.threads) {
        (Some(n), _) => (n, "--threads".to_string()),
        (None, Some(n)) if n > 0 => (n, "recorded".to_string()),
        _ if fit.peak_in_service > 0 => {
            let n = fit.peak_in_service;
            // A header of 0 threads says something: nfsd was stopped (or
            // being restarted) when the recording began.
            let said = if header.nfsd.threads == Some(0) {
                "the recording says nfsd had 0 threads when it began (nfsd stopped or \
                 restarting then)"
            } else {
                "the recording does not say (written before nfsdtop recorded nfsd's threads)"
            };
            let why = format!(
                "assumed {n}: {said}; {n} is the most requests seen in service at once; \
                 pass --threads N if the server had more"
            );
            notes.push(format!("threads {why}"));
            (n, why)
        }
        _ => anyhow::bail!(
            "{} {} and shows no request in service: pass --threads N",
            path.display(),
            if header.nfsd.threads == Some(0) {
                "says nfsd had 0 threads"
            } else {
                "does not record nfsd's thread count"
            }
        ),
    };
    if threads == 0 || threads > 65_536 {
        anyhow::bail!(
            "{threads} threads ({threads_from}) is out of range for the model: \
             pass --threads N with N from 1 to 65536"
        );
    }

    if let Some(k) = fit.occupancy_ratio(threads) {
        let exec_ms = fit.mean_service_ns / 1e6;
        if fit.completions_estimated {
            // Again, with each request completing a thread's time after
            // its dispatch: think times and loops start from there.
            let mut again = fit::Fitter::with_estimated_completions_scaled(k)
                .with_nfsd_ports(header.nfsd.ports);
            let mut reader =
                Reader::open(path).with_context(|| format!("cannot read {}", path.display()))?;
            let _ = window.each(&mut reader, |events| again.ingest_all(events));
            fit = again.finish();
        } else {
            fit.scale_to_occupancy(threads);
        }
        notes.push(format!(
            "a thread spent {:.2} ms a request (while requests waited, and no more than the whole \
             recording allows), {k:.1} times the recorded execution time ({exec_ms:.2} ms; nfsd's \
             execute leaves out receiving and replying): service times scaled to it",
            k * exec_ms,
        ));
    }
    match header.nfsd.pools {
        Some(p) if p > 1 => notes.push(format!(
            "the server had {p} thread pools: modelled as one pool of {threads} threads \
             (the kernel keeps a ready queue per pool)"
        )),
        None => notes
            .push("the recording does not say how many thread pools nfsd had: assumed one".into()),
        _ => {}
    }
    let recorded_policy = recorded_policy(&header.source_kind, &header.source_detail, &mut notes);

    let (horizon_ns, short) = run::horizon(span_ns, fit.dispatches);
    if let Some(note) = short {
        notes.push(note);
    }
    let warmup_ns = (horizon_ns / 10).clamp(500_000_000, 10_000_000_000);
    let params = |policy| run::RunParams {
        threads,
        policy,
        horizon_ns,
        warmup_ns,
        seed: opts.seed,
        max_dispatches: run::MAX_SIM_DISPATCHES,
        nfsd_ports: header.nfsd.ports,
    };
    say(&format!(
        "{} transports fitted; calibrating (up to {} simulations of {:.0} s)",
        fit.transports.len(),
        calibrate::MAX_ROUNDS,
        horizon_ns as f64 / 1e9
    ));
    let (fitted, calibration) = calibrate::calibrate(
        &mut fit,
        &measured,
        &classmap,
        &params(recorded_policy),
        opts.calibrate_above_points,
    );
    if calibration.rounds > 0 {
        notes.push(format!(
            "think times calibrated: as fitted, the model under {recorded_policy} missed a \
             client's share by {:.1} points; scaling each client's think times by a search on \
             its simulated over its measured share ({} rounds run, round {} kept; each peer's \
             scale in the model below) brought that to the fit column's",
            calibration.fitted_miss_points, calibration.rounds_run, calibration.rounds,
        ));
    }
    let clients = run::clients(&fit);
    let mut runs: Vec<(Policy, run::Run)> = Vec::new();
    for (i, &p) in opts.policies.iter().enumerate() {
        if runs.iter().any(|(q, _)| *q == p) {
            continue;
        }
        say(&format!(
            "simulating {p} ({} of {})",
            i + 1,
            opts.policies.len()
        ));
        let snap = if p == recorded_policy {
            fitted.clone()
        } else {
            run::simulate_run(clients.clone(), &classmap, &params(p))
        };
        runs.push((p, snap));
    }

    let demands = rows::demand_by_peer(&fit, &calibration.scales);
    let measured_bursts = exact_bursts.then_some(&measured_bursts);
    let peers = rows::per_entity(
        true,
        &measured.peers,
        measured_bursts,
        &fitted,
        &runs,
        |s| &s.peers,
        |e| {
            demands
                .get(&(e.netns, e.name.clone()))
                .cloned()
                .unwrap_or_default()
        },
    );
    let classes = rows::per_entity(
        false,
        &measured.classes,
        None,
        &fitted,
        &runs,
        |s| &s.classes,
        |_| String::new(),
    );
    let rate = |s: &Snapshot| s.totals.dispatches as f64 / s.interval_s.max(1e-9);
    let rate_ratio = rate(&fitted.snapshot) / rate(&measured).max(1e-9);
    let rate_ok = (rate_ratio - 1.0).abs() <= FIT_RATE_TOLERANCE;
    let mut peers = peers;
    if !rate_ok {
        for r in &mut peers {
            r.fit_ok = false;
        }
    }
    let worst = peers.iter().max_by(|a, b| {
        a.fit_error_points
            .abs()
            .total_cmp(&b.fit_error_points.abs())
    });
    let max_error_points = worst.map_or(0.0, |r| r.fit_error_points.abs());
    let worst_name = worst.map(|r| r.name.clone());
    let reason = rows::fit_failure(&peers, worst, rate_ratio, rate_ok);
    let count = |f: fn(&fit::FittedDemand) -> bool| {
        fit.transports.iter().filter(|t| f(&t.demand)).count() as u64
    };
    let backlogged = count(|d| *d == fit::FittedDemand::Backlogged);
    let closed_loops = count(|d| matches!(d, fit::FittedDemand::Closed { .. }));
    Ok(Report {
        schema: Default::default(),
        recording: Recording {
            file: path.display().to_string(),
            source_kind: header.source_kind.as_str().into(),
            kernel: header.kernel.clone(),
            generation: header.generation.clone(),
            seconds: span_ns as f64 / 1e9,
            events: reader.events(),
            dispatches: fit.dispatches,
            transports: fit.transports.len() as u64,
            policy: recorded_policy.to_string(),
            threads,
            threads_from,
            pools: header.nfsd.pools,
        },
        model: ModelSummary {
            transports: fit.transports.len() as u64,
            backlogged,
            closed_loops,
            bursty: fit.transports.len() as u64 - backlogged - closed_loops,
            // A run stops early at the simulator's dispatch budget.
            simulated_seconds: runs
                .iter()
                .map(|(_, r)| r.snapshot.interval_s)
                .fold(fitted.snapshot.interval_s, f64::min),
            warmup_seconds: warmup_ns as f64 / 1e9,
            seed: opts.seed,
        },
        fit: FitCheck {
            policy: recorded_policy.to_string(),
            tolerance_points: FIT_TOLERANCE_POINTS,
            max_error_points,
            worst: worst_name,
            ok: reason.is_none(),
            fitted_error_points: calibration.fitted_miss_points,
            calibration_rounds: calibration.rounds,
            calibration_rounds_run: calibration.rounds_run,
            rate_ratio,
            reason,
        },
        policies: runs.iter().map(|(p, _)| p.to_string()).collect(),
        peers,
        classes,
        notes,
    })
}

/// The policy the recorded server used: a demo's own (its detail says
/// `policy=`), today's kernel's flat queue for anything else.
fn recorded_policy(kind: &SourceKind, detail: &str, notes: &mut Vec<String>) -> Policy {
    let named = detail
        .split_whitespace()
        .find_map(|w| w.strip_prefix("policy="))
        .and_then(|p| p.parse().ok());
    match (kind, named) {
        (SourceKind::Demo, Some(p)) => p,
        _ => {
            notes.push(
                "recorded under the kernel's flat queue (assumed: a kernel without the \
                 round-robin series); the fit check runs the model under flat"
                    .into(),
            );
            Policy::Flat
        }
    }
}

#[cfg(test)]
mod tests;
