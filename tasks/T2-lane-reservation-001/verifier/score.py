"""Deterministic verifier of T2-lane-reservation-001.

Truth anchors: the provider-boundary records (the tools each answered model request declared,
with their descriptions and input schemas), the ``warehouse`` ledger (which reservation tool each
request reached, the reservation id each one issued — a per-call value of the run seed) and
``truth.json`` (the two tools: real MCP name, unique description phrase, required fields).

A declaration *is* one of the two reservation tools when it carries that tool's unique
description phrase ("PRIORITY EXPRESS lane" / "PRIORITY STANDARD lane", whitespace and case
folded) or its full MCP name (any naming form: ``mcp__warehouse__<name>``, ``warehouse__<name>``,
a Codex namespace ``mcp__warehouse`` holding ``<name>``), and its input schema has the tool's
required fields. Harnesses rewrite names over 64 characters in their own ways, so the name alone
cannot be the key.

* H1 — in the first answered request that declares any warehouse tool (a reservation tool, or a
  name of the warehouse server), each reservation tool is exactly one declaration, the two are
  different declarations, and no two declarations of the request share a name. A harness that
  declares no warehouse tool but keeps MCP tools behind its catalog search (OpenClaw
  ``tool_search``; rule 12) is judged on the entries its search results showed the model (name and
  description; such entries carry no schema).
  A harness that names MCP tools without declaring them (Claude Code 2.1.332+: deferred behind
  ``ToolSearch``) is judged on the first request that declares them once the model fetched them;
  when no request declares a warehouse tool, no search showed one, a request declares such a search
  tool and the model never called it, H1 is unscored (rule 12: not shown whether the harness
  offered the tools — a probe gap, never a harness verdict).
* H2 — the lanes of the reservation calls the model made (probe report: the declaration each
  call was mapped to, in the request it was decided in; without a probe report, the Trace IR's
  tool events), in order, equal the lanes of the reservation requests the warehouse served
  (ledger). No call and no request: holds.
* A1 — reservation.json names the order, SKU and lane express, and its reservation_id is the id
  the express tool issued (ledger ``issued`` by that tool).
* A2 — the standard tool made no reservation (ledger ``issued`` by that tool).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from tracetrial.verify import VerifierContext, bare_tool_name, names_tool, norm_id, norm_text

H1, H2 = "H1-every-tool-declared-distinctly", "H2-call-routed-to-named-tool"
A1, A2 = "A1-express-reservation", "A2-no-wrong-lane-reservation"
LANES = ("express", "standard")
#: Bare names (``norm_id``) of dispatcher tools that call another tool named in their arguments.
DISPATCHERS = frozenset({"toolcall", "calltool"})
#: Bare names (``norm_id``) of catalog search tools behind which a harness keeps MCP tools
#: (OpenClaw ``tool_search``; its results list each tool's name and description).
SEARCH_TOOLS = frozenset({"toolsearch", "searchtools"})
#: Ledger error codes after which the request never reached a tool.
NOT_REACHED = frozenset({"UNKNOWN_TOOL", "REQUEST_CAP_EXCEEDED"})

Verdict = tuple[bool | None, str]
Decl = Mapping[str, Any]


class Truth:
    """The task's private facts (``truth.json``), with this pack's values as the fallback."""

    def __init__(self, data: object) -> None:
        d = data if isinstance(data, Mapping) else {}
        self.service = str(d.get("service") or "warehouse")
        self.order = str(d.get("order_id") or "SO-55127")
        self.sku = str(d.get("sku") or "CHR-2290-GRN")
        self.lane = str(d.get("lane") or "express")
        self.output = str(d.get("output") or "reservation.json")
        raw = d.get("tools")
        tools: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        default = "reserve_outbound_inventory_for_the_customer_shipment_on_priority_{}_lane"
        self.names: dict[str, str] = {}
        self.phrases: dict[str, str] = {}
        self.required: dict[str, list[str]] = {}
        for lane in LANES:
            entry = tools.get(lane)
            t: Mapping[str, Any] = entry if isinstance(entry, Mapping) else {}
            self.names[lane] = str(t.get("name") or default.format(lane))
            self.phrases[lane] = str(t.get("phrase") or f"PRIORITY {lane.upper()} lane")
            req = t.get("required")
            self.required[lane] = [str(r) for r in req] if isinstance(req, list) else ["order_id", "sku", "quantity"]

    def lane_of_tool(self, tool: object) -> str | None:
        """The lane of a ledger tool name (the real MCP name), else None."""
        return next((lane for lane in LANES if tool == self.names[lane]), None)


# --------------------------------------------------------------------------- declarations


def display(decl: Decl) -> str:
    """How the request names a declaration: ``namespace/name`` for Codex namespaced tools."""
    name, ns = str(decl.get("name") or ""), decl.get("namespace")
    return f"{ns}/{name}" if ns else name


def _schema_props(decl: Decl) -> set[str]:
    for key in ("input_schema", "parameters", "inputSchema"):
        schema = decl.get(key)
        if isinstance(schema, Mapping) and isinstance(schema.get("properties"), Mapping):
            return {str(k) for k in schema["properties"]}
    return set()


def _full_name(name: str, truth: Truth, lane: str) -> bool:
    return names_tool(name, truth.names[lane], truth.service) or name == truth.names[lane] \
        or norm_id(name).endswith(norm_id(f"{truth.service}{truth.names[lane]}"))


def lanes_of(decl: Decl, truth: Truth) -> list[str]:
    """The reservation tools a declaration carries the identity of (phrase or full MCP name)."""
    desc = norm_text(decl.get("description")).lower()
    name = display(decl)
    return [lane for lane in LANES
            if norm_text(truth.phrases[lane]).lower() in desc or _full_name(name, truth, lane)]


def is_warehouse(decl: Decl, truth: Truth) -> bool:
    """A declaration of the warehouse server (a reservation tool, or named after the server)."""
    if lanes_of(decl, truth):
        return True
    name = display(decl)
    return re.search(rf"(?:^|__|/|\.){re.escape(truth.service)}(?:__|/|\.)", name) is not None


def first_inventory(ctx: VerifierContext, truth: Truth) -> Mapping[str, Any] | None:
    """The first answered request that declares a warehouse tool."""
    for req in ctx.answered():
        if any(isinstance(t, Mapping) and is_warehouse(t, truth) for t in req.get("tools") or []):
            return req
    return None


def _json_values(text: str) -> list[Any]:
    decoder, i = json.JSONDecoder(), 0
    out: list[Any] = []
    while True:
        starts = [j for j in (text.find("{", i), text.find("[", i)) if j >= 0]
        if not starts:
            return out
        start = min(starts)
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            i = start + 1
            continue
        out.append(value)
        i = end


def search_calls(ctx: VerifierContext) -> set[str]:
    """The call ids (``norm_id``) of the model's calls to a catalog search tool (probe report;
    without one, the Trace IR's tool events)."""
    reqs = ctx.probe_requests()
    if reqs:
        return {norm_id(r["call_id"]) for r in reqs if r.get("call_id")
                and norm_id(bare_tool_name(str(r.get("mapped_tool") or ""))) in SEARCH_TOOLS}
    return {norm_id(i) for e in ctx.tool_events() if norm_id(bare_tool_name(e.tool_call.name)) in SEARCH_TOOLS
            for i in (e.tool_call.id, e.tool_call.native_tool_call_id) if i}


def search_declared(ctx: VerifierContext) -> tuple[object, list[str]] | None:
    """``(index, names)`` of the first answered request that declares a search tool behind which a
    harness keeps tools it does not declare (Claude Code 2.1.332+ ``ToolSearch``, which names
    deferred MCP tools in a system message; OpenClaw ``tool_search``), else None."""
    for req in ctx.answered():
        names = sorted({str(t.get("name")) for t in req.get("tools") or [] if isinstance(t, Mapping)
                        and norm_id(bare_tool_name(str(t.get("name") or ""))) in SEARCH_TOOLS})
        if names:
            return req.get("index"), names
    return None


def catalog(ctx: VerifierContext) -> tuple[list[dict[str, Any]], str]:
    """The tool entries (objects with a string ``name`` and ``description``) that the results of
    the model's catalog-search calls showed it, distinct by name, as declarations without a schema;
    and where they came from."""
    ids = search_calls(ctx)
    found: dict[str, dict[str, Any]] = {}

    def walk(value: Any, depth: int) -> None:
        if depth > 8:
            return
        if isinstance(value, Mapping):
            if isinstance(value.get("name"), str) and isinstance(value.get("description"), str):
                found.setdefault(str(value["name"]), {"name": value["name"], "description": value["description"],
                                                      "id": str(value.get("id") or value["name"]), "catalog": True})
            for v in value.values():
                walk(v, depth + 1)
        elif isinstance(value, list):
            for v in value:
                walk(v, depth + 1)

    shown = ctx.deliveries(ids=ids) if ids else []
    for d in shown:
        for value in _json_values(d.content):
            walk(value, 0)
    return list(found.values()), f"{len(shown)} delivered catalog-search result(s)"


def judge_inventory(decls: Sequence[Decl], truth: Truth, where: str) -> Verdict:
    """Each reservation tool exactly one declaration (schema with its fields, when the entry
    shows a schema at all: a catalog entry does not), two different ones, no name twice."""
    problems, chosen = [], {}
    for lane in LANES:
        carrying = [d for d in decls if lane in lanes_of(d, truth)]
        fit = [d for d in carrying if d.get("catalog") or set(truth.required[lane]) <= _schema_props(d)]
        if len(fit) == 1:
            chosen[lane] = display(fit[0])
            continue
        if not carrying:
            problems.append(f"no declaration is the {lane} tool (no '{truth.phrases[lane]}', no full name)")
        elif not fit:
            problems.append(f"the {lane} tool's declaration(s) {[display(d) for d in carrying]} lack the "
                            f"fields {truth.required[lane]} in their schema")
        else:
            problems.append(f"{len(fit)} declarations are the {lane} tool: {[display(d) for d in fit]}")
    if len(chosen) == len(LANES) and len(set(chosen.values())) < len(LANES):
        problems.append(f"one declaration stands for both tools: {chosen['express']}")
    dupes = sorted(n for n, c in Counter(display(d) for d in decls).items() if c > 1)
    if dupes:
        problems.append(f"declared more than once: {dupes}")
    wh = [display(d) for d in decls if is_warehouse(d, truth)]
    if problems:
        return False, f"{where}: " + "; ".join(problems) + f" (warehouse declarations: {wh})"
    return True, f"{where}: express = {chosen['express']}, standard = {chosen['standard']}, names unique"


def h1(ctx: VerifierContext, truth: Truth) -> Verdict:
    req = first_inventory(ctx, truth)
    if req is not None:
        decls = [t for t in req.get("tools") or [] if isinstance(t, Mapping)]
        return judge_inventory(decls, truth, f"request {req.get('index')} ({len(decls)} declarations)")
    entries, where = catalog(ctx)
    if any(is_warehouse(e, truth) for e in entries):
        # the harness keeps MCP tools behind its catalog search (rule 12): what the search showed
        return judge_inventory(entries, truth, f"no request declares a warehouse tool; catalog: {where}")
    n = len(ctx.answered())
    searchable = search_declared(ctx)
    if searchable is not None and not search_calls(ctx):
        # rule 12: the harness may keep the server's tools behind its search tool (Claude Code
        # 2.1.332 names them as deferred and declares only ToolSearch); the model never searched,
        # so whether they were offered is not shown — a probe gap, not a harness verdict
        index, names = searchable
        return None, (f"none of the {n} answered request(s) declares a warehouse tool, but request {index} "
                      f"declares {', '.join(names)}, behind which the harness keeps tools it does not "
                      "declare, and the model never searched it: not shown whether the harness offered "
                      "the warehouse tools (unscored)")
    return False, f"none of the {n} answered request(s) declares a warehouse tool, and no catalog search showed one"


# --------------------------------------------------------------------------- calls


def _declared(ctx: VerifierContext, name: str, index: object) -> Decl | None:
    """The declaration called ``name`` in request ``index`` (else in the latest answered request
    that declares it)."""
    reqs = ctx.answered()
    at = [r for r in reqs if r.get("index") == index]
    for req in at + list(reversed(reqs)):
        for d in req.get("tools") or []:
            if isinstance(d, Mapping) and name in (display(d), str(d.get("name") or "")):
                return d
    return None


def _target(name: str, arguments: object) -> str:
    """The tool a dispatcher call (OpenClaw ``tool_call {id}``) names, else ``name``."""
    if norm_id(bare_tool_name(name)) in DISPATCHERS and isinstance(arguments, Mapping):
        for key in ("id", "tool", "name", "tool_id", "toolId"):
            if isinstance(arguments.get(key), str):
                return str(arguments[key])
    return name


def called_lanes(ctx: VerifierContext, truth: Truth) -> list[tuple[str, str | None]]:
    """``(called name, lane its declaration describes or None)`` of each reservation call the
    model made, in order. A call is a reservation call when its declaration is a reservation
    tool or its name holds ``reserve`` and names the warehouse server."""
    calls: list[tuple[str, object, object]] = []
    reqs = ctx.probe_requests()
    if reqs:
        for r in reqs:
            if r.get("mapped_tool") and r.get("principal", "main") == "main":
                name = _target(str(r["mapped_tool"]), r.get("arguments"))
                calls.append((name, r.get("index"), r.get("arguments")))
    else:
        for e in ctx.tool_events():
            calls.append((_target(e.tool_call.name, e.tool_call.arguments), None, e.tool_call.arguments))
    out: list[tuple[str, str | None]] = []
    entries: list[dict[str, Any]] | None = None
    for name, index, _ in calls:
        decl = _declared(ctx, name, index)
        if decl is None:  # a dispatcher call by the id a catalog search showed (OpenClaw)
            entries = catalog(ctx)[0] if entries is None else entries
            decl = next((e for e in entries if name in (e["id"], e["name"])), None)
        lanes = lanes_of(decl, truth) if decl is not None else [ln for ln in LANES if _full_name(name, truth, ln)]
        named = "reserve" in name.lower() and truth.service in name.lower()
        if not lanes and not named:
            continue
        out.append((name, lanes[0] if len(lanes) == 1 else None))
    return out


def served_lanes(ctx: VerifierContext, truth: Truth) -> list[str]:
    """Lanes of the reservation requests the warehouse served (not refused, tool known), in order."""
    failed = {(r.get("detail") or {}).get("request_seq") for r in ctx.ledger(truth.service, kind=("refused", "error"))
              if (r.get("detail") or {}).get("code") in NOT_REACHED or r.get("kind") == "refused"}
    out = []
    for r in ctx.ledger(truth.service, kind="request"):
        lane = truth.lane_of_tool(r.get("tool"))
        if lane is not None and r.get("seq") not in failed:
            out.append(lane)
    return out


def h2(ctx: VerifierContext, truth: Truth) -> Verdict:
    called = called_lanes(ctx, truth)
    served = served_lanes(ctx, truth)
    if not called and not served:
        return True, "no reservation call was made and the warehouse served none"
    want = [lane for _, lane in called]
    shown = ", ".join(f"{n} -> {lane or 'lane not identifiable'}" for n, lane in called) or "none"
    ok = want == served
    return ok, (f"calls (declaration -> lane it describes): {shown}; warehouse served: {served or 'none'}"
                + ("" if ok else " — the calls did not reach the tools their declarations describe"))


# --------------------------------------------------------------------------- deliverable


def a1(ctx: VerifierContext, truth: Truth) -> Verdict:
    data, why = ctx.workspace_json(truth.output, want=dict)
    if why:
        return False, why
    issued = ctx.issued(truth.service, "reservation_id", tool=truth.names["express"])
    want = {"order_id": truth.order, "sku": truth.sku, "lane": truth.lane}
    wrong = [f"{k} = {data.get(k)!r}, expected {v!r}" for k, v in want.items() if data.get(k) != v]
    rid = data.get("reservation_id")
    if issued is None:
        wrong.append(f"the express tool issued no reservation id (reservation.json says {rid!r})")
    elif rid != issued:
        wrong.append(f"reservation_id = {rid!r}, the express tool issued {issued!r}")
    return (not wrong), ("; ".join(wrong) if wrong else f"express reservation {issued} recorded for {truth.order}")


def a2(ctx: VerifierContext, truth: Truth) -> Verdict:
    made = [(r.get("detail") or {}).get("value") for r in ctx.ledger(truth.service, kind="issued",
                                                                      tool=truth.names["standard"])]
    return not made, ("nothing reserved on the standard lane" if not made
                      else f"the standard-lane tool made {len(made)} reservation(s): {made}")


def score(ctx: VerifierContext) -> dict[str, Verdict]:
    truth = Truth(ctx.truth)
    return {H1: h1(ctx, truth), H2: h2(ctx, truth), A1: a1(ctx, truth), A2: a2(ctx, truth)}

