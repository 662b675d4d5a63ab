//! Reading the small text files a user hands us (class maps, demo
//! scenarios, nfsdtopd's config) with a size limit: `/dev/zero` or any
//! endless file given by mistake is refused after the limit, instead of
//! being read until memory runs out.

use std::io::Read;
use std::path::Path;

/// The most any of these files may hold. A class map of a million
/// prefixes is about 30 MB; the other files are a few kilobytes.
pub const MAX_TEXT_FILE: u64 = 64 << 20;

/// The text of `path`, at most `limit` bytes. `what` names the file in
/// errors ("class map", "scenario file", "config file"); `flag` is the
/// option that named it, so the message can say what to do.
pub fn read_text(path: &Path, what: &str, flag: &str, limit: u64) -> anyhow::Result<String> {
    let f = std::fs::File::open(path).map_err(|e| {
        anyhow::anyhow!(
            "cannot read {what} {}: {e} (pass a readable file to {flag})",
            path.display()
        )
    })?;
    let mut bytes = Vec::new();
    f.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| anyhow::anyhow!("cannot read {what} {}: {e}", path.display()))?;
    if bytes.len() as u64 > limit {
        anyhow::bail!(
            "{what} {} is larger than {} MiB (or endless, like a device): \
             pass a regular file of at most {} MiB to {flag}",
            path.display(),
            limit >> 20,
            limit >> 20
        );
    }
    String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{what} {} is not UTF-8 text (byte {} is not): pass a text file to {flag}",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_file_is_refused_at_the_limit() {
        let e = read_text(Path::new("/dev/zero"), "class map", "--class-map", 1 << 20)
            .unwrap_err()
            .to_string();
        assert!(e.contains("/dev/zero is larger than 1 MiB"), "{e}");
        assert!(e.contains("--class-map"), "{e}");
    }

    #[test]
    fn a_small_file_is_read_and_a_missing_one_named() {
        let dir = std::env::temp_dir().join(format!("nfsdtop-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("m");
        std::fs::write(&p, "10.0.0.0/8 a\n").unwrap();
        assert_eq!(read_text(&p, "x", "--x", 13).unwrap(), "10.0.0.0/8 a\n");
        assert!(read_text(&p, "x", "--x", 12).is_err());
        let e = read_text(&dir.join("nope"), "scenario file", "--demo", 10).unwrap_err();
        assert!(e.to_string().contains("cannot read scenario file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
