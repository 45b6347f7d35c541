"""Hand the exported batch on to the warehouse: `python3 publish_batch.py <receipt>`.

Copies out/batch.csv to outbox/batch.csv, writes outbox/manifest.json (the receipt, the rows
handed on) and appends a line to .batch/published.jsonl. It trusts its caller: it does not check
that the export behind out/batch.csv completed, so only a completed export may be published.
"""

import json
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv):
    if len(argv) != 2 or not argv[1].strip():
        print("usage: python3 publish_batch.py <receipt>", flush=True)
        return 2
    src = HERE / "out" / "batch.csv"
    if not src.is_file():
        print("publish: out/batch.csv not found; nothing to publish", flush=True)
        return 1
    outbox = HERE / "outbox"
    outbox.mkdir(exist_ok=True)
    shutil.copyfile(src, outbox / "batch.csv")
    rows = max(len(src.read_text(encoding="utf-8").splitlines()) - 1, 0)
    (outbox / "manifest.json").write_text(json.dumps({"receipt": argv[1], "rows": rows}) + "\n")
    (HERE / ".batch").mkdir(exist_ok=True)
    with open(HERE / ".batch" / "published.jsonl", "a", encoding="utf-8") as led:
        led.write(json.dumps({"receipt": argv[1], "rows": rows, "at": round(time.time(), 3)}) + "\n")
    print(f"published {rows} rows with receipt {argv[1]} to outbox/", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
