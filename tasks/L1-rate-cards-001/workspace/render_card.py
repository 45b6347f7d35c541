"""Render one regional rate card.

    python3 render_card.py <region>

reads data/<region>.csv and writes cards/<region>.json (the tariff lines, their count, the
source file's sha256 and a render receipt), then prints

    rendered cards/<region>.json rows=<n> receipt=<receipt>

Each render gets a new receipt; the receipt in the card is the one printed.
"""

import csv
import hashlib
import io
import json
import secrets
import sys
from pathlib import Path


def main(argv):
    if len(argv) != 1 or not argv[0].isidentifier():
        print("usage: python3 render_card.py <region>", file=sys.stderr)
        return 2
    region = argv[0]
    source = Path("data") / f"{region}.csv"
    if not source.is_file():
        print(f"render_card: no source data for region {region!r} ({source} missing)", file=sys.stderr)
        return 1
    raw = source.read_bytes()
    items = list(csv.DictReader(io.StringIO(raw.decode("utf-8"))))
    receipt = "rc-" + secrets.token_hex(4)
    card = {"region": region, "rows": len(items), "source_sha256": hashlib.sha256(raw).hexdigest(),
            "items": items, "receipt": receipt}
    out = Path("cards") / f"{region}.json"
    out.parent.mkdir(exist_ok=True)
    tmp = out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    tmp.replace(out)
    print(f"rendered {out.as_posix()} rows={len(items)} receipt={receipt}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
