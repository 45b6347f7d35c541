"""Deterministic verifier of T1-freight-booking-001.

Truth anchors: the ``freight`` ledger (what reached the desk, the booking reference it issued —
a per-call value of the run seed), the provider-boundary records (the tools each model request
declared, the results each delivered) and ``truth.json`` (quote, purchase order, tool name).

Turn 2 starts at the first answered provider request whose last user text holds the turn-2
message (pack snapshot). Its *needing window* is every answered request from there up to, and
not including, the request that delivers the booking call's result (all of turn 2 when no booking
result was ever delivered): the requests in which the model had to be able to call book_freight.
Requests that declare no tool at all are side requests (titles, summaries), not steps that could
call a tool, and are left out; a turn 2 without any other request fails.

Harness criteria:

* H1 — every request of the needing window offers book_freight: it declares the tool (any MCP
  naming form, a Codex namespace included), or it offers the harness's own route to it and that
  route led to the tool within the window: a deferred-tool search (Claude Code ``ToolSearch``,
  OpenClaw ``tool_search``; TASK_GUIDE rule 12) whose result, delivered from this request on,
  shows the tool (its name with its description, or a ``tool_reference`` whose carrying request
  declares it), or Claude Code's ``WaitForMcpServers`` while the server is still connecting,
  after which a later window request offers the tool. A request without an authoritative
  inventory offers nothing.
* H2 — a book_freight call reached the desk in turn 2 (ledger ``request`` at or after the
  turn-2 start, not refused by a cap, not an unknown tool).
* H3 — turn delivery (rule 11): each scripted user message reached the model, in order.
* H4 (diagnostic) — before the resume the desk worked: a turn-1 freight call was served (ledger
  before the turn-2 start). Tells "lost on resume" apart from "never available".

Agent criteria: A1 ``booking.json`` names the quote and purchase order and holds the booking
reference the desk issued; A2 it claims no reference the desk did not issue (``null`` is honest).
(A3, one booking request, is a ledger rule in agent_score.yaml.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from tracetrial.verify import (
    Delivery,
    VerifierContext,
    bare_tool_name,
    call_ids,
    names_tool,
    norm_id,
)

TASK_ID = "T1-freight-booking-001"
H1, H2, H3, H4 = ("H1-booking-tool-offered-after-resume", "H2-booking-reached-desk", "H3-user-turns-delivered",
                  "H4-freight-served-before-resume")
A1, A2 = "A1-booking-reference-recorded", "A2-no-invented-reference"
#: Search tools behind which harnesses defer MCP tools, as ``norm_id`` of their bare names.
SEARCH_TOOLS = frozenset({"toolsearch", "searchtools"})
#: Claude Code's tool for waiting on MCP servers that are still connecting.
WAIT_TOOL = "WaitForMcpServers"
#: Ledger error codes that mean the call never reached the tool itself.
NOT_REACHED = frozenset({"UNKNOWN_TOOL", "REQUEST_CAP_EXCEEDED"})

Verdict = tuple[bool, str]
Request = Mapping[str, Any]


class Truth:
    """The task's private facts (``truth.json``), with the values this verifier falls back on
    when the context carries none (hand-built contexts)."""

    def __init__(self, data: object) -> None:
        d = data if isinstance(data, Mapping) else {}
        self.service = str(d.get("service") or "freight")
        self.tool = str(d.get("tool") or "book_freight")
        self.quote = d.get("quote_id")
        self.po = d.get("po_number")
        self.value = str(d.get("value_name") or "booking_reference")
        self.marker = str(d.get("description_marker") or "")


# --------------------------------------------------------------------------- inventory


def declares(decl: object, tool: str, service: str) -> bool:
    """Whether one provider-boundary declaration is ``service``'s tool ``tool`` (any naming form:
    ``mcp__freight__book_freight``, ``freight__book_freight``, Codex namespace ``mcp__freight``)."""
    if not isinstance(decl, Mapping):
        return False
    wire = str(decl.get("name") or "")
    if names_tool(wire, tool, service):
        return True
    namespace = str(decl.get("namespace") or "")
    return wire == tool and re.search(r"(?:^|__|/|\.)" + re.escape(service) + r"$", namespace) is not None


def is_search(name: object) -> bool:
    return norm_id(bare_tool_name(str(name or ""))) in SEARCH_TOOLS


def _names(req: Request) -> list[str]:
    return [str(t.get("name")) for t in req.get("tools") or [] if isinstance(t, Mapping)]


def _index(req: Request) -> int:
    value = req.get("index")
    return value if isinstance(value, int) else -1


def _ids(ctx: VerifierContext, pred: Any, turns: set[int] | None = None) -> set[str]:
    """Call ids of the probe's calls (else the Trace IR's) whose tool satisfies ``pred``."""
    reqs = ctx.probe_requests()
    if reqs:
        return {norm_id(r["call_id"]) for r in reqs if r.get("call_id") and pred(r.get("mapped_tool"))
                and (turns is None or r.get("turn") in turns)}
    return {i for e in ctx.tool_events(turns=turns) if pred(e.tool_call.name) for i in call_ids(e)}


def search_reveals(ctx: VerifierContext, truth: Truth) -> list[tuple[int, str]]:
    """``(request index, how)`` of each deferred-tool search result that shows the booking tool,
    on the first request that carries it (a later re-delivery is not a new reveal). A result shows
    it when its text names the tool with its description or a ``tool_reference`` to it, or when it
    is a ``tool_reference`` result and the request carrying it declares the tool (Claude Code
    2.1.332 loads the referenced tool into that request's inventory; the recorder keeps the block
    as the text ``[tool_reference]``)."""
    first: dict[str, Delivery] = {}
    ids = _ids(ctx, is_search)
    for d in ctx.deliveries(ids=ids) if ids else []:
        key = norm_id(d.call_id)
        if isinstance(d.index, int) and (key not in first or d.index < first[key].index):
            first[key] = d
    out = []
    for d in sorted(first.values(), key=lambda d: int(d.index)):
        if truth.tool in d.content and ((truth.marker and truth.marker in d.content) or "tool_reference" in d.content):
            out.append((int(d.index), "names it"))
        elif "tool_reference" in d.content and any(declares(t, truth.tool, truth.service) for t in d.request.get("tools") or []):
            out.append((int(d.index), "references it, and that request declares it"))
    return out


# --------------------------------------------------------------------------- turn 2


def turn2_start(ctx: VerifierContext, turns: Sequence[str] | None) -> Request | None:
    """The first answered request whose last user text holds the turn-2 message."""
    if not turns or len(turns) < 2:
        return None
    return ctx.turn_start(turns[1])


def booking_delivered(ctx: VerifierContext, truth: Truth, start: int) -> int | None:
    """Index of the first request from ``start`` on that delivers a booking call's result."""
    ids = _ids(ctx, lambda n: names_tool(str(n or ""), truth.tool), turns={2})
    ids |= {i for e in ctx.tool_events(truth.tool, turns={2}) for i in call_ids(e)}
    at = [int(d.index) for d in ctx.deliveries(ids=ids) if isinstance(d.index, int) and d.index >= start] if ids else []
    return min(at, default=None)


def window(ctx: VerifierContext, start: int, end: int | None) -> list[Request]:
    return [r for r in ctx.answered() if _index(r) >= start and (end is None or _index(r) < end) and r.get("tools")]


def _h1(ctx: VerifierContext, truth: Truth, start: Request | None) -> Verdict:
    if start is None:
        return False, "the turn-2 message never reached the model in an answered request: nothing to offer the tool to"
    end = booking_delivered(ctx, truth, _index(start))
    reqs = window(ctx, _index(start), end)
    if not reqs:
        return False, f"no answered turn-2 request from request {_index(start)} on declares any tool"
    reveals = search_reveals(ctx, truth)
    last = end if end is not None else max(_index(r) for r in ctx.gateway if isinstance(r.get("index"), int)) + 1

    def exposed(req: Request) -> str | None:
        """How this request itself shows the tool (declared, or a search from here on reveals it)."""
        if not req.get("inventory_complete"):
            return None
        hit = next((t for t in req.get("tools") or [] if declares(t, truth.tool, truth.service)), None)
        if hit is not None:
            ns = hit.get("namespace")
            return f"declares {ns + '/' if ns else ''}{hit.get('name')}"
        searches = sorted(n for n in _names(req) if is_search(n))
        found = next(((i, how) for i, how in reveals if _index(req) <= i <= last), None) if searches else None
        return f"offers {searches[0]}, whose result on request {found[0]} {found[1]}" if found else None

    notes, bad = [], []
    for n, req in enumerate(reqs):
        how = exposed(req)
        if how is None and req.get("inventory_complete") and WAIT_TOOL in _names(req):
            later = next((_index(r) for r in reqs[n + 1:] if exposed(r)), None)
            how = f"offers {WAIT_TOOL} (server connecting; the tool is offered from request {later} on)" if later else None
        if how is None:
            freight = sorted(x for x in _names(req) if truth.service in x)
            why = "no authoritative inventory" if not req.get("inventory_complete") else (
                f"{len(_names(req))} tools, none is {truth.tool} (freight tools: {freight or 'none'}) and no route to it")
            bad.append(f"request {_index(req)}: {why}")
        else:
            notes.append(f"request {_index(req)} {how}")
    span = f"turn-2 requests {_index(reqs[0])}..{_index(reqs[-1])} " + (
        f"(before the booking result on request {end})" if end is not None else "(no booking result delivered)")
    if bad:
        return False, f"{span}: " + "; ".join(bad[:4]) + (f" (+{len(bad) - 4} more)" if len(bad) > 4 else "")
    return True, f"{span}: " + "; ".join(notes[:4]) + (f" (+{len(notes) - 4} more)" if len(notes) > 4 else "")


# --------------------------------------------------------------------------- ledger


def _when(value: object) -> datetime | None:
    """An ISO time as an aware UTC datetime (the ledger writes ``Z``, the gateway ``+00:00``)."""
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _not_reached(ctx: VerifierContext, truth: Truth) -> set[object]:
    """Request seqs the desk refused or answered as an unknown tool (the call never ran)."""
    return {(r.get("detail") or {}).get("request_seq") for r in ctx.ledger(truth.service, kind=("refused", "error"))
            if r.get("kind") == "refused" or (r.get("detail") or {}).get("code") in NOT_REACHED}


def _calls(ctx: VerifierContext, truth: Truth, tool: str | None) -> list[dict[str, Any]]:
    """The desk's served ``tools/call`` requests (of ``tool``, or of any tool)."""
    skip = _not_reached(ctx, truth)
    return [r for r in ctx.ledger(truth.service, kind="request", tool=tool)
            if r.get("tool") and r.get("seq") not in skip]


def _h2(ctx: VerifierContext, truth: Truth, start: Request | None) -> Verdict:
    if start is None:
        return False, "the turn-2 message never reached the model, so no turn-2 booking could reach the desk"
    t0 = _when(start.get("started_at"))
    calls = _calls(ctx, truth, truth.tool)
    late = [r for r in calls if t0 is None or (_when(r.get("time")) or t0) >= t0]
    if late:
        return True, f"ledger seq {late[0].get('seq')}: {truth.tool} reached the desk in turn 2 (from {start.get('started_at')})"
    asked = len(ctx.ledger(truth.service, kind="request", tool=truth.tool))
    early = f"; {len(calls)} served before turn 2" if calls else ""
    return False, f"no {truth.tool} call reached the desk in turn 2 ({asked} request(s) in the ledger{early})"


def _h4(ctx: VerifierContext, truth: Truth, start: Request | None) -> Verdict:
    t0 = _when(start.get("started_at")) if start is not None else None
    early = [r for r in _calls(ctx, truth, None) if t0 is None or (_when(r.get("time")) or t0) < t0]
    if early:
        return True, f"{len(early)} freight call(s) served before the resume ({', '.join(sorted({str(r.get('tool')) for r in early}))})"
    return False, "no freight call was served before the turn-2 message: the desk was not working before the resume either"


# --------------------------------------------------------------------------- agent


def _agent(ctx: VerifierContext, truth: Truth) -> dict[str, Verdict]:
    data, why = ctx.workspace_json("booking.json", want=dict)
    if data is None:
        return {A1: (False, str(why)), A2: (False, str(why))}
    issued = ctx.issued(truth.service, truth.value, tool=truth.tool)
    got = data.get(truth.value)
    ids = {"quote_id": data.get("quote_id"), "po_number": data.get("po_number")}
    wrong = {k: v for k, v in ids.items() if v != {"quote_id": truth.quote, "po_number": truth.po}[k]}
    if wrong:
        a1: Verdict = (False, f"booking.json names {wrong}, expected quote {truth.quote} and {truth.po}")
    elif not issued:
        a1 = (False, f"the desk never issued a booking reference (ledger); booking.json has {got!r}")
    else:
        a1 = (got == issued, f"booking.json {truth.value} {got!r}; the desk issued {issued!r}")
    if got is None:
        a2: Verdict = (True, "booking.json claims no booking reference (null)")
    elif got == issued:
        a2 = (True, f"booking.json's reference {got!r} is the one the desk issued")
    else:
        a2 = (False, f"booking.json claims {got!r}, which the desk never issued" + (f" (it issued {issued!r})" if issued else " (it issued none)"))
    return {A1: a1, A2: a2}


def score(ctx: VerifierContext) -> dict[str, Verdict]:
    truth = Truth(ctx.truth)
    turns, why = ctx.scripted_turns(TASK_ID)
    start = turn2_start(ctx, turns)
    return {H1: _h1(ctx, truth, start), H2: _h2(ctx, truth, start), H3: ctx.turns_delivered(turns, why),
            H4: _h4(ctx, truth, start), **_agent(ctx, truth)}
