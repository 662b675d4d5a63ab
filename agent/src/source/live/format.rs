//! Parser for tracefs event format files
//! (`/sys/kernel/tracing/events/<system>/<event>/format`): field names,
//! types, offsets, sizes, signedness, `__data_loc` dynamic fields, and the
//! flag names of the `print fmt` line's `__print_flags(REC->flags, ...)`.
//!
//! The kernel writes these files itself, but the parser never trusts them:
//! a line it does not understand is skipped, a malformed number is an
//! error naming the line, and nothing here panics.

use std::collections::BTreeMap;

/// One `field:` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    /// The C type as written, without the `__data_loc` prefix and without
    /// the field name (e.g. `unsigned long`, `unsigned char[]`).
    pub ty: String,
    pub offset: u32,
    pub size: u32,
    pub signed: bool,
    /// A `__data_loc` field: a u32 whose low 16 bits are the data's offset
    /// from the record start and high 16 bits its length.
    pub data_loc: bool,
    /// Fixed array length (`char comm[16]` → 16), if any.
    pub array_len: Option<u32>,
}

impl Field {
    /// `common_*` fields belong to every event (and are not valid from BPF).
    pub fn is_common(&self) -> bool {
        self.name.starts_with("common_")
    }
}

/// A parsed format file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Format {
    pub name: String,
    pub id: Option<u32>,
    pub fields: Vec<Field>,
    pub print_fmt: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct ParseError {
    pub line: usize,
    pub reason: String,
}

impl Format {
    pub fn parse(text: &str) -> Result<Format, ParseError> {
        let mut f = Format::default();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            let err = |reason: String| ParseError {
                line: i + 1,
                reason,
            };
            if let Some(rest) = line.strip_prefix("name:") {
                f.name = rest.trim().to_string();
            } else if let Some(rest) = line.strip_prefix("ID:") {
                f.id = rest.trim().parse().ok();
            } else if let Some(rest) = line.strip_prefix("print fmt:") {
                f.print_fmt = rest.trim().to_string();
            } else if line.starts_with("field:") {
                f.fields.push(parse_field(line).map_err(err)?);
            }
        }
        if f.fields.is_empty() {
            return Err(ParseError {
                line: 0,
                reason: "no field: lines (is this a tracefs format file?)".into(),
            });
        }
        Ok(f)
    }

    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// Names of the event's own fields (not `common_*`).
    pub fn own_fields(&self) -> Vec<String> {
        self.fields
            .iter()
            .filter(|f| !f.is_common())
            .map(|f| f.name.clone())
            .collect()
    }

    /// Flag name → mask from the `__print_flags(...)` of `print fmt` that
    /// prints `field` (e.g. `REC->flags`). Entries whose value is not a
    /// number the kernel resolved (an unknown enum name) are left out.
    pub fn print_flags(&self, field: &str) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        let needle = format!("REC->{field}");
        let mut rest = self.print_fmt.as_str();
        while let Some(at) = rest.find("__print_flags(") {
            rest = &rest[at + "__print_flags(".len()..];
            let args_end = matching_paren(rest).unwrap_or(rest.len());
            let args = &rest[..args_end];
            if args.trim_start().starts_with(&needle) {
                parse_flag_entries(args, &mut out);
            }
            rest = &rest[args_end..];
        }
        out
    }
}

fn parse_field(line: &str) -> Result<Field, String> {
    let mut decl = None;
    let (mut offset, mut size, mut signed) = (None, None, false);
    for part in line.split(';') {
        let part = part.trim();
        if let Some(d) = part.strip_prefix("field:") {
            decl = Some(d.trim());
        } else if let Some(v) = part.strip_prefix("offset:") {
            offset = Some(num(v, "offset")?);
        } else if let Some(v) = part.strip_prefix("size:") {
            size = Some(num(v, "size")?);
        } else if let Some(v) = part.strip_prefix("signed:") {
            signed = num(v, "signed")? != 0;
        }
    }
    let decl = decl.ok_or("no field declaration")?;
    let offset = offset.ok_or_else(|| format!("field {decl:?} has no offset"))?;
    let size = size.ok_or_else(|| format!("field {decl:?} has no size"))?;
    let (data_loc, decl) = match decl.strip_prefix("__data_loc") {
        Some(d) => (true, d.trim()),
        None => (false, decl),
    };
    // The name is the last token; an array suffix may stick to it.
    let split = decl
        .rfind(|c: char| c.is_whitespace() || c == '*')
        .map(|i| i + 1)
        .unwrap_or(0);
    let (ty, mut name) = (decl[..split].trim().to_string(), decl[split..].to_string());
    let mut array_len = None;
    if let Some(b) = name.find('[') {
        let inner = name[b + 1..].trim_end_matches(']').trim().to_string();
        array_len = inner.parse().ok();
        name.truncate(b);
    }
    if ty.is_empty()
        || name.is_empty()
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(format!("cannot read a field name in {decl:?}"));
    }
    Ok(Field {
        name,
        ty,
        offset,
        size,
        signed,
        data_loc,
        array_len,
    })
}

fn num(v: &str, what: &str) -> Result<u32, String> {
    v.trim()
        .parse()
        .map_err(|_| format!("{what} {:?} is not a number", v.trim()))
}

/// Index of the `)` closing an already-opened `(` at depth 1.
fn matching_paren(s: &str) -> Option<usize> {
    let mut depth = 1i32;
    let mut in_str = false;
    let mut prev = '\0';
    for (i, c) in s.char_indices() {
        match c {
            '"' if prev != '\\' => in_str = !in_str,
            '(' if !in_str => depth += 1,
            ')' if !in_str => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        prev = c;
    }
    None
}

/// `{ (1UL << (0)), "BUSY" }, { 0x2, "CONN" }, ...`
fn parse_flag_entries(args: &str, out: &mut BTreeMap<String, u64>) {
    let mut rest = args;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        let entry = &rest[open + 1..open + close];
        rest = &rest[open + close + 1..];
        let Some(q1) = entry.find('"') else { continue };
        let Some(q2) = entry[q1 + 1..].find('"') else {
            continue;
        };
        let name = entry[q1 + 1..q1 + 1 + q2].to_string();
        let expr = entry[..q1].trim().trim_end_matches(',');
        if let Some(mask) = eval_mask(expr) {
            out.insert(name, mask);
        }
    }
}

/// Evaluate the few forms flag values take: `(1UL << (N))`, `1 << N`,
/// `BIT(N)`, `0x..`, decimal. Anything else is unknown.
fn eval_mask(expr: &str) -> Option<u64> {
    let e: String = expr.chars().filter(|c| !c.is_whitespace()).collect();
    let e = strip_parens(&e);
    if let Some(inner) = e.strip_prefix("BIT(").and_then(|s| s.strip_suffix(')')) {
        return shift(1, inner);
    }
    if let Some((l, r)) = e.split_once("<<") {
        let l = strip_parens(l).trim_end_matches(['U', 'L', 'u', 'l']);
        return shift(int(l)?, r);
    }
    int(e.trim_end_matches(['U', 'L', 'u', 'l']))
}

fn shift(base: u64, bits: &str) -> Option<u64> {
    let n = int(strip_parens(bits).trim_end_matches(['U', 'L', 'u', 'l']))?;
    (n < 64).then(|| base << n)
}

fn int(s: &str) -> Option<u64> {
    let s = strip_parens(s);
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn strip_parens(mut s: &str) -> &str {
    while s.len() >= 2 && s.starts_with('(') && s.ends_with(')') {
        // Only strip when the outer pair matches each other.
        match matching_paren(&s[1..]) {
            Some(i) if i == s.len() - 2 => s = &s[1..s.len() - 1],
            _ => break,
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEQUEUE_612: &str = r#"name: svc_xprt_dequeue
ID: 1467
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:__data_loc unsigned char[] server;	offset:8;	size:4;	signed:0;
	field:__data_loc unsigned char[] client;	offset:12;	size:4;	signed:0;
	field:unsigned long flags;	offset:16;	size:8;	signed:0;
	field:unsigned int netns_ino;	offset:24;	size:4;	signed:0;
	field:unsigned long wakeup;	offset:32;	size:8;	signed:0;

print fmt: "server=%pISpc client=%pISpc flags=%s wakeup-us=%lu", __get_sockaddr(server), __get_sockaddr(client), __print_flags(REC->flags, "|", { (1UL << (0)), "BUSY" }, { (1UL << (1)), "CONN" }, { (1UL << (2)), "CLOSE" }, { (1UL << 9), "LISTENER" }), REC->wakeup
"#;

    #[test]
    fn parses_fields_offsets_sizes_and_data_loc() {
        let f = Format::parse(DEQUEUE_612).unwrap();
        assert_eq!(f.name, "svc_xprt_dequeue");
        assert_eq!(f.id, Some(1467));
        let server = f.field("server").unwrap();
        assert!(server.data_loc);
        assert_eq!((server.offset, server.size), (8, 4));
        assert_eq!(server.ty, "unsigned char[]");
        let flags = f.field("flags").unwrap();
        assert_eq!((flags.offset, flags.size, flags.signed), (16, 8, false));
        assert!(!flags.data_loc);
        assert!(f.field("common_pid").unwrap().signed);
        assert_eq!(
            f.own_fields(),
            ["server", "client", "flags", "netns_ino", "wakeup"]
        );
    }

    #[test]
    fn reads_flag_names_from_print_fmt() {
        let f = Format::parse(DEQUEUE_612).unwrap();
        let flags = f.print_flags("flags");
        assert_eq!(flags.get("BUSY"), Some(&1));
        assert_eq!(flags.get("CONN"), Some(&2));
        assert_eq!(flags.get("LISTENER"), Some(&(1 << 9)));
        assert!(f.print_flags("nosuch").is_empty());
    }

    #[test]
    fn flag_value_forms() {
        assert_eq!(eval_mask("(1UL << (6))"), Some(64));
        assert_eq!(eval_mask("1 << 3"), Some(8));
        assert_eq!(eval_mask("BIT(4)"), Some(16));
        assert_eq!(eval_mask("0x400"), Some(0x400));
        assert_eq!(eval_mask("32"), Some(32));
        assert_eq!(eval_mask("(1UL << XPT_BUSY)"), None);
        assert_eq!(eval_mask("1 << 99"), None);
    }

    #[test]
    fn arrays_and_pointers() {
        let f = Format::parse(
            "name: x\n\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:const void * ptr;\toffset:24;\tsize:8;\tsigned:0;\n",
        )
        .unwrap();
        assert_eq!(f.field("comm").unwrap().array_len, Some(16));
        assert_eq!(f.field("ptr").unwrap().ty, "const void *");
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        assert!(Format::parse("").is_err());
        assert!(Format::parse("garbage\n\u{0}\u{ffff}").is_err());
        let e = Format::parse("\tfield:int a;\toffset:x;\tsize:4;\tsigned:1;\n").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.reason.contains("offset"), "{e}");
        assert!(Format::parse("\tfield:int ;\toffset:1;\tsize:4;\n").is_err());
        // Truncated print fmt: no panic, no flags.
        let mut f = Format::parse(DEQUEUE_612).unwrap();
        f.print_fmt = "\"x\", __print_flags(REC->flags, \"|\", { (1UL << (0".into();
        let _ = f.print_flags("flags");
    }
}
