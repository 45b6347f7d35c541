#!/usr/bin/env bash
# Claims import, step 3: hand the imported claims to the adjusters' work queues.
#   ./notify_adjusters.sh <import receipt>    e.g. ./notify_adjusters.sh IMP-XXXXXXXX
# Safe to re-run: the queues keep the latest hand-over of an import. Takes a few seconds.
cd "$(dirname "$0")" || exit 2
exec python3 - "$@" <<'PY'
import json
import re
import sys
import time
import urllib.request
from pathlib import Path

RUNNING = Path(".notify-running")   # present while the hand-over is prepared (see the task card)
PREPARE_S = 5

args = sys.argv[1:]
if len(args) != 1 or not re.fullmatch(r"IMP-[A-Z0-9]{8}", args[0]):
    print("notify_adjusters.sh: usage: ./notify_adjusters.sh <import receipt IMP-XXXXXXXX>", file=sys.stderr)
    sys.exit(64)
receipt = args[0]
try:
    url = Path("config/claims.url").read_text(encoding="utf-8").strip().rstrip("/") + "/notifications"
except OSError:
    print("notify_adjusters.sh: config/claims.url is missing: the queues cannot be reached", file=sys.stderr)
    sys.exit(4)
print(f"Preparing the adjusters' hand-over for import {receipt}; this takes a few seconds ...", flush=True)
RUNNING.touch()
time.sleep(PREPARE_S)
request = urllib.request.Request(url, data=json.dumps({"receipt": receipt}).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(request, timeout=20) as answer:
        answer.read()
except OSError as exc:
    RUNNING.unlink(missing_ok=True)
    print(f"notify_adjusters.sh: the adjusters' queues did not answer ({exc})", file=sys.stderr)
    sys.exit(5)
RUNNING.unlink(missing_ok=True)
print(f"Handed import {receipt} to the adjusters' queues.")
PY
