"""Ticket export: print one part of the ticket snapshot, one row per ticket.

Usage: python3 export.py --part a|b

The rows are expanded from the snapshot description in tickets.seed.json. The
last line of every part is its checksum line (CHECKSUM-A / CHECKSUM-B). A part
whose snapshot is incomplete is still printed in full, checksum included, but
the command exits with status 1 (partial export).
"""

import argparse
import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
STATUSES = ("open", "pending", "resolved", "closed", "on-hold")
TEAMS = ("billing", "platform", "mobile", "identity", "search", "payments", "storage", "support")
WORDS = ("invoice", "login", "sync", "upload", "report", "widget", "badge", "filter", "export",
         "calendar", "refund", "profile", "webhook", "quota", "locale", "avatar", "banner", "cart",
         "coupon", "digest", "folder", "gallery", "import", "ledger", "mailbox", "pager", "queue",
         "receipt", "schedule", "tag", "theme", "voucher")


def load_spec(folder=HERE):
    return json.loads((Path(folder) / "tickets.seed.json").read_text(encoding="utf-8"))


def rows(part, spec):
    seed = spec["seed"]
    for i in range(1, spec["parts"][part]["rows"] + 1):
        h = hashlib.sha256(f"{seed}:{part}:{i}".encode()).digest()
        status = STATUSES[h[0] % len(STATUSES)]
        team = TEAMS[h[1] % len(TEAMS)]
        title = " ".join(WORDS[b % len(WORDS)] for b in h[2:7])
        yield (f"TKT-{part.upper()}{i:05d} | {status:<8} | P{1 + h[7] % 4} | {team:<9} | "
               f"{title:<44} | {int.from_bytes(h[8:11], 'big'):08d}")


def render(part, spec):
    """The exact stdout text of ``--part part`` and the exit status."""
    body = list(rows(part, spec))
    digest = hashlib.sha256((spec["snapshot"] + "\n" + "\n".join(body)).encode()).hexdigest()[:16]
    lines = [f"# ticket export part {part}: {len(body)} rows, snapshot {spec['snapshot']}", *body,
             f"CHECKSUM-{part.upper()}: {digest}"]
    return "\n".join(lines) + "\n", 0 if spec["parts"][part].get("complete", True) else 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", required=True, choices=("a", "b"))
    args = parser.parse_args(argv)
    text, code = render(args.part, load_spec())
    sys.stdout.write(text)
    sys.stdout.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
