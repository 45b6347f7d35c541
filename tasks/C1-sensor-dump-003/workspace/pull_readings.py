"""Pull the yard gateway's nightly sensor dump into dumps/<batch>.json.

Usage: python3 pull_readings.py

The gateway exports a dump as minified JSON on ONE line (no line breaks at all): the batch id,
every reading of the night, then its integrity trailer ``"count": <readings>, "digest": "<16 hex>"``
(the gateway's digest over the batch and its readings) as the last fields of the object. Each pull
is a new batch. The script prints where it saved the dump and appends the pull to
``.pull/pulls.jsonl``.
"""

import hashlib
import json
import secrets
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
READINGS = 5400
ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
SENSORS = ("TMP", "HUM", "PRS", "VIB", "CO2", "LUX")
NIGHT = "2026-11-30"


def new_batch():
    """A fresh batch id: ``YB-`` and 10 characters drawn from the system's random source."""
    return "YB-" + "".join(secrets.choice(ALPHABET) for _ in range(10))


def _reading(batch, i):
    h = hashlib.sha256(f"{batch}:{i}".encode()).hexdigest()
    kind = SENSORS[int(h[:2], 16) % len(SENSORS)]
    seconds = i * 15 + int(h[13], 16)  # one reading every 15 s through the night
    value = (int(h[2:8], 16) % 200000) / 1000 - 40
    return {"i": i, "t": f"{NIGHT}T{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}Z",
            "sensor": f"{kind}-{int(h[8:12], 16) % 900 + 100}", "v": round(value, 3),
            "q": "ok" if int(h[12], 16) else "suspect"}


def render(batch):
    """The exact text of the dump for ``batch``: one line of minified JSON, newline-terminated."""
    digest = hashlib.sha256(batch.encode())
    parts = []
    for i in range(1, READINGS + 1):
        text = json.dumps(_reading(batch, i), separators=(",", ":"))
        digest.update(text.encode())
        parts.append(text)
    head = json.dumps({"gateway": "yard-gw-7", "batch": batch, "night": NIGHT}, separators=(",", ":"))[:-1]
    trailer = f'"count":{READINGS},"digest":"{digest.hexdigest()[:16]}"'
    return f'{head},"readings":[{",".join(parts)}],{trailer}}}\n'


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    if args:
        print("usage: python3 pull_readings.py (no arguments)", file=sys.stderr)
        return 2
    batch = new_batch()
    text = render(batch)
    out = HERE / "dumps" / f"{batch}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(text, encoding="utf-8")
    ledger = HERE / ".pull" / "pulls.jsonl"
    ledger.parent.mkdir(exist_ok=True)
    with ledger.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"batch": batch, "file": f"dumps/{out.name}",
                             "sha256": hashlib.sha256(text.encode()).hexdigest()}) + "\n")
    print(f"Pulled batch {batch}: saved dumps/{out.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
