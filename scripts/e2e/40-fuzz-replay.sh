#!/usr/bin/env bash
# Fuzz nfsdtop's input parsers with cargo-fuzz (libFuzzer, nightly) for a
# bounded time: the recording reader (agent/src/record/reader.rs, target
# fuzz/fuzz_targets/replay.rs) for NFSDTOP_FUZZ_SECONDS (default 60), then
# demo scenario TOML and class maps (targets scenario.rs and class_map.rs,
# properties in agent/src/fuzzing.rs) for NFSDTOP_FUZZ_INPUT_SECONDS each
# (default 20). Any panic or failed check fails this script, and libFuzzer
# leaves the input in fuzz/artifacts/<target>/.
#
# cargo-fuzz is installed on first use (cargo install --locked). Where it
# cannot be installed or the nightly toolchain is missing, this script says
# so and exits 0 (1 under CI=true): the deterministic mutation fuzzers that `cargo test` runs
# (agent/tests/record_fuzz.rs, agent/tests/input_fuzz.rs) stand in for it.
set -euo pipefail
cd "$(dirname "$0")/../.."

secs="${NFSDTOP_FUZZ_SECONDS:-60}"
input_secs="${NFSDTOP_FUZZ_INPUT_SECONDS:-20}"
say() { echo "40-fuzz-replay: $*"; }
# Under CI (CI=true) the toolchain is there to be had: a skip is a failure.
skip() {
    say "SKIPPED: $*"
    if [ "${CI:-}" = true ]; then say "CI=true: a skipped fuzz run fails"; exit 1; fi
    exit 0
}

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    skip "no nightly toolchain (cargo-fuzz needs one); agent/tests/record_fuzz.rs and input_fuzz.rs stand in"
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    say "installing cargo-fuzz (cargo install cargo-fuzz --locked)"
    if ! cargo install cargo-fuzz --locked; then
        skip "cargo-fuzz cannot be installed here; agent/tests/record_fuzz.rs and input_fuzz.rs stand in"
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
# fuzz TARGET SECONDS CORPUS [libFuzzer options]
fuzz() {
    local target="$1" t="$2" dir="$3"
    shift 3
    say "fuzzing $target for ${t}s"
    if NFSDTOP_NO_BPF=1 cargo +nightly fuzz run "$target" "$dir" -- \
        -max_total_time="$t" -rss_limit_mb=2048 -print_final_stats=1 "$@" \
        >"$log" 2>&1; then
        grep -E '^(stat::|Done|INFO: seed corpus)' "$log" || true
        say "ok: $target, no crash in ${t}s"
    else
        tail -n 80 "$log"
        say "FAILED (the crashing input is in fuzz/artifacts/$target/)"
        exit 1
    fi
}
fuzz replay "$secs" "$corpus_dir" -max_len=131072

# Seeds for the text inputs: a scenario with every key, and a class map.
scen_dir="$corpus/scenarios"
maps_dir="$corpus/maps"
mkdir -p "$scen_dir" "$maps_dir"
cat >"$scen_dir/all-keys.toml" <<'TOML'
name = "seed"
threads = 16
service_ms = 10.0
jitter = 0.5
policy = "rr-class"
rtt_us = 100.0

[[client]]
address = "10.0.0.2"
count = 3
connections = 2
inflight = 32

[[client]]
address = "fd00::9"
connections = 1
burst = 8
think_ms = 5.0

[[class]]
prefix = "10.0.0.0/24"
name = "movers"
per_peer = true
TOML
printf '# prefix class [per-peer]\n10.1.0.0/24 movers\n0.0.0.0/0 customers per-peer\nfd00:1::/64 lab\n10.1.0.128/25 special # longer wins\n' \
    >"$maps_dir/movers.map"
fuzz scenario "$input_secs" "$scen_dir" -max_len=4096
fuzz class_map "$input_secs" "$maps_dir" -max_len=16384
