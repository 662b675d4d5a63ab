//! The real `nfsdtop` in tmux: sorting by each column (digit keys and
//! clicks on the titles), the workload view and its byte rates, the
//! filter's address prefixes and `<fair`, and the mouse (rows, wheel),
//! given up again on exit. Every wait polls the screen against a
//! deadline.

mod common;

use common::scenario;
use common::tmux::{row_of, Tmux};

/// Peers in two IPv4 subnets and one IPv6 prefix, and one client with
/// many connections that takes more than its fair share under FIFO.
const SUBNETS: &str = r#"
name = "subnets"
threads = 8
service_ms = 2.0
policy = "flat"

[[client]]
address = "10.20.0.1"
count = 4
connections = 1
inflight = 8

[[client]]
address = "10.20.1.1"
count = 2
connections = 1
inflight = 8

[[client]]
address = "fd00:1234::1"
count = 2
connections = 1
inflight = 8

[[client]]
address = "10.9.0.1"
connections = 64
inflight = 512
"#;

/// The table's rows as cells (the name without its `* ` marker first).
fn rows(screen: &str) -> Vec<Vec<String>> {
    let header = screen.lines().position(|l| l.contains("  NAME"));
    let Some(h) = header else { return Vec::new() };
    screen
        .lines()
        .skip(h + 1)
        .take_while(|l| l.starts_with("  ") || l.starts_with("* "))
        .filter(|l| !l.trim().is_empty())
        .map(|l| l[2..].split_whitespace().map(str::to_string).collect())
        .collect()
}

/// A cell read back as a number: "12.5%", "0.93", "9.2ms", "960us",
/// "1.20s", "4.20KiB/s" (bytes per second); "-" lowest.
fn num(cell: &str) -> f64 {
    if cell == "-" {
        return -1.0;
    }
    let units = [
        ("KiB/s", 1024.0),
        ("MiB/s", 1048576.0),
        ("GiB/s", 1073741824.0),
    ];
    for (unit, scale) in units {
        if let Some(n) = cell.strip_suffix(unit) {
            return n.parse::<f64>().expect("a byte rate") * scale;
        }
    }
    if let Some(n) = cell.strip_suffix("B/s") {
        return n.parse::<f64>().expect("a byte rate");
    }
    let (n, scale) = if let Some(n) = cell.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = cell.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = cell.strip_suffix('s') {
        (n, 1e6)
    } else {
        (cell.trim_end_matches('%'), 1.0)
    };
    n.parse::<f64>()
        .unwrap_or_else(|_| panic!("not a number: {cell}"))
        * scale
}

/// Addresses by value (what the table's name order is).
fn addr_key(name: &str) -> (u8, u128) {
    match name.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(a)) => (0, u32::from(a) as u128),
        Ok(std::net::IpAddr::V6(a)) => (1, u128::from(a)),
        Err(_) => (2, 0),
    }
}

/// Is column `i` of `rows` in order (descending or not)?
fn in_order(rows: &[Vec<String>], i: usize, descending: bool, by_name: bool) -> bool {
    rows.windows(2).all(|w| {
        let o = if by_name {
            addr_key(&w[0][i]).cmp(&addr_key(&w[1][i]))
        } else {
            num(&w[0][i]).total_cmp(&num(&w[1][i]))
        };
        if descending {
            o.is_ge()
        } else {
            o.is_le()
        }
    })
}

#[test]
fn sort_by_each_column_with_its_digit_and_by_a_click_on_its_title() {
    let t = Tmux::new("sort");
    let file = scenario("table-sort", SUBNETS);
    t.start_sized(160, 40, "", &format!("--demo '{}' -d 0.5", file.display()));
    t.wait_for("the table", |s| rows(s).len() == 9);
    // Display order: NAME CLASS CONN DISP/S SHARE FAIR RATIO WAIT50 WAIT99 EXEC.
    let columns = [
        ('1', "NAME", "name", false),
        ('2', "CLASS", "class", false),
        ('3', "CONN", "connections", true),
        ('4', "DISP/S", "dispatches/s", true),
        ('5', "SHARE", "share", true),
        ('6', "FAIR", "fair share", true),
        ('7', "RATIO", "ratio", true),
        ('8', "WAIT50", "wait p50", true),
        ('9', "WAIT99", "wait p99", true),
        ('0', "EXEC", "exec share", true),
    ];
    for (i, (key, title, label, descending)) in columns.iter().enumerate() {
        let arrow = if *descending { "▼" } else { "▲" };
        t.keys(&[&key.to_string()]);
        let s = t.wait_for(&format!("sorted by {label}"), |s| {
            s.contains(&format!("sort: {label} {arrow}"))
                && s.contains(&format!("{title}{arrow}"))
                && rows(s).len() == 9
        });
        let r = rows(&s);
        // Every peer is its own class (no class map): the class column
        // holds the address, in the same order as the name.
        let by_name = i < 2;
        assert!(
            in_order(&r, i, *descending, by_name),
            "{label} {arrow}:\n{s}"
        );
        // The same key again turns the order round.
        let back = if *descending { "▲" } else { "▼" };
        t.keys(&[&key.to_string()]);
        let s = t.wait_for(&format!("{label} reversed"), |s| {
            s.contains(&format!("sort: {label} {back}")) && rows(s).len() == 9
        });
        assert!(
            in_order(&rows(&s), i, !*descending, by_name),
            "{label} {back}:\n{s}"
        );
    }
    // Names by address value: 10.9.0.1 before 10.20.0.1, IPv6 after.
    t.keys(&["1"]);
    let s = t.wait_for("by name", |s| {
        s.contains("sort: name ▲") && rows(s).len() == 9
    });
    let names: Vec<String> = rows(&s).into_iter().map(|r| r[0].clone()).collect();
    assert_eq!(names[0], "10.9.0.1", "{s}");
    assert_eq!(names[8], "fd00:1234::2", "{s}");

    // A click on a title sorts by it (SGR mouse report, 1-based).
    let s = t.screen();
    let (y, line) = s
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains("  NAME"))
        .unwrap();
    let x = line.find("RATIO").unwrap();
    t.mouse_click(x as u16 + 1, y as u16 + 1);
    t.wait_for("sorted by ratio after a click", |s| {
        s.contains("sort: ratio ▼") && s.contains("RATIO▼")
    });
    t.mouse_click(x as u16 + 1, y as u16 + 1);
    t.wait_for("ratio reversed by a second click", |s| {
        s.contains("sort: ratio ▲")
    });

    // Classes: the second column is PEERS.
    t.keys(&["g"]);
    t.wait_for("the class table", |s| s.contains("classes 9/9"));
    t.keys(&["2"]);
    t.wait_for("sorted by peers", |s| {
        s.contains("sort: peers ▼") && s.contains("PEERS▼")
    });
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
}

#[test]
fn filter_by_address_prefix_and_below_fair_share() {
    let t = Tmux::new("filter");
    let file = scenario("table-filter", SUBNETS);
    t.start_sized(160, 40, "", &format!("--demo '{}' -d 0.5", file.display()));
    t.wait_for("the table", |s| rows(s).len() == 9);
    let filter = |text: &str| {
        t.keys(&["/"]);
        t.wait_for("the filter prompt", |s| s.contains("filter: "));
        // Clear whatever was there, then type.
        for _ in 0..40 {
            t.keys(&["BSpace"]);
        }
        t.keys(&["-l", text]);
        t.keys(&["Enter"]);
    };
    let names = |s: &str| -> Vec<String> { rows(s).into_iter().map(|r| r[0].clone()).collect() };

    filter("10.20.0.0/24");
    let s = t.wait_for("the /24", |s| {
        s.contains("| filter: 10.20.0.0/24") && s.contains("peers 4/9")
    });
    let mut got = names(&s);
    got.sort();
    assert_eq!(
        got,
        ["10.20.0.1", "10.20.0.2", "10.20.0.3", "10.20.0.4"],
        "{s}"
    );

    filter("fd00:1234::/32");
    let s = t.wait_for("the IPv6 prefix", |s| s.contains("peers 2/9"));
    let mut got = names(&s);
    got.sort();
    assert_eq!(got, ["fd00:1234::1", "fd00:1234::2"], "{s}");

    // Below fair share: every one of the eight small clients (the heavy
    // one takes more than its turn under FIFO), each ratio under 1.
    filter("<fair");
    let s = t.wait_for("below fair share", |s| {
        s.contains("| filter: <fair") && s.contains("peers 8/9")
    });
    assert!(row_of(&s, "10.9.0.1").is_none(), "{s}");
    let ratio = s
        .lines()
        .find(|l| l.contains("  NAME"))
        .and_then(|h| h.split_whitespace().position(|w| w.starts_with("RATIO")))
        .unwrap();
    for r in rows(&s) {
        assert!(num(&r[ratio]) < 1.0, "{r:?} is not below fair share:\n{s}");
    }

    // Words combine.
    filter("10.20.1.0/24 <fair");
    let s = t.wait_for("both", |s| s.contains("peers 2/9"));
    let mut got = names(&s);
    got.sort();
    assert_eq!(got, ["10.20.1.1", "10.20.1.2"], "{s}");
    t.keys(&["Escape"]);
    t.wait_for("cleared", |s| s.contains("peers 9/9"));
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
}

#[test]
fn clicks_select_rows_the_wheel_scrolls_and_quitting_gives_the_mouse_back() {
    let t = Tmux::new("mouse");
    let file = scenario("table-mouse", SUBNETS);
    t.start_sized(160, 40, "", &format!("--demo '{}' -d 0.5", file.display()));
    t.wait_for("the table", |s| rows(s).len() == 9);
    assert_eq!(t.display("#{mouse_any_flag}"), "1", "mouse reports on");
    // By name, paused: rows stay where they are.
    t.keys(&["1", "p"]);
    let s = t.wait_for("paused, by name", |s| {
        s.contains("PAUSED") && s.contains("sort: name ▲")
    });
    let y = row_of(&s, "10.20.0.3").unwrap();
    t.mouse_click(5, y as u16 + 1);
    t.keys(&["Enter"]);
    t.wait_for("the drill-down of the clicked row", |s| {
        s.contains("10.20.0.3") && s.contains("share vs fair share")
    });
    t.keys(&["Escape"]);
    t.wait_for("the table", |s| s.contains("sort: name"));
    // One notch down: three rows further (10.20.0.3 -> 10.20.1.2).
    t.mouse_wheel_down(5, y as u16 + 1);
    t.keys(&["Enter"]);
    t.wait_for("the drill-down three rows down", |s| {
        s.contains("10.20.1.2") && s.contains("share vs fair share")
    });
    t.keys(&["Escape", "q"]);
    let s = t.wait_for("exit", |s| s.contains("EXIT-STATUS="));
    assert!(s.contains("EXIT-STATUS=0"), "{s}");
    assert_eq!(t.display("#{mouse_any_flag}"), "0", "mouse given back");
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
}

#[test]
fn the_sort_menu_lists_every_column_and_enter_picks_one() {
    let t = Tmux::new("sortmenu");
    let file = scenario("table-sortmenu", SUBNETS);
    t.start_sized(100, 30, "", &format!("--demo '{}' -d 0.5", file.display()));
    t.wait_for("the table", |s| s.contains("sort: share ▼"));
    t.keys(&["F6"]);
    let s = t.wait_for("the sort menu", |s| s.contains("sort by (Enter)"));
    for (digit, title) in [
        (1, "NAME"),
        (2, "CLASS"),
        (3, "CONN"),
        (4, "DISP/S"),
        (5, "SHARE"),
        (6, "FAIR"),
        (7, "RATIO"),
        (8, "WAIT50"),
        (9, "WAIT99"),
        (0, "EXEC"),
    ] {
        let line = s
            .lines()
            .find(|l| l.contains(&format!(" {digit} ")) && l.contains(&format!(" {title} ")))
            .unwrap_or_else(|| panic!("{title} not in the menu:\n{s}"));
        // The column sorted by is marked.
        assert_eq!(line.contains(" * "), title == "SHARE", "{line}");
    }
    // From SHARE, two down: RATIO.
    t.keys(&["Down", "Down", "Enter"]);
    let s = t.wait_for("sorted by ratio", |s| s.contains("sort: ratio ▼"));
    assert!(!s.contains("sort by (Enter)"), "the menu closed:\n{s}");
    // Esc closes it without a change; a digit picks at once.
    t.keys(&["o"]);
    t.wait_for("the menu again", |s| s.contains("sort by (Enter)"));
    t.keys(&["Escape"]);
    let s = t.wait_for("closed", |s| !s.contains("sort by (Enter)"));
    assert!(s.contains("sort: ratio ▼"), "{s}");
    t.keys(&["o", "1"]);
    t.wait_for("by name", |s| {
        s.contains("sort: name ▲") && !s.contains("sort by (Enter)")
    });
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
}

/// Three clients with their own request sizes, served FIFO by
/// connection: 10.30.0.2 (4 connections, 200-byte replies: metadata)
/// makes the most requests, 10.30.0.1 (1 connection, 64 KiB reads) the
/// fewest but the most bytes out, 10.30.0.3 (2, the default 4 KiB reads)
/// is between on both.
const WORKLOAD: &str = r#"
name = "workload"
threads = 8
service_ms = 2.0
policy = "flat"

[[client]]
address = "10.30.0.1"
connections = 1
inflight = 8
reply_bytes = 65736

[[client]]
address = "10.30.0.2"
connections = 4
inflight = 32
request_bytes = 120
reply_bytes = 200

[[client]]
address = "10.30.0.3"
connections = 2
inflight = 16
"#;

/// The position of the column titled `title` among the header's words
/// (a row's cells, the name first).
fn column(screen: &str, title: &str) -> usize {
    let header = screen.lines().find(|l| l.contains("  NAME")).unwrap();
    header
        .split_whitespace()
        .position(|w| w.trim_end_matches(['▼', '▲']) == title)
        .unwrap_or_else(|| panic!("no {title} in {header:?}"))
}

#[test]
fn the_workload_view_sorts_by_ops_and_bytes_and_fits_80x24() {
    let t = Tmux::new("workload");
    let file = scenario("table-workload", WORKLOAD);
    t.start_sized(80, 24, "", &format!("--demo '{}' -d 0.5", file.display()));
    t.wait_for("the fairness table", |s| {
        s.contains("| fairness | sort: share ▼") && rows(s).len() == 3
    });
    t.keys(&["v"]);
    let s = t.wait_for("the workload view", |s| {
        s.contains("| workload | sort: share ▼") && s.contains("OUT/S") && rows(s).len() == 3
    });
    // NAME CLASS OPS/S IN/S OUT/S EXEC SHARE: the rates and the share at
    // 80 columns, the fairness columns gone, every line whole.
    for title in ["NAME", "CLASS", "OPS/S", "IN/S", "OUT/S", "EXEC", "SHARE"] {
        column(&s, title);
    }
    assert!(!s.contains("RATIO"), "{s}");
    let whole = |s: &str| {
        let n = s
            .lines()
            .find(|l| l.contains("  NAME"))
            .unwrap()
            .split_whitespace()
            .count();
        rows(s).iter().all(|r| r.len() == n)
            && s.lines().all(|l| l.chars().count() <= 80)
            && rows(s).iter().all(|r| r[2..5].iter().all(|c| num(c) > 0.0))
    };
    assert!(whole(&s), "a line cut:\n{s}");
    let names = |s: &str| -> Vec<String> { rows(s).into_iter().map(|r| r[0].clone()).collect() };

    // By OPS/S (the 3rd column here, after NAME and CLASS): most
    // connections, most requests.
    t.keys(&["4"]);
    let s = t.wait_for("sorted by ops/s", |s| {
        s.contains("sort: ops/s ▼") && s.contains("OPS/S▼") && rows(s).len() == 3
    });
    let ops = column(&s, "OPS/S");
    assert!(in_order(&rows(&s), ops, true, false), "{s}");
    assert_eq!(names(&s), ["10.30.0.2", "10.30.0.3", "10.30.0.1"], "{s}");
    assert!(whole(&s), "a line cut:\n{s}");

    // By OUT/S: the 64 KiB reads first, the metadata last, whatever
    // their request counts.
    t.keys(&["6"]);
    let s = t.wait_for("sorted by bytes out/s", |s| {
        s.contains("sort: bytes out/s ▼") && s.contains("OUT/S▼") && rows(s).len() == 3
    });
    let out = column(&s, "OUT/S");
    assert!(in_order(&rows(&s), out, true, false), "{s}");
    assert_eq!(names(&s), ["10.30.0.1", "10.30.0.3", "10.30.0.2"], "{s}");
    // Again: the other way round.
    t.keys(&["6"]);
    let s = t.wait_for("bytes out/s reversed", |s| {
        s.contains("sort: bytes out/s ▲") && rows(s).len() == 3
    });
    assert_eq!(names(&s), ["10.30.0.2", "10.30.0.3", "10.30.0.1"], "{s}");

    // The sort menu lists the workload view's columns.
    t.keys(&["o"]);
    let s = t.wait_for("the sort menu", |s| s.contains("sort by (Enter)"));
    assert!(s.contains(" 5   IN/S ") && s.contains(" 6 * OUT/S "), "{s}");
    t.keys(&["Escape"]);
    t.wait_for("the menu closed", |s| !s.contains("sort by (Enter)"));

    // The drill-down: requests and bytes, since start and per second,
    // on a line of its own, whole at 80 columns.
    t.keys(&["Home", "Enter"]);
    let s = t.wait_for("the drill-down", |s| {
        s.contains("since start:") && s.contains("requests ")
    });
    let line = s.lines().find(|l| l.starts_with("requests ")).unwrap();
    assert!(line.contains("  in ") && line.contains("  out "), "{s}");
    assert!(line.trim_end().ends_with("B/s)"), "cut: {line:?}\n{s}");

    // Back to fairness: OUT/S is not shown there, so the sort goes back
    // to the share.
    t.keys(&["Escape", "v"]);
    let s = t.wait_for("the fairness view", |s| {
        s.contains("| fairness | sort: share ▼") && s.contains("RATIO") && rows(s).len() == 3
    });
    assert!(!s.contains("OUT/S"), "{s}");
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
}
