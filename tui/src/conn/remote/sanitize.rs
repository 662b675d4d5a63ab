//! Text in snapshots made safe to draw: every character
//! [`nfsdtop_agent::text::displayable`] replaces (controls such as ESC,
//! bidi and other format characters, separators, characters drawn at
//! another width than ratatui counts) becomes `?`. A remote nfsdtopd, or
//! anything between it and the TUI on plain http, could otherwise send
//! escape sequences that retitle, clear or recolour the operator's
//! terminal through a peer, class, client or host name; and a name a
//! client chose (its NFSv4 owner, its PTR record) could shift the
//! table's cells. Every snapshot the TUI shows, local or remote, passes
//! here (`nfsdtop::state::State::on_snapshot`).

pub use nfsdtop_agent::text::{displayable, displayable_snapshot as snapshot};

#[cfg(test)]
mod tests {
    use super::*;
    use nfsdtop_agent::model::Snapshot;
    use nfsdtop_agent::model::{ClientName, EntityStats};

    #[test]
    fn escapes_in_every_remote_text_become_question_marks() {
        let evil = "EVIL\u{1b}]0;TITLE\u{7}\u{1b}[41mX\u{9b}31m\r\n";
        let mut s = Snapshot::default();
        s.source.detail = evil.into();
        s.source.host = evil.into();
        s.peers.push(EntityStats {
            name: evil.into(),
            class: evil.into(),
            hostname: Some(evil.into()),
            client_names: vec![ClientName {
                name: evil.into(),
                minor_version: Some(2),
                implementation: Some(evil.into()),
            }],
            ..EntityStats::default()
        });
        snapshot(&mut s);
        let text = serde_json::to_string(&s).unwrap();
        assert!(
            !text.contains("\\u001b") && !text.contains("\\u0007"),
            "{text}"
        );
        assert!(!s.peers[0].name.chars().any(char::is_control));
        assert_eq!(s.peers[0].name, "EVIL?]0;TITLE??[41mX?31m??");
        assert_eq!(
            s.peers[0].client_names[0].implementation.as_deref(),
            Some("EVIL?]0;TITLE??[41mX?31m??")
        );
        // Printable text, non-ASCII included, is left alone.
        let mut ok = Snapshot::default();
        ok.source.host = "nfs-01.exämple".into();
        snapshot(&mut ok);
        assert_eq!(ok.source.host, "nfs-01.exämple");
    }
}
