#!/bin/bash
# nfsdtop benchmark, guest side (`cargo xtask bench`, xtask/src/bench/guest.rs).
# The host puts this script (as init.sh), its config and the nfsdtop binary
# on the input disk; the image's init unpacks them to /vm and execs this.
#
# One loopback NFS mount of a tmpfs export; fio 4k randread O_DIRECT in
# short fixed runs, alternating the host's MODES REPS times (A B C ... A B ...):
#   none    nothing attached
#   nfsdtop the real binary, live source, batch JSON (attached before fio)
#   classic the same with --classic-tracepoints
#   ftrace  the same sunrpc events enabled in the kernel's ftrace
#   hooked  nfsdtop's programs attached but returning at once, its agent
#           stopped (SIGSTOP) during fio: what the kernel's calls into
#           BPF programs on these tracepoints cost, whatever they do
#   discard nfsdtop streaming records that its agent drains and throws
#           away undecoded (the kernel side and the ring reader)
#   noworkload nfsdtop without procedures and bytes (what the workload
#           view adds)
#   rawnoworkload the same with --no-typed-program: nfsdtop as it was
#           before the workload view (raw svc_stats_latency program)
#   nfs4ops nfsdtop --nfs4-ops (with NFS_VERS=4.2: what counting NFSv4
#           operations adds)
#   keepraw nfsdtop --keep-raw-tracepoints (on 7.x, which can preempt raw
#           programs: raw tracepoints without the default's rescue programs)
#   against another nfsdtop binary (/vm/nfsdtop-against, `cargo xtask
#           bench --against FILE`) run as nfsdtop is: a change's cost
# Each nfsdtop run gives the agent's own CPU time (/proc/PID/stat) over
# the fio run. The rounds run as users run nfsdtop: without the kernel's
# BPF statistics (they cost every tracepoint hit two clock reads). The
# runs after the rounds, "timed" (nfsdtop, classic, and noworkload,
# rawnoworkload and keepraw where the rounds have them), have
# kernel.bpf_stats_enabled=1 and give, with bpftool, the programs' run
# time and run count.
# Results: summary.txt (key=value lines) and fio JSON, as a tar archive on
# /dev/vdc. Markers "NFSDTOP-VM: ..." on the console; every wait bounded.
# The shared prelude (environment, markers, watchdog, results, nfsd,
# ftrace) is guest-lib.sh.
set -u

RUN_ID=unknown
FIO_RUNTIME=8
REPS=3
FILE_MB=64
NFSD_THREADS=4
IODEPTH=16
NCONNECT=1
# the loopback mount's NFS version (3, or 4.2 for the NFSv4 section)
NFS_VERS=3
GUEST_TIMEOUT=900
IDLE_SECS=5
# the sunrpc events of the ftrace mode: those nfsdtop attaches to on this
# kernel (the host's config names them)
EVENTS="svc_xprt_enqueue svc_xprt_dequeue svc_stats_latency svc_xprt_accept svc_xprt_free"
# a round's modes, baseline first (the host's config lists them)
MODES="none nfsdtop classic ftrace hooked discard noworkload"
# shellcheck source=/dev/null
[ -f /vm/config ] && . /vm/config

# shellcheck source=guest-lib.sh
. /vm/guest-lib.sh

system_up
summary cpu "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
mark "bench init, kernel $(uname -r)"

# --- nfsd, one loopback mount ------------------------------------------
nfsd_up "$NFSD_THREADS" $((FILE_MB + 64)) bench.dat
mkdir -p /mnt/nfs /var/lib/nfs/v4recovery
if [ "$NFS_VERS" = 3 ]; then
  mount_opts="vers=3,proto=tcp,nolock,nconnect=$NCONNECT"
else
  mount_opts="vers=$NFS_VERS,proto=tcp,nconnect=$NCONNECT"
fi
timeout 120 mount -t nfs -o "$mount_opts" 127.0.0.1:/export /mnt/nfs ||
  fail "loopback mount failed"
# A fresh NFSv4 server refuses opens during its grace period (90 s): wait
# until one read gets through, so no run waits on it.
first_read() { dd if=/mnt/nfs/bench.dat of=/dev/null bs=4k count=1 iflag=direct 2>/dev/null; }
[ "$NFS_VERS" = 3 ] || wait_until 240 "the NFSv4 grace period to end" first_read
summary nfs_vers "$NFS_VERS"
sysctl -q -w kernel.bpf_stats_enabled=0 || mark "cannot set kernel.bpf_stats_enabled"
summary nfsd_threads "$(cat /proc/fs/nfsd/threads)"
mark "nfsd and the loopback mount ready"

# --- helpers -----------------------------------------------------------
lines() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }
nfsdtop_ready() { [ "$(lines "$1")" -ge 1 ] || pid_gone "$NFSDTOP_PID"; }
# utime + stime of a process, in clock ticks
# CPU time of a process in ns: the sum over its threads of schedstat's
# first field (exact; /proc/PID/stat counts 4 ms ticks, and a thread woken
# by a timer and done before the next tick is never counted there).
cpu_ticks() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ n += $1 } END { printf "%d\n", n }'; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
# "name run_time_ns run_cnt" for each of nfsdtop's BPF programs
bpf_stats() {
  bpftool prog show 2>/dev/null | awk '
    /^[0-9]+: / { name = ""; for (i = 1; i <= NF; i++) if ($i == "name") name = $(i + 1);
                  rt = 0; rc = 0;
                  for (i = 1; i <= NF; i++) { if ($i == "run_time_ns") rt = $(i + 1); if ($i == "run_cnt") rc = $(i + 1) }
                  if (name ~ /^(raw_|typed_|rescue_)?svc_|^nfsd_compound/) print name, rt, rc }'
}
# shellcheck disable=SC2086
ftrace_on() { ftrace_enable 65536 $EVENTS; }
ftrace_off() {
  echo 0 >$T/tracing_on
  summary "ftrace_entries.$1" "$(ftrace_sum entries)"
  summary "ftrace_overrun.$1" "$(ftrace_sum overrun)"
  for e in $T/events/sunrpc/*/enable; do echo 0 >"$e"; done
  echo >$T/trace
}
fio_run() {
  timeout $((FIO_RUNTIME + 120)) fio --name=bench --filename=/mnt/nfs/bench.dat \
    --rw=randread --bs=4k --direct=1 --ioengine=libaio --iodepth="$IODEPTH" \
    --runtime="$FIO_RUNTIME" --time_based --size="${FILE_MB}M" \
    --output-format=json --output="$OUT/fio-$1.json" >/dev/null 2>"$OUT/fio-$1.err"
}

# one TAG MODE: one fio run in MODE (none | nfsdtop | classic | ftrace |
# hooked | discard | noworkload | rawnoworkload | nfs4ops | keepraw); the others
# than none and ftrace are nfsdtop with the flags below.
one() {
  local tag=$1 mode=$2 f="$OUT/nfsdtop-$1.jsonl" c0 c1 t0 t1 extra="" stop_agent="" bin=$NFSDTOP
  summary "mode.$tag" "$mode"
  case $mode in
    classic) extra=--classic-tracepoints mode=nfsdtop ;;
    hooked) extra="--bench-stage hooked" mode=nfsdtop stop_agent=1 ;;
    discard) extra="--bench-stage discard" mode=nfsdtop ;;
    noworkload) extra="--bench-stage no-workload" mode=nfsdtop ;;
    rawnoworkload) extra="--bench-stage no-workload --no-typed-program" mode=nfsdtop ;;
    nfs4ops) extra=--nfs4-ops mode=nfsdtop ;;
    keepraw) extra=--keep-raw-tracepoints mode=nfsdtop ;;
    against) bin=/vm/nfsdtop-against mode=nfsdtop ;;
  esac
  case $mode in
    nfsdtop)
      # shellcheck disable=SC2086
      "$bin" -b --format json -n 100000 -d 1 $extra >"$f" 2>"$OUT/nfsdtop-$tag.err" &
      NFSDTOP_PID=$!
      wait_until 180 "nfsdtop's first line" nfsdtop_ready "$f"
      if pid_gone "$NFSDTOP_PID"; then
        summary "error.$tag" "nfsdtop exited: $(tail -n 2 "$OUT/nfsdtop-$tag.err" | tr '\n' ' ')"
        return
      fi
      # The agent attached and idle (no NFS traffic): its fixed cost
      # (timers, snapshot once a second), measured over IDLE_SECS.
      c0=$(cpu_ticks "$NFSDTOP_PID")
      t0=$(up)
      sleep "$IDLE_SECS"
      summary "agent_idle_ns.$tag" "$(($(cpu_ticks "$NFSDTOP_PID") - c0))"
      summary "agent_idle_wall.$tag" "$(echo "$t0 $(up)" | awk '{print $2 - $1}')"
      bpf_stats >"$OUT/bpf-before-$tag.txt"
      c0=$(cpu_ticks "$NFSDTOP_PID")
      # Nothing to drain: the agent's idle cost (measured above) stays
      # out of the hooks' cost.
      [ -n "$stop_agent" ] && kill -STOP "$NFSDTOP_PID"
      ;;
    ftrace) ftrace_on ;;
  esac
  t0=$(up)
  fio_run "$tag" || mark "fio failed ($tag)"
  t1=$(up)
  summary "fio_wall.$tag" "$(echo "$t0 $t1" | awk '{print $2 - $1}')"
  case $mode in
    nfsdtop)
      [ -n "$stop_agent" ] && kill -CONT "$NFSDTOP_PID"
      c1=$(cpu_ticks "$NFSDTOP_PID")
      bpf_stats >"$OUT/bpf-after-$tag.txt"
      summary "agent_cpu_ns.$tag" "$((c1 - c0))"
      summary "agent_rss_kib.$tag" "$(rss_kib "$NFSDTOP_PID")"
      kill -TERM "$NFSDTOP_PID" 2>/dev/null
      wait_until 30 "nfsdtop to exit" pid_gone "$NFSDTOP_PID"
      kill -KILL "$NFSDTOP_PID" 2>/dev/null
      wait "$NFSDTOP_PID" 2>/dev/null
      ;;
    ftrace) ftrace_off "$tag" ;;
  esac
  mark "run $tag ($mode) done"
}

summary clk_tck "$(getconf CLK_TCK)"
one warmup none
for r in $(seq 1 "$REPS"); do
  for m in $MODES; do
    one "$m-$r" "$m"
  done
done
# A last baseline, so every nfsdtop and ftrace run sits between two
# baselines (the host-side analysis corrects for drift between them).
one "none-$((REPS + 1))" none
# The programs' own cost, from the kernel's statistics (not in the rounds).
sysctl -q -w kernel.bpf_stats_enabled=1 || mark "cannot enable kernel.bpf_stats_enabled"
one nfsdtop-timed nfsdtop
one classic-timed classic
# And, where the rounds have them, the programs without the workload view
# and the raw programs kept where the kernel can preempt them.
for m in noworkload rawnoworkload keepraw; do
  case " $MODES " in
    *" $m "*) one "$m-timed" "$m" ;;
  esac
done
sysctl -q -w kernel.bpf_stats_enabled=0
summary reps "$REPS"
umount /mnt/nfs
kill "$WATCHDOG_PID" 2>/dev/null
finish
