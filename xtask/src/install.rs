//! `cargo xtask install` and `cargo xtask deb`: binaries, man pages, shell
//! completions, the systemd unit, an example config, and everything an
//! operator needs next to them (Prometheus rules and their generator,
//! Grafana dashboards, runbooks, provisioning examples, the docs and, where
//! mdbook is installed, the book as HTML), laid out the way a Debian system
//! expects; `crate::deb` packs the same tree into a .deb.
//!
//! The committed operator files name their installed places under
//! `/usr/share/nfsdtop` (runbook links included); an install elsewhere
//! rewrites those paths, and `--runbook-base` points the links at wherever
//! the runbooks are published instead.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};
use clap::Args;

use crate::{cargo, root, run};

#[derive(Args, Debug, Clone)]
pub struct InstallArgs {
    /// Installation prefix (binaries in PREFIX/bin).
    #[arg(long, default_value = "/usr/local")]
    pub prefix: PathBuf,
    /// Stage everything below this directory instead of / (packaging).
    #[arg(long)]
    pub destdir: Option<PathBuf>,
    /// Install debug builds (quicker to build; for tests).
    #[arg(long)]
    pub debug: bool,
    /// URL where PREFIX/share/nfsdtop/runbooks/ is published for people's
    /// browsers (e.g. https://wiki.example.org/nfsdtop): the alerts'
    /// runbook_url and the dashboards' link become URL/RUNBOOKS.md#...
    /// [default: file://PREFIX/share/nfsdtop/runbooks]
    #[arg(long, value_name = "URL")]
    pub runbook_base: Option<String>,
}

fn under(destdir: Option<&Path>, p: &Path) -> PathBuf {
    match destdir {
        None => p.to_path_buf(),
        Some(d) => d.join(p.strip_prefix("/").unwrap_or(p)),
    }
}

fn write_output(path: &Path, cmd: &mut Command) -> anyhow::Result<()> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    fs::write(path, out.stdout).with_context(|| format!("cannot write {}", path.display()))
}

pub(crate) fn copy_mode(from: &Path, to: &Path, mode: u32) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = to.parent() {
        fs::create_dir_all(dir)?;
    }
    fs::copy(from, to)
        .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
    fs::set_permissions(to, fs::Permissions::from_mode(mode))?;
    Ok(())
}

pub fn install(a: &InstallArgs) -> anyhow::Result<()> {
    let mut build = cargo();
    build.args(["build", "-p", "nfsdtop", "-p", "nfsdtop-exporter"]);
    if !a.debug {
        build.arg("--release");
    }
    run("build nfsdtop and nfsdtopd", &mut build)?;
    let profile = if a.debug { "debug" } else { "release" };
    let built = root().join("target").join(profile);
    let prefix = &a.prefix;
    let d = a.destdir.as_deref();
    // /usr installs put configuration in /etc; other prefixes keep it inside.
    let sysconf = if prefix == Path::new("/usr") {
        PathBuf::from("/etc")
    } else {
        prefix.join("etc")
    };
    let unitdir = if prefix == Path::new("/usr") {
        PathBuf::from("/lib/systemd/system")
    } else {
        prefix.join("lib/systemd/system")
    };
    let bindir = prefix.join("bin");
    for bin in ["nfsdtop", "nfsdtopd"] {
        copy_mode(&built.join(bin), &under(d, &bindir.join(bin)), 0o755)?;
    }
    let nfsdtop = under(d, &bindir.join("nfsdtop"));
    let nfsdtopd = under(d, &bindir.join("nfsdtopd"));

    let man1 = under(d, &prefix.join("share/man/man1"));
    let man8 = under(d, &prefix.join("share/man/man8"));
    run(
        "man pages (nfsdtop)",
        Command::new(&nfsdtop).arg("manpage").arg(&man1),
    )?;
    run(
        "man page (nfsdtopd)",
        Command::new(&nfsdtopd).arg("--manpage").arg(&man8),
    )?;

    let share = under(d, &prefix.join("share"));
    for (shell, dir, file) in [
        ("bash", "bash-completion/completions", "{}"),
        ("zsh", "zsh/site-functions", "_{}"),
        ("fish", "fish/vendor_completions.d", "{}.fish"),
    ] {
        let dir = share.join(dir);
        fs::create_dir_all(&dir)?;
        for (bin, flag) in [(&nfsdtop, false), (&nfsdtopd, true)] {
            let name = bin
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("nfsdtop");
            let mut cmd = Command::new(bin);
            if flag {
                cmd.args(["--completions", shell]);
            } else {
                cmd.args(["completions", shell]);
            }
            write_output(&dir.join(file.replace("{}", name)), &mut cmd)?;
        }
    }

    let places = Places::new(prefix, a.runbook_base.as_deref())?;
    let book = book()?;
    install_operator_files(&places, &|p: &Path| under(d, p), book.as_deref())?;

    let unit = places
        .localise(&fs::read_to_string(root().join("dist/nfsdtopd.service"))?)
        .replace(
            "/usr/bin/nfsdtopd",
            &bindir.join("nfsdtopd").display().to_string(),
        )
        .replace(
            "/etc/nfsdtop/nfsdtopd.toml",
            &sysconf.join("nfsdtop/nfsdtopd.toml").display().to_string(),
        );
    let unit_path = under(d, &unitdir.join("nfsdtopd.service"));
    fs::create_dir_all(unit_path.parent().expect("has a parent"))?;
    fs::write(&unit_path, unit)?;

    // Never overwrite an administrator's config.
    let conf = under(d, &sysconf.join("nfsdtop/nfsdtopd.toml"));
    if !conf.exists() {
        copy_mode(&root().join("exporter/nfsdtopd.example.toml"), &conf, 0o644)?;
    }
    eprintln!(
        "installed nfsdtop and nfsdtopd into {}",
        under(d, prefix).display()
    );
    Ok(())
}

/// Where this install puts the operator files, and where links point.
pub struct Places {
    /// PREFIX/share/nfsdtop
    share: PathBuf,
    /// PREFIX/share/doc/nfsdtop
    doc: PathBuf,
    /// The runbooks directory's URL (no trailing slash).
    runbooks: String,
}

/// The places the committed files name (a /usr install).
const SHARE: &str = "/usr/share/nfsdtop";
const DOC: &str = "/usr/share/doc/nfsdtop";
const RUNBOOKS_URL: &str = "file:///usr/share/nfsdtop/runbooks";

impl Places {
    pub fn new(prefix: &Path, runbook_base: Option<&str>) -> anyhow::Result<Places> {
        let share = prefix.join("share/nfsdtop");
        let runbooks = match runbook_base {
            Some(u) => {
                let u = u.trim_end_matches('/');
                if !(u.starts_with("https://")
                    || u.starts_with("http://")
                    || u.starts_with("file:///"))
                    || u.contains(['#', '"', ' ', '\n'])
                {
                    bail!("--runbook-base {u:?}: expected an http(s):// or file:/// URL without '#', quotes or spaces");
                }
                u.to_string()
            }
            None => format!("file://{}", share.join("runbooks").display()),
        };
        Ok(Places {
            doc: prefix.join("share/doc/nfsdtop"),
            share,
            runbooks,
        })
    }

    /// The final path of an operator file (`share/...` or `doc/...`).
    fn installed(&self, to: &Path) -> anyhow::Result<PathBuf> {
        Ok(match to.strip_prefix("share") {
            Ok(rel) => self.share.join(rel),
            Err(_) => self.doc.join(to.strip_prefix("doc")?),
        })
    }

    /// A committed file's text with this install's places.
    pub fn localise(&self, text: &str) -> String {
        // The runbook URL holds SHARE: set it aside so that a rewritten
        // one is not rewritten again.
        const HOLD: &str = "\u{0}runbooks\u{0}";
        text.replace(RUNBOOKS_URL, HOLD)
            .replace(DOC, &self.doc.display().to_string())
            .replace(SHARE, &self.share.display().to_string())
            .replace(HOLD, &self.runbooks)
    }
}

/// (source in the repository, destination below share/nfsdtop or the doc
/// directory, rewrite paths and links).
fn operator_files() -> anyhow::Result<Vec<(PathBuf, PathBuf, bool)>> {
    let r = root();
    let mut v: Vec<(PathBuf, PathBuf, bool)> = Vec::new();
    let share = |from: &str, to: &str, rewrite: bool| {
        (r.join(from), PathBuf::from("share").join(to), rewrite)
    };
    for (from, to, rw) in [
        (
            "dashboards/rules/nfsdtop.rules.yml",
            "rules/nfsdtop.rules.yml",
            true,
        ),
        (
            "dashboards/rules/thresholds.md",
            "rules/thresholds.md",
            false,
        ),
        ("dashboards/tools/generate.py", "tools/generate.py", false),
        (
            "dashboards/tools/check_dashboards.py",
            "tools/check_dashboards.py",
            false,
        ),
        ("dashboards/RUNBOOKS.md", "runbooks/RUNBOOKS.md", true),
        ("dashboards/README.md", "README.md", true),
        (
            "dashboards/prometheus/prometheus.yml",
            "prometheus/prometheus.yml",
            true,
        ),
        (
            "dashboards/grafana/provisioning/dashboards/nfsdtop.yaml",
            "grafana/provisioning/dashboards/nfsdtop.yaml",
            true,
        ),
        (
            "dashboards/grafana/provisioning/datasources/nfsdtop-prometheus.yaml",
            "grafana/provisioning/datasources/nfsdtop-prometheus.yaml",
            true,
        ),
    ] {
        v.push(share(from, to, rw));
    }
    // The mixin, rewritten too: generate.py renders site rules from the
    // installed copy, with the installed runbook links.
    for (dir, to) in [
        ("dashboards/mixin", "mixin"),
        ("dashboards/mixin/alerts", "mixin/alerts"),
        ("dashboards/mixin/dashboards", "mixin/dashboards"),
        ("dashboards/mixin/lib", "mixin/lib"),
        ("dashboards/mixin/profiles", "mixin/profiles"),
        ("dashboards/mixin/rules", "mixin/rules"),
        ("dashboards/grafana", "grafana"),
    ] {
        let mut names: Vec<String> = fs::read_dir(r.join(dir))
            .with_context(|| format!("cannot list {dir}"))?
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_file())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        names.sort();
        for n in names {
            v.push(share(&format!("{dir}/{n}"), &format!("{to}/{n}"), true));
        }
    }
    v.push((r.join("README.md"), PathBuf::from("doc/README.md"), false));
    v.push((
        r.join("BENCHMARKS.md"),
        PathBuf::from("doc/BENCHMARKS.md"),
        false,
    ));
    for e in fs::read_dir(r.join("docs")).context("cannot list docs/")? {
        let p = e?.path();
        if !p.is_file() {
            continue; // docs/book: the book's sources, installed built (book())
        }
        if let Some(n) = p.file_name().and_then(|n| n.to_str()) {
            v.push((p.clone(), PathBuf::from("doc/docs").join(n), false));
        }
    }
    Ok(v)
}

/// Rules, the rules' generator, dashboards, runbooks, provisioning
/// examples and docs; the book's HTML (`book`: built by [`book`]) under
/// the doc directory's html/, with the docs' links to its sources pointing
/// at its pages.
fn install_operator_files(
    places: &Places,
    dest: &dyn Fn(&Path) -> PathBuf,
    book: Option<&Path>,
) -> anyhow::Result<()> {
    let files = operator_files()?;
    let r = root();
    let mut installed: HashMap<PathBuf, PathBuf> = HashMap::new();
    for (from, to, _) in &files {
        installed.insert(from.strip_prefix(&r)?.to_path_buf(), places.installed(to)?);
    }
    if let Some(html) = book {
        let html_dir = places.doc.join("html");
        for page in book_pages()? {
            // SUMMARY.md is the book's table of contents: its first page.
            let name = if page == Path::new("SUMMARY.md") {
                PathBuf::from("index.html")
            } else {
                page.with_extension("html")
            };
            if html.join(&name).is_file() {
                installed.insert(Path::new(BOOK_SRC).join(&page), html_dir.join(name));
            }
        }
        copy_tree(html, &dest(&html_dir))?;
    }
    for (from, to, rewrite) in files {
        let target = dest(&places.installed(&to)?);
        let text =
            fs::read_to_string(&from).with_context(|| format!("cannot read {}", from.display()))?;
        let mut text = if rewrite {
            places.localise(&text)
        } else {
            text
        };
        if from.extension().is_some_and(|e| e == "md") {
            let dir = from.strip_prefix(&r)?.parent().unwrap_or(Path::new(""));
            text = relink(&text, dir, &installed);
        }
        if let Some(dir) = target.parent() {
            fs::create_dir_all(dir)?;
        }
        fs::write(&target, &text).with_context(|| format!("cannot write {}", target.display()))?;
        use std::os::unix::fs::PermissionsExt;
        // Python programs (a #! line) are executable; a module is not.
        let mode = if from.extension().is_some_and(|e| e == "py") && text.starts_with("#!") {
            0o755
        } else {
            0o644
        };
        fs::set_permissions(&target, fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

/// The book's sources (mdbook), relative to the repository.
const BOOK_SRC: &str = "docs/book/src";

/// mdbook, from PATH or where `cargo install` puts it.
fn mdbook() -> Option<PathBuf> {
    let ok = |p: &Path| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let on_path = PathBuf::from("mdbook");
    if ok(&on_path) {
        return Some(on_path);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from)?;
    let cargo_bin = home.join(".cargo/bin/mdbook");
    ok(&cargo_bin).then_some(cargo_bin)
}

/// The book built as HTML into target/book, where mdbook is installed
/// (scripts/setup.sh installs it); None, and a note, where it is not.
fn book() -> anyhow::Result<Option<PathBuf>> {
    let Some(mdbook) = mdbook() else {
        eprintln!("mdbook not found: the book is not installed (scripts/setup.sh installs mdbook)");
        return Ok(None);
    };
    let out = root().join("target/book");
    run(
        "mdbook build docs/book",
        Command::new(mdbook)
            .args(["build", "docs/book", "--dest-dir"])
            .arg(&out),
    )?;
    Ok(Some(out))
}

/// The book's pages (.md below docs/book/src, relative to it).
fn book_pages() -> anyhow::Result<Vec<PathBuf>> {
    let src = root().join(BOOK_SRC);
    let mut pages = Vec::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for e in fs::read_dir(&dir).with_context(|| format!("cannot list {}", dir.display()))? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "md") {
                pages.push(p.strip_prefix(&src)?.to_path_buf());
            }
        }
    }
    Ok(pages)
}

/// Copies a directory tree (files 0644, directories as created).
fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    fs::create_dir_all(to)?;
    for e in fs::read_dir(from).with_context(|| format!("cannot list {}", from.display()))? {
        let e = e?;
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if e.file_type()?.is_dir() {
            copy_tree(&src, &dst)?;
        } else {
            copy_mode(&src, &dst, 0o644)?;
        }
    }
    Ok(())
}

/// `a/b/../c` → `a/c` (no file system access).
fn normalise(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Markdown links between installed files point at the installed copies
/// (absolute paths, anchors kept); a link to a file that is not installed
/// becomes plain text naming it in the sources. `dir` is the file's
/// directory in the repository.
fn relink(text: &str, dir: &Path, installed: &HashMap<PathBuf, PathBuf>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        let (before, after) = rest.split_at(i);
        let Some(end) = after[2..].find(')') else {
            break;
        };
        let link = &after[..end + 3];
        let target = &after[2..end + 2];
        rest = &after[end + 3..];
        let (page, anchor) = target.split_once('#').unwrap_or((target, ""));
        if page.is_empty()
            || page.contains(':')
            || page.starts_with('/')
            || page.contains(char::is_whitespace)
        {
            out.push_str(before);
            out.push_str(link);
            continue;
        }
        let repo = normalise(&dir.join(page));
        match (installed.get(&repo), before.rfind('[')) {
            (Some(p), _) => {
                out.push_str(before);
                out.push_str(&format!("]({}", p.display()));
                if !anchor.is_empty() {
                    out.push_str(&format!("#{anchor}"));
                }
                out.push(')');
            }
            (None, Some(open)) => {
                out.push_str(&before[..open]);
                out.push_str(&before[open + 1..]);
                out.push_str(&format!(" ({} in the nfsdtop sources)", repo.display()));
            }
            (None, None) => {
                out.push_str(before);
                out.push_str(link);
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_between_installed_docs_point_at_the_installed_copies() {
        let installed: HashMap<PathBuf, PathBuf> = [
            ("docs/json.md", "/usr/share/doc/nfsdtop/docs/json.md"),
            (
                "dashboards/rules/thresholds.md",
                "/usr/share/nfsdtop/rules/thresholds.md",
            ),
        ]
        .into_iter()
        .map(|(a, b)| (PathBuf::from(a), PathBuf::from(b)))
        .collect();
        let text = "See [json](../docs/json.md#unfair-list), [t](rules/thresholds.md), \
[web](https://x.org/a.md), [here](#top) and [vm](../scripts/vm/README.md).";
        assert_eq!(
            relink(text, Path::new("dashboards"), &installed),
            "See [json](/usr/share/doc/nfsdtop/docs/json.md#unfair-list), \
[t](/usr/share/nfsdtop/rules/thresholds.md), [web](https://x.org/a.md), [here](#top) \
and vm (scripts/vm/README.md in the nfsdtop sources)."
        );
    }
}
