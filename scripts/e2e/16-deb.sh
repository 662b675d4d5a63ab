#!/usr/bin/env bash
# `cargo xtask deb`: the package Debian's tools expect. lintian reports no
# error and no warning; the libc6 version in Depends (dpkg-shlibdeps)
# covers the highest GLIBC_ symbol version the binaries need; the
# maintainer scripts handle nfsdtopd.service as dh_installsystemd's do
# (their behaviour under systemd is the QEMU scenario "package",
# scripts/vm/README.md); the contents are the installed tree with stripped
# binaries, compressed man pages, a machine-readable copyright file and
# the changelogs.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "deb check failed: $*"; exit 1; }
# Test packages name a maintainer at the documentation domain.
who="nfsdtop test build <nfsdtop-test@example.org>"
cargo xtask deb --debug --out "$tmp/deb" --maintainer "$who" >/dev/null 2>"$tmp/build.err" ||
  { cat "$tmp/build.err"; fail "cargo xtask deb"; }
deb=$(ls "$tmp"/deb/nfsdtop_*.deb)
x=$tmp/x
dpkg-deb -x "$deb" "$x"
dpkg-deb -e "$deb" "$x/DEBIAN"

# lintian (scripts/setup.sh installs it): nothing at warning level or
# above; overrides only in dist/debian/lintian-overrides, each with its
# reason.
# (Its stderr says only that root should not run it.)
if ! out=$(lintian --fail-on error,warning "$deb" 2>"$tmp/lintian.err"); then
  echo "$out"; cat "$tmp/lintian.err"; fail "lintian reports errors or warnings on $(basename "$deb")"
fi
[ -z "$out" ] || { echo "$out"; fail "lintian said more than nothing"; }
while IFS= read -r line; do
  case $line in '' | '#'*) continue ;; esac
  grep -B1 -Fx -- "$line" dist/debian/lintian-overrides | sed -n 1p | grep '^#' >/dev/null ||
    fail "lintian override without a reason on the line above it: $line"
done <dist/debian/lintian-overrides

# Depends: libc6 (>= X) with X at least the highest GLIBC_ the binaries use.
objdump -T "$x/usr/bin/nfsdtop" "$x/usr/bin/nfsdtopd" >"$tmp/dynsyms"
need=$(grep -o 'GLIBC_[0-9][0-9.]*' "$tmp/dynsyms" | sed 's/^GLIBC_//' | sort -uV | tail -n 1 || true)
[ -n "$need" ] || fail "no GLIBC_ symbol version in the binaries' dynamic symbols"
depends=$(dpkg-deb --field "$deb" Depends)
have=$(sed -n 's/.*libc6 (>= \([0-9][0-9.]*\)).*/\1/p' <<<"$depends")
[ -n "$have" ] || fail "Depends names no versioned libc6: $depends"
dpkg --compare-versions "$have" ge "$need" ||
  fail "the binaries need GLIBC_$need, Depends says libc6 (>= $have)"
for field in Maintainer Recommends Suggests; do
  [ -n "$(dpkg-deb --field "$deb" "$field")" ] || fail "no $field"
done
[ "$(dpkg-deb --field "$deb" Maintainer)" = "$who" ] || fail "Maintainer is not --maintainer's"
# Without one (the project has no address), the build says what to pass.
if err=$(env -u DEBEMAIL -u DEBFULLNAME cargo xtask deb --debug --out "$tmp/deb0" 2>&1); then
  fail "a package built without a maintainer"
fi
grep -- '--maintainer "Your Name <you@your.domain>"' <<<"$err" >/dev/null || fail "no maintainer: $err"

# Maintainer scripts: dh_installsystemd's enable/start, restart, stop, purge.
for s in postinst prerm postrm; do
  [ -x "$x/DEBIAN/$s" ] || fail "no executable $s"
  sh -n "$x/DEBIAN/$s" || fail "$s does not parse"
done
grep "deb-systemd-helper enable 'nfsdtopd.service'" "$x/DEBIAN/postinst" >/dev/null || fail "postinst does not enable"
grep 'if \[ -n "$2" \]; then action=restart; else action=start; fi' "$x/DEBIAN/postinst" >/dev/null ||
  fail "postinst does not start on install and restart on upgrade"
grep "deb-systemd-invoke stop 'nfsdtopd.service'" "$x/DEBIAN/prerm" >/dev/null || fail "prerm does not stop"
grep "deb-systemd-helper purge 'nfsdtopd.service'" "$x/DEBIAN/postrm" >/dev/null || fail "postrm does not purge"
grep -x '/etc/nfsdtop/nfsdtopd.toml' "$x/DEBIAN/conffiles" >/dev/null || fail "the config is not a conffile"

# Contents: the installed tree, as Debian lays out a package's files.
for f in usr/bin/nfsdtop usr/bin/nfsdtopd lib/systemd/system/nfsdtopd.service \
         etc/nfsdtop/nfsdtopd.toml usr/share/man/man8/nfsdtopd.8.gz usr/share/man/man1/nfsdtop.1.gz \
         usr/share/doc/nfsdtop/copyright usr/share/doc/nfsdtop/changelog.Debian.gz \
         usr/share/doc/nfsdtop/changelog.gz usr/share/nfsdtop/rules/nfsdtop.rules.yml \
         usr/share/nfsdtop/runbooks/RUNBOOKS.md usr/share/nfsdtop/grafana/nfsdtop-overview.json \
         usr/share/nfsdtop/prometheus/prometheus.yml; do
  [ -s "$x/$f" ] || fail "deb lacks $f"
done
! find "$x/usr/share/man" -type f -name '*.[18]' | grep . >/dev/null || fail "uncompressed man pages"
for b in nfsdtop nfsdtopd; do
  ! readelf -S "$x/usr/bin/$b" | grep -E '\.(symtab|debug_info)' >/dev/null || fail "$b is not stripped"
done
grep '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/$' \
  "$x/usr/share/doc/nfsdtop/copyright" >/dev/null || fail "copyright is not machine-readable"
zcat "$x/usr/share/doc/nfsdtop/changelog.Debian.gz" >"$tmp/changelog.Debian"
grep "^nfsdtop ($(dpkg-deb --field "$deb" Version)) " "$tmp/changelog.Debian" >/dev/null ||
  fail "changelog.Debian's entry is not this version"
if command -v mdbook >/dev/null || [ -x "$HOME/.cargo/bin/mdbook" ]; then
  [ -s "$x/usr/share/doc/nfsdtop/html/index.html" ] || fail "deb lacks the book"
fi
grep -x 'ExecStart=/usr/bin/nfsdtopd --config /etc/nfsdtop/nfsdtopd.toml --wait 300' \
  "$x/lib/systemd/system/nfsdtopd.service" >/dev/null || fail "deb unit paths"
grep 'runbook_url: "file:///usr/share/nfsdtop/runbooks/RUNBOOKS.md#nfsdtopunfairshare"' \
  "$x/usr/share/nfsdtop/rules/nfsdtop.rules.yml" >/dev/null || fail "deb rules' runbook_url"

# A bad version suffix is refused with what to use (a good one, building
# the upgrade, is the QEMU scenario "package").
if err=$(cargo xtask deb --debug --out "$tmp/deb3" --maintainer "$who" --version-suffix=-1 2>&1); then fail "--version-suffix=-1 accepted"; fi
grep "'-' is not allowed" <<<"$err" >/dev/null || fail "--version-suffix=-1: $err"
echo "deb: ok ($(du -h "$deb" | cut -f1) package, Depends: $depends, binaries need GLIBC_$need, lintian clean)"
