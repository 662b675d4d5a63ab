//! The prose of the generated BENCHMARKS.md, kept out of the code: each
//! part's text is a markdown file in bench/text/, cut into sections by
//! lines `%% NAME`, with `{name}` placeholders for the measured numbers.
//! Filling a section checks that every placeholder got a value and every
//! value a placeholder, so text and code cannot drift apart silently.

use std::fmt::Display;

use anyhow::{anyhow, bail};

pub const HEADER: &str = include_str!("text/header.md");
pub const GUEST: &str = include_str!("text/guest.md");
pub const AGGREGATOR: &str = include_str!("text/aggregator.md");
pub const DAEMON: &str = include_str!("text/daemon.md");
pub const FRAMES: &str = include_str!("text/frames.md");
pub const WHATIF: &str = include_str!("text/whatif.md");

/// Section `name` of `file` with its placeholders filled from `vars`.
pub fn fill(file: &str, name: &str, vars: &[(&str, &dyn Display)]) -> anyhow::Result<String> {
    let mut body = None;
    for part in format!("\n{file}").split("\n%% ").skip(1) {
        let (head, rest) = part.split_once('\n').unwrap_or((part, ""));
        if head.trim() == name {
            // A section ends at the newline before the next `%%` line.
            body = Some(if rest.ends_with('\n') {
                rest.to_string()
            } else {
                format!("{rest}\n")
            });
        }
    }
    let body = body.ok_or_else(|| anyhow!("bench text: no section {name:?}"))?;
    let body = body.as_str();
    let mut out = String::with_capacity(body.len());
    let mut used = vec![false; vars.len()];
    let mut rest = body;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let Some(j) = after.find('}') else {
            bail!("bench text {name:?}: an unclosed {{");
        };
        let key = &after[..j];
        let k = vars
            .iter()
            .position(|(n, _)| *n == key)
            .ok_or_else(|| anyhow!("bench text {name:?}: no value for {{{key}}}"))?;
        used[k] = true;
        out.push_str(&vars[k].1.to_string());
        rest = &after[j + 1..];
    }
    out.push_str(rest);
    if let Some(k) = used.iter().position(|u| !u) {
        bail!("bench text {name:?}: {{{}}} is not in the text", vars[k].0);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_a_section_and_refuses_gaps() {
        let f = "%% a\nx {n} y\n%% b\nz\n";
        assert_eq!(fill(f, "a", &[("n", &3)]).unwrap(), "x 3 y\n");
        assert_eq!(fill(f, "b", &[]).unwrap(), "z\n");
        assert!(fill(f, "a", &[]).is_err(), "a placeholder without a value");
        assert!(
            fill(f, "b", &[("n", &3)]).is_err(),
            "a value without a place"
        );
        assert!(fill(f, "c", &[]).is_err(), "no such section");
    }

    #[test]
    fn every_section_parses() {
        for file in [HEADER, GUEST, AGGREGATOR, DAEMON, FRAMES, WHATIF] {
            assert!(file.starts_with("%% "), "a text file starts with a section");
            for part in format!("\n{file}").split("\n%% ").skip(1) {
                let body = part.split_once('\n').map_or("", |p| p.1);
                assert_eq!(body.matches('{').count(), body.matches('}').count());
            }
        }
    }
}
