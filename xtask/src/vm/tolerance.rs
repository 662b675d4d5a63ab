//! How far nfsdtop's derived numbers may be from the same numbers taken
//! from ftrace's records of the same load, written once for every check
//! that compares them (counts are compared exactly, elsewhere).

/// Entitled dispatches, against the definition applied to ftrace's
/// records: 1% and 2 dispatches. The two copies of a racily read enqueue
/// `flags` word can differ (BPF's and ftrace's), so a few enqueue records
/// may be judged apart.
pub fn entitled_slack(truth: f64) -> f64 {
    truth * 0.01 + 2.0
}

/// Execution seconds: a tenth of ftrace's sum plus 30 µs a request. Each
/// handler of svc_stats_latency reads the clock itself (ftrace's, the
/// kernel's record for a classic program, or nfsdtop's raw program), one
/// after the other: 2-14 µs a request apart on bookworm, 40-70 µs on
/// trixie under TCG on a 2-core host (the most on the classic instance).
/// The check is for wrong fields, units or lost requests.
pub const EXEC_TOLERANCE: f64 = 0.1;
pub const EXEC_SLACK_PER_REQUEST_S: f64 = 30e-6;

pub fn exec_slack_s(truth_s: f64, requests: u64) -> f64 {
    EXEC_TOLERANCE * truth_s + EXEC_SLACK_PER_REQUEST_S * requests as f64
}
