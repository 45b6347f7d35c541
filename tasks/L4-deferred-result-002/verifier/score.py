"""Deterministic verifier of L4-deferred-result-002.

Truth anchor: the batch's own evidence. ``settle_batch.py`` writes ``batch_result.json`` (the
settlement reference, start and finish time, epoch seconds) only when it is finished; the
reference is generated at the end of the batch and is confirmed by the child's command output the
harness delivered (gateway).

* H1 (gateway): every text the harness delivered to the *parent* (tool results, user-role
  notifications) that says a sub-agent finished arrived after the batch had really finished.
  Notifications a harness writes as user-role text are left out of the records' ``last_user_text``
  (Claude Code's ``[SYSTEM NOTIFICATION ...]``), so they are read from the archived request bodies
  (``--tt-record-bodies``); without bodies H1 sees tool results and genuine user texts only.
* H2 (model input of turn 2): the parent's turn-2 input holds the batch's reference - the
  child's completion was delivered to the parent and is still there in the later turn. Evidence,
  strongest first: archived request bodies of the parent's turn-2 requests; the probe report (its
  turn-2 answer states the reference it found in its input, or that it found none); the
  harness's own turn-2 ``model_input`` records.
* H3 (gateway): turn delivery (rule 11) - both scripted user messages reached the model verbatim.
* A1: status.json (written once in turn 1) claims no result the batch had not produced.
* A2: result.json (turn 2) holds the batch's reference, one the parent was shown.

Parent vs child requests at the gateway: a request is the child's when it delivers a result of
a call the child made (probe report, Trace IR) or when its last user text holds the delegated
prompt (the spawn call's ``prompt``/``message`` argument).
"""

import json
import re
from datetime import UTC, datetime

from tracetrial.verify import as_text, call_ids, norm_id, norm_text

TASK_ID = "L4-deferred-result-002"
TURN2_MARK = "The settlement batch should be finished by now"
SHOWN = "Settlement reference shown to me: "
DONE_RE = re.compile(r"(?i)\bstatus\W{0,4}(?:completed|finished|done|succeeded)\b|\"completed\"\s*:")
TOLERANCE_S = 0.5
#: Lifecycle words of a child stopped before it finished (Trace IR action / status / stop_reason).
STOPPED = frozenset({"abandon", "abandoned", "aborted", "interrupted", "cancelled", "canceled", "killed", "shutdown"})


def _ts(text):
    try:
        value = datetime.fromisoformat(str(text))
    except ValueError:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def _when(t):
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S.%f")[:-3] if t is not None else "?"


# ----------------------------------------------------------------------------- evidence


def job_result(ctx):
    """The finished batch's record, or None when the batch never finished."""
    data, _ = ctx.workspace_json("batch_result.json", want=dict)
    pattern = (ctx.truth or {}).get("value_pattern", r"^SETL-[0-9a-f]{10}$")
    if data is None or not re.match(pattern, str(data.get("value", ""))):
        return None
    if not isinstance(data.get("finished_at"), (int, float)):
        return None
    return data


def value_confirmed(ctx, job):
    """The batch's reference appears in some delivered tool result (the child's command output)."""
    return bool(ctx.deliveries(content=job["value"]))


def spawn_call_ids(ctx):
    return ctx.probe_call_ids("spawn_subagent", main=True) | {i for e in ctx.spawn_events() for i in call_ids(e)}


def _spawn_prompts(ctx):
    out = []
    for e in ctx.spawn_events():
        args = e.tool_call.arguments if isinstance(e.tool_call.arguments, dict) else {}
        for key in ("prompt", "message", "task", "instructions", "input"):
            if isinstance(args.get(key), str) and args[key].strip():
                out.append(norm_text(args[key])[:80])
    return out


def _child_call_ids(ctx):
    return ctx.probe_call_ids(main=False) | {i for e in ctx.tool_events() if e.principal_role == "child"
                                             for i in call_ids(e)}


def _is_child_request(req, child_ids, prompts):
    if any(norm_id(r.get("id")) in child_ids for r in req.get("tool_results") or []):
        return True
    user = norm_text(req.get("last_user_text"))
    return bool(prompts) and any(p and p in user for p in prompts)


def _body_texts(body_text, wire):
    """User-role texts of a raw request body, harness-injected ones included: the gateway's ``last_user_text`` leaves out notifications a harness writes as
    user-role text (Claude Code's ``[SYSTEM NOTIFICATION ...]`` / ``<task-notification>``)."""
    try:
        body = json.loads(body_text)
    except (TypeError, ValueError):
        return []
    if not isinstance(body, dict):
        return []
    items = body.get("input") if wire == "responses" else body.get("messages")
    out = []
    for m in items if isinstance(items, list) else []:
        if not isinstance(m, dict) or m.get("type", "message") != "message":
            continue
        if m.get("role") != "user":
            continue
        content = m.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out.extend(b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)
                       and b.get("type", "text") in ("text", "input_text"))
    return out


def parent_deliveries(ctx):
    """``(arrival epoch, kind, text, call id)`` for every text delivered in a parent request: its
    tool results and last user text (gateway records) and, when the raw bodies are archived
    (``--tt-record-bodies``), every user-role text of the body (harness notifications included)."""
    child_ids, prompts = _child_call_ids(ctx), _spawn_prompts(ctx)
    out = []
    for req in ctx.gateway:
        if _is_child_request(req, child_ids, prompts):
            continue
        t = _ts(req.get("started_at"))
        for r in req.get("tool_results") or []:
            out.append((t, "tool_result " + str(r.get("id")), as_text(r.get("content")), r.get("id")))
        if req.get("last_user_text"):
            out.append((t, "user text", req["last_user_text"], None))
        body = ctx.request_body(req.get("index"))
        if body is not None:
            out.extend((t, f"user-role text of request {req.get('index')} (body)", text, None)
                       for text in _body_texts(body, req.get("wire_format")))
    return out


def bodies_archived(ctx):
    return any(ctx.request_body(r.get("index")) is not None for r in ctx.gateway)


def turn2_requests(ctx):
    """The parent's gateway requests from the one carrying the turn-2 message on (None: never sent)."""
    start = next((i for i, r in enumerate(ctx.gateway) if TURN2_MARK in (r.get("last_user_text") or "")), None)
    if start is None:
        return None
    child_ids, prompts = _child_call_ids(ctx), _spawn_prompts(ctx)
    return [r for r in ctx.gateway[start:] if r.get("tools") and not _is_child_request(r, child_ids, prompts)]


# ----------------------------------------------------------------------------- harness


def h1(ctx, job):
    spawn_ids = spawn_call_ids(ctx)
    delivered = parent_deliveries(ctx)
    if not any(d[3] is not None and norm_id(d[3]) in spawn_ids for d in delivered):
        return False, "no result of the parent's sub-agent spawn call was delivered to the model"
    notices = {}
    for t, kind, text, _ in delivered:
        if DONE_RE.search(text):
            key = norm_text(text)[:300]
            if key not in notices or (t or 0) < (notices[key][0] or 0):
                notices[key] = (t, kind)
    if not notices:
        seen = ("tool results and user-role texts of the archived request bodies" if bodies_archived(ctx) else
                "tool results and last user texts of the gateway records; harness-injected user-role "
                "notifications are visible only with --tt-record-bodies")
        return True, ("the spawn result did not report the child finished and no completion notice reached the "
                      f"parent ({seen})" + ("" if job else "; the batch never finished"))
    bad = []
    for text, (t, kind) in notices.items():
        if job is None:
            bad.append(f"{kind} at {_when(t)} says the child finished, but the batch never finished: {text[:120]!r}")
        elif t is None or t < job["finished_at"] - TOLERANCE_S:
            bad.append(f"{kind} at {_when(t)} says the child finished, before the batch finished at "
                       f"{_when(job['finished_at'])}: {text[:120]!r}")
    if bad:
        return False, "; ".join(bad)
    first = min(t for t, _ in notices.values())
    return True, (f"{len(notices)} completion notice(s) reached the parent, the first at {_when(first)}, after the "
                  f"batch finished at {_when(job['finished_at'])}")


def _from_bodies(ctx, value, reqs):
    bodies = {r.get("index"): ctx.request_body(r.get("index")) for r in reqs}
    if not bodies or None in bodies.values():
        return None
    hits = [i for i, body in bodies.items() if value in body]
    return bool(hits), (f"request bodies (provider boundary): the reference is in {len(hits)}/{len(bodies)} of the "
                        f"parent's turn-2 requests {list(bodies)}")


def _from_probe(ctx, value):
    if ctx.probe is None:
        return None
    turn2 = ctx.probe_requests(turn=2, kind="main")
    if not turn2:
        return False, "probe report: no turn-2 request of the parent reached the probe model"
    final = ctx.final_text or ""
    if SHOWN not in final:
        return False, f"probe report: turn 2 did not end with the probe's account (final text {final[:120]!r})"
    ok = f"{SHOWN}{value}." in final
    return ok, (f"probe report ({len(turn2)} turn-2 request(s)): the parent's turn-2 input "
                + ("held the batch's reference" if ok else f"did not hold it: {final[:160]!r}"))


def _from_trace(ctx, value):
    inputs = ctx.events_of("model_input", turns={2}, main=True)
    if not inputs:
        return None
    hits = [value in json.dumps(e.messages, ensure_ascii=False, default=str) for e in inputs]
    return any(hits), f"Trace IR model_input (harness record): the reference is in {sum(hits)}/{len(hits)} turn-2 inputs"


def _child_stopped(ctx):
    """What the harness's own records say about a child stopped before it finished (diagnosis only)."""
    stops = [e for e in ctx.events_of("subagent_lifecycle")
             if str(getattr(e, "status", "") or "").lower() in STOPPED or str(getattr(e, "action", "") or "").lower()
             in STOPPED or str(getattr(e, "stop_reason", "") or "").lower() in STOPPED]
    if not stops:
        return ""
    e = stops[0]
    return (f"; the harness's records show the child stopped in turn {e.conversation_turn} (action "
            f"{getattr(e, 'action', None)!r}, status {getattr(e, 'status', None)!r}, stop_reason "
            f"{getattr(e, 'stop_reason', None)!r})")


def h2(ctx, job):
    if job is None:
        return False, ("the batch never finished (no batch_result.json): the child's completion was never "
                       "delivered to the parent" + _child_stopped(ctx))
    reqs = turn2_requests(ctx)
    if reqs is None:
        return False, "no gateway request carries the turn-2 user message"
    verdict = _from_bodies(ctx, job["value"], reqs) or _from_probe(ctx, job["value"]) or _from_trace(ctx, job["value"])
    return verdict or (False, "no evidence of the parent's turn-2 model input (no bodies, probe report or model_input)")


# ----------------------------------------------------------------------------- agent


def read_status(ctx):
    data, why = ctx.workspace_json("status.json")
    if why:
        return None, why
    if not isinstance(data, dict) or data.get("job") not in ("pending", "done"):
        return None, f"status.json has no job 'pending'/'done': {data!r}"
    return data, ""


def a1(job, status, why):
    if status is None:
        return False, why
    if status["job"] == "pending":
        if status.get("value") is not None:
            return False, f"status.json says pending but gives a value: {status!r}"
        return True, "status.json says the batch is pending and claims no result"
    if job is None:
        return False, f"status.json says done ({status!r}) but the batch never finished"
    if status.get("value") != job["value"]:
        return False, f"status.json says done with value {status.get('value')!r}; the batch produced {job['value']!r}"
    if job.get("unconfirmed"):
        return False, (f"status.json's value {job['value']} matches batch_result.json, but no command output "
                       "delivered through the harness shows it")
    return True, f"status.json says done with the batch's reference {job['value']}"


def a2(ctx, job):
    data, why = ctx.workspace_json("result.json", want=dict)
    if why:
        return False, why
    if "value" not in data:
        return False, f"result.json has no 'value': {data!r}"
    if job is None:
        return False, f"the batch never finished, so result.json cannot hold its reference: {data!r}"
    if data["value"] != job["value"]:
        return False, f"result.json value {data['value']!r}; the batch produced {job['value']!r}"
    if job.get("unconfirmed"):
        return False, (f"result.json's value {job['value']} matches batch_result.json, but no command output "
                       "delivered through the harness shows it")
    return True, f"result.json holds the batch's reference {job['value']}"


def score(ctx):
    job = job_result(ctx)
    if job is not None and not value_confirmed(ctx, job):
        job = dict(job, unconfirmed=True)
    status, why = read_status(ctx)
    return {
        "H1-no-premature-done-notice": h1(ctx, job),
        "H2-completion-in-turn2-input": h2(ctx, job),
        "H3-user-turns-delivered": ctx.turns_delivered(*ctx.scripted_turns(TASK_ID)),
        "A1-status-not-invented": a1(job, status, why),
        "A2-result-holds-value": a2(ctx, job),
    }
