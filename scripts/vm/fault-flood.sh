# Fault (issue 4): a flood of short-lived client connections while fio
# runs from the normal clients. Namespace "flood" gets FLOOD_ADDRS IPv6
# addresses on one veth; python3 connects to nfsd (port 2049) from each in
# turn and closes at once (each accepted connection is a new svc_xprt, each
# from a peer nfsdtop has not seen, or has evicted), for FLOOD_SECS seconds
# or FLOOD_MAX connections. nfsdtop runs with small limits. The host checks
# that nfsdtop kept running, never held more peers than the bound plus one
# eviction batch, counted evictions, stayed exact for the real clients, and
# that its RSS stayed bounded. Sourced by guest-init.sh.
FLOOD_ADDRS=${FLOOD_ADDRS:-400}
FLOOD_SECS=${FLOOD_SECS:-15}
FLOOD_MAX=${FLOOD_MAX:-3000}
FLOOD_MAX_PEERS=${FLOOD_MAX_PEERS:-64}
FLOOD_MAX_TRANSPORTS=${FLOOD_MAX_TRANSPORTS:-256}

# The flood namespace: server fd99:99::1, clients fd99:99::1:N.
flood_netns() {
  ip netns add flood || return 1
  ip link add hflood type veth peer name gflood || return 1
  ip link set gflood netns flood
  ip addr add fd99:99::1/64 dev hflood nodad
  ip link set hflood up
  ip -n flood link set lo up
  ip -n flood link set gflood up
  local n
  for n in $(seq 1 "$FLOOD_ADDRS"); do
    printf 'addr add fd99:99::1:%x/64 dev gflood nodad\n' "$n"
  done | ip -n flood -batch - || return 1
  summary flood.addrs "$(ip -n flood -6 addr show dev gflood scope global | grep -c 'inet6 fd99:99::1:')"
}

# Python takes seconds to start under TCG, and under load every fork of
# this script does too: start it first (flood_spawn) and wait for its
# "ready". Once the load has started (flood_go, a shell builtin), it waits
# itself for FLOOD_AFTER ftrace records (fio under way; the mounts alone
# make a few hundred), polling with a deadline, and floods.
FLOOD_GO=/tmp/flood-go
FLOOD_AFTER=${FLOOD_AFTER:-1500}
flood_spawn() {
  rm -f "$FLOOD_GO"
  timeout $((FLOOD_SECS + 600)) nsenter --net=/run/netns/flood python3 - \
    "$FLOOD_ADDRS" "$FLOOD_SECS" "$FLOOD_MAX" "$FLOOD_GO" "$T" "$FLOOD_AFTER" \
    >"$OUT/flood-client.txt" 2>"$OUT/flood-client.err" <<'EOF' &
import glob, os, socket, sys, time
addrs, secs, most, go = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
tracefs, after = sys.argv[5], int(sys.argv[6])
agent = None
def mem(tag):
    # The agent's VmRSS, RssAnon (its heap) and VmHWM in kB.
    try:
        with open("/proc/%s/status" % agent) as f:
            for l in f:
                k = l.split(":")[0]
                if k in ("VmRSS", "RssAnon", "VmHWM"):
                    print("%s_%s_kb=%s" % (k.lower(), tag, l.split()[1]))
    except OSError as e:
        print("agent status: %s" % e, file=sys.stderr)
def up():
    with open("/proc/uptime") as f:
        return f.read().split()[0]
def entries():
    n = 0
    for p in glob.glob(tracefs + "/per_cpu/cpu*/stats"):
        with open(p) as f:
            n += sum(int(l.split()[1]) for l in f if l.startswith("entries:"))
    return n
def poll(cond, timeout):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
def go_line():
    # The go file holds the agent's pid (the measurement's nfsdtop).
    try:
        with open(go) as f:
            return f.read().endswith("\n")
    except OSError:
        return False
print("ready", flush=True)
if not poll(go_line, 600):
    sys.exit("no go")
with open(go) as f:
    agent = f.read().strip()
print("fio_wait=%s" % ("ok" if poll(lambda: entries() >= after, 120) else "timeout"))
mem("start")
print("t_start=%s" % up())
ok = failed = 0
used = set()
start = time.monotonic()
while ok + failed < most and time.monotonic() - start < secs:
    n = (ok + failed) % addrs + 1
    src = "fd99:99::1:%x" % n
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.bind((src, 0))
        s.connect(("fd99:99::1", 2049))
        ok += 1
        used.add(n)
    except OSError as e:
        failed += 1
        if failed <= 5:
            print("connect from %s: %s" % (src, e), file=sys.stderr)
    finally:
        s.close()
print("connections=%d" % ok)
print("failed=%d" % failed)
print("sources=%d" % len(used))
print("seconds=%.2f" % (time.monotonic() - start))
print("t_end=%s" % up())
mem("end")
EOF
  FLOOD_PID=$!
  wait_until 120 "the flood client to start" flood_ready
}
flood_ready() { grep -qx ready "$OUT/flood-client.txt" || pid_gone "$FLOOD_PID"; }
flood_go() { echo "$NFSDTOP_PID" >"$FLOOD_GO"; }

flood_during_load() {
  flood_go
  summary flood.alive_before "$(nfsdtop_gone && echo no || echo yes)"
  mark "flood: short-lived connections from $FLOOD_ADDRS addresses for ${FLOOD_SECS}s once fio runs"
  wait "$FLOOD_PID"
  summary flood.client_exit "$?"
  local k v
  while IFS='=' read -r k v; do
    case "$k" in connections | failed | sources | seconds | t_* | fio_wait | *_kb) summary "flood.$k" "$v" ;; esac
  done <"$OUT/flood-client.txt"
  summary flood.alive_after "$(nfsdtop_gone && echo no || echo yes)"
  mark "flood done: $(tr '\n' ' ' <"$OUT/flood-client.txt")"
}

if ! have_nfsdtop; then
  :
elif ! command -v python3 >/dev/null; then
  summary flood.error "no python3 in the image"
elif ! "$NFSDTOP" --max-peers 1 --help >/dev/null 2>&1; then
  summary flood.error "nfsdtop has no --max-peers flag"
elif ! flood_netns; then
  summary flood.error "cannot make the flood namespace"
elif ! flood_spawn || pid_gone "$FLOOD_PID"; then
  summary flood.error "the flood client did not start: $(tail -n 3 "$OUT/flood-client.err" | tr '\n' ' ')"
else
  summary flood.max_peers "$FLOOD_MAX_PEERS"
  summary flood.max_transports "$FLOOD_MAX_TRANSPORTS"
  DURING_LOAD=flood_during_load
  measure flood --max-peers "$FLOOD_MAX_PEERS" --max-transports "$FLOOD_MAX_TRANSPORTS"
  DURING_LOAD=
  summary flood.server_conns_after "$(nfs_conns)"
fi
