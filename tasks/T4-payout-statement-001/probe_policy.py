"""The ideal agent for T4-payout-statement-001.

It fetches the week's settlement statement once (``get_settlement``), takes the statement
object out of the result it was shown — parsed as JSON, so every digit, string, integer, null
and absent key is exactly as shown — and writes ``reconciliation.json`` from it: the batch id,
the bank reference, the settled payouts copied unchanged and the held payout ids. Nothing is
assumed: every value comes from the observation. When the result shows no statement (only
the human summary reached it), it writes nothing and says so.

Harnesses relay an MCP result in different wrappers (the MCP result as JSON, its text parts
joined, JSON text inside a JSON string, ``Output:`` headers, an untrusted-content notice), so
the statement is searched for in every JSON value of the text and inside JSON strings there.
"""

import json

from tracetrial.policy import await_mcp, call_tool, final, write_file

SERVER = "settlements"
WEEK = "2026-W48"
_DECODER = json.JSONDecoder()


def is_statement(obj):
    """A settlement statement: a string batch id and a list of payouts (a schema has neither)."""
    return isinstance(obj.get("batch_id"), str) and isinstance(obj.get("payouts"), list)


def _walk(value, depth):
    if depth > 12:
        return None
    if isinstance(value, dict):
        if is_statement(value):
            return value
        items = list(value.values())
    elif isinstance(value, list):
        items = value
    elif isinstance(value, str):
        return find_statement(value, depth + 1)
    else:
        return None
    for item in items:
        found = _walk(item, depth + 1)
        if found is not None:
            return found
    return None


def find_statement(text, depth=0):
    """The first statement object in ``text`` (also inside JSON strings found there), or None."""
    text = text or ""
    start = text.find("{")
    while start >= 0:
        try:
            value, _ = _DECODER.raw_decode(text, start)
        except ValueError:
            value = None
        if value is not None:
            found = _walk(value, depth)
            if found is not None:
                return found
        start = text.find("{", start + 1)
    return None


def reconciliation(statement):
    payouts = [p for p in statement["payouts"] if isinstance(p, dict)]
    return {
        "batch_id": statement["batch_id"],
        "bank_reference": statement.get("bank_reference"),
        "settled": [p for p in payouts if p.get("status") == "settled"],
        "held": [p.get("payout_id") for p in payouts if p.get("status") == "held"],
    }


def policy(turn):
    yield from await_mcp(turn, SERVER)
    shown = yield call_tool(SERVER, "get_settlement", {"week": WEEK})
    failed = shown.absent or shown.missing or bool(shown.is_error)
    statement = None if failed else find_statement(shown.text)
    if statement is None:
        what = "no result" if (shown.absent or shown.missing) else "an error" if shown.is_error else \
            "only a summary without the structured statement"
        yield final(f"get_settlement gave me {what}: I do not have the bank reference or the exact payout "
                    "values, so I did not write reconciliation.json.")
        return
    recon = reconciliation(statement)
    # ASCII escapes: the file's JSON value is the same, and no shell or tool path can re-encode it
    yield write_file("reconciliation.json", json.dumps(recon, ensure_ascii=True, indent=2) + "\n")
    yield final(f"Settlement {recon['batch_id']} reconciled: {len(recon['settled'])} settled payout(s) copied "
                f"exactly, held: {', '.join(map(str, recon['held'])) or 'none'}.")
