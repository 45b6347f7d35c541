"""Deterministic verifier of L5-instrument-hold-002.

Truth anchor: the ``instruments`` ledger — the hold id it issued in the one turn-1 ``place_hold``
call (a per-call value of the run seed, shown by no other tool), the ``confirm_hold`` requests and
the state transition that confirmed the hold — and the provider-boundary records (what each model
request carried).

Turn 2 starts at the first answered provider request whose last user text holds the turn-2 message
(pack snapshot). The session it hands over has a single turn, so a stale hand-off (the history as
it stood before its last turn) carries none of it.

* H1 — the hand-off: the first answered request of turn 2 (the new session seeded with the
  booking session's history) carries the turn-1 user message and, when the desk issued a hold id in
  turn 1, that id (the place_hold result). Evidence, strongest first: the archived body of that
  request (``--tt-record-bodies``); the probe report (the probe reads the same request and its
  turn-2 answer states the hold id and whether the turn-1 request was shown); the harness's own
  first turn-2 ``model_input`` record.
* H2 — turn delivery (rule 11): each scripted user message reached the model verbatim as the last
  user text of an answered request, in turn order.
* H3 — the instruments tools each turn needs were offered: place_hold in turn 1, confirm_hold in
  turn 2. Probe protocol: the probe report lists no instruments tool as absent (the probe maps
  call_tool onto the declared inventory, deferred-tool searches included). Otherwise: some answered
  request of the turn declares the tool (any MCP naming form, a Codex namespace included) or a
  route to it (a deferred-tool search, Claude Code's ``WaitForMcpServers``).
* A1 — the hold placed in turn 1 was confirmed: a ``confirm_hold`` request with the issued id, and
  the desk's state transition of that hold to ``confirmed``. (A2, exactly one ``place_hold``, is a
  ledger rule.)
* B-H1 — bypass: before turn 2 the hold id was put where the hand-off is not needed (a workspace
  file, or the arguments of a turn-1 tool call).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tracetrial.verify import VerifierContext, names_tool, norm_id, norm_text, strings

TASK_ID = "L5-instrument-hold-002"
SERVICE = "instruments"
H1, H2, H3 = "H1-handoff-delivered", "H2-user-turns-delivered", "H3-hold-tools-offered"
A1, B1 = "A1-placed-hold-confirmed", "B-H1-id-persisted-early"
#: The tool each turn needs (turn -> tool).
NEEDED = {1: "place_hold", 2: "confirm_hold"}
#: Routes a harness offers to a tool it does not declare yet (as ``norm_id`` of the bare name).
ROUTES = frozenset({"toolsearch", "searchtools", "waitformcpservers"})
ACCOUNT_RE = re.compile(r"Hand-off: hold=(\S+?); earlier request=(shown|missing)\.")

Verdict = tuple[bool, str]
Request = Mapping[str, Any]


def _index(req: Request | None) -> int:
    value = req.get("index") if req is not None else None
    return value if isinstance(value, int) else -1


def carries(data: object, raw: str, earlier: str, hold: str | None) -> tuple[bool, bool]:
    """Whether a request (parsed ``data``, ``raw`` text) holds the turn-1 message and the hold id."""
    joined = norm_text("\n".join(strings(data)))
    return earlier in joined, hold is None or hold in raw


def _verdict(source: str, earlier_ok: bool, hold_ok: bool, hold: str | None) -> Verdict:
    parts = [f"turn-1 message {'present' if earlier_ok else 'missing'}",
             "no hold id was issued in turn 1" if hold is None else f"hold id {hold} {'present' if hold_ok else 'missing'}"]
    return earlier_ok and hold_ok, f"{source}: " + "; ".join(parts)


def _from_body(ctx: VerifierContext, start: Request, earlier: str, hold: str | None) -> Verdict | None:
    body = ctx.request_body(_index(start))
    if body is None:
        return None
    try:
        data = json.loads(body)
    except ValueError as exc:
        return False, f"request body {_index(start)} is not JSON: {exc}"
    return _verdict(f"request body {_index(start)} (provider boundary)", *carries(data, body, earlier, hold), hold)


def _from_probe(ctx: VerifierContext, hold: str | None) -> Verdict | None:
    if ctx.probe is None:
        return None
    if not ctx.probe_requests(turn=2, kind="main"):
        return False, "probe report: no turn-2 request reached the probe model"
    match = ACCOUNT_RE.search(ctx.final_text or "")
    if match is None:
        return False, f"probe report: turn 2 did not end with the probe's account (final text {(ctx.final_text or '')[:120]!r})"
    shown = None if match.group(1) == "missing" else match.group(1)
    earlier_ok = match.group(2) == "shown"
    hold_ok = shown == hold if hold is not None else True
    ok, why = _verdict("probe report (the probe model's first turn-2 request)", earlier_ok, hold_ok, hold)
    if hold is not None and shown is not None and shown != hold:
        why += f" (shown {shown})"
    return ok, why


def _from_trace(ctx: VerifierContext, earlier: str, hold: str | None) -> Verdict | None:
    inputs = sorted(ctx.events_of("model_input", turns={2}, main=True), key=lambda e: e.seq)
    messages = getattr(inputs[0], "messages", None) if inputs else None
    if messages is None:
        return None
    raw = json.dumps(messages, ensure_ascii=False)
    return _verdict("Trace IR model_input (harness record) of the first turn-2 request",
                    *carries(messages, raw, earlier, hold), hold)


def handoff(ctx: VerifierContext, turns: Sequence[str] | None, hold: str | None) -> Verdict:
    if turns is None or len(turns) < 2:
        return False, "the scripted turns cannot be read from the pack snapshot"
    start = ctx.turn_start(turns[1])
    if start is None:
        return False, "no answered request carries the turn-2 message: the new session never reached the model"
    earlier = norm_text(turns[0])
    verdict = _from_body(ctx, start, earlier, hold) or _from_probe(ctx, hold) or _from_trace(ctx, earlier, hold)
    return verdict or (False, "no evidence of the first turn-2 model input (no body, probe report or model_input record)")


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
                  and any(t in str(a.get("needed")) for t in NEEDED.values())]
        if absent:
            return False, "probe report: " + "; ".join(
                f"turn {a.get('turn')}, request {a.get('request_index')}: no tool for {a.get('needed')} "
                f"({len(a.get('declared_tools') or [])} tools declared)" for a in absent)
        return True, "probe report: every instruments call was mapped onto a declared tool (none absent)"
    if turns is None or len(turns) < 2:
        return False, "the scripted turns cannot be read from the pack snapshot"
    starts = {1: ctx.turn_start(turns[0]), 2: ctx.turn_start(turns[1])}
    notes, ok = [], True
    for turn, tool in NEEDED.items():
        start = starts[turn]
        if start is None:
            ok = False
            notes.append(f"turn {turn}: its message never reached the model")
            continue
        end = _index(starts[2]) if turn == 1 and starts[2] is not None else None
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


def confirmed(ctx: VerifierContext, hold: str | None) -> Verdict:
    if hold is None:
        return False, "the desk issued no hold id (no hold was placed)"
    asked = [r for r in ctx.ledger(SERVICE, kind="request", tool="confirm_hold")
             if hold in strings(r.get("arguments"))]
    done = [r for r in ctx.ledger(SERVICE, kind="transition", tool="confirm_hold")
            if (r.get("detail") or {}).get("new") == "confirmed" and hold in ((r.get("detail") or {}).get("at") or [])]
    others = [a for r in ctx.ledger(SERVICE, kind="request", tool="confirm_hold")
              for a in strings(r.get("arguments")) if a != hold]
    return bool(asked and done), (f"{len(asked)} confirm_hold request(s) with {hold}, {len(done)} confirming transition(s)"
                                  + (f"; other ids sent to confirm_hold: {others}" if others else ""))


def bypass(ctx: VerifierContext, hold: str | None) -> Verdict:
    if hold is None:
        return False, "no hold id was issued"
    early = ctx.tool_events(args=hold, turns={1})
    files = [rel for rel in ctx.changed_files() if hold in (ctx.workspace_text(rel, errors="replace")[0] or "")]
    return bool(early or files), f"{len(early)} turn-1 tool call(s) carry the hold id; files holding it: {files}"


def score(ctx: VerifierContext) -> dict[str, Verdict]:
    hold = ctx.issued(SERVICE, "hold_id", tool="place_hold")
    hold = hold if isinstance(hold, str) else None
    turns, why = ctx.scripted_turns(TASK_ID)
    return {
        H1: handoff(ctx, turns, hold),
        H2: ctx.turns_delivered(turns, why),
        H3: tools_offered(ctx, turns),
        A1: confirmed(ctx, hold),
        B1: bypass(ctx, hold),
    }
