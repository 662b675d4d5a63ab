//! The what-if report's JSON contract: every field `nfsdtop whatif
//! --format json` prints is named in docs/json.md's "What-if report".

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn names(v: &serde_json::Value, out: &mut BTreeSet<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                out.insert(k.clone());
                names(x, out);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| names(x, out)),
        _ => {}
    }
}

#[test]
fn every_field_of_a_whatif_report_is_in_the_json_reference() {
    let doc = std::fs::read_to_string(root().join("docs/json.md")).expect("docs/json.md");
    let section = doc
        .split("## What-if report")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("docs/json.md has a What-if report section");
    let dir = std::env::temp_dir().join(format!("nfsdtop-whatif-json-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("burst.nfsdrec");
    let _ = std::fs::remove_file(&rec);
    let nfsdtop = env!("CARGO_BIN_EXE_nfsdtop");
    let o = Command::new(nfsdtop)
        .args([
            "record",
            "--demo",
            "burst",
            "--speed",
            "0",
            "--duration",
            "5",
            "-o",
        ])
        .arg(&rec)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new(nfsdtop)
        .arg("whatif")
        .arg(&rec)
        .args(["--policy", "rr-peer,sparse-flow", "--format", "json"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let mut fields = BTreeSet::new();
    names(&report, &mut fields);
    assert!(fields.contains("burst_p50_us"), "{fields:?}");
    let missing: Vec<_> = fields
        .iter()
        .filter(|f| !section.contains(&format!("`{f}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/json.md's What-if report does not name {missing:?}"
    );
}
