"""Card-settlement batch: slow (about 15 seconds). Prints the settlement reference at the end and
writes it to batch_result.json only when the batch is finished."""
import json
import os
import secrets
import time

started = time.time()
print("settlement batch started", flush=True)
for _ in range(15):
    time.sleep(1)
value = "SETL-" + secrets.token_hex(5)
result = {"value": value, "started_at": started, "finished_at": time.time()}
with open("batch_result.json.tmp", "w", encoding="utf-8") as fh:
    json.dump(result, fh)
os.replace("batch_result.json.tmp", "batch_result.json")
print(f"settlement reference: {value}", flush=True)
