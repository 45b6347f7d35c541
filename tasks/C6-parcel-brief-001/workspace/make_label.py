"""Shipping label for a replacement parcel: appends '<tracking number> <label id>' to labels.log
and prints the label id.

Usage: python3 make_label.py TRK-XXXXXXXXXX
"""
import hashlib
import re
import sys

tracking = sys.argv[1] if len(sys.argv) == 2 else ""
if not re.fullmatch(r"TRK-[A-Z0-9]{10}", tracking):
    print("usage: python3 make_label.py TRK-XXXXXXXXXX (the parcel's tracking number)", file=sys.stderr)
    sys.exit(2)
label = "LBL-" + hashlib.sha256(f"parcel-label:{tracking}".encode()).hexdigest()[:10].upper()
with open("labels.log", "a", encoding="utf-8") as fh:
    fh.write(f"{tracking} {label}\n")
print(f"label id: {label}")
