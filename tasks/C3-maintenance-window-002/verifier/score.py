"""Deterministic verifier of C3-maintenance-window-002.

Truth anchor: the ``changes`` ledger, which records the approval code it issued in the turn-1
booking result (a per-run value; no tool can show it again).

* H1 — the turn-3 model input still holds the approval code. Evidence, strongest first:
  archived request bodies of the turn-3 requests (``--tt-record-bodies``); the probe report
  (the probe reads the same request bodies and its turn-3 final answer states the code it found
  there, or that it found none); the harness's own turn-3 ``model_input`` records (live runs).
  The gateway records alone keep only each request's last user text.
* H2 — turn delivery (rule 11): each scripted user message (prompt.md and turns.json, read from
  the archived pack snapshot) reached the model verbatim, as the last user text of some answered
  provider request, in turn order.
* A1/A2 — runbook.md ends with the one ``Approval: <issued code>`` line, after the heading and
  the numbered steps of steps.txt (frozen baseline). (A3, one booking, is a ledger rule.)
* B-H1 — bypass: the code was written into a tool call or a workspace file before turn 3.
"""

import json
import re

SERVICE = "changes"
VALUE = "approval_code"
TASK_ID = "C3-maintenance-window-002"
HEADING = "# payments-api maintenance"
TURN3_MARK = "Finally, append one last line"
STEP_RE = re.compile(r"(?m)^step:\s*(.+?)\s*$")


def _agent(ctx, code):
    text, why = ctx.workspace_text("runbook.md")
    steps_src, missing = ctx.baseline_text("steps.txt")
    if text is None or steps_src is None:
        return dict.fromkeys(("A1-approval-line", "A2-runbook-steps"), (False, why or missing))
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    last = lines[-1] if lines else None
    approvals = [line for line in lines if line.startswith("Approval:")]
    want_steps = [f"{n}. {s}" for n, s in enumerate(STEP_RE.findall(steps_src), start=1)]
    got_steps = [line for line in lines if re.match(r"^\d+\. ", line)]
    if code is None:
        a1 = (False, f"the change desk issued no approval code (last line {last!r})")
    else:
        a1 = (last == f"Approval: {code}" and len(approvals) == 1,
              f"last line {last!r}; {len(approvals)} Approval line(s); expected 'Approval: {code}' once")
    return {
        "A1-approval-line": a1,
        "A2-runbook-steps": (bool(lines) and lines[0] == HEADING and got_steps == want_steps,
                             f"first line {lines[0] if lines else None!r}; steps {got_steps} (expected {want_steps})"),
    }


def _from_bodies(ctx, code, reqs):
    bodies = {r.get("index"): ctx.request_body(r.get("index")) for r in reqs}
    if not bodies or None in bodies.values():
        return None
    hits = [i for i, body in bodies.items() if code in body]
    return len(hits) == len(bodies), (f"request bodies (provider boundary): code present in {len(hits)}/{len(bodies)} "
                                      f"turn-3 requests {list(bodies)}")


def _from_probe(ctx, code):
    if ctx.probe is None:
        return None
    turn3 = ctx.probe_requests(turn=3, kind="main")
    if not turn3:
        return False, "probe report: no turn-3 request reached the probe model"
    final = ctx.final_text or ""
    if "Turn-1 approval code:" not in final:
        return False, f"probe report: turn 3 did not end with the probe's answer (final text {final[:120]!r})"
    ok = f"Turn-1 approval code: {code}." in final
    return ok, (f"probe report ({len(turn3)} turn-3 request(s)): the probe model "
                + ("found the booking's approval code in its turn-3 input" if ok else f"did not find it: {final[:160]!r}"))


def _from_trace(ctx, code):
    inputs = ctx.events_of("model_input", turns={3}, main=True)
    if not inputs:
        return None
    hits = [code in json.dumps(e.messages, ensure_ascii=False) for e in inputs]
    return all(hits), f"Trace IR model_input (harness record): code present in {sum(hits)}/{len(hits)} turn-3 inputs"


def _fact_in_turn3(ctx, code):
    if code is None:
        return False, "the change desk issued no approval code (the turn-1 booking never succeeded)"
    start = next((i for i, r in enumerate(ctx.gateway) if TURN3_MARK in (r.get("last_user_text") or "")), None)
    if start is None:
        return False, "no gateway request carries the turn-3 user message"
    reqs = [r for r in ctx.gateway[start:] if r.get("tools")]
    verdict = _from_bodies(ctx, code, reqs) or _from_probe(ctx, code) or _from_trace(ctx, code)
    return verdict or (False, "no evidence of the turn-3 model input (no bodies, probe report or model_input events)")


def _bypass(ctx, code):
    """The code was written somewhere before turn 3 (then a file, not the context, could carry it)."""
    if code is None:
        return False, "no approval code was issued"
    early = ctx.tool_events(args=code, turns={1, 2})
    files = [rel for rel in ctx.changed_files() if rel.split("/")[-1] != "runbook.md"
             and code in (ctx.workspace_text(rel, errors="replace")[0] or "")]
    return bool(early or files), f"{len(early)} turn-1/2 tool call(s) carry the code; files holding it: {files}"


def score(ctx):
    code = ctx.issued(SERVICE, VALUE)
    return {**_agent(ctx, code),
            "H1-fact-in-turn3-input": _fact_in_turn3(ctx, code),
            "H2-user-turns-delivered": ctx.turns_delivered(*ctx.scripted_turns(TASK_ID)),
            "B-H1-code-persisted-early": _bypass(ctx, code)}
