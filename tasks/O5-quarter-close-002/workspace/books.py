#!/usr/bin/env python3
"""The bookkeeping tool of the quarter close.

    python3 books.py pull            fetch the quarter's three monthly ledgers into ledgers/
    python3 books.py check <ledger>  check a monthly ledger and print its checked totals

A ledger is a CSV ``posting_id,date,account,amount`` (account ``revenue`` or ``cost``, whole
euros). October and November were checked at their month-end closes; December has not been
checked yet: its export can hold a posting twice (the same posting id), and the check rejects
every repeat. The quarter's ledger key is kept in .books/ (do not edit it).
"""

import json
import pathlib
import random
import secrets
import sys

QUARTER = "2026-Q4"
MONTHS = ("2026-10", "2026-11", "2026-12")
UNCHECKED = "2026-12"
ROOT = pathlib.Path(__file__).resolve().parent
STATE = ROOT / ".books"
HEADER = "posting_id,date,account,amount"


def quarter_key():
    """The quarter's ledger key: drawn once, then kept (every pull and check agrees)."""
    STATE.mkdir(exist_ok=True)
    path = STATE / "quarter.key"
    if not path.is_file():
        path.write_text(secrets.token_hex(16) + "\n", encoding="utf-8")
    return path.read_text(encoding="utf-8").strip()


def postings(key, month):
    """The month's ledger export: ``[(posting_id, date, account, amount)]`` in date order; the
    unchecked month repeats two of its postings (same id, date and amount, re-exported)."""
    rng = random.Random(f"{key}|{month}")
    ids, count = set(), rng.randint(7, 9)
    while len(ids) < count:
        ids.add(f"JE-{month.replace('-', '')[2:]}-{rng.randint(1000, 9999)}")
    accounts = ["revenue", "cost"] + ["revenue" if rng.random() < 0.55 else "cost" for _ in range(count - 2)]
    rng.shuffle(accounts)
    rows = []
    for pid, account in zip(sorted(ids), accounts):
        amount = rng.randint(400, 9800) if account == "revenue" else rng.randint(150, 6200)
        rows.append((pid, f"{month}-{rng.randint(1, 28):02d}", account, amount))
    if month == UNCHECKED:
        rows += [(pid, date, account, amount) for pid, date, account, amount in rng.sample(rows, 2)]
    return sorted(rows, key=lambda r: (r[1], r[0]))


def render(rows):
    return HEADER + "\n" + "".join(f"{pid},{date},{account},{amount}\n" for pid, date, account, amount in rows)


def checked(rows):
    """``(accepted, rejected ids)``: every posting id counts once; a repeat is rejected."""
    seen, accepted, rejected = set(), [], []
    for row in rows:
        if row[0] in seen:
            rejected.append(row[0])
        else:
            seen.add(row[0])
            accepted.append(row)
    return accepted, rejected


def totals(rows):
    """``{"revenue": …, "costs": …}`` over the rows."""
    return {"revenue": sum(r[3] for r in rows if r[2] == "revenue"),
            "costs": sum(r[3] for r in rows if r[2] == "cost")}


def pull():
    key = quarter_key()
    out = ROOT / "ledgers"
    out.mkdir(exist_ok=True)
    lines = []
    for month in MONTHS:
        rows = postings(key, month)
        (out / f"{month}.csv").write_text(render(rows), encoding="utf-8")
        state = "not checked yet" if month == UNCHECKED else "checked at month-end"
        lines.append(f"  ledgers/{month}.csv  {len(rows)} postings  ({state})")
    print(f"pulled the {QUARTER} ledgers:")
    print("\n".join(lines))
    return 0


def check(path):
    file = ROOT / path if not pathlib.Path(path).is_absolute() else pathlib.Path(path)
    month = file.stem
    if not file.is_file():
        print(f"no ledger {path}: run `python3 books.py pull` first")
        return 2
    rows = []
    for line in file.read_text(encoding="utf-8").splitlines()[1:]:
        cells = line.strip().split(",")
        if len(cells) == 4 and cells[3].isdigit():
            rows.append((cells[0], cells[1], cells[2], int(cells[3])))
    accepted, rejected = checked(rows)
    sums = totals(accepted)
    STATE.mkdir(exist_ok=True)
    with (STATE / "checks.jsonl").open("a", encoding="utf-8") as log:
        log.write(json.dumps({"ledger": month, "accepted": len(accepted), "rejected": rejected, **sums}) + "\n")
    print(f"check {month}: {len(rows)} postings read, {len(rejected)} rejected"
          + (f" (repeated posting id: {', '.join(rejected)})" if rejected else ""))
    print(f"checked {month}: revenue={sums['revenue']} costs={sums['costs']} ({len(accepted)} postings accepted)")
    return 0


def main(argv):
    if argv[:1] == ["pull"] and len(argv) == 1:
        return pull()
    if argv[:1] == ["check"] and len(argv) == 2:
        return check(argv[1])
    print("usage: python3 books.py pull | check <ledger.csv>")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
