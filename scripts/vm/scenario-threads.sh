#!/bin/bash
# Scenario "threads" (sourced by guest-init.sh after the main measurement;
# checked by xtask/src/vm/threads.rs): nfsd's dynamic threads (7.0+). With
# a minimum below the configured threads, nfsd starts a thread when all
# are busy, and a thread above the minimum exits after ~5 s idle. The
# minimum is netlink's only (NFSD_A_SERVER_MIN_THREADS: `nfsdctl threads
# --min-threads=N COUNT`; 7.2 has no /proc/fs/nfsd/min_threads), so a
# kernel is known to have dynamic threads by its nfsd_dynthread_* events.
# nfsd gets THR_MAX threads and a minimum of THR_MIN; once the threads
# above the minimum have exited, one load under ftrace (nfsd's
# nfsd_dynthread_* events, and the scheduler's record of nfsd kthreads
# exiting) with nfsdtop beside it, then THR_IDLE_MIN s or more of
# idleness, until the threads the load started have exited again. The
# nfsd kthreads are counted at quiet moments (start and end);
# /proc/fs/nfsd/threads, pool_threads and nfsdctl's view are recorded at
# several moments, and the files sampled every second beside the
# kthreads (threads-samples.txt): on 7.2 both files say the configured
# maximum whatever runs. Without the events the scenario only records
# that; the host then wants no threads_running in nfsdtop's lines.
# Afterwards nfsd runs as before (NFSD_THREADS, no minimum) for the
# scenarios that follow.
THR_MAX=8
THR_MIN=1
THR_FIO=10      # seconds of fio: long enough for every thread to be needed
THR_IDLE_MIN=20 # seconds idle at least after the load: several 5 s timeouts
THR_JSON="$OUT/nfsdtop-threads.jsonl"
THR_EVENTS="nfsd/nfsd_dynthread_start nfsd/nfsd_dynthread_kill nfsd/nfsd_dynthread_trylock_fail
  sched/sched_process_exit"

# thr_kthreads: THR_N = nfsd kthreads now (comm exactly "nfsd"), read
# with bash's own read so the sampler forks nothing per process.
thr_kthreads() {
  local f c
  THR_N=0
  for f in /proc/[0-9]*/comm; do
    { read -r c <"$f"; } 2>/dev/null && [ "$c" = nfsd ] && THR_N=$((THR_N + 1))
  done
}
thr_file() { paste -sd, "/proc/fs/nfsd/$1" 2>/dev/null; }
# nfsdctl's netlink view: min-threads and each pool's count, one line.
thr_ctl() { timeout 20 nfsdctl threads 2>&1 | tr '\n' ' ' | sed 's/  */ /g; s/ $//'; }
# thr_record TAG: the files, nfsdctl and the kthreads now, into the summary.
thr_record() {
  thr_kthreads
  summary "threads.$1" "t=$(up) threads=$(thr_file threads) pool_threads=$(thr_file pool_threads) kthreads=$THR_N nfsdctl=[$(thr_ctl)]"
}
# thr_sample FILE: every second "UPTIME THREADS POOL_THREADS KTHREADS"
# (pools comma-joined). Not nfsdctl: its netlink call holds nfsd_mutex,
# which a thread starting another only trylocks (a sample could cost a
# start).
thr_sample() {
  local t th
  while :; do
    read -r t _ </proc/uptime
    read -r th </proc/fs/nfsd/threads
    thr_kthreads
    echo "$t $th $(thr_file pool_threads) $THR_N" >>"$1"
    sleep 1
  done
}
thr_at_min() {
  thr_kthreads
  [ "$THR_N" -le "$THR_MIN" ]
}
# thr_events 0|1: nfsd's dynamic-thread events, and the scheduler's
# record of an nfsd kthread exiting: a count of exits that is not nfsd's
# own (7.2's kthreads are named without a task_rename record, so starts
# have no such twin: the kthreads counted at start and end give them).
thr_events() {
  local e
  for e in $THR_EVENTS; do
    [ -d "$T/events/$e" ] || continue
    case $e in sched/*) echo 'comm == "nfsd"' >"$T/events/$e/filter" ;; esac
    echo "$1" >"$T/events/$e/enable"
  done
}

if [ ! -d "$T/events/nfsd/nfsd_dynthread_start" ]; then
  summary threads.dynamic "no: $(uname -r) has no nfsd_dynthread_start event"
  mark "threads scenario: no dynamic threads on this kernel"
elif ! timeout 20 nfsdctl threads --help 2>&1 | grep -q min-threads; then
  # The kernel has them but the image cannot set them: the host fails.
  summary threads.dynamic yes
  summary threads.error "nfsdctl cannot set min-threads ($(command -v nfsdctl || echo missing))"
  mark "threads scenario: nfsdctl cannot set min-threads"
else
  summary threads.dynamic yes
  summary threads.want "min=$THR_MIN max=$THR_MAX"
  for e in nfsd_dynthread_start nfsd_dynthread_kill; do
    cp "$T/events/nfsd/$e/format" "$OUT/format-$e.txt" 2>/dev/null
  done
  # What setting the threads does, in ftrace too (trace-threads-setup.txt).
  echo 0 >$T/tracing_on
  echo >$T/trace
  thr_events 1
  echo 1 >$T/tracing_on
  thr_record before
  # The maximum first (rpc.nfsd, as the run's nfsd was started), then the
  # minimum on the running server: netlink's threads-set refuses a
  # stopped server ("No active listeners added, not starting threads").
  NFSD_THREADS=$THR_MAX start_nfsd
  thr_record max_set
  out=$(timeout 60 nfsdctl threads --min-threads="$THR_MIN" "$THR_MAX" 2>&1)
  summary threads.set "rc=$? $(echo "$out" | tr '\n' ' ')"
  thr_record min_set
  thr_sample "$OUT/threads-samples.txt" &
  thr_sampler=$!
  # Threads started above the minimum (if any) go after their idle
  # timeout; measure from a quiet moment.
  wait_until 60 "nfsd threads to settle at the minimum" thr_at_min ||
    summary threads.settled "no: $THR_N kthreads after 60 s"
  thr_record settled
  echo 0 >$T/tracing_on
  cat $T/trace >"$OUT/trace-threads-setup.txt"
  ftrace_start
  if have_nfsdtop && nfsdtop_start "$THR_JSON"; then
    thr_record start
    summary threads.kthreads_start "$THR_N"
    saved_fio=$FIO_RUNTIME
    FIO_RUNTIME=$THR_FIO
    load threads
    FIO_RUNTIME=$saved_fio
    thr_record after_load
    idle_from=$(date +%s)
    wait_until 90 "nfsd threads to exit down to the minimum" thr_at_min ||
      summary threads.exited "no: $THR_N kthreads after 90 s idle"
    left=$((idle_from + THR_IDLE_MIN - $(date +%s)))
    [ "$left" -gt 0 ] && sleep "$left"
    thr_record idle
    nfsdtop_stop "$THR_JSON"
    thr_record end
    summary threads.kthreads_end "$THR_N"
  else
    summary threads.error "nfsdtop did not start for the threads scenario"
  fi
  ftrace_stop threads
  thr_events 0
  kill "$thr_sampler" 2>/dev/null
  # Back to the run's nfsd: no minimum, the configured threads, set on
  # the running server: a minimum outlives `rpc.nfsd 0` (the next start
  # starts only it), and 7.2 kept it when `nfsdctl threads
  # --min-threads=0 0` was sent to the stopped server.
  out=$(timeout 60 nfsdctl threads --min-threads=0 "$NFSD_THREADS" 2>&1)
  summary threads.reset "rc=$? $(echo "$out" | tr '\n' ' ')"
  timeout 60 rpc.nfsd "$NFSD_THREADS" || mark "rpc.nfsd $NFSD_THREADS failed"
  thr_record restored
  mark "threads scenario done"
fi
