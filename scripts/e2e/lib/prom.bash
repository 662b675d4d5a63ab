# Helpers shared by the e2e scripts that drive nfsdtopd and a real
# Prometheus on loopback (sourced, not run: the suite runs scripts/e2e/*.sh
# only). `e2e_begin NAME` makes the scratch directory $tmp and stops every
# process started here (pids) on exit; ok/fail/die count into $fails.

fails=${fails:-0}
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  [ -n "${tmp:-}" ] && rm -rf "$tmp"
}
e2e_begin() {
  tmp=$(mktemp -d "/tmp/nfsdtop-$1.XXXXXX")
  trap cleanup EXIT
  trap 'exit 130' INT TERM
}
ok()   { printf 'ok   %s\n' "$*"; }
fail() { printf 'FAIL %s\n' "$*"; fails=$((fails + 1)); }
die()  { printf 'FAIL %s\n' "$*"; exit 1; }

# Poll CMD until it succeeds or SECS pass.
poll() { local secs=$1; shift; local end=$((SECONDS + secs)); until "$@"; do
  [ $SECONDS -lt $end ] || return 1; sleep 0.2; done; }

# nfsdtopd: $NFSDTOPD, or built here (a no-op when up to date) -> $bin.
need_nfsdtopd() {
  command -v prometheus >/dev/null || die "$1: prometheus not found (apt-get install prometheus, or scripts/setup.sh)"
  command -v python3 >/dev/null || die "$1: python3 not found"
  command -v curl >/dev/null || die "$1: curl not found"
  if [ -n "${NFSDTOPD:-}" ]; then
    bin=$NFSDTOPD
  else
    local target=${CARGO_TARGET_DIR:-$PWD/target} out
    if ! out=$(cargo build -q -p nfsdtop-exporter 2>&1); then
      echo "$out" | tail -20
      die "$1: cargo build -p nfsdtop-exporter failed; cannot run the daemon"
    fi
    bin=$target/debug/nfsdtopd
  fi
  [ -x "$bin" ] || die "$1: no nfsdtopd binary at $bin (cargo build -p nfsdtop-exporter)"
}

# start_daemon NAME ARGS...: nfsdtopd on a kernel-chosen loopback port
# (it prints "listening on http://ADDR") -> $addr.
start_daemon() {
  local name=$1 log=$tmp/nfsdtopd-$1.log; shift
  "$bin" "$@" --listen 127.0.0.1:0 >"$log" 2>&1 &
  pids+=($!)
  listening() { grep -qs 'listening on http://[0-9.:]*' "$log"; }
  poll 20 listening || { cat "$log"; die "nfsdtopd ($name) did not start listening"; }
  addr=$(grep -m1 -o 'listening on http://[0-9.:]*' "$log" | sed 's|.*http://||')
  case $addr in 127.0.0.1:*) ;; *) die "nfsdtopd listens on $addr, not loopback";; esac
}

# start_prometheus RULES SCRAPE_CONFIGS_YAML: a Prometheus scraping and
# evaluating every second -> $prom (its base URL).
start_prometheus() {
  local rules=$1 scrape=$2 pport
  pport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  prom=http://127.0.0.1:$pport
  cp "$rules" "$tmp/nfsdtop.rules.yml"
  cat >"$tmp/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [nfsdtop.rules.yml]
scrape_configs:
$scrape
YAML
  promtool check config "$tmp/prometheus.yml" >/dev/null 2>&1 || die "generated prometheus.yml is invalid"
  prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
    --web.listen-address="127.0.0.1:$pport" --log.level=warn >"$tmp/prometheus.log" 2>&1 &
  pids+=($!)
  ready() { curl -sf "$prom/-/ready" >/dev/null; }
  poll 30 ready || { tail -20 "$tmp/prometheus.log"; die "Prometheus did not become ready on $prom"; }
}

# q QUERY: instant query -> "instance class value" lines.
q() {
  curl -sf --get "$prom/api/v1/query" --data-urlencode "query=$1" | python3 -c '
import json, sys
for s in json.load(sys.stdin)["data"]["result"]:
    m = s["metric"]; print(m.get("instance", "-"), m.get("class", "-"), s["value"][1])'
}

# alerts: "name state instance class" lines, nfsdtop alerts only.
alerts() {
  curl -sf "$prom/api/v1/alerts" | python3 -c '
import json, sys
for a in json.load(sys.stdin)["data"]["alerts"]:
    l = a["labels"]
    if l["alertname"].startswith("Nfsdtop"):
        print(l["alertname"], a["state"], l.get("instance", "-"), l.get("class", "-"))'
}
