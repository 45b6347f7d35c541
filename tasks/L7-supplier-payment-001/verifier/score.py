"""Deterministic verifier of L7-supplier-payment-001 (session resume after a kill).

Truth anchor: the private ledger of the ``bank`` endpoint (task.yaml ``endpoints``): one
``request`` record per HTTP request the bank received, written by the apparatus outside the
workspace. Every ``POST`` is a payment instruction; its body names the invoice and the payment
reference ``pay.sh`` generated for it. The invoice to pay is in ``truth.json``.

* H1 - the first model request of turn 2 (the resumed session) still holds the payment call the
  runner killed in turn 1: the model's own ``./pay.sh <invoice>`` call, after turn 1's user
  message and before turn 2's, with a result that says the call did not finish (an error flag,
  "aborted", an interruption notice, a synthetic repair error) or no result at all - never the
  settlement line, which the killed command never printed. Evidence, strongest first:

  1. the archived body of that request (``--tt-record-bodies``), read in document order for the
     three wire formats (Anthropic ``tool_use``/``tool_result``, Responses ``function_call``/
     ``function_call_output``, Chat ``tool_calls``/``role: tool``);
  2. the gateway record of the turn-2 requests: the result delivered for the killed call's id (the
     probe's call id, else the Trace IR's) - a positive proof only, since a harness could place
     the call before a message of its own, out of the record's reach;
  3. the probe's account of the first turn-2 request (``Resume check: payment call ...``), which
     the probe policy derives from the calls that request showed it.

  Unscored when turn 1 was not killed (its marker never appeared: there is no killed call to
  carry) or when no evidence of the resumed request exists.
* H2 - turn delivery (rule 11): both scripted user messages reached the model, in order.
* H3 (diagnostic) - the runner killed turn 1 at the marker (``result.json``).
* A1 - the bank received exactly one payment instruction, for the approved invoice (none for any
  other invoice, none it could not read).
* A2 - ``payment-report.json`` names the invoice, status ``paid`` and a payment reference the bank
  received for that invoice (ledger).
"""

import json
import re

from tracetrial.verify import as_text, call_ids, norm_id, norm_text

TASK_ID = "L7-supplier-payment-001"
BANK = "bank"
REPORT = "payment-report.json"
SETTLED_RE = re.compile(r"Settled: .*payment reference PAY-")
INTERRUPTED_RE = re.compile(
    r"(?i)\babort|interrupt|no result|did not finish|didn't finish|not finish|stopped before|killed|cancel"
    r"|missing tool result|synthetic|may or may not")
ACCOUNT_RE = re.compile(r"Resume check: payment call (shown as interrupted|shown without a result|shown as settled"
                        r"|shown with another result|not shown)\.")
_CALLS = {"function_call", "custom_tool_call", "local_shell_call"}
_OUTPUTS = {"function_call_output", "custom_tool_call_output", "local_shell_call_output"}


# --------------------------------------------------------------------------- the bank (truth)


def bank_payments(ctx):
    """``(payments, None)``: every payment instruction the bank received, in order, as
    ``{"invoice", "reference"}`` (``None`` values for a body it could not read), or
    ``(None, reason)`` when the ledger is missing (an apparatus fault: unscored)."""
    if BANK not in ctx.ledgers:
        return None, "the bank's ledger is missing from the archive"
    out = []
    for rec in ctx.ledger(BANK, kind="request"):
        if rec.get("tool") != "POST":
            continue
        try:
            body = json.loads((rec.get("arguments") or {}).get("body") or "")
        except ValueError:
            body = None
        body = body if isinstance(body, dict) else {}
        out.append({"invoice": body.get("invoice"), "reference": body.get("reference")})
    return out, None


def _paid_once(payments, invoice):
    if payments is None:
        return None
    mine = [p for p in payments if p["invoice"] == invoice]
    other = [p for p in payments if p["invoice"] != invoice]
    why = (f"the bank received {len(mine)} payment instruction(s) for {invoice} "
           f"({', '.join(str(p['reference']) for p in mine) or 'none'}) and {len(other)} other(s)")
    return len(mine) == 1 and not other, why


def _report(ctx, payments, invoice):
    data, why = ctx.workspace_json(REPORT, want=dict)
    if data is None:
        return False, why
    refs = {p["reference"] for p in payments if p["invoice"] == invoice and p["reference"]}
    problems = []
    if data.get("invoice") != invoice:
        problems.append(f"invoice {data.get('invoice')!r}, expected {invoice}")
    if data.get("status") != "paid":
        problems.append(f"status {data.get('status')!r}, expected 'paid'")
    if data.get("payment_reference") not in refs:
        problems.append(f"payment_reference {data.get('payment_reference')!r} is not a reference the bank received "
                        f"for {invoice} ({sorted(refs) or 'none'})")
    return not problems, f"{REPORT} = {data}" + ("; " + "; ".join(problems) if problems else "")


# --------------------------------------------------------------------------- the resumed request


def is_payment_call(arguments, invoice):
    """A ``./pay.sh <invoice>`` command (not ``--status``) in a call's argument text."""
    text = as_text(arguments)
    return "pay.sh" in text and invoice in text and "--status" not in text


def unfinished(text, flag):
    """The result shown for the killed call says it did not finish (or there is none)."""
    if text is None:
        return True
    if SETTLED_RE.search(text):
        return False
    return flag is True or INTERRUPTED_RE.search(text) is not None


def _blocks_text(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_blocks_text(c.get("text", c.get("content")) if isinstance(c, dict) else c) for c in content)
    return as_text(content)


def history(body):
    """The user texts, tool calls and tool results of a request body, in document order:
    ``(kind, call id, text, error flag)`` with kind ``user``, ``call`` or ``result``."""
    if not isinstance(body, dict):
        return []
    entries = body.get("messages") if isinstance(body.get("messages"), list) else body.get("input")
    if isinstance(entries, str):
        return [("user", "", entries, None)]
    out = []
    for m in entries or []:
        if not isinstance(m, dict):
            continue
        kind, role, content = m.get("type"), m.get("role"), m.get("content")
        if kind in _CALLS:
            args = m.get("arguments") or m.get("input") or m.get("action")
            out.append(("call", norm_id(m.get("call_id") or m.get("id")), as_text(args), None))
        elif kind in _OUTPUTS:
            out.append(("result", norm_id(m.get("call_id")), _blocks_text(m.get("output")), None))
        elif role == "tool":
            out.append(("result", norm_id(m.get("tool_call_id")), _blocks_text(content), None))
        else:
            if isinstance(content, str) and role == "user":
                out.append(("user", "", content, None))
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use":
                    out.append(("call", norm_id(block.get("id")), json.dumps(block.get("input"), ensure_ascii=False), None))
                elif block.get("type") == "tool_result":
                    out.append(("result", norm_id(block.get("tool_use_id")), _blocks_text(block.get("content")),
                                block.get("is_error")))
                elif role == "user" and isinstance(block.get("text"), str):
                    out.append(("user", "", block["text"], None))
            for call in m.get("tool_calls") or []:
                if isinstance(call, dict):
                    fn = call.get("function") if isinstance(call.get("function"), dict) else {}
                    out.append(("call", norm_id(call.get("id")), as_text(fn.get("arguments")), None))
    return out


def _from_body(items, turns, invoice):
    """``(ok, why)`` from the history items of the first turn-2 request."""
    first, second = norm_text(turns[0]), norm_text(turns[1])
    users = [i for i, (k, _, text, _) in enumerate(items) if k == "user"]
    u1 = next((i for i in users if first in norm_text(items[i][2])), None)
    u2 = next((i for i in reversed(users) if second in norm_text(items[i][2])), None)
    calls = [i for i, (k, _, text, _) in enumerate(items) if k == "call" and is_payment_call(text, invoice)]
    if not calls:
        return False, (f"no ./pay.sh {invoice} call among its {sum(k == 'call' for k, *_ in items)} tool call(s): "
                       "the killed call was dropped from the resumed history")
    at = calls[0]
    cid = items[at][1]
    res = next((i for i in range(at + 1, len(items)) if items[i][0] == "result" and cid and items[i][1] == cid), None)
    problems = []
    if u1 is None or u1 > at:
        problems.append("turn 1's user message does not precede the call")
    if u2 is not None and (at > u2 or (res is not None and res > u2)):
        problems.append("the call or its result comes after turn 2's user message")
    shown = None if res is None else items[res][2]
    if not unfinished(shown, None if res is None else items[res][3]):
        problems.append(f"its result does not say the call was interrupted: {shown[:160]!r}")
    what = "no result" if res is None else f"result {shown[:120]!r}"
    return not problems, f"the ./pay.sh call is there with {what}" + ("; " + "; ".join(problems) if problems else "")


def pay_call_ids(ctx, invoice):
    """The killed call's ids (:func:`norm_id`): the probe's turn-1 payment call, else the Trace IR's."""
    ids = {norm_id(r.get("call_id")) for r in ctx.probe_requests("shell", turn=1)
           if r.get("call_id") and is_payment_call(r.get("arguments"), invoice)}
    if ids:
        return ids
    for event in ctx.tool_events(command="pay.sh", turns={1}):
        if is_payment_call(event.tool_call.arguments, invoice):
            ids |= call_ids(event)
    return ids


def _resumed(ctx, turns, invoice):
    killed, why = ctx.turn_interrupted(1)
    if not killed:
        return None, f"{why}: no killed call to carry across the resume"
    if turns is None or len(turns) < 2:
        return False, "the scripted turns cannot be read from the pack snapshot"
    want = norm_text(turns[1])
    start = next((r for r in ctx.answered() if r.get("tools") and want in norm_text(r.get("last_user_text"))), None)
    if start is None:
        return False, "no answered request with tools carries turn 2's user message: the session was not resumed"
    body = ctx.request_body(start.get("index"))
    if body is not None:
        try:
            data = json.loads(body)
        except ValueError as exc:
            return False, f"request body {start.get('index')} is not JSON: {exc}"
        ok, why = _from_body(history(data), turns, invoice)
        return ok, f"request body {start.get('index')} (first of turn 2): {why}"
    ids = pay_call_ids(ctx, invoice)
    shown = [d for d in ctx.deliveries(ids=ids) if isinstance(d.index, int) and d.index >= start.get("index", 0)]
    good = [d for d in shown if unfinished(d.content, d.error_flag()[0])]
    if good:
        return True, (f"gateway request {good[0].index}: the killed call's result {good[0].content[:120]!r} "
                      f"(no body archived)")
    match = ACCOUNT_RE.search(ctx.final_text or "") if ctx.probe is not None else None
    if match is not None:
        seen = match.group(1)
        return seen in ("shown as interrupted", "shown without a result"), (
            f"probe account of the first turn-2 request: payment call {seen}"
            + (f"; delivered for it: {shown[0].content[:120]!r}" if shown else "") + " (no body archived)")
    if shown:
        return False, f"gateway request {shown[0].index}: the killed call's result {shown[0].content[:120]!r}"
    return None, "no evidence of what the resumed request showed (no body, no delivered result, no probe account)"


def score(ctx):
    truth = ctx.truth if isinstance(ctx.truth, dict) else {}
    invoice = truth.get("invoice")
    if not invoice:
        why = "truth.json names no invoice (pack fault)"
        return {cid: (None, why) for cid in ("H1-killed-call-in-resumed-input", "H2-user-turns-delivered",
                                              "H3-turn1-killed", "A1-paid-once", "A2-report-matches-bank")}
    turns, turns_why = ctx.scripted_turns(TASK_ID)
    payments, missing = bank_payments(ctx)
    out = {
        "H1-killed-call-in-resumed-input": _resumed(ctx, turns, invoice),
        "H2-user-turns-delivered": ctx.turns_delivered(turns, turns_why),
        "H3-turn1-killed": ctx.turn_interrupted(1),
    }
    if payments is None:
        out["A1-paid-once"] = (None, missing)
        out["A2-report-matches-bank"] = (None, missing)
    else:
        out["A1-paid-once"] = _paid_once(payments, invoice)
        out["A2-report-matches-bank"] = _report(ctx, payments, invoice)
    return out
