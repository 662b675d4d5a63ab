//! A client-chosen name with characters a terminal draws at another width
//! than ratatui counts (two U+2028 line separators, as the kernel writes
//! them in `/proc/fs/nfsd/clients/N/info`: `\xe2\x80\xa8`) must not shift
//! the table: in tmux, every cell of the starved client's row reads as in
//! the `-b` output of the same demo, the name shown with `?`.

mod common;

use common::nfsdtop;
use common::tmux::{row_of, Tmux};

/// seed-k16 under the flat queue: 10.0.0.2 gets 11.1% (ratio 0.22).
const DEMO: &str = "--demo seed-k16 --policy flat --speed 8 -d 0.25";

/// A fake `/proc/fs/nfsd/clients` naming 10.0.0.2's client hostilely.
fn hostile_clients(tag: &str) -> std::path::PathBuf {
    let root = std::env::temp_dir().join(format!("nfsdtop-hostile-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("1")).unwrap();
    std::fs::write(
        root.join("1/info"),
        "clientid: 0x1\naddress: \"10.0.0.2:790\"\nstatus: confirmed\n\
         name: \"Linux NFSv4.2 AB\\xe2\\x80\\xa8\\xe2\\x80\\xa8CD\"\nminor version: 2\n",
    )
    .unwrap();
    root
}

/// The cells of `peer`'s rows in batch text output, in the TUI's order:
/// name, client, class, CONN, DISP/S, SHARE, FAIR, RATIO, WAIT50, WAIT99,
/// EXEC (the batch puts the client last, and adds the workload columns).
fn batch_rows(text: &str, peer: &str) -> Vec<Vec<String>> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{peer} ")))
        .map(|l| {
            let c: Vec<String> = l.split_whitespace().map(str::to_string).collect();
            let mut row = vec![c[0].clone(), c.last().cloned().unwrap_or_default()];
            row.extend(c[1..c.len().min(10)].iter().cloned());
            row
        })
        .collect()
}

#[test]
fn a_starved_clients_row_reads_as_in_batch_output_whatever_its_name() {
    let dir = hostile_clients("row");
    let clients = dir.to_str().unwrap();
    let args: Vec<&str> = DEMO
        .split_whitespace()
        .chain(["--nfsd-clients", clients, "-b", "-n", "10"])
        .collect();
    let text = nfsdtop(&args);
    // One line a row: the separators did not break it.
    let rows = batch_rows(&text, "10.0.0.2");
    assert_eq!(rows.len(), 10, "{text}");
    // Past the first intervals, what the steady demo shows.
    let steady = &rows[3..];
    for r in steady {
        assert_eq!(r[1], "AB??CD", "{text}");
        assert_eq!((r[5].as_str(), r[7].as_str()), ("11.1%", "0.22"), "{text}");
    }

    let t = Tmux::new("hostile-names");
    t.start(&format!("{DEMO} --nfsd-clients '{clients}'"));
    let screen = t.wait_for("10.0.0.2's row as in -b", |s| {
        let Some(i) = row_of(s, "10.0.0.2") else {
            return false;
        };
        let line = s.lines().nth(i).unwrap_or_default();
        let cells: Vec<String> = line[2..].split_whitespace().map(str::to_string).collect();
        steady.contains(&cells)
    });
    assert!(!screen.contains('\u{2028}'), "{screen}");
    let _ = std::fs::remove_dir_all(&dir);
}
