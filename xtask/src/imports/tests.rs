//! The import-circle check on small made-up crates, and on the workspace.

use super::*;

/// The graph of a crate held in memory: (path, text) per file, the first
/// the root.
fn crate_of(files: &[(&str, &str)]) -> Graph {
    let files: BTreeMap<PathBuf, String> = files
        .iter()
        .map(|(p, t)| (PathBuf::from(p), t.to_string()))
        .collect();
    let root = files
        .keys()
        .find(|p| p.ends_with("lib.rs"))
        .unwrap()
        .clone();
    graph(&root, &|p: &Path| files.get(p).cloned())
}

fn circle_modules(g: &Graph) -> Vec<Vec<String>> {
    circles(g)
        .into_iter()
        .map(|c| c.modules.iter().map(|m| m.join("::")).collect())
        .collect()
}

#[test]
fn two_files_naming_each_other_are_a_circle() {
    let g = crate_of(&[
        ("src/lib.rs", "mod a;\nmod b;\n"),
        ("src/a.rs", "use crate::b::B;\npub struct A(B);\n"),
        (
            "src/b.rs",
            "pub struct B;\nfn f() -> super::a::A { todo!() }\n",
        ),
    ]);
    let c = circles(&g);
    assert_eq!(circle_modules(&g), [["a", "b"]]);
    let round: Vec<_> = c[0]
        .round
        .iter()
        .map(|(f, t, w)| {
            (
                f.join("::"),
                t.join("::"),
                w.file.display().to_string(),
                w.line,
            )
        })
        .collect();
    assert_eq!(
        round,
        [
            ("a".into(), "b".into(), "src/a.rs".into(), 1),
            ("b".into(), "a".into(), "src/b.rs".into(), 2)
        ]
    );
}

/// A module built of parts uses them and they use it: no circle. Parts
/// that use each other are one, however deep, and whichever file of each
/// part names the other.
#[test]
fn parts_of_one_module_in_a_circle_through_groups_and_globs() {
    let g = crate_of(&[
        ("src/lib.rs", "pub mod agg;\n"),
        (
            "src/agg/mod.rs",
            "mod services;\nmod table;\npub use services::{Ranked, rank as r};\npub struct Row;\n",
        ),
        ("src/agg/services.rs", "use super::*;\npub struct Ranked;\n"),
        ("src/agg/table.rs", "use super::Row;\n"),
    ]);
    assert!(circles(&g).is_empty(), "{:?}", circle_modules(&g));
    // Three parts round: x → y → z (inside y) → x.
    let g = crate_of(&[
        ("src/lib.rs", "mod x;\nmod y;\n"),
        ("src/x.rs", "pub const X: u8 = crate::y::Y;\n"),
        ("src/y/mod.rs", "mod z;\npub const Y: u8 = 1;\n"),
        (
            "src/y/z.rs",
            "use crate::{x::{self, X}};\npub const Z: u8 = X;\n",
        ),
    ]);
    assert_eq!(circle_modules(&g), [["x", "y"]]);
}

#[test]
fn one_way_dependencies_tests_comments_and_strings_are_no_circle() {
    let g = crate_of(&[
        (
            "src/lib.rs",
            "mod a;\nmod b;\n#[cfg(test)]\n#[path = \"lib_tests.rs\"]\nmod tests;\n\
             pub use a::A;\n",
        ),
        (
            "src/a.rs",
            "use crate::b::B;\npub struct A<'a>(&'a B);\n\
             #[cfg(test)]\nmod tests {\n    use super::*;\n    use crate::b;\n    const Q: char = '\\'';\n}\n",
        ),
        (
            "src/b.rs",
            "//! Not [`crate::a::A`]: a doc comment.\npub struct B;\n\
             /* crate::a::A in a /* nested */ comment */\n\
             const S: &str = \"crate::a::A\";\nconst R: &str = r#\"super::a\"#;\n\
             fn c() -> char { 'a' }\n",
        ),
        ("src/lib_tests.rs", "use super::a::A;\nuse crate::b;\n"),
    ]);
    assert!(circles(&g).is_empty(), "{:?}", circle_modules(&g));
    let uses: Vec<_> = g
        .uses
        .iter()
        .map(|u| (u.from.join("::"), u.to.join("::")))
        .collect();
    // lib.rs's re-export; a's use of b. Not b's comments and strings, nor
    // the tests' uses (of a and b, and of a from a's tests).
    assert_eq!(uses, [("".into(), "a".into()), ("a".into(), "b".into())]);
}

/// An allowed circle passes; a file joining it, or another circle, fails.
#[test]
fn the_allow_list_passes_only_the_circles_it_names() {
    let dir = std::env::temp_dir().join(format!("xtask-imports-{}", std::process::id()));
    let src = dir.join("agent/src");
    std::fs::create_dir_all(&src).unwrap();
    let w = |f: &str, t: &str| std::fs::write(src.join(f), t).unwrap();
    w("lib.rs", "mod a;\nmod b;\nmod c;\n");
    w("a.rs", "use crate::b::B;\npub struct A;\n");
    w("b.rs", "use crate::a::A;\npub struct B;\n");
    w("c.rs", "pub struct C;\n");
    let ab: &[&str] = &["a", "b"];
    let allowed = [("agent/src/lib.rs", ab, "a test")];
    assert!(check_with(&dir, &[]).is_err(), "not allowed");
    check_with(&dir, &allowed).expect("allowed");
    // c joins the circle.
    w("c.rs", "use crate::a::A;\npub struct C;\n");
    w(
        "a.rs",
        "use crate::b::B;\nuse crate::c::C;\npub struct A;\n",
    );
    let e = check_with(&dir, &allowed).unwrap_err().to_string();
    assert!(e.contains("agent/src/lib.rs: a, b, c"), "{e}");
    // The circle untied: its entry must go too.
    w("a.rs", "pub struct A;\n");
    w("c.rs", "pub struct C;\n");
    let e = check_with(&dir, &allowed).unwrap_err().to_string();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(e.contains("is gone: take it off ALLOWED"), "{e}");
}

/// The workspace itself: the check `cargo xtask test` runs.
#[test]
fn the_workspace_has_no_circle_of_imports() {
    check(&crate::root()).unwrap();
}
