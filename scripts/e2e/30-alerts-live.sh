#!/usr/bin/env bash
# The alert rules and dashboards against the real thing, on loopback only:
#   two nfsdtopd demo daemons running the series' K=16 experiment (a client
#   with 2 connections, 10.0.0.2, against one with 16, 10.0.0.3), one with
#   today's flat queue and one with round-robin across peers, a third
#   running the demo's NFSv4.2 client (burst: fd00::9 with its COMPOUNDs'
#   operations), and a real Prometheus scraping all three every second
#   with the rules generated from the e2e-fast profile (production
#   thresholds, test-sized windows).
# Checks, with deadlines (no fixed sleeps):
#   - NfsdtopUnfairShare goes pending/firing for class 10.0.0.2 under flat,
#     and the time from the class's first sample to pending, and from
#     pending to firing, are within what the mixin's alertTiming computes
#     for these rules (the computation RUNBOOKS.md's figures come from);
#   - over the same window nothing fires under rr-peer, and no other nfsdtop
#     alert is active for either daemon;
#   - the recorded fairness ratios match the series (flat ~0.22, rr ~1);
#   - the per-procedure panels (overview and drill-down) return the demo's
#     procedures and add up to the requests and thread time they break down;
#   - the drill-down's NFSv4 operations panel returns the NFSv4.2 client's
#     SEQUENCE and PUTFH, as many a second as its COMPOUNDs (one each);
#   - every dashboard expression returns data from this Prometheus.
# Bounded to about 2 minutes; cleans up the processes it started.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
. scripts/e2e/lib/prom.bash
e2e_begin alerts-live
need_nfsdtopd 30-alerts-live

echo "== 30-alerts-live: nfsdtopd demo (seed-k16, flat vs rr-peer) -> Prometheus -> alerts and dashboards"

# The bound covers the test itself, not the build above.
START=$SECONDS
DEADLINE=$((SECONDS + 110))

# NFSDTOP_E2E_FLAT_POLICY=rr-peer is a negative control: with no flat
# queue the UnfairShare check must FAIL.
flat_policy=${NFSDTOP_E2E_FLAT_POLICY:-flat}
start_daemon "$flat_policy" --demo seed-k16 --policy "$flat_policy"; flat=$addr
start_daemon rr-peer --demo seed-k16 --policy rr-peer; rr=$addr
start_daemon nfs4 --demo burst; v4=$addr
ok "nfsdtopd --demo seed-k16 --policy $flat_policy on $flat, --policy rr-peer on $rr, --demo burst on $v4"

# Prometheus with the e2e-fast rules.
python3 dashboards/tools/generate.py rules --profile e2e-fast -o "$tmp/e2e-fast.rules.yml" 2>/dev/null ||
  die "cannot generate the e2e-fast rules"
start_prometheus "$tmp/e2e-fast.rules.yml" "  - job_name: nfsdtop
    static_configs:
      - targets: ['$flat']
        labels: {policy: flat}
      - targets: ['$rr']
        labels: {policy: rr-peer}
      - targets: ['$v4']
        labels: {policy: nfs4}"
ok "Prometheus on $prom: scrape and rule evaluation every 1s, rules from profile e2e-fast (rateWindow 10s, unfairFor 5s)"

all_up() { [ "$(q 'up{job="nfsdtop"} == 1' | wc -l)" -eq 3 ]; }
poll 30 all_up || die "Prometheus does not see all three nfsdtopd targets up"
# AgentDown may be pending from before the first scrape; it must clear.
no_agent_down() { ! alerts | grep '^NfsdtopAgentDown' >/dev/null; }
poll 15 no_agent_down || die "NfsdtopAgentDown stays active although both targets are up"
ok "all three targets up, NfsdtopAgentDown inactive"

# Observation window: until UnfairShare fires for 10.0.0.2 under flat, and
# at least 20s so quiet alerts had their chance to go pending.
window_start=$SECONDS
flat_state=""
unexpected=""
while :; do
  a=$(alerts) || a=""
  s=$(echo "$a" | awk -v i="$flat" '$1=="NfsdtopUnfairShare" && $3==i && $4=="10.0.0.2" {print $2}')
  [ -n "$s" ] && { [ "$flat_state" = firing ] || flat_state=$s; }
  while read -r name state inst cls; do
    [ -z "$name" ] && continue
    [ "$name" = NfsdtopUnfairShare ] && [ "$inst" = "$flat" ] && [ "$cls" = 10.0.0.2 ] && continue
    # The NFSv4 daemon is here for its operations, not its alerts.
    [ "$inst" = "$v4" ] && continue
    case " $unexpected " in *" $name/$state/$inst/$cls "*) ;; *) unexpected="$unexpected $name/$state/$inst/$cls";; esac
  done <<<"$a"
  if [ "$flat_state" = firing ] && [ $((SECONDS - window_start)) -ge 20 ]; then break; fi
  [ $SECONDS -lt $((DEADLINE - 25)) ] || break
  sleep 0.5
done
span=$((SECONDS - window_start))
case $flat_state in
  firing)  ok "NfsdtopUnfairShare firing for class 10.0.0.2 under flat (observed over ${span}s)";;
  pending) ok "NfsdtopUnfairShare pending (not yet firing) for class 10.0.0.2 under flat within ${span}s";;
  *)       fail "NfsdtopUnfairShare never became active for class 10.0.0.2 under flat within ${span}s";;
esac
if [ -z "$unexpected" ]; then
  ok "no other nfsdtop alert active over the same ${span}s: rr-peer quiet, 10.0.0.3 quiet, no starvation/wait/lost/down"
else
  fail "unexpected nfsdtop alerts over the window (name/state/instance/class):$unexpected"
fi

# How long it took, by Prometheus's own timestamps (scrapes and rule
# evaluations are scheduled, so a loaded machine does not shift them):
# the first sample of the class's backlogged counter (the condition, true
# from the demo's start, is there from the first scrape), the first
# pending and the first firing sample of ALERTS, against the mixin's
# alertTiming for the same rules and intervals. One evaluation interval of
# slack on top, for an evaluation Prometheus skips when it falls behind.
if [ "$flat_state" = firing ]; then
  python3 dashboards/tools/generate.py timing --profile e2e-fast --json >"$tmp/timing.json" ||
    die "cannot compute the e2e-fast alert timing"
  res=$(python3 - "$prom" "$flat" "$tmp/timing.json" <<'PY'
import json, sys, urllib.parse, urllib.request
prom, inst, timing = sys.argv[1:]
t = json.load(open(timing))["NfsdtopUnfairShare"]
slack = 1.0  # one evaluation interval of the e2e-fast profile
def first(sel):
    u = prom + "/api/v1/query?" + urllib.parse.urlencode({"query": sel + "[5m]"})
    r = json.load(urllib.request.urlopen(u, timeout=10))["data"]["result"]
    return min((float(v[0]) for s in r for v in s["values"]), default=None)
labels = f'instance="{inst}",class="10.0.0.2"'
start = first(f"nfsdtop_class_backlogged_seconds_total{{{labels}}}")
pending = first(f'ALERTS{{alertname="NfsdtopUnfairShare",alertstate="pending",{labels}}}')
firing = first(f'ALERTS{{alertname="NfsdtopUnfairShare",alertstate="firing",{labels}}}')
if None in (start, pending, firing):
    print(f"MISSING first sample {start}, pending {pending}, firing {firing}")
    sys.exit()
to_pending, to_firing = pending - start, firing - pending
p, f = t["pending"], t["firing"]
fire_hi = f["max"] - p["max"]  # `for`, then up to one evaluation
ok = p["min"] <= to_pending <= p["max"] + slack and t["for"] <= to_firing <= fire_hi + slack
print(("" if ok else "MISMATCH ") +
      f"first sample -> pending {to_pending:.1f}s (computed {p['min']:g}..{p['max']:g}s), "
      f"pending -> firing {to_firing:.1f}s (computed {t['for']:g}..{fire_hi:g}s), "
      f"first sample -> firing {firing - start:.1f}s (computed {f['min']:g}..{f['max']:g}s)")
PY
)
  case $res in
    MISMATCH*|MISSING*|"") fail "NfsdtopUnfairShare timing: ${res:-no output}";;
    *) ok "NfsdtopUnfairShare timing as computed: $res";;
  esac
fi

# The numbers behind it.
check_ratio() {  # instance class lo hi what
  local v
  v=$(q "class:nfsdtop_fairness:ratio_rate10s{instance=\"$1\",class=\"$2\"}" | awk '{print $3}')
  if [ -n "$v" ] && python3 -c "import sys; sys.exit(not ($3 <= float('$v') <= $4))"; then
    ok "fairness ratio of $2 under $5: $(printf '%.3f' "$v") (expected $3..$4)"
  else fail "fairness ratio of $2 under $5: '${v:-none}', expected $3..$4"; fi
}
check_ratio "$flat" 10.0.0.2 0.12 0.35 "flat (series: share 11.1% of a fair 50% -> 0.22)"
check_ratio "$flat" 10.0.0.3 1.6  1.9  "flat"
check_ratio "$rr"   10.0.0.2 0.85 1.15 "rr-peer (series: 47.9% of 50% -> 0.96)"
check_ratio "$rr"   10.0.0.3 0.85 1.15 "rr-peer"
w=$(q "class:nfsdtop_queue_wait_seconds:p99_rate10s" | sort)
echo "     p99 queue wait (rate10s): $(echo "$w" | awk -v f="$flat" -v r="$rr" '$3!="NaN" {p=($1==f)?"flat":($1==r)?"rr-peer":$1; printf "%s %s=%.1fms  ", p, $2, $3*1000}')"
j=$(q "instance:nfsdtop_fairness:jain_rate10s" | sort)
echo "     Jain's index (rate10s): $(echo "$j" | awk -v f="$flat" -v r="$rr" '{p=($1==f)?"flat":($1==r)?"rr-peer":$1; printf "%s=%.3f  ", p, $3}')"

# The dashboards compute what the recording rules compute: same window,
# same instant, so the values must agree (within 2%: the rules were
# evaluated up to a second earlier).
same() {  # dashboard panel title, recording rule
  local title=$1 rule=$2 dexpr res
  dexpr=$(python3 dashboards/tools/check_dashboards.py expr nfsdtop-overview "$title" \
          --var __rate_interval=10s --var class=.+) || { fail "no panel '$title'"; return; }
  res=$(python3 - "$prom" "$dexpr" "$rule" <<'PY'
import json, sys, urllib.parse, urllib.request
prom, dexpr, rule = sys.argv[1:]
def q(e):
    u = prom + "/api/v1/query?" + urllib.parse.urlencode({"query": e})
    r = json.load(urllib.request.urlopen(u, timeout=10))["data"]["result"]
    return {(s["metric"].get("instance"), s["metric"].get("class")): float(s["value"][1]) for s in r}
d, r = q(dexpr), q(rule)
keys = sorted(k for k in r if k in d)
bad = [k for k in keys if abs(d[k] - r[k]) > 0.02 * max(abs(r[k]), 1e-9)]
if not keys or bad:
    print("MISMATCH", {k: (d.get(k), r.get(k)) for k in (bad or list(r) or list(d))})
else:
    k = keys[0]
    print(f"{len(keys)} series agree, e.g. {k[1] or k[0]}: {d[k]:.3f} vs {r[k]:.3f}")
PY
)
  case $res in MISMATCH*|"") fail "dashboard '$title' vs $rule: ${res:-no output}";;
    *) ok "dashboard '$title' = $rule ($res)";; esac
}
same "Fairness ratio per class" "class:nfsdtop_fairness:ratio_rate10s"
same "Share of dispatches per class" "class:nfsdtop_dispatch_share:ratio_rate10s"
same "Jain's index" "instance:nfsdtop_fairness:jain_rate10s"

# The per-procedure panels: the demo's clients send READ or WRITE, every
# 8th request GETATTR and every 32nd ACCESS. Each panel must return those,
# and add up to what it breaks down, at one instant: the requests per
# procedure sum to the requests of the labelled classes (of the peer), and
# their request-weighted mean execution time is those requests' thread
# seconds per request (within 2%).
procedures() {  # uid, requests panel, mean panel, totals' prefix, totals' selector, expected peer or "", vars...
  local uid=$1 reqp=$2 meanp=$3 prefix=$4 sel=$5 peer=$6 rexpr mexpr res; shift 6
  rexpr=$(python3 dashboards/tools/check_dashboards.py expr "$uid" "$reqp" --var __rate_interval=10s "$@") &&
  mexpr=$(python3 dashboards/tools/check_dashboards.py expr "$uid" "$meanp" --var __rate_interval=10s "$@") ||
    { fail "no panels '$reqp' and '$meanp' in $uid"; return; }
  res=$(python3 - "$prom" "$rexpr" "$mexpr" "$prefix" "$sel" "$peer" "$flat" "$rr" <<'PY'
import json, sys, time, urllib.parse, urllib.request
prom, rexpr, mexpr, prefix, sel, peer, flat, rr = sys.argv[1:]
at = time.time() - 1
def q(e):
    u = prom + "/api/v1/query?" + urllib.parse.urlencode({"query": e, "time": at})
    return json.load(urllib.request.urlopen(u, timeout=10))["data"]["result"]
def key(s):
    return tuple(sorted(s["metric"].items()))
reqs, mean_rows = q(rexpr), q(mexpr)
means = {key(s): float(s["value"][1]) for s in mean_rows}
total = {s["metric"]["instance"]: float(s["value"][1]) for s in
         q(f"sum by (instance) (rate(nfsdtop_{prefix}_requests_total{{{sel}}}[10s]))")}
thread = {s["metric"]["instance"]: float(s["value"][1]) for s in
          q(f"sum by (instance) (rate(nfsdtop_{prefix}_execution_seconds_total{{{sel}}}[10s]))")}
bad, said = [], []
for rows in (reqs, mean_rows) if peer else ():
    if {s["metric"].get("peer") for s in rows} != {peer}:
        bad.append(f"peers {sorted({s['metric'].get('peer') for s in rows})}, not just {peer}")
for inst, policy in ((flat, "flat"), (rr, "rr-peer")):
    rows = [(s["metric"]["procedure"], float(s["value"][1]), means.get(key(s))) for s in reqs
            if s["metric"]["instance"] == inst]
    procs = {p for p, _, _ in rows}
    missing = {"GETATTR", "ACCESS"} - procs
    if not {"READ", "WRITE"} & procs:
        missing.add("READ or WRITE")
    if missing:
        bad.append(f"{inst}: no {', '.join(sorted(missing))} (has {sorted(procs)})")
        continue
    if any(m is None or not m > 0 for _, r, m in rows if r > 0):
        bad.append(f"{inst}: a procedure with requests but no mean execution time: {rows}")
        continue
    n = sum(r for _, r, _ in rows)
    mean = sum(r * m for _, r, m in rows if r > 0) / n
    want_n, want_mean = total.get(inst, 0), thread.get(inst, 0) / max(total.get(inst, 0), 1e-9)
    if abs(n - want_n) > 0.02 * want_n or abs(mean - want_mean) > 0.02 * want_mean or not n > 0:
        bad.append(f"{inst}: {n:.2f} req/s, mean {mean * 1e3:.2f} ms; "
                   f"{prefix} totals {want_n:.2f} req/s, {want_mean * 1e3:.2f} ms")
        continue
    said.append(f"{policy}: " + " ".join(f"{p} {r:.1f}" for p, r, _ in sorted(rows)) + f" = {n:.1f} req/s, mean {mean * 1e3:.1f} ms")
print("MISMATCH " + "; ".join(bad) if bad else "; ".join(said))
PY
)
  case $res in MISMATCH*|"") fail "$uid '$reqp' / '$meanp': ${res:-no output}";;
    *) ok "$uid '$reqp' / '$meanp' = nfsdtop_${prefix}_{requests,execution_seconds}_total{$sel} ($res)";; esac
}
procedures nfsdtop-overview "Requests per procedure" "Mean execution time per procedure" \
  class 'class!="other"' "" --var class=.+
# Every class of seed-k16 is one peer: $class=.+ leaves only $peer to pick
# 10.0.0.2 out (the dashboards-return-data check below runs $class=10.0.0.2).
procedures nfsdtop-drilldown "Requests per peer and procedure" "Mean execution time per peer and procedure" \
  peer 'peer="10.0.0.2"' 10.0.0.2 --var class=.+ --var peer=10.0.0.2

# The NFSv4 operations panel, for the NFSv4.2 client of the burst demo:
# each of its requests is one COMPOUND of SEQUENCE, PUTFH and more, so
# SEQUENCE and PUTFH each come at its rate of requests (within 2%).
nfs4_ops() {
  local expr res
  expr=$(python3 dashboards/tools/check_dashboards.py expr nfsdtop-drilldown "NFSv4 operations per peer" \
         --var __rate_interval=10s --var class=.+ --var peer=.+) || { fail "no panel 'NFSv4 operations per peer'"; return; }
  res=$(python3 - "$prom" "$expr" "$v4" <<'PY'
import json, sys, time, urllib.parse, urllib.request
prom, expr, inst = sys.argv[1:]
at = time.time() - 1
def q(e):
    u = prom + "/api/v1/query?" + urllib.parse.urlencode({"query": e, "time": at})
    return json.load(urllib.request.urlopen(u, timeout=10))["data"]["result"]
ops = {(s["metric"].get("peer"), s["metric"].get("operation")): float(s["value"][1])
       for s in q(expr) if s["metric"].get("instance") == inst}
reqs = sum(float(s["value"][1]) for s in
           q(f'rate(nfsdtop_peer_requests_total{{instance="{inst}",peer="fd00::9"}}[10s])'))
bad = [f"{op}: {ops.get(('fd00::9', op))} /s against {reqs:.2f} COMPOUNDs/s"
       for op in ("SEQUENCE", "PUTFH")
       if not reqs > 0 or abs(ops.get(("fd00::9", op), 0) - reqs) > 0.02 * reqs]
others = sorted({p for p, _ in ops} - {"fd00::9"})
if others:
    bad.append(f"operations from peers that sent no COMPOUND: {others}")
if bad:
    print("MISMATCH " + "; ".join(bad))
else:
    print(f"fd00::9: {len(ops)} operations, SEQUENCE {ops[('fd00::9', 'SEQUENCE')]:.2f}/s = "
          f"PUTFH {ops[('fd00::9', 'PUTFH')]:.2f}/s = {reqs:.2f} COMPOUNDs/s")
PY
)
  case $res in MISMATCH*|"") fail "nfsdtop-drilldown 'NFSv4 operations per peer': ${res:-no output}";;
    *) ok "nfsdtop-drilldown 'NFSv4 operations per peer' ($res)";; esac
}
nfs4_ops

# Dashboards against the live data: every expression must return data.
if out=$(python3 dashboards/tools/check_dashboards.py query "$prom" \
      --var __rate_interval=10s --var __range=30s --var class=10.0.0.2 --var instance=.+ 2>&1); then
  ok "$(echo "$out" | tail -1 | sed 's/^ok   //') (\$class=10.0.0.2, \$__rate_interval=10s)"
  echo "$out" | grep 'allowed' | sed 's/^/     /'
else
  echo "$out" | grep -v '^ok' | sed 's/^/     /'
  fail "dashboard expressions against live Prometheus"
fi

echo "== 30-alerts-live: took $((SECONDS - START))s"
if [ "$fails" -gt 0 ]; then echo "== 30-alerts-live: $fails check(s) FAILED"; exit 1; fi
echo "== 30-alerts-live: all checks passed"
