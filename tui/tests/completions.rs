//! `nfsdtop completions SHELL`: the scripts complete enum values, not file
//! names, where an option takes one of a few words.

use std::process::Command;

fn nfsdtop(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
        .args(args)
        .output()
        .expect("run nfsdtop");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// The line after `OPTION)` in the bash script's block for `cmd` (clap's
/// layout: one `case` arm per command, then one per option).
fn bash_reply(script: &str, cmd: &str, option: &str) -> String {
    let start = script
        .find(&format!("\n        {cmd})\n"))
        .unwrap_or_else(|| panic!("no block for {cmd}"));
    let block = &script[start + 1..];
    // The block ends where the next command's arm starts.
    let end = block[1..]
        .find("\n        nfsdtop")
        .map_or(block.len(), |e| e + 1);
    let block = &block[..end];
    let at = block
        .find(&format!("{option})\n"))
        .unwrap_or_else(|| panic!("{cmd}: no case for {option}"));
    block[at..]
        .lines()
        .nth(1)
        .unwrap_or_default()
        .trim()
        .to_string()
}

#[test]
fn bash_completes_the_policy_values() {
    let s = nfsdtop(&["completions", "bash"]);
    let want = r#"COMPREPLY=($(compgen -W "flat rr-peer rr-class sparse-flow" -- "${cur}"))"#;
    for (cmd, option) in [
        ("nfsdtop", "--policy"),
        ("nfsdtop", "--whatif"),
        ("nfsdtop__subcmd__record", "--policy"),
    ] {
        assert_eq!(bash_reply(&s, cmd, option), want, "{cmd} {option}");
    }
}

#[test]
fn fish_and_help_describe_each_policy() {
    let s = nfsdtop(&["completions", "fish"]);
    assert!(s.contains("-l policy"), "fish: no --policy");
    assert!(s.contains("rr-peer\\t'round-robin across peers'"), "{s}");
    assert!(
        s.contains("sparse-flow\\t'transports enqueued with nothing in flight first"),
        "{s}"
    );
    let help = nfsdtop(&["--help"]);
    // clap aligns the descriptions of the possible values.
    let described = |value: &str, what: &str| {
        help.lines().any(|l| {
            l.trim_start()
                .strip_prefix(&format!("- {value}:"))
                .is_some_and(|rest| rest.trim_start().starts_with(what))
        })
    };
    assert!(
        described("rr-class", "round-robin across classes"),
        "{help}"
    );
    assert!(
        described("sparse-flow", "transports enqueued with nothing in flight"),
        "{help}"
    );
}
