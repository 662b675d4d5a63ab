//! nfsdtopd's TOML config file: its own schema (what no flag says: the
//! tables and `redact_key`), where each value stood (for FILE:LINE:COL
//! errors), and how the file lands on [`Config`]: every other key is a
//! flag (`keys`), parsed and applied as the command line is, under it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use nfsdtop_agent::session::DEFAULT_SCENARIO;
use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use toml::Spanned;

use super::http::FileHttp;
use super::keys::FileArgs;
use super::Origin;
use super::{check_bcrypt_cost, Cli, Config, TlsFiles};
use crate::auth::PasswordHash;

/// The keys that are no flag. Unknown keys are not denied here: the
/// flags' keys are read apart (`keys`), which refuses the rest.
#[derive(Deserialize, Debug, Default)]
struct FileConfig {
    source: Option<Spanned<FileSource>>,
    tls_server_config: Option<Spanned<FileTls>>,
    basic_auth_users: Option<BTreeMap<String, Spanned<String>>>,
    redact_key: Option<Spanned<String>>,
    http: Option<FileHttp>,
}

/// `[source]`: the flags `--demo`, `--policy` and `--replay` as one table
/// (the keys `demo`, `policy` and `replay` say the same; not both), kept
/// so that existing files need no change.
#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct FileSource {
    kind: Spanned<String>,
    scenario: Option<Spanned<String>>,
    policy: Option<Spanned<String>>,
    path: Option<Spanned<String>>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct FileTls {
    cert_file: Spanned<PathBuf>,
    key_file: Spanned<PathBuf>,
}

/// The field names serde's derive gives `T` (its keys), asked of its
/// `Deserialize` itself so that they are written once.
pub(super) fn fields<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    struct Ask(&'static [&'static str]);
    impl<'de> Deserializer<'de> for &mut Ask {
        type Error = de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("only a struct's fields are asked"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            self.0 = fields;
            Err(de::Error::custom("only the fields are asked"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map enum identifier ignored_any
        }
    }
    let mut ask = Ask(&[]);
    let _ = T::deserialize(&mut ask);
    ask.0
}

/// The keys of the file's own (the rest are flags).
pub(super) fn table_keys() -> &'static [&'static str] {
    fields::<FileConfig>()
}

impl Config {
    pub(super) fn apply_file(&mut self, path: &Path, text: &str) -> anyhow::Result<()> {
        let o = Origin::new(path, text);
        let f: FileConfig = o.parse()?;
        let all: BTreeMap<Spanned<String>, Spanned<toml::Value>> = o.parse()?;
        let tables = table_keys();
        let cmd = Cli::command();
        // The source (its keys or [source]) is a command line of its own:
        // the live source's settings may stay in a file that watches the
        // demo, as they may on a command line that adds --demo to it.
        let mut args = FileArgs::default();
        let mut source = FileArgs::default();
        let mut entries: Vec<_> = all
            .iter()
            .filter(|(k, _)| !tables.contains(&k.get_ref().as_str()))
            .collect();
        entries.sort_by_key(|(k, _)| k.span().start);
        for (k, v) in entries {
            let to = match SOURCE_KEYS.contains(&k.get_ref().as_str()) {
                true => &mut source,
                false => &mut args,
            };
            to.entry(&o, &cmd, tables, k, v)?;
        }
        if let Some(src) = &f.source {
            source_args(&o, &cmd, src, &mut source)?;
        }
        let flags = args.parse(&o, cmd.clone())?;
        self.apply_cli(&flags)?;
        self.apply_cli(&source.parse(&o, cmd)?)?;
        self.warnings.extend(args.warnings);
        if let Some(t) = &f.tls_server_config {
            if flags.tls_cert.is_some() {
                return o.err(
                    t.span(),
                    "[tls_server_config] and tls_cert/tls_key say the same: keep one",
                );
            }
            let t = t.get_ref();
            self.tls = Some(TlsFiles {
                cert: o.path(t.cert_file.get_ref()),
                key: o.path(t.key_file.get_ref()),
            });
        }
        if let Some(k) = &f.redact_key {
            if k.get_ref().len() < 16 {
                return o.err(k.span(), "redact_key must be at least 16 characters");
            }
        }
        let off = args.off.iter().any(|k| k == "redact");
        match (off, &f.redact_key) {
            (true, _) => self.redact = None,
            (false, Some(k)) => self.redact = Some(Some(k.get_ref().clone())),
            (false, None) => {}
        }
        if let Some(h) = &f.http {
            super::http::apply(&o, h, &mut self.http)?;
        }
        if let Some(users) = &f.basic_auth_users {
            for (user, hash) in users {
                if user.is_empty() || user.contains(':') {
                    return o.err(
                        hash.span(),
                        format!("invalid user name {user:?} (empty or contains ':')"),
                    );
                }
                check_bcrypt_cost(hash.get_ref(), user).or_else(|e| o.err(hash.span(), e))?;
                let h = PasswordHash::parse(hash.get_ref())
                    .or_else(|e| o.err(hash.span(), format!("user {user:?}: {e}")))?;
                self.users.insert(user.clone(), h);
            }
        }
        Ok(())
    }
}

/// The keys that choose the source, as `[source]` does.
const SOURCE_KEYS: [&str; 3] = ["demo", "policy", "replay"];

/// `[source]` as the flags it stands for.
fn source_args(
    o: &Origin,
    cmd: &clap::Command,
    src: &Spanned<FileSource>,
    args: &mut FileArgs,
) -> anyhow::Result<()> {
    let s = src.get_ref();
    let flag = |id: &str| {
        cmd.get_arguments()
            .find(|a| a.get_id() == id)
            .expect("the agent's source flags")
    };
    let kind = s.kind.get_ref().as_str();
    if let (Some(p), false) = (&s.policy, kind == "demo") {
        return o.err(p.span(), "policy applies to kind = \"demo\" only");
    }
    match kind {
        "live" => Ok(()),
        "demo" => {
            let (scenario, span) = match &s.scenario {
                Some(sc) => (sc.get_ref().clone(), sc.span()),
                None => (DEFAULT_SCENARIO.to_string(), s.kind.span()),
            };
            args.push(o, cmd, flag("demo"), "scenario", Some(scenario), span)?;
            if let Some(p) = &s.policy {
                args.push(
                    o,
                    cmd,
                    flag("policy"),
                    "policy",
                    Some(p.get_ref().clone()),
                    p.span(),
                )?;
            }
            Ok(())
        }
        "replay" => match &s.path {
            Some(p) => args.push(
                o,
                cmd,
                flag("replay"),
                "path",
                Some(p.get_ref().clone()),
                p.span(),
            ),
            None => o.err(src.span(), "source kind \"replay\" needs path = \"FILE\""),
        },
        other => o.err(
            s.kind.span(),
            format!("unknown source kind {other:?}: expected live, demo or replay"),
        ),
    }
}
