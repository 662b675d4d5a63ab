#!/usr/bin/env bash
# The shipped systemd unit passes `systemd-analyze verify` with the binary
# path pointed at the one just built (verify checks ExecStart exists), its
# `systemd-analyze security` exposure stays at 2.6 or better, and it raises
# the descriptor limit above the connection cap.
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
# Exposure is compared in tenths: 26 = 2.6.
if out=$(systemd-analyze security --offline=yes --threshold=26 "$tmp/nfsdtopd.service" 2>&1); then
  echo "systemd-analyze security dist/nfsdtopd.service: $(echo "$out" | grep -o 'exposure level.*')"
else
  echo "systemd-analyze security dist/nfsdtopd.service: exposure above 2.6:"; echo "$out" | tail -3; exit 1
fi
if ! grep -qx 'LimitNOFILE=[0-9]*' dist/nfsdtopd.service; then
  echo "dist/nfsdtopd.service sets no LimitNOFILE: the default 1024 is too close to max_connections"; exit 1
fi
