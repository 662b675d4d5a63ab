#!/bin/bash
# Scenario "names" (sourced by guest-init.sh after the main measurement;
# checked by xtask/src/vm/names.rs): the first client mounts with NFSv4.2
# while nfsdtop runs, and nfsd's own record of its clients
# (/proc/fs/nfsd/clients/*/info) is copied out beside nfsdtop's lines, so
# the host can compare the name nfsdtop shows for that client's address
# with the one the server keeps. ftrace and the kernel's own counters
# (/proc/net/rpc/nfsd) are kept over the same span, so the NFSv4.2
# client's requests per procedure (COMPOUND, NULL) are checked as the main
# measurement's NFSv3 ones are, and its NFSv4 operations (--nfs4-ops)
# against the kernel's proc4ops. Only operations allowed in nfsd's grace
# period (mount, getattr) are used: a fresh NFSv4 server refuses opens for
# its first 90 s.
names_json="$OUT/nfsdtop-names.jsonl"
names_spec=${CLIENTS%% *}
names_client=${names_spec%%:*}
eval "names_saddr=\$SADDR_$names_client names_proto=\$PROTO_$names_client"
mkdir -p /var/lib/nfs/v4recovery "/mnt/$names_client-v4"
names_listed() { grep -qs '^name:' /proc/fs/nfsd/clients/*/info; }
if have_nfsdtop && nfsdtop_start "$names_json" --nfs4-ops; then
  ftrace_start
  cat /proc/net/rpc/nfsd >"$OUT/rpc-nfsd-before-names.txt" 2>/dev/null
  if timeout 120 nsenter --net="/run/netns/$names_client" \
    mount -t nfs -o "vers=4.2,proto=$names_proto" "$names_saddr:/export" "/mnt/$names_client-v4"; then
    summary names.mounted yes
    stat "/mnt/$names_client-v4" >/dev/null
    if wait_until 60 "nfsd to list the NFSv4 client" names_listed; then
      # nfsdtop re-reads the clients every 5 s: seven more lines (-d 1)
      # are certain to carry what nfsd lists now.
      wait_until 60 "seven more nfsdtop lines" nfsdtop_line_or_gone "$names_json" \
        $(($(jsonl_lines "$names_json") + 7))
    fi
    for d in /proc/fs/nfsd/clients/*/; do
      cat "$d/info"
      echo "--"
    done >"$OUT/nfsd-clients.txt" 2>&1
    timeout 60 umount "/mnt/$names_client-v4" || mark "umount /mnt/$names_client-v4 failed"
  else
    summary names.mounted no
  fi
  nfsdtop_stop "$names_json"
  cat /proc/net/rpc/nfsd >"$OUT/rpc-nfsd-after-names.txt" 2>/dev/null
  ftrace_stop names
  mark "names scenario done"
else
  summary names.error "nfsdtop did not start for the names scenario"
fi
