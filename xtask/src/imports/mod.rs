//! `cargo xtask imports`: no circle of imports inside any crate of the
//! workspace. Each crate's module tree is found from its roots
//! (`src/lib.rs`, `src/main.rs`, `src/bin/*`, `tests/*`, `benches/*`)
//! through `mod` declarations; a file depends on the module of every path
//! it names (`crate::a::b`, `super::x`, `self::y`, a child module by name),
//! in `use` items or in code.
//!
//! The rule, at every level of the tree: the modules inside one module
//! (each with everything below it) depend on each other without a circle.
//! A module's own file may use the modules inside it and they may use it
//! (that is how a module is built from parts); but when `a` uses `b` and
//! `b` uses `a`, neither can be read, changed or moved alone: the shared
//! definition belongs to one of them, or to a module both use.
//!
//! Test modules (`#[cfg(test)]`) are left out: a test may drive its module
//! through any other (the pipeline, a session) without the module itself
//! depending on them.
//!
//! The circles known and not untied yet are listed in [`ALLOWED`]: a
//! circle passes only while its modules are all within one entry, so a new
//! circle, or a module joining an old one, fails.

mod parse;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::bail;

/// Packages whose crates are checked, from the workspace root.
const PACKAGES: &[&str] = &[
    "agent",
    "tui",
    "exporter",
    "xtask",
    "ebpf/nfsdtop-common",
    "ebpf/nfsdtop-ebpf",
    "testkit",
];

/// Circles known and not untied yet, each a debt: (crate root, the
/// modules in the circle, why it stays for now). Paths are from the
/// workspace root; modules from the crate root (`source::live::bpf`).
const ALLOWED: &[(&str, &[&str], &str)] = &[];

/// Where one file names a module.
#[derive(Clone, Debug, PartialEq)]
pub struct Because {
    pub file: PathBuf,
    pub line: usize,
    pub path: String,
}

/// One file's use of a module outside that file.
#[derive(Clone, Debug)]
pub struct Use {
    /// The module whose file names it.
    pub from: Vec<String>,
    pub to: Vec<String>,
    pub because: Because,
}

/// The modules of one crate and their uses of each other.
#[derive(Debug, Default)]
pub struct Graph {
    /// Each module (by path from the crate root) and the file it is in.
    pub modules: BTreeMap<Vec<String>, PathBuf>,
    pub uses: Vec<Use>,
}

/// A circle: modules inside one module that use each other, and one way
/// round it.
#[derive(Debug)]
pub struct Circle {
    pub modules: BTreeSet<Vec<String>>,
    /// Each step: (from, to, where), the last ending where the first starts.
    pub round: Vec<(Vec<String>, Vec<String>, Because)>,
    /// Every use between its modules: what may be cut to untie it.
    pub steps: Vec<(Vec<String>, Vec<String>, Because)>,
}

/// The module graph of the crate whose root file is `root`; `read` gives a
/// file's text (None: no such file).
pub fn graph(root: &Path, read: &dyn Fn(&Path) -> Option<String>) -> Graph {
    let mut g = Graph::default();
    let mut parsed: Vec<(PathBuf, Vec<String>, parse::FileModules)> = Vec::new();
    // (file, its module path, whether it is a mod-rs file, a test module)
    let mut todo = vec![(root.to_path_buf(), Vec::<String>::new(), true, false)];
    while let Some((file, module, mod_rs, test)) = todo.pop() {
        let Some(src) = read(&file) else { continue };
        let m = parse::read(&src);
        g.modules.insert(module.clone(), file.clone());
        let dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
        for d in &m.decls {
            let mut full = module.clone();
            full.extend(d.within.iter().cloned());
            full.push(d.name.clone());
            if d.inline {
                g.modules.insert(full, file.clone());
                continue;
            }
            let mut base = dir.clone();
            if !mod_rs {
                base.push(file.file_stem().unwrap_or_default());
            }
            base.extend(d.within.iter());
            let child = match &d.path {
                Some(p) => Some(dir.join(p)),
                None => [
                    base.join(format!("{}.rs", d.name)),
                    base.join(&d.name).join("mod.rs"),
                ]
                .into_iter()
                .find(|p| read(p).is_some()),
            };
            if let Some(child) = child {
                let child_mod_rs = d.path.is_some() || child.ends_with("mod.rs");
                todo.push((child, full, child_mod_rs, test || d.test));
            }
        }
        if !test {
            parsed.push((file, module, m));
        }
    }
    for (file, module, m) in parsed {
        for n in m.named {
            let mut cur = module.clone();
            cur.extend(n.within.iter().cloned());
            let Some(to) = resolve(&g.modules, &cur, &n.segments) else {
                continue;
            };
            if g.modules[&to] != file {
                g.uses.push(Use {
                    from: module.clone(),
                    to,
                    because: Because {
                        file: file.clone(),
                        line: n.line,
                        path: n.segments.join("::"),
                    },
                });
            }
        }
    }
    g
}

/// The module `segments` names from module `cur`: the longest prefix that
/// is a module, or None when it starts at none (an external crate, a type,
/// a local item).
fn resolve(
    modules: &BTreeMap<Vec<String>, PathBuf>,
    cur: &[String],
    segments: &[String],
) -> Option<Vec<String>> {
    let first = segments.first()?.as_str();
    let (mut base, rest): (Vec<String>, &[String]) = match first {
        "crate" => (Vec::new(), &segments[1..]),
        "self" => (cur.to_vec(), &segments[1..]),
        "super" => {
            let up = segments.iter().take_while(|s| *s == "super").count();
            (
                cur.get(..cur.len().checked_sub(up)?)?.to_vec(),
                &segments[up..],
            )
        }
        name => {
            let mut child = cur.to_vec();
            child.push(name.to_string());
            if !modules.contains_key(&child) {
                return None;
            }
            (cur.to_vec(), segments)
        }
    };
    for s in rest {
        if s == "self" {
            continue;
        }
        base.push(s.clone());
        if !modules.contains_key(&base) {
            base.pop();
            break;
        }
    }
    Some(base)
}

/// Every circle of `g`: at each level, the modules inside one module
/// (each standing for everything below it) that depend on each other in
/// a circle (Tarjan's strongly connected sets of two or more), each with
/// one way round it. A use of a module inside the user's own, or of one
/// of the user's ancestors, is how a module is built and is no step.
pub fn circles(g: &Graph) -> Vec<Circle> {
    // level → (from, to) → the first place it is named
    type Steps = BTreeMap<(Vec<String>, Vec<String>), Because>;
    let mut levels: BTreeMap<Vec<String>, Steps> = BTreeMap::new();
    for u in &g.uses {
        let k = u.from.iter().zip(&u.to).take_while(|(a, b)| a == b).count();
        if k == u.from.len() || k == u.to.len() {
            continue;
        }
        levels
            .entry(u.from[..k].to_vec())
            .or_default()
            .entry((u.from[..=k].to_vec(), u.to[..=k].to_vec()))
            .or_insert_with(|| u.because.clone());
    }
    let mut out = Vec::new();
    for steps in levels.into_values() {
        let nodes: Vec<&Vec<String>> = steps
            .keys()
            .flat_map(|(a, b)| [a, b])
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let index_of: BTreeMap<&Vec<String>, usize> =
            nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let mut succ = vec![Vec::new(); nodes.len()];
        for (a, b) in steps.keys() {
            succ[index_of[a]].push(index_of[b]);
        }
        for set in tarjan(&succ).into_iter().filter(|s| s.len() > 1) {
            let start = *set.iter().min().expect("a set of two or more");
            let round = way_round(&succ, &set, start)
                .windows(2)
                .map(|w| {
                    let (a, b) = (nodes[w[0]].clone(), nodes[w[1]].clone());
                    let why = steps[&(a.clone(), b.clone())].clone();
                    (a, b, why)
                })
                .collect();
            let modules: BTreeSet<Vec<String>> = set.iter().map(|&i| nodes[i].clone()).collect();
            let steps = steps
                .iter()
                .filter(|((a, b), _)| modules.contains(a) && modules.contains(b))
                .map(|((a, b), why)| (a.clone(), b.clone(), why.clone()))
                .collect();
            out.push(Circle {
                modules,
                round,
                steps,
            });
        }
    }
    out
}

/// Strongly connected components of the graph `succ` (iterative Tarjan).
fn tarjan(succ: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = succ.len();
    let (mut index, mut low) = (vec![usize::MAX; n], vec![0; n]);
    let (mut on_stack, mut stack, mut out) = (vec![false; n], Vec::new(), Vec::new());
    let mut next = 0;
    for v0 in 0..n {
        if index[v0] != usize::MAX {
            continue;
        }
        // (node, next successor to look at)
        let mut work = vec![(v0, 0)];
        while let Some(&mut (v, ref mut k)) = work.last_mut() {
            if *k == 0 && index[v] == usize::MAX {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some(&w) = succ[v].get(*k) {
                *k += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut set = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    set.push(w);
                    if w == v {
                        break;
                    }
                }
                out.push(set);
            }
        }
    }
    out
}

/// A shortest way from `start` back to it within `set` (breadth first):
/// the nodes, `start` first and last.
fn way_round(succ: &[Vec<usize>], set: &[usize], start: usize) -> Vec<usize> {
    let inside: BTreeSet<usize> = set.iter().copied().collect();
    let mut came_from: BTreeMap<usize, usize> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in &succ[v] {
            if w == start {
                let mut way = vec![start, v];
                let mut at = v;
                while at != start {
                    at = came_from[&at];
                    way.push(at);
                }
                way.reverse();
                return way;
            }
            if inside.contains(&w) && !came_from.contains_key(&w) {
                came_from.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    vec![start]
}

/// The crate roots of `package` (a directory).
fn roots(package: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = ["src/lib.rs", "src/main.rs"]
        .iter()
        .map(|r| package.join(r))
        .filter(|p| p.is_file())
        .collect();
    for dir in ["src/bin", "tests", "benches"] {
        let Ok(entries) = std::fs::read_dir(package.join(dir)) else {
            continue;
        };
        let mut more: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .collect();
        more.sort();
        out.extend(more);
    }
    out
}

/// Display `p` from the workspace root.
fn shown(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}

/// Check every crate of the workspace at `root`: Ok when every circle is
/// within an [`ALLOWED`] entry; else an error naming each new circle and
/// one way round it.
pub fn check(root: &Path) -> anyhow::Result<()> {
    check_with(root, ALLOWED)
}

fn check_with(root: &Path, allowed: &[(&str, &[&str], &str)]) -> anyhow::Result<()> {
    let read = |p: &Path| std::fs::read_to_string(p).ok();
    let (mut new, mut known, mut crates) = (Vec::new(), 0, 0);
    let mut used = vec![false; allowed.len()];
    for package in PACKAGES {
        for crate_root in roots(&root.join(package)) {
            crates += 1;
            let g = graph(&crate_root, &read);
            let name = shown(root, &crate_root);
            for c in circles(&g) {
                let modules: Vec<String> = c.modules.iter().map(|m| m.join("::")).collect();
                let entry = allowed.iter().position(|(r, ms, _)| {
                    *r == name && modules.iter().all(|m| ms.contains(&m.as_str()))
                });
                if let Some(k) = entry {
                    used[k] = true;
                    known += 1;
                    continue;
                }
                let mut text = format!("{name}: {}\n", modules.join(", "));
                let step = |(from, to, why): &(Vec<String>, Vec<String>, Because)| {
                    format!(
                        "    {} uses {} ({}:{}: {})\n",
                        from.join("::"),
                        to.join("::"),
                        shown(root, &why.file),
                        why.line,
                        why.path
                    )
                };
                text += "  one way round:\n";
                text.extend(c.round.iter().map(step));
                if c.steps.len() > c.round.len() {
                    text += "  every use between them (the first place each is named):\n";
                    text.extend(c.steps.iter().map(step));
                }
                new.push(text);
            }
        }
    }
    // A debt paid is taken off the list, so the list only ever shrinks.
    for (k, (r, ms, _)) in allowed.iter().enumerate() {
        if !used[k] {
            new.push(format!(
                "the allowed circle of {r} among {ms:?} is gone: take it off ALLOWED (xtask/src/imports/mod.rs)\n"
            ));
        }
    }
    eprintln!(
        "imports: {crates} crates, {known} known circles (allowed), {} new",
        new.len()
    );
    if !new.is_empty() {
        bail!(
            "modules that use each other in a circle (move the shared definition to the module that owns it), or an allowed circle no longer there:\n{}",
            new.concat()
        );
    }
    Ok(())
}
