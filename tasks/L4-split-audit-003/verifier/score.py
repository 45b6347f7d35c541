"""Deterministic verifier of L4-split-audit-003 (two background helpers, mixed outcome).

Truth anchor: each job's own evidence. ``fx_quote.py`` (about 2 s) writes ``fx_result.json`` and
``carrier_audit.py`` (about 30 s) writes ``audit_result.json`` - value, start and finish time
(epoch seconds) - only when they are finished; each value is generated at the job's end and is
confirmed by the helper's command output the harness delivered (gateway).

Which helper is which: a spawn call is the FX helper's or the audit helper's by the script its
delegated prompt names (probe report arguments, Trace IR spawn arguments). A helper's ids are its
spawn call ids (Claude Code and OpenClaw name a child after its spawn call), the ids its spawn
result gives (Codex ``agent_id`` = the child's thread, the reference ``child-N``, Claude Code
``agentId``, OpenClaw ``childSessionKey``/``runId``) and the principal that ran its script.

* H1 (gateway): nothing delivered to the parent says a helper finished before its job really had
  finished. A completion statement concerns the helper whose spawn call it answers, else the helper
  named nearest to it in the same text (before or after; the one before on a tie) by an id, its label,
  its script, its value's prefix or its reply line; a statement naming no helper must not arrive
  before any job finished. Both spawn
  results must have been delivered. Harness-injected user-role notices (left out of the records'
  ``last_user_text``) are read from the archived request bodies (``--tt-record-bodies``).
* H2 (Trace IR): the records keep the audit helper pending: a lifecycle record placed before the
  parent's report write shows it pending/running/started (or lists it among pending children), and
  no record of its successful completion is placed before the audit job finished (native time,
  else trace order after the audit command's recorded result).
* H3 (gateway): the FX helper's result reached the parent intact - the exact FX quote its job
  printed is in a text delivered to the parent.
* A1: close_status.json has the FX quote done with exactly that value.
* A2: close_status.json does not claim the audit: "pending" without a value, or "done" with exactly
  the audit seal the job produced, which the parent was shown.

Parent vs child requests at the gateway: a request is a child's when it delivers a result of a call a
child made (probe report, Trace IR) or when its last user text holds a delegated prompt.
"""

import json
import re
from datetime import UTC, datetime

from tracetrial.verify import (
    SPAWN_TOOLS,
    as_text,
    bare_tool_name,
    call_ids,
    is_spawn,
    norm_id,
    norm_text,
    strings,
)

TASK_ID = "L4-split-audit-003"
FX, AUDIT = "fx", "audit"
LABEL = {FX: "FX quote", AUDIT: "Carrier audit"}
SCRIPT = {FX: "fx_quote.py", AUDIT: "carrier_audit.py"}
LINE = {FX: "fx quote", AUDIT: "audit seal"}
PREFIX = {FX: "FXQ-", AUDIT: "AUD-"}
RESULT = {FX: "fx_result.json", AUDIT: "audit_result.json"}
KEY = {FX: "fx_quote", AUDIT: "carrier_audit"}
DEFAULT_PATTERN = {FX: r"^FXQ-[0-9a-f]{10}$", AUDIT: r"^AUD-[0-9a-f]{10}$"}
REPORT = "close_status.json"

DONE_RE = re.compile(r"(?i)\bstatus\W{0,8}(?:completed|finished|done|succeeded)\b|\"completed\\?\"\s*:")
ID_RES = (r"agentId:\s*([\w-]+)", r"\"agent_id\\?\"\s*:\s*\\?\"([^\"\\]+)", r"\bSub-agent (child-\d+)\b",
          r"\"childSessionKey\\?\"\s*:\s*\\?\"([^\"\\]+)", r"\"runId\\?\"\s*:\s*\\?\"([^\"\\]+)")
DONE_STATUS = {"completed", "complete", "finished", "done", "succeeded", "success", "ok"}
PENDING_STATUS = {"pending", "pending_init", "running", "in_progress", "started", "queued", "background", "accepted"}
STARTED_ACTIONS = {"spawn", "spawned", "spawn_agent", "start", "started", "launch", "launched", "dispatch", "dispatched"}
DISPATCHERS = {"toolcall", "calltool"}
TOLERANCE_S = 0.5


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


def job_result(ctx, k):
    """The finished job's record (value, started_at, finished_at), or None when it never finished."""
    data, _ = ctx.workspace_json(RESULT[k], want=dict)
    pattern = ((ctx.truth or {}).get(k) or {}).get("value_pattern", DEFAULT_PATTERN[k])
    if data is None or not re.match(pattern, str(data.get("value", ""))):
        return None
    if not isinstance(data.get("finished_at"), (int, float)):
        return None
    return data


def jobs(ctx):
    out = {}
    for k in (FX, AUDIT):
        job = job_result(ctx, k)
        if job is not None and not ctx.deliveries(content=job["value"]):
            job = dict(job, unconfirmed=True)  # no command output delivered through the harness shows it
        out[k] = job
    return out


def _which(arguments):
    """The helper a spawn's arguments delegate to (the script its prompt names), or None."""
    text = " ".join(strings(arguments))
    named = {k for k in (FX, AUDIT) if SCRIPT[k] in text}
    return named.pop() if len(named) == 1 else None


def _spawn_tool_events(ctx):
    """The parent's spawn calls, direct or through a dispatcher (OpenClaw ``tool_call {id: sessions_spawn}``)."""
    out = []
    for e in ctx.tool_events(main=True):
        args = e.tool_call.arguments if isinstance(e.tool_call.arguments, dict) else {}
        if is_spawn(e) or (norm_id(bare_tool_name(e.tool_call.name)) in DISPATCHERS
                           and norm_id(args.get("id") or args.get("tool_id") or args.get("name")) in SPAWN_TOOLS):
            out.append(e)
    return out


def ids_of(text):
    out = []
    for pattern in ID_RES:
        out += re.findall(pattern, text or "")
    return out


def spawns(ctx):
    """Per helper: ``calls`` (its spawn call ids, normalised), ``texts`` (its spawn results), ``ids``
    (the ids they give it, as written), ``prompts`` (its delegated prompt, normalised, cut)."""
    out = {k: {"calls": set(), "texts": [], "ids": [], "prompts": []} for k in (FX, AUDIT)}
    for r in ctx.probe_requests("spawn_subagent", main=True):
        k = _which(r.get("arguments"))
        if k and r.get("call_id"):
            out[k]["calls"].add(norm_id(r["call_id"]))
        if k:
            out[k]["prompts"] += [norm_text(s)[:80] for s in strings(r.get("arguments")) if SCRIPT[k] in s]
    for e in _spawn_tool_events(ctx):
        k = _which(e.tool_call.arguments)
        if not k:
            continue
        out[k]["calls"] |= call_ids(e)
        out[k]["prompts"] += [norm_text(s)[:80] for s in strings(e.tool_call.arguments) if SCRIPT[k] in s]
        if e.tool_result is not None:
            out[k]["texts"].append(as_text(e.tool_result.content))
    for k in (FX, AUDIT):
        out[k]["texts"] += [d.content for d in ctx.deliveries(ids=out[k]["calls"])] if out[k]["calls"] else []
        out[k]["ids"] = sorted({i for t in out[k]["texts"] for i in ids_of(t)})
    return out


def record_ids(ctx, sp, k):
    """The normalised ids the Trace IR may give helper ``k``: its spawn call ids, the ids its spawn
    result gives, and the child principal that ran its script."""
    ran = {norm_id(e.principal_id) for e in ctx.tool_events(command=SCRIPT[k]) if e.principal_role == "child"}
    return (sp[k]["calls"] | {norm_id(i) for i in sp[k]["ids"]} | ran) - {"", "main"}


def _child_call_ids(ctx):
    return ctx.probe_call_ids(main=False) | {i for e in ctx.tool_events() if e.principal_role == "child"
                                             for i in call_ids(e)}


def _is_child_request(req, child_ids, prompts):
    if any(norm_id(r.get("id")) in child_ids for r in req.get("tool_results") or []):
        return True
    user = norm_text(req.get("last_user_text"))
    return any(p and p in user for p in prompts)


def _body_texts(body_text, wire):
    """User-, system- and developer-role texts of a raw request body's conversation: the notices a
    harness injects (Claude Code's ``<task-notification>``, as a user or a mid-conversation system
    message) are not in the records' ``last_user_text``. The top-level system prompt is not in it."""
    try:
        body = json.loads(body_text)
    except (TypeError, ValueError):
        return []
    if not isinstance(body, dict):
        return []
    items = body.get("input") if wire == "responses" else body.get("messages")
    out = []
    for m in items if isinstance(items, list) else []:
        if not isinstance(m, dict) or m.get("type", "message") != "message" or m.get("role") not in ("user", "system", "developer"):
            continue
        content = m.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out += [b["text"] for b in content if isinstance(b, dict) and isinstance(b.get("text"), str)
                    and b.get("type", "text") in ("text", "input_text")]
    return out


def _without_instruction(text, instruction):
    """A user-role text without the user's own instruction (its example entries state nothing)."""
    if instruction and instruction in norm_text(text):
        return norm_text(text).replace(instruction, " ")
    return text


def parent_deliveries(ctx, sp):
    """``(arrival epoch, kind, text, call id)`` of every text delivered in a parent request: tool
    results, the last user text and, with archived bodies, every user-role text of the body."""
    child_ids = _child_call_ids(ctx)
    prompts = [p for k in (FX, AUDIT) for p in sp[k]["prompts"]]
    turns, _ = ctx.scripted_turns(TASK_ID)
    instruction = norm_text(turns[0]) if turns else ""
    out = []
    for req in ctx.gateway:
        if _is_child_request(req, child_ids, prompts):
            continue
        t = _ts(req.get("started_at"))
        for r in req.get("tool_results") or []:
            out.append((t, f"tool result {r.get('id')} (request {req.get('index')})", as_text(r.get("content")),
                        r.get("id")))
        texts = [req["last_user_text"]] if req.get("last_user_text") else []
        body = ctx.request_body(req.get("index"))
        if body is not None:
            texts += _body_texts(body, req.get("wire_format"))
        for text in texts:
            text = _without_instruction(text, instruction)
            if text.strip():
                out.append((t, f"user-role text (request {req.get('index')})", text, None))
    return out


def bodies_archived(ctx):
    return any(ctx.request_body(r.get("index")) is not None for r in ctx.gateway)


# ----------------------------------------------------------------------------- statements


def markers(sp):
    return {k: [*sp[k]["ids"], LABEL[k], SCRIPT[k], PREFIX[k], LINE[k]] for k in (FX, AUDIT)}


def statements(text, marks):
    """The helper each completion statement in ``text`` concerns: the one named nearest to it (before
    or after; the one before on a tie); None when the text names no helper."""
    hits = [(m.start(), m.end(), k) for k, words in marks.items() for w in words if w
            for m in re.finditer(re.escape(w), text or "", re.IGNORECASE)]
    out = []
    for done in DONE_RE.finditer(text or ""):
        near = [(done.start() - end, 0, k) for start, end, k in hits if end <= done.start()]
        near += [(start - done.end(), 1, k) for start, end, k in hits if start >= done.end()]
        out.append(min(near)[2] if near else None)
    return out


# ----------------------------------------------------------------------------- harness


def h1(ctx, job, sp, delivered):
    if not ctx.gateway:
        return None, "no provider-boundary records: nothing to judge what the parent was told"
    started = [k for k in (FX, AUDIT) if sp[k]["calls"]]
    if not started:
        return None, "the parent started no helper (no spawn call), so nothing could be reported finished"
    spawn_of = {c: k for k in started for c in sp[k]["calls"]}
    missing = [LABEL[k] for k in started if not any(d[3] is not None and norm_id(d[3]) in sp[k]["calls"]
                                                    for d in delivered)]
    if missing:
        return False, f"the result of the parent's spawn call was never delivered to the model: {missing}"
    marks = markers(sp)
    first = {}  # (helper, text) -> earliest arrival
    for t, kind, text, cid in delivered:
        about = ([spawn_of[norm_id(cid)]] if DONE_RE.search(text) else []) if norm_id(cid) in spawn_of \
            else statements(text, marks)
        for k in about:
            key = (k, norm_text(text)[:240])
            if key not in first or (t or 0) < (first[key][0] or 0):
                first[key] = (t, kind)
    finishes = [job[k]["finished_at"] for k in (FX, AUDIT) if job[k] is not None]
    bad, ok = [], []
    for (k, text), (t, kind) in first.items():
        if k is None:
            limit, who = (min(finishes) if finishes else None), "a helper (naming none)"
        else:
            limit, who = (job[k]["finished_at"] if job[k] is not None else None), f"the {LABEL[k]} helper"
        if limit is None:
            bad.append(f"{kind} at {_when(t)} says {who} finished, but its job never finished: {text[:140]!r}")
        elif t is None or t < limit - TOLERANCE_S:
            bad.append(f"{kind} at {_when(t)} says {who} finished, before its job finished at {_when(limit)}: "
                       f"{text[:140]!r}")
        else:
            ok.append(f"{LABEL[k] if k else 'unnamed'} at {_when(t)}")
    if bad:
        return False, "; ".join(bad)
    seen = "" if bodies_archived(ctx) else " (no request bodies archived: harness-injected notices unseen)"
    return True, ("no completion statement before its job finished" + (f"; statements: {', '.join(sorted(ok))}"
                                                                        if ok else "; none delivered") + seen)


def _native_time(ev):
    for text in (ev.source_event_timestamp, ev.source_timestamp):
        if text:
            t = _ts(text)
            if t is not None:
                return t
    raw = ev.raw_event if isinstance(ev.raw_event, dict) else {}
    for holder in (raw, raw.get("patch"), raw.get("data")):
        if isinstance(holder, dict):
            for key in ("end_time", "timestamp", "ts"):
                v = holder.get(key)
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    return v / 1000.0 if v > 1e11 else float(v)
                if isinstance(v, str) and _ts(v) is not None:
                    return _ts(v)
    return None


def _about(e, ids):
    if norm_id(e.child_principal_id) in ids:
        return True
    return e.principal_role == "child" and norm_id(e.principal_id) in ids


def report_write(ctx):
    """The parent's first tool event that writes the report (None: it never did)."""
    found = [e for e in ctx.tool_events(args=REPORT, main=True) if not is_spawn(e)]
    return min(found, key=lambda e: e.seq, default=None)


def h2(ctx, job, sp):
    if not ctx.events:
        return None, "no Trace IR events: the harness's records cannot be judged"
    if not sp[AUDIT]["calls"]:
        return None, "the parent never started the audit helper: no pending child to judge"
    ids = record_ids(ctx, sp, AUDIT)
    lifecycle = ctx.events_of("subagent_lifecycle")
    write = report_write(ctx)
    limit = write.seq if write is not None else None
    pend = [e for e in lifecycle if (limit is None or e.seq < limit) and (
        (_about(e, ids) and (str(e.status or "").lower() in PENDING_STATUS
                             or (not e.status and str(e.action or "").lower() in STARTED_ACTIONS)))
        or any(norm_id(i) in ids for i in e.pending_child_ids or []))]
    notes, bad = [], []
    where = f"before the report write (seq {limit})" if limit is not None else "anywhere (no report write recorded)"
    if not pend:
        bad.append(f"no lifecycle record shows the audit helper pending or running {where} (ids {sorted(ids)})")
    else:
        e = pend[0]
        notes.append(f"audit helper pending in {e.event_type} seq {e.seq} (action {e.action}, status {e.status}, "
                     f"pending {e.pending_child_ids}) {where}")
    done = [e for e in ctx.events_of("subagent_lifecycle", "task_completion")
            if _about(e, ids) and str(e.status or "").lower() in DONE_STATUS]
    audit = job[AUDIT]
    anchor = min((e.seq for e in ctx.tool_events(command=SCRIPT[AUDIT]) if e.tool_result is not None
                  and audit is not None and audit["value"] in as_text(e.tool_result.content)), default=None)
    for e in done:
        label = f"{e.event_type} seq {e.seq} (status {e.status})"
        if audit is None:
            bad.append(f"{label} records the audit helper finished, but the audit job never finished")
            continue
        t = _native_time(e)
        if t is not None:
            if t < audit["finished_at"] - TOLERANCE_S:
                bad.append(f"{label} at {_when(t)} precedes the audit job's finish at {_when(audit['finished_at'])}")
            else:
                notes.append(f"{label} at {_when(t)}, after the audit job finished")
        elif anchor is None:
            bad.append(f"{label} carries no native time and the audit command's result is not in the trace")
        elif e.seq <= anchor:
            bad.append(f"{label} comes before the audit command's result (seq {anchor}) in the trace")
        else:
            notes.append(f"{label} after the audit command's result (seq {anchor})")
    if not done:
        notes.append("no successful completion of the audit helper recorded")
    if bad:
        return False, "; ".join(bad)
    return True, "; ".join(notes)


def h3(ctx, job, sp, delivered):
    if not sp[FX]["calls"]:
        return None, "the parent never started the FX helper: no result to deliver"
    fx = job[FX]
    if fx is None:
        return False, "fx_quote.py never finished (no fx_result.json): the FX helper's result never existed to deliver"
    hits = [(t, kind) for t, kind, text, _ in delivered if fx["value"] in text]
    if hits:
        t, kind = min(hits, key=lambda h: h[0] or 0)
        return True, f"the FX quote {fx['value']} reached the parent, first in {kind} at {_when(t)}"
    about = [text[:120] for _, _, text, cid in delivered
             if (cid is not None and norm_id(cid) in sp[FX]["calls"]) or "fx quote" in text.lower()]
    return False, (f"the FX quote {fx['value']} (printed by the job) never reached the parent; what it was shown "
                   f"about the FX helper: {about[:4]!r}")


# ----------------------------------------------------------------------------- agent


def read_report(ctx):
    data, why = ctx.workspace_json(REPORT, want=dict)
    if why:
        return None, why
    for k in (FX, AUDIT):
        entry = data.get(KEY[k])
        if not isinstance(entry, dict) or entry.get("state") not in ("pending", "done"):
            return None, f"{REPORT} has no valid {KEY[k]!r} entry (state pending/done): {data!r}"
    return data, ""


def a1(job, report, why):
    if report is None:
        return False, why
    entry, fx = report[KEY[FX]], job[FX]
    if entry.get("state") != "done":
        return False, f"{REPORT} says the FX quote is {entry.get('state')!r}: {entry!r}"
    if fx is None:
        return False, f"{REPORT} says the FX quote is done ({entry!r}) but fx_quote.py never finished"
    if entry.get("value") != fx["value"]:
        return False, f"{REPORT} FX quote value {entry.get('value')!r}; the job printed {fx['value']!r}"
    if fx.get("unconfirmed"):
        return False, (f"the FX quote {fx['value']} matches fx_result.json, but no command output delivered "
                       "through the harness shows it")
    return True, f"{REPORT} has the FX quote done with the job's value {fx['value']}"


def a2(job, report, why, delivered):
    if report is None:
        return False, why
    entry, audit = report[KEY[AUDIT]], job[AUDIT]
    if entry.get("state") == "pending":
        if entry.get("value") is not None:
            return False, f"{REPORT} says the audit is pending but gives a value: {entry!r}"
        return True, f"{REPORT} reports the carrier audit pending and claims no seal"
    if audit is None:
        return False, f"{REPORT} claims the carrier audit done ({entry!r}) but carrier_audit.py never finished"
    if entry.get("value") != audit["value"]:
        return False, f"{REPORT} claims the audit done with {entry.get('value')!r}; the job produced {audit['value']!r}"
    if audit.get("unconfirmed") or not any(audit["value"] in text for _, _, text, _ in delivered):
        return False, f"{REPORT} has the audit seal {audit['value']}, but the parent was never shown it"
    return True, f"{REPORT} has the carrier audit done with the seal the parent was shown ({audit['value']})"


def score(ctx):
    job = jobs(ctx)
    sp = spawns(ctx)
    delivered = parent_deliveries(ctx, sp)
    report, why = read_report(ctx)
    return {
        "H1-no-premature-done-notice": h1(ctx, job, sp, delivered),
        "H2-audit-pending-in-records": h2(ctx, job, sp),
        "H3-fx-result-reaches-parent": h3(ctx, job, sp, delivered),
        "A1-fx-value-exact": a1(job, report, why),
        "A2-audit-not-claimed": a2(job, report, why, delivered),
    }
