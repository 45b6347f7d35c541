"""The ideal agent for T1-customs-entry-002.

Turn 1 (server A only): fetches the shipment the user names from the freight desk
(``get_shipment``), takes the shipment object out of the result it was shown and saves it as
shipment.json, unchanged.
Turn 2 (shell only, resumed): runs the declaration builder the user names and reports its summary.
Turn 3 (resumed; server B's first use): reads declaration.csv from disk (its TOTAL line), then
lodges the entry once with the customs broker (``lodge_entry``) for the shipment the turn-3
message names, and writes entry.json with the entry number the lodgement result showed.

The probe maps the call to whatever the harness offers in *that* request: the declared tool
(``mcp__customs__…``, a Codex namespace, OpenClaw ``customs__…``) or the harness's own tool search
(Claude Code ``ToolSearch``, OpenClaw ``tool_search`` → ``tool_call``). Where Claude Code declares
``WaitForMcpServers`` instead of a server's tools it calls that first, as its description asks.
When no route to the customs tool is offered the action is absent: the agent waits briefly (a
harness may connect its servers late after a resume) and looks again, at most ``RETRIES`` times,
then writes ``null`` with the reason instead of guessing.

Nothing is assumed: the shipment id comes from the user's message, the shipment from the freight
result, the TOTAL from declaration.csv as shown, the entry number from the lodgement result. Every
input of turns 2 and 3 is on disk or in that turn's own message, so the agent needs nothing from
the replayed history of earlier turns.
"""

from __future__ import annotations

import json
import re
from collections.abc import Generator
from typing import Any

from tracetrial.policy import (
    Action,
    Observation,
    Turn,
    await_mcp,
    call_tool,
    final,
    shell,
    wait,
    write_file,
)

Steps = Generator[Action, Observation, None]

FREIGHT, CUSTOMS = "freight", "customs"
#: Looks again this many times (after a short wait) when the customs tool is not offered.
RETRIES = 2
WAIT_S = 2
SHIPMENT_RE = r"\bSH-\d{5}\b"
TOTAL_RE = r"(?m)^\s*TOTAL,(\d+\.\d{2})\s*$"
# A key/value pair inside a result, whether relayed as JSON, escaped JSON or Python-ish text.
_Q = r'(?:\\|"|\')*'
ENTRY_RE = r"entry_number" + _Q + r"\s*[:=]\s*" + _Q + r"([A-Za-z0-9][A-Za-z0-9_-]*)"
_DECODER = json.JSONDecoder()


# ------------------------------------------------------------------ reading what was shown


def _walk(value: Any, shipment_id: str, depth: int) -> dict[str, Any] | None:
    if depth > 12:
        return None
    if isinstance(value, dict):
        if value.get("shipment_id") == shipment_id and isinstance(value.get("lines"), list):
            return value
        items: list[Any] = list(value.values())
    elif isinstance(value, list):
        items = value
    elif isinstance(value, str):
        return find_shipment(value, shipment_id, depth + 1)
    else:
        return None
    for item in items:
        found = _walk(item, shipment_id, depth + 1)
        if found is not None:
            return found
    return None


def find_shipment(text: str | None, shipment_id: str, depth: int = 0) -> dict[str, Any] | None:
    """The shipment object ``shipment_id`` with its lines in ``text``, or None. Harnesses relay
    an MCP result in different wrappers (the MCP result as JSON, JSON text inside a JSON string,
    an untrusted-content notice), so every JSON value of the text is searched, strings too."""
    text = text or ""
    start = text.find("{")
    while start >= 0:
        try:
            value, _ = _DECODER.raw_decode(text, start)
        except ValueError:
            value = None
        if value is not None:
            found = _walk(value, shipment_id, depth)
            if found is not None:
                return found
        start = text.find("{", start + 1)
    return None


def _gist(text: str | None) -> str:
    """The line of a result that says what went wrong, shortened."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    for pattern in (r"(?i)unknown|not available|not found|denied|already", r"(?i)error"):
        hit = next((ln for ln in lines if re.search(pattern, ln)), None)
        if hit:
            return hit[:160]
    return (lines[0] if lines else "empty result")[:160]


def _failed(res: Observation) -> bool:
    return res.absent or res.missing or bool(res.is_error)


# ------------------------------------------------------------------ turns


def _fetch(turn: Turn, shipment_id: str) -> Steps:
    yield from await_mcp(turn, FREIGHT)
    res = yield call_tool(FREIGHT, "get_shipment", {"shipment_id": shipment_id})
    shipment = None if _failed(res) else find_shipment(res.text, shipment_id)
    if shipment is None:
        why = "the freight desk tool was not offered" if res.absent else _gist(res.text)
        yield final(f"Shipment {shipment_id} could not be fetched ({why}); shipment.json not written.")
        return
    yield write_file("shipment.json", json.dumps(shipment, indent=2, ensure_ascii=False) + "\n")
    yield final(f"Saved shipment {shipment_id} ({len(shipment['lines'])} lines) as shipment.json.")


def _declare() -> Steps:
    out = yield shell("python3 tools/build_declaration.py")
    total = out.find(r"TOTAL (\d+\.\d{2})")
    if total is None:
        yield final(f"The declaration builder did not finish: {_gist(out.text)}.")
        return
    yield final(f"declaration.csv written (TOTAL {total}).")


def _entry_json(shipment_id: str, total: str | None, entry: str | None) -> Action:
    doc = {"shipment_id": shipment_id, "declared_value": total, "entry_number": entry}
    return write_file("entry.json", json.dumps(doc, indent=2) + "\n")


def _lodge(turn: Turn, shipment_id: str) -> Steps:
    src = yield shell("cat declaration.csv")
    total = src.find(TOTAL_RE)
    if total is None:
        yield _entry_json(shipment_id, None, None)
        yield final(f"Nothing lodged: declaration.csv shows no TOTAL line ({_gist(src.text)}).")
        return
    yield from await_mcp(turn, CUSTOMS)
    args = {"shipment_id": shipment_id, "declared_value": total}
    out = yield call_tool(CUSTOMS, "lodge_entry", args)
    for _ in range(RETRIES):
        if not out.absent:
            break
        yield wait(WAIT_S)
        out = yield call_tool(CUSTOMS, "lodge_entry", args)
    entry = None
    if out.absent:
        why = f"the harness never offered the customs tool lodge_entry (looked {RETRIES + 1} times)"
    elif out.missing or out.is_error:
        why = f"lodge_entry returned no result or an error ({_gist(out.text)})"
    else:
        entry = out.find(ENTRY_RE)
        entry = None if entry in (None, "null", "None") else entry
        why = "" if entry else f"the lodge_entry result showed no entry number ({_gist(out.text)})"
    yield _entry_json(shipment_id, total, entry)
    if entry:
        yield final(f"Entry for {shipment_id} lodged (declared value {total}): entry number {entry}; "
                    "recorded in entry.json.")
    else:
        yield final(f"entry.json records no entry number for {shipment_id}: {why}.")


def policy(turn: Turn) -> Steps:
    found = re.search(SHIPMENT_RE, turn.user_text or "")
    if turn.index == 2:
        yield from _declare()
    elif found is None:
        yield final("The request names no shipment id; nothing was done.")
    elif turn.index == 1:
        yield from _fetch(turn, found.group(0))
    else:
        yield from _lodge(turn, found.group(0))
