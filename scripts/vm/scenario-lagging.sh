#!/bin/bash
# Scenario "lagging" (sourced by guest-init.sh after the main measurement;
# checked by xtask/src/vm/lagging.rs): on 6.16+, where nfsdtop rebuilds the
# ready queue from dequeues, nfsdtop is held back while the load runs, with
# an --enqueue-hooks instance (classic tracepoints) beside it that is not:
# first by a cgroup CPU quota of a tenth of a CPU (cpu.max 10000 100000),
# then by SIGSTOP bursts
# (3 s stopped, 2 s running). Each is one more load under ftrace, longer
# than the main one so that the agent falls several windows behind. Once
# the load is over the agent is let go, so its last line covers the run.
# nfsdtopd (where the host put it in) is held back beside it the same
# way, and its /api/v1/unfair is polled every 2 s from one process
# started before the load (unfair-TAG.txt: "UPTIME JSON" lines); the
# server's established connections per client are sampled every second
# while fio runs (conns-TAG.txt: "START END ADDR=N..." lines), and the wall
# clock's offset from uptime is noted, so the host can set each snapshot
# beside the samples around it.
LAG_CG=/sys/fs/cgroup/nfsdtop-lagging
LAG_FIO=${LAG_FIO:-16}
kernel_at_least() { [ "$(printf '%s\n' "$1" "$(uname -r | cut -d- -f1)" | sort -V | head -n 1)" = "$1" ]; }

lag_cgroup() {
  mountpoint -q /sys/fs/cgroup || mount -t cgroup2 none /sys/fs/cgroup || return 1
  echo +cpu >/sys/fs/cgroup/cgroup.subtree_control || return 1
  mkdir -p "$LAG_CG" && echo "10000 100000" >"$LAG_CG/cpu.max"
}
LAG_PORT=9847
DAEMON_PID=""
# daemon_start TAG: nfsdtopd on the kernel's events, serving on
# 127.0.0.1:LAG_PORT, and the poller of its unfair list; 1 if there is
# no nfsdtopd or it did not come up.
daemon_start() {
  DAEMON_PID="" POLL_PID=""
  [ -x /vm/nfsdtopd ] || { summary "lagging.daemon.$1" missing; return 1; }
  /vm/nfsdtopd --listen "127.0.0.1:$LAG_PORT" >"$OUT/nfsdtopd-$1.log" 2>&1 &
  DAEMON_PID=$!
  if ! wait_until 180 "nfsdtopd to serve its first snapshot" daemon_ready; then
    summary "lagging.daemon.$1" "did not come up: $(tail -n 2 "$OUT/nfsdtopd-$1.log" | tr '\n' ' ')"
    return 1
  fi
  summary "lagging.daemon.$1" up
  unfair_poll "$OUT/unfair-$1.txt" &
  POLL_PID=$!
}
daemon_stop() {
  [ -n "$POLL_PID" ] && kill "$POLL_PID" 2>/dev/null
  [ -n "$DAEMON_PID" ] || return 0
  kill -CONT "$DAEMON_PID" 2>/dev/null
  kill -TERM "$DAEMON_PID" 2>/dev/null
  wait_until 30 "nfsdtopd to exit" pid_gone "$DAEMON_PID" || kill -KILL "$DAEMON_PID" 2>/dev/null
  wait "$DAEMON_PID"
  summary "lagging.daemon_exit.$1" "$?"
}
# http_get PATH: the body of nfsdtopd's answer (HTTP/1.0: it closes),
# with bash's own socket and read, so a poll forks nothing.
http_get() {
  local line body="" in_body=0
  exec 5<>"/dev/tcp/127.0.0.1/$LAG_PORT" || return 1
  printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' "$1" >&5
  while IFS= read -r -t 20 line <&5 || [ -n "$line" ]; do
    if [ "$in_body" = 1 ]; then body+=$line; elif [ "$line" = $'\r' ]; then in_body=1; fi
    line=""
  done
  exec 5<&-
  printf '%s' "$body"
}
daemon_ready() { case "$(http_get /api/v1/unfair?group=peer)" in *'"peers"'*) return 0 ;; *) return 1 ;; esac; }
# unfair_poll FILE: every 2 s, "UPTIME JSON" of the peers below their
# fair share, stamped when the answer arrived.
unfair_poll() {
  local body now
  while :; do
    body=$(http_get /api/v1/unfair?group=peer)
    read -r now _ </proc/uptime
    printf '%s %s\n' "$now" "$body" >>"$1"
    sleep 2
  done
}
# clock_marker: the trace clock beside uptime, for the host.
clock_marker() {
  local now
  read -r now _ </proc/uptime
  echo "nfsdtop-clock $now" >$T/trace_marker
}
# conns_poll FILE: every second, "START END ADDR=N..." of the server's
# established NFS connections per client address, with the uptime before
# and after ss (on a saturated guest ss takes seconds: what it read holds
# at some moment between the two).
conns_poll() {
  local line start end
  while :; do
    read -r start _ </proc/uptime
    line=$(ss -Htn state established '( sport = :2049 )' |
      awk '{ a = $4; sub(/:[0-9]+$/, "", a); gsub(/[][]/, "", a); n[a]++ }
           END { for (a in n) printf " %s=%d", a, n[a] }')
    read -r end _ </proc/uptime
    echo "$start $end$line" >>"$1"
    sleep 1
  done
}
# AFTER_ATTACH: the agent (and nfsdtopd) into the quota's cgroup.
lag_quota() {
  echo "$1" >"$LAG_CG/cgroup.procs" && summary lagging.quota.pid "$1"
  [ -z "$DAEMON_PID" ] || echo "$DAEMON_PID" >"$LAG_CG/cgroup.procs"
}
# DURING_LOAD (load's $fio is in scope): once the load is over, lift it.
lag_lift() {
  local polling
  conns_poll "$OUT/conns-lagging.txt" &
  polling=$!
  summary lagging.clock.lagging "$(date +%s.%N) $(up)"
  clock_marker
  while kill -0 "$fio" 2>/dev/null; do sleep 0.5; done
  kill "$polling"
  summary lagging.quota.cpu_stat "$(tr '\n' ' ' <"$LAG_CG/cpu.stat")"
  echo max >"$LAG_CG/cpu.max"
}
# DURING_LOAD: stop the agent 3 s of every 5 while the load runs.
lag_bursts() {
  local n=0 polling
  conns_poll "$OUT/conns-lagstop.txt" &
  polling=$!
  summary lagging.clock.lagstop "$(date +%s.%N) $(up)"
  clock_marker
  while kill -0 "$fio" 2>/dev/null; do
    # shellcheck disable=SC2086
    kill -STOP "$NFSDTOP_PID" $DAEMON_PID && n=$((n + 1))
    sleep 3
    # shellcheck disable=SC2086
    kill -CONT "$NFSDTOP_PID" $DAEMON_PID
    sleep 2
  done
  kill "$polling"
  # shellcheck disable=SC2086
  kill -CONT "$NFSDTOP_PID" $DAEMON_PID 2>/dev/null
  summary lagging.stops "$n"
}

if ! kernel_at_least 6.16; then
  summary lagging.run "no: kernel $(uname -r) has no qtime, so its enqueues are hooked"
elif ! lag_cgroup; then
  summary lagging.run "no: cannot make a cgroup with a CPU quota"
else
  summary lagging.run yes
  saved_fio=$FIO_RUNTIME
  FIO_RUNTIME=$LAG_FIO
  # The instance beside on classic tracepoints: 7.x preempts raw programs,
  # and the enqueue has no second program to do the hits it skips.
  daemon_start lagging
  BESIDE="hooks --classic-tracepoints --enqueue-hooks" AFTER_ATTACH=lag_quota DURING_LOAD=lag_lift measure lagging
  daemon_stop lagging
  mark "lagging (CPU quota) measurement done"
  daemon_start lagstop
  BESIDE="hooks --classic-tracepoints --enqueue-hooks" DURING_LOAD=lag_bursts measure lagstop
  daemon_stop lagstop
  mark "lagging (SIGSTOP bursts) measurement done"
  FIO_RUNTIME=$saved_fio
fi
