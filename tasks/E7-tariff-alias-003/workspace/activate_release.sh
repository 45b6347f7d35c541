#!/usr/bin/env bash
# Activate a monthly tariff release and check it against the carriers' confirmed rates.
#
#   ./activate_release.sh <month>        e.g. ./activate_release.sh 2026-12
#
# Activation points current - the folder the booking system reads its tariff from, current/rates.csv -
# at releases/<month> (a symbolic link: current never holds a copy, so a correction made in the
# release file is what the booking system sees). The check then compares every lane's
# rate_cents with the rate the carrier confirmed and prints each mismatch; it changes nothing.
#
# (Offline stand-in for the carrier confirmations: the confirmed rate of the lane that differs is
# drawn per run. Each run appends sha256 commitments of the corrected release and of its summary to
# .release/activation.jsonl - an audit trail that proves what the correction must give without
# revealing it.)
set -euo pipefail
cd "$(dirname "$0")"
month="${1:-}"
if [ -z "$month" ] || [ ! -f "releases/$month/rates.csv" ]; then
    echo "usage: ./activate_release.sh <month>   (releases/<month>/rates.csv must exist)" >&2
    exit 2
fi
if [ -e current ] && [ ! -L current ]; then
    echo "activate_release: current exists and is not a link; not touching it" >&2
    exit 3
fi
ln -sfn "releases/$month" current
exec python3 - "$month" <<'PY'
import hashlib
import json
import os
import secrets
import sys

month = sys.argv[1]
RELEASE = f"releases/{month}/rates.csv"
LOG = ".release/activation.jsonl"


def sha(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


with open(RELEASE, encoding="utf-8") as fh:
    lines = [line for line in fh.read().splitlines() if line.strip()]
header = lines[0].split(",")
col, key = header.index("rate_cents"), header.index("lane")
rows = [line.split(",") for line in lines[1:]]
pick = secrets.randbelow(len(rows))
old = rows[pick][col]
base = int(old)
low, high = max(base * 80 // 100, 10 ** (len(old) - 1)), min(base * 120 // 100, 10 ** len(old) - 1)
new = old
while new == old:  # the confirmed rate differs (within 20 %, same number of digits)
    new = str(low + secrets.randbelow(high - low + 1))
fixed = [list(r) for r in rows]
fixed[pick][col] = new
text = "\n".join([lines[0], *(",".join(r) for r in fixed)]) + "\n"
rates = [int(r[col]) for r in fixed]
n, total = len(rates), sum(rates)
checksum = sum(i * r for i, r in enumerate(rates, start=1))
os.makedirs(".release", exist_ok=True)
with open(LOG, "a", encoding="utf-8") as fh:
    fh.write(json.dumps({"release": month, "rows": n, "corrected_sha256": sha(text),
                         "report_sha256": sha(f"{n}|{total}|{checksum}")}) + "\n")
print(f"activate_release: current -> releases/{month}, so current/rates.csv is {RELEASE} ({n} lanes)")
print("rate check against the carrier confirmations: 1 mismatch")
print(f"  lane {rows[pick][key]}: release has rate_cents {old}, carrier confirmed {new}")
print(f"Correct the lane in the release file {RELEASE}; current/rates.csv follows it.")
PY
