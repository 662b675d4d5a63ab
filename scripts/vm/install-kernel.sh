#!/bin/bash
# Installs a kernel package into the guest image (xtask/src/guest/kernel.rs):
# the host boots a writable copy of a suite's image with its own kernel,
# this runs dpkg -i on the /vm/*.deb it was given (their postinst makes the
# initramfs), and writes the new kernel and initramfs to the output disk
# (vmlinuz, initrd.img); the copy, now holding the kernel's modules, is
# the image that boots it. "installed=VERSION" in the summary on success.
set -u
RUN_ID=unknown
GUEST_TIMEOUT=1200
# shellcheck source=/dev/null
[ -f /vm/config ] && . /vm/config
# shellcheck source=guest-lib.sh
. /vm/guest-lib.sh

system_up
debs=(/vm/*.deb)
mark "installing $(for d in "${debs[@]}"; do dpkg-deb -f "$d" Package; done | tr '\n' ' ')"
# The kernel's version: of its boot/vmlinuz-VERSION or, from Debian's 7.x
# on, its (usr/)lib/modules/VERSION/.
ver=$(for d in "${debs[@]}"; do dpkg-deb -c "$d"; done |
  awk '$6 ~ /^\.\/boot\/vmlinuz-/ { b = $6; sub(/^\.\/boot\/vmlinuz-/, "", b) }
       $6 ~ /^\.\/(usr\/)?lib\/modules\/[^\/]+\/$/ { n = split($6, p, "/"); v = p[n - 1] }
       END { if (b != "") print b; else if (v != "") print v }')
[ -n "$ver" ] || fail "no package has a boot/vmlinuz-* or a lib/modules/VERSION/"
summary packages "$(for d in "${debs[@]}"; do dpkg-deb -f "$d" Package; done | tr '\n' ' ')"
export DEBIAN_FRONTEND=noninteractive
# A small initramfs, quickly made (this runs under software emulation):
# only the modules this machine's root needs (virtio, ext4), compressed
# lightly; for initramfs-tools (trixie, bookworm) and dracut (sid) alike.
mkdir -p /etc/initramfs-tools/conf.d /etc/dracut.conf.d
printf 'MODULES=dep\nCOMPRESS=gzip\nCOMPRESSLEVEL=1\n' >/etc/initramfs-tools/conf.d/nfsdtop-vm.conf
printf 'hostonly="yes"\ncompress="cat"\n' >/etc/dracut.conf.d/nfsdtop-vm.conf
if ! timeout 1000 dpkg -i "${debs[@]}" >"$OUT/dpkg.log" 2>&1; then
  fail "dpkg -i failed: $(grep -E 'depends on|error' "$OUT/dpkg.log" | tr '\n' ' ' | cut -c1-600)"
fi
first() { for f in "$@"; do [ -f "$f" ] && { echo "$f"; return; }; done; }
kernel=$(first "/boot/vmlinuz-$ver" "/usr/lib/modules/$ver/vmlinuz")
initrd=$(first "/boot/initrd.img-$ver" "/usr/lib/modules/$ver/initrd.img" "/usr/lib/modules/$ver/initrd")
[ -n "$kernel" ] || fail "no /boot/vmlinuz-$ver after dpkg -i"
[ -n "$initrd" ] || fail "no initramfs for $ver after dpkg -i (no initramfs generator in the image?)"
[ -d "/lib/modules/$ver" ] || fail "no /lib/modules/$ver after dpkg -i"
cp "$kernel" "$OUT/vmlinuz"
cp "$initrd" "$OUT/initrd.img"
sync
mount -o remount,ro / 2>/dev/null
summary installed "$ver"
mark "kernel $ver installed"
kill "$WATCHDOG_PID" 2>/dev/null
finish
