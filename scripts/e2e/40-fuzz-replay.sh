#!/usr/bin/env bash
# Fuzz the recording reader (agent/src/record/reader.rs) with cargo-fuzz
# (libFuzzer, nightly) for a bounded time: NFSDTOP_FUZZ_SECONDS, default 60.
# The target (fuzz/fuzz_targets/replay.rs) reads each input as it is and
# with its checksums recomputed; any panic or failed check fails this
# script, and libFuzzer leaves the input in fuzz/artifacts/replay/.
#
# cargo-fuzz is installed on first use (cargo install --locked). Where it
# cannot be installed or the nightly toolchain is missing, this script says
# so and exits 0: the deterministic mutation fuzzer that `cargo test` runs
# (agent/tests/record_fuzz.rs) stands in for it.
set -euo pipefail
cd "$(dirname "$0")/../.."

secs="${NFSDTOP_FUZZ_SECONDS:-60}"
say() { echo "40-fuzz-replay: $*"; }

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    say "SKIPPED: no nightly toolchain (cargo-fuzz needs one); agent/tests/record_fuzz.rs stands in"
    exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    say "installing cargo-fuzz (cargo install cargo-fuzz --locked)"
    if ! cargo install cargo-fuzz --locked; then
        say "SKIPPED: cargo-fuzz cannot be installed here; agent/tests/record_fuzz.rs stands in"
        exit 0
    fi
fi
say "$(cargo fuzz --version)"

# Seeds: real recordings of the demo (one frame, and several).
corpus="$(mktemp -d)"
trap 'rm -rf "$corpus"' EXIT
nfsdtop() { cargo run --quiet -p nfsdtop -- "$@"; }
for n in 300 9000; do
    nfsdtop record -o "$corpus/movers-$n.nfsdrec" --demo movers --speed 0 --count "$n" 2>/dev/null
done
nfsdtop record -o "$corpus/k4.nfsdrec" --demo seed-k4 --speed 0 --duration 1 2>/dev/null

# The fuzz build needs no BPF programs (agent/build.rs skips them).
log="$corpus/fuzz.log"
corpus_dir="$corpus/corpus"
mkdir -p "$corpus_dir"
mv "$corpus"/*.nfsdrec "$corpus_dir"/
say "fuzzing for ${secs}s"
if NFSDTOP_NO_BPF=1 cargo +nightly fuzz run replay "$corpus_dir" -- \
    -max_total_time="$secs" -max_len=131072 -rss_limit_mb=2048 -print_final_stats=1 \
    >"$log" 2>&1; then
    grep -E '^(stat::|Done|INFO: seed corpus)' "$log" || true
    say "ok: no crash in ${secs}s"
else
    tail -n 80 "$log"
    say "FAILED (the crashing input is in fuzz/artifacts/replay/)"
    exit 1
fi
