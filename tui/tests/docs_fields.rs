//! The field table against the documentation: every per-entity number
//! is in the JSON reference under its key, the CSV header documented is
//! the one written, and every TUI column is in the book's TUI page and
//! has an entry in the man page's COLUMNS. A number added to the table
//! without its docs fails here.

use std::path::PathBuf;

use nfsdtop_agent::present::fields::FIELDS;
use nfsdtop_agent::present::output::csv_header;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn every_field_is_in_the_json_reference_and_the_csv_header_is_the_one_written() {
    let json = read("docs/json.md");
    for f in FIELDS {
        // A table row whose first cell names it (alone or beside others).
        let key = format!("`{}`", f.json);
        assert!(
            json.lines()
                .any(|l| l.starts_with("| ")
                    && l.split('|').nth(1).is_some_and(|c| c.contains(&key))),
            "docs/json.md has no row for `{}`",
            f.json
        );
    }
    assert!(
        json.contains(&format!("`{}`", csv_header())),
        "docs/json.md's CSV header is not {}",
        csv_header()
    );
}

#[test]
fn every_column_is_in_the_book_and_the_man_page() {
    let book = read("docs/book/src/tui.md");
    let dir = std::env::temp_dir().join(format!("nfsdtop-docs-fields-{}", std::process::id()));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nfsdtop"))
        .arg("manpage")
        .arg(&dir)
        .output()
        .expect("run nfsdtop manpage");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let man = std::fs::read_to_string(dir.join("nfsdtop.1")).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let columns = man
        .split(".SH COLUMNS")
        .nth(1)
        .and_then(|s| s.split(".SH ").next())
        .expect("a COLUMNS section");
    for t in FIELDS.iter().filter_map(|f| f.tui) {
        assert!(
            book.contains(t.title),
            "the book's TUI page never names {}",
            t.title
        );
        assert!(
            columns.contains(&format!(".TP\n\\fB{}\\fR\n", t.title)),
            "the man page's COLUMNS has no entry for {}",
            t.title
        );
    }
}
