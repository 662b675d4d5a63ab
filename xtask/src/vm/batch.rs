//! nfsdtop's batch JSON lines (`nfsdtop -b --format json`) read back as
//! the agent's own typed record (`nfsdtop_agent::present::output::BatchRecord`): a
//! renamed or missing field is an error naming the file and line, never a
//! value read as 0.

use std::fs;
use std::path::Path;

use nfsdtop_agent::present::output::BatchRecord;

pub type Line = BatchRecord<'static>;

/// Every line of `path` (none if the file is missing: the caller reports
/// "no line"); Err with FILE:LINE and the reason at the first line that is
/// not a batch record.
pub fn read(path: &Path) -> Result<Vec<Line>, String> {
    let Ok(text) = fs::read_to_string(path) else {
        return Ok(vec![]);
    };
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| {
                format!(
                    "{}:{}: not nfsdtop's batch record ({e}); fix the reader or the agent's output",
                    path.display(),
                    i + 1
                )
            })
        })
        .collect()
}

/// `source.detail` of the last line of `nfsdtop-RUN.jsonl` ("" if none or
/// unreadable: the run's own checks report why).
pub fn run_detail(results: &Path, run: &str) -> String {
    read(&results.join(format!("nfsdtop-{run}.jsonl")))
        .ok()
        .and_then(|l| l.last().map(|l| l.source.detail.clone()))
        .unwrap_or_default()
}
