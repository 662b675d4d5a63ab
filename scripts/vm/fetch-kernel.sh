#!/usr/bin/env bash
# fetch-kernel.sh SUITE DIR: downloads Debian SUITE's current kernel
# packages (what linux-image-amd64 depends on) into DIR and prints their
# paths, one a line (kept and reused while the suite's kernel is the
# same). $NFSDTOP_DEBIAN_MIRROR overrides the mirror. For
# `cargo xtask vm-test --kernel-deb` and `cargo xtask compare`, which take
# any kernel package; this one is Debian's own.
set -euo pipefail
suite=$1 dir=$2
mirror=${NFSDTOP_DEBIAN_MIRROR:-http://deb.debian.org/debian}
mkdir -p "$dir"
index="$dir/Packages-$suite"
curl -fsSL --max-time 300 "$mirror/dists/$suite/main/binary-amd64/Packages.xz" | xz -d >"$index.tmp"
mv "$index.tmp" "$index"
# The metapackage depends on the versioned image package; from 7.x on
# that one is itself split (linux-binary-*, linux-modules-*,
# linux-base-*): every linux-* package it depends on is fetched too.
deps() {
  awk -v p="Package: $1" '$0 == p { on = 1 }
    on && /^Depends:/ {
      sub(/^Depends: */, ""); n = split($0, d, /, */)
      for (i = 1; i <= n; i++) { sub(/ .*/, "", d[i]); if (d[i] ~ /^linux-(image|binary|modules|base)-[0-9]/) print d[i] }
      exit
    }' "$index"
}
top=$(deps linux-image-amd64)
[ -n "$top" ] || { echo "fetch-kernel: no linux-image-amd64 in $suite's index" >&2; exit 1; }
for pkg in $top $(for t in $top; do deps "$t"; done); do
  file=$(awk -v p="Package: $pkg" '$0 == p { on = 1 } on && /^Filename:/ { print $2; exit }' "$index")
  [ -n "$file" ] || { echo "fetch-kernel: no $pkg in $suite's index" >&2; exit 1; }
  out="$dir/$(basename "$file")"
  if [ ! -s "$out" ]; then
    curl -fsSL --max-time 900 -o "$out.tmp" "$mirror/$file"
    mv "$out.tmp" "$out"
  fi
  echo "$out"
done
