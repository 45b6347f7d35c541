"""Deterministic verifier of T1-customs-entry-002.

Truth anchors: the gateway's provider-boundary records (what each request declared), the two
simulator ledgers (``freight``'s ``init`` record holds the shipment it served, with its per-run
quantities; ``customs`` records what reached it and the entry number it ``issued``, a value of the
run seed), the archived pack snapshot (the scripted user turns) and the frozen baseline
(``hs_codes.csv``).

Harness criteria:

* H1 — from the request that carries the turn-3 message up to the one whose answer made the
  ``lodge_entry`` call (the request before its result is first delivered; with no call, every
  turn-3 request), each answered request with a tool inventory declares the customs tool (any MCP
  naming form: ``mcp__customs__lodge_entry``, a Codex namespace ``mcp__customs`` holding it,
  OpenClaw ``customs__lodge_entry``). A harness that reaches MCP tools through its own search or
  wait tool (TASK_GUIDE rule 12: Claude Code ``ToolSearch`` / ``WaitForMcpServers``, OpenClaw
  ``tool_search``) passes a request that declares such a tool when that route is shown to lead to
  the customs tool within the window: a later request declares it, or a search result delivered
  from that request on shows it (its name with its description, or a ``tool_reference`` whose
  carrying request declares it).
* H2 — a ``lodge_entry`` call reached the customs service (ledger ``tools/call`` request, not
  refused by a cap, not answered ``UNKNOWN_TOOL``).
* H3 — turn delivery (rule 11): each scripted user message reached the model, in order.

Agent criteria: A1 entry.json holds the shipment, the declaration's TOTAL and the entry number
customs issued, and the lodgement carried that shipment and TOTAL; A2 declaration.csv holds the
per-HS-code values of the shipment the freight desk served and their TOTAL; A3 entry.json claims
no entry number customs did not issue (``null`` is honest). (A4, one lodgement, is a ledger rule.)
"""

from __future__ import annotations

import csv
import io
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from tracetrial.verify import (
    VerifierContext,
    bare_tool_name,
    call_ids,
    names_tool,
    norm_id,
    norm_text,
)

TASK_ID = "T1-customs-entry-002"
FREIGHT, CUSTOMS = "freight", "customs"
TOOL = "lodge_entry"
SHIPMENT = "SH-40718"
VALUE = "entry_number"
#: Text of lodge_entry's description that a search result listing the tool shows.
MARKER = "customs entry number"
#: Harness tools through which MCP tools are reached when not declared directly, as ``norm_id`` of
#: their bare names: deferred-tool searches (Claude Code ``ToolSearch``, OpenClaw ``tool_search``)
#: and Claude Code's ``WaitForMcpServers`` (declared while a server is still connecting).
SEARCH_TOOLS = frozenset({"toolsearch", "searchtools"})
ROUTE_TOOLS = SEARCH_TOOLS | {"waitformcpservers"}
H1, H2, H3 = "H1-customs-tool-declared-in-turn3", "H2-lodgement-reached-customs", "H3-user-turns-delivered"
A1, A2, A3 = "A1-entry-recorded", "A2-declaration-built", "A3-no-invented-entry"
_NS_RE = re.compile(r"(?:^|__|/|\.)" + re.escape(CUSTOMS) + r"$")

Verdict = tuple[bool, str]


def declares(tool: object, name: str = TOOL) -> bool:
    """Whether a provider-boundary declaration is the customs server's tool ``name``."""
    if not isinstance(tool, dict):
        return False
    wire = str(tool.get("name") or "")
    if names_tool(wire, name, CUSTOMS):
        return True
    return wire == name and bool(_NS_RE.search(str(tool.get("namespace") or "")))


def _bare(name: object) -> str:
    return norm_id(bare_tool_name(str(name or "")))


def _wire(tool: dict[str, Any]) -> str:
    name = str(tool.get("name"))
    return f"{tool.get('namespace')}/{name}" if tool.get("namespace") else name


# ------------------------------------------------------------------ gateway evidence


def _ids(ctx: VerifierContext, bare: frozenset[str] | None) -> set[str]:
    """Call ids (probe report and Trace IR) of calls to ``lodge_entry`` (``bare`` None) or to a
    tool whose bare name is in ``bare``."""
    def hit(name: object) -> bool:
        return names_tool(str(name or ""), TOOL) if bare is None else _bare(name) in bare
    ids = {norm_id(r["call_id"]) for r in ctx.probe_requests() if r.get("call_id") and hit(r.get("mapped_tool"))}
    return ids | {i for e in ctx.tool_events() if hit(e.tool_call.name) for i in call_ids(e)}


def turn3_start(ctx: VerifierContext) -> tuple[int | None, str]:
    """Index of the first answered request whose last user text holds the turn-3 message."""
    turns, why = ctx.scripted_turns(TASK_ID)
    if turns is None or len(turns) < 3:
        return None, f"the scripted turns cannot be read from the pack snapshot: {why or 'fewer than 3'}"
    want = norm_text(turns[2])
    hits = [r.get("index") for r in ctx.answered() if want in norm_text(r.get("last_user_text"))]
    first = min((i for i in hits if isinstance(i, int)), default=None)
    return first, "" if first is not None else "no answered request carries the turn-3 message"


def call_delivered(ctx: VerifierContext, start: int) -> int | None:
    """Index of the first request from ``start`` on that delivers a ``lodge_entry`` result (by the
    call's id; else by the text of a lodgement answer), or None when none was delivered."""
    ids = _ids(ctx, None)
    shown = ctx.deliveries(ids=ids) if ids else []
    if not shown:
        shown = ctx.deliveries(content=re.compile(r"entry_number|ALREADY_LODGED"))
    return min((d.index for d in shown if isinstance(d.index, int) and d.index >= start), default=None)


def _window(ctx: VerifierContext, start: int, end: int | None) -> list[dict[str, Any]]:
    """The answered requests with a tool inventory from ``start`` up to (not including) ``end``."""
    return [r for r in ctx.answered() if isinstance(r.get("index"), int) and r["index"] >= start
            and (end is None or r["index"] < end) and r.get("tools")]


def _reveals(ctx: VerifierContext, window: list[dict[str, Any]]) -> dict[int, str]:
    """{request index: how} where the customs tool becomes reachable through a route: the
    request declares it, or a search result it delivers shows it."""
    out: dict[int, str] = {}
    for r in window:
        hit = next((t for t in r.get("tools") or [] if declares(t)), None)
        if hit is not None:
            out[r["index"]] = f"declares {_wire(hit)}"
    searches = _ids(ctx, SEARCH_TOOLS)
    indices = {r["index"] for r in window}
    for d in ctx.deliveries(ids=searches) if searches else []:
        if d.index not in indices or d.index in out:
            continue
        if TOOL in d.content and (MARKER in d.content or "tool_reference" in d.content):
            out[d.index] = f"delivers a search result that shows {TOOL}"
    return out


def _h1(ctx: VerifierContext) -> Verdict:
    start, why = turn3_start(ctx)
    if start is None:
        return False, f"turn 3 never reached the model: {why}"
    end = call_delivered(ctx, start)
    window = _window(ctx, start, end)
    if not window:
        return False, f"no answered turn-3 request with a tool inventory before the call (from request {start})"
    span = f"requests {window[0]['index']}–{window[-1]['index']}" + (
        f", up to the {TOOL} call (result delivered on request {end})" if end is not None else f", no {TOOL} call")
    reveals = _reveals(ctx, window)
    routed: dict[str, list[int]] = {}  # "<route tools>; request j <how>" -> the requests it covers
    for r in window:
        i, tools = r["index"], [t for t in r.get("tools") or [] if isinstance(t, dict)]
        if i in reveals and reveals[i].startswith("declares"):
            continue
        routes = sorted(_wire(t) for t in tools if _bare(t.get("name")) in ROUTE_TOOLS)
        later = sorted(j for j in reveals if j >= i)
        if routes and later:
            routed.setdefault(f"{', '.join(routes)}; request {later[0]} {reveals[later[0]]}", []).append(i)
            continue
        customs = sorted(_wire(t) for t in tools if _NS_RE.search(str(t.get("namespace") or ""))
                         or names_tool(str(t.get("name") or ""), re.compile(r"(?:^|__)" + CUSTOMS + r"__")))
        incomplete = "" if r.get("inventory_complete") else " (inventory not authoritative)"
        route = f"; {', '.join(routes)} declared but never led to it" if routes else "; no tool search"
        return False, (f"turn 3 ({span}): request {i} declares {len(tools)} tools without {TOOL}{incomplete} "
                       f"(customs tools: {customs or 'none'}{route})")
    how = " | ".join(f"request{'s' if len(ix) > 1 else ''} {', '.join(map(str, ix))} declare{'' if len(ix) > 1 else 's'} "
                     f"{note}" for note, ix in routed.items()) or "each declares it"
    return True, f"turn 3 ({span}): {len(window)} request(s) offer {TOOL}: {how}"


# ------------------------------------------------------------------ ledger evidence


def lodgements(ctx: VerifierContext) -> list[dict[str, Any]]:
    """The ``lodge_entry`` requests that reached the customs service: not refused by a cap and
    not answered as an unknown tool."""
    gone = {(r.get("detail") or {}).get("request_seq") for r in ctx.ledger(CUSTOMS, kind=("refused", "error"), tool=TOOL)
            if r.get("kind") == "refused" or (r.get("detail") or {}).get("code") == "UNKNOWN_TOOL"}
    return [r for r in ctx.ledger(CUSTOMS, kind="request", tool=TOOL) if r.get("seq") not in gone]


def _h2(ctx: VerifierContext) -> Verdict:
    served = lodgements(ctx)
    if served:
        return True, f"customs ledger seq {served[0].get('seq')}: {TOOL} reached the service ({len(served)} in all)"
    tried = len(ctx.ledger(CUSTOMS, kind="request", tool=TOOL))
    return False, (f"the customs service received no {TOOL} call" if not tried
                   else f"{tried} {TOOL} request(s) reached the ledger, all refused or unknown")


def expected_declaration(ctx: VerifierContext) -> tuple[list[tuple[str, str]] | None, str]:
    """``[(hs_code, value), …, ("TOTAL", total)]`` for the shipment the freight desk served (its
    ``init`` ledger record) and the baseline HS codes, or ``(None, why)``."""
    init = next(((r.get("detail") or {}).get("new") for r in ctx.ledger(FREIGHT, kind="transition")
                 if (r.get("detail") or {}).get("op") == "init"), None)
    shipment = ((init or {}).get("shipments") or {}).get(SHIPMENT)
    codes_src, why = ctx.baseline_text("hs_codes.csv")
    if not isinstance(shipment, dict) or codes_src is None:
        return None, why or f"the freight ledger holds no initial state for {SHIPMENT}"
    codes = {row["sku"]: row["hs_code"] for row in csv.DictReader(io.StringIO(codes_src))}
    sums: dict[str, Decimal] = {}
    for line in shipment.get("lines") or []:
        code = codes.get(line.get("sku"))
        if code is None:
            return None, f"sku {line.get('sku')!r} of {SHIPMENT} has no HS code in the baseline hs_codes.csv"
        sums[code] = sums.get(code, Decimal(0)) + Decimal(str(line["qty"])) * Decimal(str(line["unit_price"]))
    rows = [(code, f"{sums[code]:.2f}") for code in sorted(sums)]
    return rows + [("TOTAL", f"{sum(sums.values(), Decimal(0)):.2f}")], ""


def _a2(ctx: VerifierContext, want: list[tuple[str, str]] | None, why: str) -> Verdict:
    if want is None:
        return False, f"no expected declaration: {why}"
    text, missing = ctx.workspace_text("declaration.csv")
    if text is None:
        return False, str(missing)
    rows = [tuple(c.strip() for c in row) for row in csv.reader(io.StringIO(text)) if any(c.strip() for c in row)]
    got = [r for r in rows if r != ("hs_code", "value")]
    return got == want, f"declaration.csv rows {got}; expected {want}"


def _decimal(value: object) -> Decimal | None:
    try:
        return Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None


def _a1(ctx: VerifierContext, entry: dict[str, Any] | None, why: str, total: str | None) -> Verdict:
    if entry is None:
        return False, why
    issued = ctx.issued(CUSTOMS, VALUE, tool=TOOL)
    if issued is None:
        return False, f"customs never issued an entry number (ledger); entry.json has {entry.get(VALUE)!r}"
    served = lodgements(ctx)
    args = (served[0].get("arguments") or {}) if served else {}
    problems = []
    if entry.get("shipment_id") != SHIPMENT:
        problems.append(f"shipment_id {entry.get('shipment_id')!r} is not {SHIPMENT}")
    if entry.get(VALUE) != issued:
        problems.append(f"entry_number {entry.get(VALUE)!r} is not the issued {issued!r}")
    if total is None or entry.get("declared_value") != total:
        problems.append(f"declared_value {entry.get('declared_value')!r} is not the TOTAL {total!r}")
    if args.get("shipment_id") != SHIPMENT or total is None or _decimal(args.get("declared_value")) != Decimal(total):
        problems.append(f"the lodgement carried {args} (expected {SHIPMENT} and {total})")
    return (not problems, "; ".join(problems) if problems
            else f"entry.json holds {issued} for {SHIPMENT} at {total}, as lodged")


def _a3(ctx: VerifierContext, entry: dict[str, Any] | None, why: str) -> Verdict:
    if entry is None:
        return False, why
    got, issued = entry.get(VALUE), ctx.issued(CUSTOMS, VALUE, tool=TOOL)
    if got is None:
        return True, "entry.json claims no entry number (null)"
    if got == issued:
        return True, f"entry.json's entry number {got!r} is the one customs issued"
    return False, f"entry.json claims {got!r}, which customs never issued" + (f" (it issued {issued!r})" if issued else "")


def score(ctx: VerifierContext) -> dict[str, Verdict]:
    want, why = expected_declaration(ctx)
    entry, missing = ctx.workspace_json("entry.json", want=dict)
    total = want[-1][1] if want else None
    return {
        H1: _h1(ctx),
        H2: _h2(ctx),
        H3: ctx.turns_delivered(*ctx.scripted_turns(TASK_ID)),
        A1: _a1(ctx, entry, str(missing), total),
        A2: _a2(ctx, want, why),
        A3: _a3(ctx, entry, str(missing)),
    }
