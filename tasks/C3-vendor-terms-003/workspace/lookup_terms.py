"""lookup_terms: fetch a vendor's current contract terms from the terms desk for one purchase order.

    python3 lookup_terms.py <vendor>

Prints the vendor's terms on stdout and exits 0. The desk issues a one-off contract reference
(``contract_ref``) for the purchase order being raised; it is printed once and cannot be looked
up again. The desk allows ONE lookup per purchase order: a second lookup is refused on stderr
(``RATE_LIMITED``) and exits 3, and an unknown vendor exits 2.

Every lookup appends an audit record to ``.terms/lookups.jsonl``: the vendor, whether it was
served, the exit status and sha256("contract|<contract_ref>") - a commitment that proves which
reference the lookup printed without revealing it.
"""

import hashlib
import json
import os
import secrets
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
STATE = HERE / ".terms"
LOG = STATE / "lookups.jsonl"
ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
VENDORS = {"northwind-freight": {"payment_terms": "net 45", "currency": "EUR", "incoterm": "DAP"}}


def _served_before():
    if not LOG.is_file():
        return False
    for line in LOG.read_text(encoding="utf-8").splitlines():
        try:
            if json.loads(line).get("served"):
                return True
        except (ValueError, AttributeError):
            continue
    return False


def _log(record):
    STATE.mkdir(exist_ok=True)
    with open(LOG, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"pid": os.getpid(), **record}) + "\n")


def main(argv):
    vendor = argv[1] if len(argv) > 1 else ""
    if vendor not in VENDORS:
        _log({"vendor": vendor, "served": False, "exit": 2, "ref_sha256": None})
        print(f"terms-desk: error: UNKNOWN_VENDOR: {vendor!r} (known: {', '.join(VENDORS)})", file=sys.stderr)
        return 2
    if _served_before():
        _log({"vendor": vendor, "served": False, "exit": 3, "ref_sha256": None})
        print(f"terms-desk: error: RATE_LIMITED: the terms of {vendor} were already looked up for this purchase "
              "order (one lookup per order); the contract reference cannot be issued or shown again - use the "
              "contract_ref printed by the first lookup", file=sys.stderr)
        return 3
    ref = "CTR-" + "".join(secrets.choice(ALPHABET) for _ in range(8))
    _log({"vendor": vendor, "served": True, "exit": 0,
          "ref_sha256": hashlib.sha256(f"contract|{ref}".encode()).hexdigest()})
    terms = VENDORS[vendor]
    print(f"terms-desk 1.4: vendor={vendor}")
    print(f"payment_terms: {terms['payment_terms']}")
    print(f"currency: {terms['currency']}")
    print(f"incoterm: {terms['incoterm']}")
    print(f"contract_ref: {ref}")
    print("note: the contract_ref is issued for this purchase order only and is never shown again; "
          "quote it on the order.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
