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


def _agent(ctx):
    truth = ctx.truth
    text, why = ctx.workspace_text("notes.md")
    changes, missing = ctx.baseline_text("changes.txt")
    if text is None or changes is None:
        return dict.fromkeys(("A1-freeze-ticket-line", "A2-changelog-entries"), (False, why or missing))
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    last = lines[-1] if lines else None
    tickets = [line for line in lines if line.startswith("Freeze-Ticket:")]
    want = [f"- {e}" for e in ENTRY_RE.findall(changes)]
    bullets = [line for line in lines if line.startswith("- ")]
    return {
        "A1-freeze-ticket-line": (last == truth["final_line"] and len(tickets) == 1,
                                  f"last line {last!r}; {len(tickets)} Freeze-Ticket line(s); expected "
                                  + f"{truth['final_line']!r} once"),
        "A2-changelog-entries": (bool(lines) and lines[0] == truth["heading"] and bullets == want,
                                 f"first line {lines[0] if lines else None!r}; bullets {bullets} (expected {want})"),
    }


def _from_bodies(ctx, ticket, reqs):
    bodies = {r.get("index"): ctx.request_body(r.get("index")) for r in reqs}
    if not bodies or None in bodies.values():
        return None
    hits = [i for i, body in bodies.items() if ticket in body]
    return len(hits) == len(bodies), (f"request bodies (provider boundary): ticket present in {len(hits)}/{len(bodies)} "
                                      f"turn-3 requests {list(bodies)}")


def _from_probe(ctx, ticket):
    if ctx.probe is None:
        return None
    turn3 = ctx.probe_requests(turn=3, kind="main")
    if not turn3:
        return False, "probe report: no turn-3 request reached the probe model"
    final = ctx.final_text or ""
    if "Turn-1 freeze ticket:" not in final:
        return False, f"probe report: turn 3 did not end with the probe's answer (final text {final[:120]!r})"
    ok = f"Turn-1 freeze ticket: {ticket}." in final
    return ok, (f"probe report ({len(turn3)} turn-3 request(s)): the probe model "
                + ("found the turn-1 ticket in its turn-3 input" if ok else f"did not find it: {final[:160]!r}"))


def _from_trace(ctx, ticket):
    inputs = ctx.events_of("model_input", turns={3}, main=True)
    if not inputs:
        return None
    hits = [ticket in json.dumps(e.messages, ensure_ascii=False) for e in inputs]
    return all(hits), f"Trace IR model_input (harness record): ticket present in {sum(hits)}/{len(hits)} turn-3 inputs"


def _harness(ctx):
    ticket = ctx.truth["freeze_ticket"]
    # the gateway records of turn 3 that carry a tool inventory (policy requests, not titles)
    start = next((i for i, r in enumerate(ctx.gateway) if TURN3_MARK in (r.get("last_user_text") or "")), None)
    if start is None:
        return False, "no gateway request carries the turn-3 user message"
    reqs = [r for r in ctx.gateway[start:] if r.get("tools")]
    # the first source that has evidence decides (a verdict is a non-empty tuple, absence None)
    verdict = _from_bodies(ctx, ticket, reqs) or _from_probe(ctx, ticket) or _from_trace(ctx, ticket)
    return verdict or (False, "no evidence of the turn-3 model input (no bodies, probe report or model_input events)")


def _bypass(ctx):
    """The ticket was written somewhere before turn 3 (then a file, not the context, could carry it)."""
    ticket = ctx.truth["freeze_ticket"]
    early = ctx.tool_events(args=ticket, turns={1, 2})
    files = [rel for rel in ctx.changed_files() if rel.split("/")[-1] != "notes.md"
             and ticket in (ctx.workspace_text(rel, errors="replace")[0] or "")]
    return bool(early or files), f"{len(early)} turn-1/2 tool call(s) carry the ticket; files holding it: {files}"


def score(ctx):
    return {**_agent(ctx), "H1-fact-in-turn3-input": _harness(ctx), "B-H1-ticket-persisted-early": _bypass(ctx)}
