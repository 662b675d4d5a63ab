//! The documentation against the binaries: the book's command-line
//! reference (docs/book/src/reference/cli.md) is the `--help` of nfsdtop,
//! its subcommands and nfsdtopd, word for word (`NFSDTOP_BLESS=1 cargo
//! test -p nfsdtop --test docs` rewrites it); every command line shown in
//! README.md, docs/*.md and the book (lines of ```sh and ```console blocks
//! that run nfsdtop, nfsdtopd or cargo xtask) uses only subcommands and
//! flags that command's `--help` lists; the configuration reference names only
//! keys nfsdtopd's config file accepts; the metrics and JSON references
//! name every metric family nfsdtopd exposes and every batch-record field;
//! the example batch record shows only real fields; and the recordings'
//! documented size is what a demo recording takes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tui lives in the workspace")
        .to_path_buf()
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    c
}

/// nfsdtopd and xtask, built (or found fresh) beside nfsdtop.
fn sibling(package: &str, bin: &str) -> PathBuf {
    let st = cargo()
        .args(["build", "-q", "-p", package, "--bin", bin])
        .status()
        .unwrap_or_else(|e| panic!("cargo build -p {package}: {e}"));
    assert!(st.success(), "cargo build -p {package} failed");
    PathBuf::from(env!("CARGO_BIN_EXE_nfsdtop")).with_file_name(bin)
}

/// `bin args... --help`, in a clean environment (no NFSDTOP_* variable,
/// no terminal width) so that the text is the same everywhere.
fn help(bin: &Path, args: &[&str]) -> String {
    let out = Command::new(bin)
        .args(args)
        .arg("--help")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .unwrap_or_else(|e| panic!("{} {args:?} --help: {e}", bin.display()));
    assert!(
        out.status.success(),
        "{} {args:?} --help: {}",
        bin.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("help is UTF-8")
}

const NFSDTOP_SUBCOMMANDS: &[&str] = &["record", "doctor", "whatif", "completions", "manpage"];
const CLI_PAGE: &str = "docs/book/src/reference/cli.md";

fn cli_reference(nfsdtop: &Path, nfsdtopd: &Path) -> String {
    let mut page = String::from(
        "# Command line\n\n\
<!-- Generated from the binaries' --help by tui/tests/docs.rs: do not edit.\n     \
NFSDTOP_BLESS=1 cargo test -p nfsdtop --test docs rewrites it. -->\n\n\
Every option of `nfsdtop`, its subcommands and `nfsdtopd`, as their\n\
`--help` prints it (`-h` prints a summary). The man pages (`man nfsdtop`,\n\
`man nfsdtop-record`, `man nfsdtop-doctor`, `man nfsdtop-whatif`, `man\n\
nfsdtopd`; before installing, `nfsdtop manpage`) have the same with the\n\
keys, columns, examples and exit status.\n",
    );
    let mut section = |title: &str, text: String| {
        page.push_str(&format!(
            "\n## {title}\n\n```text\n{}\n```\n",
            text.trim_end()
        ));
    };
    section("nfsdtop", help(nfsdtop, &[]));
    for sub in NFSDTOP_SUBCOMMANDS {
        section(&format!("nfsdtop {sub}"), help(nfsdtop, &[sub]));
    }
    section("nfsdtopd", help(nfsdtopd, &[]));
    page
}

#[test]
fn cli_reference_is_the_binaries_help() {
    let nfsdtop = PathBuf::from(env!("CARGO_BIN_EXE_nfsdtop"));
    let nfsdtopd = sibling("nfsdtop-exporter", "nfsdtopd");
    let want = cli_reference(&nfsdtop, &nfsdtopd);
    let path = root().join(CLI_PAGE);
    if std::env::var_os("NFSDTOP_BLESS").is_some() {
        std::fs::write(&path, &want).expect("write the CLI reference");
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    if have != want {
        let line = have
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| have.lines().count().min(want.lines().count()));
        panic!(
            "{CLI_PAGE} differs from the binaries' --help from line {}: regenerate it with \
NFSDTOP_BLESS=1 cargo test -p nfsdtop --test docs\n  page: {:?}\n  help: {:?}",
            line + 1,
            have.lines().nth(line).unwrap_or("(end)"),
            want.lines().nth(line).unwrap_or("(end)"),
        );
    }
}

/// The options a help text lists (`-b`, `--batch`, ...).
fn flags_of(help: &str) -> BTreeSet<String> {
    let mut set = BTreeSet::new();
    for line in help.lines() {
        let t = line.trim_start();
        if !t.starts_with('-') {
            continue;
        }
        for word in t.split([' ', ',', '=', '<', '[']) {
            if word.starts_with('-') && word.len() > 1 {
                set.insert(word.to_string());
            }
        }
    }
    set
}

/// The subcommands a help text lists under "Commands:".
fn commands_of(help: &str) -> BTreeSet<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// A shell line's words, quotes removed (enough for documentation: no
/// escapes inside quotes), up to a comment.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut in_word = false;
    for c in line.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                in_word = true;
            }
            None if c == '#' && !in_word => break,
            None if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            None => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    out
}

/// (file, line number, command words) of every nfsdtop, nfsdtopd and
/// cargo xtask command in the ```sh and ```console blocks of `text`.
fn commands_in(file: &str, text: &str) -> Vec<(String, usize, Vec<String>)> {
    let mut found = Vec::new();
    let mut fence: Option<bool> = None; // Some(checked?) inside a block
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with("```") {
            fence = match fence {
                Some(_) => None,
                None => {
                    let info = t.trim_start_matches('`').trim();
                    Some(matches!(info, "sh" | "console" | "bash" | "shell"))
                }
            };
            continue;
        }
        if fence != Some(true) {
            continue;
        }
        let mut l = t.strip_prefix("$ ").unwrap_or(t).to_string();
        if let Some((n, prev)) = pending.take() {
            l = format!("{prev} {l}");
            pending = Some((n, String::new()));
        }
        let n = pending.take().map(|(n, _)| n).unwrap_or(i + 1);
        if let Some(stripped) = l.strip_suffix('\\') {
            pending = Some((n, stripped.to_string()));
            continue;
        }
        // A pipeline continued on the next line.
        if l.trim_end().ends_with('|') {
            pending = Some((n, l.clone()));
            continue;
        }
        let w = words(&l);
        // Each part of a pipeline or list.
        for part in w.split(|x| x == "|" || x == "&&" || x == ";" || x == "||") {
            let start = part
                .iter()
                .position(|x| x == "nfsdtop" || x == "nfsdtopd" || x == "cargo");
            let Some(s) = start else { continue };
            let cmd = &part[s..];
            if cmd[0] == "cargo" && cmd.get(1).map(String::as_str) != Some("xtask") {
                continue;
            }
            // Only where the command starts the part (not an argument).
            if s != 0 {
                continue;
            }
            found.push((file.to_string(), n, cmd.to_vec()));
        }
    }
    found
}

fn docs_files() -> Vec<PathBuf> {
    let mut v = vec![root().join("README.md")];
    // docs/*.md: the book includes them.
    for e in std::fs::read_dir(root().join("docs")).expect("docs/") {
        let p = e.expect("dir entry").path();
        if p.extension().is_some_and(|e| e == "md") {
            v.push(p);
        }
    }
    let mut stack = vec![root().join("docs/book/src")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("docs/book/src") {
            let p = e.expect("dir entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "md") {
                v.push(p);
            }
        }
    }
    v.sort();
    v
}

/// Checks one command's subcommand and flags against the helps; the
/// problems found, if any.
fn check_command(
    cmd: &[String],
    helps: &mut dyn FnMut(&str, Option<&str>) -> Option<String>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let (prog, rest): (&str, &[String]) = if cmd[0] == "cargo" {
        ("xtask", &cmd[2..])
    } else {
        (cmd[0].as_str(), &cmd[1..])
    };
    let top = helps(prog, None).expect("top-level help");
    let mut subs = commands_of(&top);
    if prog == "nfsdtop" {
        // Hidden ones too (manpage).
        subs.extend(NFSDTOP_SUBCOMMANDS.iter().map(|s| s.to_string()));
    }
    // nfsdtop and nfsdtopd take no positional argument but a subcommand;
    // xtask always needs its task.
    let sub = match rest.first() {
        Some(a) if !a.starts_with('-') => {
            if !subs.contains(a) {
                problems.push(format!("{prog}: no subcommand {a:?}"));
                return problems;
            }
            Some(a.as_str())
        }
        _ if prog == "xtask" => {
            problems.push("xtask: no task".to_string());
            return problems;
        }
        _ => None,
    };
    let args = if sub.is_some() { &rest[1..] } else { rest };
    let Some(text) = helps(prog, sub) else {
        problems.push(format!("{prog} {sub:?}: no help"));
        return problems;
    };
    let known = flags_of(&text);
    // `cargo xtask run -- ARGS`: ARGS are nfsdtop's.
    let (mine, passed) = match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], Some(&args[i + 1..])),
        None => (args, None),
    };
    for a in mine {
        if !a.starts_with('-')
            || a.len() < 2
            || a.chars().nth(1).is_some_and(|c| c.is_ascii_digit())
        {
            continue;
        }
        let flag = a.split('=').next().unwrap_or(a);
        if !known.contains(flag) {
            let who = match sub {
                Some(s) => format!("{prog} {s}"),
                None => prog.to_string(),
            };
            problems.push(format!("{who}: no option {flag}"));
        }
    }
    if let Some(p) = passed {
        if prog == "xtask" && sub == Some("run") {
            let mut inner = vec!["nfsdtop".to_string()];
            inner.extend(p.iter().cloned());
            problems.extend(check_command(&inner, helps));
        }
    }
    problems
}

#[test]
fn every_command_line_in_the_docs_uses_real_flags() {
    let nfsdtop = PathBuf::from(env!("CARGO_BIN_EXE_nfsdtop"));
    let mut bins: BTreeMap<&str, PathBuf> = BTreeMap::new();
    bins.insert("nfsdtop", nfsdtop);
    let mut cache: BTreeMap<(String, Option<String>), Option<String>> = BTreeMap::new();
    let mut helps = |prog: &str, sub: Option<&str>| -> Option<String> {
        let key = (prog.to_string(), sub.map(str::to_string));
        if let Some(h) = cache.get(&key) {
            return h.clone();
        }
        let bin = match prog {
            "nfsdtop" => bins["nfsdtop"].clone(),
            "nfsdtopd" => bins
                .entry("nfsdtopd")
                .or_insert_with(|| sibling("nfsdtop-exporter", "nfsdtopd"))
                .clone(),
            "xtask" => bins
                .entry("xtask")
                .or_insert_with(|| sibling("xtask", "xtask"))
                .clone(),
            _ => return None,
        };
        let h = Some(help(&bin, &sub.into_iter().collect::<Vec<_>>()));
        cache.insert(key, h.clone());
        h
    };
    let mut checked = 0;
    let mut problems = Vec::new();
    for f in docs_files() {
        let text = std::fs::read_to_string(&f).expect("read a doc");
        let name = f.strip_prefix(root()).unwrap_or(&f).display().to_string();
        for (file, line, cmd) in commands_in(&name, &text) {
            checked += 1;
            for p in check_command(&cmd, &mut helps) {
                problems.push(format!("{file}:{line}: {}: {p}", cmd.join(" ")));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "command lines in the docs:\n{}",
        problems.join("\n")
    );
    assert!(
        checked > 40,
        "only {checked} command lines found in the docs"
    );
}

#[test]
fn a_made_up_flag_or_subcommand_is_caught() {
    let nfsdtop = PathBuf::from(env!("CARGO_BIN_EXE_nfsdtop"));
    let mut helps = |prog: &str, sub: Option<&str>| -> Option<String> {
        (prog == "nfsdtop").then(|| help(&nfsdtop, &sub.into_iter().collect::<Vec<_>>()))
    };
    let page = "```sh\nnfsdtop --demo seed-k16 --no-such-flag   # x\nnfsdtop record --batch -o x\n\
nfsdtop frobnicate\nnfsdtop -b -n 1 --format json | jq .\n```\n";
    let cmds = commands_in("control.md", page);
    assert_eq!(cmds.len(), 4, "{cmds:?}");
    let problems: Vec<Vec<String>> = cmds
        .iter()
        .map(|(_, _, c)| check_command(c, &mut helps))
        .collect();
    assert_eq!(problems[0], vec!["nfsdtop: no option --no-such-flag"]);
    assert_eq!(problems[1], vec!["nfsdtop record: no option --batch"]);
    assert_eq!(problems[2], vec!["nfsdtop: no subcommand \"frobnicate\""]);
    assert!(problems[3].is_empty(), "{:?}", problems[3]);
}

#[test]
fn the_config_reference_names_only_keys_nfsdtopd_accepts() {
    // A key is a long flag of nfsdtopd (its name with _ for -, or its
    // alias's), one of the file's own (file.rs), or an old name (keys.rs).
    let own = std::fs::read_to_string(root().join("exporter/src/config/file.rs"))
        .expect("exporter/src/config/file.rs");
    let old = std::fs::read_to_string(root().join("exporter/src/config/keys.rs"))
        .expect("exporter/src/config/keys.rs");
    let flags = help(&sibling("nfsdtop-exporter", "nfsdtopd"), &[]);
    let page = std::fs::read_to_string(root().join("docs/book/src/reference/config.md"))
        .expect("the config reference");
    let mut keys = 0;
    for line in page.lines().filter(|l| l.starts_with("| `")) {
        let first = line.split('|').nth(1).unwrap_or("");
        for k in first.split('`').skip(1).step_by(2) {
            for k in k.trim_matches(['[', ']']).split(", ") {
                keys += 1;
                let flag = format!("--{}", k.replace('_', "-"));
                let is_flag = flags
                    .split(|c: char| c.is_whitespace() || c == ',' || c == ']')
                    .any(|w| w == flag);
                assert!(
                    is_flag
                        || own.contains(&format!("    {k}: "))
                        || old.contains(&format!("(\"{k}\", ")),
                    "docs/book/src/reference/config.md names `{k}`, which nfsdtopd's config file does not accept"
                );
            }
        }
    }
    assert!(keys > 20, "only {keys} keys in the config reference");
}

/// Every field path of a JSON value (arrays: their elements'), as
/// "a.b.c"; procedure names and the like are keys too.
fn paths(v: &serde_json::Value, at: &str, out: &mut BTreeSet<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                let p = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                out.insert(p.clone());
                paths(x, &p, out);
            }
        }
        serde_json::Value::Array(a) => {
            for x in a {
                paths(x, at, out);
            }
        }
        _ => {}
    }
}

#[test]
fn the_example_batch_record_shows_only_real_fields() {
    let page = std::fs::read_to_string(root().join("docs/book/src/batch.md")).expect("batch.md");
    let start = page.find("```json\n").expect("a json block in batch.md") + 8;
    let end = start + page[start..].find("```").expect("its end");
    let example: serde_json::Value =
        serde_json::from_str(&page[start..end]).expect("the example record is JSON");
    // The command the page says it came from.
    let out = Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
        .args(["--demo", "seed-k16", "--policy", "flat", "-b", "-n", "3"])
        .args(["--speed", "0", "--format", "json"])
        .output()
        .expect("run nfsdtop");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let real: serde_json::Value =
        serde_json::from_str(text.lines().last().expect("a record")).expect("JSON");
    let (mut shown, mut have) = (BTreeSet::new(), BTreeSet::new());
    paths(&example, "", &mut shown);
    paths(&real, "", &mut have);
    let made_up: Vec<_> = shown.difference(&have).collect();
    assert!(
        made_up.is_empty(),
        "docs/book/src/batch.md's example record has fields nfsdtop does not write: {made_up:?}"
    );
    assert!(
        shown.len() > 50,
        "only {} fields in the example",
        shown.len()
    );
    // The numbers of the simulated server are exact: the example's are
    // the real ones.
    assert_eq!(
        example["totals"]["dispatches"],
        real["totals"]["dispatches"]
    );
    assert_eq!(
        example["entities"][0]["fairness"],
        real["entities"][0]["fairness"]
    );
}

#[test]
fn every_metric_family_nfsdtopd_exposes_is_in_the_metrics_reference() {
    // The golden exposition the exporter's own tests hold /metrics to.
    let om = std::fs::read_to_string(root().join("exporter/src/metrics/testdata/exposition.om"))
        .expect("the golden exposition");
    let doc = std::fs::read_to_string(root().join("docs/metrics.md")).expect("docs/metrics.md");
    let mut families = 0;
    let mut missing = Vec::new();
    for line in om.lines().filter(|l| l.starts_with("# TYPE ")) {
        let mut w = line.split_whitespace().skip(2);
        let (Some(name), Some(kind)) = (w.next(), w.next()) else {
            continue;
        };
        families += 1;
        let shown = match kind {
            "counter" => format!("`{name}_total`"),
            "info" => format!("`{name}_info`"),
            _ => format!("`{name}`"),
        };
        if !doc.contains(&shown) {
            missing.push(shown);
        }
    }
    assert!(families > 40, "only {families} families in the exposition");
    assert!(
        missing.is_empty(),
        "docs/metrics.md (the book's metrics reference) lacks {missing:?}"
    );
}

#[test]
fn every_field_of_a_batch_record_is_in_the_json_reference() {
    let doc = std::fs::read_to_string(root().join("docs/json.md")).expect("docs/json.md");
    let out = Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
        .args(["--demo", "movers", "-b", "-n", "2", "--speed", "0"])
        .args(["--format", "json", "--group", "class"])
        .output()
        .expect("run nfsdtop");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let record: serde_json::Value =
        serde_json::from_str(text.lines().last().expect("a record")).expect("JSON");
    // Field names, not the keys that are data (procedure and operation
    // names).
    fn names(v: &serde_json::Value, out: &mut BTreeSet<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    out.insert(k.clone());
                    if k != "procedures" && k != "nfs4_operations" {
                        names(x, out);
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| names(x, out)),
            _ => {}
        }
    }
    let mut fields = BTreeSet::new();
    names(&record, &mut fields);
    let missing: Vec<_> = fields
        .iter()
        .filter(|f| !doc.contains(&format!("`{f}`")) && !doc.contains(&format!("\"{f}\"")))
        .collect();
    assert!(fields.len() > 40, "only {} fields", fields.len());
    assert!(
        missing.is_empty(),
        "docs/json.md (the book's JSON reference) does not name {missing:?}"
    );
}

#[test]
fn recordings_take_the_bytes_per_event_the_docs_say() {
    // recording.md and docs/recording-format.md: 6.22 bytes per event on a
    // 60 s seed-k16 demo recording ("about 6").
    let dir = std::env::temp_dir().join(format!("nfsdtop-docs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch directory");
    let file = dir.join("demo.nfsdrec");
    let out = Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
        .args([
            "record",
            "--demo",
            "seed-k16",
            "--speed",
            "0",
            "--duration",
            "60",
            "-o",
        ])
        .arg(&file)
        .output()
        .expect("run nfsdtop record");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stderr);
    let per_event: f64 = said
        .split(", ")
        .find_map(|p| p.trim().strip_suffix(" bytes/event"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no bytes/event in {said:?}"));
    assert!(
        (per_event - 6.22).abs() < 0.05,
        "a 60 s seed-k16 recording takes {per_event} bytes per event: update \
docs/book/src/recording.md and docs/recording-format.md"
    );
    let page = std::fs::read_to_string(root().join("docs/book/src/recording.md")).expect("page");
    assert!(page.contains("6.22 bytes per event for `seed-k16`"));
}
