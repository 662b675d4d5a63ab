//! Lines built from whole parts: what does not fit a narrow terminal is
//! left out part by part, lowest priority first, and never cut inside a
//! word. The header draws every one of its lines through this.

use ratatui::style::Style;
use ratatui::text::{Line, Span};

/// The mark of free text shortened at a word.
const MORE: &str = "…";

struct Part {
    spans: Vec<Span<'static>>,
    /// Lower stays longer; parts of equal rank go together.
    rank: u8,
    /// Drawn right after the part before it, without the separator (its
    /// text carries its own lead, e.g. " at 12:00:00Z"). Kept only with
    /// that part: its rank is never below its anchor's.
    glued: bool,
    /// Free text (the last span) that may be shortened to its first
    /// words and [`MORE`] rather than left out.
    words: bool,
}

/// A line's parts in the order they are drawn, each with its rank.
pub struct Parts {
    sep: Span<'static>,
    parts: Vec<Part>,
}

fn width(spans: &[Span]) -> usize {
    spans.iter().map(Span::width).sum()
}

impl Parts {
    /// Parts drawn with `sep` between them (e.g. " | " or two spaces).
    pub fn new(sep: Span<'static>) -> Parts {
        Parts {
            sep,
            parts: Vec::new(),
        }
    }

    pub fn push(&mut self, rank: u8, spans: Vec<Span<'static>>) {
        self.add(rank, spans, false, false);
    }

    /// A part drawn against the one before it; kept only with it.
    pub fn glue(&mut self, rank: u8, spans: Vec<Span<'static>>) {
        self.add(rank, spans, true, false);
    }

    /// Free text (`lead` then `text`, glued or not): where the whole does
    /// not fit, its first words that do, then "…"; left out when not even
    /// the first word fits.
    pub fn text(&mut self, rank: u8, glued: bool, lead: &str, text: String, style: Style) {
        let spans = vec![
            Span::styled(lead.to_string(), style),
            Span::styled(text, style),
        ];
        self.add(rank, spans, glued, true);
    }

    fn add(&mut self, rank: u8, spans: Vec<Span<'static>>, glued: bool, words: bool) {
        let anchor = self.parts.last().map_or(0, |p| p.rank);
        let rank = if glued { rank.max(anchor) } else { rank };
        self.parts.push(Part {
            spans,
            rank,
            glued,
            words,
        });
    }

    /// Which parts a cut-off rank keeps (a glued part only with the part
    /// it is glued to).
    fn kept(&self, cutoff: u8) -> Vec<bool> {
        let mut keep: Vec<bool> = Vec::with_capacity(self.parts.len());
        for (i, p) in self.parts.iter().enumerate() {
            let anchor = i == 0 || keep[i - 1];
            keep.push(p.rank <= cutoff && (!p.glued || anchor));
        }
        keep
    }

    /// The width of the kept parts, free text at its shortest (its first
    /// word and "…") where `shortest`.
    fn width_of(&self, keep: &[bool], shortest: bool) -> usize {
        let mut w = 0;
        let mut first = true;
        for (p, _) in self.parts.iter().zip(keep).filter(|(_, k)| **k) {
            if !first && !p.glued {
                w += self.sep.width();
            }
            first = false;
            w += match (shortest && p.words, p.spans.split_last()) {
                (true, Some((text, lead))) => width(lead) + min_words(&text.content),
                _ => width(&p.spans),
            };
        }
        w
    }

    /// The line in at most `cols` cells: the most parts that fit, cut
    /// off by rank, then free text given the room left. The parts of the
    /// lowest rank (the most important) stay even too wide alone (the
    /// terminal cuts them).
    pub fn line(self, cols: u16) -> Line<'static> {
        let cols = cols as usize;
        let mut ranks: Vec<u8> = self.parts.iter().map(|p| p.rank).collect();
        ranks.sort_unstable();
        ranks.dedup();
        let mut keep = self.kept(ranks.first().copied().unwrap_or(0));
        for &r in &ranks[1.min(ranks.len())..] {
            let k = self.kept(r);
            if self.width_of(&k, true) > cols {
                break;
            }
            keep = k;
        }
        // The room the free text may take beyond its shortest form.
        let mut spare = cols.saturating_sub(self.width_of(&keep, true));
        let mut spans = Vec::new();
        let mut first = true;
        let sep = self.sep;
        for (mut p, _) in self.parts.into_iter().zip(keep).filter(|(_, k)| *k) {
            if !first && !p.glued {
                spans.push(sep.clone());
            }
            first = false;
            if p.words {
                if let Some(text) = p.spans.pop() {
                    let min = min_words(&text.content);
                    let (t, used) = fit_words(&text.content, min + spare);
                    spare = (spare + min).saturating_sub(used);
                    p.spans.push(Span::styled(t, text.style));
                }
            }
            spans.extend(p.spans);
        }
        Line::from(spans)
    }
}

/// The width of `text` at its shortest: the first word and "…", or the
/// whole when it is one word.
fn min_words(text: &str) -> usize {
    let text = text.trim_end();
    match text.find(' ') {
        Some(i) => text[..i].chars().count() + MORE.chars().count(),
        None => text.chars().count(),
    }
}

/// `text` whole if it fits `cols`, else its first whole words that fit
/// with "…" after them (at least the first word); and its width.
fn fit_words(text: &str, cols: usize) -> (String, usize) {
    let text = text.trim_end();
    let n = text.chars().count();
    if n <= cols {
        return (text.to_string(), n);
    }
    let room = cols.saturating_sub(MORE.chars().count());
    let mut end = text.find(' ').unwrap_or(text.len());
    for (i, _) in text.match_indices(' ') {
        if text[..i].chars().count() > room {
            break;
        }
        end = i;
    }
    let kept = text[..end].trim_end_matches([' ', ',', ';', ':']);
    let out = format!("{kept}{MORE}");
    let w = out.chars().count();
    (out, w)
}

/// `text` in lines of at most `cols` columns, broken between words (a
/// word longer than a line is cut), at most `max` lines: where more would
/// be needed the last one ends in [`MORE`].
pub fn wrap(text: &str, cols: usize, max: usize) -> Vec<String> {
    let w = |s: &str| Span::raw(s).width();
    let cols = cols.max(1);
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        let fits = cur.is_empty() || w(&cur) + 1 + w(word) <= cols;
        if !fits {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    let cut = lines.len() > max;
    lines.truncate(max);
    for l in &mut lines {
        if w(l) > cols {
            *l = l.chars().take(cols).collect();
        }
    }
    if cut {
        if let Some(last) = lines.last_mut() {
            *last = fit_words(&format!("{last} {MORE}"), cols).0;
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(l: &Line) -> String {
        l.spans.iter().map(|s| s.content.to_string()).collect()
    }

    fn sample() -> Parts {
        let mut p = Parts::new(Span::raw(" | "));
        p.push(0, vec![Span::raw("name")]);
        p.push(3, vec![Span::raw("third")]);
        p.push(1, vec![Span::raw("every 1s")]);
        p.glue(4, vec![Span::raw(" at 12:00:00Z")]);
        p.push(2, vec![Span::raw("demo")]);
        p.text(5, true, ": ", "one two three".into(), Style::default());
        p
    }

    #[test]
    fn parts_are_left_out_lowest_priority_first_and_kept_in_place() {
        let all = "name | third | every 1s at 12:00:00Z | demo: one two three";
        assert_eq!(text(&sample().line(80)), all);
        assert_eq!(
            text(&sample().line(all.len() as u16 - 1)),
            "name | third | every 1s at 12:00:00Z | demo: one two…"
        );
        // Not even "one…": the text goes, then the clock, then "third".
        assert_eq!(
            text(&sample().line(48)),
            "name | third | every 1s at 12:00:00Z | demo"
        );
        assert_eq!(text(&sample().line(42)), "name | third | every 1s | demo");
        assert_eq!(text(&sample().line(29)), "name | every 1s | demo");
        assert_eq!(text(&sample().line(15)), "name | every 1s");
        assert_eq!(text(&sample().line(3)), "name", "the first stays");
    }

    #[test]
    fn wrapped_text_breaks_between_words_within_its_lines() {
        assert_eq!(wrap("ab cd ef", 5, 3), ["ab cd", "ef"]);
        assert_eq!(wrap("ab cd ef gh", 5, 2), ["ab cd", "ef gh"]);
        assert_eq!(wrap("ab cd ef gh ij", 5, 2), ["ab cd", "ef…"]);
        assert_eq!(wrap("abcdefgh", 4, 2), ["abcd"]);
        assert!(wrap("", 10, 2).is_empty());
    }

    #[test]
    fn free_text_is_cut_only_between_words() {
        assert_eq!(fit_words("ab cd ef", 8), ("ab cd ef".into(), 8));
        assert_eq!(fit_words("ab cd ef", 7), ("ab cd…".into(), 6));
        assert_eq!(fit_words("ab, cd ef", 4), ("ab…".into(), 3));
        assert_eq!(fit_words("abcdef gh", 3).0, "abcdef…", "at least a word");
        assert_eq!(min_words("ab cd"), 3);
        assert_eq!(min_words("abc"), 3);
    }
}
