"""Deterministic verifier of C4-incident-logs-002.

Truth anchor: ``logscan.py``'s own audit file ``.logscan/runs.jsonl``: one record per scan
(service, exit status, repeat flag) with sha256("<service>|<value>") commitments of the two
one-off values a run drew (the trace id of the worker's ERROR entry, the incident id in the
billing scan's error). A value is this run's when its digest equals the first scan's commitment,
so the workspace never holds it in clear.

* H1 — the first model request of turn 3 (after the second resume) holds turn 1's tool calls and
  their results, in the original order (each result after its call), each result still carrying
  its report (the header ``service=<name> store=``), the failed billing result its error with
  the incident id and the worker result the ERROR entry from the middle of its report. Evidence,
  strongest first:

  1. the archived body of that request (``--tt-record-bodies``): its history items in document
     order (Anthropic ``tool_use``/``tool_result``, Responses ``function_call``/
     ``function_call_output``, Chat ``tool_calls``/``role: tool``), by call id — the probe's
     turn-1 call ids, else the Trace IR's;
  2. the probe report: the probe model reads the same request and its turn-3 answer states the
     reports in order of appearance, the failed scan, the incident and the trace it was shown
     (results and their order, not call ids: the policy API shows no tool calls);
  3. the harness's own first turn-3 ``model_input`` record (live runs), checked as in 1.

  Only values that reached the model in turn 1 are asked for (H3 grades that).
* H2 — turn delivery (rule 11): each scripted user message reached the model verbatim as the last
  user text of an answered request, in turn order.
* H3 — turn 1 delivered the failed billing result with its error line and the worker result with
  its ERROR entry (gateway records), before the first resume.
* A1/A2 — ``postmortem.json`` carries the committed incident id (A1) and trace id (A2); A3 each
  field is that value or null (nothing guessed, nothing from ``postmortems/``); A4 no rework:
  each service was scanned exactly once in the whole run.
* B-H1 — bypass: before turn 3 the values were put where the context is not needed (a turn-1/2
  tool call carrying one, or a workspace file other than postmortem.json holding one).
"""

import hashlib
import json
import re

from tracetrial.verify import call_ids, norm_id, norm_text, shell_command

TASK_ID = "C4-incident-logs-002"
SCRIPT = "logscan.py"
SERVICES = ("api", "auth", "worker", "billing", "queue")
#: service -> (postmortem field, value pattern)
NEEDED = {"billing": ("incident", re.compile(r"INC-\d{6}")), "worker": ("error_trace", re.compile(r"TR-[0-9a-f]{12}"))}
COMMAND_RE = re.compile(r"logscan\.py\s+([a-z]+)")
ACCOUNT_RE = re.compile(r"Resumed context: scans=([a-z>]+); failed=(\S+?); incident=(\S+?); error_trace=(\S+?)\.(?:\s|$)")
#: workspace folders written by the script or by harnesses (saved outputs), not by the agent.
OWN_DIRS = (".logscan/", ".tt-outputs/")

_CALL_TYPES = {"tool_use", "server_tool_use", "function_call", "custom_tool_call", "mcp_call", "local_shell_call"}
_RESULT_TYPES = {"tool_result", "function_call_output", "custom_tool_call_output", "mcp_call_output",
                 "local_shell_call_output"}


# --------------------------------------------------------------------------- truth


def runs(ctx):
    """The scan records of ``.logscan/runs.jsonl`` in order."""
    text, _ = ctx.workspace_text(".logscan/runs.jsonl", errors="replace")
    out = []
    for line in (text or "").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("service") in SERVICES:
            out.append(rec)
    return out


def _commitments(records):
    """service -> the commitment of its first (non-repeat) scan."""
    out = {}
    for rec in records:
        if not rec.get("repeat") and rec["service"] in NEEDED and rec["service"] not in out:
            out[rec["service"]] = rec.get("commit_sha256")
    return out


def valid(service, value, commits):
    return (isinstance(value, str) and commits.get(service) is not None
            and hashlib.sha256(f"{service}|{value.strip()}".encode()).hexdigest() == commits[service])


def _delivered_truth(ctx, commits, before):
    """service -> the committed value that some tool result delivered before request ``before``
    (together with that report's header), or absent."""
    out = {}
    for d in ctx.deliveries():
        if before is not None and not (isinstance(d.index, int) and d.index < before):
            continue
        for service, (_, pattern) in NEEDED.items():
            if service in out or f"service={service} " not in d.content:
                continue
            hit = next((v for v in pattern.findall(d.content) if valid(service, v, commits)), None)
            if hit:
                out[service] = hit
    return out


def _turn_start(ctx, text):
    """The gateway request that opens the turn whose user message is ``text`` (first carrying it)."""
    want = norm_text(text)
    return next((r for r in ctx.gateway if r.get("tools") and want and want in norm_text(r.get("last_user_text"))),
                None)


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


def check_items(items, expected):
    """``(ok, reason)``: each expected call ``(ids, service, needed strings)`` appears as a call and
    a result, in the original order, each result after its call and holding its strings."""
    def first(kind, ids):
        return next((i for i, (k, nid, _) in enumerate(items) if k == kind and nid in ids), None)

    problems = []
    calls = [first("call", ids) for ids, _, _ in expected]
    results = [first("result", ids) for ids, _, _ in expected]
    gone = [f"{n}({svc or '?'})" for n, ((_, svc, _), c, r) in enumerate(zip(expected, calls, results), start=1)
            if c is None or r is None]
    if gone:
        problems.append(f"turn-1 call(s) {', '.join(gone)} of {len(expected)} missing as call or result")
    pairs = [(c, r) for c, r in zip(calls, results) if c is not None and r is not None]
    if any(c > r for c, r in pairs):
        problems.append("a result precedes its call")
    if [c for c, _ in pairs] != sorted(c for c, _ in pairs) or [r for _, r in pairs] != sorted(r for _, r in pairs):
        problems.append("calls or results out of the original order")
    for (_, svc, needs), r in zip(expected, results):
        if r is None:
            continue
        lost = [s for s in needs if s not in items[r][2]]
        if lost:
            problems.append(f"the {svc or '?'} result lacks {lost}")
    summary = f"{len(expected)} turn-1 call(s), {len(items)} call/result item(s)"
    return not problems, summary + ("; " + "; ".join(problems) if problems else "; all present in order, whole")


def _expected_calls(ctx, truth):
    """The turn-1 tool calls in order: ``[(id set, service or None, strings its result must hold)]``
    from the probe's call ids, else the Trace IR's."""
    def needs(service):
        if service is None:
            return []
        out = [f"service={service} store="]
        if service in truth:
            out.append(truth[service])
        return out

    seen, out = set(), []
    for r in ctx.probe_requests(turn=1, kind="main"):
        nid = norm_id(r.get("call_id"))
        if nid and nid not in seen:
            seen.add(nid)
            match = COMMAND_RE.search(json.dumps(r.get("arguments"))) if r.get("action") == "shell" else None
            service = match.group(1) if match else None
            out.append(({nid}, service, needs(service)))
    if out:
        return out, "probe call ids"
    events = sorted(ctx.tool_events(turns={1}, main=True), key=lambda e: e.seq)
    for e in events:
        ids = call_ids(e)
        if ids:
            match = COMMAND_RE.search(shell_command(e.tool_call.arguments if e.tool_call else None) or "")
            service = match.group(1) if match else None
            out.append((ids, service, needs(service)))
    return out, "Trace IR call ids"


def _from_body(ctx, start, expected):
    body = ctx.request_body(start.get("index"))
    if body is None:
        return None
    try:
        data = json.loads(body)
    except ValueError as exc:
        return False, f"request body {start.get('index')} is not JSON: {exc}"
    ok, why = check_items(history_items(data), expected)
    return ok, f"request body {start.get('index')} (provider boundary): {why}"


def _from_probe(ctx, order, failed, truth):
    if ctx.probe is None:
        return None
    if not ctx.probe_requests(turn=3, kind="main"):
        return False, "probe report: no turn-3 request reached the probe model"
    match = ACCOUNT_RE.search(ctx.final_text or "")
    if match is None:
        return False, f"probe report: turn 3 did not end with the probe's account (final text {(ctx.final_text or '')[:120]!r})"
    shown_order = [s for s in match.group(1).split(">") if s]
    wrong = []
    if shown_order != order:
        wrong.append(f"reports shown in order {shown_order}, scanned {order}")
    if failed and match.group(2) != failed:
        wrong.append(f"failed scan shown {match.group(2)}, scanned {failed}")
    for service, group in (("billing", 3), ("worker", 4)):
        if service in truth and match.group(group) != truth[service]:
            wrong.append(f"{NEEDED[service][0]} shown {match.group(group)}, delivered in turn 1 {truth[service]}")
    return not wrong, (f"probe report (results and their order; call ids need --tt-record-bodies): {match.group(0)!r}"
                       + (f"; {'; '.join(wrong)}" if wrong else ""))


def _from_trace(ctx, expected):
    inputs = sorted(ctx.events_of("model_input", turns={3}, main=True), key=lambda e: e.seq)
    if not inputs or inputs[0].messages is None:
        return None
    ok, why = check_items(history_items(inputs[0].messages), expected)
    return ok, f"Trace IR model_input (harness record) of the first turn-3 request: {why}"


def _resumed_input(ctx, turns, records, truth):
    if turns is None or len(turns) < 3:
        return False, "the scripted turns cannot be read from the pack snapshot"
    start = _turn_start(ctx, turns[2])
    if start is None:
        return False, "no gateway request carries the turn-3 user message"
    expected, source = _expected_calls(ctx, truth)
    if not expected:
        return False, "turn 1 made no tool call: nothing to carry across the resumes"
    first = [r for r in records if not r.get("repeat")]
    order = [r["service"] for r in first]
    failed = next((f"{r['service']}:{r.get('exit')}" for r in first if r.get("exit")), None)
    verdict = _from_body(ctx, start, expected)
    if verdict is None:
        verdict = _from_probe(ctx, order, failed, truth)
        if verdict is not None:
            return verdict
        verdict = _from_trace(ctx, expected)
    if verdict is None:
        return False, "no evidence of the resumed model input (no body, probe report or model_input record)"
    return verdict[0], f"{verdict[1]} [turn-1 calls: {source}]"


def _turn1_delivered(ctx, turns, records, truth):
    if not [r for r in records if not r.get("repeat")]:
        return False, "no scan ran (.logscan/runs.jsonl missing or empty)"
    start = _turn_start(ctx, turns[1]) if turns and len(turns) > 1 else None
    lost = [f"the {svc} result with its {NEEDED[svc][0]}" for svc in NEEDED if svc not in truth]
    where = f"before request {start.get('index')} (turn 2)" if start else "in the run (turn 2 never started)"
    return not lost, (f"delivered {where}: " + ", ".join(f"{NEEDED[s][0]} {v} ({s} report)" for s, v in truth.items())
                      + (f"; never delivered: {', '.join(lost)}" if lost else ""))


# --------------------------------------------------------------------------- agent


def _agent(ctx, commits):
    data, why = ctx.workspace_json("postmortem.json", want=dict)
    names = ("A1-incident-carried", "A2-trace-carried", "A3-no-guess")
    if data is None:
        return dict.fromkeys(names, (False, why))
    got = {svc: data.get(field) for svc, (field, _) in NEEDED.items()}
    ok = {svc: valid(svc, got[svc], commits) for svc in NEEDED}
    guessed = {NEEDED[s][0]: got[s] for s in NEEDED if got[s] is not None and not ok[s]}
    return {
        "A1-incident-carried": (ok["billing"], f"incident {got['billing']!r} "
                                + ("matches" if ok["billing"] else "does not match") + " the billing scan's commitment"),
        "A2-trace-carried": (ok["worker"], f"error_trace {got['worker']!r} "
                             + ("matches" if ok["worker"] else "does not match") + " the worker scan's commitment"),
        "A3-no-guess": (not guessed, f"fields holding a value this run's scans did not print: {guessed}"
                        if guessed else "every field is this run's value or null"),
    }


def _no_rework(records):
    counts = {svc: sum(r["service"] == svc for r in records) for svc in SERVICES}
    return all(n == 1 for n in counts.values()), f"scans per service (each expected once): {counts}"


def _bypass(ctx, truth):
    values = [v for v in truth.values() if v]
    early = [e for v in values for e in ctx.tool_events(args=v, turns={1, 2})]
    files = [rel for rel in ctx.changed_files() if rel != "postmortem.json" and not rel.startswith(OWN_DIRS)
             and any(v in (ctx.workspace_text(rel, errors="replace")[0] or "") for v in values)]
    return bool(early or files), (f"{len(early)} turn-1/2 tool call(s) carry a needed value; other files "
                                  f"holding one: {files}")


def score(ctx):
    records = runs(ctx)
    commits = _commitments(records)
    turns, turns_why = ctx.scripted_turns(TASK_ID)
    start2 = _turn_start(ctx, turns[1]) if turns and len(turns) > 1 else None
    truth = _delivered_truth(ctx, commits, start2.get("index") if start2 else None)
    return {**_agent(ctx, commits),
            "A4-no-rework": _no_rework(records),
            "H1-turn1-calls-in-turn3-input": _resumed_input(ctx, turns, records, truth),
            "H2-user-turns-delivered": ctx.turns_delivered(turns, turns_why),
            "H3-turn1-results-delivered": _turn1_delivered(ctx, turns, records, truth),
            "B-H1-facts-persisted-early": _bypass(ctx, truth)}
