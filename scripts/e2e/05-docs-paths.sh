#!/usr/bin/env bash
# The documentation refers only to what the repository holds: every
# relative link and every path-like reference (`dir/file`, a link target,
# a path in a code block or a config comment) in README.md, ARCHITECTURE.md, BENCHMARKS.md,
# docs/, dashboards/, dist/, scripts/*/README.md and the example config must
# name a tracked file or directory (globs, {a,b} and placeholders such as
# NAME.env allowed), a link's #anchor a heading of its page; no tracked
# text file (code included) refers to the design notes users do not have
# (the shared directory, DESIGN.md and the like) nor to the placeholder
# domain that is "example", a dot and "invalid"; recordings are named
# .nfsdrec everywhere.
# Offline, a second or two. A negative control checks that a broken
# reference is caught.
set -uo pipefail
cd "$(dirname "$0")/../.."
command -v python3 >/dev/null || { echo "FAIL 05-docs-paths: python3 not found"; exit 1; }
check() {
  python3 - "$@" <<'PY'
import fnmatch, os, re, subprocess, sys

tracked = subprocess.run(["git", "ls-files", "-z"], capture_output=True, text=True, check=True).stdout.split("\0")
tracked = [t for t in tracked if t]
extra = sys.argv[1:]  # (path, text) pairs for the negative control
files = set(tracked)
dirs = {os.path.dirname(t) for t in tracked}
for t in list(dirs):
    while t:
        t = os.path.dirname(t)
        dirs.add(t)
dirs.discard("")

def exists(p):
    p = os.path.normpath(p)
    if p in files or p in dirs:
        return True
    if any(c in p for c in "*?["):
        return any(fnmatch.fnmatch(f, p) for f in files) or any(fnmatch.fnmatch(d, p) for d in dirs)
    return False

def expand(tok):
    m = re.search(r"\{([^{}]*)\}", tok)
    if not m:
        return [tok]
    return [x for alt in m.group(1).split(",") for x in expand(tok[:m.start()] + alt + tok[m.end():])]

DOCS = [f for f in tracked if (
    f in ("README.md", "ARCHITECTURE.md", "BENCHMARKS.md", "exporter/nfsdtopd.example.toml")
    or f.startswith(("docs/", "dashboards/", "dist/"))
    or (f.startswith("scripts/") and f.endswith((".md", ".sh", ".bash", ".toml")))
) and not f.endswith(".json")]
OUTSIDE = re.compile(r"((?<![\w./-])shared/[\w./-]*|(?<![\w./-])(?:DESIGN|KERNEL|VMTEST|TOOLCHAIN|BRIEF)\.md|example\.invalid)")
TOKEN = re.compile(r"(?<![\w./:$@-])((?:\.\./|\./)?[\w.*{},-]+(?:/[\w.*{},-]+)+/?)")
LINK = re.compile(r"\]\(([^)\s]+)\)")

def slugs(md_text):
    """GitHub's heading anchors."""
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.*)$", re.sub(r"```.*?```", "", md_text, flags=re.S), re.M)}

def expand_includes(path):
    """A book page's text with its {{#include FILE}} lines expanded (mdbook's)."""
    text = open(path).read()
    return re.sub(r"\{\{#include ([^}]+)\}\}",
                  lambda m: open(os.path.join(os.path.dirname(path), m.group(1))).read()
                  if os.path.isfile(os.path.join(os.path.dirname(path), m.group(1))) else "", text)

def check_anchor(path, target):
    """A link's #anchor must be a heading of the page it names."""
    page, _, anchor = target.partition("#")
    if not anchor:
        return
    dest = os.path.normpath(os.path.join(os.path.dirname(path), page)) if page else path
    if dest.endswith(".md") and os.path.isfile(dest) and anchor not in slugs(expand_includes(dest)):
        bad.append(f"{path}: link {target}: no heading #{anchor} in {dest}")

def candidates(text, is_md, path=""):
    if is_md:
        # Code spans, fenced blocks and link targets.
        spans = re.findall(r"```.*?```", text, re.S) + re.findall(r"`([^`\n]+)`", text)
        for t in LINK.findall(text):
            if not re.match(r"[a-z]+:", t):
                check_anchor(path, t)
            if not re.match(r"[a-z]+:", t) and not t.startswith("#"):
                yield t.split("#")[0], True
        for s in spans:
            for t in TOKEN.findall(s):
                yield t, False
    else:
        for t in TOKEN.findall(text):
            yield t, False

bad = []
# One recording extension everywhere: .nfsdrec (agent::record::EXTENSION).
OTHER_EXT = re.compile(r"[\w*-]\.(nfsrec|nfsdtop|nfsdtoprec)\b(?![\w(])")
PLACEHOLDER = re.compile(r"(NAME|FILE|PREFIX|DIR|HOST|SHELL|USER)(\.\w+)?$")

def scan(path, text):
    here = os.path.dirname(path)
    for n, line in enumerate(text.splitlines(), 1):
        for m in OUTSIDE.finditer(line):
            bad.append(f"{path}:{n}: refers to {m.group(1)}, which is not in the repository")
        if not path.endswith(".rs"):
            for m in OTHER_EXT.finditer(line):
                bad.append(f"{path}:{n}: a recording named .{m.group(1)}: recordings are .nfsdrec")
    if path.endswith((".sh", ".bash")):
        return  # scripts: their paths are the trees they build, not references
    for tok, is_link in candidates(text, path.endswith(".md"), path):
        tok = tok.rstrip(".,;:)")
        if tok.endswith("}}"):  # {{#include FILE}} in a book page
            tok = tok[:-2]
        if not tok or "://" in tok:
            continue
        for t in expand(tok):
            if any(PLACEHOLDER.match(c) for c in t.split("/")):
                continue
            first = t.split("/")[0]
            rel_here = os.path.normpath(os.path.join(here, t))
            # A path-like token is a reference when it starts at a tracked
            # directory (from the root or from the file's directory); links
            # always are.
            starts = first in ("..", ".") or first in dirs or os.path.normpath(os.path.join(here, first)) in dirs
            if not (is_link or starts):
                continue
            # Build output (target/, never tracked), as the book's build-dir.
            if any(os.path.normpath(q).startswith("target" + os.sep) for q in (t, os.path.join(here, t))):
                continue
            if not (exists(t) or exists(rel_here)):
                line = next((i for i, l in enumerate(text.splitlines(), 1) if tok in l), 0)
                bad.append(f"{path}:{line}: {t} does not exist in the repository")

# The rule on outside references holds for every tracked text file.
for f in tracked:
    if f == "scripts/e2e/05-docs-paths.sh" or f in DOCS or not f.endswith(
            (".rs", ".sh", ".bash", ".py", ".toml", ".yml", ".yaml", ".md", ".env", ".service")):
        continue
    try:
        text = open(f, encoding="utf-8").read()
    except (OSError, UnicodeDecodeError):
        continue
    for n, line in enumerate(text.splitlines(), 1):
        for m in OUTSIDE.finditer(line):
            bad.append(f"{f}:{n}: refers to {m.group(1)}, which is not in the repository")
        # Recordings in tests and code: file names in string literals.
        for m in re.finditer(r'"[^"\s]*\.(nfsrec|nfsdtop)"', line):
            bad.append(f"{f}:{n}: a recording named {m.group(0)}: recordings are .nfsdrec")
for f in DOCS:
    if f == "scripts/e2e/05-docs-paths.sh":
        continue
    try:
        scan(f, open(f, encoding="utf-8").read())
    except (OSError, UnicodeDecodeError) as e:
        bad.append(f"{f}: cannot read: {e}")
for i in range(0, len(extra), 2):
    scan(extra[i], extra[i + 1])
bad = sorted(set(bad))
for b in bad:
    print("     " + b)
print(f"{len(DOCS) + len(extra) // 2} files scanned, {len(bad)} broken references")
sys.exit(1 if bad else 0)
PY
}
fails=0
if out=$(check); then echo "ok   docs refer only to what the repository holds: $(echo "$out" | tail -1)"
else echo "$out"; echo "FAIL docs refer to paths that do not exist"; fails=1; fi
# Negative control: a made-up reference and an outside one must be caught.
if out=$(check docs/control.md 'See `dashboards/no-such-file.yml` and [x](../shared/DESIGN.md), or replay `old.nfsrec`; [y](json.md#no-such-section); https://example'.'invalid/nfsdtop.'); then
  echo "FAIL negative control: broken references were not caught"; fails=1
else
  n=$(echo "$out" | grep -c 'control.md')
  [ "$n" -ge 5 ] && echo "ok   negative control: $n broken references in a made-up page caught" ||
    { echo "$out"; echo "FAIL negative control caught $n of 5+"; fails=1; }
fi
exit $fails
