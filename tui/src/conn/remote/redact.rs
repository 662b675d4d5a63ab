//! `--redact` for snapshots made elsewhere (`--connect`): every client
//! address in them (peer names, per-peer classes' "class/address", the
//! transports' client ends) becomes the same keyed-hash pseudonym the
//! local aggregator would show (nfsdtop_agent::enrich::redact). Names that hold no
//! address (classes, "(listener)", pseudonyms the agent already made) stay.
//! NFSv4 client names always become pseudonyms: nothing tells a name the
//! agent redacted from one it did not; host names (`--resolve`) likewise.

use std::net::{IpAddr, SocketAddr};

use nfsdtop_agent::enrich::redact::Redactor;
use nfsdtop_agent::model::Snapshot;

pub fn snapshot(r: &Redactor, s: &mut Snapshot) {
    for e in s.peers.iter_mut().chain(s.classes.iter_mut()) {
        e.name = name(r, &e.name);
        e.class = name(r, &e.class);
        for t in &mut e.transports {
            t.client = name(r, &t.client);
        }
        for c in &mut e.client_names {
            *c = r.client_name(c);
        }
        if let Some(h) = &mut e.hostname {
            *h = r.hostname(h);
        }
    }
}

/// `name` with an address, or an address after its last `/`, replaced.
fn name(r: &Redactor, name: &str) -> String {
    if let Some(shown) = address(r, name) {
        return shown;
    }
    match name.rsplit_once('/') {
        Some((class, tail)) => match address(r, tail) {
            Some(shown) => format!("{class}/{shown}"),
            None => name.to_string(),
        },
        None => name.to_string(),
    }
}

fn address(r: &Redactor, s: &str) -> Option<String> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(r.pseudonym(ip));
    }
    s.parse::<SocketAddr>()
        .ok()
        .map(|a| format!("{}:{}", r.pseudonym(a.ip()), a.port()))
}

#[cfg(test)]
mod tests {
    use nfsdtop_agent::model::{ClientName, EntityStats, TransportStats};

    use super::*;

    #[test]
    fn every_client_address_is_replaced() {
        let r = Redactor::with_key("test key, long enough");
        let mut s = Snapshot {
            peers: vec![
                EntityStats {
                    name: "10.0.0.2".into(),
                    class: "customers/10.0.0.2".into(),
                    transports: vec![TransportStats {
                        client: "10.0.0.2:812".into(),
                        server: "10.0.0.1:2049".into(),
                        ..Default::default()
                    }],
                    client_names: vec![ClientName {
                        name: "Linux NFSv4.2 secret-host".into(),
                        minor_version: Some(2),
                        implementation: Some("Linux 6.12 secret-host".into()),
                    }],
                    hostname: Some("secret-host.example.org".into()),
                    ..Default::default()
                },
                EntityStats {
                    name: "fd00::7".into(),
                    class: "lab".into(),
                    ..Default::default()
                },
            ],
            classes: vec![EntityStats {
                name: "customers/10.0.0.2".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        snapshot(&r, &mut s);
        let p = r.pseudonym("10.0.0.2".parse().unwrap());
        assert_eq!(s.peers[0].name, p);
        assert_eq!(s.peers[0].class, format!("customers/{p}"));
        assert_eq!(s.peers[0].transports[0].client, format!("{p}:812"));
        assert_eq!(
            s.peers[0].transports[0].server, "10.0.0.1:2049",
            "the server's own address stays"
        );
        assert_eq!(s.peers[1].name, r.pseudonym("fd00::7".parse().unwrap()));
        assert_eq!(s.peers[1].class, "lab");
        assert_eq!(s.classes[0].name, format!("customers/{p}"));
        let text = serde_json::to_string(&s).unwrap();
        assert!(
            !text.contains("10.0.0.2") && !text.contains("fd00::7") && !text.contains("secret"),
            "{text}"
        );
        assert_eq!(s.peers[0].client_names[0].minor_version, Some(2));
        assert_eq!(
            s.peers[0].hostname.as_deref(),
            Some(r.hostname("secret-host.example.org").as_str())
        );
    }
}
