#!/usr/bin/env bash
# `cargo xtask install` lays out binaries, man pages, completions, the unit,
# the config, and the operator files (rules and their generator,
# dashboards, runbooks, Prometheus and Grafana provisioning examples, docs,
# the book as HTML where mdbook is there);
# the installed unit verifies; `promtool check rules` passes on the
# installed rules; every runbook_url resolves to an installed runbook
# section, or to the --runbook-base URL. The .deb of the same tree:
# 16-deb.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cargo xtask install --debug --prefix "$tmp/usr" >/dev/null
fail() { echo "install check failed: $*"; exit 1; }
for f in bin/nfsdtop bin/nfsdtopd share/man/man1/nfsdtop.1 share/man/man1/nfsdtop-record.1 \
         share/man/man1/nfsdtop-doctor.1 share/man/man1/nfsdtop-whatif.1 share/man/man8/nfsdtopd.8 \
         share/bash-completion/completions/nfsdtop share/zsh/site-functions/_nfsdtopd \
         share/fish/vendor_completions.d/nfsdtop.fish lib/systemd/system/nfsdtopd.service \
         etc/nfsdtop/nfsdtopd.toml share/nfsdtop/rules/nfsdtop.rules.yml \
         share/nfsdtop/mixin/mixin.libsonnet share/nfsdtop/mixin/config.libsonnet \
         share/nfsdtop/mixin/render.jsonnet share/nfsdtop/mixin/profiles/e2e-fast.libsonnet \
         share/nfsdtop/tools/generate.py share/nfsdtop/runbooks/RUNBOOKS.md \
         share/nfsdtop/grafana/nfsdtop-overview.json share/nfsdtop/grafana/nfsdtop-drilldown.json \
         share/nfsdtop/grafana/provisioning/dashboards/nfsdtop.yaml \
         share/nfsdtop/grafana/provisioning/datasources/nfsdtop-prometheus.yaml \
         share/nfsdtop/prometheus/prometheus.yml share/doc/nfsdtop/README.md \
         share/doc/nfsdtop/docs/json.md share/doc/nfsdtop/docs/metrics.md; do
  [ -s "$tmp/usr/$f" ] || fail "missing or empty: $f"
done
S=$tmp/usr/share/nfsdtop
# The book, as HTML, where mdbook is there (scripts/setup.sh installs it).
if command -v mdbook >/dev/null || [ -x "$HOME/.cargo/bin/mdbook" ]; then
  for f in index.html concepts.html reference/cli.html reference/json.html; do
    [ -s "$tmp/usr/share/doc/nfsdtop/html/$f" ] || fail "the book lacks html/$f"
  done
  grep -q "](/.*/share/doc/nfsdtop/html/concepts.html)" "$tmp/usr/share/doc/nfsdtop/README.md" ||
    fail "the installed README does not link the installed book"
fi
out=$(promtool check rules "$S/rules/nfsdtop.rules.yml" 2>&1) || fail "promtool check rules on the installed rules: $out"
# The Prometheus example loads the installed rules from where they are.
out=$(promtool check config "$S/prometheus/prometheus.yml" 2>&1) || fail "promtool check config on the installed example: $out"
grep -q "^  - $S/rules/nfsdtop.rules.yml\$" "$S/prometheus/prometheus.yml" || fail "prometheus.yml does not load $S/rules/nfsdtop.rules.yml"
# Grafana's file provider points at the installed dashboards.
grep -q "path: $S/grafana\$" "$S/grafana/provisioning/dashboards/nfsdtop.yaml" || fail "dashboard provider path"
# runbook_url (rules) and the dashboards' runbook link -> file + section.
check_links() {  # ROOT_URL: every link must start with it; file:// ones must resolve
  python3 - "$1" "$S" <<'PY' || fail "runbook links: see above"
import json, re, sys, os
base, share = sys.argv[1], sys.argv[2]
rules = open(f"{share}/rules/nfsdtop.rules.yml").read()
urls = re.findall(r'runbook_url: "([^"]*)"', rules)
for d in ("nfsdtop-overview.json", "nfsdtop-drilldown.json"):
    for l in json.load(open(f"{share}/grafana/{d}")).get("links", []):
        if "RUNBOOKS" in l.get("url", ""):
            urls.append(l["url"])
assert len(urls) >= 6, f"only {len(urls)} runbook links"
bad = [u for u in urls if not u.startswith(base + "/RUNBOOKS.md")]
assert not bad, f"links not under {base}: {bad}"
if base.startswith("file://"):
    for u in urls:
        path, _, anchor = u[len("file://"):].partition("#")
        assert os.path.isfile(path), f"{u}: no such file"
        if anchor:
            heads = [re.sub(r"[^a-z0-9 -]", "", h.strip().lower()).replace(" ", "-")
                     for h in re.findall(r"^#+ (.*)$", open(path).read(), re.M)]
            assert anchor in heads, f"{u}: no section #{anchor} in {path}"
print(f"{len(urls)} runbook links resolve under {base}")
PY
}
check_links "file://$S/runbooks"
# The installed generator renders site thresholds, with the installed links.
python3 "$S/tools/generate.py" rules --set unfairRatio=0.4 -o "$tmp/site.rules.yml" 2>/dev/null ||
  fail "the installed generate.py cannot render rules from the installed mixin"
out=$(promtool check rules "$tmp/site.rules.yml" 2>&1) || fail "promtool check rules on generated site rules: $out"
grep -q "< 0.4\$" "$tmp/site.rules.yml" || fail "unfairRatio=0.4 not in the generated rules"
grep -q "runbook_url: \"file://$S/runbooks/RUNBOOKS.md#nfsdtopunfairshare\"" "$tmp/site.rules.yml" ||
  fail "generated site rules do not link the installed runbooks"
# Links inside the installed docs lead to installed files.
python3 - "$tmp/usr/share" <<'PY' || fail "installed docs: see above"
import os, re, sys
share = sys.argv[1]
n, bad = 0, []
for top in ("nfsdtop", "doc/nfsdtop"):
    for d, _, fs in os.walk(os.path.join(share, top)):
        for f in fs:
            if not f.endswith(".md"):
                continue
            p = os.path.join(d, f)
            for t in re.findall(r"\]\(([^)\s]+)\)", open(p).read()):
                if re.match(r"[a-z]+:", t) or t.startswith("#"):
                    continue
                n += 1
                if not t.startswith("/") or not os.path.isfile(t.split("#")[0]):
                    bad.append(f"{p}: {t}")
assert n > 10 and not bad, f"{n} links, broken: {bad}"
print(f"{n} links in the installed docs lead to installed files")
PY
grep -q "^Documentation=man:nfsdtopd(8) file://$S/runbooks/RUNBOOKS.md\$" \
  "$tmp/usr/lib/systemd/system/nfsdtopd.service" || fail "unit Documentation= not the installed man page and runbooks"
! grep -rq 'example[.]invalid' "$S" "$tmp/usr/lib/systemd/system/nfsdtopd.service" "$tmp/usr/share/man" ||
  fail "a placeholder host (example, dot, invalid) in the installed files"
# Published runbooks: --runbook-base.
cargo xtask install --debug --prefix "$tmp/usr" --runbook-base https://runbooks.example.org/nfsdtop/ >/dev/null
check_links "https://runbooks.example.org/nfsdtop"
"$tmp/usr/bin/nfsdtop" --version | grep '^nfsdtop ' >/dev/null || fail "nfsdtop --version"
grep -q "ExecStart=$tmp/usr/bin/nfsdtopd --config $tmp/usr/etc/nfsdtop/nfsdtopd.toml" \
  "$tmp/usr/lib/systemd/system/nfsdtopd.service" || fail "unit paths not rewritten"
out=$(systemd-analyze verify --man=no "$tmp/usr/lib/systemd/system/nfsdtopd.service" 2>&1) || fail "$out"
[ -z "$out" ] || fail "systemd-analyze: $out"
man -l "$tmp/usr/share/man/man8/nfsdtopd.8" 2>/dev/null | grep -- '--listen' >/dev/null || \
  grep -q -- 'listen' "$tmp/usr/share/man/man8/nfsdtopd.8" || fail "nfsdtopd.8 lacks --listen"
# The man pages say more than the options: keys, columns, examples, exit codes.
M=$tmp/usr/share/man
for sec in KEYS COLUMNS "BATCH OUTPUT" EXAMPLES "EXIT STATUS"; do
  grep -q "^\.SH $sec\$" "$M/man1/nfsdtop.1" || fail "nfsdtop.1 lacks $sec"
done
for sec in ENDPOINTS "CONFIGURATION FILE" SIGNALS FILES EXAMPLES "EXIT STATUS"; do
  grep -q "^\.SH $sec\$" "$M/man8/nfsdtopd.8" || fail "nfsdtopd.8 lacks $sec"
done
for p in nfsdtop-record nfsdtop-doctor; do
  grep -q '^\.SH EXIT STATUS$' "$M/man1/$p.1" || fail "$p.1 lacks EXIT STATUS"
done
out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$M/man1/nfsdtop.1" "$M/man8/nfsdtopd.8" 2>&1 >/dev/null) || true
[ -z "$out" ] || fail "man pages render with warnings: $out"
# The installed config is the one nfsdtopd itself accepts.
"$tmp/usr/bin/nfsdtopd" --config "$tmp/usr/etc/nfsdtop/nfsdtopd.toml" --demo seed-k4 \
  --listen 127.0.0.1:0 > /dev/null 2> "$tmp/d.err" & pid=$!
for _ in $(seq 100); do grep -q 'listening on' "$tmp/d.err" && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
grep -q 'listening on' "$tmp/d.err" || { cat "$tmp/d.err"; fail "nfsdtopd did not start with the installed config"; }
kill $pid; wait $pid 2>/dev/null || true

echo "install: ok"
