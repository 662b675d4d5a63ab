#!/bin/bash
# Scenario "pools" (sourced by guest-init.sh after the main measurement;
# checked by xtask/src/vm/pools.rs): nfsd restarted with one thread pool
# per CPU (sunrpc's pool_mode=percpu), then one measurement with ftrace
# beside nfsdtop. The host gives each svc_stats_latency record of an nfsd
# thread to its thread's pool: on 6.17+ from the svc_pool_thread_* events
# (pool and pid; there threads are not pinned to their pool's CPU), before
# that the pool of the CPU it ran on (each pool's threads run on its own
# CPU); and compares each pool's execution time with nfsdtop's; the
# pools' thread counts come from /proc/fs/nfsd/pool_threads. Afterwards
# nfsd runs as before (one global pool) for the scenarios that follow.
POOL_MODE=/sys/module/sunrpc/parameters/pool_mode
POOLS_THREADS=4
stop_nfsd
if echo percpu >"$POOL_MODE"; then
  nfsd_up "$POOLS_THREADS" 0
  summary pools.mode "$(cat "$POOL_MODE")"
  summary pools.pool_threads "$(cat /proc/fs/nfsd/pool_threads)"
  summary pools.threads "$(cat /proc/fs/nfsd/threads)"
  mark "nfsd running with pools $(cat /proc/fs/nfsd/pool_threads)"
  FTRACE_EXTRA="svc_pool_thread_wake svc_pool_thread_running svc_pool_thread_noidle" measure pools
  stop_nfsd
else
  summary pools.mode "cannot set percpu: $(cat "$POOL_MODE")"
fi
echo global >"$POOL_MODE" || mark "cannot set pool_mode back to global"
start_nfsd
mark "pools scenario done"
