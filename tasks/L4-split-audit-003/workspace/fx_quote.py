"""FX quote for the month-end freight close: quick (about 2 seconds). Prints the quote id at the
end and writes it to fx_result.json when it is finished."""
import json
import os
import secrets
import time

started = time.time()
print("fx quote requested", flush=True)
time.sleep(2)
value = "FXQ-" + secrets.token_hex(5)
record = {"value": value, "started_at": started, "finished_at": time.time()}
with open("fx_result.json.tmp", "w", encoding="utf-8") as fh:
    json.dump(record, fh)
os.replace("fx_result.json.tmp", "fx_result.json")
print(f"fx quote: {value}", flush=True)
