#!/usr/bin/env bash
# Installs what nfsdtop's build and tests need, idempotently: each step
# checks first and skips what is already there. Safe to run again.
#   scripts/setup.sh          everything (build, BPF, tests, VM tests, the book)
#   scripts/setup.sh build    only what building nfsdtop needs
set -euo pipefail
what=${1:-all}
say() { printf 'setup: %s\n' "$*" >&2; }

# Debian packages --------------------------------------------------------
need_pkgs=()
want() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep 'ok installed' >/dev/null || need_pkgs+=("$1"); }
# dpkg-dev (dpkg-shlibdeps) and binutils (strip): `cargo xtask deb`; strip
# also makes the VM tests' guest binary smaller.
for p in dpkg-dev binutils; do want "$p"; done
if [ "$what" = all ]; then
  # lintian: the .deb is checked with it (scripts/e2e/16-deb.sh).
  want lintian
  # tmux: the TUI end-to-end test; prometheus: promtool and a real server
  # for the metrics tests; qemu/debootstrap/e2fsprogs: real-kernel tests;
  # openssl: the self-signed certificate `openssl req -x509` makes, for
  # the TLS tests; jsonnet: evaluates the monitoring mixin (dashboards/mixin).
  for p in tmux prometheus qemu-system-x86 debootstrap e2fsprogs jq openssl jsonnet; do want "$p"; done
  # VM tests: debootstrap's keyring and .deb decompression (Recommends/
  # Suggests, so not pulled in with --no-install-recommends).
  for p in debian-archive-keyring xz-utils; do want "$p"; done
fi
if [ ${#need_pkgs[@]} -gt 0 ]; then
  say "installing Debian packages: ${need_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
fi

# Rust pieces for the BPF build -------------------------------------------
# aya-build compiles the BPF crate with build-std=core: it needs rust-src
# on the nightly toolchain.
if rustup toolchain list | grep '^nightly' >/dev/null; then
  if ! rustup component list --toolchain nightly --installed | grep '^rust-src' >/dev/null; then
    say "adding rust-src to nightly"
    rustup component add rust-src --toolchain nightly
  fi
else
  say "no nightly toolchain: installing it with rust-src"
  rustup toolchain install nightly --profile minimal --component rust-src
fi

# bpf-linker, built against rustc's own LLVM (the system LLVM is too old
# and has no shared libLLVM). The library is copied, not linked, so a
# toolchain update cannot break the linker.
BPF_LINKER_VERSION=0.13.0
if ! bpf-linker --version 2>/dev/null | grep "$BPF_LINKER_VERSION" >/dev/null; then
  prefix=${NFSDTOP_TOOLS:-$HOME/.local/share/nfsdtop-tools}/llvm
  nightly_lib=$(rustc +nightly --print sysroot)/lib
  llvm_so=$(cd "$nightly_lib" && ls libLLVM.so.*-rust-* 2>/dev/null | sed -n 1p || true)
  [ -n "$llvm_so" ] || { say "no libLLVM in $nightly_lib: cannot build bpf-linker"; exit 1; }
  major=$(echo "$llvm_so" | sed -E 's/libLLVM\.so\.([0-9]+).*/\1/')
  mkdir -p "$prefix/lib"
  cp -f "$nightly_lib/$llvm_so" "$prefix/lib/"
  ln -sf "$llvm_so" "$prefix/lib/libLLVM.so"
  say "building bpf-linker $BPF_LINKER_VERSION against rustc's LLVM $major (about a minute)"
  LLVM_PREFIX=$prefix RUSTFLAGS="-C link-args=-Wl,-rpath,$prefix/lib" \
    cargo install --quiet bpf-linker@$BPF_LINKER_VERSION --locked --no-default-features \
    --features "llvm-$major" >/dev/null
fi
# mdbook, for the book (docs/book): built and link-checked by the tests
# (scripts/e2e/06-book.sh) and installed by `cargo xtask deb` where present.
# Debian has no package for it; crates.io has. Only for `all`: `cargo xtask
# run` does not need it.
MDBOOK_VERSION=0.5.4
if [ "$what" = all ]; then
  PATH=$PATH:$HOME/.cargo/bin
  if ! mdbook --version 2>/dev/null | grep "v$MDBOOK_VERSION\$" >/dev/null; then
    say "building mdbook $MDBOOK_VERSION (a few minutes, once)"
    cargo install --quiet mdbook --locked --version "$MDBOOK_VERSION" \
      --no-default-features --features search >/dev/null
  fi
fi
say "ok"
