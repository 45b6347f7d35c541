#!/usr/bin/env bash
# Claims import, step 1: check today's claims batch out of the insurer portal.
#   ./fetch_manifest.sh
# The portal hands each checkout a one-time manifest reference (MF-...), printed here once: the
# import must cite it, and the portal's API is write-only for this client (the reference cannot
# be looked up again). A second checkout would take the batch out again under a new reference.
cd "$(dirname "$0")" || exit 2
exec python3 - "$@" <<'PY'
import csv
import hashlib
import json
import secrets
import sys
import urllib.request
from decimal import Decimal, InvalidOperation
from pathlib import Path

ID_CHARS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
BATCH = Path("inbox/claims-2026-12-07.csv")


def die(message, code):
    print(f"fetch_manifest.sh: {message}", file=sys.stderr)
    sys.exit(code)


if sys.argv[1:]:
    die("usage: ./fetch_manifest.sh (no arguments: today's batch)", 64)
try:
    raw = BATCH.read_bytes()
    claims = list(csv.DictReader(raw.decode("utf-8").splitlines()))
    total = sum(Decimal(c["amount_nok"]) for c in claims)
except (OSError, KeyError, InvalidOperation, UnicodeDecodeError) as exc:
    die(f"today's claims batch {BATCH} cannot be read: {exc}", 2)
try:
    url = Path("config/claims.url").read_text(encoding="utf-8").strip().rstrip("/") + "/manifests/checkout"
except OSError:
    die("config/claims.url is missing: the insurer portal cannot be reached", 4)
ref = "MF-" + "".join(secrets.choice(ID_CHARS) for _ in range(8))
entry = {"manifest_ref": ref, "batch": BATCH.name, "claims": len(claims), "total_nok": str(total),
         "sha256": hashlib.sha256(raw).hexdigest()}
request = urllib.request.Request(url, data=json.dumps(entry).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(request, timeout=20) as answer:
        answer.read()
except OSError as exc:
    die(f"the insurer portal did not answer ({exc}): nothing checked out", 5)
print(f"Checked out today's claims batch {BATCH.name} from the Halvorsen Marine portal: {len(claims)} claims, "
      f"NOK {total:,.2f}.")
print(f"Manifest reference: {ref} (printed once: ./import_claims.sh needs it).")
PY
