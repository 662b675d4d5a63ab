#!/usr/bin/env python3
"""Render nfsdtop's Prometheus rules and Grafana dashboards from the
monitoring mixin (../mixin, jsonnet) and say how long each alert takes to
fire. A wrapper around `jsonnet` (Debian package jsonnet): the mixin is
the one source; this script only picks parameters and writes files.

    generate.py rules [--profile NAME] [--set NAME=VALUE ...] [-o FILE]
        The recording and alerting rules as one YAML file, with the mixin's
        _config overlaid by mixin/profiles/NAME.libsonnet and each --set
        (NAME is a _config field: unfairRatio, unfairFor, nfsdtopSelector,
        ...). Default output: rules/nfsdtop.rules.yml (the shipped file).
    generate.py dashboards [-o DIR]
        The Grafana dashboards (grafana/*.json).
    generate.py timing [--profile NAME] [--set NAME=VALUE ...] [--json]
        When each alert goes pending and fires after its condition starts
        (the mixin's alertTiming; RUNBOOKS.md quotes the defaults').
    generate.py check
        Fail if the shipped files differ from what the mixin renders.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)  # dashboards/, or share/nfsdtop/ once installed
MIXIN = os.path.join(ROOT, "mixin")
RULES_OUT = os.path.join(ROOT, "rules", "nfsdtop.rules.yml")
GRAFANA_DIR = os.path.join(ROOT, "grafana")


def die(msg):
    print(f"generate.py: {msg}", file=sys.stderr)
    sys.exit(1)


def overrides(profile, sets):
    """Jsonnet code for render.jsonnet's `config`: the profile, then --set."""
    code = "{}"
    if profile and profile != "default":
        path = os.path.join(MIXIN, "profiles", f"{profile}.libsonnet")
        if not os.path.exists(path):
            names = sorted(n[: -len(".libsonnet")] for n in os.listdir(os.path.join(MIXIN, "profiles")))
            die(f"no profile {profile!r} ({path}); there are: default, {', '.join(names)}")
        code = f"(import {json.dumps('profiles/' + profile + '.libsonnet')})"
    fields = {}
    for s in sets or []:
        name, eq, value = s.partition("=")
        if not eq or not name:
            die(f"--set expects NAME=VALUE (a _config field of mixin/config.libsonnet), got {s!r}")
        try:  # numbers and null as such; anything else (5m, job="x") as a string
            v = json.loads(value)
            fields[name] = v if v is None or isinstance(v, (int, float)) else value
        except ValueError:
            fields[name] = value
    return f"{code} + {json.dumps(fields)}"


def render(profile=None, sets=None):
    if shutil.which("jsonnet") is None:
        die("jsonnet not found: install it (Debian/Ubuntu: apt-get install jsonnet; scripts/setup.sh does)")
    note = f"profile {profile or 'default'}" + (f" and --set {' '.join(sets)}" if sets else "")
    cmd = ["jsonnet", "-J", MIXIN, "--tla-code", f"config={overrides(profile, sets)}",
           "--tla-str", f"note={note}", os.path.join(MIXIN, "render.jsonnet")]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        first = p.stderr.strip().splitlines()[:1]
        die("the mixin does not evaluate: " + first[0] if first else f"jsonnet exited {p.returncode}")
    return json.loads(p.stdout)


# Keys in the order people read a rule file in; others after, sorted.
KEY_ORDER = ["name", "interval", "rules", "record", "alert", "expr", "for", "labels", "annotations",
             "severity", "summary", "description", "runbook_url"]


def yaml(value, indent=0):
    """The rules (dicts, lists, strings, numbers) as block YAML: strings
    double-quoted (JSON's quoting is YAML's), multi-line ones as | blocks."""
    pad = " " * indent
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: (KEY_ORDER.index(k) if k in KEY_ORDER else len(KEY_ORDER), k))
        out = []
        for k in keys:
            v = value[k]
            if isinstance(v, (dict, list)) and v:
                out.append(f"{pad}{k}:\n{yaml(v, indent + 2)}")
            elif isinstance(v, str) and "\n" in v.rstrip("\n"):
                body = "".join(f"{pad}  {line}\n" if line else "\n" for line in v.rstrip("\n").split("\n"))
                out.append(f"{pad}{k}: |{'' if v.endswith(chr(10)) else '-'}\n{body}".rstrip("\n"))
            else:
                out.append(f"{pad}{k}: {scalar(v)}")
        return "\n".join(out)
    if isinstance(value, list):
        items = []
        for v in value:
            text = yaml(v, indent + 2) if isinstance(v, (dict, list)) else pad + "  " + scalar(v)
            items.append(pad + "- " + text[indent + 2:])
        return "\n".join(items)
    return pad + scalar(value)


def scalar(v):
    if isinstance(v, str) and v.endswith("\n") and "\n" not in v[:-1]:
        v = v[:-1]  # a one-line expression: quoted, its block newline dropped
    return json.dumps(v)


def rules_text(out):
    return "".join(f"# {line}\n" for line in out["header"]) + yaml(out["rules"]) + "\n"


def dashboard_text(d):
    return json.dumps(d, indent=2) + "\n"


def write(path, text):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    print(f"wrote {os.path.relpath(path)}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("rules", "timing"):
        r = sub.add_parser(name)
        r.add_argument("--profile", default="default")
        r.add_argument("--set", action="append", metavar="NAME=VALUE")
        if name == "rules":
            r.add_argument("-o", "--output")
        else:
            r.add_argument("--json", action="store_true", help="the numbers (seconds), for scripts")
    d = sub.add_parser("dashboards")
    d.add_argument("-o", "--output-dir", default=GRAFANA_DIR)
    sub.add_parser("check")
    a = ap.parse_args()

    if a.cmd == "rules":
        write(a.output or RULES_OUT, rules_text(render(a.profile, a.set)))
    elif a.cmd == "timing":
        timing = render(a.profile, a.set)["timing"]
        if a.json:
            print(json.dumps(timing, indent=2, sort_keys=True))
        else:
            for alert, t in timing.items():
                print(f"{alert}: {t['figure']}")
    elif a.cmd == "dashboards":
        for name, d in render()["dashboards"].items():
            write(os.path.join(a.output_dir, name), dashboard_text(d))
    elif a.cmd == "check":
        out = render()
        want = {RULES_OUT: rules_text(out)}
        want.update({os.path.join(GRAFANA_DIR, n): dashboard_text(d) for n, d in out["dashboards"].items()})
        stale = []
        for path, text in want.items():
            try:
                with open(path) as f:
                    have = f.read()
            except FileNotFoundError:
                have = None
            if have != text:
                stale.append(os.path.relpath(path, os.path.dirname(ROOT)))
        if stale:
            die("shipped files differ from the mixin's output (run generate.py rules / dashboards): " + ", ".join(stale))
        print("the mixin evaluates and its output equals the shipped " + ", ".join(
            os.path.relpath(p, os.path.dirname(ROOT)) for p in want))


if __name__ == "__main__":
    main()
