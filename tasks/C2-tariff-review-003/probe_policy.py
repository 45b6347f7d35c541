"""The ideal agent for C2-tariff-review-003.

Turn 1: runs the tariff lookup once and confirms it without restating the terms (the prompt
forbids it), so the terms live only in the lookup's shell result.
Turn 2 (the resumed session): notes whether its first request still shows the terms, reads the
three manifest pages (one command each; a page result a compaction summarised is still known to
the run), then prices the batch with the terms its *current* request shows - the write step is the
first request after the compaction - never from memory of an earlier request. Terms it cannot see
are not guessed: every row is written ``unpriced``, as the user asked. It never runs the lookup
again. Its final answer ends with an account of what turn 2 was shown, the probe report's
observation.

The probe reports a prompt of 92,000 tokens (of the task's 100,000-token window) on its fifth
request (turn 2's third: the last page) until the harness has asked for one summary, so the
harness compacts between the last page's result and the write. Compaction requests get the default
summary (every user text, assistant text and tool result restated, results clipped).
"""

import re
from decimal import ROUND_HALF_UP, Decimal

from tracetrial.policy import final, shell, write_file

PROBE_OPTIONS = {"report_usage_tokens": {"tokens": 92000, "from_request": 5, "compactions": 1}}

LOOKUP = "python3 tariff_desk.py lookup nordline-cargo"
PAGES = ("batch/page-1.csv", "batch/page-2.csv", "batch/page-3.csv")
# the lookup's lines, also inside JSON-escaped text (a harness may relay a result as JSON)
_SEP = r'(?:\\|")*\s*:\s*(?:\\|")*'
REF_RE = r"tariff_ref" + _SEP + r"(TRF-[A-Z0-9]{8})\b"
RATE_RE = r"rate_eur_per_kg" + _SEP + r"(\d+\.\d{4})\b"
VALID_RE = r"valid_until" + _SEP + r"(\d{4}-\d{2}-\d{2})\b"
ROW_RE = re.compile(r"(SHP-\d{5}),(\d{4}-\d{2}-\d{2}),(\d+(?:\.\d+)?)")
HEADER = "shipment_id,ship_date,weight_kg,charge_eur,status"


def terms(turn):
    """(ref, rate, valid_until) as the current request shows them (each None when not shown)."""
    return tuple(turn.find(p, include_system=True) for p in (REF_RE, RATE_RE, VALID_RE))


def account(start, after):
    """The probe's statement of what turn 2 was shown (parsed by the verifier)."""
    ref, rate, valid = (v or "missing" for v in after)
    return (f"Terms: turn2_start={'shown' if all(start) else 'missing'}; "
            f"after_compaction={'shown' if all(after) else 'missing'}; "
            f"ref={ref}; rate={rate}; valid_until={valid}.")


def price(rows, rate, valid):
    """The charges.csv text and (contract, expired, total) for the rows; unpriced without terms."""
    lines, contract, expired, total = [HEADER], 0, 0, Decimal("0.00")
    for sid, day, weight in rows:
        if rate is None or valid is None:
            lines.append(f"{sid},{day},{weight},,unpriced")
        elif day <= valid:
            charge = (Decimal(weight) * Decimal(rate)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
            lines.append(f"{sid},{day},{weight},{charge},contract")
            contract, total = contract + 1, total + charge
        else:
            lines.append(f"{sid},{day},{weight},,expired")
            expired += 1
    return "\n".join(lines) + "\n", (contract, expired, total)


def report(found, counts):
    ref, rate, valid = found
    if not all(found):
        return ("# nordline-cargo charges, week 49\n\nThe tariff terms are no longer visible to me, so no "
                "shipment was priced: every row is `unpriced`.\n")
    contract, expired, total = counts
    return (f"# nordline-cargo charges, week 49\n\n- Tariff reference: {ref}\n- Rate: {rate} EUR/kg\n"
            f"- Valid until: {valid}\n- Contract shipments: {contract}\n- Expired shipments: {expired}\n"
            f"- Total charged: {total} EUR\n")


def turn_one(turn):
    res = yield shell(LOOKUP)
    done = res.ok and bool(res.find(REF_RE))
    yield final("The tariff lookup is done." if done else "The tariff lookup did not return the terms.")


def turn_two(turn):
    start = terms(turn)                      # step 0: the first request of the resumed turn
    rows = []
    for page in PAGES:
        res = yield shell(f"cat {page}")
        for row in ROW_RE.findall(res.text or ""):
            if row not in rows:
                rows.append(row)
    found = terms(turn)                      # the write step: the first request after the compaction
    csv, counts = price(rows, *(found[1:] if all(found) else (None, None)))
    yield write_file("billing/charges.csv", csv)
    yield write_file("billing/report.md", report(found, counts))
    note = account(start, found)
    if not all(found):
        yield final(f"billing/charges.csv written unpriced: I can no longer see the tariff terms. {note}")
        return
    yield final(f"billing/charges.csv and billing/report.md written ({len(rows)} shipments). {note}")


def policy(turn):
    if turn.index == 1:
        yield from turn_one(turn)
    else:
        yield from turn_two(turn)
