//! What keys and the mouse do to the [`State`]: each event becomes a
//! change of state and an [`Action`] for the event loop.

use std::time::Duration;

use crossterm::event::{
    KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use nfsdtop_agent::model::EntityKind;

use nfsdtop_agent::pipeline::playback::Command;

use super::{Action, Column, Screen, State, INTERVAL_STEPS, SEEK};

/// Rows one notch of the mouse wheel moves the selection.
const WHEEL_ROWS: isize = 3;

/// Where the table was drawn last, for the mouse: the screen row of the
/// column titles, how many rows of entities follow, and each column's
/// cells `[x0, x1)`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Geometry {
    pub header_y: u16,
    pub body_rows: u16,
    pub columns: Vec<(Column, u16, u16)>,
}

impl State {
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
        let peers = self.group == EntityKind::Peer;
        if let Some(at) = self.column_menu {
            return self.on_column_menu_key(key, at);
        }
        if let Some(at) = self.sort_menu {
            let all = self.view.columns();
            let n = all.len();
            match key.code {
                KeyCode::Up | KeyCode::Char('k') => self.sort_menu = Some((at + n - 1) % n),
                KeyCode::Down | KeyCode::Char('j') => self.sort_menu = Some((at + 1) % n),
                KeyCode::Enter => {
                    self.sort_menu = None;
                    let c = all[at.min(n - 1)].for_table(peers);
                    self.sort_by(c);
                }
                KeyCode::Char(d @ '0'..='9') => {
                    self.sort_menu = None;
                    if let Some(c) = Column::by_digit(d, peers, self.view) {
                        self.sort_by(c);
                    }
                }
                KeyCode::Esc | KeyCode::F(6) | KeyCode::Char('o') => self.sort_menu = None,
                KeyCode::Char('q') => return Action::Quit,
                _ => return Action::None,
            }
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
        if self.show_help || self.show_warnings || self.show_services {
            match key.code {
                KeyCode::Char('q') => return Action::Quit,
                KeyCode::Char('?') | KeyCode::Esc | KeyCode::Enter => {
                    self.show_help = false;
                    self.show_warnings = false;
                    self.show_services = false;
                }
                KeyCode::Char('R') if self.show_services => self.show_services = false,
                KeyCode::Char('R') => {
                    self.show_help = false;
                    self.show_warnings = false;
                    self.show_services = true;
                }
                KeyCode::Char('w') if self.show_warnings => self.show_warnings = false,
                KeyCode::Char('w') => {
                    self.show_help = false;
                    self.show_services = false;
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
            KeyCode::Char('R') => self.show_services = true,
            KeyCode::Char(' ') | KeyCode::Char('p') if self.playback.is_some() => {
                return Action::Playback(Command::TogglePause)
            }
            KeyCode::Char(' ') | KeyCode::Char('p') => self.toggle_pause(),
            KeyCode::Char('.') | KeyCode::Char('n') if self.playback.is_some() => {
                return Action::Playback(Command::Step)
            }
            KeyCode::Left | KeyCode::Right if self.playback.is_some() => {
                let ns = SEEK.as_nanos() as i64;
                let by = if key.code == KeyCode::Left { -ns } else { ns };
                return Action::Playback(Command::Seek(by));
            }
            KeyCode::Char('>') if self.playback.is_some() => {
                return Action::Playback(Command::Faster)
            }
            KeyCode::Char('<') if self.playback.is_some() => {
                return Action::Playback(Command::Slower)
            }
            KeyCode::Char('.' | 'n' | '<' | '>') | KeyCode::Left | KeyCode::Right => {
                self.message = Some("step, seek and speed are for a demo or a replay".into());
            }
            KeyCode::Char('c') => {
                self.screen = Screen::Table;
                self.column_menu = Some(0);
            }
            KeyCode::F(6) | KeyCode::Char('o') => {
                let i = self
                    .view
                    .columns()
                    .iter()
                    .position(|c| c.for_table(true) == self.sort.for_table(true));
                self.screen = Screen::Table;
                self.sort_menu = Some(i.unwrap_or(0));
            }
            KeyCode::Char('s') => {
                let next = self.sort.next(self.view).for_table(peers);
                self.sort_by(next);
            }
            KeyCode::Char(d @ '0'..='9') => {
                if let Some(c) = Column::by_digit(d, peers, self.view) {
                    self.sort_by(c);
                }
            }
            KeyCode::Char('v') => {
                self.view = self.view.other();
                // A sort column the new view does not show would order
                // the rows by something off screen: by share instead,
                // which both views show.
                if !self.view.shows(self.sort) {
                    self.sort = Column::SHARE;
                    self.descending = true;
                }
                self.screen = Screen::Table;
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
                self.sort = self.sort.for_table(self.group == EntityKind::Peer);
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
                            netns: e.netns,
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

    /// Sort by `c`; the column already sorted by turns round instead.
    fn sort_by(&mut self, c: Column) {
        if self.sort == c {
            self.descending = !self.descending;
        } else {
            self.sort = c;
            self.descending = c.default_descending();
        }
        self.refresh();
    }

    /// A click on a column's title sorts by it, a click on a row selects
    /// it, the wheel scrolls; only on the table, with no overlay open.
    pub fn on_mouse(&mut self, m: MouseEvent) -> Action {
        let on_table = matches!(self.screen, Screen::Table)
            && !self.show_help
            && !self.show_warnings
            && !self.show_services
            && self.sort_menu.is_none()
            && self.column_menu.is_none()
            && self.filter_input.is_none();
        let Some(g) = self.geometry.as_ref().filter(|_| on_table) else {
            return Action::None;
        };
        match m.kind {
            MouseEventKind::Down(MouseButton::Left) if m.row == g.header_y => {
                let hit = g
                    .columns
                    .iter()
                    .find(|(_, x0, x1)| (*x0..*x1).contains(&m.column));
                match hit.map(|(c, _, _)| *c) {
                    // What-if columns have no order of their own.
                    Some(c) if !Column::WHATIF.contains(&c) => self.sort_by(c),
                    _ => return Action::None,
                }
            }
            MouseEventKind::Down(MouseButton::Left)
                if m.row > g.header_y && m.row <= g.header_y + g.body_rows =>
            {
                let row = self.offset + usize::from(m.row - g.header_y - 1);
                if row >= self.rows.len() {
                    return Action::None;
                }
                self.selected = row;
                self.remember_selection();
            }
            MouseEventKind::ScrollDown => self.move_by(WHEEL_ROWS),
            MouseEventKind::ScrollUp => self.move_by(-WHEEL_ROWS),
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
            self.message =
                Some("the remote nfsdtopd sets the interval (nfsdtopd --interval)".into());
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
                    netns: e.netns,
                };
            }
        }
    }
}
