#!/usr/bin/env bash
# Supplier payments client.
#   ./pay.sh <invoice>           send ONE payment instruction to the bank (one shot: each run pays again)
#   ./pay.sh --status <invoice>  list the payment instructions already sent for the invoice (pays nothing)
cd "$(dirname "$0")" || exit 2
exec python3 - "$@" <<'PY'
import json
import secrets
import sys
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

OUTBOX = Path("outbox/payments.jsonl")
MARKER = Path(".pay-inflight")   # written the moment the bank has the instruction (see the task card)
SETTLE_S = 6
ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"


def fail(message, code):
    print(f"pay.sh: {message}", file=sys.stderr)
    sys.exit(code)


def sent(invoice):
    if not OUTBOX.is_file():
        return []
    out = []
    for line in OUTBOX.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("invoice") == invoice:
            out.append(rec)
    return out


def status(invoice):
    records = sent(invoice)
    if not records:
        print(f"{invoice}: no payment instruction has been sent to the bank.")
        return
    print(f"{invoice}: {len(records)} payment instruction(s) sent to the bank:")
    for rec in records:
        print(f"  {rec['reference']}  {rec['amount']} {rec['currency']}  to {rec['supplier']}  sent {rec['sent_at']}")


def pay(invoice):
    path = Path("invoices") / f"{invoice}.json"
    try:
        inv = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        fail(f"no invoice {invoice} under invoices/", 2)
    if inv.get("status") != "approved":
        fail(f"{invoice} is not approved (status {inv.get('status')!r}): nothing sent", 3)
    try:
        url = Path("config/bank.url").read_text(encoding="utf-8").strip().rstrip("/") + "/payments"
    except OSError:
        fail("config/bank.url is missing: the bank cannot be reached", 4)
    reference = "PAY-" + "".join(secrets.choice(ALPHABET) for _ in range(10))
    instruction = {"invoice": invoice, "supplier": inv.get("supplier"), "iban": inv.get("supplier_iban"),
                   "amount": inv.get("amount"), "currency": inv.get("currency"), "reference": reference}
    request = urllib.request.Request(url, data=json.dumps(instruction).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=20) as answer:
            answer.read()
    except OSError as exc:
        fail(f"the bank did not take the instruction ({exc}): nothing sent", 5)
    OUTBOX.parent.mkdir(exist_ok=True)
    with OUTBOX.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({**instruction, "sent_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}) + "\n")
    MARKER.touch()
    print(f"Payment instruction for {invoice} handed to the bank; waiting for the settlement confirmation ...",
          flush=True)
    time.sleep(SETTLE_S)
    MARKER.unlink(missing_ok=True)
    print(f"Settled: {inv.get('amount')} {inv.get('currency')} paid to {inv.get('supplier')} for {invoice}, "
          f"payment reference {reference}.")


args = sys.argv[1:]
if len(args) == 2 and args[0] == "--status":
    status(args[1])
elif len(args) == 1 and not args[0].startswith("-"):
    pay(args[0])
else:
    fail("usage: ./pay.sh <invoice> | ./pay.sh --status <invoice>", 64)
PY
