"""The ideal agent for T3-shipment-label-002.

It reads order.json through the shell, parses the JSON it was shown (Unicode, escapes, nulls
and nesting exactly as they appear), sends the ``shipment`` object verbatim as the
create_shipment arguments (so ``reference`` is absent because the order has none, and
``recipient.company`` is an explicit null), and writes the tracking number it was shown into
shipment.json. Nothing is assumed: every value comes from an observation.
Where the harness lists the tool without its input (OpenClaw's ``tool_search``), it first reads
the schema with the harness's describe tool (``learn_schema``), as an agent sending exact values would.
"""

import json

from tracetrial.policy import await_mcp, call_tool, final, learn_schema, shell, write_file

TRACKING_RE = r'tracking(?:\\|")*\s*:\s*(?:\\|")*(TRK-[A-Za-z0-9]+)'


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
    shipment = order.get("shipment") if order else None
    if not isinstance(shipment, dict):
        yield write_file("shipment.json", json.dumps({"tracking": None}))
        yield final("I could not read the shipment from order.json; no shipment was created.")
        return
    yield from await_mcp(turn, "shipping")
    yield from learn_schema(turn, "create_shipment")
    out = yield call_tool("shipping", "create_shipment", shipment)
    tracking = None if (out.absent or out.missing or out.is_error) else out.find(TRACKING_RE)
    yield write_file("shipment.json", json.dumps({"tracking": tracking}))
    if tracking:
        yield final(f"Shipment created for order {order.get('order_id')}: tracking {tracking}.")
    else:
        yield final("The carrier returned no tracking number; shipment.json records none.")
