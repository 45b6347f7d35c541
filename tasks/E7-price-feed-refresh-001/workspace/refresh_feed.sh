#!/usr/bin/env bash
# Pull today's prices from the upstream price service into feed/prices.csv.
#
# The feed is rewritten in place: the same rows, header and layout, only the price_cents values
# change (each keeps its width). Nothing is printed but a one-line note, and it is safe to run
# more than once: every run re-prices the feed as it stands.
#
# (Offline stand-in for the price service: the new prices are drawn per run. Each run appends
# sha256 commitments of the feed it wrote and of that feed's summary to .feed/refresh.jsonl - an
# audit trail that proves what the refresh wrote without revealing it.)
set -euo pipefail
cd "$(dirname "$0")"
exec python3 - <<'PY'
import hashlib
import json
import os
import secrets

FEED = "feed/prices.csv"
LOG = ".feed/refresh.jsonl"


def sha(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


with open(FEED, encoding="utf-8") as fh:
    lines = [line for line in fh.read().splitlines() if line.strip()]
header = lines[0]
col = header.split(",").index("price_cents")
out = [header]
for line in lines[1:]:
    cells = line.split(",")
    old = cells[col]
    low, high = 10 ** (len(old) - 1), 10 ** len(old) - 1
    new = old
    while new == old:  # every price moves
        new = str(low + secrets.randbelow(high - low + 1))
    cells[col] = new
    out.append(",".join(cells))
text = "\n".join(out) + "\n"
prices = [int(line.split(",")[col]) for line in out[1:]]
rows, total = len(prices), sum(prices)
checksum = sum(i * p for i, p in enumerate(prices, start=1))
with open(FEED, "w", encoding="utf-8") as fh:  # in place: same path, same size
    fh.write(text)
os.makedirs(".feed", exist_ok=True)
with open(LOG, "a", encoding="utf-8") as fh:
    fh.write(json.dumps({"rows": rows, "feed_sha256": sha(text),
                         "summary_sha256": sha(f"{rows}|{total}|{checksum}")}) + "\n")
print(f"refresh_feed: {FEED} updated from the upstream price service - {rows} rows re-priced, layout unchanged")
PY
