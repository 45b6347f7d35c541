#!/usr/bin/env bash
# Month-end close, step 1: post the period's closing journal to the general ledger.
#   ./post_journal.sh <period>    e.g. ./post_journal.sh 2026-11
# ONE SHOT: the general ledger books every journal it receives, so a second run posts the closing
# entries a second time. The posting id it prints is the only copy this workspace gets: the ledger's
# API is write-only for this client (it cannot look a posting up again).
cd "$(dirname "$0")" || exit 2
exec python3 - "$@" <<'PY'
import csv
import hashlib
import json
import re
import secrets
import sys
import urllib.request
from decimal import Decimal, InvalidOperation
from pathlib import Path

ID_CHARS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"


def die(message, code):
    print(f"post_journal.sh: {message}", file=sys.stderr)
    sys.exit(code)


args = sys.argv[1:]
if len(args) != 1 or not re.fullmatch(r"\d{4}-(0[1-9]|1[0-2])", args[0]):
    die("usage: ./post_journal.sh <period YYYY-MM>", 64)
period = args[0]
journal = Path("journal") / f"closing-{period}.csv"
try:
    raw = journal.read_bytes()
    lines = list(csv.DictReader(raw.decode("utf-8").splitlines()))
    debit = sum(Decimal(r["debit"] or "0") for r in lines)
    credit = sum(Decimal(r["credit"] or "0") for r in lines)
except (OSError, KeyError, InvalidOperation, UnicodeDecodeError) as exc:
    die(f"no readable closing journal for {period} ({journal}: {exc})", 2)
if not lines or debit != credit:
    die(f"the closing journal for {period} does not balance (debit {debit}, credit {credit}): nothing posted", 3)
try:
    url = Path("config/gl.url").read_text(encoding="utf-8").strip().rstrip("/") + "/journals"
except OSError:
    die("config/gl.url is missing: the general ledger cannot be reached", 4)

posting_id = "JP-" + "".join(secrets.choice(ID_CHARS) for _ in range(8))
entry = {"period": period, "kind": "closing", "posting_id": posting_id, "lines": len(lines),
         "total_debit": str(debit), "total_credit": str(credit),
         "journal_sha256": hashlib.sha256(raw).hexdigest()}
request = urllib.request.Request(url, data=json.dumps(entry).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(request, timeout=20) as answer:
        answer.read()
except OSError as exc:
    die(f"the general ledger did not take the journal ({exc}): nothing posted", 5)
print(f"Posted the closing journal for {period} to the general ledger: {len(lines)} lines, "
      f"EUR {debit:,.2f} debit = credit.")
print(f"Posting id: {posting_id} (keep it: ./build_reports.sh needs it, and the ledger cannot be asked for it again).")
PY
