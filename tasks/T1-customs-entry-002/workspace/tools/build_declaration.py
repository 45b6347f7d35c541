#!/usr/bin/env python3
"""Build the customs declaration of a shipment.

Reads ``shipment.json`` (the shipment as the freight desk returned it) and ``hs_codes.csv``
(sku -> HS code) from the current folder and writes ``declaration.csv``: one line per HS code
(``hs_code,value``, value = sum of qty x unit_price of its lines, two decimals, sorted by HS
code), then ``TOTAL,<sum of all lines>``. Exits 1 without writing anything when a line's sku
has no HS code.
"""

import csv
import json
import sys
from decimal import Decimal


def main() -> int:
    with open("shipment.json", encoding="utf-8") as fh:
        shipment = json.load(fh)
    with open("hs_codes.csv", encoding="utf-8", newline="") as fh:
        codes = {row["sku"]: row["hs_code"] for row in csv.DictReader(fh)}
    by_code: dict[str, Decimal] = {}
    for line in shipment["lines"]:
        code = codes.get(line["sku"])
        if code is None:
            print(f"error: sku {line['sku']} has no HS code in hs_codes.csv", file=sys.stderr)
            return 1
        by_code[code] = by_code.get(code, Decimal(0)) + Decimal(str(line["qty"])) * Decimal(str(line["unit_price"]))
    total = sum(by_code.values(), Decimal(0))
    with open("declaration.csv", "w", encoding="utf-8") as fh:
        fh.write("hs_code,value\n")
        for code in sorted(by_code):
            fh.write(f"{code},{by_code[code]:.2f}\n")
        fh.write(f"TOTAL,{total:.2f}\n")
    print(f"declaration.csv: {len(by_code)} HS lines for {shipment['shipment_id']}, "
          f"TOTAL {total:.2f} {shipment.get('currency', '')}".rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
