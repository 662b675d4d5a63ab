//! What one Rust source file says about modules, read from its tokens
//! (no compiler): the modules it declares (`mod x;`, `mod x { … }`, with
//! any `#[path]`) and every path it names that starts at a module
//! (`crate::`, `super::`, `self::`, or a bare name), with its line.
//!
//! Comments, strings and character literals are skipped, so a path in a
//! doc comment or a message is not a dependency; lifetimes are told from
//! character literals by what follows the quote.

/// One token: enough of Rust's lexical grammar to find paths.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    Ident(String),
    /// A string literal's text, kept for `#[path = "…"]`.
    Str(String),
    Punct(char),
    /// `::`
    Sep,
}

/// Tokens of `src`, each with its line (1-based).
pub fn tokens(src: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    while i < c.len() {
        let ch = c[i];
        match ch {
            '\n' => {
                line += 1;
                i += 1;
            }
            _ if ch.is_whitespace() => i += 1,
            '/' if at(i + 1) == '/' => {
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
            }
            '/' if at(i + 1) == '*' => {
                let mut depth = 0;
                while i < c.len() {
                    if c[i] == '/' && at(i + 1) == '*' {
                        depth += 1;
                        i += 2;
                    } else if c[i] == '*' && at(i + 1) == '/' {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        line += usize::from(c[i] == '\n');
                        i += 1;
                    }
                }
            }
            '"' => {
                let (s, end, lines) = quoted(&c, i + 1);
                out.push((Tok::Str(s), line));
                line += lines;
                i = end;
            }
            '\'' => {
                if at(i + 1) == '\\' {
                    // An escaped character literal: to its closing quote.
                    i += 2;
                    while i < c.len() && c[i] != '\'' {
                        i += 1;
                    }
                    i += 1;
                } else if at(i + 2) == '\'' {
                    i += 3;
                } else {
                    // A lifetime or a label: its name reads as an ident.
                    i += 1;
                }
            }
            ':' if at(i + 1) == ':' => {
                out.push((Tok::Sep, line));
                i += 2;
            }
            _ if ch == '_' || ch.is_alphabetic() => {
                let start = i;
                while i < c.len() && (c[i] == '_' || c[i].is_alphanumeric()) {
                    i += 1;
                }
                let word: String = c[start..i].iter().collect();
                // Raw and byte strings: r"…", r#"…"#, b"…", br#"…"#.
                let raw = matches!(word.as_str(), "r" | "br" | "cr");
                if raw && (at(i) == '"' || at(i) == '#') {
                    let hashes = c[i..].iter().take_while(|&&h| h == '#').count();
                    if at(i + hashes) == '"' {
                        let (s, end, lines) = raw_quoted(&c, i + hashes + 1, hashes);
                        out.push((Tok::Str(s), line));
                        line += lines;
                        i = end;
                        continue;
                    }
                }
                if matches!(word.as_str(), "b" | "c") && at(i) == '"' {
                    let (s, end, lines) = quoted(&c, i + 1);
                    out.push((Tok::Str(s), line));
                    line += lines;
                    i = end;
                    continue;
                }
                if word == "b" && at(i) == '\'' {
                    // A byte literal: the quote is read next as a char.
                    continue;
                }
                out.push((Tok::Ident(word), line));
            }
            _ if ch.is_ascii_digit() => {
                while i < c.len() && (c[i] == '_' || c[i].is_alphanumeric()) {
                    i += 1;
                }
            }
            _ => {
                out.push((Tok::Punct(ch), line));
                i += 1;
            }
        }
    }
    out
}

/// A "…" body from `i` (after the quote): its text, the index after the
/// closing quote, and the newlines in it.
fn quoted(c: &[char], mut i: usize) -> (String, usize, usize) {
    let (start, mut lines) = (i, 0);
    while i < c.len() && c[i] != '"' {
        if c[i] == '\\' {
            i += 1;
        }
        lines += usize::from(c.get(i) == Some(&'\n'));
        i += 1;
    }
    (c[start..i.min(c.len())].iter().collect(), i + 1, lines)
}

/// A raw string's body from `i`, closed by a quote and `hashes` #s.
fn raw_quoted(c: &[char], mut i: usize, hashes: usize) -> (String, usize, usize) {
    let (start, mut lines) = (i, 0);
    while i < c.len() {
        if c[i] == '"'
            && c[i + 1..]
                .iter()
                .take(hashes)
                .filter(|&&h| h == '#')
                .count()
                == hashes
        {
            return (c[start..i].iter().collect(), i + 1 + hashes, lines);
        }
        lines += usize::from(c[i] == '\n');
        i += 1;
    }
    (c[start..].iter().collect(), i, lines)
}

/// A module declared in a file: `mod name;` (in a file of its own) or
/// `mod name { … }` (inline), inside the inline modules `within`.
#[derive(Debug, PartialEq)]
pub struct Decl {
    pub within: Vec<String>,
    pub name: String,
    pub inline: bool,
    /// Its `#[path = "…"]`, if any.
    pub path: Option<String>,
    /// Under `#[cfg(test)]`.
    pub test: bool,
}

/// A path the file names, from the inline modules `within` of the file's
/// own module.
#[derive(Debug, PartialEq)]
pub struct Named {
    pub within: Vec<String>,
    pub segments: Vec<String>,
    pub line: usize,
}

/// What a file declares and names.
#[derive(Debug, Default)]
pub struct FileModules {
    pub decls: Vec<Decl>,
    pub named: Vec<Named>,
}

/// Read the declarations and paths of one file.
pub fn read(src: &str) -> FileModules {
    let t = tokens(src);
    let mut out = FileModules::default();
    // Inline modules open here: (name, brace depth inside them, a test).
    let mut inline: Vec<(String, usize, bool)> = Vec::new();
    // The `mod` tokens under `#[cfg(test)]`.
    let tests = test_mods(&t);
    let mut depth = 0usize;
    let mut path_attr: Option<String> = None;
    let ident = |i: usize| match t.get(i) {
        Some((Tok::Ident(s), _)) => Some(s.as_str()),
        _ => None,
    };
    let punct = |i: usize, p: char| matches!(t.get(i), Some((Tok::Punct(q), _)) if *q == p);
    let within =
        |inline: &[(String, usize, bool)]| inline.iter().map(|(n, ..)| n.clone()).collect();
    let mut i = 0;
    while i < t.len() {
        match &t[i].0 {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                if inline.last().is_some_and(|(_, d, _)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Tok::Punct('#') if punct(i + 1, '[') && ident(i + 2) == Some("path") => {
                if let (true, Some((Tok::Str(p), _))) = (punct(i + 3, '='), t.get(i + 4)) {
                    path_attr = Some(p.clone());
                }
            }
            Tok::Ident(w) if w == "mod" => {
                if let Some(name) = ident(i + 1) {
                    let is_inline = punct(i + 2, '{');
                    if is_inline || punct(i + 2, ';') {
                        out.decls.push(Decl {
                            within: within(&inline),
                            name: name.to_string(),
                            inline: is_inline,
                            path: path_attr.take(),
                            test: tests.contains(&i),
                        });
                    }
                    if is_inline {
                        depth += 1;
                        inline.push((name.to_string(), depth, tests.contains(&i)));
                        i += 3;
                        continue;
                    }
                }
            }
            Tok::Ident(w) if w == "use" => {
                let mut j = i + 1;
                let mut paths = Vec::new();
                use_tree(&t, &mut j, Vec::new(), &mut paths);
                let in_test = inline.iter().any(|(.., t)| *t);
                for (segments, line) in paths.into_iter().filter(|_| !in_test) {
                    out.named.push(Named {
                        within: within(&inline),
                        segments,
                        line,
                    });
                }
                i = j;
                continue;
            }
            Tok::Ident(first) => {
                let starts = i == 0 || !matches!(t[i - 1].0, Tok::Sep | Tok::Punct('.'));
                let in_test = inline.iter().any(|(.., t)| *t);
                if starts && !in_test && matches!(t.get(i + 1), Some((Tok::Sep, _))) {
                    let mut segments = vec![first.clone()];
                    let mut j = i + 1;
                    while matches!(t.get(j), Some((Tok::Sep, _))) {
                        match ident(j + 1) {
                            Some(s) => segments.push(s.to_string()),
                            None => break,
                        }
                        j += 2;
                    }
                    out.named.push(Named {
                        within: within(&inline),
                        segments,
                        line: t[i].1,
                    });
                    i = j;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The indices of the `mod` tokens an attribute `#[cfg(test)]` stands
/// before (other attributes and a visibility may come between).
fn test_mods(t: &[(Tok, usize)]) -> Vec<usize> {
    let is = |i: usize, want: &Tok| t.get(i).is_some_and(|(x, _)| x == want);
    let word = |w: &str| Tok::Ident(w.to_string());
    let mut out = Vec::new();
    for i in 0..t.len() {
        let cfg_test = is(i, &Tok::Punct('#'))
            && is(i + 1, &Tok::Punct('['))
            && is(i + 2, &word("cfg"))
            && is(i + 3, &Tok::Punct('('))
            && is(i + 4, &word("test"))
            && is(i + 5, &Tok::Punct(')'))
            && is(i + 6, &Tok::Punct(']'));
        if !cfg_test {
            continue;
        }
        let mut k = i + 7;
        loop {
            if is(k, &Tok::Punct('#')) && is(k + 1, &Tok::Punct('[')) {
                // Another attribute: past its closing bracket.
                let mut depth = 0;
                while k < t.len() {
                    match t[k].0 {
                        Tok::Punct('[') => depth += 1,
                        Tok::Punct(']') => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    k += 1;
                }
                k += 1;
            } else if is(k, &word("pub")) {
                k += 1;
                if is(k, &Tok::Punct('(')) {
                    while k < t.len() && !is(k, &Tok::Punct(')')) {
                        k += 1;
                    }
                    k += 1;
                }
            } else {
                break;
            }
        }
        if is(k, &word("mod")) {
            out.push(k);
        }
    }
    out
}

/// A use tree from `*j` to its `;` (or the group's end): each leaf's full
/// path, with its line. A leading `::` (an external crate) names none.
fn use_tree(
    t: &[(Tok, usize)],
    j: &mut usize,
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, usize)>,
) {
    let mut path = prefix;
    let mut line = t.get(*j).map_or(0, |x| x.1);
    if path.is_empty() && matches!(t.get(*j), Some((Tok::Sep, _))) {
        // `use ::x`: an external crate; skip to the end of the item.
        while *j < t.len() && t[*j].0 != Tok::Punct(';') {
            *j += 1;
        }
        return;
    }
    loop {
        match t.get(*j) {
            Some((Tok::Ident(s), l)) if s != "as" => {
                path.push(s.clone());
                line = *l;
                *j += 1;
            }
            Some((Tok::Ident(_), _)) => {
                // `as name`: the alias names nothing further.
                *j += 2;
            }
            Some((Tok::Sep, _)) => *j += 1,
            Some((Tok::Punct('{'), _)) => {
                *j += 1;
                loop {
                    match t.get(*j) {
                        Some((Tok::Punct('}'), _)) => {
                            *j += 1;
                            break;
                        }
                        Some((Tok::Punct(','), _)) => *j += 1,
                        None => return,
                        _ => use_tree(t, j, path.clone(), out),
                    }
                }
                return;
            }
            Some((Tok::Punct('*'), l)) => {
                out.push((path.clone(), *l));
                *j += 1;
                return;
            }
            Some((Tok::Punct(';'), _)) => {
                out.push((path, line));
                *j += 1;
                return;
            }
            Some((Tok::Punct(','), _)) | Some((Tok::Punct('}'), _)) => {
                out.push((path, line));
                return;
            }
            _ => {
                *j += 1;
                if *j >= t.len() {
                    return;
                }
            }
        }
    }
}
