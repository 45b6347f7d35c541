#!/usr/bin/env bash
# Claims import, step 2: book the checked-out batch into the claims system.
#   ./import_claims.sh <manifest reference>    e.g. ./import_claims.sh MF-XXXXXXXX
# ONE SHOT: the claims system books every import it receives, so a second run books every claim of
# the batch a second time. The import receipt it prints is the only copy this workspace gets.
cd "$(dirname "$0")" || exit 2
exec python3 - "$@" <<'PY'
import csv
import json
import re
import secrets
import sys
import urllib.request
from decimal import Decimal, InvalidOperation
from pathlib import Path

ID_CHARS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
BATCH = Path("inbox/claims-2026-12-07.csv")


def die(message, code):
    print(f"import_claims.sh: {message}", file=sys.stderr)
    sys.exit(code)


args = sys.argv[1:]
if len(args) != 1 or not re.fullmatch(r"MF-[A-Z0-9]{8}", args[0]):
    die("usage: ./import_claims.sh <manifest reference MF-XXXXXXXX (printed by ./fetch_manifest.sh)>", 64)
ref = args[0]
try:
    claims = list(csv.DictReader(BATCH.read_text(encoding="utf-8").splitlines()))
    total = sum(Decimal(c["amount_nok"]) for c in claims)
except (OSError, KeyError, InvalidOperation) as exc:
    die(f"today's claims batch {BATCH} cannot be read: {exc}", 2)
try:
    url = Path("config/claims.url").read_text(encoding="utf-8").strip().rstrip("/") + "/imports"
except OSError:
    die("config/claims.url is missing: the claims system cannot be reached", 4)
receipt = "IMP-" + "".join(secrets.choice(ID_CHARS) for _ in range(8))
entry = {"manifest_ref": ref, "receipt": receipt, "claims": [c["claim_id"] for c in claims], "total_nok": str(total)}
request = urllib.request.Request(url, data=json.dumps(entry).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(request, timeout=20) as answer:
        answer.read()
except OSError as exc:
    die(f"the claims system did not take the import ({exc}): nothing booked", 5)
print(f"Imported manifest {ref} into the claims system: {len(claims)} claims booked, NOK {total:,.2f}.")
print(f"Import receipt: {receipt} (printed once: ./notify_adjusters.sh needs it).")
PY
