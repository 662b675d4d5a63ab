#!/bin/bash
# nfsdtop VM test: the guest side of one run (see scripts/vm/README.md and
# xtask/src/vm/). The host puts this script, its config and the nfsdtop
# binary on the input disk; nfsdtop-vm-init unpacks them to /vm and execs
# this. It starts a real nfsd with few threads, makes client network
# namespaces (IPv4 and IPv6, different nconnect), runs fio from all of them
# at once while the kernel's own ftrace and nfsdtop watch the same sunrpc
# events, then writes everything it saw to the output disk (/dev/vdc, a
# plain tar archive) and powers off. Every step has a timeout; progress
# goes to the console as "NFSDTOP-VM: ..." markers the host waits for.
# The shared prelude (environment, markers, watchdog, results, nfsd,
# ftrace) is guest-lib.sh.
set -u

# Defaults; /vm/config (written by the host) overrides them.
RUN_ID=unknown
FIO_RUNTIME=5          # seconds of fio per client
FILE_MB=32             # per-client test file
NFSD_THREADS=2         # few threads, so clients contend
GUEST_TIMEOUT=900      # the guest gives up and reports after this long
NFSDTOP_MAX_N=900      # -n bound for nfsdtop (it is stopped when the load is done)
TRACE_KB=65536         # ftrace buffer per CPU
FAULTS=""              # space-separated fault scenarios (issue 4)
AFTER_MAIN=""          # scenarios sourced after the main measurement (scenario-NAME.sh)
SCENARIO=main          # main | wait (nfsdtop --wait started before nfsd)
NFSD_POOL_MODE=""      # sunrpc's pool_mode for nfsd (empty: the kernel's default)
CLASS_MAP_B64=""       # a class map for every nfsdtop, base64 (empty: none)
# name:family:nconnect[:NFS version:fio rw:bs:iodepth] (client i gets
# 10.99.i.2 or fd99:i::2, server .1; NFSv3 randread 4k iodepth 16 where
# not given)
CLIENTS="c1:4:1 c2:4:4 c3:6:8"
# shellcheck source=/dev/null
[ -f /vm/config ] && . /vm/config

# shellcheck source=guest-lib.sh
. /vm/guest-lib.sh

system_up
mark "init started, kernel $(uname -r)"
CLASS_ARGS=()
if [ -n "$CLASS_MAP_B64" ]; then
  echo "$CLASS_MAP_B64" | base64 -d >/tmp/class-map || fail "cannot decode the class map"
  CLASS_ARGS=(--class-map /tmp/class-map)
fi

# --- nfsdtop helpers ----------------------------------------------------------
have_nfsdtop() { [ -x "$NFSDTOP" ]; }
jsonl_lines() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }
nfsdtop_gone() { pid_gone "$NFSDTOP_PID"; }
nfsdtop_line_or_gone() { [ "$(jsonl_lines "$1")" -ge "$2" ] || nfsdtop_gone; }
# nfsdtop_launch FILE [args]: batch JSON into FILE, in the background.
nfsdtop_launch() {
  local file=$1
  shift
  "$NFSDTOP" -b --format json -n "$NFSDTOP_MAX_N" -d 1 "${CLASS_ARGS[@]}" "$@" >"$file" 2>"${file%.jsonl}.err" &
  NFSDTOP_PID=$!
}
bpf_progs() { bpftool prog show 2>/dev/null | grep -c '^[0-9][0-9]*:'; }

# Scenario "wait": the agent starts before nfsd (and sunrpc) is loaded, with
# --wait, and must attach once nfsd comes up.
if [ "$SCENARIO" = wait ]; then
  summary wait.sunrpc_loaded_before "$(grep -c '^sunrpc ' /proc/modules)"
  # Some kernels load BPF programs of their own (sid: 2): count from here.
  WAIT_PROGS_BASE=$(bpf_progs)
  summary wait.progs_baseline "$WAIT_PROGS_BASE"
  if have_nfsdtop; then
    nfsdtop_launch "$OUT/nfsdtop-wait.jsonl" --wait 300
    # The scenario itself: some time with the agent up and no nfsd.
    sleep 3
    summary wait.alive_before_nfsd "$(nfsdtop_gone && echo no || echo yes)"
    mark "nfsdtop --wait running without nfsd"
  fi
fi

# --- nfsd --------------------------------------------------------------
start_nfsd() {
  local spec files=""
  for spec in $CLIENTS; do files="$files ${spec%%:*}.dat"; done
  for spec in $CLIENTS; do
    IFS=: read -r _ _ _ vers <<<"$spec"
    case "${vers:-3}" in 4*) NFSD_GRACE=15 ;; esac
  done
  # Room for every client's file, and as much again for the scenarios'.
  # shellcheck disable=SC2086
  nfsd_up "$NFSD_THREADS" $((FILE_MB * (2 * $(wc -w <<<"$files") + 2) + 64)) $files
}
stop_nfsd() {
  timeout 60 rpc.nfsd 0 || mark "rpc.nfsd 0 failed"
}
start_nfsd
summary t_nfsd_ready "$(up)"
summary nfsd_threads "$(cat /proc/fs/nfsd/threads)"
mark "nfsd running with $(cat /proc/fs/nfsd/threads) threads"
for f in $T/events/sunrpc/svc_xprt_dequeue/format $T/events/sunrpc/svc_xprt_enqueue/format; do
  [ -f "$f" ] && cp "$f" "$OUT/format-$(basename "$(dirname "$f")").txt"
done

# --- client namespaces -----------------------------------------------------
modprobe veth || fail "modprobe veth failed"
i=0
for spec in $CLIENTS; do
  i=$((i + 1))
  IFS=: read -r name fam nconn vers rw bs depth <<<"$spec"
  vers=${vers:-3} rw=${rw:-randread} bs=${bs:-4k} depth=${depth:-16}
  client_netns "$i" "$name" "$fam"
  eval "caddr=\$CADDR_$name"
  summary "client.$name" "$caddr nconnect=$nconn vers=$vers fio=$rw/$bs/$depth"
  eval "NCONN_$name=\$nconn VERS_$name=\$vers"
  eval "FIO_$name=\"--rw=\$rw --bs=\$bs --iodepth=\$depth\""
done
mark "client namespaces ready: $CLIENTS"

# --- ftrace: the independent ground truth ----------------------------------
# FTRACE_EXTRA: more sunrpc events for one scenario (absent ones skipped).
ftrace_start() {
  # shellcheck disable=SC2086
  ftrace_enable "$TRACE_KB" svc_xprt_dequeue svc_xprt_enqueue svc_stats_latency svc_xprt_accept \
    svc_xprt_close svc_xprt_free ${FTRACE_EXTRA:-}
}
# entries recorded so far, over all CPUs (quiescence check)
ftrace_entries() { ftrace_sum entries; }
# ftrace_stop TAG: stop, save stats and trace as *-TAG.txt.
ftrace_stop() {
  echo 0 >$T/tracing_on
  for d in $T/per_cpu/cpu*; do
    echo "== $(basename "$d")"
    cat "$d/stats"
  done >"$OUT/ftrace-stats-$1.txt"
  cat $T/trace >"$OUT/trace-$1.txt"
  for e in $T/events/sunrpc/*/enable; do echo 0 >"$e"; done
}

# --- the depth at enqueue, measured by the kernel itself ---------------------
# nfsdtop reads svc_xprt.xpt_nr_rqsts at each enqueue in its BPF program; the
# kernel's own dynamic events read the same field, by BTF name, at the entry of
# svc_xprt_enqueue, into the same ftrace buffer as the sunrpc events. The host
# counts its real enqueues per client by the tracepoint's rule and compares the
# histograms (xtask/src/vm/depth.rs). Both addresses are read whole (family,
# port, address: the sockaddr layout), the flags as a number (the host names
# the bits from the tracepoint's print fmt). The first definition the kernel
# accepts is kept (summary depth_probe.TAG); each refusal's error_log is
# saved (depth-probe-TAG.txt), for the host to fail with if none is accepted.
DEPTH_EVENT=nfsdtop/depth_at_enqueue
DEPTH_ARGS='nr=xprt->xpt_nr_rqsts.counter:s32 fl=xprt->xpt_flags:x64 ra=xprt->xpt_remote:x8[24] la=xprt->xpt_local:x8[24]'
depth_probe_on() {
  local tag=$1 kind def out="$OUT/depth-probe-$1.txt"
  : >"$out"
  # An fprobe (6.5+), else a kprobe at the function's entry with the same
  # BTF arguments.
  for kind in f p; do
    def="$kind:$DEPTH_EVENT svc_xprt_enqueue $DEPTH_ARGS"
    echo >$T/error_log
    if echo "$def" >>$T/dynamic_events 2>>"$out"; then
      if echo 1 >"$T/events/$DEPTH_EVENT/enable" 2>>"$out"; then
        summary "depth_probe.$tag" "$def"
        mark "depth probe on: $def"
        return 0
      fi
      echo "-:$DEPTH_EVENT" >>$T/dynamic_events
    fi
    { echo "refused: $def"; cat $T/error_log; } >>"$out"
  done
  summary "depth_probe.$tag" refused
  mark "depth probe refused: $(tr '\n' ' ' <"$out")"
}
depth_probe_off() {
  [ -d "$T/events/$DEPTH_EVENT" ] || return 0
  echo 0 >"$T/events/$DEPTH_EVENT/enable"
  echo "-:$DEPTH_EVENT" >>$T/dynamic_events
}

# --- nfsdtop ---------------------------------------------------------------
# nfsdtop_start FILE [args]: launch, then wait for its first line (it has
# attached by then) or its exit.
nfsdtop_start() {
  local file=$1
  nfsdtop_launch "$@"
  wait_until 180 "nfsdtop's first line" nfsdtop_line_or_gone "$file" 1
  if nfsdtop_gone; then
    wait "$NFSDTOP_PID"
    summary "nfsdtop_exit.$(basename "$file" .jsonl)" "$?"
    mark "nfsdtop exited early: $(tail -n 3 "${file%.jsonl}.err" | tr '\n' ' ')"
    return 1
  fi
}
# nfsdtop_stop FILE: wait for two more lines (so the last one covers every
# event so far), then stop it.
nfsdtop_stop() {
  local file=$1 n
  n=$(jsonl_lines "$file")
  wait_until 60 "two more nfsdtop lines" nfsdtop_line_or_gone "$file" $((n + 2))
  # SIGTERM: a background job of a non-interactive shell ignores SIGINT.
  kill -TERM "$NFSDTOP_PID" 2>/dev/null
  wait_until 30 "nfsdtop to exit" nfsdtop_gone
  kill -KILL "$NFSDTOP_PID" 2>/dev/null
  wait "$NFSDTOP_PID"
  summary "nfsdtop_exit.$(basename "$file" .jsonl)" "$?"
}

# --- load --------------------------------------------------------------
mount_clients() {
  local spec name
  for spec in $CLIENTS; do
    name=${spec%%:*}
    eval "local s=\$SADDR_$name p=\$PROTO_$name n=\$NCONN_$name v=\$VERS_$name"
    mkdir -p "/mnt/$name"
    # nsenter --net keeps the mount in the init mount namespace while the
    # NFS client's transports live in (and take addresses from) $name.
    timeout 120 nsenter --net="/run/netns/$name" \
      mount -t nfs -o "vers=$v,proto=$p,nolock,nconnect=$n" "$s:/export" "/mnt/$name" ||
      fail "mount from $name failed"
  done
}
umount_clients() {
  local spec
  for spec in $CLIENTS; do
    timeout 60 umount "/mnt/${spec%%:*}" || mark "umount /mnt/${spec%%:*} failed"
  done
}
# other_service_calls TAG: lockd's dispatches beside nfsd's, from the
# first client: NULL calls to nlockmgr over TCP (a connection from the
# client's address to lockd's own port) and over UDP (lockd's UDP
# transport, without a client address), then NLM4 TEST calls over TCP
# (NLM_TEST, a bogus file handle: lockd answers, and ftrace's
# svc_stats_latency names the procedure). nfsdtop must keep them out of
# nfsd's numbers, count each client's dispatches and fair share within
# lockd, and name the port lockd's (the host compares with ftrace).
other_service_calls() {
  local name=${CLIENTS%%:*} n=0 tests=0 proto i port
  eval "local s=\$SADDR_$name"
  for i in 1 2 3; do
    for proto in tcp udp; do
      timeout 20 nsenter --net="/run/netns/$name" rpcinfo -T "$proto" "$s" nlockmgr 4 >/dev/null 2>&1 &&
        n=$((n + 1))
    done
  done
  for proto in tcp udp; do
    port=$(timeout 20 nsenter --net="/run/netns/$name" rpcinfo -p "$s" 2>/dev/null |
      awk -v p="$proto" '$1 == 100021 && $2 == 4 && $3 == p { print $4; exit }')
    [ -n "$port" ] || continue
    for i in 1 2; do
      timeout 20 nsenter --net="/run/netns/$name" bash -c "$NLM_TEST" _ "$s" "$port" "$proto" &&
        tests=$((tests + 1))
    done
  done
  summary "lockd_calls.$1" "$n"
  summary "lockd_tests.$1" "$tests"
  mark "lockd from $name: $n of 6 NULL calls, $tests of 4 TEST calls (TCP and UDP) answered"
}
# NLM_TEST HOST PORT PROTO (bash -c): one NLM4 TEST call over tcp or
# udp, the start of its reply read back. 92 bytes (after TCP's record
# mark): the RPC call (xid, CALL, RPC 2, program 100021 version 4
# procedure 1, AUTH_NULL credential and verifier), then nlm4_testargs
# (cookie, exclusive=0, caller "test", an empty file handle, owner
# "ownr", svid 1, offset 0, length 1).
NLM_TEST='exec 3<>"/dev/$3/$1/$2" || exit 1
call="\x4e\x4c\x4d\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x01\x86\xb5\x00\x00\x00\x04\x00\x00\x00\x01"
call+="\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
call+="\x00\x00\x00\x04cook\x00\x00\x00\x00\x00\x00\x00\x04test\x00\x00\x00\x00"
call+="\x00\x00\x00\x04ownr\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01"
# One write: over UDP, one datagram.
if [ "$3" = tcp ]; then printf "\x80\x00\x00\x5c$call" >&3; else printf "$call" >&3; fi
[ -n "$(head -c 4 <&3 | od -An -tx1)" ]'
nfs_conns() { ss -Htan '( sport = :2049 )' | grep -vc LISTEN; }
no_nfs_conns() { [ "$(nfs_conns)" = 0 ]; }
# start_fio TAG: fio from every client at once, FIO_RUNTIME seconds (bounded);
# their pids in FIO_PIDS. wait_fio: wait for them, 1 if any failed.
# run_fio TAG: both.
start_fio() {
  local tag=$1 spec name job
  FIO_PIDS=""
  for spec in $CLIENTS; do
    name=${spec%%:*}
    eval "job=\$FIO_$name"
    # shellcheck disable=SC2086
    timeout $((FIO_RUNTIME + 120)) fio --name="$name" --filename="/mnt/$name/$name.dat" \
      $job --direct=1 --ioengine=libaio \
      --runtime="$FIO_RUNTIME" --time_based --size="${FILE_MB}M" \
      --output-format=json --output="$OUT/fio-$tag-$name.json" >/dev/null 2>"$OUT/fio-$tag-$name.err" &
    FIO_PIDS="$FIO_PIDS $!"
  done
}
wait_fio() {
  local rc=0 p
  for p in $FIO_PIDS; do wait "$p" || rc=1; done
  return $rc
}
run_fio() { start_fio "$1" && wait_fio; }
# load TAG: mount, fio, umount, then wait until the server has closed every
# connection (the close dequeues are the last events of the load).
load() {
  local tag=$1
  summary "t_load_start.$tag" "$(up)"
  mount_clients
  summary "server_conns.$tag" "$(nfs_conns)"
  mark "clients mounted ($(nfs_conns) server connections), fio ${FIO_RUNTIME}s"
  run_fio "$tag" &
  local fio=$!
  [ "$tag" = main ] && other_service_calls "$tag"
  # A fault scenario may do something to the server while fio runs.
  [ -n "${DURING_LOAD:-}" ] && "$DURING_LOAD"
  wait "$fio" || mark "fio failed for $tag"
  # nfsd's thread count as the server had it under the load (the agent's
  # snapshot reports it too).
  summary "nfsd_threads.$tag" "$(cat /proc/fs/nfsd/threads 2>/dev/null)"
  summary "t_fio_done.$tag" "$(up)"
  umount_clients
  wait_until 60 "the server to close every connection" no_nfs_conns || summary "quiescent.$tag" no
  summary "t_load_end.$tag" "$(up)"
  mark "load $tag done"
}

# measure TAG [nfsdtop args...]: ftrace and nfsdtop over one load. The
# host compares nfsdtop-TAG.jsonl with trace-TAG.txt.
measure() {
  local tag=$1 f="$OUT/nfsdtop-$1.jsonl" ok=0 before after
  shift
  ftrace_start
  [ "$tag" = main ] && depth_probe_on "$tag"
  # The kernel's own per-procedure counters, around the same span.
  cat /proc/net/rpc/nfsd >"$OUT/rpc-nfsd-before-$tag.txt" 2>/dev/null
  summary "t_trace_on.$tag" "$(up)"
  if [ "$tag" = wait ] && have_nfsdtop; then
    # Launched before nfsd: attached once its BPF programs are loaded
    # (bpftool), then one more line so the attach is complete.
    if wait_until 180 "nfsdtop --wait to attach" wait_attached; then
      ok=1
      wait_until 60 "one more nfsdtop line" nfsdtop_line_or_gone "$f" $(($(jsonl_lines "$f") + 1))
      summary "t_nfsdtop_attached.$tag" "$(up)"
      mark "nfsdtop attached after waiting for nfsd"
    fi
  elif have_nfsdtop && nfsdtop_start "$f" "$@"; then
    ok=1
    summary "t_nfsdtop_attached.$tag" "$(up)"
    mark "nfsdtop attached ($tag)"
  fi
  # The main measurement also runs nfsdtop with every event on its classic
  # tracepoint and the enqueue hooks beside the default (raw tracepoints
  # where the kernel's BTF allows, no enqueue hooks where dequeues carry
  # qtime): both are compared with the same ftrace, and with each other.
  # Where the default reads no depth at enqueue (no enqueue hooks: 6.16+), a
  # third with the hooks on raw tracepoints reads it, for the host to compare
  # with the kernel's own reading (depth_probe_on).
  # A scenario may run another instance beside the first (BESIDE="NAME
  # args...": nfsdtop-TAG-NAME.jsonl), and do something to the first once
  # it has attached (AFTER_ATTACH, given its pid).
  local main_pid=${NFSDTOP_PID:-} b besides=() started=()
  if [ "$tag" = main ]; then
    besides=("classic --classic-tracepoints --enqueue-hooks")
    grep -q "depth at enqueue from xpt_nr_rqsts" "$f" 2>/dev/null ||
      besides+=("hooks --enqueue-hooks")
  elif [ -n "${BESIDE:-}" ]; then
    besides=("$BESIDE")
  fi
  [ "$ok" = 1 ] && [ -n "${AFTER_ATTACH:-}" ] && "$AFTER_ATTACH" "$main_pid"
  for b in "${besides[@]}"; do
    # shellcheck disable=SC2086
    if [ "$ok" = 1 ] && nfsdtop_start "$OUT/nfsdtop-$tag-${b%% *}.jsonl" ${b#* }; then
      started+=("$NFSDTOP_PID ${b%% *}")
      mark "${b%% *} nfsdtop attached ($tag)"
    fi
  done
  NFSDTOP_PID=$main_pid
  load "$tag"
  if [ "$ok" = 1 ]; then
    # The programs' own counters (run counts, recursion misses).
    bpftool prog show >"$OUT/bpf-progs-$tag.txt" 2>&1
    before=$(ftrace_entries)
    nfsdtop_stop "$f"
    for b in "${started[@]}"; do
      NFSDTOP_PID=${b%% *}
      nfsdtop_stop "$OUT/nfsdtop-$tag-${b#* }.jsonl"
    done
    after=$(ftrace_entries)
    summary "ftrace_entries_while_stopping.$tag" "$((after - before))"
  fi
  cat /proc/net/rpc/nfsd >"$OUT/rpc-nfsd-after-$tag.txt" 2>/dev/null
  ftrace_stop "$tag"
  [ "$tag" != main ] || depth_probe_off
}

wait_attached() { nfsdtop_gone || [ "$(bpf_progs)" -gt "${WAIT_PROGS_BASE:-0}" ]; }
if [ "$SCENARIO" = wait ]; then
  measure wait
  kill "$WATCHDOG_PID" 2>/dev/null
  finish
fi

if have_nfsdtop; then
  timeout 300 "$NFSDTOP" doctor --format json >"$OUT/doctor.json" 2>"$OUT/doctor.err"
  summary doctor_exit "$?"
  mark "doctor done"
else
  summary nfsdtop missing
fi
measure main
mark "main measurement done"

# --- scenarios after the main measurement (issue 23: whatif) -------------
for s in $AFTER_MAIN; do
  if [ -f "/vm/scenario-$s.sh" ]; then
    mark "scenario $s"
    # shellcheck source=/dev/null
    . "/vm/scenario-$s.sh"
  else
    summary "scenario.$s" "unknown"
  fi
done

# --- faults (issue 4) ------------------------------------------------------
for f in $FAULTS; do
  if [ -x "/vm/fault-$f.sh" ]; then
    mark "fault $f"
    # shellcheck source=/dev/null
    . "/vm/fault-$f.sh"
  else
    summary "fault.$f" "unknown"
  fi
done

kill "$WATCHDOG_PID" 2>/dev/null
finish
