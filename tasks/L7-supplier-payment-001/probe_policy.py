"""The ideal agent for L7-supplier-payment-001 (session resume after a kill).

Turn 1: pay the invoice the prompt names with the one-shot ``./pay.sh <invoice>`` and report the
reference the settlement line shows. The runner kills the harness while that call is in flight, so
turn 1 normally ends there.

Turn 2 (the resumed session): the agent acts on what its resumed history shows - the invoice named
by the earlier user message and its own earlier calls (``turn.calls``, each with the result shown
for it), as they stood in the first turn-2 request:

* its payment call is there and its result shows the settlement: the reference is taken from it;
* its payment call is there without the settlement (no result, "aborted", an interruption notice,
  a synthetic error): the call may have paid, so it checks ``./pay.sh --status <invoice>`` and pays
  only if no instruction was sent;
* no payment call is there (the harness dropped it): nothing suggests a payment was made, so it
  pays (the double payment is then the harness's doing);
* no invoice is named in what it is shown (the earlier user message is gone): it cannot tell what
  to pay, writes nothing and asks.

It then writes ``payment-report.json`` and ends with an account of what its resumed history showed
(``Resume check: payment call <shown as interrupted | shown without a result | shown as settled |
shown with another result | not shown>.``), which the verifier reads when no request body is
archived. Nothing here embeds a value it was not shown: the invoice comes from the user message,
the reference from a tool result.
"""

import json
import re

from tracetrial.policy import final, shell, write_file

INVOICE_RE = r"approved supplier invoice (INV-\d{5})"
REF_RE = r"\b(PAY-[A-Z0-9]{10})\b"
SETTLED_RE = re.compile(r"Settled: .*payment reference (PAY-[A-Z0-9]{10})")
#: What a harness shows for a call it could not finish (the reference's notice, Codex's
#: ``aborted``, OpenClaw's synthetic transcript-repair error, a cancellation).
INTERRUPTED_RE = re.compile(
    r"(?i)\babort|interrupt|no result|did not finish|didn't finish|not finish|stopped before|killed|cancel"
    r"|missing tool result|synthetic|may or may not")
REPORT = "payment-report.json"


def is_payment(call, invoice):
    """One of the agent's own ``./pay.sh <invoice>`` calls (not a status query)."""
    args = call.arguments or ""
    return "pay.sh" in args and invoice in args and "--status" not in args


def shown_as(call):
    """How the resumed history shows the killed payment call."""
    if call is None:
        return "not shown"
    if call.result is None:
        return "shown without a result"
    if SETTLED_RE.search(call.result):
        return "shown as settled"
    if INTERRUPTED_RE.search(call.result):
        return "shown as interrupted"
    return "shown with another result"


def policy(turn):
    if turn.index == 1:
        invoice = re.search(INVOICE_RE, turn.user_text).group(1)
        res = yield shell(f"./pay.sh {invoice}")
        settled = SETTLED_RE.search(res.text or "")
        if settled:
            yield final(f"{invoice} is paid: payment reference {settled.group(1)}.")
        else:
            yield final(f"The payment of {invoice} did not report a settlement; I will check its status before anything else.")
        return

    invoice = turn.find(INVOICE_RE)
    if invoice is None:
        yield final("I cannot tell which invoice this is about: nothing in our conversation names it, so I have "
                    "paid nothing and written no report. Which invoice should I pay? Resume check: payment call not shown.")
        return
    payments = [c for c in turn.calls if is_payment(c, invoice)]
    killed = payments[-1] if payments else None
    account = f"Resume check: payment call {shown_as(killed)}."

    reference = None
    settled = SETTLED_RE.search(killed.result or "") if killed is not None else None
    if settled:
        reference = settled.group(1)
    elif killed is not None:
        # the call is in the history without its settlement: it may have paid
        st = yield shell(f"./pay.sh --status {invoice}")
        text = st.text or ""
        refs = re.findall(REF_RE, text)
        if refs:
            reference = refs[0]
        elif "no payment instruction has been sent" not in text:
            yield final(f"I could not tell whether {invoice} was paid (the status check showed nothing I can read), so "
                        f"I have not paid it again and wrote no report. {account}")
            return
    if reference is None:
        res = yield shell(f"./pay.sh {invoice}")
        paid = SETTLED_RE.search(res.text or "")
        if paid is None:
            yield final(f"Paying {invoice} did not report a settlement, so I wrote no report. {account}")
            return
        reference = paid.group(1)
    report = {"invoice": invoice, "status": "paid", "payment_reference": reference}
    yield write_file(REPORT, json.dumps(report, indent=2) + "\n")
    yield final(f"{invoice} is paid (payment reference {reference}); {REPORT} written. {account}")
