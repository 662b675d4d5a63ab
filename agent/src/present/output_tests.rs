//! Tests of the batch output: the JSON record read back as the typed
//! record, the workload fields and their absence, names in text and CSV,
//! CSV cells, and renamed fields failing to read.

use super::*;
use crate::model::ClientName;

fn snapshot() -> Snapshot {
    let mut s = Snapshot::default();
    s.totals.dispatches = 7;
    s.peers.push(EntityStats {
        name: "10.0.0.2".into(),
        class: "default".into(),
        dispatches: 7,
        entitled: 3.5,
        fairness: Some(2.0),
        connections: 8,
        ..EntityStats::default()
    });
    s
}

/// A CSV row up to its host name: without the columns added after the
/// names (`Csv::after_names`; none has a comma in it).
fn names_last(row: &str) -> &str {
    let late = crate::present::fields::csv_columns(true).count();
    let mut end = row.len();
    for _ in 0..late {
        end = row[..end].rfind(',').expect("a late column");
    }
    &row[..end]
}

#[test]
fn text_and_csv_name_the_peers_client_only_where_known() {
    let mut s = snapshot();
    let plain = text_block(&s, EntityKind::Peer, None);
    assert!(!plain.contains("CLIENT"), "{plain}");
    s.peers[0].client_names = vec![
        ClientName {
            name: "Linux NFSv4.2 web1, with \"quotes\"".into(),
            minor_version: Some(2),
            implementation: None,
        },
        ClientName {
            name: "other".into(),
            minor_version: Some(1),
            implementation: None,
        },
    ];
    let text = text_block(&s, EntityKind::Peer, None);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[2].ends_with(" CLIENT"), "{text}");
    assert!(lines[3].ends_with(" web1, with \"quotes\" +1"), "{text}");
    let csv = csv_rows(&s, EntityKind::Peer, None);
    let row = names_last(csv.lines().next().unwrap());
    assert!(
        row.ends_with(",\"Linux NFSv4.2 web1, with \"\"quotes\"\"; other\","),
        "{row}"
    );
    // The same number of columns as the header, total row included.
    let cells = |l: &str| l.split(',').count();
    let total = csv.lines().nth(1).unwrap();
    assert_eq!(cells(total), cells(&csv_header()), "{total}");
    s.peers[0].client_names.clear();
    s.peers[0].hostname = Some("web1.example".into());
    let text = text_block(&s, EntityKind::Peer, None);
    assert!(
        text.lines().nth(3).unwrap().ends_with(" web1.example"),
        "{text}"
    );
    let row = csv_rows(&s, EntityKind::Peer, None);
    assert!(
        names_last(row.lines().next().unwrap()).ends_with(",,web1.example"),
        "{row}"
    );
}

#[test]
fn a_batch_json_line_reads_back_as_the_typed_record() {
    let line = json_line(&snapshot(), EntityKind::Peer, None);
    let rec: BatchRecord<'static> = serde_json::from_str(&line).expect("parses");
    assert_eq!(rec.totals.dispatches, 7);
    assert_eq!(rec.entities.len(), 1);
    let e = &rec.entities[0];
    assert_eq!((e.name.as_str(), e.kind), ("10.0.0.2", EntityKind::Peer));
    assert_eq!((e.dispatches, e.entitled, e.connections), (7, 3.5, 8));
    assert_eq!(e.fairness, Some(2.0));
}

#[test]
fn workload_fields_read_back_and_are_none_on_older_lines() {
    let mut s = snapshot();
    s.peers[0].requests = 5;
    s.peers[0].request_rate = 2.5;
    s.peers[0].bytes_in = Some(640);
    s.peers[0].bytes_in_rate = Some(320.0);
    let line = json_line(&s, EntityKind::Peer, None);
    // Not measured is null on the wire, never 0.
    assert!(line.contains("\"bytes_out\":null"), "{line}");
    let rec: BatchRecord<'static> = serde_json::from_str(&line).unwrap();
    let e = &rec.entities[0];
    assert!(e.has("requests") && e.has("request_rate"));
    assert_eq!((e.requests, e.request_rate), (5, 2.5));
    assert_eq!((e.bytes_in, e.bytes_out), (Some(640), None));
    assert_eq!((e.bytes_in_rate, e.bytes_out_rate), (Some(320.0), None));
    // A line from before the fields: it has none of them; the bytes read
    // as None, not 0.
    let mut v: serde_json::Value = serde_json::from_str(&line).unwrap();
    let o = v["entities"][0].as_object_mut().unwrap();
    for k in [
        "requests",
        "request_rate",
        "bytes_in",
        "bytes_out",
        "bytes_in_rate",
        "bytes_out_rate",
    ] {
        assert!(o.remove(k).is_some(), "{k}");
    }
    let old: BatchRecord<'static> = serde_json::from_value(v).unwrap();
    let e = &old.entities[0];
    assert!(!e.has("requests") && !e.has("request_rate") && !e.has("bytes_in"));
    assert_eq!(e.bytes_in, None);
    assert_eq!(e.dispatches, 7);
}

/// Bytes not measured are empty cells, never 0; measured ones raw.
#[test]
fn csv_workload_cells_are_raw_or_empty() {
    let mut s = snapshot();
    s.peers[0].requests = 5;
    s.peers[0].request_rate = 2.5;
    let row = |s: &Snapshot| {
        let rows = csv_rows(s, EntityKind::Peer, None);
        let cells: Vec<String> = rows
            .lines()
            .map(|l| l.split(',').skip(16).take(6).collect::<Vec<_>>().join(","))
            .collect();
        cells
    };
    assert_eq!(row(&s), ["5,2.500,,,,", ",2.500,,,,"]);
    s.peers[0].bytes_in = Some(1000);
    s.peers[0].bytes_out = Some(0);
    s.peers[0].bytes_in_rate = Some(500.0);
    s.peers[0].bytes_out_rate = Some(0.0);
    assert_eq!(
        row(&s),
        ["5,2.500,1000,0,500.000,0.000", ",2.500,,,500.000,0.000"]
    );
    assert_eq!(csv_header().split(',').count(), 29);
}

#[test]
fn a_renamed_field_fails_to_read_instead_of_reading_as_zero() {
    let line = json_line(&snapshot(), EntityKind::Peer, None);
    for (from, to) in [
        ("\"lost_dispatches\"", "\"lost_dispatch\""),
        ("\"entitled\"", "\"entitlement\""),
    ] {
        assert!(line.contains(from));
        let renamed = line.replace(from, to);
        let err = serde_json::from_str::<BatchRecord<'static>>(&renamed)
            .expect_err("a missing field is an error");
        assert!(err.to_string().contains("missing field"), "{err}");
    }
}

/// OWASP's CSV injection: a text cell a spreadsheet would read as a
/// formula is prefixed with `'` and quoted; other cells are as they were.
#[test]
fn csv_cells_that_would_be_formulas_are_neutralised() {
    let mut s = snapshot();
    for (hostile, cell) in [
        ("=cmd|' /C calc'!A0", "\"'=cmd|' /C calc'!A0\""),
        ("+1+1", "\"'+1+1\""),
        ("-2+3", "\"'-2+3\""),
        ("@SUM(A1)", "\"'@SUM(A1)\""),
        (
            "=HYPERLINK(\"x\",\"y\")",
            "\"'=HYPERLINK(\"\"x\"\",\"\"y\"\")\"",
        ),
        ("lab-1", "lab-1"),
    ] {
        s.peers[0].class = hostile.into();
        s.peers[0].hostname = Some(hostile.into());
        let csv = csv_rows(&s, EntityKind::Peer, None);
        let row = names_last(csv.lines().next().unwrap());
        assert!(
            row.contains(&format!(",{cell},8,")),
            "class {hostile:?}: {row}"
        );
        assert!(
            row.ends_with(&format!(",,{cell}")),
            "host {hostile:?}: {row}"
        );
    }
    // A tab or carriage return first is no formula either: shown as `?`.
    s.peers[0].class = "\t=1".into();
    let csv = csv_rows(&s, EntityKind::Peer, None);
    assert!(csv.contains(",?=1,8,"), "{csv}");
}

/// A name with a line separator, a soft hyphen or a bidi override is
/// shown with `?` in the text and the CSV (one line, one cell a name),
/// and the columns after it stay in place; the JSON keeps it as given.
#[test]
fn names_that_would_garble_a_terminal_are_shown_with_question_marks() {
    let mut s = snapshot();
    let plain = text_block(&s, EntityKind::Peer, None);
    s.peers[0].client_names = vec![ClientName {
        name: "Linux NFSv4.2 AB\u{2028}\u{2028}CD\u{00AD}\u{202E}".into(),
        minor_version: Some(2),
        implementation: None,
    }];
    s.peers[0].class = "de\u{202E}fault".into();
    let text = text_block(&s, EntityKind::Peer, None);
    assert_eq!(text.lines().count(), plain.lines().count(), "{text}");
    let row = text.lines().nth(3).unwrap();
    assert!(row.ends_with(" AB??CD??"), "{row}");
    assert!(row.starts_with("10.0.0.2 de?fault "), "{row}");
    let csv = csv_rows(&s, EntityKind::Peer, None);
    assert!(csv.contains(",de?fault,"), "{csv}");
    assert!(csv.contains(",Linux NFSv4.2 AB??CD??,"), "{csv}");
    assert!(!text.contains(['\u{2028}', '\u{00AD}', '\u{202E}']));
    let json = json_line(&s, EntityKind::Peer, None);
    assert!(json.contains("AB\u{2028}\u{2028}CD"), "{json}");
}
