//! Everything the interactive UI knows, apart from the terminal: the
//! snapshot on display (frozen while paused), history for the charts,
//! grouping, sort, filter, selection and scrolling, overlays, and the
//! state of the link to the source. Keys come in as crossterm events and go
//! out as [`Action`]s, so the whole thing is testable without a terminal.
//!
//! Cost per snapshot is one pass to record history, one sort of the
//! filtered rows and one run of the lints; drawing then touches only the
//! rows on screen (10,000 peers stay cheap).

mod chooser;
pub mod columns;
pub mod filter;
pub mod history;
mod input;
mod link;
pub mod whatif;

use std::time::{Duration, Instant};

use nfsdtop_agent::model::{EntityKind, EntityStats, Snapshot};
use nfsdtop_agent::pipeline::playback;
use nfsdtop_agent::present::output;

pub use columns::{Column, View};
pub use filter::Filter;
pub use history::History;
pub use input::Geometry;
pub use link::{served_kind, LinkLabel, RemoteStatus};

use crate::warnings::{self, Lint, Steady, Warning};

/// The refresh intervals `+` and `-` step through.
pub const INTERVAL_STEPS: [f64; 9] = [0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0];

/// Lines of detail each lint keeps (the warnings panel scrolls through
/// them; past this, "... and N more").
pub const MAX_WARNING_DETAILS: usize = 1000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Screen {
    Table,
    /// Drill-down into one entity, by name and network namespace (it
    /// may vanish and come back; one address can be a peer in two
    /// namespaces).
    Detail {
        kind: EntityKind,
        name: String,
        netns: u32,
    },
}

/// What the event loop must do after a key.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Action {
    None,
    /// Something changed on screen.
    Redraw,
    Quit,
    /// Ask the source for snapshots this often.
    SetInterval(Duration),
    /// Steer a demo or replay (see `nfsdtop_agent::pipeline::playback`).
    Playback(playback::Command),
}

/// How far one seek (Left/Right) moves a demo or replay.
pub const SEEK: Duration = Duration::from_secs(10);

pub struct State {
    pub group: EntityKind,
    /// Which columns the table shows (`v` switches).
    pub view: View,
    pub sort: Column,
    pub descending: bool,
    /// Applied filter (see [`Filter`]: substrings, address prefixes,
    /// `<fair`).
    pub filter: String,
    /// Some while the user is typing a filter.
    pub filter_input: Option<String>,
    /// Words of the filter in effect that were not understood, each with
    /// why (the footer says them).
    pub filter_problems: Vec<String>,
    pub screen: Screen,
    pub show_help: bool,
    /// Some while the sort menu (F6) is open: the column under its cursor
    /// (an index into the view's columns).
    pub sort_menu: Option<usize>,
    /// Some while the column chooser (`c`) is open: its cursor (an index
    /// into [`State::choosable`]).
    pub column_menu: Option<usize>,
    /// Columns the chooser hid.
    pub hidden: Vec<Column>,
    pub show_warnings: bool,
    /// The other RPC services' panel (`R`).
    pub show_services: bool,
    pub paused: bool,
    /// A demo or replay under playback control: what the pipeline last
    /// said (the keys steer the source rather than freeze the display).
    pub playback: Option<playback::Status>,
    pub interval: Duration,
    pub notice: Option<String>,
    /// None for a local source.
    pub remote: Option<RemoteStatus>,
    pub ended: Option<Result<(), String>>,
    /// A one-off message for the footer (e.g. "interval 2s").
    pub message: Option<String>,
    pub history: History,
    pub warnings: Vec<Warning>,
    /// Show at most this many rows (`--top N`), after sorting.
    pub top: Option<usize>,
    /// Predicted columns under another policy (a replay with `--whatif`).
    pub whatif: Option<whatif::WhatIf>,
    /// Rows of the table: indices into the shown snapshot's entities of
    /// the current group, filtered and sorted.
    pub(super) rows: Vec<u32>,
    /// Index (into the entities) of the top offender, if any.
    pub(super) offender: Option<u32>,
    /// Grouped by class: each class's peer count, by entity index.
    pub(super) peer_counts: Vec<u32>,
    pub(super) selected: usize,
    pub(super) offset: usize,
    /// The selection follows its entity (name and namespace) across
    /// re-sorts.
    pub(super) selected_name: Option<(String, u32)>,
    /// Where the table was last drawn (None off the table).
    pub geometry: Option<Geometry>,
    /// Rows that fit on screen at the last draw (for PgUp/PgDn).
    pub(super) page: usize,
    /// First line of the warnings panel on screen, and how many fit.
    pub warnings_scroll: usize,
    pub warnings_page: usize,
    pub(super) shown: Option<Box<Snapshot>>,
    pub(super) shown_seq: u64,
    pub(super) pending: Option<(Box<Snapshot>, u64)>,
    pub(super) lints: Vec<Box<dyn Lint + Send>>,
    /// How far below its share each entity has been over the refreshes
    /// shown (warnings and row colours follow it, not one ratio).
    pub(super) steady: Steady,
    pub now: Instant,
    pub(super) last_snapshot_at: Option<Instant>,
    pub(super) started: Instant,
    pub snapshots_received: u64,
}

impl State {
    pub fn new(interval: Duration, notice: Option<String>) -> State {
        let now = Instant::now();
        State {
            group: EntityKind::Peer,
            view: View::Fairness,
            sort: Column::SHARE,
            descending: true,
            filter: String::new(),
            filter_input: None,
            filter_problems: Vec::new(),
            screen: Screen::Table,
            show_help: false,
            sort_menu: None,
            column_menu: None,
            hidden: Vec::new(),
            show_warnings: false,
            show_services: false,
            paused: false,
            playback: None,
            interval,
            notice,
            remote: None,
            ended: None,
            message: None,
            history: History::default(),
            warnings: Vec::new(),
            top: None,
            whatif: None,
            rows: Vec::new(),
            offender: None,
            peer_counts: Vec::new(),
            selected: 0,
            offset: 0,
            selected_name: None,
            geometry: None,
            page: 10,
            warnings_scroll: 0,
            warnings_page: 10,
            shown: None,
            shown_seq: 0,
            pending: None,
            lints: warnings::default_lints(),
            steady: Steady::default(),
            now,
            last_snapshot_at: None,
            started: now,
            snapshots_received: 0,
        }
    }

    // ---- data in ----

    /// A new snapshot: recorded in the history at once; shown unless paused.
    pub fn on_snapshot(&mut self, mut s: Box<Snapshot>) {
        // Names as the terminal can draw them, before anything keeps them
        // (a no-op pass for clean text).
        nfsdtop_agent::text::displayable_snapshot(&mut s);
        self.snapshots_received += 1;
        self.last_snapshot_at = Some(self.now);
        let seq = self.history.record(&s);
        if self.paused {
            self.pending = Some((s, seq));
        } else {
            self.show(s, seq);
        }
    }

    pub fn on_status(&mut self, status: RemoteStatus) {
        self.remote = Some(status);
    }

    pub fn on_ended(&mut self, result: Result<(), String>) {
        self.ended = Some(result);
    }

    /// The clock, for staleness (the event loop calls this every turn).
    pub fn tick(&mut self, now: Instant) {
        self.now = now;
    }

    pub(super) fn show(&mut self, s: Box<Snapshot>, seq: u64) {
        self.steady.update(&s);
        self.shown = Some(s);
        self.shown_seq = seq;
        self.refresh();
    }

    /// Re-derive rows, offender and warnings: after a new snapshot or a
    /// change of group, sort or filter. Never on a plain redraw.
    pub(super) fn refresh(&mut self) {
        let Some(s) = self.shown.as_deref() else {
            self.rows.clear();
            self.offender = None;
            self.warnings.clear();
            return;
        };
        let list = s.entities(self.group);
        let filter = Filter::parse(self.active_filter());
        self.filter_problems = filter.problems().to_vec();
        self.rows.clear();
        self.rows.extend(
            list.iter()
                .enumerate()
                .filter(|(_, e)| filter.matches(e))
                .map(|(i, _)| i as u32),
        );
        self.peer_counts = match self.group {
            EntityKind::Class => output::peer_counts(s),
            EntityKind::Peer => Vec::new(),
        };
        let (col, desc) = (self.sort, self.descending);
        col.sort(list, &self.peer_counts, &mut self.rows, desc);
        if let Some(n) = self.top {
            self.rows.truncate(n);
        }
        self.offender = warnings::top_offender(list).map(|i| i as u32);
        self.warnings = warnings::run(
            &self.lints,
            s,
            self.group,
            &self.steady,
            MAX_WARNING_DETAILS,
        );
        // Keep the selection on its entity if it is still listed.
        let by_name = self.selected_name.as_ref().and_then(|(n, ns)| {
            self.rows.iter().position(|i| {
                let e = &list[*i as usize];
                e.name == *n && e.netns == *ns
            })
        });
        self.selected = match by_name {
            Some(p) => p,
            None => self.selected.min(self.rows.len().saturating_sub(1)),
        };
        self.remember_selection();
    }

    pub(super) fn remember_selection(&mut self) {
        self.selected_name = self.selected_entity().map(|e| (e.name.clone(), e.netns));
    }

    // ---- data out (for the views) ----

    pub fn snapshot(&self) -> Option<&Snapshot> {
        self.shown.as_deref()
    }

    /// The history sequence number of the snapshot on display.
    pub fn shown_seq(&self) -> u64 {
        self.shown_seq
    }

    pub fn entities(&self) -> &[EntityStats] {
        self.shown
            .as_deref()
            .map(|s| s.entities(self.group))
            .unwrap_or(&[])
    }

    pub fn rows(&self) -> &[u32] {
        &self.rows
    }

    /// How far below its fair share `e` steadily is: 0 fair enough, 1
    /// under it (yellow), 2 below half of it (red). A starved entity is
    /// at 2 at once.
    pub fn ratio_level(&self, e: &EntityStats) -> u8 {
        if warnings::is_starved(e) {
            return warnings::steady::BELOW_HALF;
        }
        self.steady.level(e)
    }

    pub fn is_offender(&self, index: u32) -> bool {
        self.offender == Some(index)
    }

    /// How many peers the class at `index` holds (None for peers).
    pub fn peer_count(&self, index: u32) -> Option<u32> {
        self.peer_counts.get(index as usize).copied()
    }

    pub fn offender(&self) -> Option<&EntityStats> {
        self.offender.and_then(|i| self.entities().get(i as usize))
    }

    pub fn selected(&self) -> usize {
        self.selected
    }

    pub fn offset(&self) -> usize {
        self.offset
    }

    pub fn selected_entity(&self) -> Option<&EntityStats> {
        let i = *self.rows.get(self.selected)?;
        self.entities().get(i as usize)
    }

    /// The entity the drill-down shows, if it is in the shown snapshot.
    pub fn detail_entity(&self) -> Option<&EntityStats> {
        match &self.screen {
            Screen::Detail { kind, name, netns } => self
                .shown
                .as_deref()?
                .entities(*kind)
                .iter()
                .find(|e| &e.name == name && e.netns == *netns),
            Screen::Table => None,
        }
    }

    /// The filter in effect (what is being typed, while typing).
    pub fn active_filter(&self) -> &str {
        self.filter_input.as_deref().unwrap_or(&self.filter)
    }

    /// Fit the scroll offset to `height` visible rows, keeping the
    /// selection on screen. Called by the table view before drawing.
    pub fn fit(&mut self, height: usize) {
        self.page = height.max(1);
        if self.selected < self.offset {
            self.offset = self.selected;
        } else if self.selected >= self.offset + self.page {
            self.offset = self.selected + 1 - self.page;
        }
        let max_offset = self.rows.len().saturating_sub(self.page);
        self.offset = self.offset.min(max_offset);
    }

    /// How old the newest snapshot received is (None before the first).
    pub fn data_age(&self) -> Option<Duration> {
        self.last_snapshot_at
            .map(|t| self.now.saturating_duration_since(t))
    }
}

#[cfg(test)]
mod tests;
