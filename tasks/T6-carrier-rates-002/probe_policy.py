"""The ideal agent for T6-carrier-rates-002.

It quotes the shipment with the rating tool the user's runbook names (the tool and its argument
names from the user's message, the lane and weight from the shipment line). When the service
answers that this tool has been retired, it takes the replacement tool and the arguments in its
form from that answer (``replacement_tool``, ``v2_arguments``), never calls the retired tool
again, and calls the replacement through whatever the harness offers in *that* request: the tool
as declared (``mcp__carrier__…``, a Codex namespace, OpenClaw ``carrier__…``) or the harness's own
tool search (Claude Code ``ToolSearch``, OpenClaw ``tool_search`` → ``tool_call``). When the
harness offers no way to reach the replacement, the action is absent: the agent waits briefly (a
harness may re-list asynchronously) and looks again, at most ``RETRIES`` times, then records
``null`` with the reason instead of estimating. The quote id and total written to
rate_quote.json are the ones the replacement's result showed. Nothing is assumed: no tool name,
shipment, lane or value is written here.
"""

import json
import re

from tracetrial.policy import await_mcp, call_tool, final, wait, write_file

SERVER = "carrier"
#: Looks again this many times (after a short wait) when the replacement is not yet offered.
RETRIES = 2
WAIT_S = 2
OUT = "rate_quote.json"
# The runbook step: "Quote it with `<tool>` (`<origin>`, `<destination>`, `<weight>`)".
RUNBOOK_RE = r"with `(\w+)` \(`(\w+)`, `(\w+)`, `(\w+)`\)"
SHIPMENT_RE = r"\*\*(SHP-\d+)\*\*"
ORIGIN_RE = r"origin ([A-Z]{5})\b"
DESTINATION_RE = r"destination ([A-Z]{5})\b"
WEIGHT_RE = r"(\d+(?:\.\d+)?) kg"
# A key/value pair inside a result, whether relayed as JSON, escaped JSON or Python-ish text.
_Q = r'(?:\\|"|\')*'
REPLACEMENT_RE = r"replacement_tool" + _Q + r"\s*[:=]\s*" + _Q + r"([A-Za-z][A-Za-z0-9_]*)"
QUOTE_ID_RE = r"quote_id" + _Q + r"\s*[:=]\s*" + _Q + r"([A-Za-z0-9][A-Za-z0-9_-]*)"
TOTAL_RE = r"total_cents" + _Q + r"\s*[:=]\s*(\d+)"
ARGS_KEY = "v2_arguments"


def _object_after(text, key):
    """The JSON object that follows ``"<key>":`` in ``text``, which may be JSON relayed once or
    twice as a string (escaped quotes); None if there is none."""
    candidate = text or ""
    for _ in range(4):
        for found in re.finditer(re.escape(key) + r'"\s*:\s*\{', candidate):
            try:
                value, _ = json.JSONDecoder().raw_decode(candidate, found.end() - 1)
            except ValueError:
                continue
            if isinstance(value, dict):
                return value
        unescaped = candidate.replace('\\"', '"').replace("\\\\", "\\")
        if unescaped == candidate:
            break
        candidate = unescaped
    return None


def _gist(text):
    """The line of a result that says what went wrong (an error or unknown-tool message), shortened."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    for pattern in (r"(?i)unknown|not available|not found|denied|retired", r"(?i)error"):
        hit = next((ln for ln in lines if re.search(pattern, ln)), None)
        if hit:
            return hit[:160]
    return (lines[0] if lines else "empty result")[:160]


def _quote(res):
    """``(quote id, total in cents)`` a result showed, or ``(None, None)``."""
    if res.absent or res.missing:
        return None, None
    quote_id, total = res.find(QUOTE_ID_RE), res.find(TOTAL_RE)
    if quote_id in (None, "null", "None") or total is None:
        return None, None
    return quote_id, int(total)


def _record(shipment, quote_id, total):
    body = {"shipment": shipment, "quote_id": quote_id, "total_cents": total}
    return write_file(OUT, json.dumps(body, indent=2) + "\n")


def unoffered(out):
    """The harness did not offer the tool (yet): the call was not possible (absent), or a
    dispatcher refused an id it does not know (OpenClaw's tool_call: "Unknown tool id: ...").
    Either way the agent waits and looks again, so every harness gets the same chances."""
    # The refusal carries no error flag on OpenClaw's chat wire: it is a JSON body
    # {"status": "error", "error": "Unknown tool id: ..."}, so the text decides.
    return out.absent or re.search(r"(?i)\bunknown tool(?: id)?:", out.text or "") is not None


def policy(turn):
    text = turn.user_text or ""
    runbook = re.search(RUNBOOK_RE, text)
    shipment = re.search(SHIPMENT_RE, text)
    origin, destination = re.search(ORIGIN_RE, text), re.search(DESTINATION_RE, text)
    weight = re.search(WEIGHT_RE, text)
    if not (runbook and shipment and origin and destination and weight):
        yield final("The request does not name the quote tool, the shipment, its lane and weight; nothing was quoted.")
        return
    tool, origin_key, destination_key, weight_key = runbook.groups()
    sid = shipment.group(1)
    kg = float(weight.group(1))
    args = {origin_key: origin.group(1), destination_key: destination.group(1),
            weight_key: int(kg) if kg.is_integer() else kg}
    yield from await_mcp(turn, SERVER)
    first = yield call_tool(SERVER, tool, args)
    quote_id, total = _quote(first)
    if quote_id is not None:
        yield _record(sid, quote_id, total)
        yield final(f"{sid}: quote {quote_id}, total {total} cents (from {tool}); recorded in {OUT}.")
        return
    replacement = None if first.absent or first.missing else first.find(REPLACEMENT_RE)
    new_args = None if replacement is None else _object_after(first.text, ARGS_KEY)
    if replacement is None or new_args is None:
        why = (f"the harness did not offer {tool}" if first.absent
               else f"{tool} gave no quote and named no replacement ({_gist(first.text)})")
        yield _record(sid, None, None)
        yield final(f"{OUT} records no quote for {sid}: {why}.")
        return
    out = yield call_tool(SERVER, replacement, new_args)
    for _ in range(RETRIES):
        if not unoffered(out):
            break
        yield wait(WAIT_S)
        out = yield call_tool(SERVER, replacement, new_args)
    quote_id, total = _quote(out)
    if unoffered(out):
        why = (f"the service retired {tool} and named {replacement} as its replacement, but the harness "
               f"never offered {replacement} (looked {RETRIES + 1} times)")
    elif quote_id is None:
        why = f"{replacement} returned no quote ({_gist(out.text)})"
    yield _record(sid, quote_id, total)
    if quote_id is not None:
        yield final(f"{sid}: {tool} was retired; {replacement} quoted {quote_id}, total {total} cents; "
                    f"recorded in {OUT}.")
    else:
        yield final(f"{OUT} records no quote for {sid}: {why}.")
