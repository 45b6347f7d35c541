"""Carrier audit for the month-end freight close: slow. It waits for the carrier's archive export
(about 30 seconds), then prints the audit seal and writes it to audit_result.json - only when it is
finished."""
import json
import os
import secrets
import time

started = time.time()
print("carrier audit started: waiting for the carrier archive export", flush=True)
for _ in range(30):
    time.sleep(1)
value = "AUD-" + secrets.token_hex(5)
record = {"value": value, "started_at": started, "finished_at": time.time()}
with open("audit_result.json.tmp", "w", encoding="utf-8") as fh:
    json.dump(record, fh)
os.replace("audit_result.json.tmp", "audit_result.json")
print(f"audit seal: {value}", flush=True)
