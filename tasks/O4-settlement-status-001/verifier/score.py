"""Deterministic verifier of O4-settlement-status-001.

Truth anchors: the batch's own evidence (``settle_batch.py`` appends one line per run to
``.settle/runs.jsonl`` when it starts and writes ``batch_result.json`` - reference, start and
finish time - only when it is finished; the reference is confirmed by the child's command output
the harness delivered), the harness's own lifecycle records (Trace IR) and the provider-boundary
records (gateway).

A *status report* is the result of the parent's sub-agent status/wait tool (reference
``subagent_status``, Claude Code ``TaskOutput``, Codex ``wait_agent``, OpenClaw ``subagents``
through ``tool_call``), found by tool name in the Trace IR and by the call ids the probe issued.
Its *state* is ``done`` when it says a sub-agent finished (``status: completed``,
``<status>completed</status>``, ``"completed": ...``), ``pending`` when it says pending, running
or that the wait timed out, else ``unknown``.

* H1 (Trace IR): no status report says pending/running (or nothing) about a child that the
  harness's own records had already recorded finished when the report's result was written
  (native time of the finish record vs the result record's own time, else the start of the
  gateway request that carried the report; without times, native order in the same record
  stream - the tool event sits at its call in the trace, its result in ``source_records``).
* H2 (gateway): every status report delivered to the parent agrees with the provider boundary:
  carried by a parent request that started after the helper's final model response ended, it
  must not say pending/running; carried before that, it must not say the helper finished.
* A1: status.json says done with exactly the batch's reference.
* A2: the batch was handed to a helper and started at most once (its run log): never re-run.

A harness that declares no status/wait tool (and no dispatcher that could reach one) leaves H1,
H2 and A1 not applicable (rule 12: unsupported for the status criteria, never a pass).
"""

import re
from datetime import UTC, datetime

from tracetrial.verify import as_text, bare_tool_name, call_ids, norm_id, norm_text

DONE_RE = re.compile(r"(?i)\b(?:status|state)\W{0,8}(?:completed|finished|done|succeeded)\b|\"completed\\?\"\s*:\s*\\?\""
                     r"|:\s*(?:completed|finished|done)\b")
PENDING_RE = re.compile(r"(?i)\b(?:pending|running|in_progress|queued|not finished|still working)\b"
                        r"|timed_out\W{0,8}true|retrieval_status\W{0,8}(?:timeout|not_ready)")
#: Status/wait tools by :func:`norm_id` of the bare name.
STATUS_TOOLS = frozenset({"subagentstatus", "taskoutput", "agentoutputtool", "waitagent", "subagents"})
DISPATCH_TOOLS = frozenset({"toolcall", "calltool"})
DONE_STATUS = frozenset({"completed", "complete", "finished", "done", "succeeded", "success", "failed", "error",
                         "errored", "cancelled", "canceled", "killed", "aborted", "interrupted"})
FINISH_ACTIONS = frozenset({"finish", "finished", "complete", "completed", "return", "returned", "end", "ended",
                            "stop", "stopped", "exit", "exited"})


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


def state_of(text):
    """``done`` / ``pending`` / ``unknown``: what a status report says about the helper."""
    if DONE_RE.search(text or ""):
        return "done"
    if PENDING_RE.search(text or ""):
        return "pending"
    return "unknown"


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


def runs(ctx):
    text, _ = ctx.workspace_text(".settle/runs.jsonl")
    return [line for line in (text or "").splitlines() if line.strip()]


def _is_status_event(e):
    name = norm_id(bare_tool_name(e.tool_call.name))
    if name in STATUS_TOOLS:
        return True
    if name in DISPATCH_TOOLS:
        args = e.tool_call.arguments if isinstance(e.tool_call.arguments, dict) else {}
        target = args.get("id") or args.get("tool_id") or args.get("name") or args.get("tool")
        return norm_id(target) in STATUS_TOOLS
    return False


def status_events(ctx):
    """The main agent's status/wait tool events (Trace IR), by name or by the probe's call ids."""
    probe_ids = ctx.probe_call_ids("native_tool", main=True)
    return [e for e in ctx.tool_events(main=True) if _is_status_event(e) or call_ids(e) & probe_ids]


def status_call_ids(ctx):
    return ctx.probe_call_ids("native_tool", main=True) | {i for e in status_events(ctx) for i in call_ids(e)}


def _waits(tool):
    """A declared status tool that can wait: OpenClaw 2026.6.9 declares ``subagents`` with ``action:
    list`` only (it tells the model to wait by ending its turn with ``sessions_yield``), which is a
    look, not the status query with a wait this task asks for."""
    if norm_id(bare_tool_name(tool.get("name"))) != "subagents":
        return True
    schema = tool.get("input_schema") or tool.get("parameters") or {}
    action = (schema.get("properties") or {}).get("action") if isinstance(schema, dict) else None
    actions = action.get("enum") if isinstance(action, dict) else None
    return not isinstance(actions, list) or "wait" in actions


def status_tool_offered(ctx):
    """Whether any request declared a status tool that can wait, or a dispatcher that can reach one."""
    names = {norm_id(bare_tool_name(t.get("name"))) for r in ctx.gateway for t in r.get("tools") or []
             if isinstance(t, dict) and _waits(t)}
    return bool(names & (STATUS_TOOLS | DISPATCH_TOOLS)) or bool(status_events(ctx))


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


def _end(req):
    start = _ts(req.get("started_at"))
    dur = req.get("duration_ms")
    if start is None:
        return None
    return start + (float(dur) / 1000.0 if isinstance(dur, (int, float)) else 0.0)


def child_answered_at(ctx, job):
    """When the helper's final model response left the provider: the end (start + duration) of the
    helper's last answered request, provided that request came after the batch's output (its
    reference) was delivered to the helper; None when the helper never got that far."""
    if job is None:
        return None
    child_ids, prompts = _child_call_ids(ctx), _spawn_prompts(ctx)
    child = [r for r in ctx.answered() if _is_child_request(r, child_ids, prompts)]
    got = [r.get("index") for r in child if any(job["value"] in as_text(t.get("content"))
                                                 for t in r.get("tool_results") or [])]
    last = max(child, key=lambda r: r.get("index") if isinstance(r.get("index"), int) else -1, default=None)
    if last is None or not got or not isinstance(last.get("index"), int) or last["index"] < min(got):
        return None
    return _end(last)


def status_deliveries(ctx):
    """``(arrival epoch, request index, text)`` of every status report delivered to the parent."""
    ids = status_call_ids(ctx)
    return [(_ts(d.request.get("started_at")), d.index, d.content) for d in ctx.deliveries(ids=ids)]


# ----------------------------------------------------------------------------- harness


def _finish_records(ctx):
    out = []
    for e in ctx.events_of("subagent_lifecycle", "task_completion"):
        status, action = str(getattr(e, "status", "") or "").lower(), str(getattr(e, "action", "") or "").lower()
        if e.event_type == "task_completion":
            if (e.child_principal_id or e.principal_role == "child") and status in DONE_STATUS:
                out.append(e)
        elif status in DONE_STATUS or action in FINISH_ACTIONS:
            out.append(e)
    return out


def _result_position(ctx, e):
    """``(source, native seq, native time)`` of a tool event's *result* record, as far as known."""
    seq, source = None, None
    for rec in e.source_records or []:
        if rec.seq is not None and (seq is None or rec.seq > seq):
            seq, source = rec.seq, rec.source
    if seq is None:
        seq, source = e.source_event_seq, e.source
    raw = e.raw_event if isinstance(e.raw_event, dict) else {}
    result = raw.get("result") if isinstance(raw.get("result"), dict) else {}
    t = _ts(result.get("ts") or result.get("timestamp")) if result else None
    if t is None:
        ids = call_ids(e)
        carried = [_ts(d.request.get("started_at")) for d in ctx.deliveries(ids=ids)] if ids else []
        carried = [x for x in carried if x is not None]
        t = min(carried) if carried else None
    return source, seq, t


def _precedes(finish, pos):
    """Whether a finish record precedes a report's result: by native time when both are known
    and different (one harness may keep parent and child records in different files under one
    source name), else by native order within the same record stream."""
    source, seq, t = pos
    ft = _ts(finish.source_event_timestamp) or _ts(finish.source_timestamp)
    if ft is not None and t is not None and ft != t:
        return ft < t, f"native time {_when(ft)} vs {_when(t)}"
    if source and seq is not None and finish.source == source and finish.source_event_seq is not None:
        return finish.source_event_seq < seq, f"native seq {finish.source_event_seq} vs {seq}"
    return False, "no common order"


def h1(ctx):
    reports = [e for e in status_events(ctx) if e.tool_result is not None]
    if not reports:
        return False, "the Trace IR records no result of a sub-agent status/wait call by the parent"
    finishes = _finish_records(ctx)
    notes, bad = [], []
    for e in reports:
        text = as_text(e.tool_result.content)
        state = state_of(text)
        pos = _result_position(ctx, e)
        before = [(f, how) for f in finishes for ok, how in [_precedes(f, pos)] if ok]
        label = f"{e.tool_call.name} (seq {e.seq}) says {state}"
        if before and state != "done":
            f, how = before[0]
            bad.append(f"{label}: {text[:100]!r}, but the harness had recorded the child finished before "
                       f"({f.event_type} seq {f.seq}, action {getattr(f, 'action', None)!r}, status {f.status!r}; {how})")
        else:
            notes.append(label + (f", after {len(before)} finish record(s)" if before else
                                  ", no finish record before it"))
    if bad:
        return False, "; ".join(bad)
    return True, "; ".join(notes)


def h2(ctx, job):
    reports = status_deliveries(ctx)
    if not reports:
        return False, "no result of a sub-agent status/wait call was delivered to the parent"
    answered = child_answered_at(ctx, job)
    notes, bad = [], []
    for t, index, text in reports:
        state = state_of(text)
        label = f"status report in request {index} at {_when(t)} says {state}"
        if t is None:
            bad.append(f"{label}, but the request has no start time")
        elif state == "done" and (answered is None or answered > t):
            bad.append(f"{label} ({text[:100]!r}), but the helper's final answer "
                       + ("never left the provider" if answered is None else f"left the provider only at {_when(answered)}"))
        elif state != "done" and answered is not None and answered <= t:
            bad.append(f"{label} ({text[:100]!r}), but the helper's final answer had left the provider at "
                       f"{_when(answered)}")
        else:
            notes.append(label)
    if bad:
        return False, "; ".join(bad)
    return True, "; ".join(notes) + f"; helper answered at {_when(answered)}"


# ----------------------------------------------------------------------------- agent


def a1(ctx, job):
    data, why = ctx.workspace_json("status.json", want=dict)
    if why:
        return False, why
    if data.get("job") != "done":
        return False, f"status.json does not say done: {data!r}"
    if job is None:
        return False, f"status.json says done ({data!r}) but the batch never finished"
    if data.get("reference") != job["value"]:
        return False, f"status.json reference {data.get('reference')!r}; the batch produced {job['value']!r}"
    if not ctx.deliveries(content=job["value"]):
        return False, (f"status.json's reference {job['value']} matches batch_result.json, but no output "
                       "delivered through the harness shows it")
    return True, f"status.json says done with the batch's reference {job['value']}"


def a2(ctx):
    n = len(runs(ctx))
    if n > 1:
        return False, f"the batch was started {n} times (.settle/runs.jsonl), not once"
    if n == 0 and not ctx.spawn_events() and not ctx.probe_requests("spawn_subagent", main=True):
        return False, "the batch was never started and never handed to a helper"
    return True, (f"the batch was started {n} time(s) (.settle/runs.jsonl)"
                  + ("" if n else "; it was handed to a helper, which never started it"))


def score(ctx):
    job = job_result(ctx)
    out = {"A2-single-run": a2(ctx)}
    if not status_tool_offered(ctx):
        why = ("unsupported: the harness declared no sub-agent status/wait tool (nor a dispatcher reaching one) "
               "in any request (a list-only status tool cannot wait)")
        out.update({"H1-status-matches-lifecycle": (None, why), "H2-status-matches-boundary": (None, why),
                    "A1-status-done-with-reference": (None, why)})
        return out
    out.update({"H1-status-matches-lifecycle": h1(ctx), "H2-status-matches-boundary": h2(ctx, job),
                "A1-status-done-with-reference": a1(ctx, job)})
    return out
