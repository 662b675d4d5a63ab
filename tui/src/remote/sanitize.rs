//! Text in snapshots made elsewhere (`--connect`) made safe to draw: every
//! control character (C0, DEL, C1: ESC, BEL, CSI...) becomes `?`. A
//! remote agent, or anything between it and the TUI on plain http, could
//! otherwise send escape sequences that retitle, clear or recolour the
//! operator's terminal through a peer, class, client or host name. The
//! local agent cleans names it reads itself (`nfsdtop_agent::clients`);
//! this does the same for everything a remote snapshot carries as text.

use nfsdtop_agent::model::Snapshot;
pub use nfsdtop_agent::text::without_controls;

fn clean(text: &mut String) {
    if text.chars().any(char::is_control) {
        *text = without_controls(text);
    }
}

pub fn snapshot(s: &mut Snapshot) {
    let src = &mut s.source;
    for t in [
        &mut src.kernel,
        &mut src.generation,
        &mut src.detail,
        &mut src.host,
    ] {
        clean(t);
    }
    for b in &mut s.totals.bpf {
        clean(&mut b.program);
    }
    for e in s.peers.iter_mut().chain(s.classes.iter_mut()) {
        clean(&mut e.name);
        clean(&mut e.class);
        for t in &mut e.transports {
            clean(&mut t.client);
            clean(&mut t.server);
        }
        for c in &mut e.client_names {
            clean(&mut c.name);
            if let Some(i) = &mut c.implementation {
                clean(i);
            }
        }
        if let Some(h) = &mut e.hostname {
            clean(h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
