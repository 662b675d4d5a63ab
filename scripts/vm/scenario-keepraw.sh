#!/bin/bash
# Scenario "keepraw" (sourced by guest-init.sh after the main measurement;
# checked by xtask/src/vm/keepraw.rs): on a kernel that can preempt raw
# tracepoint programs (Debian's 7.x), nfsdtop starts on classic
# tracepoints; --keep-raw-tracepoints keeps the raw ones, and the hits the
# kernel skips are counted as lost. One more load under ftrace, the same
# as the main measurement's. Elsewhere the flag changes nothing, and the
# scenario is not run.
if [ "$(uname -r | cut -d. -f1)" -ge 7 ]; then
  summary keepraw.run yes
  measure keepraw --keep-raw-tracepoints
  mark "keepraw measurement done"
else
  summary keepraw.run "no: kernel $(uname -r) does not preempt raw programs"
fi
