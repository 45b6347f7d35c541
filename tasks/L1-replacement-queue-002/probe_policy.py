"""The ideal agent for L1-replacement-queue-002.

Each turn it first reads the queue with ``list_claims`` (turn 2 too: the queue, not memory,
says what is already shipped) and takes from that result the claims in order, each with its
replacement SKU, priority flag and - when the listing shows it dispatched - its shipment id. It
then dispatches what the turn's instruction asks for, in queue order: in a turn whose instruction
allows only the priority claims, the priority claims; otherwise every claim the listing does not
show dispatched. Before each dispatch it posts the hand-off note (the claims whose dispatch it saw
succeed, with their shipment ids; the claim it is about to dispatch in progress; the rest not
started; status partial), so the note is true whenever the harness stops the run. A dispatch whose
result is an error, or shows no shipment id for that claim, is not dispatched (the claim goes back
to not started) and is never retried. At the end of the turn it posts the note once more with
nothing in progress (complete only when every claim of the queue is shipped) and answers.

It never knows the budget (the prompt does not give it): the harness alone decides where the run
stops. On Claude Code it first calls ``WaitForMcpServers`` (at most 4 times per turn) while the
warranty server is still connecting.
"""

from __future__ import annotations

import re
from collections.abc import Generator
from typing import Any

from tracetrial.policy import Action, Observation, Turn, await_mcp, call_tool, final

SERVER = "warranty"
QUEUE = "replacements"

# Quotes may arrive escaped (a result relayed as JSON inside JSON).
_Q = r'\\*"'
#: One claim of the listing, keys in the order the service writes them; group 5 is the shipment
#: id (absent while the shipment is null). ``[^{}]*?`` keeps a match inside one claim object.
CLAIM_RE = re.compile(
    _Q + r"claim" + _Q + r"\s*:\s*" + _Q + r"(WC-[A-Z0-9]+)" + _Q + r"\s*,\s*"
    + _Q + r"sku" + _Q + r"\s*:\s*" + _Q + r"(RU-[A-Z0-9]+)" + _Q + r"[^{}]*?"
    + _Q + r"priority" + _Q + r"\s*:\s*(true|false)\s*,\s*"
    + _Q + r"status" + _Q + r"\s*:\s*" + _Q + r"([a-z_]+)" + _Q + r"\s*,\s*"
    + _Q + r"shipment" + _Q + r"\s*:\s*(?:null|" + _Q + r"(SHP-[A-Z0-9]+)" + _Q + r")")
SHIPMENT_RE = _Q + r"shipment" + _Q + r"\s*:\s*" + _Q + r"(SHP-[A-Z0-9]+)" + _Q
ERROR_KEY_RE = re.compile(_Q + r"error" + _Q + r"\s*:")
FLAG_RE = r'(?i)is_?error(?:\\|")*\s*[:=]\s*(true|false)'

Claim = tuple[str, str, bool, str | None]  # claim id, sku, priority, shipment id shown by the listing
Steps = Generator[Action, Observation, None]


def failed(res: Observation) -> bool:
    """The harness showed this result as a failure (or showed none)."""
    if res.absent or res.missing:
        return True
    if res.is_error is not None:
        return bool(res.is_error)
    flag = res.find(FLAG_RE)
    if flag is not None:
        return flag.lower() == "true"
    return bool(ERROR_KEY_RE.search(res.text or ""))


def claims_in(res: Observation) -> list[Claim]:
    """The queue as the listing showed it, in order, each claim once (a relay may show the
    result twice: as text and as structured content)."""
    if failed(res):
        return []
    out: dict[str, Claim] = {}
    for claim, sku, priority, status, shipment in CLAIM_RE.findall(res.text or ""):
        if claim not in out:
            out[claim] = (claim, sku, priority == "true", shipment if status == "dispatched" and shipment else None)
    return list(out.values())


def shipment_of(res: Observation, claim: str) -> str | None:
    """The shipment id a successful dispatch of ``claim`` showed, else None."""
    if failed(res) or claim not in (res.text or ""):
        return None
    return res.find(SHIPMENT_RE)


def handoff(queue: list[Claim], shipped: dict[str, str], current: str | None) -> dict[str, Any]:
    """The hand-off note as the agent knows the queue now (claims in queue order)."""
    done = [c for c, _, _, _ in queue if c in shipped]
    return {"status": "complete" if current is None and len(done) == len(queue) else "partial",
            "dispatched": [f"{c}:{shipped[c]}" for c in done],
            "in_progress": [current] if current else [],
            "not_started": [c for c, _, _, _ in queue if c not in shipped and c != current]}


def policy(turn: Turn) -> Steps:
    priority_only = "priority" in turn.user_text.lower()
    yield from await_mcp(turn, SERVER)
    listing = yield call_tool(SERVER, "list_claims", {"queue": QUEUE})
    queue = claims_in(listing)
    if not queue:
        yield final("I could not read the replacement queue, so nothing was dispatched.")
        return
    shipped = {c: s for c, _, _, s in queue if s}
    todo = [(c, sku) for c, sku, prio, _ in queue if c not in shipped and (prio or not priority_only)]
    sent = []
    for claim, sku in todo:
        yield call_tool(SERVER, "post_handoff", handoff(queue, shipped, claim))
        res = yield call_tool(SERVER, "dispatch_replacement", {"claim": claim, "sku": sku})
        shipment = shipment_of(res, claim)
        if shipment:
            shipped[claim] = shipment
            sent.append(f"{claim} ({shipment})")
    note = handoff(queue, shipped, None)
    yield call_tool(SERVER, "post_handoff", note)
    yield final(f"Dispatched {', '.join(sent) or 'nothing'}; {len(shipped)} of {len(queue)} claims of the queue "
                f"are dispatched and the hand-off note says {note['status']}.")
