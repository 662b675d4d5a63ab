#!/bin/bash
# Scenario "whatif" (sourced by guest-init.sh after the main measurement;
# checked by xtask/src/vm/whatif.rs): `nfsdtop record` of the clients
# (different nconnect, each in its own namespace) under the kernel's flat
# queue with few nfsd threads, so every client is backlogged. The host
# runs `nfsdtop whatif` on the copied-out recording. The recording starts
# before the mounts and stops when fio ends, so it covers the backlogged
# load and hardly any idle time. Also notes /proc/fs/nfsd/threads, which
# the recording's header must repeat.
WHATIF_FIO=${WHATIF_FIO:-10}
whatif_rec="$OUT/whatif.rec"
summary whatif.nfsd_threads "$(cat /proc/fs/nfsd/threads)"
if have_nfsdtop; then
  "$NFSDTOP" record -o "$whatif_rec" >"$OUT/whatif-record.out" 2>"$OUT/whatif-record.err" &
  NFSDTOP_PID=$!
  # The header is written once the source is open (attached).
  whatif_started() { [ -s "$whatif_rec" ] || nfsdtop_gone; }
  if wait_until 180 "nfsdtop record to attach" whatif_started && ! nfsdtop_gone; then
    mark "nfsdtop record attached"
    summary t_load_start.whatif "$(up)"
    mount_clients
    summary server_conns.whatif "$(nfs_conns)"
    saved_runtime=$FIO_RUNTIME
    FIO_RUNTIME=$WHATIF_FIO
    run_fio whatif || mark "fio failed for whatif"
    FIO_RUNTIME=$saved_runtime
    summary t_fio_done.whatif "$(up)"
    # SIGTERM: the recording is finished (last frame, end marker, fsync).
    kill -TERM "$NFSDTOP_PID" 2>/dev/null
    wait_until 60 "nfsdtop record to finish" nfsdtop_gone
    kill -KILL "$NFSDTOP_PID" 2>/dev/null
    wait "$NFSDTOP_PID"
    summary whatif.record_exit "$?"
    umount_clients
    wait_until 60 "the server to close every connection" no_nfs_conns || summary quiescent.whatif no
    mark "whatif recording done ($(stat -c %s "$whatif_rec" 2>/dev/null) bytes)"
  else
    wait "$NFSDTOP_PID"
    summary whatif.record_exit "$?"
    summary whatif.error "nfsdtop record did not start: $(tail -n 3 "$OUT/whatif-record.err" | tr '\n' ' ')"
  fi
else
  summary whatif.error "no nfsdtop binary in the guest"
fi
