//! Text from outside nfsdtop (kernel files, recordings, DNS, remote
//! agents, scenario files) made safe to show: every control character
//! (C0, DEL, C1: ESC, BEL, CSI...) becomes `?`, so that no name or
//! description can retitle, clear or recolour an operator's terminal.

/// Characters kept of a name or an implementation (NFSv4 allows 1024
/// bytes of client owner).
pub const MAX_TEXT_CHARS: usize = 256;

/// `text` with its control characters as `?`.
pub fn without_controls(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// A name safe to show: [`without_controls`], at most [`MAX_TEXT_CHARS`],
/// trimmed.
pub fn printable(text: &str) -> String {
    let text: String = without_controls(text)
        .chars()
        .take(MAX_TEXT_CHARS)
        .collect();
    text.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_become_question_marks_and_names_are_cut() {
        let evil = "EVIL\u{1b}]0;TITLE\u{7}\u{1b}[41mX\u{9b}31m\r\n";
        assert_eq!(without_controls(evil), "EVIL?]0;TITLE??[41mX?31m??");
        assert_eq!(
            printable(&format!("  {evil}")),
            "EVIL?]0;TITLE??[41mX?31m??"
        );
        assert_eq!(printable(&"x".repeat(300)).len(), MAX_TEXT_CHARS);
    }
}
