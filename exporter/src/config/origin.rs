//! Where in nfsdtopd's config file a value stood: FILE:LINE:COL for the
//! errors of every part that reads the file (its tables, its flag keys,
//! its `[http]` table).

use std::path::{Path, PathBuf};

use anyhow::anyhow;

/// Where in the config file a value was (for error messages).
pub(crate) struct Origin<'a> {
    path: &'a Path,
    text: &'a str,
}

impl<'a> Origin<'a> {
    pub(super) fn new(path: &'a Path, text: &'a str) -> Self {
        Origin { path, text }
    }

    pub(super) fn at(&self, offset: usize) -> String {
        let offset = offset.min(self.text.len());
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let col = before.len() - before.rfind('\n').map(|i| i + 1).unwrap_or(0) + 1;
        format!("{}:{line}:{col}", self.path.display())
    }

    /// The file, for what no one value says.
    pub(super) fn whole(&self) -> String {
        self.path.display().to_string()
    }

    pub(crate) fn err<T>(
        &self,
        span: std::ops::Range<usize>,
        reason: impl std::fmt::Display,
    ) -> anyhow::Result<T> {
        Err(anyhow!("{}: {reason}", self.at(span.start)))
    }

    /// Paths in the file are relative to the file's directory.
    pub(super) fn path(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.path.parent().unwrap_or(Path::new(".")).join(p)
        }
    }

    /// The text as `T`, a syntax or type error at its place.
    pub(super) fn parse<T: serde::de::DeserializeOwned>(&self) -> anyhow::Result<T> {
        toml::from_str(self.text).map_err(|e| {
            let at = match e.span() {
                Some(span) => self.at(span.start),
                None => self.whole(),
            };
            anyhow!("{at}: {}", nfsdtop_agent::text::one_line(e.message()))
        })
    }
}
