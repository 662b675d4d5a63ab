#!/usr/bin/env bash
# The book (docs/book) builds with mdbook, and no link in it or in
# README.md is broken: every relative link of the rendered book leads to a
# page it has, and every #anchor to an id on that page; README.md's links
# lead to files of the repository, and their anchors to headings (a link
# into the book's sources, to an id of the rendered page). Offline:
# http(s) links are checked for their form only. The PromQL the book shows
# parses (promtool). The command lines shown that end by themselves run
# and succeed. README.md stays under 200 lines and reaches --demo
# within its first 40. A negative control builds a copy of the book with
# a broken link and a broken anchor, and checks a made-up README, and
# both must be caught.
set -uo pipefail
cd "$(dirname "$0")/../.."
fail() { echo "FAIL 06-book: $*"; exit 1; }
MDBOOK=$(command -v mdbook || echo "$HOME/.cargo/bin/mdbook")
[ -x "$MDBOOK" ] || fail "mdbook not found (scripts/setup.sh installs it)"
command -v python3 >/dev/null || fail "python3 not found"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

out=$("$MDBOOK" build docs/book -d "$tmp/book" 2>&1) || { echo "$out"; fail "mdbook build failed"; }
! echo "$out" | grep -E 'WARN|ERROR' || fail "mdbook build warned (above)"

check() {  # BOOK_DIR README [README...]: prints the broken links, exits 1 if any
  python3 - "$@" <<'PY'
import os, re, sys, html
from urllib.parse import urlsplit, unquote

book, readmes = sys.argv[1], sys.argv[2:]
bad, n = [], 0
SKIP = {"print.html", "404.html", "toc.html"}

def main_part(text):
    i, j = text.find("<main>"), text.find("</main>")
    return text[i:j] if i >= 0 and j > i else text

def ids(path, cache={}):
    if path not in cache:
        cache[path] = set(re.findall(r'\bid="([^"]+)"', open(path, encoding="utf-8").read()))
    return cache[path]

def external_ok(url):
    u = urlsplit(url)
    if u.scheme in ("http", "https"):
        return bool(u.netloc) and " " not in url and "." in u.netloc.split(":")[0]
    return u.scheme in ("mailto", "file", "man")

pages = []
for d, _, fs in os.walk(book):
    for f in fs:
        if f.endswith(".html") and f not in SKIP:
            pages.append(os.path.join(d, f))
if len(pages) < 10:
    bad.append(f"{book}: only {len(pages)} pages")
for p in sorted(pages):
    text = main_part(open(p, encoding="utf-8").read())
    rel = os.path.relpath(p, book)
    if "{{#include" in text:
        bad.append(f"{rel}: an include was not expanded")
    for href in re.findall(r'\bhref="([^"]*)"', text):
        href = html.unescape(href)
        n += 1
        if re.match(r"[a-z][a-z0-9+.-]*:", href):
            if not external_ok(href):
                bad.append(f"{rel}: malformed link {href}")
            continue
        page, _, anchor = href.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(p), unquote(page))) if page else p
        if os.path.isdir(dest):
            dest = os.path.join(dest, "index.html")
        if not os.path.isfile(dest):
            bad.append(f"{rel}: link {href}: no page {os.path.relpath(dest, book)}")
        elif anchor and dest.endswith(".html") and unquote(anchor) not in ids(dest):
            bad.append(f"{rel}: link {href}: no #{anchor} on {os.path.relpath(dest, book)}")

def slugs(md):
    """GitHub's heading anchors."""
    md = re.sub(r"```.*?```", "", md, flags=re.S)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.*)$", md, re.M)}

for r in readmes:
    text = open(r, encoding="utf-8").read()
    base = os.path.dirname(os.path.abspath(r))
    root = os.getcwd()
    for target in re.findall(r"\]\(([^)\s]+)\)", re.sub(r"```.*?```", "", text, flags=re.S)):
        n += 1
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            if not external_ok(target):
                bad.append(f"{r}: malformed link {target}")
            continue
        page, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(base, page)) if page else os.path.abspath(r)
        if not os.path.exists(dest):
            bad.append(f"{r}: link {target}: no {os.path.relpath(dest, root)}")
            continue
        if not anchor:
            continue
        src = os.path.join(root, "docs/book/src") + os.sep
        if dest.startswith(src) and dest.endswith(".md"):
            rendered = os.path.join(book, dest[len(src):-3] + ".html")
            if not os.path.isfile(rendered) or anchor not in ids(rendered):
                bad.append(f"{r}: link {target}: no #{anchor} on the rendered page")
        elif dest.endswith(".md") and anchor not in slugs(open(dest, encoding="utf-8").read()):
            bad.append(f"{r}: link {target}: no heading #{anchor} in {os.path.relpath(dest, root)}")
for b in bad:
    print("     " + b)
print(f"{len(pages)} pages and {len(readmes)} READMEs, {n} links, {len(bad)} broken")
sys.exit(1 if bad else 0)
PY
}

fails=0
if out=$(check "$tmp/book" README.md); then echo "ok   book builds, no broken link: $(echo "$out" | tail -1)"
else echo "$out"; echo "FAIL 06-book: broken links"; fails=1; fi

# The PromQL blocks parse: each one a recording rule for promtool.
if command -v promtool >/dev/null; then
  python3 - "$tmp/promql.yml" <<'PY'
import glob, re, sys, json
exprs = []
for f in sorted(glob.glob("docs/book/src/**/*.md", recursive=True)) + ["README.md"]:
    for block in re.findall(r"```promql\n(.*?)```", open(f).read(), re.S):
        for e in re.split(r"\n\s*\n", block):
            e = "\n".join(l for l in e.splitlines() if not l.lstrip().startswith("#")).strip()
            if e:
                exprs.append(e)
with open(sys.argv[1], "w") as out:
    out.write("groups:\n  - name: book\n    rules:\n")
    for i, e in enumerate(exprs):
        out.write(f"      - record: book:expr{i}\n        expr: {json.dumps(e)}\n")

PY
  if out=$(promtool check rules "$tmp/promql.yml" 2>&1); then echo "ok   the book's PromQL parses ($(grep -c 'record:' "$tmp/promql.yml") expressions)"
  else echo "$out"; echo "FAIL 06-book: PromQL in the book does not parse"; fails=1; fi
else
  echo "FAIL 06-book: promtool not found (scripts/setup.sh installs it)"; fails=1
fi

# The command lines that end by themselves (batch output of the demo or a
# replay, record, whatif) run as shown, in a scratch directory holding the
# files they name (today.nfsdrec, classes.txt), with this tree's binaries;
# each must exit 0. The rest (the UI, nfsdtopd, this host's nfsd) have
# their flags checked by tui/tests/docs.rs.
cargo build -q -p nfsdtop || fail "cargo build -p nfsdtop"
run_dir=$tmp/run; mkdir -p "$run_dir"
python3 - > "$tmp/commands" <<'PY'
import glob, re
def lines(text):
    for block in re.findall(r"```(?:sh|console)\n(.*?)```", text, re.S):
        cur = ""
        for l in block.splitlines():
            l = re.sub(r"^\$ ", "", l.strip())
            cur = (cur + " " + l).strip() if cur else l
            if cur.endswith("\\"):
                cur = cur[:-1].rstrip(); continue
            if cur.endswith("|"):
                continue
            yield re.sub(r"\s+#\s.*$", "", cur); cur = ""
for f in ["README.md"] + sorted(glob.glob("docs/*.md")) + sorted(glob.glob("docs/book/src/**/*.md", recursive=True)):
    for l in lines(open(f).read()):
        w = l.split()
        if not w or w[0] != "nfsdtop":
            continue
        sub = w[1] if len(w) > 1 and not w[1].startswith("-") else None
        source = "--demo" in w or "--replay" in w
        finite = (sub == "whatif"
                  or (sub == "record" and source and ("--duration" in w or "--count" in w))
                  or (sub is None and "-b" in w and ("--replay" in w or ("--demo" in w and "-n" in w))))
        if finite:
            print(f"{f}\t{l}")
PY
NFSDTOP_BIN=$(pwd)/target/debug
( cd "$run_dir" && PATH=$NFSDTOP_BIN:$PATH nfsdtop record --demo seed-k16 --speed 0 --duration 5 -o today.nfsdrec 2>/dev/null &&
  printf '10.1.0.0/16 movers\n10.2.0.0/24 customers per-peer\n' > classes.txt ) || fail "cannot make the files the commands name"
ran=0; bad=0
while IFS=$'\t' read -r file line; do
  ran=$((ran + 1))
  if ! out=$(cd "$run_dir" && PATH=$NFSDTOP_BIN:$PATH timeout 120 bash -o pipefail -c "$line" 2>&1); then
    echo "     $file: $line"; echo "$out" | tail -3 | sed 's/^/       /'; bad=$((bad + 1))
  fi
done < "$tmp/commands"
if [ "$bad" -eq 0 ] && [ "$ran" -ge 8 ]; then echo "ok   $ran command lines of the docs run as shown"
else echo "FAIL 06-book: $bad of $ran command lines of the docs failed (8 or more expected to run)"; fails=1; fi

# README: short, and the demo early.
lines=$(wc -l < README.md)
demo=$(grep -n -m 1 -- '--demo' README.md | cut -d: -f1)
if [ "$lines" -lt 200 ] && [ -n "$demo" ] && [ "$demo" -le 40 ]; then
  echo "ok   README.md: $lines lines, --demo first on line $demo"
else echo "FAIL 06-book: README.md has $lines lines (under 200 wanted), --demo first on line ${demo:-none} (40 at most)"; fails=1; fi

# Negative control: a copy of the book with a broken link and a broken
# anchor, and a README with both, must fail.
mkdir -p "$tmp/neg"
cp -r docs "$tmp/neg/docs"; mkdir -p "$tmp/neg/exporter"; cp exporter/nfsdtopd.example.toml "$tmp/neg/exporter/"
printf '\nSee [nowhere](no-such-page.md) and [there](concepts.md#no-such-section).\n' >> "$tmp/neg/docs/book/src/introduction.md"
printf '# x\n\n[a](docs/book/src/no-such.md), [b](docs/book/src/concepts.md#no-such-section), [c](https://).\n' > "$tmp/neg/README.md"
if ! "$MDBOOK" build "$tmp/neg/docs/book" -d "$tmp/neg/book" >/dev/null 2>&1; then
  echo "FAIL 06-book: negative control: the copy did not build"; fails=1
elif out=$(cd "$tmp/neg" && check "$tmp/neg/book" README.md); then
  echo "$out"; echo "FAIL 06-book: negative control: broken links were not caught"; fails=1
else
  n=$(echo "$out" | grep -c 'introduction.html\|README.md:')
  [ "$n" -ge 5 ] && echo "ok   negative control: $n broken links caught in a made-up book and README" ||
    { echo "$out"; echo "FAIL 06-book: negative control caught $n of 5+"; fails=1; }
fi
exit $fails
