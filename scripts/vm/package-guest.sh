#!/bin/bash
# nfsdtop VM test, scenario "package": the .deb as an operator installs it,
# on a guest booted with systemd as PID 1 (the host's kernel command line
# starts this script as a systemd.run= service; see xtask/src/vm/package.rs,
# which checks what it records). With nfsd up and one NFS client reading,
# it installs the package with apt (no manual enable), upgrades it to a
# rebuilt newer version after changing the config, removes it and purges
# it, and records after each step what systemctl, dpkg and /metrics say
# (summary.txt, pkg.STEP.*). The host judges; this script only records.
set -u

# Defaults; /vm/config (written by the host) overrides them.
RUN_ID=unknown
GUEST_TIMEOUT=600
FILE_MB=16
DEB_FIRST=""   # the package to install (a file on the input disk)
DEB_UPGRADE="" # the same package with a higher version
# shellcheck source=/dev/null
[ -f /vm/config ] && . /vm/config

# shellcheck source=guest-lib.sh
. /vm/guest-lib.sh

# systemd owns /run, /tmp, /sys/fs/cgroup and tracefs here: only the
# results directory and the watchdog (guest-lib's system_up is for the
# plain init).
mkdir -p "$OUT"
: >"$OUT/summary.txt"
summary run_id "$RUN_ID"
summary kernel "$(uname -r)"
mark "boot-init $(uname -r), systemd $(systemctl --version | sed -n 1p)"
summary pid1 "$(cat /proc/1/comm)"
watchdog &
WATCHDOG_PID=$!

CONF=/etc/nfsdtop/nfsdtopd.toml
UNIT=nfsdtopd.service
export DEBIAN_FRONTEND=noninteractive

# metrics_of PORT: /metrics of the local nfsdtopd, or nothing.
metrics_of() {
  python3 -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode())' "$1" 2>/dev/null
}
# serves_client PORT: /metrics on PORT has the client's dispatches.
serves_client() {
  metrics_of "$1" >"$OUT/metrics.tmp"
  grep "^nfsdtop_peer_dispatches_total{.*peer=\"$CADDR_c1\"" "$OUT/metrics.tmp" >/dev/null
}
unit_active() { [ "$(systemctl is-active "$UNIT")" = active ]; }
unit_inactive() { [ "$(systemctl is-active "$UNIT")" != active ]; }
main_pid() { systemctl show -P MainPID "$UNIT"; }
# record STEP: what systemctl and dpkg say now.
record() {
  summary "pkg.$1.is_active" "$(systemctl is-active "$UNIT")"
  summary "pkg.$1.is_enabled" "$(systemctl is-enabled "$UNIT" 2>&1)"
  summary "pkg.$1.main_pid" "$(main_pid)"
  summary "pkg.$1.dpkg" "$(dpkg-query -W -f='${db:Status-Abbrev}${Version}' nfsdtop 2>&1)"
  summary "pkg.$1.processes" "$(pgrep -c -x nfsdtopd)"
}
# apt_step STEP ARGS...: one apt command (as an operator types it), its
# output kept.
apt_step() {
  local step=$1
  shift
  timeout 300 apt -y -q "$@" >"$OUT/apt-$step.txt" 2>&1
  summary "pkg.$step.apt_exit" "$?"
}

# --- nfsd and one client ---------------------------------------------------
# systemd boots into this script's unit (kernel-command-line.service), not
# multi-user.target: nfsd is started as an administrator would; nfsd_up
# adds the export the client mounts.
timeout 120 systemctl start nfs-server.service || fail "systemctl start nfs-server.service failed"
nfsd_up 2 $((FILE_MB + 16)) c1.dat
modprobe veth || fail "modprobe veth failed"
client_netns 1 c1 4
mkdir -p /mnt/c1
timeout 120 nsenter --net=/run/netns/c1 mount -t nfs -o "vers=3,proto=$PROTO_c1,nolock" \
  "$SADDR_c1:/export" /mnt/c1 || fail "mount from c1 failed"
# The client keeps reading for the whole run, so every step has dispatches.
(while :; do dd if=/mnt/c1/c1.dat of=/dev/null bs=64k iflag=direct status=none || break; done) &
READER_PID=$!
mark "nfsd up, client c1 ($CADDR_c1) reading"

# --- install: enabled and started by the package -----------------------------
apt_step install install "/vm/$DEB_FIRST"
wait_until 120 "nfsdtopd active" unit_active
seen=no
wait_until 180 "c1 in /metrics" serves_client 9847 && seen=yes
summary pkg.install.metrics_client "$seen"
cp "$OUT/metrics.tmp" "$OUT/metrics-install.txt"
record install
summary pkg.install.active_since "$(systemctl show -P ActiveEnterTimestampMonotonic "$UNIT")"
mark "installed: $(systemctl is-active "$UNIT"), $(systemctl is-enabled "$UNIT")"

# --- upgrade: restarted, the changed config kept ---------------------------
sed -i 's/^listen = "127.0.0.1:9847"$/listen = "127.0.0.1:9848"/' "$CONF"
summary pkg.upgrade.conf_changed "$(grep -c '^listen = "127.0.0.1:9848"$' "$CONF")"
apt_step upgrade install "/vm/$DEB_UPGRADE"
wait_until 120 "nfsdtopd active" unit_active
seen=no
wait_until 180 "c1 in /metrics on 9848" serves_client 9848 && seen=yes
summary pkg.upgrade.metrics_client "$seen"
cp "$OUT/metrics.tmp" "$OUT/metrics-upgrade.txt"
record upgrade
summary pkg.upgrade.active_since "$(systemctl show -P ActiveEnterTimestampMonotonic "$UNIT")"
summary pkg.upgrade.conf_kept "$(grep -c '^listen = "127.0.0.1:9848"$' "$CONF")"
summary pkg.upgrade.conf_leftovers "$(find /etc/nfsdtop -name '*.dpkg-*' | wc -l)"
mark "upgraded: $(systemctl is-active "$UNIT")"

# --- remove: stopped -----------------------------------------------------------
apt_step remove remove nfsdtop
wait_until 60 "nfsdtopd stopped" unit_inactive
record remove
summary pkg.remove.conf_present "$([ -f "$CONF" ] && echo yes || echo no)"

# --- purge: nothing of it left enabled -------------------------------------
apt_step purge purge nfsdtop
record purge
summary pkg.purge.wants_links "$(find /etc/systemd/system -name "$UNIT" | wc -l)"
summary pkg.purge.helper_state "$(find /var/lib/systemd/deb-systemd-helper-enabled /var/lib/systemd/deb-systemd-helper-masked -name "*$UNIT*" 2>/dev/null | wc -l)"
summary pkg.purge.conf_present "$([ -e /etc/nfsdtop ] && echo yes || echo no)"
mark "removed and purged"

kill "$READER_PID" 2>/dev/null
umount -f /mnt/c1 2>/dev/null
systemctl status --no-pager "$UNIT" >"$OUT/systemctl-status.txt" 2>&1
journalctl --no-pager -u "$UNIT" >"$OUT/journal-nfsdtopd.txt" 2>&1
rm -f "$OUT/metrics.tmp"
kill "$WATCHDOG_PID" 2>/dev/null
finish
