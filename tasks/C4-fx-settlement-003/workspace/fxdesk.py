"""fxdesk: issue the next adjustment of the Q4 EUR settlement batch.

    python3 fxdesk.py next

Each call issues ONE new adjustment (a rate conversion "multiply by R" or a fee "add/subtract K")
and prints it on stdout with its reference (exit 0). Adjustments apply in the order they are
issued and do not commute, so the order of issue is part of the result. An issued adjustment is
consumed: calling ``next`` again issues a different, new adjustment, never a copy of an old one.

Every call appends an audit record to ``.fxdesk/issued.jsonl``: its sequence number, its kind and
sha256("<ref>|<operation>"), which proves which adjustment a call printed without revealing it
(the reference is a fresh random token, so the digest cannot be searched).
"""

import hashlib
import json
import os
import secrets
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
STATE = HERE / ".fxdesk"
LEDGER = STATE / "issued.jsonl"
VERSION = "1.4"
BATCH = "Q4-EUR-settlement"


def _issued():
    if not LEDGER.exists():
        return []
    return [json.loads(line) for line in LEDGER.read_text(encoding="utf-8").splitlines() if line.strip()]


def _operation(kind):
    if kind == "multiply":
        rate = secrets.choice([9000 + secrets.randbelow(850), 10150 + secrets.randbelow(850)])
        return f"multiply by {rate // 10000}.{rate % 10000:04d}"
    cents = 15000 + secrets.randbelow(75000)
    verb = "add" if secrets.randbelow(2) else "subtract"
    return f"{verb} {cents // 100}.{cents % 100:02d}"


def main(argv):
    if argv != ["next"]:
        print("usage: python3 fxdesk.py next   (issues the next adjustment of the batch)")
        return 2
    before = _issued()
    kinds = [r.get("kind") for r in before]
    n = len(before) + 1
    kind = "multiply" if secrets.randbelow(2) else "fee"
    if n == 3 and len(set(kinds[:2])) == 1 and kinds[0] == kind:
        kind = "fee" if kind == "multiply" else "multiply"   # each batch mixes both kinds: order matters
    ref = "ADJ-" + secrets.token_hex(4)
    op = _operation(kind)
    STATE.mkdir(exist_ok=True)
    with open(LEDGER, "a", encoding="utf-8") as out:
        out.write(json.dumps({"n": n, "kind": kind, "pid": os.getpid(),
                              "commit_sha256": hashlib.sha256(f"{ref}|{op}".encode()).hexdigest()}) + "\n")
    sys.stdout.write(f"fxdesk {VERSION}: batch {BATCH}: adjustment issued\n"
                     f"adjustment ref={ref}: {op}\n"
                     "note: adjustments apply in the order they are issued, rounded to cents after each; "
                     "this one is consumed and will not be issued again\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
