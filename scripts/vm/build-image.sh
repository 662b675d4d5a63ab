#!/usr/bin/env bash
# Builds one cached guest image for the nfsdtop VM tests.
#   build-image.sh SUITE OUT_DIR MIRROR PKG[,PKG...]
# Everything is made in OUT_DIR.tmp-<pid> and renamed to OUT_DIR only when
# complete, so an interrupted build never looks like a good image. OUT_DIR
# ends up holding vmlinuz, initrd.img, root.img (ext4, used read-only via a
# QEMU snapshot) and manifest (written last).
set -euo pipefail
suite=$1 out=$2 mirror=$3 pkgs=$4
here=$(cd "$(dirname "$0")" && pwd)
tmp="$out.tmp-$$"
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT
rm -rf "$tmp"
mkdir -p "$tmp"
started=$(date +%s)
echo "vm-image: debootstrap $suite (minbase, $pkgs) from $mirror" >&2
debootstrap --variant=minbase --include="$pkgs" "$suite" "$tmp/root" "$mirror" \
  >"$tmp/debootstrap.log" 2>&1 || {
  tail -n 30 "$tmp/debootstrap.log" >&2
  [ -f "$tmp/root/debootstrap/debootstrap.log" ] && tail -n 30 "$tmp/root/debootstrap/debootstrap.log" >&2
  echo "vm-image: debootstrap failed" >&2
  exit 1
}
kver=$(cd "$tmp/root/lib/modules" && ls | sort -V | tail -n1)
[ -n "$kver" ] || { echo "vm-image: no kernel modules in the image" >&2; exit 1; }
[ -f "$tmp/root/boot/vmlinuz-$kver" ] || { echo "vm-image: no vmlinuz-$kver" >&2; exit 1; }
[ -f "$tmp/root/boot/initrd.img-$kver" ] || { echo "vm-image: no initrd.img-$kver" >&2; exit 1; }
cp "$tmp/root/boot/vmlinuz-$kver" "$tmp/vmlinuz"
cp "$tmp/root/boot/initrd.img-$kver" "$tmp/initrd.img"
install -m 0755 "$here/guest-boot.sh" "$tmp/root/sbin/nfsdtop-vm-init"
# Smaller image, quicker boots: no apt caches or docs.
rm -rf "$tmp/root/var/cache/apt/archives/"*.deb "$tmp/root/usr/share/doc" "$tmp/root/usr/share/man"
echo nfsdtop-vm >"$tmp/root/etc/hostname"
mkfs.ext4 -q -F -L nfsdtop-vm -d "$tmp/root" "$tmp/root.img" 3G
rm -rf "$tmp/root"
cat >"$tmp/manifest" <<EOM
suite=$suite
kernel=$kver
packages=$pkgs
built=$(date -u +%Y-%m-%dT%H:%M:%SZ)
seconds=$(($(date +%s) - started))
EOM
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "vm-image: $suite ready in $out (kernel $kver, $(($(date +%s) - started)) s)" >&2
