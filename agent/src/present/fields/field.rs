//! What a field of the table is: its value type, and how each surface
//! (CSV, batch text, TUI column, the CSV's `total` row) is told to show
//! it. The entries themselves are the table, in [`super`].

use std::fmt;
use std::hash::{Hash, Hasher};

use super::FIELDS;
use crate::model::{EntityStats, Snapshot};
use crate::present::units::Unit;

/// A field's value as it is kept: counts whole, the rest real.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    Int(u64),
    Real(f64),
}

impl Value {
    pub fn as_f64(self) -> f64 {
        match self {
            Value::Int(n) => n as f64,
            Value::Real(x) => x,
        }
    }
}

/// The field's CSV column.
#[derive(Clone, Copy, Debug)]
pub struct Csv {
    pub header: &'static str,
    /// Decimals of a real value (counts are written whole).
    pub decimals: usize,
    /// After the clients' names and host name, at the end of the row:
    /// columns added since those, so that readers by position still
    /// find the older ones where they were.
    pub after_names: bool,
}

/// Where a TUI view shows the field: `order` among the view's columns
/// (NAME is 0, CLASS or PEERS 1), and `drop`, when the terminal is too
/// narrow, its rank among the columns given up (lowest first; `None`:
/// never). The TUI's own columns hold ranks between (crate `nfsdtop`,
/// `state/columns.rs`).
#[derive(Clone, Copy, Debug)]
pub struct Place {
    pub order: u8,
    pub drop: Option<u8>,
}

/// The field as a TUI column.
#[derive(Clone, Copy, Debug)]
pub struct Tui {
    /// The column's title; in lower case, its name in the preferences
    /// file (a contract: users' files hold it).
    pub title: &'static str,
    /// Its name in "sort: …".
    pub label: &'static str,
    /// Width in cells, with room for the sort arrow.
    pub width: u16,
    /// The fairness view's place, if it shows the field.
    pub fairness: Option<Place>,
    /// The workload view's.
    pub workload: Option<Place>,
}

/// The field as a batch-text column (right-aligned).
#[derive(Clone, Copy, Debug)]
pub struct Text {
    pub title: &'static str,
    pub width: usize,
}

/// The field in the CSV's `total` row (the whole server).
#[derive(Clone, Copy)]
pub enum Total {
    /// Empty: the server has none of its own.
    Empty,
    /// The peers' values added up; empty where no peer has one.
    SumOfPeers,
    /// The server's own.
    Server(fn(&Snapshot) -> Option<Value>),
}

/// One per-entity number, as every surface shows it.
pub struct Field {
    /// Its key in both JSON contracts (docs/json.md), and the field's
    /// identity.
    pub json: &'static str,
    pub unit: Unit,
    pub value: fn(&EntityStats) -> Option<Value>,
    pub csv: Option<Csv>,
    /// Its cell in the CSV's `total` row.
    pub total: Total,
    pub text: Option<Text>,
    pub tui: Option<Tui>,
    /// The per-entity metric family (the name after `nfsdtop_peer_` /
    /// `nfsdtop_class_`) holding it or whose `rate()` gives it; `None`
    /// for numbers of one interval that a counter cannot hold.
    pub prometheus: Option<&'static str>,
    /// What it means, for the manual's COLUMNS (TUI columns) in roff.
    pub doc: &'static str,
}

impl Field {
    /// Its value of `e`, as a float (`None`: not measured, or nothing to
    /// judge).
    pub fn get(&self, e: &EntityStats) -> Option<f64> {
        (self.value)(e).map(Value::as_f64)
    }

    /// Its text for `e` in its unit (TUI cell, batch text).
    pub fn show(&self, e: &EntityStats) -> String {
        self.unit.text(self.get(e))
    }

    /// The sort key of `e`: the value as shown, so rows that show the
    /// same tie (and go by name); `-` below every value.
    pub fn key(&self, e: &EntityStats) -> f64 {
        self.unit.key(self.get(e))
    }

    /// Its CSV cell for `e`: empty where JSON has `null`.
    pub fn csv_cell(&self, e: &EntityStats) -> String {
        self.csv_value((self.value)(e))
    }

    /// Its cell in the CSV's `total` row of `s`.
    pub fn csv_total(&self, s: &Snapshot) -> String {
        let v = match self.total {
            Total::Empty => None,
            Total::SumOfPeers => {
                let mut measured = s.peers.iter().filter_map(|p| (self.value)(p)).peekable();
                measured
                    .peek()
                    .is_some()
                    .then(|| Value::Real(measured.map(Value::as_f64).sum()))
            }
            Total::Server(f) => f(s),
        };
        self.csv_value(v)
    }

    fn csv_value(&self, v: Option<Value>) -> String {
        let d = self.csv.map_or(3, |c| c.decimals);
        match v {
            Some(Value::Int(n)) => n.to_string(),
            Some(Value::Real(x)) => format!("{x:.d$}"),
            None => String::new(),
        }
    }

    /// The entry whose JSON key is `json`.
    pub fn by_json(json: &str) -> Option<&'static Field> {
        FIELDS.iter().find(|f| f.json == json)
    }
}

impl PartialEq for Field {
    fn eq(&self, other: &Field) -> bool {
        self.json == other.json
    }
}

impl Eq for Field {}

impl Hash for Field {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.json.hash(h);
    }
}

impl fmt::Debug for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.json)
    }
}
