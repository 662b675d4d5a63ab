//! Colours and emphasis, in one place.

use ratatui::style::{Color, Modifier, Style};

use crate::warnings::Severity;

pub fn title() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

pub fn dim() -> Style {
    Style::default().fg(Color::DarkGray)
}

pub fn key() -> Style {
    Style::default()
        .fg(Color::Cyan)
        .add_modifier(Modifier::BOLD)
}

pub fn table_header() -> Style {
    Style::default()
        .fg(Color::Black)
        .bg(Color::Gray)
        .add_modifier(Modifier::BOLD)
}

pub fn selected() -> Style {
    Style::default().add_modifier(Modifier::REVERSED)
}

pub fn good() -> Style {
    Style::default().fg(Color::Green)
}

pub fn warn() -> Style {
    Style::default().fg(Color::Yellow)
}

pub fn bad() -> Style {
    Style::default().fg(Color::Red).add_modifier(Modifier::BOLD)
}

/// The top offender's row.
pub fn offender() -> Style {
    Style::default()
        .fg(Color::Magenta)
        .add_modifier(Modifier::BOLD)
}

/// A row by its fairness ratio: below 0.5 red, below 0.9 yellow.
pub fn ratio(r: Option<f64>) -> Style {
    level(r.map_or(0, |r| {
        crate::warnings::steady::THRESHOLDS
            .iter()
            .filter(|t| r < **t)
            .count() as u8
    }))
}

/// A row by the level its ratio steadily holds (see
/// `crate::warnings::steady`): 2 red, 1 yellow.
pub fn level(level: u8) -> Style {
    match level {
        0 => Style::default(),
        1 => Style::default().fg(Color::Yellow),
        _ => Style::default().fg(Color::Red),
    }
}

pub fn severity(s: Severity) -> Style {
    match s {
        Severity::Info => Style::default().fg(Color::Magenta),
        Severity::Warn => warn(),
        Severity::Crit => bad(),
    }
}

pub const SHARE: Color = Color::Cyan;
pub const FAIR: Color = Color::Yellow;
pub const BAR: Color = Color::Blue;
