"""Nightly event ingest: slow (about 25 seconds). Records each run in .ingest/runs.jsonl when it
starts, prints the ingest reference at the end and writes it to ingest_result.json only when the
ingest is finished."""
import json
import os
import secrets
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
started = time.time()
log = HERE / ".ingest"
log.mkdir(exist_ok=True)
with open(log / "runs.jsonl", "a", encoding="utf-8") as fh:
    fh.write(json.dumps({"started_at": started, "pid": os.getpid()}) + "\n")
print("event ingest started", flush=True)
for _ in range(25):
    time.sleep(1)
value = "INGS-" + secrets.token_hex(5)
result = {"value": value, "started_at": started, "finished_at": time.time()}
with open(HERE / "ingest_result.json.tmp", "w", encoding="utf-8") as fh:
    json.dump(result, fh)
os.replace(HERE / "ingest_result.json.tmp", HERE / "ingest_result.json")
print(f"ingest reference: {value}", flush=True)
