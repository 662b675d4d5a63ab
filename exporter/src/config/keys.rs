//! The config file's keys that are flags: each long flag of nfsdtopd's
//! command line ([`Cli`], the agent's source flags included) is the key
//! of the same name with `_` for `-` (`--ring-size` is `ring_size`; a flag
//! whose name has a dot is the key of its alias, `listen`). The file's
//! values become that command line and are parsed by the same clap
//! definition, so each setting has one name, one help and one check; here
//! is which flag a key is, how a TOML value becomes an argument, and
//! clap's complaints as FILE:LINE:COL errors.

use std::ffi::OsString;
use std::ops::Range;
use std::path::Path;

use anyhow::anyhow;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Arg, ArgAction, Command, FromArgMatches, ValueHint};
use toml::{Spanned, Value};

use super::Cli;
use super::Origin;

/// Flags that are no setting of the file: where it is, something to do
/// instead of serving, and the web config file, whose TLS and users would
/// meet the file's own tables.
pub(super) const NOT_KEYS: &[&str] = &["config", "completions", "manpage", "web_config_file"];

/// Keys older files use, each the negation of a flag: `KEY = false` is
/// the flag, `KEY = true` its default. Accepted with a warning.
pub(super) const OLD_KEYS: &[(&str, &str)] = &[
    ("typed_program", "no_typed_program"),
    ("raw_tracepoints", "classic_tracepoints"),
];

/// The key of a flag, if it has one.
pub(super) fn key_of(arg: &Arg) -> Option<String> {
    let special = matches!(
        arg.get_action(),
        ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong | ArgAction::Version
    );
    if special || NOT_KEYS.contains(&arg.get_id().as_str()) {
        return None;
    }
    std::iter::once(arg.get_long()?)
        .chain(arg.get_all_aliases().into_iter().flatten())
        .find(|n| !n.contains('.'))
        .map(|n| n.replace('-', "_"))
}

/// The flag whose key is `key`.
pub(super) fn flag<'c>(cmd: &'c Command, key: &str) -> Option<&'c Arg> {
    cmd.get_arguments()
        .find(|a| key_of(a).as_deref() == Some(key))
}

/// The file's flag keys as nfsdtopd's command line.
#[derive(Default)]
pub(super) struct FileArgs {
    /// Each argument with the key it came from and where its value stood.
    args: Vec<(String, OsString, Range<usize>)>,
    /// Keys set to false (`redact = false` still turns redaction off when
    /// the file has a `redact_key` too).
    pub(super) off: Vec<String>,
    pub(super) warnings: Vec<String>,
}

impl FileArgs {
    /// `key = value`, a top-level entry that is no table of the file's
    /// own (`tables`, named in the error for an unknown key).
    pub(super) fn entry(
        &mut self,
        o: &Origin,
        cmd: &Command,
        tables: &[&str],
        key: &Spanned<String>,
        value: &Spanned<Value>,
    ) -> anyhow::Result<()> {
        let name = key.get_ref().as_str();
        let old = OLD_KEYS.iter().find(|(k, _)| *k == name);
        match (value.get_ref(), flag(cmd, name), old) {
            (Value::Boolean(b), arg, Some((_, new))) if !b || arg.is_none() => {
                self.warnings.push(format!(
                    "warning: {}: {name} = {b} is the old name of {new} = {}: rename it \
                     (the old name keeps working)",
                    o.at(key.span().start),
                    !b
                ));
                if !b {
                    let arg = flag(cmd, new).expect("OLD_KEYS names flags");
                    self.push(o, cmd, arg, name, None, value.span())?;
                }
                Ok(())
            }
            (v, Some(arg), _) => self.value(o, cmd, arg, name, v, value.span()),
            (v, None, Some(_)) => o.err(
                value.span(),
                format!("{name} must be true or false, not {v}"),
            ),
            (_, None, None) => {
                let keys = cmd.get_arguments().filter_map(key_of).chain(
                    tables
                        .iter()
                        .chain(OLD_KEYS.iter().map(|(k, _)| k))
                        .map(|k| k.to_string()),
                );
                let hint = match keys.min_by_key(|k| distance(k, name)) {
                    Some(k) if distance(&k, name) <= 2 => format!("write {k}"),
                    _ => format!(
                        "the keys are nfsdtopd's long flags with _ for - (nfsdtopd --help: \
                         ring_size is --ring-size) and {}; see nfsdtopd.example.toml",
                        tables.join(", ")
                    ),
                };
                o.err(key.span(), format!("unknown key {name:?}: {hint}"))
            }
        }
    }

    /// A flag's value from the file: true or false for a flag without
    /// one; a string or number otherwise (true alone for a flag whose value
    /// may be left out, `wait = true`).
    fn value(
        &mut self,
        o: &Origin,
        cmd: &Command,
        arg: &Arg,
        key: &str,
        v: &Value,
        span: Range<usize>,
    ) -> anyhow::Result<()> {
        let takes = arg.get_action().takes_values();
        let optional = arg.get_num_args().is_some_and(|r| r.min_values() == 0);
        let text = match v {
            Value::Boolean(false) if !takes || optional => {
                self.off.push(key.to_string());
                return Ok(());
            }
            Value::Boolean(true) if !takes || optional => None,
            Value::String(s) if takes => Some(s.clone()),
            Value::Integer(n) if takes => Some(n.to_string()),
            Value::Float(x) if takes => Some(x.to_string()),
            _ if !takes => return o.err(span, format!("{key} must be true or false, not {v}")),
            _ => {
                let what = arg
                    .get_value_names()
                    .and_then(|n| n.first())
                    .map_or("value".to_string(), |n| n.to_string());
                return o.err(
                    span,
                    format!("{key} must be a string or number ({what}), not {v}"),
                );
            }
        };
        self.push(o, cmd, arg, key, text, span)
    }

    /// Check a flag's value with its own parser, and keep the argument.
    /// Paths are relative to the file's directory (and so is a demo
    /// scenario that is a .toml file).
    pub(super) fn push(
        &mut self,
        o: &Origin,
        cmd: &Command,
        arg: &Arg,
        key: &str,
        value: Option<String>,
        span: Range<usize>,
    ) -> anyhow::Result<()> {
        let long = arg.get_long().expect("keys are long flags");
        let mut line = OsString::from(format!("--{long}"));
        if let Some(v) = value {
            let path = matches!(
                arg.get_value_hint(),
                ValueHint::AnyPath | ValueHint::FilePath | ValueHint::DirPath
            ) || (arg.get_id() == "demo" && v.ends_with(".toml"));
            let v = if path {
                o.path(Path::new(&v)).into_os_string()
            } else {
                OsString::from(v)
            };
            line.push("=");
            line.push(&v);
        }
        // The flag alone through the whole command line: its own parser
        // checks the value, and nothing else can be wrong with one flag
        // but another it needs (left to `parse`, which sees them all).
        let alone = [OsString::from("nfsdtopd"), line.clone()];
        if let Err(e) = cmd.clone().try_get_matches_from(alone) {
            if e.kind() != ErrorKind::MissingRequiredArgument {
                let why = reason(&e);
                return if why.contains(key) {
                    o.err(span, why)
                } else {
                    o.err(span, format!("{key}: {why}"))
                };
            }
        }
        self.args.push((key.to_string(), line, span));
        Ok(())
    }

    /// The arguments parsed as nfsdtopd's command line: what the values
    /// are together (a conflict, one without the other it needs).
    pub(super) fn parse(&self, o: &Origin, cmd: Command) -> anyhow::Result<Cli> {
        let line = std::iter::once(OsString::from("nfsdtopd"))
            .chain(self.args.iter().map(|(_, a, _)| a.clone()));
        let matches = cmd
            .clone()
            .try_get_matches_from(line)
            .map_err(|e| self.explain(o, &cmd, &e))?;
        Cli::from_arg_matches(&matches).map_err(|e| anyhow!("{}: {}", o.whole(), reason(&e)))
    }

    /// A whole-line complaint at the key of the flag it names.
    fn explain(&self, o: &Origin, cmd: &Command, e: &clap::Error) -> anyhow::Error {
        let named = match e.get(ContextKind::InvalidArg) {
            Some(ContextValue::String(s)) => s.split([' ', '=']).next().unwrap_or(""),
            _ => "",
        };
        let at = self.args.iter().find(|(_, a, _)| {
            let a = a.to_string_lossy();
            !named.is_empty() && a.split('=').next() == Some(named)
        });
        let what = match e.kind() {
            ErrorKind::ArgumentConflict => format!("{}; drop one of the two", reason(e)),
            ErrorKind::MissingRequiredArgument => {
                let missing: Vec<String> = match e.get(ContextKind::InvalidArg) {
                    Some(ContextValue::Strings(v)) => v
                        .iter()
                        .filter_map(|s| {
                            let long = s.trim_start_matches('-').split([' ', '=']).next()?;
                            key_of(cmd.get_arguments().find(|a| a.get_long() == Some(long))?)
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                format!("the keys given need {} too: add it", missing.join(" and "))
            }
            _ => reason(e),
        };
        match at {
            Some((key, _, span)) => anyhow!("{}: {key}: {what}", o.at(span.start)),
            None => anyhow!("{}: {what}", o.whole()),
        }
    }
}

/// Edits from `a` to `b` (Levenshtein): a key this close to a known one
/// is taken for a typo of it.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(here + 1);
            prev = here;
        }
    }
    row[b.len()]
}

/// What clap found wrong, in one line: the parser's own message where
/// there is one.
fn reason(e: &clap::Error) -> String {
    if let Some(s) = std::error::Error::source(e) {
        return s.to_string();
    }
    let text = e.render().to_string();
    let text = text
        .split("\n\nFor more information")
        .next()
        .and_then(|t| t.split("\n\nUsage:").next())
        .unwrap_or("");
    nfsdtop_agent::text::one_line(text.strip_prefix("error: ").unwrap_or(text))
}
