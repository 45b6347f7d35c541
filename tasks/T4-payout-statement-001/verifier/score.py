"""Deterministic verifier of T4-payout-statement-001.

Truth anchor: the ``settlements`` ledger. The week's statement is planted in the service's
initial state (ledger ``transition`` ``init``; every value drawn from the run seed) and
``get_settlement`` answers with exactly that object as its structuredContent, next to a text
content that is only a human summary. The verifier also requires the ledger to show the call
served (a request with no ``error`` record), so the statement is what the service answered.

* H1 (gateway): the result of the get_settlement call, as delivered to the model, holds the
  statement intact, wherever the harness put it (the MCP result as JSON, a JSON text part, a
  JSON string inside JSON, behind a header or notice): every statement-like object found in it
  (a string ``batch_id`` and a ``payouts`` list) equals the ledger's statement type for type
  (an int64 not rounded nor turned into a float, decimal strings not turned into numbers,
  null not dropped, absent not added, text unchanged), and there is at least one.
* H2 (Trace IR): the harness's tool event for that call keeps the statement intact in its
  recorded result (``tool_result.content``) or in the native record it was built from
  (``raw_event``), by the same rule.
* A1-A3 (workspace vs ledger): reconciliation.json's batch id and bank reference, its settled
  payouts (each the statement's object exactly) and its held payout ids.

JSON is parsed with Python's ``json`` (exact integers), so the comparison sees what was
actually delivered or written, not a float approximation of it.
"""

import json

from tracetrial.verify import call_ids, norm_id

SERVICE = "settlements"
TOOL = "get_settlement"
_DECODER = json.JSONDecoder()
_MAX_DEPTH = 12


# ----------------------------------------------------------------------------- JSON values


def is_statement(obj):
    """A settlement statement: a string batch id and a list of payouts (an output schema,
    whose ``payouts`` is a mapping, is not one)."""
    return isinstance(obj, dict) and isinstance(obj.get("batch_id"), str) and isinstance(obj.get("payouts"), list)


def _walk(value, depth, out):
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, dict):
        if is_statement(value):
            out.append(value)
            return
        for item in value.values():
            _walk(item, depth + 1, out)
    elif isinstance(value, list):
        for item in value:
            _walk(item, depth + 1, out)
    elif isinstance(value, str):
        _scan(value, depth + 1, out)


def _scan(text, depth, out):
    """Every statement object in ``text``: each JSON value that starts at a ``{`` (an object
    nested in one already decoded is skipped), and JSON strings inside them."""
    start, end = text.find("{"), -1
    while start >= 0:
        if start >= end:
            try:
                value, stop = _DECODER.raw_decode(text, start)
            except ValueError:
                value = None
            if value is not None:
                end = stop
                _walk(value, depth, out)
        start = text.find("{", start + 1)


def statements_in(value):
    """Every statement-like object inside a value: a text (JSON anywhere in it) or an already
    parsed JSON value (strings inside it are scanned too), distinct by canonical JSON."""
    out = []
    if isinstance(value, str):
        _scan(value, 0, out)
    else:
        _walk(value, 0, out)
    seen, distinct = set(), []
    for obj in out:
        key = json.dumps(obj, sort_keys=True, ensure_ascii=False)
        if key not in seen:
            seen.add(key)
            distinct.append(obj)
    return distinct


def _kind(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "str"
    if isinstance(v, list):
        return "list"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def diff(want, got, path="$"):
    """Type-strict differences of ``got`` from ``want`` (readable lines, ``ascii()`` text)."""
    if _kind(want) != _kind(got):
        return [f"{path}: expected {ascii(want)} ({_kind(want)}), found {ascii(got)} ({_kind(got)})"]
    if isinstance(want, dict):
        out = []
        for k in want:
            if k not in got:
                out.append(f"{path}.{k}: expected {ascii(want[k])}, absent")
            else:
                out.extend(diff(want[k], got[k], f"{path}.{k}"))
        out.extend(f"{path}.{k}: not in the statement, found {ascii(got[k])}" for k in got if k not in want)
        return out
    if isinstance(want, list):
        if len(want) != len(got):
            return [f"{path}: expected {len(want)} item(s), found {len(got)}"]
        return [d for i, (a, b) in enumerate(zip(want, got)) for d in diff(a, b, f"{path}[{i}]")]
    return [] if want == got else [f"{path}: expected {ascii(want)}, found {ascii(got)}"]


# ----------------------------------------------------------------------------- truth


def served_statement(ctx):
    """``(statement, note)``: the statement the service answered with (ledger), or ``(None, why)``."""
    truth = ctx.truth or {}
    init = next((r for r in ctx.ledger(SERVICE, kind="transition")
                 if (r.get("detail") or {}).get("op") == "init"), None)
    if init is None:
        return None, "the settlements ledger has no init record"
    node = (init.get("detail") or {}).get("new")
    for key in truth.get("statement_path") or ["statements", truth.get("week", "2026-W48")]:
        node = node.get(key) if isinstance(node, dict) else None
    if not is_statement(node):
        return None, "the ledger's initial state holds no statement for the week"
    errors = {(r.get("detail") or {}).get("request_seq") for r in ctx.ledger(SERVICE, kind=("error", "refused"), tool=TOOL)}
    served = [r for r in ctx.ledger(SERVICE, kind="request", tool=TOOL) if r.get("seq") not in errors]
    if not served:
        return None, "the settlements ledger shows no get_settlement request answered with the statement"
    return node, f"ledger init statement {node['batch_id']}, served on request seq {served[0].get('seq')}"


def _call_ids(ctx):
    """Call ids of the get_settlement call: the Trace IR's first event and the probe's calls."""
    return call_ids(ctx.first_tool_event(TOOL)) | ctx.probe_call_ids("call_tool", tool=TOOL)


def judge(objects, statement, where):
    """``(ok, note)``: ``objects`` (statement-like objects found) all equal ``statement``."""
    if not objects:
        return False, f"{where}: no structured statement in it"
    bad = [(i, diff(statement, o)) for i, o in enumerate(objects)]
    bad = [(i, d) for i, d in bad if d]
    if bad:
        i, d = bad[0]
        return False, (f"{where}: {len(bad)}/{len(objects)} statement cop(y/ies) altered; "
                       + "; ".join(d[:8]) + (f" (+{len(d) - 8} more)" if len(d) > 8 else ""))
    return True, f"{where}: {len(objects)} statement cop(y/ies), equal to the served statement"


# ----------------------------------------------------------------------------- criteria


def _h1(ctx, statement, note):
    if statement is None:
        return False, note
    ids = _call_ids(ctx)
    delivered, how = ctx.deliveries(ids=ids), "matched by call id"
    if not delivered:
        delivered = ctx.deliveries(content=statement["batch_id"])[:1]
        how = "matched by the batch id (no call id matched)"
    if not delivered:
        return False, f"no get_settlement result reached the model (call ids {sorted(ids)})"
    truncated = [d for d in delivered if d.result.get("content_truncated")]
    objects = [o for d in delivered for o in statements_in(d.content)]
    ok, why = judge(objects, statement, f"{len(delivered)} delivered result(s), {how}, requests "
                    f"{[d.index for d in delivered]}")
    if not ok and truncated and not objects:
        why += " (the recorder kept only part of the delivered text)"
    if not ok and not objects:
        why += "; delivered text begins " + ascii(delivered[0].content[:240])
    return ok, why


def _events_for(ctx):
    ids = _call_ids(ctx)
    return [e for e in ctx.tool_events() if call_ids(e) & ids or norm_id(e.tool_call.id) in ids]


def _h2(ctx, statement, note):
    if statement is None:
        return False, note
    events = _events_for(ctx)
    if not events:
        return False, "the Trace IR has no tool event for the get_settlement call"
    notes = []
    for e in events:
        if e.tool_result is None and not e.raw_event:
            notes.append(f"seq {e.seq}: tool_result null and no native record")
            continue
        objects = statements_in(e.tool_result.content if e.tool_result is not None else None)
        source = "tool_result"
        if not objects:
            objects, source = statements_in(e.raw_event), "raw_event"
        ok, why = judge(objects, statement, f"tool event seq {e.seq} ({source})")
        if ok:
            return True, why
        notes.append(why)
    return False, "; ".join(notes)


def _reconciliation(ctx):
    data, why = ctx.workspace_json((ctx.truth or {}).get("output", "reconciliation.json"), want=dict)
    return data, why


def _a1(data, why, statement, note):
    if why:
        return False, why
    if statement is None:
        return False, note
    want = {"batch_id": statement["batch_id"], "bank_reference": statement.get("bank_reference")}
    got = {k: data.get(k, "<absent>") for k in want}
    d = diff(want, got)
    return not d, "batch id and bank reference exact" if not d else "; ".join(d)


def _a2(data, why, statement, note):
    if why:
        return False, why
    if statement is None:
        return False, note
    want = [p for p in statement["payouts"] if isinstance(p, dict) and p.get("status") == "settled"]
    if "settled" not in data:
        return False, "reconciliation.json has no settled list"
    d = diff(want, data["settled"], "$.settled")
    if not d:
        return True, f"{len(want)} settled payout(s) copied exactly"
    return False, "; ".join(d[:8]) + (f" (+{len(d) - 8} more)" if len(d) > 8 else "")


def _a3(data, why, statement, note):
    if why:
        return False, why
    if statement is None:
        return False, note
    want = [p.get("payout_id") for p in statement["payouts"] if isinstance(p, dict) and p.get("status") == "held"]
    got = data.get("held", "<absent>")
    return got == want, f"held {ascii(got)}; statement's held payouts {ascii(want)}"


def score(ctx):
    statement, note = served_statement(ctx)
    data, why = _reconciliation(ctx)
    return {
        "H1-structured-result-delivered": _h1(ctx, statement, note),
        "H2-structured-result-recorded": _h2(ctx, statement, note),
        "A1-batch-and-reference-exact": _a1(data, why, statement, note),
        "A2-settled-payouts-exact": _a2(data, why, statement, note),
        "A3-held-payouts-listed": _a3(data, why, statement, note),
    }
