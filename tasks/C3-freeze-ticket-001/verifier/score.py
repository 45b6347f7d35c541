"""Deterministic verifier of C3-freeze-ticket-001.

Harness evidence that the turn-1 fact reached the turn-3 model input, strongest first:

1. archived provider request bodies (``gateway/bodies/<index>.json``, only with
   ``--tt-record-bodies``) of the turn-3 requests;
2. the probe report: the probe builds its view from the same request bodies, and its
   turn-3 final answer states the ticket it found there (or that it found none);
3. the harness's own Trace IR ``model_input`` events of turn 3 (live protocol without bodies).

The gateway records themselves keep only each request's *last* user text, so they show
that turn 3 was delivered but not what history came with it.
"""

import json
import re

TURN3_MARK = "Finally, append one last line"
ENTRY_RE = re.compile(r"(?m)^entry:\s*(.+?)\s*$")


def _entries(baseline):
    return ENTRY_RE.findall((baseline / "changes.txt").read_text(encoding="utf-8"))


def _agent(ctx):
    truth = ctx.truth
    path = ctx.workspace / "notes.md"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        reason = f"notes.md missing: {exc}"
        return {"A1-freeze-ticket-line": (False, reason), "A2-changelog-entries": (False, reason)}
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    last = lines[-1] if lines else None
    ticket_lines = [line for line in lines if line.startswith("Freeze-Ticket:")]
    ok1 = last == truth["final_line"] and len(ticket_lines) == 1
    out = {"A1-freeze-ticket-line": (ok1, (f"last line {last!r}; {len(ticket_lines)} Freeze-Ticket line(s); "
                                          f"expected {truth['final_line']!r} once"))}
    want = [f"- {e}" for e in _entries(ctx.baseline)]
    bullets = [line for line in lines if line.startswith("- ")]
    ok2 = bool(lines) and lines[0] == truth["heading"] and bullets == want
    out["A2-changelog-entries"] = (ok2, (f"first line {lines[0] if lines else None!r}; bullets {bullets} "
                                        f"(expected {want})"))
    return out


def _turn3_requests(ctx):
    """Gateway records of turn 3 that carry a tool inventory (policy requests, not titles)."""
    records = list(ctx.gateway or [])
    start = next((i for i, r in enumerate(records) if TURN3_MARK in (r.get("last_user_text") or "")), None)
    if start is None:
        return None
    return [r for r in records[start:] if r.get("tools")]


def _from_bodies(ctx, ticket, reqs):
    folder = ctx.run_dir / "gateway" / "bodies"
    if not reqs or not folder.is_dir():
        return None
    seen = []
    for r in reqs:
        body = folder / f"{r.get('index')}.json"
        if not body.is_file():
            return None
        seen.append((r.get("index"), ticket in body.read_text(encoding="utf-8", errors="replace")))
    ok = all(hit for _, hit in seen)
    return ok, f"request bodies (provider boundary): ticket present in {sum(h for _, h in seen)}/{len(seen)} turn-3 requests {[i for i, _ in seen]}"


def _from_probe(ctx, ticket):
    probe = ctx.probe
    if not isinstance(probe, dict):
        return None
    turn3 = [r for r in probe.get("requests") or [] if r.get("turn") == 3 and r.get("kind") == "main"]
    if not turn3:
        return False, "probe report: no turn-3 request reached the probe model"
    final = probe.get("final_text") or ""
    if "Turn-1 freeze ticket:" not in final:
        return False, f"probe report: turn 3 did not end with the probe's answer (final text {final[:120]!r})"
    ok = f"Turn-1 freeze ticket: {ticket}." in final
    return ok, (f"probe report ({len(turn3)} turn-3 request(s)): the probe model "
                + ("found the turn-1 ticket in its turn-3 input" if ok else f"did not find it: {final[:160]!r}"))


def _from_trace(ctx, ticket):
    inputs = [e for e in ctx.events or [] if e.event_type == "model_input" and e.conversation_turn == 3
              and (e.principal_id in (None, "main"))]
    if not inputs:
        return None
    hits = [ticket in json.dumps(e.messages, ensure_ascii=False) for e in inputs]
    return all(hits), f"Trace IR model_input (harness record): ticket present in {sum(hits)}/{len(hits)} turn-3 inputs"


def _harness(ctx):
    ticket = ctx.truth["freeze_ticket"]
    reqs = _turn3_requests(ctx)
    if reqs is None:
        return {"H1-fact-in-turn3-input": (False, "no gateway request carries the turn-3 user message")}
    for source in (lambda: _from_bodies(ctx, ticket, reqs), lambda: _from_probe(ctx, ticket),
                   lambda: _from_trace(ctx, ticket)):
        verdict = source()
        if verdict is not None:
            return {"H1-fact-in-turn3-input": verdict}
    return {"H1-fact-in-turn3-input": (False, ("no evidence of the turn-3 model input (no bodies, probe report "
                                              "or model_input events)"))}


def _bypass(ctx):
    """The ticket was written somewhere before turn 3 (then a file, not the context, could carry it)."""
    ticket = ctx.truth["freeze_ticket"]
    early = [e for e in ctx.events or [] if e.event_type == "tool" and (e.conversation_turn or 0) in (1, 2)
             and ticket in json.dumps(e.tool_call.arguments, ensure_ascii=False)]
    files = [p.relative_to(ctx.workspace).as_posix() for p in ctx.workspace.rglob("*")
             if p.is_file() and p.name != "notes.md" and p.stat().st_size < 1_000_000
             and ticket in p.read_text(encoding="utf-8", errors="replace")]
    held = bool(early or files)
    why = f"{len(early)} turn-1/2 tool call(s) carry the ticket; files holding it: {files}"
    return {"B-H1-ticket-persisted-early": (held, why)}


def score(ctx):
    out = _agent(ctx)
    out.update(_harness(ctx))
    out.update(_bypass(ctx))
    return out
