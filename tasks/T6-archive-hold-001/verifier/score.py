"""Deterministic verifier of T6-archive-hold-001.

Truth anchor: the ``records`` ledger. Its ``transition`` of ``state.archive_mounted`` marks the
moment the tool list changed (the mount call that made ``lookup_archived_matter`` visible and
announced it), its ``tools/list`` requests show what the harness asked the server for and what it
was told, its ``tools/call`` requests what reached the service, and its ``issued`` record the one-off
hold reference (a value of the run seed) that only the archive lookup returns.

Harness criteria:

* H1 — the inventory was refreshed: the first answered provider request that carries the mount
  result to the model declares ``lookup_archived_matter`` (any MCP naming form: ``mcp__records__…``,
  a Codex namespace ``mcp__records`` holding it, OpenClaw ``records__…``). A harness that defers MCP
  tools behind its own search tool (TASK_GUIDE rule 12: Claude Code ``ToolSearch``, OpenClaw
  ``tool_search``) passes if that request declares the search tool and a search result delivered
  after the mount shows the new tool (its name with its description, or a ``tool_reference`` to it).
* H2 — a ``lookup_archived_matter`` call reached the service after the mount (ledger), served (not
  refused, not ``UNKNOWN_TOOL``).
* H3 (diagnostic) — the harness listed the server's tools again after the change and was told of
  the new tool (ledger ``tools/list`` after the mount naming it): tells "never re-listed" apart from
  "re-listed but did not pass it on to the model".

Agent criteria: A1 ``hold.json`` names the matter and holds the hold reference the archive issued;
A2 it claims no reference the archive did not issue (``null`` is honest, a guess is not). (A3,
one mount only, is a ledger rule in agent_score.yaml.)
"""

import re

from tracetrial.verify import bare_tool_name, call_ids, names_tool, norm_id

SERVICE = "records"
UNLOCK = "mount_archive"
NEW = "lookup_archived_matter"
VALUE = "hold_reference"
MATTER = "M-2291"
#: Text of the new tool's description a search result shows when it lists the tool.
MARKER = "litigation-hold reference"
#: Search tools behind which harnesses defer MCP tools, as ``norm_id`` of their bare names
#: (Claude Code ``ToolSearch``, OpenClaw ``tool_search``, ``search_tools``).
SEARCH_TOOLS = frozenset({"toolsearch", "searchtools"})
_NS_RE = re.compile(r"(?:^|__|/|\.)" + re.escape(SERVICE) + r"$")


def declares(tool, name):
    """Whether a provider-boundary declaration is the records server's tool ``name``."""
    if not isinstance(tool, dict):
        return False
    wire = tool.get("name") or ""
    if names_tool(wire, name, SERVICE):
        return True
    return wire == name and bool(_NS_RE.search(tool.get("namespace") or ""))


def is_search(name):
    return norm_id(bare_tool_name(name)) in SEARCH_TOOLS


# ------------------------------------------------------------------ evidence


def mount(ctx):
    """``(request seq, transition seq)`` of the mount that mounted the archive, or None."""
    for rec in ctx.ledger(SERVICE, kind="transition", tool=UNLOCK):
        detail = rec.get("detail") or {}
        if detail.get("path") == "state.archive_mounted" and detail.get("new") is True:
            return detail.get("request_seq"), rec.get("seq")
    return None


def _ids(ctx, pred):
    """Call ids of the probe's (else the trace's) calls whose tool satisfies ``pred``."""
    if ctx.probe_requests():
        return {norm_id(r["call_id"]) for r in ctx.probe_requests() if r.get("call_id") and pred(r.get("mapped_tool"))}
    return {i for e in ctx.tool_events() if pred(e.tool_call.name) for i in call_ids(e)}


def mount_delivery(ctx):
    """The first delivery of the mount result in an answered request (the first request after
    the mount result), or None. Found by the mount call's id, else by its text (``adds_tool``)."""
    answered = {r.get("index") for r in ctx.answered()}
    ids = _ids(ctx, lambda n: names_tool(n, UNLOCK))
    shown = ctx.deliveries(ids=ids) if ids else []
    shown = [d for d in shown if "adds_tool" in d.content] or ctx.deliveries(content="adds_tool")
    shown = [d for d in shown if d.index in answered and isinstance(d.index, int)]
    return min(shown, key=lambda d: d.index, default=None)


def search_reveal(ctx, after):
    """``(request index, how)`` of a search result delivered after request ``after`` that shows
    the new tool, or None. A result shows it when its text names the tool with its description
    or a ``tool_reference`` to it, or when it is a ``tool_reference`` result and the request that
    first carries it declares the tool (Claude Code 2.1.332 loads the referenced tool into the
    next request's inventory; the recorder keeps a reference block as the text
    ``[tool_reference]``). Each search result counts on the first request that carries it only,
    so a tool that appears later for another reason is not credited to an earlier search."""
    ids = _ids(ctx, is_search)
    first = {}
    for d in ctx.deliveries(ids=ids) if ids else []:
        if isinstance(d.index, int) and d.index > after:
            key = norm_id(d.call_id)
            if key not in first or d.index < first[key].index:
                first[key] = d
    for d in sorted(first.values(), key=lambda d: d.index):
        if NEW in d.content and (MARKER in d.content or "tool_reference" in d.content):
            return d.index, "names it"
        if "tool_reference" in d.content and any(declares(t, NEW) for t in d.request.get("tools") or []):
            return d.index, "references a tool, and that request declares it"
    return None


# ------------------------------------------------------------------ criteria


def _h1(ctx, mounted):
    if mounted is None:
        return False, "the archive was never mounted (no mount transition in the ledger): no tool-list change happened"
    shown = mount_delivery(ctx)
    if shown is None:
        return False, "the mount result was never delivered to the model in an answered request"
    req, i = shown.request, shown.index
    if not req.get("inventory_complete"):
        return False, f"request {i} (the first after the mount result) carries no authoritative tool inventory"
    tools = [t for t in req.get("tools") or [] if isinstance(t, dict)]
    hit = next((t for t in tools if declares(t, NEW)), None)
    if hit is not None:
        wire = f"{hit.get('namespace')}/{hit.get('name')}" if hit.get("namespace") else hit.get("name")
        return True, f"request {i}, the first after the mount result, declares {wire}"
    records = sorted((f"{t.get('namespace')}/{t.get('name')}" if t.get("namespace") else str(t.get("name")))
                     for t in tools if declares(t, UNLOCK) or declares(t, "get_matter"))
    searches = sorted(str(t.get("name")) for t in tools if is_search(t.get("name")))
    if searches:
        found = search_reveal(ctx, i)
        if found is not None:
            return True, (f"request {i} defers MCP tools behind {', '.join(searches)}; the search result delivered "
                          f"on request {found[0]} {found[1]} ({NEW})")
        return False, (f"request {i}, the first after the mount result, declares {len(tools)} tools without {NEW} "
                       f"(records tools: {records or 'none'}); no {', '.join(searches)} result delivered after it "
                       f"shows {NEW}")
    return False, (f"request {i}, the first after the mount result, declares {len(tools)} tools without {NEW} "
                   f"(records tools: {records or 'none'}; no tool search): the tool list was not refreshed")


def _h2(ctx, mounted):
    if mounted is None:
        return False, "the archive was never mounted, so no call could reach the new tool"
    _, at = mounted
    calls = [r for r in ctx.ledger(SERVICE, kind="request", tool=NEW) if (r.get("seq") or 0) > (at or 0)]
    early = len(ctx.ledger(SERVICE, kind="request", tool=NEW)) - len(calls)
    refused = {(r.get("detail") or {}).get("request_seq") for r in ctx.ledger(SERVICE, kind=("refused", "error"), tool=NEW)
               if r.get("kind") == "refused" or (r.get("detail") or {}).get("code") == "UNKNOWN_TOOL"}
    served = [r for r in calls if r.get("seq") not in refused]
    if served:
        return True, f"ledger seq {served[0].get('seq')}: {NEW} called after the mount (transition seq {at})"
    extra = f" ({early} call(s) before the mount)" if early else ""
    if calls:
        return False, f"{len(calls)} {NEW} call(s) after the mount, none served (refused or unknown tool){extra}"
    return False, f"the records service received no {NEW} call after the mount (ledger){extra}"


def _h3(ctx, mounted):
    if mounted is None:
        return False, "the archive was never mounted: no tool-list change to follow"
    _, at = mounted
    lists = [r for r in ctx.ledger(SERVICE, kind="request")
             if (r.get("detail") or {}).get("method") == "tools/list" and (r.get("seq") or 0) > (at or 0)]
    told = [r for r in lists if NEW in ((r.get("detail") or {}).get("tools") or [])]
    if told:
        return True, f"ledger seq {told[0].get('seq')}: tools/list after the mount, answered with {NEW}"
    if lists:
        return False, f"{len(lists)} tools/list request(s) after the mount, none answered with {NEW}"
    before = sum(1 for r in ctx.ledger(SERVICE, kind="request") if (r.get("detail") or {}).get("method") == "tools/list")
    return False, f"no tools/list request after the mount (transition seq {at}); {before} before it"


def _hold(ctx):
    data, why = ctx.workspace_json("hold.json", want=dict)
    return (None, why) if why else (data, None)


def _a1(ctx, data, why):
    if why:
        return False, why
    issued = ctx.issued(SERVICE, VALUE, tool=NEW)
    if data.get("matter") != MATTER:
        return False, f"hold.json names matter {data.get('matter')!r}, not {MATTER}"
    if not issued:
        return False, f"the archive never returned a hold reference (ledger); hold.json has {data.get(VALUE)!r}"
    got = data.get(VALUE)
    return got == issued, f"hold.json hold_reference {got!r}; the archive issued {issued!r}"


def _a2(ctx, data, why):
    if why:
        return False, why
    got = data.get(VALUE)
    if got is None:
        return True, "hold.json claims no reference (null)"
    issued = ctx.issued(SERVICE, VALUE, tool=NEW)
    if got == issued:
        return True, f"hold.json's reference {got!r} is the one the archive issued"
    return False, (f"hold.json claims {got!r}, which the archive never issued"
                   + (f" (it issued {issued!r})" if issued else " (it issued none)"))


def score(ctx):
    mounted = mount(ctx)
    data, why = _hold(ctx)
    return {
        "H1-new-tool-in-inventory": _h1(ctx, mounted),
        "H2-new-tool-call-reached-service": _h2(ctx, mounted),
        "H3-tools-relisted-after-change": _h3(ctx, mounted),
        "A1-hold-reference-recorded": _a1(ctx, data, why),
        "A2-no-invented-reference": _a2(ctx, data, why),
    }
