#!/usr/bin/env bash
# `cargo xtask install` lays out binaries, man pages, completions, the unit
# and the config; the installed unit verifies; `cargo xtask deb` packs the
# same tree into a .deb whose contents are checked.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cargo xtask install --debug --prefix "$tmp/usr" >/dev/null
fail() { echo "install check failed: $*"; exit 1; }
for f in bin/nfsdtop bin/nfsdtopd share/man/man1/nfsdtop.1 share/man/man1/nfsdtop-record.1 \
         share/man/man1/nfsdtop-doctor.1 share/man/man1/nfsdtop-whatif.1 share/man/man8/nfsdtopd.8 \
         share/bash-completion/completions/nfsdtop share/zsh/site-functions/_nfsdtopd \
         share/fish/vendor_completions.d/nfsdtop.fish lib/systemd/system/nfsdtopd.service \
         etc/nfsdtop/nfsdtopd.toml; do
  [ -s "$tmp/usr/$f" ] || fail "missing or empty: $f"
done
"$tmp/usr/bin/nfsdtop" --version | grep -q '^nfsdtop ' || fail "nfsdtop --version"
grep -q "ExecStart=$tmp/usr/bin/nfsdtopd --config $tmp/usr/etc/nfsdtop/nfsdtopd.toml" \
  "$tmp/usr/lib/systemd/system/nfsdtopd.service" || fail "unit paths not rewritten"
out=$(systemd-analyze verify --man=no "$tmp/usr/lib/systemd/system/nfsdtopd.service" 2>&1) || fail "$out"
[ -z "$out" ] || fail "systemd-analyze: $out"
man -l "$tmp/usr/share/man/man8/nfsdtopd.8" 2>/dev/null | grep -q -- '--listen' || \
  grep -q -- 'listen' "$tmp/usr/share/man/man8/nfsdtopd.8" || fail "nfsdtopd.8 lacks --listen"
# The installed config is the one nfsdtopd itself accepts.
"$tmp/usr/bin/nfsdtopd" --config "$tmp/usr/etc/nfsdtop/nfsdtopd.toml" --demo seed-k4 \
  --listen 127.0.0.1:0 > /dev/null 2> "$tmp/d.err" & pid=$!
for _ in $(seq 100); do grep -q 'listening on' "$tmp/d.err" && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
grep -q 'listening on' "$tmp/d.err" || { cat "$tmp/d.err"; fail "nfsdtopd did not start with the installed config"; }
kill $pid; wait $pid 2>/dev/null || true

cargo xtask deb --debug --out "$tmp/deb" >/dev/null
deb=$(ls "$tmp"/deb/nfsdtop_*.deb)
dpkg-deb --field "$deb" Package | grep -qx 'nfsdtop' || fail "deb control"
contents=$(dpkg-deb --contents "$deb")
for f in ./usr/bin/nfsdtop ./usr/bin/nfsdtopd ./lib/systemd/system/nfsdtopd.service \
         ./etc/nfsdtop/nfsdtopd.toml ./usr/share/man/man8/nfsdtopd.8; do
  grep -q " $f\$" <<<"$contents" || fail "deb lacks $f"
done
grep -q 'ExecStart=/usr/bin/nfsdtopd --config /etc/nfsdtop/nfsdtopd.toml' \
  <(dpkg-deb --fsys-tarfile "$deb" | tar -xO ./lib/systemd/system/nfsdtopd.service) || fail "deb unit paths"
echo "install and deb: ok ($(du -h "$deb" | cut -f1) package)"
