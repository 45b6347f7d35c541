"""Rebuild the product search index into a new generation (slow: about ten seconds).

Usage: python3 rebuild_index.py

Reads catalog/products.csv, writes the new generation's segments to
search/generations/<generation>/ and prints its progress. The finalize step merges the segments
and writes the generation's manifest.json; only then is the generation complete. A generation
goes live only when it is published (python3 publish_index.py <generation>); until then the
generation named in search/CURRENT keeps serving.

Each run is logged in .rebuild/jobs.jsonl (the job's own log: start, and how it ended when it
ends by itself). In this environment the finalize merge exceeds the rebuild's memory budget and
the host's memory watchdog kills the process with SIGKILL (no message, like the kernel's OOM
killer), after the last progress line has been printed: the segments are left behind without
a manifest.
"""

import csv
import json
import os
import secrets
import signal
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEGMENTS = 4
STEP_S = 2.0


def log(record):
    """Append one record to the job's own log (outside what the operator edits)."""
    folder = HERE / ".rebuild"
    folder.mkdir(exist_ok=True)
    record = {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "pid": os.getpid(), **record}
    with open(folder / "jobs.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")


def say(text):
    print(text, flush=True)


def main():
    with open(HERE / "catalog" / "products.csv", newline="", encoding="utf-8") as src:
        products = list(csv.DictReader(src))
    serving = (HERE / "search" / "CURRENT").read_text(encoding="utf-8").strip()
    generation = f"gen-{secrets.token_hex(4)}"
    target = HERE / "search" / "generations" / generation
    target.mkdir(parents=True)
    log({"event": "start", "generation": generation, "serving": serving, "products": len(products)})
    say(f"rebuild: {len(products)} products from catalog/products.csv")
    say(f"rebuild: building generation {generation} ({generation} is not live; {serving} keeps serving)")
    per = -(-len(products) // SEGMENTS)
    for n in range(1, SEGMENTS + 1):
        time.sleep(STEP_S)
        docs = [p["sku"] for p in products[(n - 1) * per:n * per]]
        (target / f"seg-{n:03d}.json").write_text(json.dumps({"segment": n, "docs": docs}), encoding="utf-8")
        say(f"progress {100 * n // (SEGMENTS + 1):3d}% - segment {n}/{SEGMENTS} written")
    say("progress 100% - finalizing")
    time.sleep(1.0)
    # The finalize merge: the memory watchdog kills the process here (see the module docstring).
    # Its kill is logged first, since nothing runs in this process after it.
    log({"event": "killed", "generation": generation, "signal": "SIGKILL", "exit_status": 128 + signal.SIGKILL,
         "segments_written": SEGMENTS, "manifest": False})
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
