#!/usr/bin/env bash
# Month-end close, step 2: build the period's reports on the posted closing journal and publish them.
#   ./build_reports.sh <period> <posting id>    e.g. ./build_reports.sh 2026-11 JP-XXXXXXXX
# Safe to re-run: each run rebuilds reports/<period>/ from scratch and publishes the pack again
# (the ledger keeps the latest pack of a period). Takes a while: the statements are re-rendered.
cd "$(dirname "$0")" || exit 2
exec python3 - "$@" <<'PY'
import csv
import hashlib
import json
import re
import sys
import time
import urllib.request
from decimal import Decimal, InvalidOperation
from pathlib import Path

RUNNING = Path(".reports-building")   # present while a build renders (see the task card)
RENDER_S = 5


def die(message, code):
    RUNNING.unlink(missing_ok=True)
    print(f"build_reports.sh: {message}", file=sys.stderr)
    sys.exit(code)


def money(value):
    return f"{value:.2f}"


args = sys.argv[1:]
if (len(args) != 2 or not re.fullmatch(r"\d{4}-(0[1-9]|1[0-2])", args[0])
        or not re.fullmatch(r"JP-[A-Z0-9]{8}", args[1])):
    die("usage: ./build_reports.sh <period YYYY-MM> <posting id JP-XXXXXXXX (printed by ./post_journal.sh)>", 64)
period, posting_id = args
try:
    balances = list(csv.DictReader(Path(f"ledger/trial-balance-{period}.csv").read_text(encoding="utf-8").splitlines()))
    closing = list(csv.DictReader(Path(f"journal/closing-{period}.csv").read_text(encoding="utf-8").splitlines()))
    net = {}
    names, types = {}, {}
    for row in balances:
        acct = row["account"]
        names[acct], types[acct] = row["name"], row["type"]
        net[acct] = Decimal(row["debit"] or "0") - Decimal(row["credit"] or "0")
    for row in closing:
        net.setdefault(row["account"], Decimal("0"))
except (OSError, KeyError, InvalidOperation) as exc:
    die(f"cannot read the {period} trial balance or closing journal: {exc}", 2)
try:
    url = Path("config/gl.url").read_text(encoding="utf-8").strip().rstrip("/") + "/reports"
except OSError:
    die("config/gl.url is missing: the report pack cannot be published", 4)

print(f"Building the {period} reports on closing journal {posting_id} (trial balance, income statement, "
      f"balance sheet); rendering takes a few seconds ...", flush=True)
RUNNING.touch()
time.sleep(RENDER_S)

income = [(a, -net[a]) for a in sorted(net) if types.get(a) == "income"]
expense = [(a, net[a]) for a in sorted(net) if types.get(a) == "expense"]
result = sum(v for _, v in income) - sum(v for _, v in expense)
after = dict(net)
for row in closing:
    after[row["account"]] += Decimal(row["debit"] or "0") - Decimal(row["credit"] or "0")
head = f"# {period} closing journal {posting_id}\n"
files = {
    "trial-balance.csv": head + "account,name,balance\n" + "".join(
        f"{a},{names.get(a, '')},{money(after[a])}\n" for a in sorted(after) if after[a]),
    "income-statement.csv": head + "account,name,amount\n" + "".join(
        f"{a},{names[a]},{money(v)}\n" for a, v in income + [(a, -v) for a, v in expense])
        + f"result,Net result,{money(result)}\n",
    "balance-sheet.csv": head + "account,name,amount\n" + "".join(
        f"{a},{names.get(a, '')},{money(after[a] if types.get(a) == 'asset' else -after[a])}\n"
        for a in sorted(after) if types.get(a) in ("asset", "liability", "equity") and after[a]),
}
out = Path("reports") / period
out.mkdir(parents=True, exist_ok=True)
digests = {}
for name, text in files.items():
    (out / name).write_text(text, encoding="utf-8")
    digests[name] = hashlib.sha256(text.encode()).hexdigest()
pack = {"period": period, "journal_posting_id": posting_id, "net_result": money(result), "files": digests}
request = urllib.request.Request(url, data=json.dumps(pack).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(request, timeout=20) as answer:
        answer.read()
except OSError as exc:
    die(f"the reports were built under {out}/ but the ledger did not take the pack ({exc})", 5)
RUNNING.unlink(missing_ok=True)
print(f"Published the {period} report pack on closing journal {posting_id}: {', '.join(files)} under {out}/ "
      f"(net result EUR {result:,.2f}).")
PY
