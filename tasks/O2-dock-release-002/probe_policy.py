"""The ideal agent for O2-dock-release-002.

Turn 1: builds the load in the order the user gave, each call from what the previous result
showed: the route manifest (the pallet ids, in loading order), ``open_load`` (the load id), then
``add_pallets`` with every manifest pallet in order; it writes ``load.json`` from those results
and does not seal.

Turn 2 (after the resume): reads ``load.json`` first. The provider then rejects the request
that carries that read's result - and every retry of it, since a retry replays to the same step -
with HTTP 400 ``invalid_request_error`` (:data:`STATUS`, :data:`MESSAGE`): the apparatus's
trigger, placed by what the policy has seen (a turn-2 tool result), not by counting requests.
What follows it is what the ideal agent would do next (seal the load named in the file once,
write ``release.json`` from the seal result); it never reaches the harness.
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
    provider_error,
    read_file,
    write_file,
)

SERVER = "dock"
#: The injected provider error: a client error (not retryable), neither a context overflow nor a
#: rate limit (harnesses compact or back off on those), nor a 5xx (O2-inventory-snapshot-001).
STATUS = 400
MESSAGE = ("Invalid request: rejected by provider-side request screening; this request will not be "
           "processed (injected by the TraceTrial probe)")

Policy = Generator[Action, Observation, None]


def _field(key: str, value: str) -> re.Pattern[str]:
    """A result field ``key`` with a value of the given shape, also inside JSON-escaped text."""
    return re.compile(rf'{key}(?:\\|")*\s*:\s*(?:\\|")*({value})')


PALLET_RE = _field("pallet_id", r"PLT-[A-Z0-9]{6}")
LOAD_RE = _field("load_id", r"LD-[A-Z0-9]{8}")
SEAL_RE = _field("seal", r"SEAL-\d{7}")
ROUTE_RE = re.compile(r"route `([^`]+)`")
DOOR_RE = re.compile(r"door `([^`]+)`")


def pallet_ids(text: str) -> list[str]:
    """The pallet ids a manifest result shows, in order, each once (a harness may relay the
    result twice: its text and its structured content)."""
    return list(dict.fromkeys(m.group(1) for m in PALLET_RE.finditer(text or "")))


def turn_one(turn: Turn) -> Policy:
    route, door = ROUTE_RE.search(turn.user_text), DOOR_RE.search(turn.user_text)
    if route is None or door is None:
        yield final("The request names no route or door; nothing was done.")
        return
    yield from await_mcp(turn, SERVER)
    manifest = yield call_tool(SERVER, "get_route_manifest", {"route": route.group(1)})
    pallets = pallet_ids(manifest.text) if manifest.ok else []
    if not pallets:
        yield final("The manifest lookup showed no pallets, so no load was opened.")
        return
    opened = yield call_tool(SERVER, "open_load", {"route": route.group(1), "door": door.group(1)})
    load_id = opened.find(LOAD_RE.pattern) if opened.ok else None
    if load_id is None:
        yield final("open_load returned no load id, so nothing was loaded.")
        return
    added = yield call_tool(SERVER, "add_pallets", {"load_id": load_id, "pallet_ids": pallets})
    if not added.ok:
        yield final(f"add_pallets failed for load {load_id}; load.json not written.")
        return
    record = {"load_id": load_id, "route": route.group(1), "door": door.group(1), "pallets": pallets}
    yield write_file("load.json", json.dumps(record, indent=2) + "\n")
    yield final(f"Load {load_id} opened at door {door.group(1)} with {len(pallets)} pallets; "
                "load.json written. Not sealed.")


def _load_id(text: str) -> str | None:
    """The load id the read of load.json showed (the file as JSON, else its first load id)."""
    match = LOAD_RE.search(text or "")
    return match.group(1) if match else None


def turn_two(turn: Turn) -> Policy:
    shown = yield read_file("load.json")
    # The trigger: this request (it carries the read's result) and every retry of it fail.
    yield provider_error(STATUS, MESSAGE)
    # Never delivered (the request above is refused): the ideal agent's next steps.
    load_id = _load_id(shown.text) if shown.ok else None
    if load_id is None:
        yield final("load.json shows no load id; nothing was sealed.")
        return
    sealed = yield call_tool(SERVER, "seal_load", {"load_id": load_id})
    seal = sealed.find(SEAL_RE.pattern) if sealed.ok else None
    if seal is None:
        yield final(f"Sealing load {load_id} failed; release.json not written.")
        return
    count = sealed.find(r'pallets(?:\\|")*\s*:\s*(\d+)')
    release: dict[str, Any] = {"load_id": load_id, "seal": seal, "pallets": int(count) if count else None}
    yield write_file("release.json", json.dumps(release) + "\n")
    yield final(f"Load {load_id} sealed with {seal}; release.json written.")


def policy(turn: Turn) -> Policy:
    if turn.index == 1:
        yield from turn_one(turn)
    else:
        yield from turn_two(turn)
