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
LAG_CG=/sys/fs/cgroup/nfsdtop-lagging
LAG_FIO=${LAG_FIO:-16}
kernel_at_least() { [ "$(printf '%s\n' "$1" "$(uname -r | cut -d- -f1)" | sort -V | head -n 1)" = "$1" ]; }

lag_cgroup() {
  mountpoint -q /sys/fs/cgroup || mount -t cgroup2 none /sys/fs/cgroup || return 1
  echo +cpu >/sys/fs/cgroup/cgroup.subtree_control || return 1
  mkdir -p "$LAG_CG" && echo "10000 100000" >"$LAG_CG/cpu.max"
}
# AFTER_ATTACH: the agent into the quota's cgroup.
lag_quota() { echo "$1" >"$LAG_CG/cgroup.procs" && summary lagging.quota.pid "$1"; }
# DURING_LOAD (load's $fio is in scope): once the load is over, lift it.
lag_lift() {
  while kill -0 "$fio" 2>/dev/null; do sleep 0.5; done
  summary lagging.quota.cpu_stat "$(tr '\n' ' ' <"$LAG_CG/cpu.stat")"
  echo max >"$LAG_CG/cpu.max"
}
# DURING_LOAD: stop the agent 3 s of every 5 while the load runs.
lag_bursts() {
  local n=0
  while kill -0 "$fio" 2>/dev/null; do
    kill -STOP "$NFSDTOP_PID" && n=$((n + 1))
    sleep 3
    kill -CONT "$NFSDTOP_PID"
    sleep 2
  done
  kill -CONT "$NFSDTOP_PID" 2>/dev/null
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
  BESIDE="hooks --classic-tracepoints --enqueue-hooks" AFTER_ATTACH=lag_quota DURING_LOAD=lag_lift measure lagging
  mark "lagging (CPU quota) measurement done"
  BESIDE="hooks --classic-tracepoints --enqueue-hooks" DURING_LOAD=lag_bursts measure lagstop
  mark "lagging (SIGSTOP bursts) measurement done"
  FIO_RUNTIME=$saved_fio
fi
