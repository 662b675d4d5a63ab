//! `--no-vm` over an earlier output: the QEMU part (A/B) is kept from the
//! file being replaced, marked with the run that measured it, so a host
//! run does not throw away an hour of guest numbers.

const VM_HEAD: &str = "## A/B.";
const NEXT_HEAD: &str = "## C.";
const KEPT: &str = "Kept from an earlier run";

/// A cell of the header's run table (`| name | value |`).
fn header_cell<'a>(doc: &'a str, name: &str) -> Option<&'a str> {
    doc.lines()
        .find_map(|l| l.strip_prefix(&format!("| {name} | "))?.strip_suffix(" |"))
}

/// The A/B part of `old` (a BENCHMARKS.md), marked as kept, or None where
/// it has none that was measured.
pub fn vm_part(old: &str) -> Option<String> {
    let start = old.find(VM_HEAD)?;
    let body_at = start + old[start..].find('\n')? + 1;
    let end = body_at + old[body_at..].find(NEXT_HEAD)?;
    let body = old[body_at..end].trim_start_matches('\n');
    if body.is_empty() || body.starts_with("Skipped") {
        return None;
    }
    if body.starts_with(KEPT) {
        return Some(body.to_string());
    }
    let cell = |n| header_cell(old, n).unwrap_or("?");
    Some(format!(
        "{KEPT} (`--no-vm` skipped this part): {}, commit {}, on {}; the \
         run table above is this run's.\n\n{body}",
        cell("date (UTC)"),
        cell("commit"),
        cell("CPU"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = "# nfsdtop benchmarks\n\n| run | |\n|---|---|\n\
        | date (UTC) | 2026-12-04 21:45 |\n| commit | 45b2915 |\n| CPU | 2 × Xeon |\n\n\
        ## A/B. Cost on a real nfsd\n\nround table\n\n## C. Aggregator\n\nnew\n";

    #[test]
    fn keeps_the_measured_part_with_its_run() {
        let kept = vm_part(OLD).expect("kept");
        assert!(kept.starts_with(KEPT), "{kept}");
        assert!(kept.contains("2026-12-04 21:45, commit 45b2915, on 2 × Xeon"));
        assert!(kept.ends_with("round table\n\n"), "{kept:?}");
        // Kept again by a second --no-vm run: marked once, same run named.
        let again = OLD.replace("round table\n", &kept);
        let twice = vm_part(&again).expect("kept again");
        assert_eq!(twice.matches(KEPT).count(), 1);
        assert!(twice.contains("commit 45b2915"));
    }

    #[test]
    fn a_skipped_or_missing_part_is_not_kept() {
        assert!(vm_part("").is_none());
        assert!(vm_part(&OLD.replace("round table", "Skipped (`--no-vm`).")).is_none());
    }
}
