#!/usr/bin/env bash
# An alert for every starved client on a server with more clients than the
# top K: nfsdtopd --demo scripts/e2e/starved-1000.toml (1,000 backlogged
# clients under the flat queue, five with one connection against 995 with
# four: ratio 0.25 against 1.0) with --top-k 50 --top-k-classes 50, and a
# real Prometheus scraping it every second with the e2e-fast rules
# (production thresholds, test-sized windows). Checks, with deadlines:
#   - NfsdtopUnfairShare fires for each of the five starved clients by name
#     (class 10.2.0.1 ... 10.2.0.5), although 950 classes are folded;
#   - no nfsdtop alert fires for any other class over the same window;
#   - nfsdtop_unfair_entities{kind="class"} is 5, and /api/v1/unfair lists
#     exactly the five, each with its series.
# Bounded to about 2 minutes; cleans up the processes it started.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/e2e/lib/prom.bash
e2e_begin unfair-many
need_nfsdtopd 31-unfair-many

echo "== 31-unfair-many: 1,000 clients, 5 starved, top K 50 -> Prometheus -> an alert per starved client"
START=$SECONDS
DEADLINE=$((SECONDS + 110))
starved="10.2.0.1 10.2.0.2 10.2.0.3 10.2.0.4 10.2.0.5"

start_daemon many --demo scripts/e2e/starved-1000.toml --top-k 50 --top-k-classes 50
d=$addr
ok "nfsdtopd --demo scripts/e2e/starved-1000.toml --top-k 50 --top-k-classes 50 on $d"
python3 dashboards/tools/generate.py rules --profile e2e-fast -o "$tmp/e2e-fast.rules.yml" 2>/dev/null ||
  die "cannot generate the e2e-fast rules"
start_prometheus "$tmp/e2e-fast.rules.yml" "  - job_name: nfsdtop
    static_configs:
      - targets: ['$d']"
ok "Prometheus on $prom (1s scrapes, e2e-fast rules)"
up() { [ "$(q 'up{job="nfsdtop"} == 1' | wc -l)" -eq 1 ]; }
poll 30 up || die "Prometheus does not see nfsdtopd up"
no_agent_down() { ! alerts | grep '^NfsdtopAgentDown' >/dev/null; }
poll 15 no_agent_down || die "NfsdtopAgentDown stays active although the target is up"

# Until every starved client's alert fires, then 15s more for any false
# alert to show up.
firing_since=""
unexpected=""
while :; do
  a=$(alerts) || a=""
  n=0
  for c in $starved; do
    echo "$a" | awk -v c="$c" '$1=="NfsdtopUnfairShare" && $2=="firing" && $4==c {f=1} END {exit !f}' && n=$((n + 1))
  done
  while read -r name state inst cls; do
    [ -z "$name" ] && continue
    [ "$name" = NfsdtopUnfairShare ] && case " $starved " in *" $cls "*) continue;; esac
    case " $unexpected " in *" $name/$state/$cls "*) ;; *) unexpected="$unexpected $name/$state/$cls";; esac
  done <<<"$a"
  if [ "$n" -eq 5 ]; then
    [ -n "$firing_since" ] || firing_since=$SECONDS
    [ $((SECONDS - firing_since)) -lt 15 ] || break
  fi
  [ $SECONDS -lt $((DEADLINE - 10)) ] || break
  sleep 0.5
done
if [ -n "$firing_since" ]; then
  ok "NfsdtopUnfairShare firing for each starved client: $starved ($((firing_since - START))s after start)"
else
  fail "NfsdtopUnfairShare fired for $n of the 5 starved clients within the deadline:"
  grep -m10 UnfairShare <<<"$a" | sed 's/^/     /'
  for c in $starved; do echo "     $c: series $(q "nfsdtop_class_dispatches_total{class=\"$c\"}" | wc -l)"; done
fi
if [ -z "$unexpected" ]; then
  ok "no other nfsdtop alert over the window (995 fair clients quiet)"
else
  fail "unexpected nfsdtop alerts (name/state/class):$(echo "$unexpected" | cut -c1-600)"
fi

folded=$(q 'nfsdtop_classes_folded' | awk '{print $3}')
[ "$folded" = 950 ] && ok "950 classes folded into class=\"other\" (1,000 clients, 50 labels)" ||
  fail "nfsdtop_classes_folded is '${folded:-none}', expected 950"
n=$(q 'nfsdtop_unfair_entities{kind="class"}' | awk '{print $3}')
[ "$n" = 5 ] && ok "nfsdtop_unfair_entities{kind=\"class\"} = 5" ||
  fail "nfsdtop_unfair_entities{kind=\"class\"} is '${n:-none}', expected 5"
if out=$(curl -sf "http://$d/api/v1/unfair?group=class" | python3 -c '
import json, sys
u = json.load(sys.stdin)
rows = u["classes"]
names = sorted(r["name"] for r in rows)
assert u["counts"]["classes"] == len(rows), u["counts"]
assert all(r["series"] == r["name"] for r in rows), [r for r in rows if r["series"] != r["name"]]
assert all(0.15 < r["ratio"] < 0.35 for r in rows), [r["ratio"] for r in rows]
print(" ".join(names))
') && [ "$out" = "$starved" ]; then
  ok "/api/v1/unfair?group=class lists exactly the starved five, each with its series: $out"
else
  fail "/api/v1/unfair?group=class: '${out:-no answer}', expected $starved"
fi

echo "== 31-unfair-many: took $((SECONDS - START))s"
if [ "$fails" -gt 0 ]; then echo "== 31-unfair-many: $fails check(s) FAILED"; exit 1; fi
echo "== 31-unfair-many: all checks passed"
