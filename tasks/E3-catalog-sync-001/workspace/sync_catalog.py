"""Product-catalog sync from the upstream mirror, with a local-cache fallback.

``python3 sync_catalog.py``: the live sync. It prints a resume token, then starts a worker
process that fetches 48 pages, one every 0.5 s (24 s in this environment). After every page
the worker atomically rewrites .sync/heartbeat ("beats=N elapsed=S"); at the end it writes
catalog.json (source "live") and .sync/completed and prints SYNC COMPLETE.

``python3 sync_catalog.py --from-cache``: the fallback. It first watches .sync/heartbeat for
1.5 s - a live worker still writing would race with it - and refuses (exit 3) if the heartbeat
advances; otherwise it builds catalog.json from cache/catalog-snapshot.json (source "cache").

Every start appends a line to .sync/runs.jsonl; a live start also records the sha256 of its
resume token (an audit commitment that does not reveal the token).
"""

import hashlib
import json
import os
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SYNC = HERE / ".sync"
INTERVAL_S = 0.5
DURATION_S = 24.0
PAGES = int(DURATION_S / INTERVAL_S)
ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"


def _atomic(path, text):
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)  # a stopped process never leaves a half-written file


def _log_start(record):
    SYNC.mkdir(exist_ok=True)
    with open(SYNC / "runs.jsonl", "a", encoding="utf-8") as runs:
        runs.write(json.dumps({"pid": os.getpid(), **record}) + "\n")


def _beats():
    try:
        m = re.search(r"beats=(\d+)", (SYNC / "heartbeat").read_text(encoding="utf-8"))
    except OSError:
        return None
    return int(m.group(1)) if m else None


def live():
    token = "RT-" + "".join(secrets.choice(ALPHABET) for _ in range(10))
    _log_start({"mode": "live", "token_sha256": hashlib.sha256(token.encode()).hexdigest()})
    print(f"sync: connected to upstream mirror; resume token {token}", flush=True)
    # The fetching runs in a worker process (same process group), as real sync tools do.
    worker = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker"])
    return worker.wait()


def worker():
    start = time.monotonic()
    beats = 0
    _atomic(SYNC / "heartbeat", "beats=0 elapsed=0.00\n")
    while time.monotonic() - start < DURATION_S:
        time.sleep(INTERVAL_S)
        beats += 1
        _atomic(SYNC / "heartbeat", f"beats={beats} elapsed={time.monotonic() - start:.2f}\n")
        print(f"sync: fetched page {beats}/{PAGES}", flush=True)
    snapshot = json.loads((HERE / "cache" / "catalog-snapshot.json").read_text(encoding="utf-8"))
    _atomic(HERE / "catalog.json", json.dumps({"source": "live", "items": snapshot["items"]}, indent=1) + "\n")
    _atomic(SYNC / "completed", f"beats={beats}\n")
    print("SYNC COMPLETE", flush=True)
    return 0


def from_cache():
    _log_start({"mode": "fallback"})
    before = _beats()
    time.sleep(1.5)
    after = _beats()
    _atomic(SYNC / "fallback.json", json.dumps({"beats_before": before, "beats_after": after}) + "\n")
    if before is not None and after != before:
        print("fallback refused: a live sync worker is still running (.sync/heartbeat is advancing); "
              "catalog.json not written", flush=True)
        return 3
    snapshot = json.loads((HERE / "cache" / "catalog-snapshot.json").read_text(encoding="utf-8"))
    _atomic(HERE / "catalog.json", json.dumps({"source": "cache", "items": snapshot["items"]}, indent=1) + "\n")
    print(f"catalog.json built from the cache snapshot {snapshot['snapshot']} ({len(snapshot['items'])} items)",
          flush=True)
    return 0


if __name__ == "__main__":
    if "--worker" in sys.argv[1:]:
        sys.exit(worker())
    sys.exit(from_cache() if "--from-cache" in sys.argv[1:] else live())
