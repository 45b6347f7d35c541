"""Regional sales-report export: `python3 export_report.py <region>` (north or south).

Both regions run the same export; it needs 8 s in this environment, beating every 0.5 s.
Each start appends a line to .exports/<region>.runs. After every beat it replaces
.exports/<region>.heartbeat with "beats=<n> elapsed=<seconds>" and prints one line. At the
end it draws a one-off receipt, records its sha256 and finish time in .exports/<region>.done
and prints "EXPORT <region> DONE receipt=<receipt>". Nothing goes to stderr.
"""

import hashlib
import json
import os
import secrets
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STATE = HERE / ".exports"
REGIONS = ("north", "south")
INTERVAL_S = 0.5
DURATION_S = 8.0


def _replace(path, text):
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)  # atomic: a stopped process never leaves a half-written file


def main(argv):
    if len(argv) != 2 or argv[1] not in REGIONS:
        print(f"usage: python3 export_report.py {{{'|'.join(REGIONS)}}}", flush=True)
        return 2
    region = argv[1]
    STATE.mkdir(exist_ok=True)
    with open(STATE / f"{region}.runs", "a", encoding="utf-8") as runs:
        runs.write(f"start pid={os.getpid()} at={time.time():.3f}\n")
    beat_file = STATE / f"{region}.heartbeat"
    start = time.monotonic()
    beats = 0
    _replace(beat_file, "beats=0 elapsed=0.00\n")
    print(f"export {region}: started", flush=True)
    # A fixed number of beats (not "until 8 s have passed"): on a loaded machine each sleep
    # overruns, and a time-bounded loop then ends a beat short of the 16 the verifier expects.
    while beats < round(DURATION_S / INTERVAL_S):
        time.sleep(INTERVAL_S)
        beats += 1
        elapsed = time.monotonic() - start
        _replace(beat_file, f"beats={beats} elapsed={elapsed:.2f}\n")
        print(f"export {region}: {beats} of 16 sections written", flush=True)
    receipt = "rcpt-" + secrets.token_hex(5)
    done = {"region": region, "beats": beats, "elapsed_s": round(time.monotonic() - start, 2),
            "finished_at": round(time.time(), 3),
            "receipt_sha256": hashlib.sha256(receipt.encode()).hexdigest()}
    _replace(STATE / f"{region}.done", json.dumps(done) + "\n")
    print(f"EXPORT {region} DONE receipt={receipt}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
