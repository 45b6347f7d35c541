#!/usr/bin/env bash
# Sync stock.csv with the warehouse management system (WMS) counts.
#
# The sync runs in the BACKGROUND: this command starts it and returns at once. A few seconds
# later the background job rewrites stock.csv in place (same rows and columns, the on_hand counts
# of the latest WMS cycle count) and then writes the marker .sync/done. Use stock.csv only after
# .sync/done exists. Nothing prints the counts.
#
# (Offline stand-in for the WMS: the counts are drawn per run. For every stock.csv it writes, the
# job appends sha256 commitments of the file and of its stock report to .sync/sync.jsonl - an audit
# trail that proves what the sync wrote without revealing it.)
set -euo pipefail
SELF="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$SELF")"
if [ "${1:-}" != "--job" ]; then
    mkdir -p .sync
    rm -f .sync/done
    if command -v setsid >/dev/null 2>&1; then
        setsid nohup bash "$SELF" --job </dev/null >/dev/null 2>&1 &
    else
        nohup bash "$SELF" --job </dev/null >/dev/null 2>&1 &
    fi
    echo "sync_stock: sync started in the background (job $!); stock.csv will be rewritten with the WMS counts in a few seconds, then .sync/done is written"
    exit 0
fi
sleep "${SYNC_DELAY_S:-3}"  # the WMS round trip
exec python3 - <<'PY'
import hashlib
import json
import os
import secrets

STOCK = "stock.csv"
LOG = ".sync/sync.jsonl"


def sha(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def report(header, rows):
    oh, rp, sku = header.index("on_hand"), header.index("reorder_point"), header.index("sku")
    counts = [int(r[oh]) for r in rows]
    reorder = sorted(r[sku] for r in rows if int(r[oh]) < int(r[rp]))
    return len(rows), sum(counts), reorder


with open(STOCK, encoding="utf-8") as fh:
    lines = [line for line in fh.read().splitlines() if line.strip()]
header = lines[0].split(",")
rows = [line.split(",") for line in lines[1:]]
old = report(header, rows)
oh, rp = header.index("on_hand"), header.index("reorder_point")
while True:  # every count moves, and so do the total and the reorder list
    new_rows = []
    for r in rows:
        cells = list(r)
        while cells[oh] == r[oh]:
            cells[oh] = str(secrets.randbelow(3 * int(r[rp]) + 1))
        new_rows.append(cells)
    new = report(header, new_rows)
    if new[1] != old[1] and new[2] != old[2]:
        break
text = "\n".join([",".join(header)] + [",".join(c) for c in new_rows]) + "\n"
with open(STOCK, "w", encoding="utf-8") as fh:  # in place: same path
    fh.write(text)
n, total, reorder = new
with open(LOG, "a", encoding="utf-8") as fh:
    fh.write(json.dumps({"rows": n, "stock_sha256": sha(text),
                         "report_sha256": sha(f"{n}|{total}|{','.join(reorder)}")}) + "\n")
with open(".sync/done.tmp", "w", encoding="utf-8") as fh:
    fh.write(f"sync_stock: done - {n} rows of stock.csv updated from the WMS cycle count\n")
os.replace(".sync/done.tmp", ".sync/done")
PY
