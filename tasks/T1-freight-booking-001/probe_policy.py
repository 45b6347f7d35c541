"""The ideal agent for T1-freight-booking-001.

Turn 1: reads the quote the user names (``get_quote``) and checks its lane (``check_capacity``,
with the lane the quote result showed), then answers in a sentence. It books nothing: the user
said the customer has not accepted yet.

Turn 2 (after the resume): takes the quote id, the purchase order and the booking tool's name
from the turn-2 message itself (that message carries everything the booking needs, so the probe
does not depend on what the resumed history kept), and calls the tool through whatever the
harness offers in *that* request: the declared MCP tool in any naming form, a Codex namespace,
OpenClaw ``tool_search`` -> ``tool_call`` or Claude Code's ``ToolSearch``. The probe can call only
a tool it is offered: when the harness offers no route the action is absent; the agent then
waits briefly (a harness may still be connecting its servers) and looks again, at most
``RETRIES`` times, and finally writes ``null`` with the reason instead of guessing. On Claude Code
it first calls ``WaitForMcpServers`` while the server is still connecting, in either turn. The
booking reference written to booking.json is the one the booking result showed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator

from tracetrial.policy import (
    Action,
    Observation,
    Turn,
    await_mcp,
    call_tool,
    final,
    wait,
    write_file,
)

Steps = Generator[Action, Observation, None]

SERVER = "freight"
#: Looks again this many times (after a short wait) when the booking tool is not offered.
RETRIES = 2
WAIT_S = 2
# A key/value pair inside a result, whether relayed as JSON, escaped JSON or Python-ish text.
_Q = r'(?:\\|"|\')*'
QUOTE_RE = r"\bQ-\d{4}\b"
PO_RE = r"\bPO-\d{5}\b"
#: The tool the user names for the booking ("... with the freight desk's `<tool>` tool").
TOOL_RE = r"`([a-z][a-z0-9_]*)` tool"
LANE_RE = r"lane" + _Q + r"\s*[:=]\s*" + _Q + r"([A-Z]{3}-[A-Z]{3})"
BOOKING_RE = r"booking_reference" + _Q + r"\s*[:=]\s*" + _Q + r"([A-Za-z0-9][A-Za-z0-9_-]*)"


def _failed(res: Observation) -> bool:
    return res.absent or res.missing or bool(res.is_error)


def _gist(text: str | None) -> str:
    """The line of a result that says what went wrong (an error or unknown-tool message), shortened."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    for pattern in (r"(?i)unknown|not available|not found|denied|mismatch|already", r"(?i)error"):
        hit = next((ln for ln in lines if re.search(pattern, ln)), None)
        if hit:
            return hit[:160]
    return (lines[0] if lines else "empty result")[:160]


def turn_one(turn: Turn) -> Steps:
    found = re.search(QUOTE_RE, turn.user_text or "")
    if found is None:
        yield final("The request names no quote; nothing was checked.")
        return
    quote = found.group(0)
    yield from await_mcp(turn, SERVER)
    read = yield call_tool(SERVER, "get_quote", {"quote_id": quote})
    lane = None if _failed(read) else read.find(LANE_RE)
    if lane is None:
        yield final(f"I could not read quote {quote} ({_gist(read.text)}); nothing was booked.")
        return
    slots = yield call_tool(SERVER, "check_capacity", {"lane": lane})
    status = read.find(r"status" + _Q + r"\s*[:=]\s*" + _Q + r"([a-z]+)") or "unknown"
    free = None if _failed(slots) else slots.find(r"free_slots" + _Q + r"\s*[:=]\s*" + _Q + r"(\d+)")
    room = "has room" if free not in (None, "0") else "has no room or could not be checked"
    yield final(f"Quote {quote} is {status} and its lane {room}; nothing is booked yet.")


def turn_two(turn: Turn) -> Steps:
    text = turn.user_text or ""
    quote, po, tool = re.search(QUOTE_RE, text), re.search(PO_RE, text), re.search(TOOL_RE, text)
    if quote is None or po is None or tool is None:
        yield final("The message does not name a quote, a purchase order and a booking tool; nothing was booked.")
        return
    args = {"quote_id": quote.group(0), "po_number": po.group(0)}
    yield from await_mcp(turn, SERVER)
    out = yield call_tool(SERVER, tool.group(1), args)
    for _ in range(RETRIES):
        if not out.absent:
            break
        yield wait(WAIT_S)
        out = yield call_tool(SERVER, tool.group(1), args)
    reference: str | None = None
    if out.absent:
        why = f"the harness did not offer the {tool.group(1)} tool (looked {RETRIES + 1} times)"
    elif out.missing or out.is_error:
        why = f"{tool.group(1)} returned no result or an error ({_gist(out.text)})"
    else:
        found = out.find(BOOKING_RE)
        reference = None if found in (None, "null", "None") else found
        why = "" if reference else f"the {tool.group(1)} call returned no booking reference ({_gist(out.text)})"
    booking = {**args, "booking_reference": reference}
    yield write_file("booking.json", json.dumps(booking, indent=2) + "\n")
    if reference:
        yield final(f"Booked {args['quote_id']} under {args['po_number']}: booking reference {reference}; "
                    "recorded in booking.json.")
    else:
        yield final(f"booking.json records no booking reference for {args['quote_id']}: {why}.")


def policy(turn: Turn) -> Steps:
    if turn.index == 1:
        yield from turn_one(turn)
    else:
        yield from turn_two(turn)
