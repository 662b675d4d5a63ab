//! The TUI's layering (ARCHITECTURE.md): `state/` is what the UI knows
//! and is tested without a terminal, `view/` draws it; state never
//! imports view. Checked on the sources, so a `use crate::view` slipped
//! into state fails here rather than in review.

use std::path::{Path, PathBuf};

/// The `.rs` files under `dir`, recursively.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The lines of `text` that import or name the view module, comments
/// aside.
fn view_references(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("//"))
        .filter(|l| {
            l.contains("crate::view")
                || l.contains("super::view")
                || l.contains("super::super::view")
                || l.contains("nfsdtop::view")
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn state_never_imports_view() {
    let mut files = Vec::new();
    sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/state"),
        &mut files,
    );
    assert!(files.len() > 5, "{files:?}");
    for f in files {
        let refs = view_references(&std::fs::read_to_string(&f).unwrap());
        assert!(
            refs.is_empty(),
            "{} imports the view: {refs:?}",
            f.display()
        );
    }
}

#[test]
fn the_check_catches_an_import() {
    assert_eq!(
        view_references("// crate::view in a comment\nuse crate::view::table;\n"),
        ["use crate::view::table;"]
    );
}
