"""Service health check: waits for the service to settle, beating every 0.5 s.

Each start appends a line to .runs. After every beat it replaces .heartbeat with
"beats=<n> elapsed=<seconds>" and prints one line. It needs 40 s in this environment; at
the end it writes .completed and prints HEALTHCHECK PASSED.
"""

import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
INTERVAL_S = 0.5
DURATION_S = 40.0


def _beat(path, line):
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(line + "\n")
    os.replace(tmp, path)  # atomic: a stopped process never leaves a half-written file


def main():
    beat_file = HERE / ".heartbeat"
    with open(HERE / ".runs", "a", encoding="utf-8") as runs:
        runs.write(f"start pid={os.getpid()}\n")
    start = time.monotonic()
    beats = 0
    _beat(beat_file, "beats=0 elapsed=0.00")
    while time.monotonic() - start < DURATION_S:
        time.sleep(INTERVAL_S)
        beats += 1
        elapsed = time.monotonic() - start
        _beat(beat_file, f"beats={beats} elapsed={elapsed:.2f}")
        print(f"heartbeat {beats}: waiting for the service to settle", flush=True)
    (HERE / ".completed").write_text(f"beats={beats}\n")
    print("HEALTHCHECK PASSED", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
