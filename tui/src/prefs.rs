//! The interactive UI's preferences, kept between runs as htop keeps its
//! htoprc: sort column and direction, grouping, view, hidden columns and
//! refresh interval, in a small TOML file under the XDG config directory
//! (`$XDG_CONFIG_HOME/nfsdtop/prefs.toml`, else
//! `~/.config/nfsdtop/prefs.toml`):
//!
//! ```toml
//! sort = "ratio"          # a column's title in lower case
//! descending = false
//! group = "class"         # peer | class
//! view = "fairness"       # fairness | workload
//! hidden = ["wait50", "exec"]
//! interval = 2.0          # seconds, 0.05 to 86400
//! ```
//!
//! Read when the UI starts (flags given on the command line win), written
//! when it quits. A file that does not parse, or holds a value nfsdtop
//! cannot use, is ignored as a whole with a warning naming its line, and
//! left as it is (never overwritten).

use std::path::{Path, PathBuf};
use std::time::Duration;

use nfsdtop_agent::model::EntityKind;
use serde::{Deserialize, Serialize};

use crate::state::{Column, State, View};

/// The file's name under `nfsdtop/` in the config directory.
pub const FILE: &str = "prefs.toml";

/// A file larger than this is not preferences (and is not read whole).
const MAX_BYTES: u64 = 64 * 1024;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prefs {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descending: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<f64>,
}

/// Where the preferences live: under `$XDG_CONFIG_HOME`, else
/// `$HOME/.config`; None when neither is set (nothing is kept then).
pub fn path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty() && Path::new(d).is_absolute())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".config"))
        })?;
    Some(base.join("nfsdtop").join(FILE))
}

/// The preferences in `path`: None where there is no file; an error (the
/// path, the line where known, what is wrong) where it cannot be used.
pub fn load(path: &Path) -> Result<Option<Prefs>, String> {
    let shown = path.display();
    let meta = match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{shown}: {e}")),
        Ok(m) => m,
    };
    if !meta.is_file() || meta.len() > MAX_BYTES {
        return Err(format!(
            "{shown}: not a preferences file (a file of at most {MAX_BYTES} bytes)"
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{shown}: {e}"))?;
    let at = |span: Option<std::ops::Range<usize>>| {
        span.map_or(String::new(), |s| {
            format!(
                ":{}",
                text[..s.start.min(text.len())].matches('\n').count() + 1
            )
        })
    };
    let p: Prefs = toml::from_str(&text)
        .map_err(|e| format!("{shown}{}: {}", at(e.span()), e.message().trim()))?;
    p.check().map_err(|(key, why)| {
        let line = text
            .lines()
            .position(|l| l.trim_start().starts_with(key))
            .map_or(String::new(), |i| format!(":{}", i + 1));
        format!("{shown}{line}: {why}")
    })?;
    Ok(Some(p))
}

impl Prefs {
    /// Every value usable, else the key and why not.
    fn check(&self) -> Result<(), (&'static str, String)> {
        if let Some(s) = &self.sort {
            Column::from_key(s).ok_or_else(|| ("sort", unknown_column(s)))?;
        }
        if let Some(g) = &self.group {
            if !matches!(g.as_str(), "peer" | "class") {
                return Err((
                    "group",
                    format!("group {g:?}: expected \"peer\" or \"class\""),
                ));
            }
        }
        if let Some(v) = &self.view {
            if !matches!(v.as_str(), "fairness" | "workload") {
                return Err((
                    "view",
                    format!("view {v:?}: expected \"fairness\" or \"workload\""),
                ));
            }
        }
        for h in self.hidden.iter().flatten() {
            if Column::from_key(h).is_none_or(|c| c == Column::Name) {
                return Err(("hidden", unknown_column(h)));
            }
        }
        if let Some(i) = self.interval {
            if !(i.is_finite() && (0.05..=86_400.0).contains(&i)) {
                return Err((
                    "interval",
                    format!("interval {i}: expected 0.05 to 86400 seconds"),
                ));
            }
        }
        Ok(())
    }

    /// What `st` shows now.
    pub fn of(st: &State) -> Prefs {
        Prefs {
            sort: Some(st.sort.for_table(true).key()),
            descending: Some(st.descending),
            group: Some(st.group.as_str().into()),
            view: Some(st.view.label().into()),
            hidden: Some(st.hidden.iter().map(|c| c.key()).collect()),
            interval: Some(st.interval.as_secs_f64()),
        }
    }

    /// Set `st` to these preferences; the grouping and the interval only
    /// where the command line did not name them (`--group`, `-d`).
    pub fn apply(&self, st: &mut State, group_given: bool, interval_given: bool) {
        if let (Some(g), false) = (&self.group, group_given) {
            st.group = if g == "class" {
                EntityKind::Class
            } else {
                EntityKind::Peer
            };
        }
        if let Some(v) = &self.view {
            st.view = if v == "workload" {
                View::Workload
            } else {
                View::Fairness
            };
        }
        if let Some(c) = self.sort.as_deref().and_then(Column::from_key) {
            if st.view.shows(c) {
                st.sort = c.for_table(st.group == EntityKind::Peer);
                st.descending = c.default_descending();
            }
        }
        if let Some(d) = self.descending {
            st.descending = d;
        }
        if let Some(h) = &self.hidden {
            st.hidden = h.iter().filter_map(|k| Column::from_key(k)).collect();
        }
        if let (Some(i), false) = (self.interval, interval_given) {
            st.interval = Duration::from_secs_f64(i);
        }
    }

    /// Write to `path` (its directory made if need be), whole or not at
    /// all: a temporary file renamed over it.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let text = toml::to_string(self).map_err(std::io::Error::other)?;
        let tmp = path.with_extension("toml.tmp");
        std::fs::write(
            &tmp,
            format!("# nfsdtop's preferences (written on quit)\n{text}"),
        )?;
        std::fs::rename(&tmp, path)
    }
}

fn unknown_column(name: &str) -> String {
    format!(
        "no column {name:?} (use a column's title in lower case: ratio, share, fair, wait99, \
         disp/s, ...)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("nfsdtop-prefs-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d.join("nfsdtop").join(FILE)
    }

    #[test]
    fn what_the_ui_shows_is_saved_and_read_back() {
        let mut st = State::new(Duration::from_secs(1), None);
        st.group = EntityKind::Class;
        st.sort = Column::RATIO;
        st.descending = false;
        st.hidden = vec![Column::WAIT_P50, Column::EXEC];
        st.interval = Duration::from_secs(2);
        let p = tmp("round");
        Prefs::of(&st).save(&p).unwrap();
        let back = load(&p).unwrap().unwrap();
        let mut fresh = State::new(Duration::from_secs(1), None);
        back.apply(&mut fresh, false, false);
        assert_eq!(fresh.group, EntityKind::Class);
        assert_eq!((fresh.sort, fresh.descending), (Column::RATIO, false));
        assert_eq!(fresh.hidden, [Column::WAIT_P50, Column::EXEC]);
        assert_eq!(fresh.interval, Duration::from_secs(2));
        // Flags given win over the file.
        let mut flagged = State::new(Duration::from_millis(500), None);
        back.apply(&mut flagged, true, true);
        assert_eq!(flagged.group, EntityKind::Peer);
        assert_eq!(flagged.interval, Duration::from_millis(500));
        let _ = std::fs::remove_dir_all(p.parent().unwrap().parent().unwrap());
    }

    #[test]
    fn a_bad_file_is_refused_with_its_line_and_none_is_nothing() {
        let p = tmp("bad");
        assert_eq!(load(&p), Ok(None));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        for (text, want) in [
            ("sort = \"ratio\"\ngroup = 3\n", ":2: invalid type"),
            ("sort = \"speed\"\n", ":1: no column \"speed\""),
            ("interval = 0.0\n", ":1: interval 0: expected"),
            ("hidden = [\"name\"]\n", ":1: no column \"name\""),
            ("colour = \"red\"\n", ":1: unknown field"),
            ("[[[", ":1:"),
        ] {
            std::fs::write(&p, text).unwrap();
            let e = load(&p).unwrap_err();
            assert!(e.starts_with(&p.display().to_string()), "{e}");
            assert!(e.contains(want), "{text:?}: {e}");
        }
        let _ = std::fs::remove_dir_all(p.parent().unwrap().parent().unwrap());
    }
}
