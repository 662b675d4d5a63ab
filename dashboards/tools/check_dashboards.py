#!/usr/bin/env python3
"""Check nfsdtop's Grafana dashboards (stdlib only).

    check_dashboards.py lint
        Structure: stable UIDs, a datasource variable that every panel and
        query uses, unique panel ids, layout inside 24 columns, no unknown
        template variables, rate()/increase() windows from $__rate_interval.
    check_dashboards.py rules -o FILE [--var NAME=VALUE ...]
        Extract every PromQL expression (panel targets, annotations, the
        selectors inside label_values() of the variables), substitute the
        Grafana variables, and write them as recording rules to FILE, so
        `promtool check rules FILE` parses each one.
    check_dashboards.py expr UID TITLE [--ref A] [--var NAME=VALUE ...]
        Print one panel's expression with the variables substituted.
    check_dashboards.py names EXPOSITION [--rules FILE ...]
        Every raw nfsdtop_* series the dashboards (and the rule files) query
        is a sample name of EXPOSITION (the exporter's golden
        exporter/src/metrics/testdata/exposition.om), and every label they
        select or group it by is one of its labels (job and instance come
        from Prometheus).
    check_dashboards.py query URL [--var NAME=VALUE ...]
        Run each expression as an instant query against the Prometheus at
        URL; fail on errors and on empty results (except the few panels
        listed in MAY_BE_EMPTY, with the reason).
"""
import argparse
import glob
import json
import math
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
GRAFANA_DIR = os.path.join(os.path.dirname(HERE), "grafana")
EXPECTED_UIDS = {"nfsdtop-overview.json": "nfsdtop-overview", "nfsdtop-drilldown.json": "nfsdtop-drilldown"}

# What Grafana would substitute. Regex matchers (=~) take these verbatim.
DEFAULT_VARS = {
    "__rate_interval": "1m",
    "__interval": "15s",
    "__range": "1h",
    "job": "nfsdtop",
    "instance": ".+",
    "class": ".+",
    "peer": ".+",
}

# (dashboard uid, panel title or "annotation:NAME") -> why it may be empty.
MAY_BE_EMPTY = {
    ("nfsdtop-overview", "BPF CPU time"): "only with kernel.bpf_stats_enabled=1 on a live kernel",
    ("nfsdtop-overview", "Other RPC services"): "only where lockd or the NFS callback service take requests (a live kernel: the demo simulates nfsd alone)",
    ("nfsdtop-overview", "Other RPC services: fairness by peer"): "only where lockd or the NFS callback service take requests (a live kernel: the demo simulates nfsd alone)",
    ("nfsdtop-overview", "Threads that come and go"): "only where nfsd starts and stops threads (Linux 7.0+ with min-threads below threads; the demo's are fixed)",
    ("nfsdtop-overview", "annotation:nfsdtop alerts"): "no nfsdtop alert firing is the normal state",
    ("nfsdtop-drilldown", "NFSv4 operations per peer"): "only for NFSv4 clients with nfs4_ops = true (--nfs4-ops, opt-in for its cost); 30-alerts-live checks it on the NFSv4.2 demo client, not under $class=10.0.0.2",
    ("nfsdtop-drilldown", "annotation:nfsdtop alerts"): "no nfsdtop alert firing is the normal state",
}

# A raw series name (not part of a recording rule's level:name:operation)
# with its selector, and the labels of `by (...) (rate(name...` groupings.
SERIES = re.compile(r"(?<![\w:])(nfsdtop_\w+)(?![\w:])(\{[^}]*\})?")
MATCHER = re.compile(r"(\w+)\s*(?:=~|!~|!=|=)")
GROUPED = re.compile(r"\bby \(([^)]*)\) \((?:(?:rate|increase)\()?(nfsdtop_\w+)[{\[)]")
TARGET_LABELS = {"job", "instance"}
VAR_REF = re.compile(r"\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)")
WINDOW = re.compile(r"\[([^\]]+)\]")


def load(directory):
    out = []
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        with open(path) as f:
            try:
                out.append((os.path.basename(path), json.load(f)))
            except json.JSONDecodeError as e:
                sys.exit(f"{path}: not JSON: {e}")
    if not out:
        sys.exit(f"no dashboards in {directory}")
    return out


def panels_of(d):
    for p in d.get("panels", []):
        yield p
        yield from p.get("panels", [])  # collapsed rows


def expressions(name, d):
    """(where, expr) for every PromQL expression of a dashboard."""
    uid = d.get("uid")
    for p in panels_of(d):
        for t in p.get("targets", []):
            if "expr" in t:
                yield (uid, p.get("title", "?")), f"{name} panel {p.get('id')} {p.get('title')!r} {t.get('refId')}", t["expr"]
    for a in d.get("annotations", {}).get("list", []):
        if "expr" in a:
            yield (uid, f"annotation:{a.get('name')}"), f"{name} annotation {a.get('name')!r}", a["expr"]
    for v in d.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", q or "", re.S)
        if not m:
            m2 = re.fullmatch(r"\s*label_values\((\w+)\)\s*", q or "")
            if m2:
                continue  # label_values(label): no PromQL in it
            yield (uid, f"variable:{v['name']}"), f"{name} variable ${v['name']}", q
            continue
        yield (uid, f"variable:{v['name']}"), f"{name} variable ${v['name']} (label_values selector)", m.group(1)


def substitute(expr, values, where):
    def sub(m):
        var = m.group(1) or m.group(2) or m.group(3)
        if var not in values:
            raise SystemExit(f"{where}: unknown template variable ${var} in {expr!r}")
        return values[var]

    return VAR_REF.sub(sub, expr)


def lint(dashboards):
    errors = []

    def err(msg):
        errors.append(msg)

    uids = {}
    for name, d in dashboards:
        uid = d.get("uid")
        if name in EXPECTED_UIDS and uid != EXPECTED_UIDS[name]:
            err(f"{name}: uid {uid!r}, expected the stable {EXPECTED_UIDS[name]!r}")
        if not uid or not re.fullmatch(r"[a-zA-Z0-9_-]{1,40}", uid):
            err(f"{name}: uid {uid!r} is not a valid Grafana uid")
        if uid in uids:
            err(f"{name}: uid {uid} also used by {uids[uid]}")
        uids[uid] = name
        if d.get("id") not in (None,):
            err(f"{name}: has an 'id' (instance-specific; provisioned dashboards must not)")
        variables = {v["name"]: v for v in d.get("templating", {}).get("list", [])}
        ds = variables.get("datasource")
        if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
            err(f"{name}: no datasource variable of type prometheus")
        known = set(variables) | {"__rate_interval", "__interval", "__range"}
        ids = set()
        for p in panels_of(d):
            pid, title = p.get("id"), p.get("title")
            if pid in ids:
                err(f"{name}: panel id {pid} used twice")
            ids.add(pid)
            g = p.get("gridPos", {})
            if g.get("x", 0) + g.get("w", 0) > 24 or g.get("w", 0) <= 0:
                err(f"{name}: panel {title!r} does not fit in 24 columns: {g}")
            if p.get("type") == "row":
                continue
            if p.get("datasource") != {"type": "prometheus", "uid": "${datasource}"}:
                err(f"{name}: panel {title!r} does not use the $datasource variable")
            if not p.get("targets"):
                err(f"{name}: panel {title!r} has no queries")
            if not p.get("description"):
                err(f"{name}: panel {title!r} has no description")
            for t in p.get("targets", []):
                if t.get("datasource") != {"type": "prometheus", "uid": "${datasource}"}:
                    err(f"{name}: panel {title!r} query {t.get('refId')} does not use $datasource")
                expr = t.get("expr", "")
                for m in VAR_REF.finditer(expr):
                    var = m.group(1) or m.group(2) or m.group(3)
                    if var not in known:
                        err(f"{name}: panel {title!r}: unknown variable ${var}")
                # Range windows: $__rate_interval in rate()/increase() of
                # time series panels; instant tables may use fixed windows.
                if not t.get("instant"):
                    for w in WINDOW.findall(expr):
                        if w not in ("$__rate_interval", "$__range") and not w.startswith("$"):
                            err(f"{name}: panel {title!r}: fixed range window [{w}] (use $__rate_interval)")
                    if re.search(r"\b(rate|increase)\(", expr) and "$__rate_interval" not in expr \
                            and "$__range" not in expr:
                        err(f"{name}: panel {title!r}: rate() without $__rate_interval")
    if errors:
        for e in errors:
            print(f"FAIL {e}")
        sys.exit(1)
    n = sum(1 for name, d in dashboards for _ in expressions(name, d))
    print(f"ok   lint: {len(dashboards)} dashboards ({', '.join(sorted(uids))}), "
          f"{sum(1 for _, d in dashboards for _ in panels_of(d))} panels, {n} expressions")


def exposition_labels(path):
    """Sample name -> the label names it carries, from an exposition file.
    A histogram's own name stands for its native series (what Prometheus
    stores instead of _bucket/_count/_sum when it scrapes native
    histograms), with the labels of its _count."""
    out, histograms = {}, []
    with open(path) as f:
        for line in f:
            t = re.match(r"# TYPE (\w+) histogram\s", line)
            if t:
                histograms.append(t.group(1))
            m = re.match(r"(\w+)(\{[^}]*\})?\s", line)
            if m and not line.startswith("#"):
                out.setdefault(m.group(1), set()).update(re.findall(r"(\w+)=\"", m.group(2) or ""))
    if not out:
        sys.exit(f"{path}: no samples")
    for h in histograms:
        if h + "_count" in out:
            out.setdefault(h, set()).update(out[h + "_count"])
    return out


def names(dashboards, exposition, rule_files):
    have = exposition_labels(exposition)
    sources = [(where, expr) for name, d in dashboards for _, where, expr in expressions(name, d)]
    for path in rule_files or []:
        with open(path) as f:
            sources += [(f"{path}:{n}", line) for n, line in enumerate(f, 1)
                        if not line.lstrip().startswith("#")]
    errors, used = [], set()
    for where, expr in sources:
        for m in SERIES.finditer(expr):
            metric, selector = m.group(1), m.group(2) or ""
            used.add(metric)
            if metric not in have:
                errors.append(f"{where}: {metric} is not in the exposition")
                continue
            for label in set(MATCHER.findall(selector)) - TARGET_LABELS - have[metric]:
                errors.append(f"{where}: {metric} has no label {label!r} to select on")
        for by, metric in GROUPED.findall(expr):
            labels = {lb.strip() for lb in by.split(",") if lb.strip()}
            for label in labels - TARGET_LABELS - have.get(metric, labels):
                errors.append(f"{where}: {metric} has no label {label!r} to group by")
    if errors:
        for e in errors:
            print(f"FAIL {e}")
        sys.exit(1)
    print(f"ok   names: the {len(used)} nfsdtop_* series queried ({len(sources)} expressions/lines) "
          f"are in {os.path.basename(exposition)} with the labels used")


def parse_vars(pairs):
    values = dict(DEFAULT_VARS)
    for p in pairs or []:
        k, _, v = p.partition("=")
        values[k] = v
    return values


def to_rules(dashboards, out, values):
    lines = ["# Generated by dashboards/tools/check_dashboards.py: every PromQL",
             "# expression of the dashboards, variables substituted, for promtool.",
             "groups:", "  - name: dashboard-expressions", "    rules:"]
    n = 0
    for name, d in dashboards:
        for _, where, expr in expressions(name, d):
            n += 1
            e = substitute(expr, values, where)
            lines.append(f"      # {where}")
            lines.append(f"      - record: nfsdtop_dashboard_expr_{n}")
            lines.append("        expr: " + json.dumps(e))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"ok   extracted {n} expressions into {out}")


def query(dashboards, url, values):
    failures = 0
    n = 0
    for name, d in dashboards:
        for key, where, expr in expressions(name, d):
            n += 1
            e = substitute(expr, values, where)
            if key[1].startswith("variable:"):
                api = f"{url}/api/v1/series?" + urllib.parse.urlencode({"match[]": e})
            else:
                api = f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": e})
            try:
                with urllib.request.urlopen(api, timeout=10) as r:
                    body = json.load(r)
            except urllib.error.HTTPError as h:
                body = json.load(h)
            except Exception as x:  # noqa: BLE001
                print(f"FAIL {where}: {x}")
                failures += 1
                continue
            if body.get("status") != "success":
                print(f"FAIL {where}: {body.get('errorType')}: {body.get('error')}\n     {e}")
                failures += 1
                continue
            data = body["data"]
            result = data if isinstance(data, list) else data.get("result", [])
            if isinstance(result, list):
                vals = [s.get("value", [0, "1"])[1] for s in result]
                real = [v for v in vals if v not in ("NaN", "+Inf", "-Inf")]
            else:  # scalar
                real = [result[1]] if not math.isnan(float(result[1])) else []
            if not real:
                if key in MAY_BE_EMPTY:
                    print(f"ok   {where}: empty, allowed ({MAY_BE_EMPTY[key]})")
                    continue
                print(f"FAIL {where}: no data ({len(result)} series, values {vals[:4]})\n     {e}")
                failures += 1
            else:
                print(f"ok   {where}: {len(result)} series, e.g. {real[0]}")
    if failures:
        print(f"FAIL {failures} of {n} dashboard expressions returned errors or no data")
        sys.exit(1)
    print(f"ok   all {n} dashboard expressions return data")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=GRAFANA_DIR, help="directory of dashboard JSON files")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("lint")
    r = sub.add_parser("rules")
    r.add_argument("-o", "--output", required=True)
    r.add_argument("--var", action="append", metavar="NAME=VALUE")
    n = sub.add_parser("names")
    n.add_argument("exposition")
    n.add_argument("--rules", action="append", metavar="FILE")
    q = sub.add_parser("query")
    q.add_argument("url")
    q.add_argument("--var", action="append", metavar="NAME=VALUE")
    e = sub.add_parser("expr", help="print one panel's expression, variables substituted")
    e.add_argument("uid")
    e.add_argument("title")
    e.add_argument("--ref", default="A")
    e.add_argument("--var", action="append", metavar="NAME=VALUE")
    a = ap.parse_args()
    dashboards = load(a.dir)
    if a.cmd == "expr":
        for _, d in dashboards:
            for p in panels_of(d):
                if d.get("uid") == a.uid and p.get("title") == a.title:
                    for t in p.get("targets", []):
                        if t.get("refId") == a.ref:
                            print(substitute(t["expr"], parse_vars(a.var), a.title))
                            return
        sys.exit(f"no panel {a.title!r} with query {a.ref} in dashboard {a.uid}")
    if a.cmd == "lint":
        lint(dashboards)
    elif a.cmd == "names":
        names(dashboards, a.exposition, a.rules)
    elif a.cmd == "rules":
        to_rules(dashboards, a.output, parse_vars(a.var))
    else:
        query(dashboards, a.url.rstrip("/"), parse_vars(a.var))


if __name__ == "__main__":
    main()
