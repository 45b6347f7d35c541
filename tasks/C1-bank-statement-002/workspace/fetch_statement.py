"""Download one bank statement into statements/<statement id>.txt (the bank's text export).

Usage: python3 fetch_statement.py <statement id>

The statement lists one transaction per line and ends with its control line
``STATEMENT-TOTAL: <16 hex digits>`` (the bank's digest over the statement).
"""

import hashlib
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROWS = 3600
PAYEES = ("Northwind Traders", "Contoso Cloud", "Fabrikam Freight", "Tailspin Toys", "Litware Labs",
          "Adventure Works", "Proseware Payroll", "Wingtip Telecom", "Coho Vineyard", "Lucerne Publishing",
          "Margie's Travel", "Humongous Insurance", "Alpine Ski House", "Blue Yonder Air", "Fourth Coffee",
          "Graphic Design Inst", "Trey Research", "Woodgrove Bank Fees", "Relecloud Storage", "VanArsdel Ltd")
ID_RE = re.compile(r"^STM-[A-Z0-9]{6,}$")


def render(statement_id):
    """The exact text of the statement file for ``statement_id``."""
    digest = hashlib.sha256(statement_id.encode())
    lines = [f"# statement {statement_id}: account ACME-OPS, period 2026-10, {ROWS} transactions"]
    for i in range(1, ROWS + 1):
        h = hashlib.sha256(f"{statement_id}:{i}".encode()).hexdigest()
        cents = int(h[:6], 16) % 2_500_000
        payee = PAYEES[int(h[6:8], 16) % len(PAYEES)]
        line = (f"TXN-{i:05d} 2026-10-{1 + i % 28:02d} {payee:<22} "
                f"{'-' if int(h[8], 16) % 3 else '+'}{cents // 100:>7}.{cents % 100:02d} ref={h[9:37]}")
        digest.update(line.encode())
        lines.append(line)
    lines.append(f"STATEMENT-TOTAL: {digest.hexdigest()[:16]}")
    return "\n".join(lines) + "\n"


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not ID_RE.match(args[0]):
        print("usage: python3 fetch_statement.py <statement id, e.g. STM-XXXXXXXXXX>", file=sys.stderr)
        return 2
    out = HERE / "statements" / f"{args[0]}.txt"
    out.parent.mkdir(exist_ok=True)
    out.write_text(render(args[0]), encoding="utf-8")
    print(f"Saved statement {args[0]} to statements/{out.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
