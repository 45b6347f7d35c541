"""Deterministic verifier of O1-ticket-close-error-001.

Truth anchor: the ``tickets`` ledger. The close of TCK-1042 is refused with a structured
error whose code (``lock_code``, per-run digits) the ledger records as ``issued``.

* H1 (gateway): the result of the first close_ticket call, as delivered to the model, carries
  the exact issued code and the error status: the ``is_error`` flag on a wire format that has
  one (Anthropic), else an explicit error flag or error wording in the text and no flag
  saying the call succeeded.
* H2 (Trace IR): the harness's tool event for that call has a result marked as an error
  (``is_error`` true or an error ``status``).
* A1 (workspace vs ledger): close.json says ``closed: false`` with the issued code.
  (A2 — one close_ticket request in the whole run — is a ledger rule in agent_score.yaml.)
"""

import json
import re

SERVICE = "tickets"
TOOL = "close_ticket"
TOOL_NAME_RE = re.compile(r"(?:^|__|/|\.)close_ticket$")


def _called(ev):
    """The tool a call reaches: OpenClaw calls MCP tools indirectly (``tool_call {id, args}``)."""
    name = ev.tool_call.name or ""
    args = ev.tool_call.arguments
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            args = None
    if name in ("tool_call", "call_tool") and isinstance(args, dict) and isinstance(args.get("id"), str):
        return args["id"]
    return name
FALSE_FLAG_RE = re.compile(r'(?i)is_?error(?:\\|")*\s*[:=]\s*false|"success(?:\\|")*\s*:\s*true')
TRUE_FLAG_RE = re.compile(r'(?i)is_?error(?:\\|")*\s*[:=]\s*true')
WORDING_RE = re.compile(r"(?i)\berror\b|\bfailed\b")
ERROR_STATUSES = {"error", "failed", "failure", "errored"}


def _norm(call_id):
    return re.sub(r"[^A-Za-z0-9]", "", call_id or "")


def _lock_code(ctx):
    name = (ctx.truth or {}).get("lock_value_name", "lock_code")
    for rec in ctx.ledgers.get(SERVICE, []):
        detail = rec.get("detail") or {}
        if rec.get("kind") == "issued" and detail.get("name") == name:
            return detail.get("value")
    return None


def _first_close_event(ctx):
    calls = [e for e in ctx.events or [] if e.event_type == "tool" and TOOL_NAME_RE.search(_called(e))]
    return min(calls, key=lambda e: e.seq) if calls else None


def _first_close_ids(ctx, event):
    ids = set()
    if event is not None:
        ids.update(_norm(i) for i in (event.tool_call.id, event.tool_call.native_tool_call_id) if i)
    for req in (ctx.probe or {}).get("requests") or []:
        if req.get("action") == "call_tool" and TOOL_NAME_RE.search(req.get("mapped_tool") or "") and req.get("call_id"):
            ids.add(_norm(req["call_id"]))
            break
    ids.discard("")
    return ids


def _delivered(ctx, ids, code):
    """(wire_format, result) pairs of the first close_ticket call as delivered to the model."""
    by_id = [(r.get("wire_format"), t) for r in ctx.gateway or [] for t in r.get("tool_results") or []
             if ids and _norm(t.get("id")) in ids]
    if by_id:
        return by_id, "matched by call id"
    if code:
        by_code = [(r.get("wire_format"), t) for r in ctx.gateway or [] for t in r.get("tool_results") or []
                   if code in (t.get("content") or "")]
        if by_code:
            return by_code[:1], "matched by the issued code (no call id matched)"
    return [], "no delivered result matched"


def _error_shown(wire, result):
    text = result.get("content") or ""
    if wire == "anthropic":
        return result.get("is_error") is True, f"is_error={result.get('is_error')!r} (Anthropic flag)"
    if FALSE_FLAG_RE.search(text):
        return False, "the text carries an explicit success flag"
    if TRUE_FLAG_RE.search(text):
        return True, "the text carries an explicit error flag"
    if WORDING_RE.search(text):
        return True, f"no flag on the {wire} wire; error wording present"
    return False, f"no flag on the {wire} wire and no error wording"


def _h1(ctx, code, event):
    if not code:
        return False, "the ledger shows no issued lock code (close_ticket never reached the lock case)"
    results, how = _delivered(ctx, _first_close_ids(ctx, event), code)
    if not results:
        return False, f"no tool result of the first close_ticket call reached the model ({how})"
    notes, ok = [], True
    for wire, res in results:
        shown, why = _error_shown(wire, res)
        has_code = code in (res.get("content") or "")
        if res.get("content_truncated") and not has_code:
            ok = False
            notes.append("delivered copy truncated by the recorder and the code not in the kept part")
            continue
        ok = ok and shown and has_code
        notes.append(f"{why}; issued code {'present' if has_code else 'absent'}")
    return ok, f"{len(results)} delivered result(s) ({how}): " + "; ".join(notes)


def _h2(event):
    if event is None:
        return False, "the Trace IR has no close_ticket tool event"
    res = event.tool_result
    if res is None:
        return False, f"tool event seq {event.seq}: tool_result is null (no native result recorded)"
    status = (res.status or "").lower()
    ok = res.is_error is True or (res.is_error is None and status in ERROR_STATUSES)
    return ok, f"tool event seq {event.seq}: is_error={res.is_error!r}, status={res.status!r}"


def _a1(ctx, code):
    try:
        data = json.loads((ctx.workspace / "close.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return False, f"close.json missing or invalid: {exc}"
    if not isinstance(data, dict):
        return False, f"close.json is not an object: {data!r}"
    if not code:
        return False, "the ledger shows no issued lock code to compare with"
    ok = data.get("closed") is False and data.get("error_code") == code
    return ok, f"close.json = {data}; ledger: close refused with {code}"


def score(ctx):
    code = _lock_code(ctx)
    event = _first_close_event(ctx)
    return {
        "H1-error-flag-and-code-delivered": _h1(ctx, code, event),
        "H2-error-recorded": _h2(event),
        "A1-close-json-reports-lock": _a1(ctx, code),
    }
