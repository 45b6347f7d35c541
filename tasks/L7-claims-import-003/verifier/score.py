"""Deterministic verifier of L7-claims-import-003 (session resume after a kill in a later turn, between calls).

Truth anchor: the private ledger of the ``claims`` endpoint (task.yaml ``endpoints``), one ``request``
record per HTTP request the portal / claims system received, written by the apparatus outside the
workspace: ``POST /manifests/checkout`` (the manifest reference the checkout drew), ``POST /imports``
(a booked import: its manifest reference and receipt), ``POST /notifications`` (a hand-over).

* H1 - the first model request of turn 3 (the session resumed after the runner killed turn 2) still
  holds the import call that COMPLETED in turn 2 before the kill: the model's own ``./import_claims.sh``
  call between turn 2's and turn 3's user messages, with its result carrying the receipt the ledger
  booked. Evidence, strongest first: (1) the archived body of that request (``--tt-record-bodies``),
  read in document order (Anthropic, Responses, Chat wires); (2) a turn-3 delivery for the import
  call's id carrying the receipt (positive proof only); (3) the probe's ``Resume check`` account.
  Unscored when turn 2 was not killed, or when no receipt the ledger booked was shown to the model
  before turn 3.
* H2 - the same request still holds turn 1's checkout call (between turn 1's and turn 2's user
  messages) with its result carrying the manifest reference of the ledger's first checkout: the
  earlier, completed turn survives the kill of the later one. Same evidence order. Unscored when no
  checkout's reference was shown to the model in turn 1.
* H3 - turn delivery (rule 11): the three scripted user messages reached the model, in order.
* H4 (diagnostic) - the runner killed turn 2 at its marker (``result.json``).
* A1 - the ledger booked exactly one import in the whole run, of the first checkout's manifest.
* A2 - ``import-report.json``: that manifest reference, a receipt the ledger booked for it, status ``imported``.
"""

import json
import re

from tracetrial.verify import as_text, call_ids, norm_id, norm_text

TASK_ID = "L7-claims-import-003"
LEDGER = "claims"
REPORT = "import-report.json"
H1, H2, H3, H4 = ("H1-completed-import-in-resumed-input", "H2-turn1-fact-in-resumed-input",
                  "H3-user-turns-delivered", "H4-turn2-killed")
A1, A2 = "A1-imported-once", "A2-report-carries-receipt-and-manifest"
IDS = (H1, H2, H3, H4, A1, A2)
FETCH, IMPORT = "fetch_manifest.sh", "import_claims.sh"
ACCOUNT_RE = re.compile(
    r"Resume check: manifest lookup (shown with reference (MF-[A-Z0-9]{8})|shown without a result"
    r"|shown with another result|not shown); import call (shown with receipt (IMP-[A-Z0-9]{8})"
    r"|shown without a result|shown with another result|not shown)\.")
_CALL_ITEMS = ("function_call", "custom_tool_call", "local_shell_call")
_OUTPUT_ITEMS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")
NO_EVIDENCE = "no evidence of what the resumed request showed (no body, no delivered result, no probe account)"


# --------------------------------------------------------------------------- the ledger (truth)


def ledger_facts(ctx):
    """``({"checkouts": [...], "imports": [...]}, None)`` in ledger order - a checkout is its manifest
    reference, an import ``{"ref", "receipt"}`` (``None`` where a body could not be read) - or
    ``(None, reason)`` when the ledger is missing (apparatus)."""
    if LEDGER not in ctx.ledgers:
        return None, f"the claims system's record (ledger {LEDGER!r}) is missing from the archive"
    checkouts, imports = [], []
    for rec in ctx.ledger(LEDGER, kind="request"):
        args = rec.get("arguments") or {}
        path = str(args.get("path") or "")
        if rec.get("tool") != "POST":
            continue
        try:
            body = json.loads(args.get("body") or "")
        except ValueError:
            body = None
        body = body if isinstance(body, dict) else {}
        if path.startswith("/manifests/checkout"):
            checkouts.append(body.get("manifest_ref"))
        elif path.startswith("/imports"):
            imports.append({"ref": body.get("manifest_ref"), "receipt": body.get("receipt")})
    return {"checkouts": checkouts, "imports": imports}, None


def _imported_once(facts):
    imports, manifest = facts["imports"], (facts["checkouts"] or [None])[0]
    listed = ", ".join(f"{i['receipt']} of {i['ref']}" for i in imports) or "none"
    if manifest is None:
        return False, f"the ledger shows no manifest checkout; imports booked: {listed}"
    ok = len(imports) == 1 and imports[0]["ref"] == manifest
    return ok, f"the claims system booked {len(imports)} import(s) ({listed}); the checked-out manifest is {manifest}"


def _report(ctx, facts):
    data, why = ctx.workspace_json(REPORT, want=dict)
    if data is None:
        return False, why
    manifest = (facts["checkouts"] or [None])[0]
    booked = {i["receipt"] for i in facts["imports"] if i["receipt"] and i["ref"] == manifest}
    problems = []
    if manifest is None or data.get("manifest_ref") != manifest:
        problems.append(f"manifest_ref {data.get('manifest_ref')!r}, the ledger's checkout is {manifest}")
    if data.get("import_receipt") not in booked:
        problems.append(f"import_receipt {data.get('import_receipt')!r} is not a receipt the ledger booked for "
                        f"{manifest} ({sorted(booked) or 'none'})")
    if data.get("status") != "imported":
        problems.append(f"status {data.get('status')!r}, expected 'imported'")
    return not problems, f"{REPORT} = {data}" + ("; " + "; ".join(problems) if problems else "")


# --------------------------------------------------------------------------- request bodies


def _text(content):
    """The text of a message or tool-result content: a string, or the texts of its blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [_text(b.get("text") if isinstance(b, dict) and isinstance(b.get("text"), str)
                       else b.get("content") if isinstance(b, dict) else b) for b in content]
        return "\n".join(p for p in parts if p)
    return "" if content is None else as_text(content)


def _items(body):
    """``(kind, id, text)`` of the body's user texts, tool calls and tool results, in document order."""
    if not isinstance(body, dict):
        return
    if isinstance(body.get("input"), str):
        yield "user", "", body["input"]
    for item in body.get("input") if isinstance(body.get("input"), list) else []:  # Responses
        if not isinstance(item, dict):
            continue
        if item.get("type") in _CALL_ITEMS:
            args = item.get("arguments") or item.get("input") or item.get("action")
            yield "call", norm_id(item.get("call_id") or item.get("id")), as_text(args)
        elif item.get("type") in _OUTPUT_ITEMS:
            yield "result", norm_id(item.get("call_id")), _text(item.get("output"))
        elif item.get("role") == "user":
            yield "user", "", _text(item.get("content"))
    for msg in body.get("messages") if isinstance(body.get("messages"), list) else []:  # Anthropic, Chat
        if not isinstance(msg, dict):
            continue
        role, content = msg.get("role"), msg.get("content")
        if role == "tool":
            yield "result", norm_id(msg.get("tool_call_id")), _text(content)
            continue
        if role == "user" and isinstance(content, str):
            yield "user", "", content
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                yield "call", norm_id(block.get("id")), as_text(block.get("input"))
            elif block.get("type") == "tool_result":
                yield "result", norm_id(block.get("tool_use_id")), _text(block.get("content"))
            elif role == "user" and isinstance(block.get("text"), str):
                yield "user", "", block["text"]
        for call in msg.get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("function"), dict):
                yield "call", norm_id(call.get("id")), as_text(call["function"].get("arguments"))


def _user_at(items, text, before=None):
    """Index of the last user item holding ``text`` (whitespace aside) before ``before``, or None."""
    want = norm_text(text)
    end = len(items) if before is None else before
    hits = [i for i in range(end) if items[i][0] == "user" and want in norm_text(items[i][2])]
    return hits[-1] if hits else None


def call_in_body(items, turns, turn, script, value):
    """``(ok, why)``: between the user messages of ``turn`` and ``turn + 1`` (1-based) the body holds a
    call of ``script`` with a result carrying ``value``."""
    end = _user_at(items, turns[2])
    if end is None:
        return False, "turn 3's user message is not in it"
    start = _user_at(items, turns[turn - 1], _user_at(items, turns[turn], end))
    if start is None:
        return False, f"turn {turn}'s user message (or turn {turn + 1}'s after it) is not in it"
    window = items[start:end]
    calls = [it for it in window if it[0] == "call" and script in it[2]]
    if not calls:
        return False, (f"no ./{script} call between turn {turn}'s and turn {turn + 1}'s messages: the call was dropped "
                       f"from the resumed history ({sum(it[0] == 'call' for it in items)} call(s) in all)")
    ids = {c[1] for c in calls} - {""}
    results = [it[2] for it in window if it[0] == "result" and it[1] in ids]
    if any(value in r for r in results):
        return True, f"the ./{script} call is there with its result carrying {value}"
    shown = repr(results[0][:160]) if results else "no result"
    return False, f"the ./{script} call is there with {shown}, not carrying {value}"


def _body_items(ctx, start):
    """``(items, None)`` of the archived body of ``start``, ``(None, None)`` when none is archived,
    ``(None, reason)`` when it is not JSON."""
    raw = ctx.request_body(start.get("index"))
    if raw is None:
        return None, None
    try:
        return list(_items(json.loads(raw))), None
    except ValueError as exc:
        return None, f"request body {start.get('index')} is not JSON: {exc}"


# --------------------------------------------------------------------------- the resumed request


def script_call_ids(ctx, script, turn):
    """The ids (:func:`norm_id`) of the model's calls of ``script`` in ``turn``: the probe's, else the Trace IR's."""
    ids = {norm_id(r.get("call_id")) for r in ctx.probe_requests("shell", turn=turn)
           if r.get("call_id") and script in as_text(r.get("arguments"))}
    if not ids:
        for event in ctx.tool_events(command=script, turns={turn}):
            ids |= call_ids(event)
    return ids - {""}


def carried(ctx, turns, start, *, turn, script, value, group):
    """Whether the first turn-3 request ``start`` still shows ``turn``'s ``script`` call with ``value``."""
    items, bad = _body_items(ctx, start)
    if bad:
        return False, bad
    if items is not None:
        ok, why = call_in_body(items, turns, turn, script, value)
        return ok, f"request body {start.get('index')} (first of turn 3): {why}"
    first = start.get("index", 0)
    again = [d for d in ctx.deliveries(ids=script_call_ids(ctx, script, turn))
             if isinstance(d.index, int) and d.index >= first]
    good = [d for d in again if value in d.content]
    if good:
        return True, f"gateway request {good[0].index}: the ./{script} result {good[0].content[:120]!r} (no body archived)"
    account = ACCOUNT_RE.search(ctx.final_text or "") if ctx.probe is not None else None
    if account is not None:
        seen = account.group(group)
        return account.group(group + 1) == value, (
            f"probe account of the first turn-3 request: the ./{script} call {seen} (the ledger's is {value}; "
            "no body archived)")
    if again:
        return False, f"gateway request {again[0].index}: the ./{script} result {again[0].content[:120]!r}"
    return None, NO_EVIDENCE


def _shown_before(ctx, start, values):
    """The first of ``values`` a tool result delivered before request ``start`` carried, or None."""
    first = start.get("index", 0)
    shown = [d.content for d in ctx.deliveries() if isinstance(d.index, int) and d.index < first]
    return next((v for v in values if v and any(v in text for text in shown)), None)


def _resume_checks(ctx, turns, facts, missing):
    if turns is None or len(turns) < 3:
        return dict.fromkeys((H1, H2), (False, "the scripted turns cannot be read from the pack snapshot"))
    start = ctx.turn_start(turns[2])
    killed, kill_why = ctx.turn_interrupted(2)
    if facts is None:
        return dict.fromkeys((H1, H2), (None, missing))
    if start is None:
        why = "no answered request carries turn 3's user message: the session was not resumed"
        return {H1: (False, why) if killed else (None, f"{kill_why}: nothing was cut off"), H2: (False, why)}
    manifest = _shown_before(ctx, ctx.turn_start(turns[1]) or start, facts["checkouts"][:1])
    if manifest is None:
        h2 = (None, "no manifest reference the ledger's first checkout drew was shown to the model in turn 1: "
                    "there is no earlier-turn fact to carry")
    else:
        h2 = carried(ctx, turns, start, turn=1, script=FETCH, value=manifest, group=1)
    if not killed:
        return {H1: (None, f"{kill_why}: nothing was cut off to resume from"), H2: h2}
    receipt = _shown_before(ctx, start, [i["receipt"] for i in facts["imports"]])
    if receipt is None:
        h1 = (None, "no import receipt the ledger booked was shown to the model before turn 3: there is no "
                    "completed import to carry across the kill")
    else:
        h1 = carried(ctx, turns, start, turn=2, script=IMPORT, value=receipt, group=3)
    return {H1: h1, H2: h2}


def score(ctx):
    turns, turns_why = ctx.scripted_turns(TASK_ID)
    facts, missing = ledger_facts(ctx)
    out = {H3: ctx.turns_delivered(turns, turns_why), H4: ctx.turn_interrupted(2)}
    out.update(_resume_checks(ctx, turns, facts, missing))
    if facts is None:
        out.update(dict.fromkeys((A1, A2), (None, missing)))
    else:
        out[A1] = _imported_once(facts)
        out[A2] = _report(ctx, facts)
    return out
