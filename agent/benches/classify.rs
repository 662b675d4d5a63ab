//! Class map cost: parsing a map of N prefixes and classifying a peer in
//! it, for growing N (both should grow about linearly and stay flat,
//! respectively). Run with `cargo bench -p nfsdtop-agent --bench classify`;
//! `-- --quick` runs small maps.

use std::hint::black_box;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Instant;

use nfsdtop_agent::enrich::classify::ClassMap;
use nfsdtop_agent::model::{Endpoint, PeerKey};

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let sizes: &[u32] = if quick {
        &[1_000, 10_000]
    } else {
        &[10_000, 100_000, 1_000_000]
    };
    println!("| prefixes | parse (ms) | ns/line | classify (ns/peer) |");
    println!("|---|---|---|---|");
    for &n in sizes {
        let text: String = (0..n)
            .map(|i| format!("{}/32 c{}\n", Ipv4Addr::from(0x0a00_0000 + i), i % 50))
            .collect();
        let t = Instant::now();
        let m = ClassMap::parse(black_box(&text), "bench").expect("valid map");
        let parse = t.elapsed().as_secs_f64();
        let peers: Vec<PeerKey> = (0..10_000u32)
            .map(|i| PeerKey {
                netns: 1,
                addr: Endpoint::from_socket_addr(SocketAddr::new(
                    Ipv4Addr::from(0x0a00_0000 + i * 7 % n.max(1)).into(),
                    0,
                )),
            })
            .collect();
        let t = Instant::now();
        for p in &peers {
            black_box(m.classify(black_box(p)));
        }
        let lookup = t.elapsed().as_secs_f64();
        println!(
            "| {n} | {:.1} | {:.0} | {:.0} |",
            parse * 1e3,
            parse * 1e9 / f64::from(n),
            lookup * 1e9 / peers.len() as f64
        );
    }
}
