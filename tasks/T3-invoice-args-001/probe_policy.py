"""The ideal agent for T3-invoice-args-001.

It reads order.json through the shell, parses the JSON it was shown (exact integers, Unicode
and null as they appear), sends the ``invoice`` object verbatim as the create_invoice
arguments (so ``po_number`` is absent because the order has none), and writes the receipt
it was shown into invoice.json. Nothing is assumed: every value comes from an observation.
Where the harness lists the tool without its input (OpenClaw's ``tool_search``), it first reads
the schema with the harness's describe tool (``learn_schema``), as an agent sending exact values would.
"""

import json

from tracetrial.policy import call_tool, final, learn_schema, shell, write_file

RECEIPT_RE = r'receipt(?:\\|")*\s*:\s*(?:\\|")*([A-Za-z0-9][A-Za-z0-9_-]*)'


def shown_json(text):
    """The JSON object inside a shell result (harnesses add headers such as ``Output:``)."""
    text = text or ""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        value = json.loads(text[start:end + 1])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def policy(turn):
    res = yield shell("cat order.json")
    order = shown_json(res.text)
    invoice = order.get("invoice") if order else None
    if not isinstance(invoice, dict):
        yield write_file("invoice.json", json.dumps({"receipt": None}))
        yield final("I could not read the invoice from order.json; no invoice was created.")
        return
    yield from learn_schema(turn, "create_invoice")
    out = yield call_tool("billing", "create_invoice", invoice)
    receipt = None if (out.absent or out.missing or out.is_error) else out.find(RECEIPT_RE)
    yield write_file("invoice.json", json.dumps({"receipt": receipt}))
    if receipt:
        yield final(f"Invoice created for order {order.get('order_id')}: receipt {receipt}.")
    else:
        yield final("The billing service returned no receipt; invoice.json records none.")
