//! How tests that need this host's BPF, tracefs or root say "skipped".
//!
//! A skipped test passes, so a broken BPF path could hide behind one. The
//! test suite (`cargo xtask test`, and so CI, which runs as root with BPF)
//! sets `NFSDTOP_REQUIRE_BPF=1`: there a missing precondition is a failure.

/// The environment variable that turns skips into failures.
pub const REQUIRE_BPF: &str = "NFSDTOP_REQUIRE_BPF";

/// Report that a test cannot run here because of `reason`: prints
/// "skipped: REASON" where skipping is allowed, panics where the suite
/// demands the precondition (`NFSDTOP_REQUIRE_BPF=1`).
pub fn skip(reason: &str) {
    if std::env::var(REQUIRE_BPF).is_ok_and(|v| v == "1") {
        panic!("{reason}, and {REQUIRE_BPF}=1 says this host must have it");
    }
    println!("skipped: {reason}");
}
