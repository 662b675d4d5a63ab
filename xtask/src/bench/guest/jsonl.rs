//! What the bench reads back from an nfsdtop run in the guest: the last
//! line of its batch JSON, and whether it names any procedure.

use std::fs;
use std::path::Path;

use anyhow::Context;

/// The last non-empty line of an nfsdtop run's batch JSON, parsed.
pub(in crate::bench) fn last_json_line(jsonl: &Path) -> anyhow::Result<serde_json::Value> {
    let text = fs::read_to_string(jsonl).with_context(|| format!("reading {}", jsonl.display()))?;
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .with_context(|| format!("{} is empty", jsonl.display()))?;
    serde_json::from_str(last).with_context(|| format!("the last line of {}", jsonl.display()))
}

/// Whether the last JSON line of an nfsdtop run names any procedure for
/// any entity (docs/json.md).
pub(in crate::bench) fn procedures_named(jsonl: &Path) -> anyhow::Result<bool> {
    let v = last_json_line(jsonl)?;
    Ok(v["entities"].as_array().is_some_and(|entities| {
        entities
            .iter()
            .any(|e| e["procedures"].as_object().is_some_and(|m| !m.is_empty()))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check that the noworkload stage read no procedure looks at the
    /// last line only, and at every entity.
    #[test]
    fn procedures_named_reads_the_last_line() {
        let dir = std::env::temp_dir().join(format!("nfsdtop-bench-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let f = dir.join("run.jsonl");
        let none = r#"{"entities":[{"name":"a","procedures":{}},{"name":"b"}]}"#;
        let some = r#"{"entities":[{"name":"a","procedures":{}},{"name":"b","procedures":{"READ":{"requests":1}}}]}"#;
        for (text, want) in [
            (format!("{some}\n{none}\n"), false),
            (format!("{none}\n{some}\n\n"), true),
        ] {
            fs::write(&f, text).unwrap();
            assert_eq!(procedures_named(&f).unwrap(), want);
        }
        fs::write(&f, "").unwrap();
        assert!(procedures_named(&f).is_err(), "an empty run says so");
        fs::remove_dir_all(&dir).unwrap();
    }
}
