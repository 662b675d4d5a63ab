#!/usr/bin/env bash
# Under `set -o pipefail` a reader that stops early (`grep -q`, `head`,
# `grep -m`) makes a writer that is still writing die of SIGPIPE, and the
# pipeline fails or passes by timing alone: a check that once failed CI on
# one machine and passed on another. Every tracked shell script that sets
# pipefail must therefore not pipe into such a reader; use
# `grep PATTERN >/dev/null`, which reads to the end. A negative control
# checks that such a pipe is caught. Offline, well under a second.
set -uo pipefail
cd "$(dirname "$0")/../.."
command -v python3 >/dev/null || { echo "FAIL 01-shell-pipes: python3 not found"; exit 1; }
check() {
  python3 - "$@" <<'PY'
import re, subprocess, sys

files = [f for f in subprocess.run(["git", "ls-files", "-z"], capture_output=True,
                                   text=True, check=True).stdout.split("\0")
         if f.endswith((".sh", ".bash"))]
texts = {f: open(f, encoding="utf-8").read() for f in files}
texts.update(dict(zip(sys.argv[1::2], sys.argv[2::2])))  # negative control
# (head in its own group: this line must not match itself)
early = re.compile(r"\|\s*(grep\s+(-\w*[qm]\w*|--quiet|--max-count)|(?:head)\b)")
bad = []
for name, text in texts.items():
    if "pipefail" not in text:
        continue
    for n, line in enumerate(text.splitlines(), 1):
        code = line.split(" #", 1)[0]
        if code.lstrip().startswith("#"):
            continue
        if early.search(code):
            bad.append(f"{name}:{n}: {line.strip()}")
for b in bad:
    print("early reader in a pipefail pipeline:", b)
print(f"{len(texts)} scripts scanned, {len(bad)} early readers")
sys.exit(1 if bad else 0)
PY
}
if out=$(check); then
  echo "ok   ${out##*$'\n'}"
else
  echo "$out"; echo "FAIL 01-shell-pipes: pipe into grep -q/head under pipefail (write grep PATTERN >/dev/null)"; exit 1
fi
p='|'  # kept apart so that this script does not match itself
neg=$(check made-up.sh "set -o pipefail
man x $p grep -q y
ls $p head -1" 2>&1) &&
  { echo "FAIL 01-shell-pipes: negative control passed"; exit 1; }
grep -q '2 early readers' <<<"$neg" || { echo "$neg"; echo "FAIL 01-shell-pipes: negative control"; exit 1; }
echo "ok   negative control: 2 early readers in a made-up script caught"
