//! Everything the interactive UI knows, apart from the terminal: the
//! snapshot on display (frozen while paused), history for the charts,
//! grouping, sort, filter, selection and scrolling, overlays, and the
//! state of the link to the source. Keys come in as crossterm events and go
//! out as [`Action`]s, so the whole thing is testable without a terminal.
//!
//! Cost per snapshot is one pass to record history, one sort of the
//! filtered rows and one run of the lints; drawing then touches only the
//! rows on screen (10,000 peers stay cheap).

pub mod columns;
pub mod history;
pub mod whatif;

use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use nfsdtop_agent::model::{EntityKind, EntityStats, Snapshot};
use nfsdtop_agent::output;

pub use columns::Column;
pub use history::History;

use crate::warnings::{self, Lint, Warning};

/// The refresh intervals `+` and `-` step through.
pub const INTERVAL_STEPS: [f64; 9] = [0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0];

/// Lines of detail each lint keeps (the warnings panel scrolls through
/// them; past this, "... and N more").
pub const MAX_WARNING_DETAILS: usize = 1000;

/// How a remote source's link is doing (local sources have none).
#[derive(Clone, Debug, PartialEq)]
pub enum RemoteStatus {
    Connecting {
        url: String,
    },
    Connected {
        url: String,
    },
    /// The last attempt failed or the stream ended; the next attempt is
    /// `retry_in` away.
    Reconnecting {
        url: String,
        attempt: u32,
        retry_in: Duration,
        error: String,
    },
}

impl std::fmt::Display for RemoteStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RemoteStatus::Connecting { url } => write!(f, "connecting to {url}"),
            RemoteStatus::Connected { url } => write!(f, "connected to {url}"),
            RemoteStatus::Reconnecting {
                url,
                attempt,
                retry_in,
                error,
            } => write!(
                f,
                "reconnecting to {url} in {:.1}s (attempt {attempt}): {error}",
                retry_in.as_secs_f64()
            ),
        }
    }
}

/// What the header says about the link, worst last.
#[derive(Clone, Debug, PartialEq)]
pub enum LinkLabel {
    /// A local source delivering on time: nothing to say.
    Ok,
    Connecting,
    Connected,
    /// No snapshot for this long (more than three intervals).
    Stale(Duration),
    Reconnecting {
        attempt: u32,
        error: String,
    },
    /// The source stopped: end of a replay, or an error.
    Ended(Result<(), String>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Screen {
    Table,
    /// Drill-down into one entity, by name (it may vanish and come back).
    Detail {
        kind: EntityKind,
        name: String,
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
}

pub struct State {
    pub group: EntityKind,
    pub sort: Column,
    pub descending: bool,
    /// Applied filter (substring of name or class, case-insensitive).
    pub filter: String,
    /// Some while the user is typing a filter.
    pub filter_input: Option<String>,
    pub screen: Screen,
    pub show_help: bool,
    pub show_warnings: bool,
    pub paused: bool,
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
    rows: Vec<u32>,
    /// Index (into the entities) of the top offender, if any.
    offender: Option<u32>,
    /// Grouped by class: each class's peer count, by entity index.
    peer_counts: Vec<u32>,
    selected: usize,
    offset: usize,
    /// The selection follows its entity across re-sorts.
    selected_name: Option<String>,
    /// Rows that fit on screen at the last draw (for PgUp/PgDn).
    page: usize,
    /// First line of the warnings panel on screen, and how many fit.
    pub warnings_scroll: usize,
    pub warnings_page: usize,
    shown: Option<Box<Snapshot>>,
    shown_seq: u64,
    pending: Option<(Box<Snapshot>, u64)>,
    lints: Vec<Box<dyn Lint + Send>>,
    pub now: Instant,
    last_snapshot_at: Option<Instant>,
    started: Instant,
    pub snapshots_received: u64,
}

impl State {
    pub fn new(interval: Duration, notice: Option<String>) -> State {
        let now = Instant::now();
        State {
            group: EntityKind::Peer,
            sort: Column::Share,
            descending: true,
            filter: String::new(),
            filter_input: None,
            screen: Screen::Table,
            show_help: false,
            show_warnings: false,
            paused: false,
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
            page: 10,
            warnings_scroll: 0,
            warnings_page: 10,
            shown: None,
            shown_seq: 0,
            pending: None,
            lints: warnings::default_lints(),
            now,
            last_snapshot_at: None,
            started: now,
            snapshots_received: 0,
        }
    }

    // ---- data in ----

    /// A new snapshot: recorded in the history at once; shown unless paused.
    pub fn on_snapshot(&mut self, s: Box<Snapshot>) {
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

    fn show(&mut self, s: Box<Snapshot>, seq: u64) {
        self.shown = Some(s);
        self.shown_seq = seq;
        self.refresh();
    }

    /// Re-derive rows, offender and warnings: after a new snapshot or a
    /// change of group, sort or filter. Never on a plain redraw.
    fn refresh(&mut self) {
        let Some(s) = self.shown.as_deref() else {
            self.rows.clear();
            self.offender = None;
            self.warnings.clear();
            return;
        };
        let list = s.entities(self.group);
        let needle = self.active_filter().to_lowercase();
        self.rows.clear();
        self.rows.extend(
            list.iter()
                .enumerate()
                .filter(|(_, e)| {
                    needle.is_empty()
                        || e.name.to_lowercase().contains(&needle)
                        || e.class.to_lowercase().contains(&needle)
                })
                .map(|(i, _)| i as u32),
        );
        let (col, desc) = (self.sort, self.descending);
        col.sort(list, &mut self.rows, desc);
        if let Some(n) = self.top {
            self.rows.truncate(n);
        }
        self.offender = warnings::top_offender(list).map(|i| i as u32);
        self.peer_counts = match self.group {
            EntityKind::Class => output::peer_counts(s),
            EntityKind::Peer => Vec::new(),
        };
        self.warnings = warnings::run(&self.lints, s, self.group, MAX_WARNING_DETAILS);
        // Keep the selection on its entity if it is still listed.
        let by_name = self.selected_name.as_deref().and_then(|n| {
            self.rows
                .iter()
                .position(|i| list[*i as usize].name.as_str() == n)
        });
        self.selected = match by_name {
            Some(p) => p,
            None => self.selected.min(self.rows.len().saturating_sub(1)),
        };
        self.remember_selection();
    }

    fn remember_selection(&mut self) {
        self.selected_name = self.selected_entity().map(|e| e.name.clone());
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
            Screen::Detail { kind, name } => self
                .shown
                .as_deref()?
                .entities(*kind)
                .iter()
                .find(|e| &e.name == name),
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

    pub fn link(&self) -> LinkLabel {
        if let Some(r) = &self.ended {
            return LinkLabel::Ended(r.clone());
        }
        if let Some(RemoteStatus::Reconnecting { attempt, error, .. }) = &self.remote {
            return LinkLabel::Reconnecting {
                attempt: *attempt,
                error: error.clone(),
            };
        }
        let since = self
            .now
            .saturating_duration_since(self.last_snapshot_at.unwrap_or(self.started));
        // The source's own interval may differ from ours (a remote agent).
        let interval = self
            .shown
            .as_deref()
            .map(|s| s.interval_s)
            .filter(|i| i.is_finite() && *i > 0.0)
            .map(|i| Duration::from_secs_f64(i.min(86_400.0)).max(self.interval))
            .unwrap_or(self.interval);
        if since > interval * 3 {
            return LinkLabel::Stale(since);
        }
        match &self.remote {
            Some(RemoteStatus::Connecting { .. }) => LinkLabel::Connecting,
            Some(RemoteStatus::Connected { .. }) => LinkLabel::Connected,
            _ => LinkLabel::Ok,
        }
    }

    // ---- keys ----

    pub fn on_key(&mut self, key: KeyEvent) -> Action {
        if key.kind == KeyEventKind::Release {
            return Action::None;
        }
        if key.modifiers.contains(KeyModifiers::CONTROL)
            && matches!(key.code, KeyCode::Char('c') | KeyCode::Char('C'))
        {
            return Action::Quit;
        }
        self.message = None;
        if let Some(input) = self.filter_input.as_mut() {
            match key.code {
                KeyCode::Enter => {
                    self.filter = self.filter_input.take().unwrap_or_default();
                }
                KeyCode::Esc => {
                    self.filter_input = None;
                    self.filter.clear();
                }
                KeyCode::Backspace => {
                    input.pop();
                }
                KeyCode::Char(c) if !c.is_control() => input.push(c),
                _ => return Action::None,
            }
            self.selected = 0;
            self.offset = 0;
            self.refresh();
            return Action::Redraw;
        }
        if self.show_warnings {
            // The panel scrolls; the view clamps the offset to its lines.
            let page = self.warnings_page.max(1);
            let at = self.warnings_scroll;
            let moved = match key.code {
                KeyCode::Up | KeyCode::Char('k') => Some(at.saturating_sub(1)),
                KeyCode::Down | KeyCode::Char('j') => Some(at.saturating_add(1)),
                KeyCode::PageUp => Some(at.saturating_sub(page)),
                KeyCode::PageDown | KeyCode::Char(' ') => Some(at.saturating_add(page)),
                KeyCode::Home => Some(0),
                KeyCode::End | KeyCode::Char('G') => Some(usize::MAX / 2),
                _ => None,
            };
            if let Some(to) = moved {
                self.warnings_scroll = to;
                return Action::Redraw;
            }
        }
        if self.show_help || self.show_warnings {
            match key.code {
                KeyCode::Char('q') => return Action::Quit,
                KeyCode::Char('?') | KeyCode::Esc | KeyCode::Enter => {
                    self.show_help = false;
                    self.show_warnings = false;
                }
                KeyCode::Char('w') if self.show_warnings => self.show_warnings = false,
                KeyCode::Char('w') => {
                    self.show_help = false;
                    self.show_warnings = true;
                    self.warnings_scroll = 0;
                }
                _ => return Action::None,
            }
            return Action::Redraw;
        }
        match key.code {
            KeyCode::Char('q') => return Action::Quit,
            KeyCode::Char('?') | KeyCode::Char('h') | KeyCode::F(1) => self.show_help = true,
            KeyCode::Char('w') => {
                self.show_warnings = true;
                self.warnings_scroll = 0;
            }
            KeyCode::Char(' ') | KeyCode::Char('p') => self.toggle_pause(),
            KeyCode::Char('s') => {
                self.sort = self.sort.next();
                self.descending = self.sort.default_descending();
                self.refresh();
            }
            KeyCode::Char('S') => {
                self.descending = !self.descending;
                self.refresh();
            }
            KeyCode::Char('g') => {
                self.group = match self.group {
                    EntityKind::Peer => EntityKind::Class,
                    EntityKind::Class => EntityKind::Peer,
                };
                self.screen = Screen::Table;
                self.selected = 0;
                self.offset = 0;
                self.selected_name = None;
                self.refresh();
            }
            KeyCode::Char('/') => {
                self.screen = Screen::Table;
                self.filter_input = Some(self.filter.clone());
            }
            KeyCode::Char('+') | KeyCode::Char('=') => return self.step_interval(1),
            KeyCode::Char('-') | KeyCode::Char('_') => return self.step_interval(-1),
            KeyCode::Enter => {
                if matches!(self.screen, Screen::Table) {
                    if let Some(e) = self.selected_entity() {
                        self.screen = Screen::Detail {
                            kind: self.group,
                            name: e.name.clone(),
                        };
                    }
                }
            }
            KeyCode::Esc | KeyCode::Backspace => match self.screen {
                Screen::Detail { .. } => self.screen = Screen::Table,
                Screen::Table if !self.filter.is_empty() => {
                    self.filter.clear();
                    self.refresh();
                }
                Screen::Table => return Action::None,
            },
            KeyCode::Up | KeyCode::Char('k') => self.move_by(-1),
            KeyCode::Down | KeyCode::Char('j') => self.move_by(1),
            KeyCode::PageUp => self.move_by(-(self.page as isize)),
            KeyCode::PageDown => self.move_by(self.page as isize),
            KeyCode::Home => self.move_by(isize::MIN / 2),
            KeyCode::End | KeyCode::Char('G') => self.move_by(isize::MAX / 2),
            _ => return Action::None,
        }
        Action::Redraw
    }

    fn toggle_pause(&mut self) {
        self.paused = !self.paused;
        if !self.paused {
            if let Some((s, seq)) = self.pending.take() {
                self.show(s, seq);
            }
        }
    }

    fn step_interval(&mut self, dir: i32) -> Action {
        if self.remote.is_some() {
            self.message = Some("the remote agent sets the interval (nfsdtopd --interval)".into());
            return Action::Redraw;
        }
        let cur = self.interval.as_secs_f64();
        let next = if dir > 0 {
            INTERVAL_STEPS.iter().copied().find(|s| *s > cur + 1e-9)
        } else {
            INTERVAL_STEPS
                .iter()
                .rev()
                .copied()
                .find(|s| *s < cur - 1e-9)
        };
        match next {
            Some(s) => {
                self.interval = Duration::from_secs_f64(s);
                self.message = Some(format!("interval {s}s"));
                Action::SetInterval(self.interval)
            }
            None => {
                self.message = Some(format!("interval stays {cur}s"));
                Action::Redraw
            }
        }
    }

    /// Move the selection (in the table, or to the next entity in the
    /// drill-down).
    fn move_by(&mut self, delta: isize) {
        if self.rows.is_empty() {
            return;
        }
        let last = self.rows.len() - 1;
        let cur = self.selected.min(last) as isize;
        self.selected = cur.saturating_add(delta).clamp(0, last as isize) as usize;
        self.remember_selection();
        if let Screen::Detail { .. } = self.screen {
            if let Some(e) = self.selected_entity() {
                self.screen = Screen::Detail {
                    kind: self.group,
                    name: e.name.clone(),
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    fn snap(n: usize) -> Box<Snapshot> {
        Box::new(Snapshot {
            interval_s: 1.0,
            peers: (0..n)
                .map(|i| EntityStats {
                    name: format!("10.0.{}.{}", i / 256, i % 256),
                    class: if i % 2 == 0 { "even" } else { "odd" }.into(),
                    share: (i + 1) as f64 / 1000.0,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
    }

    #[test]
    fn sort_filter_select_and_scroll() {
        let mut st = State::new(Duration::from_secs(1), None);
        st.on_snapshot(snap(100));
        assert_eq!(st.selected_entity().unwrap().name, "10.0.0.99");
        st.on_key(key(KeyCode::Char('S')));
        assert_eq!(
            st.selected_entity().unwrap().name,
            "10.0.0.99",
            "selection follows"
        );
        st.on_key(key(KeyCode::Home));
        assert_eq!(st.selected_entity().unwrap().name, "10.0.0.0");
        st.fit(10);
        st.on_key(key(KeyCode::PageDown));
        st.on_key(key(KeyCode::Char('j')));
        st.fit(10);
        assert_eq!(st.selected(), 11);
        assert_eq!(st.offset(), 2);
        st.on_key(key(KeyCode::End));
        st.fit(10);
        assert_eq!((st.selected(), st.offset()), (99, 90));
        // Filter: live while typing, Enter keeps it, Esc clears it.
        st.on_key(key(KeyCode::Char('/')));
        for c in "0.0.4".chars() {
            st.on_key(key(KeyCode::Char(c)));
        }
        assert_eq!(st.rows().len(), 11, "10.0.0.4 and 10.0.0.40..49");
        st.on_key(key(KeyCode::Enter));
        assert_eq!(st.filter, "0.0.4");
        st.on_snapshot(snap(100));
        assert_eq!(st.rows().len(), 11, "kept across snapshots");
        st.on_key(key(KeyCode::Esc));
        assert_eq!(st.rows().len(), 100);
        // Class filter matches the class column too.
        st.on_key(key(KeyCode::Char('/')));
        for c in "ODD".chars() {
            st.on_key(key(KeyCode::Char(c)));
        }
        assert_eq!(st.rows().len(), 50);
    }

    /// Twelve peers within a dispatch of 1/12 each, the last digits
    /// reshuffled every interval: the rows and the selection stay put.
    #[test]
    fn near_equal_shares_keep_their_order_and_the_selection() {
        let mut st = State::new(Duration::from_secs(1), None);
        let names = |st: &State| -> Vec<String> {
            st.rows()
                .iter()
                .map(|i| st.entities()[*i as usize].name.clone())
                .collect()
        };
        let mut first = None;
        for round in 0..10u64 {
            let mut s = snap(12);
            for (i, e) in s.peers.iter_mut().enumerate() {
                // 2666 or 2667 dispatches of 32000, which one varies.
                let extra = ((i as u64 * 7 + round * 5) % 12 < 8) as u64;
                e.share = (2666 + extra) as f64 / 32_000.0;
            }
            st.on_snapshot(s);
            if round == 0 {
                st.on_key(key(KeyCode::Down));
                st.on_key(key(KeyCode::Down));
                first = Some(names(&st));
            }
            assert_eq!(Some(names(&st)), first, "round {round}");
            assert_eq!(st.selected_entity().unwrap().name, "10.0.0.2");
        }
        let want: Vec<String> = (0..12).map(|i| format!("10.0.0.{i}")).collect();
        assert_eq!(first.unwrap(), want, "ties go by address");
    }

    #[test]
    fn top_n_keeps_the_first_rows_of_the_sort() {
        let mut st = State::new(Duration::from_secs(1), None);
        st.top = Some(5);
        st.on_snapshot(snap(100));
        assert_eq!(st.rows().len(), 5);
        assert_eq!(st.selected_entity().unwrap().name, "10.0.0.99");
        st.on_key(key(KeyCode::Char('S')));
        assert_eq!(st.rows().len(), 5);
        assert_eq!(st.entities()[st.rows()[0] as usize].name, "10.0.0.0");
    }

    #[test]
    fn pause_freezes_the_display_not_the_data() {
        let mut st = State::new(Duration::from_secs(1), None);
        st.on_snapshot(snap(3));
        st.on_key(key(KeyCode::Char(' ')));
        st.on_snapshot(snap(5));
        assert_eq!(st.entities().len(), 3);
        assert_eq!(st.history.seq(), 2);
        st.on_key(key(KeyCode::Char('p')));
        assert_eq!(st.entities().len(), 5);
    }

    #[test]
    fn keys_map_to_actions() {
        let mut st = State::new(Duration::from_secs(1), None);
        assert_eq!(
            st.on_key(key(KeyCode::Char('+'))),
            Action::SetInterval(Duration::from_secs(2))
        );
        assert_eq!(
            st.on_key(key(KeyCode::Char('-'))),
            Action::SetInterval(Duration::from_secs(1))
        );
        assert_eq!(st.on_key(key(KeyCode::Char('q'))), Action::Quit);
        assert_eq!(
            st.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Action::Quit
        );
        // A remote agent keeps its own pace: nothing to send.
        st.on_status(RemoteStatus::Connected { url: "x".into() });
        assert_eq!(st.on_key(key(KeyCode::Char('+'))), Action::Redraw);
        assert!(st.message.as_deref().unwrap().contains("remote agent"));
        assert_eq!(st.interval, Duration::from_secs(1));
        // Keys on an empty table never panic.
        for c in [KeyCode::Enter, KeyCode::Down, KeyCode::End, KeyCode::PageUp] {
            st.on_key(key(c));
        }
        assert_eq!(st.screen, Screen::Table);
    }

    #[test]
    fn stale_after_three_intervals_without_a_snapshot() {
        let mut st = State::new(Duration::from_secs(1), None);
        let t0 = st.now;
        st.on_snapshot(snap(1));
        st.tick(t0 + Duration::from_millis(2900));
        assert_eq!(st.link(), LinkLabel::Ok);
        st.tick(t0 + Duration::from_millis(3100));
        assert!(matches!(st.link(), LinkLabel::Stale(_)));
        st.on_snapshot(snap(1));
        assert_eq!(st.link(), LinkLabel::Ok);
    }
}
