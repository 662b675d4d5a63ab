# Fault (issue 4): nfsdtop SIGKILLed under load leaves nothing behind: the
# BPF programs it loaded are freed (bpftool prog: back to the baseline),
# no perf-event attachment remains, nothing is pinned in bpffs. Sourced by
# guest-init.sh.

progs_back_to() { [ "$(bpf_progs)" -le "$1" ]; }
if ! command -v bpftool >/dev/null; then
  summary kill.error "no bpftool in the image"
elif have_nfsdtop; then
  base=$(bpf_progs)
  summary kill.progs_baseline "$base"
  if nfsdtop_start "$OUT/nfsdtop-kill.jsonl"; then
    mount_clients
    run_fio kill &
    kill_fio=$!
    wait_until 120 "nfsdtop lines under load" nfsdtop_line_or_gone "$OUT/nfsdtop-kill.jsonl" 3
    summary kill.progs_running "$(bpf_progs)"
    bpftool prog show >"$OUT/kill-progs-running.txt" 2>&1
    bpftool perf list >"$OUT/kill-perf-running.txt" 2>&1
    kill -KILL "$NFSDTOP_PID"
    wait "$NFSDTOP_PID"
    summary kill.exit "$?"
    wait_until 60 "the killed agent's BPF programs to be freed" progs_back_to "$base"
    summary kill.progs_after "$(bpf_progs)"
    bpftool prog show >"$OUT/kill-progs-after.txt" 2>&1
    summary kill.perf_after "$(bpftool perf list 2>/dev/null | grep -c .)"
    summary kill.bpffs_after "$(find /sys/fs/bpf -mindepth 1 | wc -l)"
    wait "$kill_fio"
    umount_clients
    wait_until 60 "the server to close every connection" no_nfs_conns
  fi
fi
