//! Server-sent events (the WHATWG `text/event-stream` format) from bytes
//! as they arrive, in pieces of any size: `event:` and `data:` fields, a
//! blank line ending each event, `:` comments (keep-alives) ignored. Lines
//! and events are bounded, so a hostile or broken agent cannot make the
//! client grow without bound.

/// Longest event accepted (a snapshot of many peers is one line of JSON).
pub const MAX_EVENT: usize = 256 << 20;

#[derive(Debug, PartialEq, Eq)]
pub struct Event {
    /// The `event:` field ("" when there was none: a "message").
    pub name: String,
    pub data: String,
}

pub struct Parser {
    /// Longest event accepted, bytes.
    limit: usize,
    line: Vec<u8>,
    name: String,
    data: String,
    /// The previous piece ended with CR: an LF starting this one is part of it.
    after_cr: bool,
}

impl Default for Parser {
    fn default() -> Parser {
        Parser::with_limit(MAX_EVENT)
    }
}

impl Parser {
    pub fn with_limit(limit: usize) -> Parser {
        Parser {
            limit,
            line: Vec::new(),
            name: String::new(),
            data: String::new(),
            after_cr: false,
        }
    }

    /// Take `bytes`; hand every event they complete to `on_event`.
    pub fn feed(
        &mut self,
        mut bytes: &[u8],
        on_event: &mut dyn FnMut(Event),
    ) -> Result<(), String> {
        if self.after_cr && bytes.first() == Some(&b'\n') {
            bytes = &bytes[1..];
        }
        self.after_cr = false;
        while let Some(i) = bytes.iter().position(|b| *b == b'\n' || *b == b'\r') {
            self.push(&bytes[..i])?;
            let line = std::mem::take(&mut self.line);
            self.line_done(&line, on_event)?;
            let crlf = bytes[i] == b'\r' && bytes.get(i + 1) == Some(&b'\n');
            if bytes[i] == b'\r' && i + 1 == bytes.len() {
                self.after_cr = true;
            }
            bytes = &bytes[i + 1 + crlf as usize..];
        }
        self.push(bytes)
    }

    fn push(&mut self, b: &[u8]) -> Result<(), String> {
        if self.line.len() + self.data.len() + b.len() > self.limit {
            return Err(format!(
                "nfsdtopd sent an event longer than {} MiB",
                self.limit >> 20
            ));
        }
        self.line.extend_from_slice(b);
        Ok(())
    }

    fn line_done(&mut self, line: &[u8], on_event: &mut dyn FnMut(Event)) -> Result<(), String> {
        if line.is_empty() {
            if !self.data.is_empty() {
                on_event(Event {
                    name: std::mem::take(&mut self.name),
                    data: std::mem::take(&mut self.data),
                });
            }
            self.name.clear();
            return Ok(());
        }
        let line = std::str::from_utf8(line)
            .map_err(|_| "nfsdtopd sent bytes that are not UTF-8".to_string())?;
        // field: value (one optional space after the colon).
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "" => {} // a comment / keep-alive
            "event" => self.name = value.to_string(),
            "data" => {
                if !self.data.is_empty() {
                    self.data.push('\n');
                }
                self.data.push_str(value);
            }
            _ => {} // id, retry
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pieces: &[&[u8]]) -> Result<Vec<Event>, String> {
        let mut p = Parser::default();
        let mut out = Vec::new();
        for piece in pieces {
            p.feed(piece, &mut |e| out.push(e))?;
        }
        Ok(out)
    }

    #[test]
    fn events_split_anywhere_with_any_line_ending() {
        let text = b": keep-alive\n\nevent: snapshot\r\ndata: {\"a\":\r\ndata:1}\r\n\r\ndata: x\rid: 3\r\r";
        let want = vec![
            Event {
                name: "snapshot".into(),
                data: "{\"a\":\n1}".into(),
            },
            Event {
                name: "".into(),
                data: "x".into(),
            },
        ];
        assert_eq!(parse(&[text]).unwrap(), want);
        // Every split point, including between CR and LF.
        for i in 0..text.len() {
            assert_eq!(
                parse(&[&text[..i], &text[i..]]).unwrap(),
                want,
                "split at {i}"
            );
        }
        let bytes: Vec<&[u8]> = text.chunks(1).collect();
        assert_eq!(parse(&bytes).unwrap(), want);
    }

    #[test]
    fn an_endless_line_is_refused_not_buffered() {
        let mut p = Parser::with_limit(4 << 20);
        let piece = vec![b'x'; 1 << 20];
        let mut err = None;
        for _ in 0..6 {
            if let Err(e) = p.feed(&piece, &mut |_| {}) {
                err = Some(e);
                break;
            }
        }
        assert!(err.expect("refused").contains("longer than 4 MiB"));
        assert!(p.line.len() <= 4 << 20);
        // Many data lines add up to one event: bounded too.
        let mut p = Parser::with_limit(1 << 20);
        let line = format!("data: {}\n", "y".repeat(1000));
        let refused = (0..2000).any(|_| p.feed(line.as_bytes(), &mut |_| {}).is_err());
        assert!(refused);
        assert!(parse(&[b"data: \xff\n\n"]).unwrap_err().contains("UTF-8"));
    }
}
