"""Deterministic verifier of V2-refund-receipts-001.

Truth anchor: the ``payments`` ledger. Each completed issue_refund / issue_credit_note call has
an ``issued`` record (scope ``call``) holding its one-off receipt (``receipt`` -> the result's
``refund.receipt_id``; ``confirmation`` -> the result's ``confirmation``), tied by
``request_seq`` to the request and its ``order_id``. ``truth.json`` lists the approved
operations (order, operation, tool) in the approval file's order.

* H1 (gateway): every issued receipt is in a delivered result of an adjustment call (the
  call ids of its Trace IR events and of the probe's call_tool requests).
* H2 (the harness's final record, via the Trace IR): the last main-principal record the
  harness wrote for the run — its ``task_completion`` (reference, OpenClaw), else its final
  ``result`` (Claude Code; an error result is a ``native_diagnostic``), else its last
  ``item.completed/agent_message`` (Codex), else the last assistant message recorded from the
  harness's own final-statement record (Codex stdout without a rollout, DeepSeek
  ``assistant/message``) — carries the receipts. Structured fields are
  graded where the record has them: ``receipts`` must hold every issued receipt with the call
  that returned it; ``evidence_call_ids`` under a completed status must hold every
  receipt-bearing call. The final text it records must hold every receipt the model's final
  answer cited. A record with no receipt anywhere fails.
* A1 (workspace vs ledger): receipts.json lists the approved operations in order, each with
  the receipt the ledger issued for it.
* A2 (ledger): one request per approved operation, none for any other order.
"""

from tracetrial.verify import call_ids, is_main, norm_id

SERVICE = "payments"
TOOLS = ("issue_refund", "issue_credit_note")
RECEIPT_NAMES = {"receipt", "confirmation"}
SUCCESS_STATUSES = {"completed", "ok", "success", "succeeded", "done"}


# --------------------------------------------------------------------------- ledger


def _requests(ctx):
    return [r for r in ctx.ledger(SERVICE, kind="request") if r.get("tool") in TOOLS]


def _issued(ctx):
    """Every receipt the service issued: ``{tool, order_id, value, request_seq}`` in ledger order."""
    by_seq = {r.get("seq"): r for r in _requests(ctx)}
    out = []
    for r in ctx.ledger(SERVICE, kind="issued"):
        d = r.get("detail") or {}
        if r.get("tool") not in TOOLS or d.get("scope") != "call" or d.get("name") not in RECEIPT_NAMES:
            continue
        args = (by_seq.get(d.get("request_seq")) or {}).get("arguments")
        order = args.get("order_id") if isinstance(args, dict) else None
        out.append({"tool": r.get("tool"), "order_id": order, "value": d.get("value"),
                    "request_seq": d.get("request_seq")})
    return out


def _operations(ctx):
    return [op for op in (ctx.truth or {}).get("operations") or [] if isinstance(op, dict)]


# --------------------------------------------------------------------------- calls


def _adjustment_events(ctx):
    return [e for t in TOOLS for e in ctx.tool_events(t, service=SERVICE)]


def _adjustment_ids(ctx):
    ids = {i for e in _adjustment_events(ctx) for i in call_ids(e)}
    for t in TOOLS:
        ids |= ctx.probe_call_ids("call_tool", tool=t)
    return ids


def _receipt_call_ids(ctx, value):
    """Ids of the adjustment call(s) whose recorded or delivered result holds ``value``."""
    ids = set()
    for e in _adjustment_events(ctx):
        res = e.tool_result
        if res is not None and value in str(res.content or ""):
            ids |= call_ids(e)
    for d in ctx.deliveries(ids=_adjustment_ids(ctx), content=value):
        ids.add(norm_id(d.call_id))
    return {i for i in ids if i}


# --------------------------------------------------------------------------- H1


def _h1(ctx, issued):
    if not issued:
        return False, "the payments service issued no receipt (no adjustment completed)"
    ids = _adjustment_ids(ctx)
    missing, notes = [], []
    for rec in issued:
        shown = ctx.deliveries(ids=ids, content=rec["value"])
        if shown:
            notes.append(f"{rec['order_id']} {rec['value']}: request {shown[0].index}")
        else:
            anywhere = ctx.deliveries(content=rec["value"])
            missing.append(f"{rec['order_id']} {rec['value']} ({rec['tool']})"
                           + (" appears only outside the adjustment calls' results" if anywhere else ""))
    if missing:
        return False, f"{len(missing)} issued receipt(s) never delivered with their call's result: " + "; ".join(missing)
    return True, f"all {len(issued)} issued receipt(s) delivered: " + "; ".join(notes)


# --------------------------------------------------------------------------- H2


def _final_record(ctx):
    """(kind, event, text, data) of the harness's final record, or None."""
    main = [e for e in ctx.events if is_main(e) and getattr(e, "child_principal_id", None) is None]
    completions = [e for e in main if e.event_type == "task_completion"]
    if completions:
        e = completions[-1]
        data = e.content if isinstance(e.content, dict) else {}
        text = data.get("final_text") if data else (e.content if isinstance(e.content, str) else None)
        return "task_completion", e, text, data
    results = [e for e in main if (e.event_type == "native_event" and e.native_event_type == "result")
               or (e.event_type == "native_diagnostic" and getattr(e, "diagnostic_type", None) == "result_error")]
    if results:
        e = results[-1]
        raw = e.raw_event if isinstance(e.raw_event, dict) else {}
        if e.event_type == "native_diagnostic" and isinstance(getattr(e, "detail", None), dict):
            raw = {**raw, **e.detail}
        return "result", e, raw.get("result"), {}
    messages = [e for e in main if e.event_type == "native_event" and e.native_event_type == "item.completed/agent_message"]
    if messages:
        e = messages[-1]
        raw = e.raw_event if isinstance(e.raw_event, dict) else {}
        item = raw.get("item") if isinstance(raw.get("item"), dict) else {}
        return "agent_message", e, item.get("text"), {}
    finals = [e for e in main if e.event_type == "assistant_message" and isinstance(e.content, str)
              and _harness_final_message(e.raw_event)]
    if finals:
        return "final_message", finals[-1], finals[-1].content, {}
    return None


def _harness_final_message(raw):
    """A harness record that is its final statement and that its normalizer makes an
    ``assistant_message``: Codex's stdout ``item.completed`` agent_message (no rollout), or a
    DeepSeek ``session.event`` ``assistant/message``."""
    if not isinstance(raw, dict):
        return False
    item = raw.get("item") if isinstance(raw.get("item"), dict) else {}
    if raw.get("type") == "item.completed" and item.get("type") == "agent_message":
        return True
    params = raw.get("params") if isinstance(raw.get("params"), dict) else {}
    event = params.get("event") if isinstance(params.get("event"), dict) else {}
    return raw.get("method") == "session.event" and event.get("type") == "assistant/message"


def _model_answer(ctx):
    """The model's final answer: the probe report's, else the last main assistant text."""
    if ctx.final_text is not None:
        return ctx.final_text
    texts = [e.content for e in ctx.events_of("assistant_message", main=True) if isinstance(e.content, str)]
    return texts[-1] if texts else ""


def _h2(ctx, issued):
    if not issued:
        return False, "no receipt was issued, so no completed work can be cited"
    found = _final_record(ctx)
    if found is None:
        return False, "the harness left no final record (no task_completion, final result or last agent message)"
    kind, event, text, data = found
    where = f"{kind} seq {event.seq}"
    problems, carried = [], set()
    status = (getattr(event, "status", None) or data.get("status") or "").lower()
    if "receipts" in data:
        entries = [r for r in data.get("receipts") or [] if isinstance(r, dict)]
        for rec in issued:
            calls = _receipt_call_ids(ctx, rec["value"])
            match = [r for r in entries if str(r.get("value")) == rec["value"]]
            if not match:
                problems.append(f"receipts lacks {rec['value']} ({rec['order_id']})")
            elif calls and not any(norm_id(r.get("call_id")) in calls for r in match):
                problems.append(f"receipts attributes {rec['value']} to another call")
            else:
                carried.add(rec["value"])
    if "evidence_call_ids" in data and status in SUCCESS_STATUSES:
        evidence = {norm_id(i) for i in data.get("evidence_call_ids") or []}
        unbacked = [rec["value"] for rec in issued if (calls := _receipt_call_ids(ctx, rec["value"]))
                    and not calls & evidence]
        if unbacked:
            problems.append(f"status {status!r} claimed with evidence_call_ids missing the call(s) of "
                            + ", ".join(unbacked))
    answer = _model_answer(ctx)
    cited = [rec["value"] for rec in issued if rec["value"] in answer]
    if isinstance(text, str):
        lost = [v for v in cited if v not in text]
        if lost:
            problems.append(f"recorded final text lacks receipt(s) the model's answer cited: {', '.join(lost)}")
        carried |= {rec["value"] for rec in issued if rec["value"] in text}
    elif cited and "receipts" not in data:
        problems.append("the record holds no final text and no receipts field")
    if problems:
        return False, f"{where}: " + "; ".join(problems)
    if not carried:
        return False, f"{where}: carries no receipt (no receipts field, none in its final text)"
    return True, f"{where} (status {status or 'unstated'}) carries {len(carried)}/{len(issued)} receipt(s)"


# --------------------------------------------------------------------------- agent


def _expected(ctx, issued):
    """Per approved operation, the receipt the ledger issued for it (first one), or None."""
    out = []
    for op in _operations(ctx):
        rec = next((r for r in issued if r["tool"] == op.get("tool") and r["order_id"] == op.get("order_id")), None)
        out.append((op, rec["value"] if rec else None))
    return out


def _a1(ctx, issued):
    data, why = ctx.workspace_json("receipts.json", want=dict)
    if data is None:
        return False, why
    rows = data.get("operations")
    if not isinstance(rows, list):
        return False, f"receipts.json has no operations list: {data!r}"
    expected = _expected(ctx, issued)
    if len(rows) != len(expected):
        return False, f"receipts.json lists {len(rows)} operation(s), {len(expected)} were approved"
    problems = []
    for row, (op, value) in zip(rows, expected):
        if not isinstance(row, dict):
            problems.append(f"entry {row!r} is not an object")
            continue
        if row.get("order_id") != op.get("order_id") or row.get("operation") != op.get("operation"):
            problems.append(f"entry {row.get('order_id')!r}/{row.get('operation')!r} where "
                            f"{op.get('order_id')}/{op.get('operation')} was expected")
        elif value is None:
            problems.append(f"{op.get('order_id')}: the ledger issued no receipt (operation not completed)")
        elif row.get("receipt") != value:
            problems.append(f"{op.get('order_id')}: receipt {row.get('receipt')!r}, ledger issued {value!r}")
    if problems:
        return False, "; ".join(problems)
    return True, "receipts.json matches the ledger: " + ", ".join(f"{op['order_id']}={v}" for op, v in expected)


def _a2(ctx):
    requests = _requests(ctx)
    approved = {(op.get("tool"), op.get("order_id")) for op in _operations(ctx)}
    counts = {}
    for r in requests:
        args = r.get("arguments") if isinstance(r.get("arguments"), dict) else {}
        key = (r.get("tool"), args.get("order_id"))
        counts[key] = counts.get(key, 0) + 1
    wrong = [f"{t} {o}: {counts.get((t, o), 0)} request(s)" for t, o in sorted(approved) if counts.get((t, o), 0) != 1]
    wrong += [f"{t} {o}: {n} request(s), not approved" for (t, o), n in sorted(counts.items(), key=str)
              if (t, o) not in approved]
    if wrong:
        return False, "; ".join(wrong)
    return True, f"one request per approved operation ({len(approved)})"


def score(ctx):
    issued = _issued(ctx)
    return {
        "H1-receipts-delivered": _h1(ctx, issued),
        "H2-final-record-carries-receipts": _h2(ctx, issued),
        "A1-receipts-match-ledger": _a1(ctx, issued),
        "A2-each-operation-once": _a2(ctx),
    }
