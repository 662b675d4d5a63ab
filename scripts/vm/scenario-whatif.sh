#!/bin/bash
# Scenario "whatif" (sourced by guest-init.sh after the main measurement;
# checked by xtask/src/vm/whatif.rs): `nfsdtop record` of the clients
# (different nconnect, each in its own namespace) under the kernel's flat
# queue with few nfsd threads, so every client is backlogged. The host
# runs `nfsdtop whatif` on the copied-out recording. The recording covers
# steady load only: fio starts first, and the recording begins once every
# client is reading (under TCG one fio can take seconds longer than the
# others to start: a recording from before would hold stretches of one
# client alone) and stops after WHATIF_FIO seconds, before fio is
# stopped. Also notes /proc/fs/nfsd/threads, which the recording's header
# must repeat.
WHATIF_FIO=${WHATIF_FIO:-10}
# Reads every client has sent before the recording starts.
WHATIF_READS=200
whatif_rec="$OUT/whatif.rec"
summary whatif.nfsd_threads "$(cat /proc/fs/nfsd/threads)"
# reads NAME: NFS READ calls the mount /mnt/NAME has sent (0 before any).
reads() {
  awk -v m="/mnt/$1" '$1 == "device" { on = ($5 == m) } on && $1 == "READ:" { print $2; exit }' \
    /proc/self/mountstats
}
all_reading() {
  local spec n
  for spec in $CLIENTS; do
    n=$(reads "${spec%%:*}")
    [ "${n:-0}" -ge "$WHATIF_READS" ] || return 1
  done
}
if have_nfsdtop; then
  summary t_load_start.whatif "$(up)"
  mount_clients
  summary server_conns.whatif "$(nfs_conns)"
  # Long enough for every fio to start, nfsdtop to attach and the
  # recording; fio is stopped (SIGTERM, which timeout passes on) once it
  # is done.
  saved_runtime=$FIO_RUNTIME
  FIO_RUNTIME=$((WHATIF_FIO + 420))
  start_fio whatif
  FIO_RUNTIME=$saved_runtime
  wait_until 120 "every client to be reading" all_reading || summary whatif.steady no
  mark "every client reading: $(for s in $CLIENTS; do printf '%s=%s ' "${s%%:*}" "$(reads "${s%%:*}")"; done)"
  "$NFSDTOP" record -o "$whatif_rec" >"$OUT/whatif-record.out" 2>"$OUT/whatif-record.err" &
  NFSDTOP_PID=$!
  # The header is written once the source is open (attached).
  whatif_started() { [ -s "$whatif_rec" ] || nfsdtop_gone; }
  # Attaching under full load on an emulated guest takes minutes (BTF,
  # the verifier), more with a debug build or a busy host.
  if wait_until 300 "nfsdtop record to attach" whatif_started && ! nfsdtop_gone; then
    mark "nfsdtop record attached"
    summary t_record_start.whatif "$(up)"
    sleep "$WHATIF_FIO"
    # SIGTERM: the recording is finished (last frame, end marker, fsync).
    kill -TERM "$NFSDTOP_PID" 2>/dev/null
    wait_until 60 "nfsdtop record to finish" nfsdtop_gone
    kill -KILL "$NFSDTOP_PID" 2>/dev/null
    wait "$NFSDTOP_PID"
    summary whatif.record_exit "$?"
    summary t_record_done.whatif "$(up)"
  else
    # Still running but silent: stopped, so the scenarios after it run.
    kill -KILL "$NFSDTOP_PID" 2>/dev/null
    wait "$NFSDTOP_PID"
    summary whatif.record_exit "$?"
    summary whatif.error "nfsdtop record did not start: $(tail -n 3 "$OUT/whatif-record.err" | tr '\n' ' ')"
  fi
  # fio ends its jobs on SIGTERM as at the end of its runtime.
  # shellcheck disable=SC2086
  kill -TERM $FIO_PIDS 2>/dev/null
  wait_fio || mark "fio stopped for whatif with an error"
  summary t_fio_done.whatif "$(up)"
  umount_clients
  wait_until 60 "the server to close every connection" no_nfs_conns || summary quiescent.whatif no
  mark "whatif recording done ($(stat -c %s "$whatif_rec" 2>/dev/null) bytes)"
else
  summary whatif.error "no nfsdtop binary in the guest"
fi
