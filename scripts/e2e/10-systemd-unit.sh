#!/usr/bin/env bash
# The shipped systemd unit passes `systemd-analyze verify` with the binary
# path pointed at the one just built (verify checks ExecStart exists).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(pwd)/target/debug/nfsdtopd
[ -x "$bin" ] || cargo build -q -p nfsdtop-exporter
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
sed "s#/usr/bin/nfsdtopd#$bin#" dist/nfsdtopd.service > "$tmp/nfsdtopd.service"
if out=$(systemd-analyze verify --man=no "$tmp/nfsdtopd.service" 2>&1) && [ -z "$out" ]; then
  echo "systemd-analyze verify dist/nfsdtopd.service: ok"
else
  echo "systemd-analyze verify dist/nfsdtopd.service failed:"; echo "$out"; exit 1
fi
