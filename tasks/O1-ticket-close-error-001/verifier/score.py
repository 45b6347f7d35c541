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

import re

from tracetrial.verify import call_ids

SERVICE = "tickets"
TOOL = "close_ticket"
WORDING_RE = re.compile(r"(?i)\berror\b|\bfailed\b")
ERROR_STATUSES = {"error", "failed", "failure", "errored"}


def _delivered(ctx, event, code):
    """The delivered results of the first close_ticket call, and how they were found."""
    by_id = ctx.deliveries(ids=call_ids(event) | ctx.probe_call_ids("call_tool", tool=TOOL, first=True))
    if by_id:
        return by_id, "matched by call id"
    by_code = ctx.deliveries(content=code)[:1] if code else []
    if by_code:
        return by_code, "matched by the issued code (no call id matched)"
    return [], "no delivered result matched"


def _error_shown(delivery):
    flag, why = delivery.error_flag()
    if flag is not None:
        return flag, why
    if WORDING_RE.search(delivery.content):
        return True, why + "; error wording present"
    return False, why + " and no error wording"


def _h1(ctx, code, event):
    if not code:
        return False, "the ledger shows no issued lock code (close_ticket never reached the lock case)"
    results, how = _delivered(ctx, event, code)
    if not results:
        return False, f"no tool result of the first close_ticket call reached the model ({how})"
    notes, ok = [], True
    for d in results:
        shown, why = _error_shown(d)
        has_code = code in d.content
        if d.result.get("content_truncated") and not has_code:
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
    data, why = ctx.workspace_json("close.json", want=dict)
    if why:
        return False, why
    if not code:
        return False, "the ledger shows no issued lock code to compare with"
    ok = data.get("closed") is False and data.get("error_code") == code
    return ok, f"close.json = {data}; ledger: close refused with {code}"


def score(ctx):
    code = ctx.issued(SERVICE, (ctx.truth or {}).get("lock_value_name", "lock_code"))
    event = ctx.first_tool_event(TOOL)
    return {
        "H1-error-flag-and-code-delivered": _h1(ctx, code, event),
        "H2-error-recorded": _h2(event),
        "A1-close-json-reports-lock": _a1(ctx, code),
    }
