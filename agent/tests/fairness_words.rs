//! The alerts' and dashboards' defaults (dashboards/mixin/config.libsonnet)
//! speak the fairness vocabulary of `present::fairness`: the same numbers
//! for "below half" and "under its share", so an alert fires where the TUI
//! turns red and the dashboards turn green where the TUI stops being yellow.

use nfsdtop_agent::present::fairness::{BELOW_HALF, UNDER_SHARE};

fn config_value(key: &str) -> f64 {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../dashboards/mixin/config.libsonnet"
    );
    let text = std::fs::read_to_string(path).expect("the mixin's config");
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with(&format!("{key}:")))
        .unwrap_or_else(|| panic!("{key} in {path}"));
    let value = line[key.len() + 1..].trim().trim_end_matches(',');
    value
        .parse()
        .unwrap_or_else(|e| panic!("{key}: {value:?}: {e}"))
}

#[test]
fn the_mixin_uses_the_same_thresholds() {
    assert_eq!(config_value("unfairRatio"), BELOW_HALF, "unfairRatio");
    assert_eq!(config_value("ratioFairFrom"), UNDER_SHARE, "ratioFairFrom");
}
