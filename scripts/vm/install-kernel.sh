#!/bin/bash
# Installs kernel package files into a copy of a guest image, on the host
# (xtask/src/guest/kernel.rs runs it inside `unshare --mount`, so every
# mount below goes away with it, however it ends):
#   install-kernel.sh ROOT_IMG OUT_DIR DEB...
# loop-mounts ROOT_IMG, runs `dpkg -i` on the packages in a chroot of it
# (their postinst makes the initramfs with the image's own generator, as
# build-image.sh's debootstrap did for the suite's kernel: at the host's
# speed, not under emulation), and copies the new kernel and initramfs to
# OUT_DIR/vmlinuz and OUT_DIR/initrd.img. Prints "installed=VERSION" last.
# The packages' maintainer scripts run as root in that chroot: give it
# only kernels you would install on a machine of your own.
set -euo pipefail
img=$1 out=$2
shift 2
fail() { echo "install-kernel: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (a loop mount and a chroot)"
[ $# -gt 0 ] || fail "no package given"
mnt=$(mktemp -d "${TMPDIR:-/tmp}/nfsdtop-kernel.XXXXXX")
cleanup() {
  for m in dev/pts dev sys proc ""; do umount "$mnt/$m" 2>/dev/null || true; done
  rmdir "$mnt" 2>/dev/null || true
}
trap cleanup EXIT
mount -o loop "$img" "$mnt" || fail "cannot loop-mount $img"
mount -t proc proc "$mnt/proc"
mount -t sysfs sys "$mnt/sys"
mount --bind /dev "$mnt/dev"
mount --bind /dev/pts "$mnt/dev/pts" 2>/dev/null || true

# The kernel's version: of its boot/vmlinuz-VERSION or, from Debian's 7.x
# on, its (usr/)lib/modules/VERSION/.
ver=$(for d in "$@"; do dpkg-deb -c "$d"; done |
  awk '$6 ~ /^\.\/boot\/vmlinuz-/ { b = $6; sub(/^\.\/boot\/vmlinuz-/, "", b) }
       $6 ~ /^\.\/(usr\/)?lib\/modules\/[^\/]+\/$/ { n = split($6, p, "/"); v = p[n - 1] }
       END { if (b != "") print b; else if (v != "") print v }')
[ -n "$ver" ] || fail "no package has a boot/vmlinuz-* or a lib/modules/VERSION/"

inside=/tmp/nfsdtop-debs
mkdir -p "$mnt$inside"
names=()
for d in "$@"; do
  cp "$d" "$mnt$inside/"
  names+=("$inside/$(basename "$d")")
done
log="$out/dpkg.log"
if ! DEBIAN_FRONTEND=noninteractive timeout 900 chroot "$mnt" /usr/bin/dpkg -i "${names[@]}" >"$log" 2>&1; then
  fail "dpkg -i failed: $(grep -E 'depends on|error' "$log" | tr '\n' ' ' | cut -c1-600) (see $log)"
fi
rm -rf "${mnt:?}$inside"

first() { for f in "$@"; do [ -f "$mnt$f" ] && { echo "$mnt$f"; return; }; done; }
kernel=$(first "/boot/vmlinuz-$ver" "/usr/lib/modules/$ver/vmlinuz")
initrd=$(first "/boot/initrd.img-$ver" "/usr/lib/modules/$ver/initrd.img" "/usr/lib/modules/$ver/initrd")
[ -n "$kernel" ] || fail "no /boot/vmlinuz-$ver after dpkg -i"
[ -n "$initrd" ] || fail "no initramfs for $ver after dpkg -i (no initramfs generator in the image?)"
[ -d "$mnt/lib/modules/$ver" ] || fail "no /lib/modules/$ver after dpkg -i"
cp "$kernel" "$out/vmlinuz"
cp "$initrd" "$out/initrd.img"
echo "installed=$ver"
