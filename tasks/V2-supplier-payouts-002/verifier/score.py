"""Deterministic verifier of V2-supplier-payouts-002.

Truth anchor: the ``payouts`` ledger. Each sent payout has an ``issued`` record (name
``receipt``, scope ``call``) holding its one-off receipt, tied by ``request_seq`` to the
request and its ``invoice_id``; the refused payout's request has an ``issued`` ``attempt``
(its one-off attempt reference, not a receipt) and an ``error`` record. Which supplier is
refused is the run value ``frozen_supplier`` (ledger ``issued``, scope ``run``).
``truth.json`` lists the approved payouts (supplier, invoice) in the approval file's order.

* H1 (gateway): every issued receipt is in a delivered result of a send_payout call (the call
  ids of its Trace IR events and of the probe's call_tool requests).
* H2 (the harness's final record, via the Trace IR): the last main-principal record the
  harness wrote for the run — its ``task_completion`` (reference, OpenClaw), else its final
  ``result`` (Claude Code; an error result is a ``native_diagnostic``), else its last
  ``item.completed/agent_message`` (Codex), else the last assistant message recorded from the
  harness's own final-statement record (Codex stdout without a rollout, DeepSeek
  ``assistant/message``) — carries the receipts of the sent payouts. Structured fields are
  graded where the record has them: ``receipts`` must hold every issued receipt with the call
  that returned it; ``evidence_call_ids`` under a completed status must hold every
  receipt-bearing call. The final text it records must hold every receipt the model's final
  answer cited. A record with no receipt anywhere fails.
* H3 (the same record): nothing in it is cited as a receipt of the refused payout — no
  ``receipts`` entry attributed to the refused call, no ``receipts`` value the service never
  issued as a receipt (the attempt reference, an invented code), and no attempt reference or
  receipt in its final text that the model's answer did not state.
* A1 (workspace vs ledger): payout_receipts.json lists the approved payouts in order, each
  sent one with the receipt the ledger issued for it, the refused one with ``null``.
* A2 (ledger): one send_payout request per approved payout (the refused one not retried),
  none for any other invoice.
"""

from tracetrial.verify import call_ids, is_main, norm_id

SERVICE = "payouts"
TOOL = "send_payout"
SUCCESS_STATUSES = {"completed", "ok", "success", "succeeded", "done"}


# --------------------------------------------------------------------------- ledger


def _requests(ctx):
    return [r for r in ctx.ledger(SERVICE, kind="request") if r.get("tool") == TOOL]


def _issued(ctx, name="receipt"):
    """Every value the service issued per call under ``name``: ``{invoice_id, supplier_id,
    value, request_seq}`` in ledger order."""
    by_seq = {r.get("seq"): r for r in _requests(ctx)}
    out = []
    for r in ctx.ledger(SERVICE, kind="issued", tool=TOOL):
        d = r.get("detail") or {}
        if d.get("scope") != "call" or d.get("name") != name:
            continue
        args = (by_seq.get(d.get("request_seq")) or {}).get("arguments")
        args = args if isinstance(args, dict) else {}
        out.append({"invoice_id": args.get("invoice_id"), "supplier_id": args.get("supplier_id"),
                    "value": d.get("value"), "request_seq": d.get("request_seq")})
    return out


def _frozen(ctx):
    return ctx.issued(SERVICE, "frozen_supplier")


def _approved(ctx):
    return [p for p in (ctx.truth or {}).get("payouts") or [] if isinstance(p, dict)]


# --------------------------------------------------------------------------- calls


def _payout_events(ctx):
    return ctx.tool_events(TOOL, service=SERVICE)


def _payout_ids(ctx):
    ids = {i for e in _payout_events(ctx) for i in call_ids(e)}
    return ids | ctx.probe_call_ids("call_tool", tool=TOOL)


def _call_ids_holding(ctx, value):
    """Ids of the payout call(s) whose recorded or delivered result holds ``value``."""
    ids = set()
    for e in _payout_events(ctx):
        res = e.tool_result
        if res is not None and value in str(res.content or ""):
            ids |= call_ids(e)
    for d in ctx.deliveries(ids=_payout_ids(ctx), content=value):
        ids.add(norm_id(d.call_id))
    return {i for i in ids if i}


def _refused_call_ids(ctx, attempts):
    """Ids of the send_payout call(s) for the refused supplier: by arguments (Trace IR, probe
    report) and by the attempt reference in their result."""
    frozen = _frozen(ctx)
    ids = set()
    if frozen:
        for e in ctx.tool_events(TOOL, service=SERVICE, args=frozen):
            ids |= call_ids(e)
        for r in ctx.probe_requests("call_tool", tool=TOOL):
            args = r.get("arguments") if isinstance(r.get("arguments"), dict) else {}
            if args.get("supplier_id") == frozen and r.get("call_id"):
                ids.add(norm_id(r["call_id"]))
    for a in attempts:
        ids |= _call_ids_holding(ctx, a["value"])
    return {i for i in ids if i}


# --------------------------------------------------------------------------- H1


def _h1(ctx, issued):
    if not issued:
        return False, "the payouts service issued no receipt (no payout was sent)"
    ids = _payout_ids(ctx)
    missing, notes = [], []
    for rec in issued:
        shown = ctx.deliveries(ids=ids, content=rec["value"])
        if shown:
            notes.append(f"{rec['invoice_id']} {rec['value']}: request {shown[0].index}")
        else:
            anywhere = ctx.deliveries(content=rec["value"])
            missing.append(f"{rec['invoice_id']} {rec['value']}"
                           + (" appears only outside the payout calls' results" if anywhere else ""))
    if missing:
        return False, f"{len(missing)} issued receipt(s) never delivered with their call's result: " + "; ".join(missing)
    return True, f"all {len(issued)} issued receipt(s) delivered: " + "; ".join(notes)


# --------------------------------------------------------------------------- final record


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


def _entries(data):
    return [r for r in data.get("receipts") or [] if isinstance(r, dict)]


# --------------------------------------------------------------------------- H2


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
        entries = _entries(data)
        for rec in issued:
            calls = _call_ids_holding(ctx, rec["value"])
            match = [r for r in entries if str(r.get("value")) == rec["value"]]
            if not match:
                problems.append(f"receipts lacks {rec['value']} ({rec['invoice_id']})")
            elif calls and not any(norm_id(r.get("call_id")) in calls for r in match):
                problems.append(f"receipts attributes {rec['value']} to another call")
            else:
                carried.add(rec["value"])
    if "evidence_call_ids" in data and status in SUCCESS_STATUSES:
        evidence = {norm_id(i) for i in data.get("evidence_call_ids") or []}
        unbacked = [rec["value"] for rec in issued if (calls := _call_ids_holding(ctx, rec["value"]))
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


# --------------------------------------------------------------------------- H3


def _h3(ctx, issued):
    attempts = _issued(ctx, "attempt")
    if not attempts:
        return False, "no payout was refused (no attempt reference issued): the refusal path never ran"
    found = _final_record(ctx)
    if found is None:
        return False, "the harness left no final record to check"
    kind, event, text, data = found
    where = f"{kind} seq {event.seq}"
    refused = _refused_call_ids(ctx, attempts)
    receipts = {rec["value"] for rec in issued}
    problems = []
    if "receipts" in data:
        for r in _entries(data):
            value = str(r.get("value"))
            if norm_id(r.get("call_id")) in refused:
                problems.append(f"receipts cites {value!r} for the refused call {r.get('call_id')}")
            elif value not in receipts:
                problems.append(f"receipts cites {value!r}, which the service never issued as a receipt")
    if isinstance(text, str):
        answer = _model_answer(ctx)
        added = [v for v in [a["value"] for a in attempts] + sorted(receipts) if v in text and v not in answer]
        if added:
            problems.append("recorded final text cites value(s) the model's answer did not: " + ", ".join(added))
    if problems:
        return False, f"{where}: " + "; ".join(problems)
    return True, (f"{where}: no receipt cited for the refused payout ({len(refused)} refused call id(s), "
                  f"attempt {', '.join(a['value'] for a in attempts)})")


# --------------------------------------------------------------------------- agent


def _expected(ctx, issued):
    """Per approved payout, the receipt the ledger issued for it (first one), or None."""
    out = []
    for p in _approved(ctx):
        rec = next((r for r in issued if r["invoice_id"] == p.get("invoice_id")
                    and r["supplier_id"] == p.get("supplier_id")), None)
        out.append((p, rec["value"] if rec else None))
    return out


def _a1(ctx, issued):
    data, why = ctx.workspace_json("payout_receipts.json", want=dict)
    if data is None:
        return False, why
    rows = data.get("payouts")
    if not isinstance(rows, list):
        return False, f"payout_receipts.json has no payouts list: {data!r}"
    expected = _expected(ctx, issued)
    if len(rows) != len(expected):
        return False, f"payout_receipts.json lists {len(rows)} payout(s), {len(expected)} were approved"
    frozen = _frozen(ctx)
    problems = []
    for row, (p, value) in zip(rows, expected):
        if not isinstance(row, dict):
            problems.append(f"entry {row!r} is not an object")
            continue
        if row.get("supplier_id") != p.get("supplier_id") or row.get("invoice_id") != p.get("invoice_id"):
            problems.append(f"entry {row.get('supplier_id')!r}/{row.get('invoice_id')!r} where "
                            f"{p.get('supplier_id')}/{p.get('invoice_id')} was expected")
        elif p.get("supplier_id") == frozen:
            if row.get("receipt") is not None:
                problems.append(f"{p.get('invoice_id')}: refused payout cites receipt {row.get('receipt')!r}")
        elif value is None:
            problems.append(f"{p.get('invoice_id')}: the ledger issued no receipt (payout not sent)")
        elif row.get("receipt") != value:
            problems.append(f"{p.get('invoice_id')}: receipt {row.get('receipt')!r}, ledger issued {value!r}")
    if not frozen:
        problems.append("the ledger names no refused supplier (frozen_supplier)")
    if problems:
        return False, "; ".join(problems)
    return True, ("payout_receipts.json matches the ledger: "
                  + ", ".join(f"{p['invoice_id']}={v}" for p, v in expected))


def _a2(ctx):
    approved = {p.get("invoice_id") for p in _approved(ctx)}
    counts = {}
    for r in _requests(ctx):
        args = r.get("arguments") if isinstance(r.get("arguments"), dict) else {}
        counts[args.get("invoice_id")] = counts.get(args.get("invoice_id"), 0) + 1
    wrong = [f"{i}: {counts.get(i, 0)} request(s)" for i in sorted(approved) if counts.get(i, 0) != 1]
    wrong += [f"{i}: {n} request(s), not approved" for i, n in sorted(counts.items(), key=str) if i not in approved]
    if wrong:
        return False, "; ".join(wrong)
    return True, f"one send_payout request per approved payout ({len(approved)}), the refused one not retried"


def score(ctx):
    issued = _issued(ctx)
    return {
        "H1-receipts-delivered": _h1(ctx, issued),
        "H2-final-record-carries-receipts": _h2(ctx, issued),
        "H3-no-receipt-for-refused-payout": _h3(ctx, issued),
        "A1-receipts-match-ledger": _a1(ctx, issued),
        "A2-each-payout-once": _a2(ctx),
    }
