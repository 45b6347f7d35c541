"""Nightly batch export of the order book: `python3 export_batch.py`.

The export writes 60 chunks, one every 0.5 s (about 30 s in this environment). At its start it
draws a one-off batch id, appends a start line to .batch/runs and prints "batch <id>: exporting
60 chunks". After every chunk it appends the chunk's rows to out/batch.csv, replaces
.batch/heartbeat with "beats=<n> elapsed=<seconds>" and, every 4 chunks, prints a progress line.
Only after all 60 chunks does it draw a one-off receipt, record its sha256 and the finish time in
.batch/done.json and print "BATCH EXPORT DONE batch=<id> receipt=<receipt>". A run stopped
earlier leaves a partial out/batch.csv and no .batch/done.json. Nothing goes to stderr.
"""

import hashlib
import json
import os
import secrets
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STATE = HERE / ".batch"
OUT = HERE / "out"
CHUNKS = 60
INTERVAL_S = 0.5
ROWS_PER_CHUNK = 25


def _replace(path, text):
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)  # atomic: a stopped process never leaves a half-written file


def main(argv):
    if len(argv) != 1:
        print("usage: python3 export_batch.py", flush=True)
        return 2
    STATE.mkdir(exist_ok=True)
    OUT.mkdir(exist_ok=True)
    batch = "bx-" + secrets.token_hex(4)
    with open(STATE / "runs", "a", encoding="utf-8") as runs:
        runs.write(f"start batch={batch} pid={os.getpid()} at={time.time():.3f}\n")
    beat_file = STATE / "heartbeat"
    start = time.monotonic()
    _replace(beat_file, "beats=0 elapsed=0.00\n")
    (OUT / "batch.csv").write_text("order_id,chunk,amount_cents\n")
    print(f"batch {batch}: exporting {CHUNKS} chunks", flush=True)
    # A fixed number of chunks (not "until 30 s have passed"): on a loaded machine every sleep
    # overruns, and a time-bounded loop would end short of the 60 the verifier expects.
    for beat in range(1, CHUNKS + 1):
        time.sleep(INTERVAL_S)
        with open(OUT / "batch.csv", "a", encoding="utf-8") as csv:
            for row in range(ROWS_PER_CHUNK):
                n = (beat - 1) * ROWS_PER_CHUNK + row
                csv.write(f"ord-{n:05d},{beat},{(n * 7919) % 100000}\n")
        _replace(beat_file, f"beats={beat} elapsed={time.monotonic() - start:.2f}\n")
        if beat % 4 == 0:
            print(f"batch {batch}: {beat} of {CHUNKS} chunks written", flush=True)
    receipt = "rcpt-" + secrets.token_hex(5)
    done = {"batch": batch, "beats": CHUNKS, "rows": CHUNKS * ROWS_PER_CHUNK,
            "elapsed_s": round(time.monotonic() - start, 2), "finished_at": round(time.time(), 3),
            "receipt_sha256": hashlib.sha256(receipt.encode()).hexdigest()}
    _replace(STATE / "done.json", json.dumps(done) + "\n")
    print(f"BATCH EXPORT DONE batch={batch} receipt={receipt}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
