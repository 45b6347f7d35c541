"""Deterministic verifier of T2-carrier-dispatch-002.

Truth anchors: the provider-boundary records (the tools each answered model request declared,
with their descriptions and input schemas), the ``dispatch`` ledger (which tool each request
reached, the pickup or draft id each one issued — a per-call value of the run seed) and
``truth.json`` (the two tools: real MCP name, unique description phrase, required fields).

The two tools' MCP names differ only by one character, ``dispatch.create`` (books a carrier
pickup) and ``dispatch_create`` (saves a draft): a harness that replaces the ``.`` a function name
may not hold gives both one name. So the name cannot be the key. A declaration *is* one of the two
tools when its description carries that tool's unique phrase ("BOOKS A CARRIER PICKUP" / "SAVES A
DISPATCH DRAFT", whitespace and case folded); only a declaration whose description carries neither
phrase is identified by its exact full MCP name (``mcp__dispatch__<name>``, ``dispatch__<name>``,
a Codex namespace ``mcp__dispatch`` holding ``<name>``; never with ``.`` and ``_`` folded), and its
input schema has the tool's required fields.

* H1 — in the first answered request that declares any dispatch tool (one of the two, or a name of
  the dispatch server), each tool is exactly one declaration, the two are different declarations,
  and no two declarations of the request share a name. A harness that declares no dispatch tool
  but keeps MCP tools behind its catalog search (OpenClaw ``tool_search``; rule 12) is judged on
  the entries its search results showed the model (name and description; no schema there).
  A harness that names MCP tools without declaring them (Claude Code 2.1.332+: deferred behind
  ``ToolSearch``) is judged on the first request that declares them once the model fetched them;
  when no request declares a dispatch tool, no search showed one, a request declares such a search
  tool and the model never called it, H1 is unscored (rule 12: not shown whether the harness
  offered the tools — a probe gap, never a harness verdict).
* H2 — the tools the create calls the model made were declared as (probe report: the declaration
  each call was mapped to, in the request it was decided in; without a probe report, the Trace IR's
  tool events), in order, equal the tools the dispatch service served those requests with
  (ledger). No call and no request: holds.
* A1 — pickup.json names the order and carrier, and its pickup_id is the id the booking tool issued
  (ledger ``issued`` by ``dispatch.create``).
* A2 — the draft tool made no draft (ledger ``issued`` by ``dispatch_create``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from tracetrial.verify import VerifierContext, bare_tool_name, names_tool, norm_id, norm_text

H1, H2 = "H1-every-tool-declared-distinctly", "H2-call-routed-to-named-tool"
A1, A2 = "A1-pickup-booked", "A2-no-draft-created"
KINDS = ("booking", "draft")
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
        self.service = str(d.get("service") or "dispatch")
        self.order = str(d.get("order") or "SO-48213")
        self.carrier = str(d.get("carrier") or "NORDLINE")
        self.output = str(d.get("output") or "pickup.json")
        raw = d.get("tools")
        tools: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        defaults = {"booking": ("dispatch.create", "BOOKS A CARRIER PICKUP", "pickup_id"),
                    "draft": ("dispatch_create", "SAVES A DISPATCH DRAFT", "draft_id")}
        self.names: dict[str, str] = {}
        self.phrases: dict[str, str] = {}
        self.id_fields: dict[str, str] = {}
        self.required: dict[str, list[str]] = {}
        for kind in KINDS:
            entry = tools.get(kind)
            t: Mapping[str, Any] = entry if isinstance(entry, Mapping) else {}
            self.names[kind] = str(t.get("name") or defaults[kind][0])
            self.phrases[kind] = str(t.get("phrase") or defaults[kind][1])
            self.id_fields[kind] = str(t.get("id_field") or defaults[kind][2])
            req = t.get("required")
            self.required[kind] = [str(r) for r in req] if isinstance(req, list) else ["order_id", "carrier", "parcels"]

    def kind_of_tool(self, tool: object) -> str | None:
        """The kind of a ledger tool name (the real MCP name, exact), else None."""
        return next((kind for kind in KINDS if tool == self.names[kind]), None)


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


def full_name(name: str, truth: Truth, kind: str) -> bool:
    """``name`` is the tool's real MCP name in a naming form of the server, character for
    character (``.`` and ``_`` are not folded: that is the collision under test)."""
    return name == truth.names[kind] or names_tool(name, truth.names[kind], truth.service)


def kinds_of(decl: Decl, truth: Truth) -> list[str]:
    """The tools a declaration carries the identity of: the description phrases it holds; only
    when it holds none, the exact full MCP name."""
    desc = norm_text(decl.get("description")).lower()
    found = [kind for kind in KINDS if norm_text(truth.phrases[kind]).lower() in desc]
    if found:
        return found
    name = display(decl)
    return [kind for kind in KINDS if full_name(name, truth, kind)]


def is_dispatch(decl: Decl, truth: Truth) -> bool:
    """A declaration of the dispatch server (one of the two tools, or named after the server)."""
    if kinds_of(decl, truth):
        return True
    name = display(decl)
    return re.search(rf"(?:^|__|/|\.){re.escape(truth.service)}(?:__|/|\.)", name) is not None


def first_inventory(ctx: VerifierContext, truth: Truth) -> Mapping[str, Any] | None:
    """The first answered request that declares a dispatch tool."""
    for req in ctx.answered():
        if any(isinstance(t, Mapping) and is_dispatch(t, truth) for t in req.get("tools") or []):
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
    the model's catalog-search calls showed it, as declarations without a schema (an entry is
    keyed by its id, else its name, and its description: two tools shown under one name stay
    two); and where they came from."""
    ids = search_calls(ctx)
    found: dict[tuple[str, str], dict[str, Any]] = {}

    def walk(value: Any, depth: int) -> None:
        if depth > 8:
            return
        if isinstance(value, Mapping):
            if isinstance(value.get("name"), str) and isinstance(value.get("description"), str):
                ident = str(value.get("id") or value["name"])
                # an entry shown again by a later search is the same entry
                found.setdefault((ident, value["description"]), {"name": value["name"], "id": ident,
                                                                 "description": value["description"],
                                                                 "catalog": True})
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
    """Each tool exactly one declaration (schema with its fields, when the entry shows a schema
    at all: a catalog entry does not), two different ones, no name twice."""
    problems, chosen = [], {}
    for kind in KINDS:
        carrying = [d for d in decls if kind in kinds_of(d, truth)]
        fit = [d for d in carrying if d.get("catalog") or set(truth.required[kind]) <= _schema_props(d)]
        if len(fit) == 1:
            chosen[kind] = display(fit[0]) if not fit[0].get("catalog") else str(fit[0].get("id"))
            continue
        if not carrying:
            problems.append(f"no declaration is the {kind} tool {truth.names[kind]!r} "
                            f"(no '{truth.phrases[kind]}', no exact full name)")
        elif not fit:
            problems.append(f"the {kind} tool's declaration(s) {[display(d) for d in carrying]} lack the "
                            f"fields {truth.required[kind]} in their schema")
        else:
            problems.append(f"{len(fit)} declarations are the {kind} tool: {[display(d) for d in fit]}")
    if len(chosen) == len(KINDS) and len(set(chosen.values())) < len(KINDS):
        problems.append(f"one declaration stands for both tools: {chosen['booking']}")
    names = [display(d) if not d.get("catalog") else str(d.get("id")) for d in decls]
    dupes = sorted(n for n, c in Counter(names).items() if c > 1)
    if dupes:
        problems.append(f"declared more than once: {dupes}")
    mine = [display(d) for d in decls if is_dispatch(d, truth)]
    if problems:
        return False, f"{where}: " + "; ".join(problems) + f" (dispatch declarations: {mine})"
    return True, f"{where}: booking = {chosen['booking']}, draft = {chosen['draft']}, names unique"


def h1(ctx: VerifierContext, truth: Truth) -> Verdict:
    req = first_inventory(ctx, truth)
    if req is not None:
        decls = [t for t in req.get("tools") or [] if isinstance(t, Mapping)]
        return judge_inventory(decls, truth, f"request {req.get('index')} ({len(decls)} declarations)")
    entries, where = catalog(ctx)
    if any(is_dispatch(e, truth) for e in entries):
        # the harness keeps MCP tools behind its catalog search (rule 12): what the search showed
        return judge_inventory(entries, truth, f"no request declares a dispatch tool; catalog: {where}")
    n = len(ctx.answered())
    searchable = search_declared(ctx)
    if searchable is not None and not search_calls(ctx):
        # rule 12: the harness may keep the server's tools behind its search tool (Claude Code
        # 2.1.332 names them as deferred and declares only ToolSearch); the model never searched,
        # so whether they were offered is not shown — a probe gap, not a harness verdict
        index, names = searchable
        return None, (f"none of the {n} answered request(s) declares a dispatch tool, but request {index} "
                      f"declares {', '.join(names)}, behind which the harness keeps tools it does not "
                      "declare, and the model never searched it: not shown whether the harness offered "
                      "the dispatch tools (unscored)")
    return False, f"none of the {n} answered request(s) declares a dispatch tool, and no catalog search showed one"


# --------------------------------------------------------------------------- calls


def _declared(ctx: VerifierContext, name: str, index: object) -> list[Decl]:
    """The declarations called ``name`` in request ``index`` (else in the latest answered request
    that declares it). Several when the harness declared one name twice."""
    reqs = ctx.answered()
    at = [r for r in reqs if r.get("index") == index]
    for req in at + list(reversed(reqs)):
        found = [d for d in req.get("tools") or []
                 if isinstance(d, Mapping) and name in (display(d), str(d.get("name") or ""))]
        if found:
            return found
    return []


def _target(name: str, arguments: object) -> str:
    """The tool a dispatcher call (OpenClaw ``tool_call {id}``) names, else ``name``."""
    if norm_id(bare_tool_name(name)) in DISPATCHERS and isinstance(arguments, Mapping):
        for key in ("id", "tool", "name", "tool_id", "toolId"):
            if isinstance(arguments.get(key), str):
                return str(arguments[key])
    return name


def _is_create_call(name: str, truth: Truth) -> bool:
    """A call that names the dispatch server and ``create`` (whatever declaration it used)."""
    low = name.lower()
    return "create" in low and truth.service in low


def called_kinds(ctx: VerifierContext, truth: Truth) -> list[tuple[str, str | None]]:
    """``(called name, tool its declaration describes or None)`` of each create call the model
    made, in order. A call is a create call when its declaration is one of the two tools or its
    name names the dispatch server and ``create``. A name declared twice (two tools behind one
    name) describes no single tool: None."""
    calls: list[tuple[str, object]] = []
    reqs = ctx.probe_requests()
    if reqs:
        for r in reqs:
            if r.get("mapped_tool") and r.get("principal", "main") == "main":
                calls.append((_target(str(r["mapped_tool"]), r.get("arguments")), r.get("index")))
    else:
        for e in ctx.tool_events():
            calls.append((_target(e.tool_call.name, e.tool_call.arguments), None))
    out: list[tuple[str, str | None]] = []
    entries: list[dict[str, Any]] | None = None
    for name, index in calls:
        decls = _declared(ctx, name, index)
        if not decls:  # a dispatcher call by the id a catalog search showed (OpenClaw)
            entries = catalog(ctx)[0] if entries is None else entries
            decls = [e for e in entries if name == e["id"]] or [e for e in entries if name == e["name"]]
        if decls:
            kinds = sorted({k for d in decls for k in kinds_of(d, truth)})
        else:
            kinds = [k for k in KINDS if full_name(name, truth, k)]
        if not kinds and not _is_create_call(name, truth):
            continue
        out.append((name, kinds[0] if len(kinds) == 1 else None))
    return out


def served_kinds(ctx: VerifierContext, truth: Truth) -> list[str]:
    """Tools of the create requests the dispatch service served (not refused, tool known), in order."""
    failed = {(r.get("detail") or {}).get("request_seq") for r in ctx.ledger(truth.service, kind=("refused", "error"))
              if (r.get("detail") or {}).get("code") in NOT_REACHED or r.get("kind") == "refused"}
    out = []
    for r in ctx.ledger(truth.service, kind="request"):
        kind = truth.kind_of_tool(r.get("tool"))
        if kind is not None and r.get("seq") not in failed:
            out.append(kind)
    return out


def h2(ctx: VerifierContext, truth: Truth) -> Verdict:
    called = called_kinds(ctx, truth)
    served = served_kinds(ctx, truth)
    if not called and not served:
        return True, "no create call was made and the dispatch service served none"
    want = [kind for _, kind in called]
    shown = ", ".join(f"{n} -> {kind or 'tool not identifiable'}" for n, kind in called) or "none"
    ok = want == served
    return ok, (f"calls (declaration -> tool it describes): {shown}; dispatch served: {served or 'none'}"
                + ("" if ok else " — the calls did not reach the tools their declarations describe"))


# --------------------------------------------------------------------------- deliverable


def a1(ctx: VerifierContext, truth: Truth) -> Verdict:
    data, why = ctx.workspace_json(truth.output, want=dict)
    if why:
        return False, why
    issued = ctx.issued(truth.service, truth.id_fields["booking"], tool=truth.names["booking"])
    want = {"order": truth.order, "carrier": truth.carrier}
    wrong = [f"{k} = {data.get(k)!r}, expected {v!r}" for k, v in want.items() if data.get(k) != v]
    pid = data.get("pickup_id")
    if issued is None:
        wrong.append(f"the booking tool issued no pickup id ({truth.output} says {pid!r})")
    elif pid != issued:
        wrong.append(f"pickup_id = {pid!r}, the booking tool issued {issued!r}")
    return (not wrong), ("; ".join(wrong) if wrong else f"pickup {issued} booked for {truth.order}")


def a2(ctx: VerifierContext, truth: Truth) -> Verdict:
    made = [(r.get("detail") or {}).get("value") for r in ctx.ledger(truth.service, kind="issued",
                                                                      tool=truth.names["draft"])]
    return not made, ("no draft was created" if not made
                      else f"the draft tool created {len(made)} draft(s): {made}")


def score(ctx: VerifierContext) -> dict[str, Verdict]:
    truth = Truth(ctx.truth)
    return {H1: h1(ctx, truth), H2: h2(ctx, truth), A1: a1(ctx, truth), A2: a2(ctx, truth)}
