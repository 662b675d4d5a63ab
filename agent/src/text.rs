//! Text from outside nfsdtop (kernel files, recordings, DNS, remote
//! agents, scenario and class-map files) made safe to show.
//!
//! [`displayable`] is the one function every terminal and spreadsheet
//! surface passes such text through (the TUI, batch text and CSV, whatif's
//! report, a recording's header): each character that could retitle,
//! clear or recolour a terminal (controls: C0, DEL, C1), reorder what
//! follows it (bidi controls and the other format characters), break a
//! line (U+2028, U+2029) or be drawn at a width other than the one
//! ratatui counts (zero-width and default-ignorable characters, the soft
//! hyphen, ambiguous-width symbols) becomes `?`. A width ratatui and the
//! terminal disagree on shifts every later cell of the row: ratatui's
//! diff redraw then writes numbers into the wrong columns.
//!
//! [`printable`] is what a name is kept as when it is read (controls as
//! `?`, cut, trimmed): JSON carries that, escaped by serde, so a reader
//! of the JSON sees the name as the client gave it.

use unicode_width::UnicodeWidthChar;

use crate::model::Snapshot;

/// Characters kept of a name or an implementation (NFSv4 allows 1024
/// bytes of client owner).
pub const MAX_TEXT_CHARS: usize = 256;

/// Format characters (Unicode's Cf, bidi controls among them), line and
/// paragraph separators (Zl, Zp) and the other default-ignorable code
/// points: drawn as nothing, or as a line break, or reordering the text.
fn is_format_or_ignorable(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{0600}'..='\u{0605}' | '\u{061C}' | '\u{06DD}'
        | '\u{070F}' | '\u{0890}'..='\u{0891}' | '\u{08E2}' | '\u{115F}'..='\u{1160}'
        | '\u{17B4}'..='\u{17B5}' | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}'
        | '\u{2028}'..='\u{202E}' | '\u{2060}'..='\u{206F}' | '\u{3164}'
        | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}' | '\u{FFF0}'..='\u{FFFB}'
        | '\u{110BD}' | '\u{110CD}' | '\u{13430}'..='\u{1343F}' | '\u{1BCA0}'..='\u{1BCA3}'
        | '\u{1D173}'..='\u{1D17A}' | '\u{E0000}'..='\u{E0FFF}')
}

/// Whether `c` must not reach a terminal or a spreadsheet as it is.
///
/// Ambiguous-width characters that are letters (é, ä, Greek, Cyrillic)
/// are kept: every terminal outside a CJK locale draws them one cell wide,
/// as ratatui counts them, and names are written in them. Ambiguous
/// symbols (°, ±, box drawing, private use) have no such claim and go.
pub fn is_unsafe(c: char) -> bool {
    if c.is_control() {
        return true;
    }
    if c.is_ascii() {
        return false;
    }
    if is_format_or_ignorable(c) {
        return true;
    }
    match (c.width(), c.width_cjk()) {
        (Some(1), Some(1)) | (Some(2), Some(2)) => false,
        (Some(1), Some(2)) => !c.is_alphabetic(),
        // Zero-width (combining marks) or no width at all.
        _ => true,
    }
}

/// `text` as every terminal and spreadsheet surface shows it: each
/// [`is_unsafe`] character as `?`.
pub fn displayable(text: &str) -> String {
    text.chars()
        .map(|c| if is_unsafe(c) { '?' } else { c })
        .collect()
}

/// Whether [`displayable`] would change `text` (so that clean text, nearly
/// all of it, is not copied).
pub fn needs_cleaning(text: &str) -> bool {
    text.chars().any(is_unsafe)
}

fn clean(text: &mut String) {
    if needs_cleaning(text) {
        *text = displayable(text);
    }
}

/// Every text a snapshot carries (source, programs, names, transports,
/// client names and implementations, host names) made [`displayable`]:
/// for a snapshot about to be drawn (the TUI's), not one to be written as
/// JSON.
pub fn displayable_snapshot(s: &mut Snapshot) {
    let src = &mut s.source;
    for t in [
        &mut src.kernel,
        &mut src.generation,
        &mut src.detail,
        &mut src.host,
    ] {
        clean(t);
    }
    for b in &mut s.totals.bpf {
        clean(&mut b.program);
    }
    for e in s.peers.iter_mut().chain(s.classes.iter_mut()) {
        clean(&mut e.name);
        clean(&mut e.class);
        for t in &mut e.transports {
            clean(&mut t.client);
            clean(&mut t.server);
        }
        for c in &mut e.client_names {
            clean(&mut c.name);
            if let Some(i) = &mut c.implementation {
                clean(i);
            }
        }
        if let Some(h) = &mut e.hostname {
            clean(h);
        }
    }
}

/// A message of several lines (a TOML parser's, whose second line says
/// what was expected) as one: `; ` between its lines. Errors are one line
/// on stderr, for logs and scripts that read them a line at a time.
pub fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// A name as kept when it is read: controls as `?` (they would reach a
/// log or a terminal unescaped), at most [`MAX_TEXT_CHARS`], trimmed.
/// Other characters are kept as given; surfaces use [`displayable`].
pub fn printable(text: &str) -> String {
    let text: String = text
        .chars()
        .take(MAX_TEXT_CHARS)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    text.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_become_question_marks_and_names_are_cut() {
        let evil = "EVIL\u{1b}]0;TITLE\u{7}\u{1b}[41mX\u{9b}31m\r\n";
        assert_eq!(displayable(evil), "EVIL?]0;TITLE??[41mX?31m??");
        assert_eq!(
            printable(&format!("  {evil}")),
            "EVIL?]0;TITLE??[41mX?31m??"
        );
        assert_eq!(printable(&"x".repeat(300)).len(), MAX_TEXT_CHARS);
    }

    /// Separators, the soft hyphen, bidi controls and other format
    /// characters, zero-width and ambiguous-width symbols: each one `?`.
    #[test]
    fn characters_drawn_at_another_width_or_reordering_text_become_question_marks() {
        for (hostile, what) in [
            ('\u{2028}', "line separator"),
            ('\u{2029}', "paragraph separator"),
            ('\u{00AD}', "soft hyphen"),
            ('\u{202E}', "right-to-left override"),
            ('\u{202A}', "left-to-right embedding"),
            ('\u{2066}', "left-to-right isolate"),
            ('\u{2069}', "pop directional isolate"),
            ('\u{200B}', "zero-width space"),
            ('\u{200D}', "zero-width joiner"),
            ('\u{FEFF}', "byte order mark"),
            ('\u{FE0F}', "variation selector"),
            ('\u{E0041}', "tag character"),
            ('\u{0301}', "combining acute accent"),
            ('\u{00B0}', "degree sign (ambiguous width)"),
            ('\u{2500}', "box drawing (ambiguous width)"),
            ('\u{E000}', "private use (ambiguous width)"),
        ] {
            let name = format!("AB{hostile}CD");
            assert!(needs_cleaning(&name), "{what}");
            assert_eq!(displayable(&name), "AB?CD", "{what}");
        }
        // Names in letters, wide characters and plain ASCII stay.
        for fine in [
            "nfs-01.exämple",
            "Müller-Straße",
            "ΑΘΗΝΑ",
            "сервер",
            "東京-01",
        ] {
            assert!(!needs_cleaning(fine), "{fine}");
            assert_eq!(displayable(fine), fine);
        }
        assert_eq!(
            one_line("invalid array\nexpected `]`\n"),
            "invalid array; expected `]`"
        );
        // The JSON keeps what the client gave (bar controls).
        assert_eq!(printable("AB\u{2028}\u{2028}CD"), "AB\u{2028}\u{2028}CD");
    }
}
