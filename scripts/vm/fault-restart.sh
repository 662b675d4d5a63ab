# Fault (issue 4): nfsd stopped and restarted under load while nfsdtop
# runs. Sourced by guest-init.sh (its helpers are in scope). The host
# checks that nfsdtop's per-peer counts still equal ftrace's over the whole
# run, that dispatches continued after the restart, and that no transport
# of the stopped server stays backlogged or counted as a connection.
ftrace_at_least() { [ "$(ftrace_entries)" -ge "$1" ]; }
restart_nfsd_during_load() {
  wait_until 120 "dispatches before the restart" ftrace_at_least 300
  summary restart.lines_at_stop "$(jsonl_lines "$OUT/nfsdtop-restart.jsonl")"
  stop_nfsd
  summary restart.threads_stopped "$(cat /proc/fs/nfsd/threads)"
  mark "nfsd stopped under load ($(nfs_conns) server connections left)"
  timeout 60 rpc.nfsd "$NFSD_THREADS" || fail "restarting nfsd failed"
  summary restart.lines_at_restart "$(jsonl_lines "$OUT/nfsdtop-restart.jsonl")"
  mark "nfsd restarted"
}
DURING_LOAD=restart_nfsd_during_load
measure restart
DURING_LOAD=
