#!/usr/bin/env bash
# nfsdtopd with 100,000 peers, and /metrics encode time with 10,000: runs
# the ignored tests of exporter/tests/scale.rs in release mode and prints
# their tables (paste them into BENCHMARKS.md, section "nfsdtopd with
# 100,000 peers"). NFSDTOP_BENCH_SECS sets the length of the 100k run.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "host: $(nproc) CPUs, $(uname -r), $(date -u +%Y-%m-%d)"
cargo test -q --release -p nfsdtop-exporter --test scale -- --ignored --nocapture --test-threads 1 2>&1 \
  | grep -E '^\||test result|panicked|assert'
