//! Enrichment, between the source and the aggregator: what a peer is
//! besides its address. Peers → classes ([`classify`]: a class map file
//! or the kernel's class), → the NFSv4 clients' own names ([`clients`]:
//! nfsd's client list), → host names only when asked ([`resolve`]:
//! `--resolve`), and addresses → keyed-hash pseudonyms where the list is
//! sensitive ([`redact`]).

pub mod classify;
pub mod clients;
pub mod redact;
pub mod resolve;
