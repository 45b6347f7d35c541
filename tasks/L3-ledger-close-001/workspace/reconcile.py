"""Nightly ledger reconciliation of one region.

Usage: python3 reconcile.py north|south|west

Reads ledgers/<region>.csv (ref,booked,account,amount_cents), checks every row and seals the
region: the seal is a digest of the region's rows, so it changes with any booked row. Prints
one result line and appends '<region> ok <seal>' or '<region> failed <ref>' to reconcile.log.
Exit status: 0 sealed, 3 a row was rejected (nothing sealed), 2 usage error.
"""
import csv
import hashlib
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REGIONS = ("north", "south", "west")


def log(region, outcome, detail):
    with open(HERE / "reconcile.log", "a", encoding="utf-8") as fh:
        fh.write(f"{region} {outcome} {detail}\n")


def main(argv):
    region = argv[1] if len(argv) == 2 else ""
    if region not in REGIONS:
        print("usage: python3 reconcile.py north|south|west", file=sys.stderr)
        return 2
    with open(HERE / "ledgers" / f"{region}.csv", encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    digest = hashlib.sha256(f"reconcile/{region}\n".encode())
    total = 0
    for n, row in enumerate(rows, start=1):
        amount = (row.get("amount_cents") or "").strip()
        if not re.fullmatch(r"-?\d+", amount):
            print(f"reconcile {region}: FAILED at row {n} ref {row.get('ref')} "
                  "(amount is not a whole number of cents); nothing sealed")
            log(region, "failed", row.get("ref"))
            return 3
        total += int(amount)
        digest.update(f"{row['ref']}|{row['booked']}|{row['account']}|{amount}\n".encode())
    seal = "RC-" + digest.hexdigest()[:10]
    print(f"reconcile {region}: OK rows={len(rows)} total={total} seal={seal}")
    log(region, "ok", seal)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
