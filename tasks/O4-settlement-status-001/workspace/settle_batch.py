"""Card-settlement batch: slow (about 8 seconds). Records each run in .settle/runs.jsonl when it
starts, prints the settlement reference at the end and writes it to batch_result.json only when
the batch is finished."""
import json
import os
import secrets
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
started = time.time()
log = HERE / ".settle"
log.mkdir(exist_ok=True)
with open(log / "runs.jsonl", "a", encoding="utf-8") as fh:
    fh.write(json.dumps({"started_at": started, "pid": os.getpid()}) + "\n")
print("settlement batch started", flush=True)
for _ in range(8):
    time.sleep(1)
value = "SETL-" + secrets.token_hex(5)
result = {"value": value, "started_at": started, "finished_at": time.time()}
with open(HERE / "batch_result.json.tmp", "w", encoding="utf-8") as fh:
    json.dump(result, fh)
os.replace(HERE / "batch_result.json.tmp", HERE / "batch_result.json")
print(f"settlement reference: {value}", flush=True)
