#!/usr/bin/env python3
"""Nightly inventory snapshot.

    python3 snapshot.py                      write snapshots/inventory-<digest>.json from inventory.csv
    python3 snapshot.py --verify <snapshot>  check a snapshot against inventory.csv as it is now

The snapshot holds every row of inventory.csv, the row count and the file's SHA-256; its name
carries the first 12 hex digits of that digest. inventory.csv itself is never changed.
"""

import csv
import hashlib
import io
import json
import sys
from pathlib import Path

SOURCE = Path("inventory.csv")


def _read():
    raw = SOURCE.read_bytes()
    rows = list(csv.DictReader(io.StringIO(raw.decode("utf-8"))))
    return hashlib.sha256(raw).hexdigest(), rows


def write():
    digest, rows = _read()
    out = Path("snapshots") / f"inventory-{digest[:12]}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"source": str(SOURCE), "sha256": digest, "rows": len(rows), "items": rows},
                              indent=2) + "\n", encoding="utf-8")
    print(f"snapshot written: {out} rows={len(rows)} sha256={digest}")
    return 0


def verify(path):
    try:
        snap = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"cannot read snapshot {path}: {exc}", file=sys.stderr)
        return 2
    digest, rows = _read()
    if snap.get("sha256") != digest or snap.get("rows") != len(rows) or snap.get("items") != rows:
        print(f"MISMATCH {path}: snapshot sha256={snap.get('sha256')} rows={snap.get('rows')}, "
              f"inventory.csv sha256={digest} rows={len(rows)}", file=sys.stderr)
        return 1
    print(f"verified {path} rows={len(rows)} sha256={digest} OK")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--verify"] and len(sys.argv) == 3:
        sys.exit(verify(sys.argv[2]))
    if len(sys.argv) == 1:
        sys.exit(write())
    print(__doc__, file=sys.stderr)
    sys.exit(2)
