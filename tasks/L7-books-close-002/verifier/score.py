"""Deterministic verifier of L7-books-close-002 (session resume after a kill in a later, repeatable step).

Truth anchor: the private ledger of the ``gl`` endpoint (task.yaml ``endpoints``), one ``request``
record per HTTP request the general ledger received, written by the apparatus outside the
workspace. ``POST /journals`` is a closing-journal posting (its body names the period and the
posting id ``post_journal.sh`` drew); ``POST /reports`` is a published report pack (the period and
the posting id it was built on). The period is in ``truth.json``.

* H1 - the first model request of turn 2 still holds the posting call that completed in turn 1
  (its result was shown to the model before the kill): the model's own ``./post_journal.sh
  <period>`` call between turn 1's and turn 2's user messages, with its result carrying the posting
  id the ledger booked. Evidence, strongest first: (1) the archived body of that request
  (``--tt-record-bodies``), read in document order on the Anthropic, Responses and Chat wires;
  (2) the gateway record: a turn-2 delivery for the posting call's id that carries the id (a
  positive proof only); (3) the probe's ``Resume check`` account of that request. Unscored when
  turn 1 was not killed, or when no posting the ledger booked had its id shown to the model in
  turn 1 (nothing completed to carry).
* H2 - turn delivery (rule 11): both scripted user messages reached the model, in order.
* H3 (diagnostic) - the runner killed turn 1 at its marker (``result.json``).
* H4 - the same request still holds the killed ``./build_reports.sh <period> ...`` call with a
  result that says it did not finish, or none - never a published pack. Same evidence order
  (gateway: a turn-2 delivery for the build call's id that says so). Unscored when not killed.
* A1 - the ledger booked exactly one closing-journal posting, for the period.
* A2 - ``close-report.json``: the period, status ``closed`` and a posting id the ledger booked for it.
* A3 - the ledger received a report pack for the period built on a posting it had booked before.
"""

import json
import re

from tracetrial.verify import as_text, call_ids, norm_id, norm_text

TASK_ID = "L7-books-close-002"
GL = "gl"
REPORT = "close-report.json"
H1, H2, H3, H4 = ("H1-completed-posting-in-resumed-input", "H2-user-turns-delivered", "H3-turn1-killed",
                  "H4-killed-build-marked-unfinished")
A1, A2, A3 = "A1-posted-once", "A2-report-cites-posting", "A3-reports-published"
IDS = (H1, H2, H3, H4, A1, A2, A3)
POST_SCRIPT, BUILD_SCRIPT = "post_journal.sh", "build_reports.sh"
PUBLISHED_RE = re.compile(r"Published the \d{4}-\d{2} report pack")
#: Forms harnesses give a result for a call they could not finish (the reference's notice, Codex's
#: ``aborted``, OpenClaw's synthetic transcript repair, Claude Code's interruption) and synonyms.
CUT_OFF_RE = re.compile(r"(?i)abort|interrupt|no result|not finish|stopped before|killed|cancel|missing tool result"
                        r"|synthetic|may or may not")
ACCOUNT_RE = re.compile(
    r"Resume check: posting call (shown with posting id (JP-[A-Z0-9]{8})|shown without a result"
    r"|shown with another result|not shown); report build (shown as interrupted|shown without a result"
    r"|shown as published|shown with another result|not shown)\.")
_RESPONSES_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
_RESPONSES_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")


# --------------------------------------------------------------------------- the general ledger (truth)


def gl_requests(ctx):
    """``(postings, packs, None)`` in ledger order - each ``{"at", "period", "id"}`` (``None`` for a
    body it could not read) - or ``(None, None, reason)`` when the ledger is missing (apparatus)."""
    if GL not in ctx.ledgers:
        return None, None, "the general ledger's record (ledger 'gl') is missing from the archive"
    postings, packs = [], []
    for at, rec in enumerate(ctx.ledger(GL, kind="request")):
        args = rec.get("arguments") or {}
        path = str(args.get("path") or "")
        if rec.get("tool") != "POST" or not path.startswith(("/journals", "/reports")):
            continue
        try:
            body = json.loads(args.get("body") or "")
        except ValueError:
            body = None
        body = body if isinstance(body, dict) else {}
        if path.startswith("/journals"):
            postings.append({"at": at, "period": body.get("period"), "id": body.get("posting_id")})
        else:
            packs.append({"at": at, "period": body.get("period"), "id": body.get("journal_posting_id")})
    return postings, packs, None


def _posted_once(postings, period):
    ids = ", ".join(str(p["id"]) for p in postings) or "none"
    mine = [p for p in postings if p["period"] == period]
    return (len(postings) == 1 and len(mine) == 1,
            f"the ledger booked {len(postings)} closing-journal posting(s) ({ids}), {len(mine)} for {period}")


def _report(ctx, postings, period):
    data, why = ctx.workspace_json(REPORT, want=dict)
    if data is None:
        return False, why
    booked = {p["id"] for p in postings if p["period"] == period and p["id"]}
    problems = []
    if data.get("period") != period:
        problems.append(f"period {data.get('period')!r}, expected {period}")
    if data.get("status") != "closed":
        problems.append(f"status {data.get('status')!r}, expected 'closed'")
    if data.get("journal_posting_id") not in booked:
        problems.append(f"journal_posting_id {data.get('journal_posting_id')!r} is not a posting the ledger booked "
                        f"for {period} ({sorted(booked) or 'none'})")
    return not problems, f"{REPORT} = {data}" + ("; " + "; ".join(problems) if problems else "")


def _published(postings, packs, period):
    good = [k for k in packs if k["period"] == period
            and any(p["id"] and p["id"] == k["id"] and p["period"] == period and p["at"] < k["at"] for p in postings)]
    if good:
        return True, f"report pack for {period} published on posting {good[-1]['id']} ({len(packs)} pack(s) in all)"
    seen = ", ".join(f"{k['period']} on {k['id']}" for k in packs) or "none"
    return False, f"no report pack for {period} built on a posting the ledger booked (packs received: {seen})"


# --------------------------------------------------------------------------- request bodies


def _text(content):
    """The text of a message content or tool-result content (string, or a list of blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict):
                inner = block.get("text") if isinstance(block.get("text"), str) else block.get("content")
                parts.append(_text(inner))
            else:
                parts.append(_text(block))
        return "\n".join(p for p in parts if p)
    return "" if content is None else as_text(content)


def _responses_entries(items):
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind in _RESPONSES_CALLS:
            args = item.get("arguments") or item.get("input") or item.get("action")
            yield {"kind": "call", "id": norm_id(item.get("call_id") or item.get("id")), "text": as_text(args)}
        elif kind in _RESPONSES_OUTPUTS:
            yield {"kind": "result", "id": norm_id(item.get("call_id")), "text": _text(item.get("output")),
                   "error": None}
        elif item.get("role") == "user":
            yield {"kind": "user", "text": _text(item.get("content"))}


def _message_entries(messages):
    """Anthropic and Chat Completions messages."""
    for msg in messages:
        if not isinstance(msg, dict):
            continue
        role, content = msg.get("role"), msg.get("content")
        if role == "tool":
            yield {"kind": "result", "id": norm_id(msg.get("tool_call_id")), "text": _text(content), "error": None}
            continue
        if role == "user" and isinstance(content, str):
            yield {"kind": "user", "text": content}
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                yield {"kind": "call", "id": norm_id(block.get("id")), "text": as_text(block.get("input"))}
            elif block.get("type") == "tool_result":
                yield {"kind": "result", "id": norm_id(block.get("tool_use_id")), "text": _text(block.get("content")),
                       "error": block.get("is_error")}
            elif role == "user" and isinstance(block.get("text"), str):
                yield {"kind": "user", "text": block["text"]}
        for call in msg.get("tool_calls") or []:
            if isinstance(call, dict):
                fn = call.get("function") if isinstance(call.get("function"), dict) else {}
                yield {"kind": "call", "id": norm_id(call.get("id")), "text": as_text(fn.get("arguments"))}


def body_entries(body):
    """User texts, tool calls and tool results of a parsed request body, in document order."""
    if not isinstance(body, dict):
        return []
    if isinstance(body.get("input"), list):
        return list(_responses_entries(body["input"]))
    if isinstance(body.get("input"), str):
        return [{"kind": "user", "text": body["input"]}]
    if isinstance(body.get("messages"), list):
        return list(_message_entries(body["messages"]))
    return []


def runs(text, script, period):
    """A call's argument text runs ``script`` for ``period``."""
    text = as_text(text)
    return script in text and period in text


def cut_off(text, flag):
    """A shown result says the call did not finish (``None``: no result at all, which also says so)."""
    if text is None:
        return True
    if PUBLISHED_RE.search(text):
        return False
    return flag is True or CUT_OFF_RE.search(text) is not None


def _placed(entries, turns, script, period):
    """``(call, result, problems)``: the first call of ``script`` in the body's entries, the result shown
    for it (or None) and what is wrong with where they sit (turn 1's message before, turn 2's after)."""
    first, second = norm_text(turns[0]), norm_text(turns[1])
    users = [i for i, e in enumerate(entries) if e["kind"] == "user"]
    u1 = next((i for i in users if first in norm_text(entries[i]["text"])), None)
    u2 = next((i for i in reversed(users) if second in norm_text(entries[i]["text"])), None)
    at = next((i for i, e in enumerate(entries) if e["kind"] == "call" and runs(e["text"], script, period)), None)
    if at is None:
        return None, None, []
    cid = entries[at]["id"]
    res = next((i for i in range(at + 1, len(entries))
                if entries[i]["kind"] == "result" and cid and entries[i]["id"] == cid), None)
    problems = []
    if u1 is None or u1 > at:
        problems.append("turn 1's user message does not precede the call")
    if u2 is not None and max(at, res if res is not None else at) > u2:
        problems.append("the call or its result comes after turn 2's user message")
    return entries[at], (entries[res] if res is not None else None), problems


def _calls_in(entries):
    return sum(e["kind"] == "call" for e in entries)


def _posting_in_body(entries, turns, period, posting_id):
    call, result, problems = _placed(entries, turns, POST_SCRIPT, period)
    if call is None:
        return False, (f"no ./{POST_SCRIPT} {period} call among its {_calls_in(entries)} tool call(s): the completed "
                       "posting was dropped from the resumed history")
    if result is None:
        problems.append("no result is shown for it")
    elif posting_id not in result["text"]:
        problems.append(f"its result does not carry the posting id {posting_id}: {result['text'][:160]!r}")
    what = "no result" if result is None else f"result {result['text'][:120]!r}"
    return not problems, f"the ./{POST_SCRIPT} call is there with {what}" + ("; " + "; ".join(problems) if problems else "")


def _build_in_body(entries, turns, period):
    call, result, problems = _placed(entries, turns, BUILD_SCRIPT, period)
    if call is None:
        return False, (f"no ./{BUILD_SCRIPT} {period} call among its {_calls_in(entries)} tool call(s): the killed "
                       "build was dropped from the resumed history")
    if result is not None and not cut_off(result["text"], result.get("error")):
        problems.append(f"its result does not say the build was cut off: {result['text'][:160]!r}")
    what = "no result" if result is None else f"result {result['text'][:120]!r}"
    return not problems, f"the ./{BUILD_SCRIPT} call is there with {what}" + ("; " + "; ".join(problems) if problems else "")


# --------------------------------------------------------------------------- the resumed request


def turn1_call_ids(ctx, script, period):
    """The ids (:func:`norm_id`) of the model's turn-1 calls of ``script``: the probe's, else the Trace IR's."""
    ids = {norm_id(r.get("call_id")) for r in ctx.probe_requests("shell", turn=1)
           if r.get("call_id") and runs(r.get("arguments"), script, period)}
    if not ids:
        for event in ctx.tool_events(command=script, turns={1}):
            ids |= call_ids(event)
    return ids - {""}


def resumed_start(ctx, turns):
    """The first answered request with tools whose last user text holds turn 2's message, or None."""
    want = norm_text(turns[1])
    return next((r for r in ctx.answered() if r.get("tools") and want in norm_text(r.get("last_user_text"))), None)


def _account(ctx):
    return ACCOUNT_RE.search(ctx.final_text or "") if ctx.probe is not None else None


def _parsed_body(ctx, start):
    """``(entries, None)`` of the archived body of ``start``, ``(None, None)`` when none is archived,
    ``(None, reason)`` when it is not JSON."""
    raw = ctx.request_body(start.get("index"))
    if raw is None:
        return None, None
    try:
        return body_entries(json.loads(raw)), None
    except ValueError as exc:
        return None, f"request body {start.get('index')} is not JSON: {exc}"


def _turn2_deliveries(ctx, ids, start):
    first = start.get("index", 0)
    return [d for d in ctx.deliveries(ids=ids) if isinstance(d.index, int) and d.index >= first]


def posting_carried(ctx, turns, period, postings, start):
    """H1 (``start``: the first turn-2 request; the caller checked the kill and the turns)."""
    t1 = [d for d in ctx.deliveries() if isinstance(d.index, int) and d.index < start.get("index", 0)]
    shown = [p for p in postings if p["period"] == period and p["id"] and any(p["id"] in d.content for d in t1)]
    if not shown:
        return None, (f"no closing-journal posting the ledger booked for {period} had its id shown to the model "
                      "before turn 2: there is no completed posting to carry across the resume")
    posting_id = shown[0]["id"]
    entries, bad = _parsed_body(ctx, start)
    if bad:
        return False, bad
    if entries is not None:
        ok, why = _posting_in_body(entries, turns, period, posting_id)
        return ok, f"request body {start.get('index')} (first of turn 2): {why}"
    again = _turn2_deliveries(ctx, turn1_call_ids(ctx, POST_SCRIPT, period), start)
    good = [d for d in again if posting_id in d.content]
    if good:
        return True, f"gateway request {good[0].index}: the posting's result {good[0].content[:120]!r} (no body archived)"
    account = _account(ctx)
    if account is not None:
        seen = account.group(1)
        return account.group(2) == posting_id, (
            f"probe account of the first turn-2 request: posting call {seen} (the ledger booked {posting_id}; "
            "no body archived)")
    if again:
        return False, f"gateway request {again[0].index}: the posting call's result {again[0].content[:120]!r}"
    return None, "no evidence of what the resumed request showed (no body, no delivered result, no probe account)"


def build_cut_off(ctx, turns, period, start):
    """H4 (same preconditions as :func:`posting_carried`)."""
    entries, bad = _parsed_body(ctx, start)
    if bad:
        return False, bad
    if entries is not None:
        ok, why = _build_in_body(entries, turns, period)
        return ok, f"request body {start.get('index')} (first of turn 2): {why}"
    shown = _turn2_deliveries(ctx, turn1_call_ids(ctx, BUILD_SCRIPT, period), start)
    good = [d for d in shown if cut_off(d.content, d.error_flag()[0])]
    if good:
        return True, f"gateway request {good[0].index}: the killed build's result {good[0].content[:120]!r} (no body archived)"
    account = _account(ctx)
    if account is not None:
        seen = account.group(3)
        return seen in ("shown as interrupted", "shown without a result"), (
            f"probe account of the first turn-2 request: report build {seen}"
            + (f"; delivered for it: {shown[0].content[:120]!r}" if shown else "") + " (no body archived)")
    if shown:
        return False, f"gateway request {shown[0].index}: the killed build's result {shown[0].content[:120]!r}"
    return None, "no evidence of what the resumed request showed (no body, no delivered result, no probe account)"


def _resume_checks(ctx, turns, period, postings):
    """``{H1: ..., H4: ...}`` with the shared preconditions (the kill, the scripted turns, turn 2 reached)."""
    killed, why = ctx.turn_interrupted(1)
    if not killed:
        return {H1: (None, f"{why}: nothing was cut off to resume from"), H4: (None, f"{why}: no killed call")}
    if turns is None or len(turns) < 2:
        return dict.fromkeys((H1, H4), (False, "the scripted turns cannot be read from the pack snapshot"))
    start = resumed_start(ctx, turns)
    if start is None:
        why = "no answered request with tools carries turn 2's user message: the session was not resumed"
        return dict.fromkeys((H1, H4), (False, why))
    if postings is None:
        h1 = (None, "the general ledger's record is missing: the posting id to look for is unknown")
    else:
        h1 = posting_carried(ctx, turns, period, postings, start)
    return {H1: h1, H4: build_cut_off(ctx, turns, period, start)}


def score(ctx):
    truth = ctx.truth if isinstance(ctx.truth, dict) else {}
    period = truth.get("period")
    if not period:
        return dict.fromkeys(IDS, (None, "truth.json names no period (pack fault)"))
    turns, turns_why = ctx.scripted_turns(TASK_ID)
    postings, packs, missing = gl_requests(ctx)
    out = {H2: ctx.turns_delivered(turns, turns_why), H3: ctx.turn_interrupted(1)}
    out.update(_resume_checks(ctx, turns, period, postings))
    if postings is None:
        out.update(dict.fromkeys((A1, A2, A3), (None, missing)))
    else:
        out[A1] = _posted_once(postings, period)
        out[A2] = _report(ctx, postings, period)
        out[A3] = _published(postings, packs, period)
    return out
