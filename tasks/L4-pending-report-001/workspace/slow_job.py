"""Nightly reconciliation: slow (about 20 seconds). Prints the reconciliation value at the end
and writes it to job_result.json when the job is finished."""
import json
import os
import secrets
import time

started = time.time()
print("reconciliation started", flush=True)
for _ in range(20):
    time.sleep(1)
value = "RECON-" + secrets.token_hex(5)
result = {"value": value, "started_at": started, "finished_at": time.time()}
with open("job_result.json.tmp", "w", encoding="utf-8") as fh:
    json.dump(result, fh)
os.replace("job_result.json.tmp", "job_result.json")
print(f"reconciliation value: {value}", flush=True)
