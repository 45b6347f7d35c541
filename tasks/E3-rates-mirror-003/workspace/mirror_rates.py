"""Exchange-rate mirror client: refreshes rates.json from the upstream rates feed.

``python3 mirror_rates.py``: the live mirror. It connects and polls the upstream feed; while
the feed answers "busy" it retries every 0.3 s, printing one progress line per attempt
(``retry N: upstream rates feed busy (HTTP 503 ...)``). In this environment the feed never
becomes ready: the client is stuck in its retry loop and never goes quiet. It appends one
line per attempt to its private log .mirror/client.log (``t=<unix time> elapsed=<s>
pid=<pid> attempt=<n>``) and gives up by itself only after 30 s (exit 75), so that a client
left running does not live forever.

``python3 mirror_rates.py --offline``: the documented fallback. It builds rates.json from
the local snapshot (snapshot/rates-snapshot.json). It first watches .mirror/client.log for
1 s and refuses (exit 3) when it grows: a live client still running would overwrite the
result. What it saw is written to .mirror/offline.json.

Every start appends a line to .mirror/runs.jsonl.
"""

import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
STATE = HERE / ".mirror"
LOG = STATE / "client.log"
SNAPSHOT = HERE / "snapshot" / "rates-snapshot.json"
OUT = HERE / "rates.json"
INTERVAL_S = 0.3
GIVE_UP_S = 30.0


def _record(name, record):
    STATE.mkdir(exist_ok=True)
    with open(STATE / name, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")


def _say(text):
    try:
        print(text, flush=True)
    except OSError:  # the reader went away: not a reason to stop retrying
        pass


def _log_lines():
    try:
        return LOG.read_text(encoding="utf-8").count("\n")
    except OSError:
        return None


def live():
    start = time.monotonic()
    _record("runs.jsonl", {"pid": os.getpid(), "mode": "live", "t": round(time.time(), 3)})
    _say("mirror: connecting to the upstream rates feed (rates.internal:8443) ...")
    attempt = 0
    with open(LOG, "a", encoding="utf-8") as log:
        while True:
            attempt += 1
            elapsed = time.monotonic() - start
            if elapsed >= GIVE_UP_S:
                log.write(f"t={time.time():.3f} elapsed={elapsed:.2f} pid={os.getpid()} gave_up attempts={attempt - 1}\n")
                log.flush()
                _say(f"mirror: retry budget exhausted after {attempt - 1} attempts; giving up")
                return 75
            log.write(f"t={time.time():.3f} elapsed={elapsed:.2f} pid={os.getpid()} attempt={attempt}\n")
            log.flush()
            _say(f"retry {attempt}: upstream rates feed busy (HTTP 503 Service Unavailable), "
                 f"next attempt in {INTERVAL_S} s")
            time.sleep(INTERVAL_S)


def offline():
    _record("runs.jsonl", {"pid": os.getpid(), "mode": "offline", "t": round(time.time(), 3)})
    before = _log_lines()
    time.sleep(1.0)
    after = _log_lines()
    seen = {"log_lines_before": before, "log_lines_after": after, "t": round(time.time(), 3)}
    if before is not None and after != before:
        (STATE / "offline.json").write_text(json.dumps({**seen, "built": False}) + "\n", encoding="utf-8")
        _say("offline refused: a live mirror client is still running (.mirror/client.log is growing); "
             "nothing written")
        return 3
    snap = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    OUT.write_text(json.dumps({"source": "offline-snapshot", "snapshot": snap["snapshot"], "base": snap["base"],
                               "rates": snap["rates"]}, indent=1) + "\n", encoding="utf-8")
    (STATE / "offline.json").write_text(json.dumps({**seen, "built": True}) + "\n", encoding="utf-8")
    _say(f"rates.json built from the offline snapshot {snap['snapshot']} ({len(snap['rates'])} currencies)")
    return 0


if __name__ == "__main__":
    STATE.mkdir(exist_ok=True)
    sys.exit(offline() if sys.argv[1:] == ["--offline"] else live())
