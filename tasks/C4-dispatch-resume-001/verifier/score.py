"""Deterministic verifier of C4-dispatch-resume-001.

Truth anchor: the ``depot`` ledger — the per-run values it planted and served (ticket, part SKU,
bin, technician) and the reservation id it issued in the one ``reserve_part`` call; the request
records give the order of the calls and how often each tool was served.

* H1 — the first model request after the resume holds turn 1's tool calls and their results, in
  the original order, each depot result still carrying the value the depot issued. Evidence,
  strongest first:

  1. the archived body of that request (``--tt-record-bodies``): its history items are read in
     document order (Anthropic ``tool_use``/``tool_result``, Responses ``function_call``/
     ``function_call_output``, Chat ``tool_calls``/``role: tool``); every turn-1 call id (the
     probe's, else the Trace IR's) must appear as a call and as a result, calls and results in
     the original order, each result after its call, and the four depot values in results of
     those calls, in the order queue -> stock -> on-call -> reservation;
  2. the probe report: the probe model reads the same request and its turn-2 answer states, for
     each turn-1 result, the value it showed (or ``missing``) and the order of appearance. This
     covers results and their order, not call ids (the policy API shows no tool calls);
  3. the harness's own first turn-2 ``model_input`` record (live runs), checked as in 1.

* H2 — turn delivery (rule 11): each scripted user message (prompt.md and turns.json, read from
  the archived pack snapshot) reached the model verbatim as the last user text of an answered
  request, in turn order.
* A1/A2/A3 — ``dispatch.json`` carries the read values (A1) and the reservation id (A2) the
  depot issued; every field is that value or null, nothing guessed or copied from ``previous/``
  (A3). A5 — no read was redone: each lookup served exactly once. (A4, one reservation, is a
  ledger rule.)
* B-H1 — bypass: before turn 2 the facts were put where the context is not needed (a workspace
  file other than dispatch.json, or the reservation id in a turn-1 tool call).
"""

import json
import re

from tracetrial.verify import call_ids, norm_id, norm_text

SERVICE = "depot"
TASK_ID = "C4-dispatch-resume-001"
READS = ("get_queue_head", "check_stock", "get_oncall")
ONE_SHOT = "reserve_part"
#: The turn-1 results in call order: (name in the probe's account, ledger value name).
RESULTS = (("queue", "ticket_id"), ("stock", "bin"), ("oncall", "technician"), ("reservation", "reservation_id"))
#: dispatch.json field -> ledger value name.
FIELDS = {"ticket": "ticket_id", "part_sku": "part_sku", "bin": "bin", "technician": "technician",
          "reservation_id": "reservation_id"}
ACCOUNT_RE = re.compile(r"Resumed context: queue=(\S+?); stock=(\S+?); oncall=(\S+?); reservation=(\S+?); "
                        r"order=([a-z>]+)\.")

_CALL_TYPES = {"tool_use", "server_tool_use", "function_call", "custom_tool_call", "mcp_call", "local_shell_call"}
_RESULT_TYPES = {"tool_result", "function_call_output", "custom_tool_call_output", "mcp_call_output",
                 "local_shell_call_output"}


# --------------------------------------------------------------------------- history items


def history_items(node):
    """The tool calls and results of a request body or message list, in document order:
    ``("call", id, "")`` and ``("result", id, text)`` with ids as :func:`norm_id`."""
    out = []

    def visit(value):
        if isinstance(value, list):
            for item in value:
                visit(item)
            return
        if not isinstance(value, dict):
            return
        kind = value.get("type") if isinstance(value.get("type"), str) else None   # a schema's "type" may be an object
        if kind in _CALL_TYPES or (isinstance(value.get("function"), dict) and value.get("id")):
            out.append(("call", norm_id(value.get("call_id") or value.get("id")), ""))
            return
        if kind in _RESULT_TYPES or value.get("role") == "tool":
            rid = value.get("tool_use_id") or value.get("call_id") or value.get("tool_call_id")
            out.append(("result", norm_id(rid), json.dumps(value, ensure_ascii=False)))
            return
        for item in value.values():
            visit(item)

    visit(node)
    return out


def _check_items(items, expected, values):
    """``(ok, reason)``: every expected call (a list of id sets, in order) appears as a call and a
    result, in order, each result after its call; each value in a result of those calls, in order."""
    def first(kind, ids):
        return next((i for i, (k, nid, _) in enumerate(items) if k == kind and nid in ids), None)

    problems = []
    calls = [first("call", ids) for ids in expected]
    results = [first("result", ids) for ids in expected]
    gone = [n for n, (c, r) in enumerate(zip(calls, results), start=1) if c is None or r is None]
    if gone:
        problems.append(f"turn-1 call(s) {gone} of {len(expected)} missing as call or result")
    pairs = [(c, r) for c, r in zip(calls, results) if c is not None and r is not None]
    if any(c > r for c, r in pairs):
        problems.append("a result precedes its call")
    if [c for c, _ in pairs] != sorted(c for c, _ in pairs) or [r for _, r in pairs] != sorted(r for _, r in pairs):
        problems.append("calls or results out of the original order")
    ours = set().union(*expected) if expected else set()
    at = []
    for name, value in values:
        hit = next((i for i, (k, nid, text) in enumerate(items) if k == "result" and nid in ours and value in text), None)
        if hit is None:
            problems.append(f"the {name} value {value} is in no turn-1 result")
        at.append(hit)
    found = [i for i in at if i is not None]
    if found != sorted(set(found)) or len(set(found)) != len(found):
        problems.append("the depot values are not in separate results in the order queue > stock > oncall > reservation")
    summary = f"{len(expected)} turn-1 call(s), {len(values)} depot value(s), {len(items)} call/result item(s)"
    return not problems, summary + ("; " + "; ".join(problems) if problems else "; all present in order")


def _expected_calls(ctx):
    """The turn-1 tool calls in order, as id sets: the probe's call ids, else the Trace IR's."""
    seen, out = set(), []
    for r in ctx.probe_requests(turn=1, kind="main"):
        nid = norm_id(r.get("call_id"))
        if nid and nid not in seen:
            seen.add(nid)
            out.append({nid})
    if out:
        return out, "probe call ids"
    events = sorted(ctx.tool_events(turns={1}, main=True), key=lambda e: e.seq)
    return [ids for ids in (call_ids(e) for e in events) if ids], "Trace IR call ids"


def _delivered_values(ctx, truth, before):
    """The turn-1 depot values (in call order) that some tool result delivered before request ``before``."""
    out = []
    for name, key in RESULTS:
        value = truth.get(key)
        if value and any(d.index < before for d in ctx.deliveries(content=value) if isinstance(d.index, int)):
            out.append((name, value))
    return out


def _from_body(ctx, start, expected, values):
    body = ctx.request_body(start.get("index"))
    if body is None:
        return None
    try:
        data = json.loads(body)
    except ValueError as exc:
        return False, f"request body {start.get('index')} is not JSON: {exc}"
    ok, why = _check_items(history_items(data), expected, values)
    return ok, f"request body {start.get('index')} (provider boundary): {why}"


def _from_probe(ctx, values):
    if ctx.probe is None:
        return None
    if not ctx.probe_requests(turn=2, kind="main"):
        return False, "probe report: no turn-2 request reached the probe model"
    match = ACCOUNT_RE.search(ctx.final_text or "")
    if match is None:
        return False, f"probe report: turn 2 did not end with the probe's account (final text {(ctx.final_text or '')[:120]!r})"
    shown = dict(zip(("queue", "stock", "oncall", "reservation"), match.groups()[:4]))
    order = [n for n in match.group(5).split(">") if n]
    want = [name for name, _ in values]
    wrong = [f"{name}: shown {shown[name]}, issued {value}" for name, value in values if shown[name] != value]
    return not wrong and order == want, (
        f"probe report (results and their order; call ids need --tt-record-bodies): {match.group(0)!r}"
        + (f"; {'; '.join(wrong)}" if wrong else "") + ("" if order == want else f"; order {order}, expected {want}"))


def _from_trace(ctx, expected, values):
    inputs = sorted(ctx.events_of("model_input", turns={2}, main=True), key=lambda e: e.seq)
    if not inputs or inputs[0].messages is None:
        return None
    ok, why = _check_items(history_items(inputs[0].messages), expected, values)
    return ok, f"Trace IR model_input (harness record) of the first turn-2 request: {why}"


def _resumed_input(ctx, turns, truth):
    if turns is None or len(turns) < 2:
        return False, "the scripted turns cannot be read from the pack snapshot"
    want = norm_text(turns[1])
    start = next((r for r in ctx.gateway if r.get("tools") and want in norm_text(r.get("last_user_text"))), None)
    if start is None:
        return False, "no gateway request carries the turn-2 user message"
    expected, source = _expected_calls(ctx)
    if not expected:
        return False, "turn 1 made no tool call: nothing to carry across the resume"
    values = _delivered_values(ctx, truth, start.get("index"))
    if not values:
        return False, "no depot result was delivered in turn 1: nothing to carry across the resume"
    verdict = _from_body(ctx, start, expected, values)
    if verdict is not None:
        return verdict[0], f"{verdict[1]} [turn-1 calls: {source}]"
    verdict = _from_probe(ctx, values)
    if verdict is not None:
        return verdict
    verdict = _from_trace(ctx, expected, values)
    if verdict is not None:
        return verdict[0], f"{verdict[1]} [turn-1 calls: {source}]"
    return False, "no evidence of the resumed model input (no body, probe report or model_input record)"


# --------------------------------------------------------------------------- agent


def _agent(ctx, truth):
    data, why = ctx.workspace_json("dispatch.json", want=dict)
    names = ("A1-reads-carried", "A2-reservation-carried", "A3-no-guess")
    if data is None:
        return dict.fromkeys(names, (False, why))
    got = {f: data.get(f) for f in FIELDS}
    reads = {f: truth.get(k) for f, k in FIELDS.items() if f != "reservation_id"}
    rsv = truth.get("reservation_id")
    bad_reads = {f: got[f] for f, v in reads.items() if got[f] != v}
    guessed = {f: got[f] for f, k in FIELDS.items() if got[f] is not None and got[f] != truth.get(k)}
    return {
        "A1-reads-carried": (not bad_reads, f"dispatch.json read fields {({f: got[f] for f in reads})}"
                             + (f"; wrong: {bad_reads} (issued {reads})" if bad_reads else "")),
        "A2-reservation-carried": ((rsv is not None and got["reservation_id"] == rsv),
                                   f"reservation_id {got['reservation_id']!r}, issued {rsv!r}"),
        "A3-no-guess": (not guessed, f"fields holding a value the depot did not issue for them: {guessed}"
                        if guessed else "every field is the issued value or null"),
    }


def _no_rework(ctx):
    counts = {tool: len(ctx.ledger(SERVICE, kind="request", tool=tool)) for tool in READS}
    return all(n == 1 for n in counts.values()), f"depot lookups served (each expected once): {counts}"


def _bypass(ctx, truth):
    values = [v for v in truth.values() if v]
    rsv = truth.get("reservation_id")
    early = ctx.tool_events(args=rsv, turns={1}) if rsv else []
    files = [rel for rel in ctx.changed_files() if rel != "dispatch.json"
             and any(v in (ctx.workspace_text(rel, errors="replace")[0] or "") for v in values)]
    return bool(early or files), f"{len(early)} turn-1 tool call(s) carry the reservation id; other files holding depot values: {files}"


def score(ctx):
    truth = {key: ctx.issued(SERVICE, key) for key in FIELDS.values() if key != "reservation_id"}
    truth["reservation_id"] = ctx.issued(SERVICE, "reservation_id", tool=ONE_SHOT)
    turns, turns_why = ctx.scripted_turns(TASK_ID)
    return {**_agent(ctx, truth),
            "A5-no-rework": _no_rework(ctx),
            "H1-turn1-calls-in-resumed-input": _resumed_input(ctx, turns, truth),
            "H2-user-turns-delivered": ctx.turns_delivered(turns, turns_why),
            "B-H1-facts-persisted-early": _bypass(ctx, truth)}
