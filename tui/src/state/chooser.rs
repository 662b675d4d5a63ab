//! The column chooser (`c`): every column of the view with a mark, up and
//! down move, space or Enter shows or hides the one under the cursor, Esc
//! closes. Hidden columns are left out of the table before the width
//! decides what else to drop, and are kept in the preferences
//! (`crate::prefs`) under the names [`Column::key`] gives.

use crossterm::event::{KeyCode, KeyEvent};

use super::{Action, Column, State, View};

impl Column {
    /// The column's name in the preferences file: its title in lower
    /// case ("share", "wait99", "disp/s").
    pub fn key(self) -> String {
        self.title().to_ascii_lowercase()
    }

    /// The column a preferences name stands for (either view's).
    pub fn from_key(key: &str) -> Option<Column> {
        View::Fairness
            .columns()
            .into_iter()
            .chain(View::Workload.columns())
            .find(|c| c.key() == key)
    }
}

impl State {
    /// The columns the chooser lists: the view's, NAME aside (always shown).
    pub fn choosable(&self) -> Vec<Column> {
        self.view
            .columns()
            .iter()
            .copied()
            .filter(|c| *c != Column::Name)
            .collect()
    }

    pub fn is_hidden(&self, c: Column) -> bool {
        self.hidden.contains(&c)
    }

    /// A key while the chooser is open, its cursor at `at`.
    pub(super) fn on_column_menu_key(&mut self, key: KeyEvent, at: usize) -> Action {
        let all = self.choosable();
        let n = all.len().max(1);
        match key.code {
            KeyCode::Up | KeyCode::Char('k') => self.column_menu = Some((at + n - 1) % n),
            KeyCode::Down | KeyCode::Char('j') => self.column_menu = Some((at + 1) % n),
            KeyCode::Char(' ') | KeyCode::Enter | KeyCode::Char('x') => {
                if let Some(&c) = all.get(at) {
                    self.toggle_column(c);
                }
            }
            KeyCode::Esc | KeyCode::Char('c') => self.column_menu = None,
            KeyCode::Char('q') => return Action::Quit,
            _ => return Action::None,
        }
        Action::Redraw
    }

    /// Show `c` if hidden, else hide it.
    pub fn toggle_column(&mut self, c: Column) {
        if let Some(i) = self.hidden.iter().position(|h| *h == c) {
            self.hidden.remove(i);
        } else if c != Column::Name {
            self.hidden.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    use super::*;

    fn key(st: &mut State, c: KeyCode) {
        st.on_key(KeyEvent::new(c, KeyModifiers::NONE));
    }

    #[test]
    fn the_chooser_hides_and_shows_the_column_under_its_cursor() {
        let mut st = State::new(Duration::from_secs(1), None);
        key(&mut st, KeyCode::Char('c'));
        assert_eq!(st.column_menu, Some(0));
        key(&mut st, KeyCode::Down);
        key(&mut st, KeyCode::Char(' '));
        assert_eq!(st.hidden, [Column::CONN]);
        key(&mut st, KeyCode::Enter);
        assert!(st.hidden.is_empty());
        key(&mut st, KeyCode::Char(' '));
        key(&mut st, KeyCode::Esc);
        assert_eq!(st.column_menu, None);
        assert_eq!(st.hidden, [Column::CONN]);
    }

    #[test]
    fn keys_name_every_column_and_back() {
        for c in View::Fairness
            .columns()
            .iter()
            .chain(&View::Workload.columns())
        {
            assert_eq!(Column::from_key(&c.key()), Some(*c), "{c:?}");
        }
        assert_eq!(Column::from_key("wait99"), Some(Column::WAIT_P99));
        assert_eq!(Column::from_key("nope"), None);
    }
}
