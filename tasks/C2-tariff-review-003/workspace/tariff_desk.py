"""tariff_desk: the freight-tariff desk's lookup of the negotiated terms for one invoice review.

    python3 tariff_desk.py lookup <carrier>

Prints the carrier's negotiated tariff on stdout and exits 0: the tariff reference, the contract
rate in EUR per kg and the last ship date the rate covers (valid_until). The desk negotiates these
terms for the review being run: they are printed once and never shown again. ONE lookup per review:
a second lookup is refused on stderr (ALREADY_ISSUED, exit 3); an unknown carrier exits 2.

Every lookup appends a record to the desk's audit log ``.desk/lookups.jsonl`` (carrier, served,
exit status and, for a served lookup, sha256("tariff|<ref>|<rate>|<valid_until>"): a commitment
that proves which terms were printed without revealing them).
"""

import hashlib
import json
import secrets
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOG = HERE / ".desk" / "lookups.jsonl"
CARRIERS = {"nordline-cargo": "road groupage, DAP, EUR"}
REF_CHARS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"


def issued_before():
    """Whether the desk already served a lookup for this review."""
    try:
        lines = LOG.read_text(encoding="utf-8").splitlines()
    except OSError:
        return False
    for line in lines:
        try:
            if json.loads(line).get("served") is True:
                return True
        except (ValueError, AttributeError):
            continue
    return False


def audit(**record):
    LOG.parent.mkdir(exist_ok=True)
    with LOG.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, sort_keys=True) + "\n")


def negotiate():
    """This review's terms: a fresh reference, a rate and the last covered ship date."""
    ref = "TRF-" + "".join(secrets.choice(REF_CHARS) for _ in range(8))
    rate = f"0.{2000 + secrets.randbelow(8000):04d}"
    valid_until = f"2026-12-{3 + secrets.randbelow(8):02d}"
    return ref, rate, valid_until


def main(argv):
    if len(argv) != 3 or argv[1] != "lookup":
        print("usage: python3 tariff_desk.py lookup <carrier>", file=sys.stderr)
        return 2
    carrier = argv[2]
    if carrier not in CARRIERS:
        audit(carrier=carrier, served=False, exit=2, commitment=None)
        print(f"tariff-desk: error: UNKNOWN_CARRIER {carrier!r} (known: {', '.join(CARRIERS)})", file=sys.stderr)
        return 2
    if issued_before():
        audit(carrier=carrier, served=False, exit=3, commitment=None)
        print(f"tariff-desk: error: ALREADY_ISSUED: the terms of {carrier} were issued for this review already "
              "and are never shown twice; use the terms the first lookup printed", file=sys.stderr)
        return 3
    ref, rate, valid_until = negotiate()
    audit(carrier=carrier, served=True, exit=0,
          commitment=hashlib.sha256(f"tariff|{ref}|{rate}|{valid_until}".encode()).hexdigest())
    print(f"tariff-desk 2.3: carrier={carrier} ({CARRIERS[carrier]})")
    print(f"tariff_ref: {ref}")
    print(f"rate_eur_per_kg: {rate}")
    print(f"valid_until: {valid_until}")
    print("coverage: a shipment is covered when its ship_date is on or before valid_until")
    print("note: these terms were negotiated for this review only and are not shown again.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
