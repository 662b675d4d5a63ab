#!/usr/bin/env bash
# dashboards/: Prometheus rules and Grafana dashboards, checked offline.
#   1. the monitoring mixin (dashboards/mixin) evaluates and its output
#      equals the shipped rules and dashboards;
#   2. promtool check rules (production and every profile);
#   3. promtool test rules dashboards/rules/tests/*.yml;
#   4. the tests can fail: mutated thresholds must make them fail;
#   5. dashboards: lint (uids, datasource variable, $__rate_interval, ...),
#      every PromQL expression parses (promtool), and a broken expression is
#      caught (negative control); every nfsdtop_* series the dashboards and
#      rules query is in the exporter's golden exposition
#      (exporter/src/metrics/testdata/exposition.om) with the labels they
#      select and group by, and a wrong name or label is caught;
#   6. the Grafana provisioning files are well-formed;
#   7. each runbook (and the book's table) quotes its alert's "fires after"
#      figure as the mixin computes it (alertTiming) for the example
#      prometheus.yml's intervals.
# Needs promtool (Debian package prometheus), jsonnet and python3
# (scripts/setup.sh).
set -uo pipefail
cd "$(dirname "$0")/../.."
D=dashboards
fails=0
ok()   { printf 'ok   %s\n' "$*"; }
fail() { printf 'FAIL %s\n' "$*"; fails=$((fails + 1)); }
need() { command -v "$1" >/dev/null || { echo "FAIL 20-dashboards: $1 not found ($2)"; exit 1; }; }
need promtool "apt-get install prometheus, or scripts/setup.sh"
need python3 "apt-get install python3"
need jsonnet "apt-get install jsonnet, or scripts/setup.sh"

tmp=$(mktemp -d /tmp/nfsdtop-dashboards.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

echo "== 20-dashboards: generated files, promtool rules and tests, dashboard expressions"

# 1. The mixin's output is what is shipped.
if out=$(python3 $D/tools/generate.py check 2>&1); then ok "$out"; else fail "$out"; fi

# 2. promtool check rules, for the committed file and the fast profile.
if out=$(promtool check rules $D/rules/nfsdtop.rules.yml 2>&1); then
  ok "promtool check rules $D/rules/nfsdtop.rules.yml: $(echo "$out" | grep -o '[0-9]* rules found')"
else fail "promtool check rules $D/rules/nfsdtop.rules.yml:"; echo "$out"; fi
for profile in $D/mixin/profiles/*.libsonnet; do
  p=$(basename "$profile" .libsonnet)
  if python3 $D/tools/generate.py rules --profile "$p" -o "$tmp/$p.rules.yml" 2>/dev/null &&
     out=$(promtool check rules "$tmp/$p.rules.yml" 2>&1); then
    ok "promtool check rules (profile $p)"
  else fail "profile $p does not generate valid rules:"; echo "${out:-}"; fi
done

# 3. Unit tests.
if out=$(promtool test rules $D/rules/tests/*.yml 2>&1); then
  ok "promtool test rules: $(ls $D/rules/tests/*.yml | wc -l) files, $(grep -c '^  - name:' $D/rules/tests/*.yml | awk -F: '{s+=$2} END {print s}') test groups pass"
else fail "promtool test rules:"; echo "$out"; fi

# 4. Mutations: each changed threshold must break at least one test,
# otherwise the tests do not pin that threshold down.
mkdir -p "$tmp/mut/tests"
cp $D/rules/tests/*.yml "$tmp/mut/tests/"
mutations=(
  "unfairRatio=0.2|the seed's flat-queue victim (ratio 0.22) must alert"
  "unfairRatio=0.99|round-robin (ratio 0.96) must stay quiet"
  "unfairBacklogged=0.1|a class backlogged 20% of the time must stay quiet"
  "unfairMinEntitledRate=0.1|a class entitled to 0.4 dispatch/s must stay quiet"
  "unfairFor=5m|a 10-minute dip must not fire"
  "starvedRatio=0.3|the served flat-queue victim is unfair, not starved"
  "starvedBacklogged=0.99|a class backlogged 95% of the time with no dispatches is starved"
  "waitP99Seconds=2|a p99 wait of 1.04s must alert"
  "waitP99Seconds=0.5|waits all under 0.524s must not alert (threshold on a bucket boundary)"
  "waitMinRate=0.01|a p99 from 0.07 waits/s must stay quiet"
  "eventsLostMin=100|40 lost events must alert"
  "nfsdtopSelector=job=\"other\"|AgentDown watches job nfsdtop"
)
for m in "${mutations[@]}"; do
  set_=${m%%|*}; why=${m#*|}
  if ! python3 $D/tools/generate.py rules --set "$set_" -o "$tmp/mut/nfsdtop.rules.yml" 2>"$tmp/gen.err"; then
    fail "mutation $set_ does not generate: $(cat "$tmp/gen.err")"; continue
  fi
  if promtool test rules "$tmp"/mut/tests/*.yml >/dev/null 2>&1; then
    fail "mutation $set_ survived: the tests do not check that $why"
  else ok "mutation $set_ is caught ($why)"; fi
done
# ...and the unmutated copy passes there, so the failures above are real.
python3 $D/tools/generate.py rules -o "$tmp/mut/nfsdtop.rules.yml" 2>/dev/null
if promtool test rules "$tmp"/mut/tests/*.yml >/dev/null 2>&1; then ok "unmutated rules pass in the mutation sandbox"
else fail "unmutated rules fail in the mutation sandbox"; fi

# Every alert has a runbook section its runbook_url points at.
if out=$(python3 - <<'EOF2' 2>&1
import re
rules = open("dashboards/rules/nfsdtop.rules.yml").read()
book = open("dashboards/RUNBOOKS.md").read()
alerts = re.findall(r"- alert: \"?(\w+)", rules)
urls = re.findall(r'runbook_url: "[^"#]*#([\w-]+)"', rules)
sections = {h.lower(): h for h in re.findall(r"^## (\w+)$", book, re.M)}
bad = [a for a in alerts if a.lower() not in sections]
bad += [f"url #{u}" for u in urls if u not in sections]
assert len(urls) == len(alerts), "an alert without runbook_url"
assert not bad, "no runbook section for: " + ", ".join(bad)
print(f"{len(alerts)} alerts, each with a runbook_url and a section in RUNBOOKS.md: " + ", ".join(alerts))
EOF2
); then ok "$out"; else fail "runbooks: $out"; fi

# 5. Dashboards.
if out=$(python3 $D/tools/check_dashboards.py lint 2>&1); then ok "${out#ok   }"; else fail "dashboard lint:"; echo "$out"; fi
if python3 $D/tools/check_dashboards.py rules -o "$tmp/dash.rules.yml" >/dev/null &&
   out=$(promtool check rules "$tmp/dash.rules.yml" 2>&1); then
  ok "every dashboard expression parses (promtool check rules: $(echo "$out" | grep -o '[0-9]* rules found'), \$__rate_interval=1m, \$class=.+ ...)"
else fail "dashboard expressions do not parse:"; echo "$out"; fi
# The overview opens on the victims: its first panel is "Below their fair
# share", in the first row.
if out=$(python3 - <<'EOF2' 2>&1
import json
d = json.load(open("dashboards/grafana/nfsdtop-overview.json"))
first = next(p for p in d["panels"] if p["type"] != "row")
assert first["title"] == "Below their fair share" and first["gridPos"]["y"] == 1, \
    f"the overview's first panel is {first['title']!r} at {first['gridPos']}"
print("the overview's first panel, in its first row, is 'Below their fair share'")
EOF2
); then ok "$out"; else fail "$out"; fi
# Negative control: an unbalanced parenthesis in one panel must be caught.
mkdir -p "$tmp/bad"
python3 - "$D/grafana/nfsdtop-overview.json" "$tmp/bad/bad.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
p = next(p for p in d["panels"] if p.get("targets"))
p["targets"][0]["expr"] = "sum(rate(nfsdtop_dispatches_total[$__rate_interval])"
json.dump(d, open(sys.argv[2], "w"))
EOF
if python3 $D/tools/check_dashboards.py --dir "$tmp/bad" rules -o "$tmp/bad.rules.yml" >/dev/null &&
   ! promtool check rules "$tmp/bad.rules.yml" >/dev/null 2>&1; then
  ok "negative control: a broken dashboard expression is rejected"
else fail "negative control: a broken dashboard expression was not rejected"; fi

# Names and labels against the exporter's exposition (the golden file its
# tests keep equal to what /metrics serves).
EXPO=exporter/src/metrics/testdata/exposition.om
if out=$(python3 $D/tools/check_dashboards.py names "$EXPO" --rules $D/rules/nfsdtop.rules.yml 2>&1); then
  ok "${out#ok   }"
else fail "dashboard/rule series not in $EXPO:"; echo "$out"; fi
# Negative controls: a misspelt series and a label the series lacks (the
# per-procedure panels) must each be caught, by that complaint.
for mut in "nfsdtop_peer_procedure_requests_total|nfsdtop_peer_procedures_total|is not in the exposition|a series name the exporter does not serve" \
           "instance, peer, procedure)|instance, peer, proc)|has no label 'proc' to group by|a label the series does not have"; do
  IFS='|' read -r from to want why <<<"$mut"
  rm -rf "$tmp/names" && mkdir -p "$tmp/names"
  if ! python3 - "$D/grafana/nfsdtop-drilldown.json" "$tmp/names/bad.json" "$from" "$to" <<'EOF'
import sys
text = open(sys.argv[1]).read()
assert sys.argv[3] in text, "mutation target not found: " + sys.argv[3]
open(sys.argv[2], "w").write(text.replace(sys.argv[3], sys.argv[4]))
EOF
  then fail "negative control: cannot mutate the drill-down ($from)"; continue; fi
  out=$(python3 $D/tools/check_dashboards.py --dir "$tmp/names" names "$EXPO" 2>&1)
  case $out in
    *"$want"*) ok "negative control: $why in a panel is caught ($want)";;
    *) fail "negative control: $why in a panel was not caught: $out";;
  esac
done

# 6. Provisioning files.
if python3 -c 'import yaml' 2>/dev/null; then
  if out=$(python3 - <<'EOF' 2>&1
import yaml
ds = yaml.safe_load(open("dashboards/grafana/provisioning/datasources/nfsdtop-prometheus.yaml"))
assert ds["apiVersion"] == 1 and ds["datasources"][0]["type"] == "prometheus", "datasource"
db = yaml.safe_load(open("dashboards/grafana/provisioning/dashboards/nfsdtop.yaml"))
p = db["providers"][0]
assert db["apiVersion"] == 1 and p["type"] == "file" and p["options"]["path"], "dashboard provider"
print("provisioning YAML: a prometheus datasource, a file dashboard provider at " + p["options"]["path"])
EOF
  ); then ok "$out"; else fail "provisioning YAML: $out"; fi
else
  echo "skip provisioning YAML structure (python3-yaml not installed)"
fi

# 7. Each runbook's "Fires after" is the mixin's figure for its alert.
if python3 $D/tools/generate.py timing --json >"$tmp/timing.json" 2>"$tmp/timing.err" &&
   out=$(python3 - "$tmp/timing.json" <<'EOF2' 2>&1
import json, re, sys
timing = json.load(open(sys.argv[1]))
book = open("dashboards/RUNBOOKS.md").read()
prom = open("dashboards/prometheus/prometheus.yml").read()
sections = dict(re.findall(r"^## (\w+)\n(.*?)(?=^## |\Z)", book, re.M | re.S))
bad = []
for alert, t in timing.items():
    said = re.findall(r"\*\*Fires after\.\*\* (.*?)\.\s", sections.get(alert, ""), re.S)
    said = [" ".join(s.split()) for s in said]
    if said != [t["figure"]]:
        bad.append(f"{alert}: the runbook says {said or 'nothing'}, the mixin computes {t['figure']!r}")
    # The alert tables of the book and the README quote the same span.
    span = t["figure"].split(" after the condition")[0]
    for doc in ("docs/book/src/dashboards.md", "dashboards/README.md"):
        row = [l for l in open(doc) if l.startswith(f"| {alert} |")]
        if len(row) != 1 or f"| {span} |" not in row[0]:
            bad.append(f"{alert}: {doc}'s alert table does not say {span!r}")
# The figures are for the example Prometheus's intervals.
for key in ("scrape_interval", "evaluation_interval"):
    m = re.search(rf"^  {key}: (\S+)$", prom, re.M)
    want = re.search(r"with (\S+) scrapes and (\S+) evaluations", next(iter(timing.values()))["figure"])
    if not m or m.group(1) != want.group(1 if key == "scrape_interval" else 2):
        bad.append(f"prometheus.yml {key} is {m and m.group(1)}, the figures assume {want.groups()}")
assert not bad, "; ".join(bad)
print(f"{len(timing)} runbooks, the book and the README quote the mixin's fires-after figure, e.g. NfsdtopUnfairShare: {timing['NfsdtopUnfairShare']['figure']}")
EOF2
); then ok "$out"; else fail "fires-after figures: ${out:-$(cat "$tmp/timing.err")}"; fi

if [ "$fails" -gt 0 ]; then echo "== 20-dashboards: $fails check(s) FAILED"; exit 1; fi
echo "== 20-dashboards: all checks passed"
