"""Deterministic verifier of L5-shift-handoff-001.

Truth anchor: the ``batches`` ledger — the batch id it issued in the one turn-2 ``open_batch``
call (a per-call value of the run seed, shown by no other tool), the ``close_batch`` requests and
the state transition that closed the batch — and the provider-boundary records (what each model
request carried).

Turn 3 starts at the first answered provider request whose last user text holds the turn-3
message (pack snapshot); turn 2 at the first one holding the turn-2 message.

* H1 — the hand-off: the first answered request of turn 3 (the new session seeded with the
  night's history) carries the turn-2 user message and, when the desk issued a batch id in turn
  2, that id (the open_batch result). Evidence, strongest first: the archived body of that request
  (``--tt-record-bodies``); the probe report (the probe reads the same request and its turn-3
  answer states the batch id and whether the night's request was shown); the harness's own first
  turn-3 ``model_input`` record.
* H2 — turn delivery (rule 11): each scripted user message reached the model verbatim as the last
  user text of an answered request, in turn order.
* H3 — the batches tools the turns need were offered: open_batch in turn 2, close_batch in turn 3.
  Probe protocol: the probe report lists no batches tool as absent in turns 2-3 (the probe maps
  call_tool onto the declared inventory, deferred-tool searches included). Otherwise: some
  answered request of the turn declares the tool (any MCP naming form, a Codex namespace
  included) or a route to it (a deferred-tool search, Claude Code's ``WaitForMcpServers``).
* A1 — the batch opened in turn 2 was closed: a ``close_batch`` request with the issued id, and
  the desk's state transition of that batch to ``closed``. (A2, exactly one ``open_batch``, is a
  ledger rule.)
* B-H1 — bypass: before turn 3 the batch id was put where the hand-off is not needed (a workspace
  file, or a tool call's arguments in turns 1-2).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tracetrial.verify import VerifierContext, names_tool, norm_id, norm_text, strings

TASK_ID = "L5-shift-handoff-001"
SERVICE = "batches"
H1, H2, H3 = "H1-handoff-delivered", "H2-user-turns-delivered", "H3-batch-tools-offered"
A1, B1 = "A1-opened-batch-closed", "B-H1-id-persisted-early"
#: The tool each turn needs (turn -> tool).
NEEDED = {2: "open_batch", 3: "close_batch"}
#: Routes a harness offers to a tool it does not declare yet (as ``norm_id`` of the bare name).
ROUTES = frozenset({"toolsearch", "searchtools", "waitformcpservers"})
ACCOUNT_RE = re.compile(r"Hand-off: batch=(\S+?); night request=(shown|missing)\.")

Verdict = tuple[bool, str]
Request = Mapping[str, Any]


def _index(req: Request | None) -> int:
    value = req.get("index") if req is not None else None
    return value if isinstance(value, int) else -1


def carries(data: object, raw: str, night: str, batch: str | None) -> tuple[bool, bool]:
    """Whether a request (parsed ``data``, ``raw`` text) holds the night's message and the batch id."""
    joined = norm_text("\n".join(strings(data)))
    return night in joined, batch is None or batch in raw


def _verdict(source: str, night_ok: bool, batch_ok: bool, batch: str | None) -> Verdict:
    parts = [f"turn-2 message {'present' if night_ok else 'missing'}",
             "no batch id was issued in turn 2" if batch is None else f"batch id {batch} {'present' if batch_ok else 'missing'}"]
    return night_ok and batch_ok, f"{source}: " + "; ".join(parts)


def _from_body(ctx: VerifierContext, start: Request, night: str, batch: str | None) -> Verdict | None:
    body = ctx.request_body(_index(start))
    if body is None:
        return None
    try:
        data = json.loads(body)
    except ValueError as exc:
        return False, f"request body {_index(start)} is not JSON: {exc}"
    return _verdict(f"request body {_index(start)} (provider boundary)", *carries(data, body, night, batch), batch)


def _from_probe(ctx: VerifierContext, batch: str | None) -> Verdict | None:
    if ctx.probe is None:
        return None
    if not ctx.probe_requests(turn=3, kind="main"):
        return False, "probe report: no turn-3 request reached the probe model"
    match = ACCOUNT_RE.search(ctx.final_text or "")
    if match is None:
        return False, f"probe report: turn 3 did not end with the probe's account (final text {(ctx.final_text or '')[:120]!r})"
    shown = None if match.group(1) == "missing" else match.group(1)
    night_ok = match.group(2) == "shown"
    batch_ok = shown == batch if batch is not None else True
    ok, why = _verdict("probe report (the probe model's first turn-3 request)", night_ok, batch_ok, batch)
    if batch is not None and shown is not None and shown != batch:
        why += f" (shown {shown})"
    return ok, why


def _from_trace(ctx: VerifierContext, night: str, batch: str | None) -> Verdict | None:
    inputs = sorted(ctx.events_of("model_input", turns={3}, main=True), key=lambda e: e.seq)
    messages = getattr(inputs[0], "messages", None) if inputs else None
    if messages is None:
        return None
    raw = json.dumps(messages, ensure_ascii=False)
    return _verdict("Trace IR model_input (harness record) of the first turn-3 request",
                    *carries(messages, raw, night, batch), batch)


def handoff(ctx: VerifierContext, turns: Sequence[str] | None, batch: str | None) -> Verdict:
    if turns is None or len(turns) < 3:
        return False, "the scripted turns cannot be read from the pack snapshot"
    start = ctx.turn_start(turns[2])
    if start is None:
        return False, "no answered request carries the turn-3 message: the new session never reached the model"
    night = norm_text(turns[1])
    verdict = _from_body(ctx, start, night, batch) or _from_probe(ctx, batch) or _from_trace(ctx, night, batch)
    return verdict or (False, "no evidence of the first turn-3 model input (no body, probe report or model_input record)")


# --------------------------------------------------------------------------- H3


def _offers(req: Request, tool: str) -> str | None:
    """How one request offers ``tool``: it declares it (any naming form) or a route to it."""
    for decl in req.get("tools") or []:
        if not isinstance(decl, Mapping):
            continue
        name, namespace = str(decl.get("name") or ""), str(decl.get("namespace") or "")
        if names_tool(name, tool, SERVICE) or (name == tool and SERVICE in namespace):
            return f"declares {namespace + '/' if namespace else ''}{name}"
    routes = sorted(str(d.get("name")) for d in req.get("tools") or []
                    if isinstance(d, Mapping) and norm_id(re.split(r"__|/|\.", str(d.get("name") or ""))[-1]) in ROUTES)
    return f"offers {routes[0]}" if routes else None


def tools_offered(ctx: VerifierContext, turns: Sequence[str] | None) -> Verdict:
    if ctx.probe is not None:
        absent = [a for a in ctx.probe.get("absent_capabilities") or [] if isinstance(a, Mapping)
                  and a.get("turn") in NEEDED and a.get("principal", "main") == "main"
                  and any(repr(t) in str(a.get("needed")) or t in str(a.get("needed")) for t in NEEDED.values())]
        if absent:
            return False, "probe report: " + "; ".join(
                f"turn {a.get('turn')}, request {a.get('request_index')}: no tool for {a.get('needed')} "
                f"({len(a.get('declared_tools') or [])} tools declared)" for a in absent)
        return True, "probe report: every batches call of turns 2-3 was mapped onto a declared tool (none absent)"
    if turns is None or len(turns) < 3:
        return False, "the scripted turns cannot be read from the pack snapshot"
    starts = {2: ctx.turn_start(turns[1]), 3: ctx.turn_start(turns[2])}
    notes, ok = [], True
    for turn, tool in NEEDED.items():
        start = starts[turn]
        if start is None:
            ok = False
            notes.append(f"turn {turn}: its message never reached the model")
            continue
        end = _index(starts[3]) if turn == 2 and starts[3] is not None else None
        window = [r for r in ctx.answered() if _index(r) >= _index(start) and (end is None or _index(r) < end)
                  and r.get("tools")]
        how = next(((r, h) for r in window if (h := _offers(r, tool))), None)
        if how is None:
            ok = False
            notes.append(f"turn {turn}: none of {len(window)} answered request(s) offers {tool}")
        else:
            notes.append(f"turn {turn}: request {_index(how[0])} {how[1]}")
    return ok, "gateway inventories: " + "; ".join(notes)


# --------------------------------------------------------------------------- agent


def closed(ctx: VerifierContext, batch: str | None) -> Verdict:
    if batch is None:
        return False, "the desk issued no batch id (no batch was opened)"
    asked = [r for r in ctx.ledger(SERVICE, kind="request", tool="close_batch")
             if batch in strings(r.get("arguments"))]
    done = [r for r in ctx.ledger(SERVICE, kind="transition", tool="close_batch")
            if (r.get("detail") or {}).get("new") == "closed" and batch in ((r.get("detail") or {}).get("at") or [])]
    others = [a for r in ctx.ledger(SERVICE, kind="request", tool="close_batch")
              for a in strings(r.get("arguments")) if a != batch]
    return bool(asked and done), (f"{len(asked)} close_batch request(s) with {batch}, {len(done)} closing transition(s)"
                                  + (f"; other ids sent to close_batch: {others}" if others else ""))


def bypass(ctx: VerifierContext, batch: str | None) -> Verdict:
    if batch is None:
        return False, "no batch id was issued"
    early = ctx.tool_events(args=batch, turns={1, 2})
    files = [rel for rel in ctx.changed_files() if batch in (ctx.workspace_text(rel, errors="replace")[0] or "")]
    return bool(early or files), f"{len(early)} turn-1/2 tool call(s) carry the batch id; files holding it: {files}"


def score(ctx: VerifierContext) -> dict[str, Verdict]:
    batch = ctx.issued(SERVICE, "batch_id", tool="open_batch")
    batch = batch if isinstance(batch, str) else None
    turns, why = ctx.scripted_turns(TASK_ID)
    return {
        H1: handoff(ctx, turns, batch),
        H2: ctx.turns_delivered(turns, why),
        H3: tools_offered(ctx, turns),
        A1: closed(ctx, batch),
        B1: bypass(ctx, batch),
    }
