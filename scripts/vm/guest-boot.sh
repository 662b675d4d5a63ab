#!/bin/sh
# nfsdtop VM test: the guest's first init (baked into the cached image).
# It only mounts what it needs to read the run's input disk (/dev/vdb, a
# plain tar archive written by the host), unpacks it to /vm and hands over
# to /vm/init.sh, which the host supplies fresh on every run. If anything
# here fails the guest powers off at once, so the host sees a missing
# marker instead of waiting for its timeout.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /vm
mount -t tmpfs -o size=256m tmpfs /vm
echo "NFSDTOP-VM: boot-init $(uname -r)"
if tar -xf /dev/vdb -C /vm && [ -x /vm/init.sh ]; then
  exec /vm/init.sh
fi
echo "NFSDTOP-VM: FATAL cannot unpack the input disk"
echo o > /proc/sysrq-trigger
while :; do sleep 60; done
