#!/bin/bash
# The shared prelude of every guest script (guest-init.sh, bench-guest.sh),
# sourced after the script's defaults and /vm/config: the environment,
# progress markers and the summary file, the bounded wait, the watchdog,
# the results written to the output disk at the end, the basic system, an
# nfsd exporting a tmpfs, client network namespaces, and ftrace switched
# on for the sunrpc events.
# The host (xtask/src/guest/run.rs) puts it on the input disk as
# /vm/guest-lib.sh.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
export LANG=C
exec </dev/null

OUT=/tmp/out
T=/sys/kernel/tracing
NFSDTOP=/vm/nfsdtop

up() { cut -d' ' -f1 /proc/uptime; }
mark() {
  echo "NFSDTOP-VM: $* (t=$(up))"
  [ -d "$OUT" ] && echo "$(up) $*" >>"$OUT/markers.txt"
}
summary() { echo "$1=$2" >>"$OUT/summary.txt"; }

# finish: write everything in $OUT to the output disk (/dev/vdc, a tar
# archive) and power off; never returns.
finished=0
finish() {
  [ "$finished" = 1 ] && return
  finished=1
  mark "collecting results"
  summary t_end "$(up)"
  dmesg >"$OUT/dmesg.txt" 2>&1
  cat /proc/fs/nfsd/pool_stats >"$OUT/pool_stats.txt" 2>/dev/null
  ps -eo pid,stat,etimes,args >"$OUT/ps.txt" 2>&1
  if tar -cf /dev/vdc -C "$OUT" . && sync; then
    mark "results written"
  else
    echo "NFSDTOP-VM: FATAL cannot write the output disk"
  fi
  echo "NFSDTOP-VM: done"
  echo o >/proc/sysrq-trigger
  while :; do sleep 60; done
}
fail() {
  mark "FAIL: $*"
  summary error "$*"
  finish
}
# A guest-side watchdog, so a wedged step still reports what it had.
trap 'fail "guest watchdog: run exceeded ${GUEST_TIMEOUT}s"' USR1
watchdog() { sleep "$GUEST_TIMEOUT"; kill -USR1 $$; }

# wait_until TIMEOUT DESCRIPTION COMMAND...: poll a condition (every 0.2 s)
# until it holds; returns 1 on timeout. A condition wait, not a fixed sleep.
wait_until() {
  local timeout=$1 what=$2 deadline
  shift 2
  deadline=$(($(date +%s) + timeout))
  until "$@"; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
      mark "timed out after ${timeout}s waiting for $what"
      return 1
    fi
    sleep 0.2
  done
}
# gone: exited, i.e. no such process or a zombie not yet reaped (kill -0
# succeeds on a zombie).
pid_gone() { case "$(ps -o stat= -p "$1" 2>/dev/null)" in "" | Z*) return 0 ;; *) return 1 ;; esac; }

# system_up: the filesystems, loopback, the watchdog (WATCHDOG_PID) and
# the summary's first lines.
system_up() {
  mount -t tmpfs -o mode=0755 tmpfs /run
  mount -t tmpfs tmpfs /tmp
  mkdir -p "$OUT" /dev/pts /dev/shm
  mount -t devpts devpts /dev/pts
  mount -t tmpfs tmpfs /dev/shm
  mount -t tracefs tracefs $T || fail "cannot mount tracefs"
  mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
  mount -t bpf bpf /sys/fs/bpf || fail "cannot mount bpffs"
  ip link set lo up
  hostname nfsdtop-vm
  watchdog &
  WATCHDOG_PID=$!
  : >"$OUT/summary.txt"
  summary run_id "$RUN_ID"
  summary kernel "$(uname -r)"
  summary t_init "$(up)"
  summary nproc "$(nproc)"
}

# nfsd_up THREADS EXPORT_MB FILE...: nfsd with THREADS threads exporting a
# tmpfs /export of EXPORT_MB MiB holding a FILE_MB MiB file for each FILE
# (made when the tmpfs is first mounted). Again after `rpc.nfsd 0`, it
# starts the threads only.
nfsd_up() {
  local threads=$1 mb=$2 f
  shift 2
  modprobe nfsd || fail "modprobe nfsd failed"
  mountpoint -q /proc/fs/nfsd || mount -t nfsd nfsd /proc/fs/nfsd || fail "cannot mount the nfsd filesystem"
  mkdir -p /export /run/rpcbind /var/lib/nfs
  if ! mountpoint -q /export; then
    mount -t tmpfs -o size="${mb}m" tmpfs /export
    for f in "$@"; do
      dd if=/dev/zero of="/export/$f" bs=1M count="$FILE_MB" status=none
    done
  fi
  # NFSv4 clients wait out the server's grace period (90 s) before their
  # first open: NFSD_GRACE shortens it, for loads that mount NFSv4 at
  # once. Written before the threads start. Not the lease: with a 15 s
  # lease on a saturated guest, 7.2's client_info_show (what nfsdtop's
  # client-name reader reads) hit a freed client and oopsed.
  if [ -n "${NFSD_GRACE:-}" ] && [ "$(cat /proc/fs/nfsd/threads 2>/dev/null)" = 0 ]; then
    echo "$NFSD_GRACE" >/proc/fs/nfsd/nfsv4gracetime
  fi
  # NFSD_POOL_MODE: sunrpc's thread pools for nfsd, set while no thread runs.
  if [ -n "${NFSD_POOL_MODE:-}" ] && [ "$(cat /proc/fs/nfsd/threads 2>/dev/null)" = 0 ]; then
    echo "$NFSD_POOL_MODE" >/sys/module/sunrpc/parameters/pool_mode || fail "cannot set pool_mode $NFSD_POOL_MODE"
  fi
  echo "/export *(rw,no_root_squash,insecure,no_subtree_check,fsid=1)" >/etc/exports
  pidof rpcbind >/dev/null || timeout 30 rpcbind -w || fail "rpcbind failed"
  timeout 30 exportfs -ra || fail "exportfs failed"
  timeout 60 rpc.nfsd "$threads" || fail "rpc.nfsd failed"
  pidof rpc.mountd >/dev/null || timeout 30 rpc.mountd || fail "rpc.mountd failed"
}

# client_netns I NAME FAMILY: a network namespace NAME on a veth pair to
# the server, the client at 10.99.I.2 (FAMILY 4) or fd99:I::2 (6) and the
# server at .1; sets CADDR_NAME, SADDR_NAME (as mount takes it) and
# PROTO_NAME. Needs the veth module.
client_netns() {
  local i=$1 name=$2 fam=$3 caddr saddr proto
  ip netns add "$name" || fail "ip netns add $name"
  ip link add "h$i" type veth peer name "g$i" || fail "veth h$i"
  ip link set "g$i" netns "$name"
  if [ "$fam" = 6 ]; then
    ip addr add "fd99:$i::1/64" dev "h$i" nodad
    ip -n "$name" addr add "fd99:$i::2/64" dev "g$i" nodad
    caddr="fd99:$i::2" saddr="[fd99:$i::1]" proto=tcp6
  else
    ip addr add "10.99.$i.1/24" dev "h$i"
    ip -n "$name" addr add "10.99.$i.2/24" dev "g$i"
    caddr="10.99.$i.2" saddr="10.99.$i.1" proto=tcp
  fi
  ip link set "h$i" up
  ip -n "$name" link set lo up
  ip -n "$name" link set "g$i" up
  eval "CADDR_$name=\$caddr SADDR_$name=\$saddr PROTO_$name=\$proto"
}

# ftrace_enable KB EVENT...: a clean ftrace of these sunrpc events with a
# KB per-CPU buffer (events this kernel lacks are skipped).
ftrace_enable() {
  local kb=$1 e
  shift
  echo 0 >$T/tracing_on
  echo nop >$T/current_tracer
  echo "$kb" >$T/buffer_size_kb || fail "cannot size the ftrace buffer"
  # One clock across CPUs: the host orders the merged records to recompute
  # who was queued at each dispatch, and the per-CPU default misorders
  # them on TCG's vCPUs (a recomputed fair share was off by 6%).
  echo global >$T/trace_clock || fail "cannot set the global trace clock"
  echo >$T/trace
  for e in "$@"; do
    [ -f "$T/events/sunrpc/$e/enable" ] && echo 1 >"$T/events/sunrpc/$e/enable"
  done
  echo 1 >$T/tracing_on
}
# ftrace_sum FIELD: FIELD (e.g. "entries", "overrun") summed over all CPUs.
ftrace_sum() { cat $T/per_cpu/cpu*/stats | awk -v f="$1:" '$1 == f {n += $2} END {print n + 0}'; }
