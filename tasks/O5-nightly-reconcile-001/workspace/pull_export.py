#!/usr/bin/env python3
"""Pull tonight's stock export of one system into exports/ and print it.

    python3 pull_export.py erp              ERP book stock    -> exports/erp-stock.csv
    python3 pull_export.py wms [--issue N]  WMS on-hand stock -> exports/wms-stock.csv (issue 1 unless told)

An export is fixed for the night: pulling the same system and issue again prints the same
file. The night's export key is kept in .exports/ (do not edit it).
"""

import hashlib
import json
import pathlib
import random
import secrets
import sys

WAREHOUSES = ("AMS-1", "BER-2", "LYS-1", "OSL-3")
SKUS_PER_WAREHOUSE = 5
ROOT = pathlib.Path(__file__).resolve().parent
STATE = ROOT / ".exports"


def night_key():
    """The night's export key: drawn once, then kept (every pull of the night agrees)."""
    STATE.mkdir(exist_ok=True)
    path = STATE / "night.key"
    if not path.is_file():
        path.write_text(secrets.token_hex(16) + "\n", encoding="utf-8")
    return path.read_text(encoding="utf-8").strip()


def book_stock(key):
    """ERP book stock: {(warehouse, sku): units}."""
    rng = random.Random(f"{key}|erp")
    stock = {}
    for wh in WAREHOUSES:
        skus = set()
        while len(skus) < SKUS_PER_WAREHOUSE:
            skus.add(f"SKU-{rng.randint(1000, 9999)}")
        for sku in sorted(skus):
            stock[(wh, sku)] = rng.randint(20, 480)
    return stock


def _adjust(stock, rng, warehouses):
    """One non-zero count change on one SKU of each of ``warehouses``."""
    for wh in warehouses:
        sku = rng.choice(sorted(s for w, s in stock if w == wh))
        delta = rng.choice([d for d in range(-15, 16) if d])
        units = stock[(wh, sku)]
        stock[(wh, sku)] = units + delta if units + delta >= 0 else units - delta


def on_hand(key, issue):
    """WMS on-hand stock of ``issue``: issue 1 differs from the book in three warehouses; each
    later issue adds the late cycle counts of two more warehouses (different from the book's)."""
    stock = dict(book_stock(key))
    rng = random.Random(f"{key}|wms|1")
    _adjust(stock, rng, rng.sample(WAREHOUSES, 3))
    for n in range(2, issue + 1):
        rng = random.Random(f"{key}|wms|{n}")
        _adjust(stock, rng, rng.sample(WAREHOUSES, 2))
    return stock


def render(system, issue, key):
    if system == "erp":
        rows = sorted(book_stock(key).items())
        return "warehouse,sku,qty\n" + "".join(f"{wh},{sku},{q}\n" for (wh, sku), q in rows)
    rng = random.Random(f"{key}|bins")
    rows = sorted(on_hand(key, issue).items(), key=lambda kv: (kv[0][1], kv[0][0]))
    return "sku,site,bin,on_hand\n" + "".join(f"{sku},{wh},B{rng.randint(1, 40):02d},{q}\n" for (wh, sku), q in rows)


def main(argv):
    if not argv or argv[0] not in ("erp", "wms"):
        print("usage: python3 pull_export.py erp | wms [--issue N]")
        return 2
    system, issue = argv[0], 1
    if "--issue" in argv[1:]:
        try:
            issue = int(argv[argv.index("--issue") + 1])
        except (IndexError, ValueError):
            print("usage: --issue takes a number")
            return 2
    if system == "erp" and issue != 1 or not 1 <= issue <= 3:
        print(f"no issue {issue} of the {system} export tonight")
        return 2
    key = night_key()
    text = render(system, issue, key)
    out = ROOT / "exports" / f"{system}-stock.csv"
    out.parent.mkdir(exist_ok=True)
    out.write_text(text, encoding="utf-8")
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    with (STATE / "pulls.jsonl").open("a", encoding="utf-8") as log:
        log.write(json.dumps({"system": system, "issue": issue, "sha256": digest}) + "\n")
    rows = text.count("\n") - 1
    print(f"pulled {system} export issue {issue}: {rows} rows -> exports/{system}-stock.csv (sha256 {digest[:12]})")
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
