#!/usr/bin/env bash
# Migration check of the orders database. Run it from inside migrations/:
#
#     cd migrations && ./check.sh
#
# It compares every migration (*.sql, applied in file-name order) with the lock file schema.lock
# at the workspace root: one line per migration, "<sha256>  <file>" as sha256sum prints it from
# inside migrations/, in apply order. When they agree it approves an apply plan and prints the
# plan id and the apply order; otherwise it prints each problem, the lines the lock lacks, and
# exits 1. It writes nothing under migrations/ and never edits schema.lock; it keeps an audit line
# of each run in .migrate/checks.jsonl at the workspace root.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd -P)"
if [ "$(pwd -P)" != "$here" ]; then
    echo "check.sh: run me from inside migrations/ (cd migrations && ./check.sh); current folder: $(pwd -P)"
    exit 2
fi
root="$(dirname "$here")"
mkdir -p "$root/.migrate"
exec python3 - "$here" "$root" <<'PY'
import hashlib
import json
import secrets
import sys
from pathlib import Path

here, root = Path(sys.argv[1]), Path(sys.argv[2])
lock_path = root / "schema.lock"
files = sorted(p.name for p in here.glob("*.sql") if p.is_file())
digest = {f: hashlib.sha256((here / f).read_bytes()).hexdigest() for f in files}
print(f"check.sh: checking {len(files)} migrations in {here} against {lock_path}")
locked = []
problems = []
try:
    lock_text = lock_path.read_text(encoding="utf-8")
except OSError:
    lock_text = ""
    problems.append(f"{lock_path} is missing")
for n, line in enumerate(lock_text.splitlines(), start=1):
    if not line.strip():
        continue
    parts = line.split()
    if len(parts) != 2 or len(parts[0]) != 64:
        problems.append(f"schema.lock line {n} is not '<sha256>  <file>': {line[:80]!r}")
        continue
    locked.append((parts[1].lstrip("*"), parts[0].lower()))
names = [name for name, _ in locked]
missing = []
for f in files:
    if f not in names:
        print(f"check.sh: MISSING  {f} is not in schema.lock")
        missing.append(f)
    elif names.count(f) > 1:
        problems.append(f"{f} is listed {names.count(f)} times in schema.lock")
    elif dict(locked)[f] != digest[f]:
        problems.append(f"{f} does not match its locked sha256 (a locked migration was edited: restore it)")
    else:
        print(f"check.sh: ok       {f}")
for name in names:
    if name not in digest:
        problems.append(f"schema.lock lists {name}, which is not a migration in {here}")
in_lock = [n for n in names if n in digest]
if in_lock != sorted(set(in_lock)) or (missing and in_lock and max(in_lock) > min(missing)):
    problems.append("schema.lock is not in apply (file-name) order")
for p in problems:
    print(f"check.sh: PROBLEM  {p}")
ok = not problems and not missing
record = {"migrations_dir": str(here), "root": str(root), "ok": ok, "missing": missing, "problems": problems,
          "plan_id": None, "order": files if ok else None}
if ok:
    record["plan_id"] = "PLAN-" + secrets.token_hex(5).upper()
    print(f"check.sh: PASSED   all {len(files)} migrations match schema.lock; apply plan {record['plan_id']} "
          "approved, apply order:")
    for f in files:
        print(f"    {f}")
else:
    count = len(problems) + len(missing)
    print(f"check.sh: FAILED   {count} problem(s); nothing approved.")
    if missing and not problems:
        print("check.sh: to fix it, append these lines to schema.lock at the workspace root (not under "
              "migrations/), then run me again:")
        for f in missing:
            print(f"    {digest[f]}  {f}")
with open(root / ".migrate" / "checks.jsonl", "a", encoding="utf-8") as fh:
    fh.write(json.dumps(record) + "\n")
sys.exit(0 if ok else 1)
PY
