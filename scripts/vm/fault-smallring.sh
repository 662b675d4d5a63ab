# Fault (issue 4): a ring buffer far too small for the load: the loss must
# be counted (events_lost > 0), never silent. Sourced by guest-init.sh.
# Needs an nfsdtop flag for the ring size.
if ! have_nfsdtop; then
  :
elif "$NFSDTOP" --help 2>&1 | grep -- '--ring-size' >/dev/null; then
  measure smallring --ring-size 4096
else
  summary smallring.error "nfsdtop has no --ring-size flag"
fi
