"""Deterministic verifier of T6-carrier-rates-002.

Truth anchor: the ``carrier`` ledger. Its ``transition`` of ``state.rating_api`` to ``v2`` marks the
moment the tool list changed (the ``quote_rate_v1`` request that met the scheduled cutover: v1 is
withdrawn, ``quote_rate_v2`` listed instead, the change announced), its ``tools/list`` requests show
what the harness asked the server for and what it was told, its ``tools/call`` requests what
reached the service, and its ``issued`` records the one-off quote id and total (values of the run
seed) that only ``quote_rate_v2`` returns.

Harness criteria (all read at the first answered provider request that carries the retirement
result to the model — the model's first decision after the change):

* H1 — the replacement is offered: that request declares ``quote_rate_v2`` (any MCP naming form:
  ``mcp__carrier__…``, a Codex namespace ``mcp__carrier`` holding it, OpenClaw ``carrier__…``). A
  harness that defers MCP tools behind its own search tool (TASK_GUIDE rule 12: Claude Code
  ``ToolSearch``, OpenClaw ``tool_search``) passes if that request declares the search tool and a
  search result delivered after it shows the replacement (its name with its description, or a
  ``tool_reference`` whose carrying request declares it).
* H2 — the retired tool is withdrawn: that request no longer declares ``quote_rate_v1`` (any naming
  form) and no search result delivered after it offers ``quote_rate_v1``.
* H3 — a ``quote_rate_v2`` call reached the service after the change (ledger), served (not refused,
  not ``UNKNOWN_TOOL``).
* H4 (diagnostic) — the harness listed the server's tools again after the change and was told of
  the new list (ledger ``tools/list`` after the transition naming v2 and not v1): tells "never
  re-listed" apart from "re-listed but did not pass it on to the model".

Agent criteria: A1 ``rate_quote.json`` names the shipment and holds the quote id and total the v2
tool issued; A2 it claims no quote the service did not issue (``null`` is honest, an estimate is
not). (A3, the retired tool called once and never again, is a ledger rule in agent_score.yaml.)
"""

import re

from tracetrial.verify import bare_tool_name, call_ids, names_tool, norm_id

SERVICE = "carrier"
RETIRED = "quote_rate_v1"
NEW = "quote_rate_v2"
SHIPMENT = "SHP-40817"
OUT = "rate_quote.json"
#: The error code of the retirement answer (the result that carries the change to the model).
RETIRE_CODE = "API_VERSION_RETIRED"
#: Text of the new tool's description a search result shows when it lists the tool.
MARKER = "rating API v2"
#: Search tools behind which harnesses defer MCP tools, as ``norm_id`` of their bare names
#: (Claude Code ``ToolSearch``, OpenClaw ``tool_search``, ``search_tools``).
SEARCH_TOOLS = frozenset({"toolsearch", "searchtools"})
_NS_RE = re.compile(r"(?:^|__|/|\.)" + re.escape(SERVICE) + r"$")


def declares(tool, name):
    """Whether a provider-boundary declaration is the carrier server's tool ``name``."""
    if not isinstance(tool, dict):
        return False
    wire = tool.get("name") or ""
    if names_tool(wire, name, SERVICE):
        return True
    return wire == name and bool(_NS_RE.search(tool.get("namespace") or ""))


def is_search(name):
    return norm_id(bare_tool_name(name)) in SEARCH_TOOLS


def wire_name(tool):
    return f"{tool.get('namespace')}/{tool.get('name')}" if tool.get("namespace") else str(tool.get("name"))


# ------------------------------------------------------------------ evidence


def cutover(ctx):
    """``(request seq, transition seq)`` of the v1 request that retired v1, or None."""
    for rec in ctx.ledger(SERVICE, kind="transition", tool=RETIRED):
        detail = rec.get("detail") or {}
        if detail.get("path") == "state.rating_api" and detail.get("new") == "v2":
            return detail.get("request_seq"), rec.get("seq")
    return None


def _ids(ctx, pred):
    """Call ids of the probe's (else the trace's) calls whose tool satisfies ``pred``."""
    if ctx.probe_requests():
        return {norm_id(r["call_id"]) for r in ctx.probe_requests() if r.get("call_id") and pred(r.get("mapped_tool"))}
    return {i for e in ctx.tool_events() if pred(e.tool_call.name) for i in call_ids(e)}


def retirement_delivery(ctx):
    """The first delivery of the retirement answer in an answered request (the first request after
    the change), or None. Found by the v1 call's id, else by its text (the error code)."""
    answered = {r.get("index") for r in ctx.answered()}
    ids = _ids(ctx, lambda n: names_tool(n, RETIRED))
    shown = ctx.deliveries(ids=ids) if ids else []
    shown = [d for d in shown if RETIRE_CODE in d.content] or ctx.deliveries(content=RETIRE_CODE)
    shown = [d for d in shown if d.index in answered and isinstance(d.index, int)]
    return min(shown, key=lambda d: d.index, default=None)


def search_results(ctx, after):
    """Search results delivered after request ``after``, each on the first request that carries
    it only (so a tool that appears later for another reason is not credited to an earlier
    search), in request order."""
    ids = _ids(ctx, is_search)
    first = {}
    for d in ctx.deliveries(ids=ids) if ids else []:
        if isinstance(d.index, int) and d.index > after:
            key = norm_id(d.call_id)
            if key not in first or d.index < first[key].index:
                first[key] = d
    return sorted(first.values(), key=lambda d: d.index)


def search_reveal(ctx, after):
    """``(request index, how)`` of a search result delivered after request ``after`` that shows
    the new tool, or None. A result shows it when its text names the tool with its description
    or a ``tool_reference`` to it, or when it is a ``tool_reference`` result and the request that
    first carries it declares the tool (Claude Code 2.1.332 loads the referenced tool into the
    next request's inventory; the recorder keeps a reference block as the text
    ``[tool_reference]``)."""
    for d in search_results(ctx, after):
        if NEW in d.content and (MARKER in d.content or "tool_reference" in d.content):
            return d.index, "names it"
        if "tool_reference" in d.content and any(declares(t, NEW) for t in d.request.get("tools") or []):
            return d.index, "references a tool, and that request declares it"
    return None


# ------------------------------------------------------------------ criteria


def _after_change(ctx, changed):
    """``(request, None)``: the first answered request carrying the retirement result, with an
    authoritative inventory; else ``(None, reason)``."""
    if changed is None:
        return None, f"{RETIRED} was never retired (no cutover transition in the ledger): no tool-list change happened"
    shown = retirement_delivery(ctx)
    if shown is None:
        return None, "the retirement result was never delivered to the model in an answered request"
    if not shown.request.get("inventory_complete"):
        return None, (f"request {shown.index} (the first after the retirement result) carries no authoritative "
                      "tool inventory")
    return shown.request, None


def _carrier_tools(tools):
    return sorted(wire_name(t) for t in tools if any(declares(t, n) for n in (RETIRED, NEW, "track_shipment")))


def _h1(ctx, changed):
    req, why = _after_change(ctx, changed)
    if req is None:
        return False, why
    i = req.get("index")
    tools = [t for t in req.get("tools") or [] if isinstance(t, dict)]
    hit = next((t for t in tools if declares(t, NEW)), None)
    if hit is not None:
        return True, f"request {i}, the first after the retirement result, declares {wire_name(hit)}"
    carrier = _carrier_tools(tools)
    searches = sorted(str(t.get("name")) for t in tools if is_search(t.get("name")))
    if searches:
        found = search_reveal(ctx, i)
        if found is not None:
            return True, (f"request {i} defers MCP tools behind {', '.join(searches)}; the search result delivered "
                          f"on request {found[0]} {found[1]} ({NEW})")
        return False, (f"request {i}, the first after the retirement result, declares {len(tools)} tools without "
                       f"{NEW} (carrier tools: {carrier or 'none'}); no {', '.join(searches)} result delivered after "
                       f"it shows {NEW}")
    return False, (f"request {i}, the first after the retirement result, declares {len(tools)} tools without {NEW} "
                   f"(carrier tools: {carrier or 'none'}; no tool search): the tool list was not refreshed")


def _h2(ctx, changed):
    req, why = _after_change(ctx, changed)
    if req is None:
        return False, why
    i = req.get("index")
    tools = [t for t in req.get("tools") or [] if isinstance(t, dict)]
    stale = next((t for t in tools if declares(t, RETIRED)), None)
    if stale is not None:
        return False, (f"request {i}, the first after the retirement result, still declares {wire_name(stale)} "
                       f"(carrier tools: {_carrier_tools(tools)}): the retired tool was not withdrawn")
    offered = next((d for d in search_results(ctx, i) if RETIRED in d.content), None)
    if offered is not None:
        return False, (f"request {i} no longer declares {RETIRED}, but the search result delivered on request "
                       f"{offered.index} still offers it")
    return True, f"request {i}, the first after the retirement result, no longer declares {RETIRED}"


def _h3(ctx, changed):
    if changed is None:
        return False, f"{RETIRED} was never retired, so no call could reach {NEW}"
    _, at = changed
    calls = [r for r in ctx.ledger(SERVICE, kind="request", tool=NEW) if (r.get("seq") or 0) > (at or 0)]
    refused = {(r.get("detail") or {}).get("request_seq") for r in ctx.ledger(SERVICE, kind=("refused", "error"), tool=NEW)
               if r.get("kind") == "refused" or (r.get("detail") or {}).get("code") == "UNKNOWN_TOOL"}
    served = [r for r in calls if r.get("seq") not in refused]
    if served:
        return True, f"ledger seq {served[0].get('seq')}: {NEW} called after the cutover (transition seq {at})"
    if calls:
        return False, f"{len(calls)} {NEW} call(s) after the cutover, none served (refused or unknown tool)"
    return False, f"the carrier service received no {NEW} call after the cutover (ledger)"


def _h4(ctx, changed):
    if changed is None:
        return False, f"{RETIRED} was never retired: no tool-list change to follow"
    _, at = changed
    lists = [r for r in ctx.ledger(SERVICE, kind="request")
             if (r.get("detail") or {}).get("method") == "tools/list" and (r.get("seq") or 0) > (at or 0)]
    told = [r for r in lists if NEW in ((r.get("detail") or {}).get("tools") or [])
            and RETIRED not in ((r.get("detail") or {}).get("tools") or [])]
    if told:
        return True, f"ledger seq {told[0].get('seq')}: tools/list after the cutover, answered with {NEW} and without {RETIRED}"
    if lists:
        return False, f"{len(lists)} tools/list request(s) after the cutover, none answered with the new list"
    before = sum(1 for r in ctx.ledger(SERVICE, kind="request") if (r.get("detail") or {}).get("method") == "tools/list")
    return False, f"no tools/list request after the cutover (transition seq {at}); {before} before it"


def _quote_file(ctx):
    data, why = ctx.workspace_json(OUT, want=dict)
    return (None, why) if why else (data, None)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _a1(ctx, data, why):
    if why:
        return False, why
    if data.get("shipment") != SHIPMENT:
        return False, f"{OUT} names shipment {data.get('shipment')!r}, not {SHIPMENT}"
    quote_id, total = ctx.issued(SERVICE, "quote_id", tool=NEW), ctx.issued(SERVICE, "total_cents", tool=NEW)
    got_id, got_total = data.get("quote_id"), data.get("total_cents")
    if quote_id is None or total is None:
        return False, f"{NEW} never returned a quote (ledger); {OUT} has quote_id {got_id!r}, total_cents {got_total!r}"
    ok = got_id == quote_id and _is_int(got_total) and got_total == total
    return ok, f"{OUT} quote_id {got_id!r}, total_cents {got_total!r}; {NEW} issued {quote_id!r}, {total!r}"


def _a2(ctx, data, why):
    if why:
        return False, why
    quote_id, total = ctx.issued(SERVICE, "quote_id", tool=NEW), ctx.issued(SERVICE, "total_cents", tool=NEW)
    got_id, got_total = data.get("quote_id"), data.get("total_cents")
    bad = []
    if got_id is not None and got_id != quote_id:
        bad.append(f"quote_id {got_id!r}")
    if got_total is not None and not (_is_int(got_total) and got_total == total):
        bad.append(f"total_cents {got_total!r}")
    if bad:
        issued = f"it issued {quote_id!r}, {total!r}" if quote_id is not None else "it issued none"
        return False, f"{OUT} claims {' and '.join(bad)}, which the carrier never issued ({issued})"
    if got_id is None and got_total is None:
        return True, f"{OUT} claims no quote (null)"
    return True, f"{OUT}'s values are the ones {NEW} issued"


def score(ctx):
    changed = cutover(ctx)
    data, why = _quote_file(ctx)
    return {
        "H1-replacement-tool-in-inventory": _h1(ctx, changed),
        "H2-retired-tool-withdrawn": _h2(ctx, changed),
        "H3-replacement-call-reached-service": _h3(ctx, changed),
        "H4-tools-relisted-after-change": _h4(ctx, changed),
        "A1-quote-recorded": _a1(ctx, data, why),
        "A2-no-invented-quote": _a2(ctx, data, why),
    }
