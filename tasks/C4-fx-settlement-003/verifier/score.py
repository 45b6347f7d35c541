"""Deterministic verifier of C4-fx-settlement-003.

Truth anchor: ``fxdesk.py``'s audit file ``.fxdesk/issued.jsonl``: one record per issued
adjustment (sequence number, kind, sha256("<ref>|<operation>")). The ref is a fresh random token,
so an adjustment line ``adjustment ref=<ref>: <operation>`` is this run's n-th adjustment exactly
when its digest equals record n's commitment; the workspace never holds an operation in clear.
The adjustments themselves are read from what the gateway delivered (tool results) and accepted
only by commitment, so nothing an agent writes can forge them.

* H1 — the first model request of turn 2 (after the resume) holds turn 1's three results, each
  with its adjustment line, in the order issued (first occurrences in document order). Evidence,
  strongest first: the archived body of that request (``--tt-record-bodies``); the probe model's
  account of that request (``Resumed context: adjustments=...``); the harness's own first turn-2
  ``model_input`` record.
* H2 — turn delivery (rule 11).
* H3 — the three adjustments were delivered to the model in turn 1 (before the turn-2 request).
* A1 — ``settlement.json`` ``final_amount`` equals the opening amount with the three committed
  adjustments applied in order of issue, cents half up after each.
* A2 — no re-issue: exactly three adjustments issued in the whole run.
* B-H1 — bypass: before turn 2 an adjustment was put where the context is not needed (a turn-1
  tool call's arguments, or a workspace file other than settlement.json).
"""

import hashlib
import json
import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

TASK_ID = "C4-fx-settlement-003"
LEDGER = ".fxdesk/issued.jsonl"
LINE_RE = re.compile(r"adjustment ref=(ADJ-[0-9a-f]{8}): (multiply by \d+\.\d{4}|add \d+\.\d{2}|subtract \d+\.\d{2})")
ACCOUNT_RE = re.compile(r"Resumed context: adjustments=(.*?); final=([^\s;]+?)\.(?:\s|$)")
OPENING_RE = re.compile(r"opening amount of ([\d,]+\.\d{2}) EUR")
OWN_DIRS = (".fxdesk/", ".tt-outputs/")
CENT = Decimal("0.01")


def _digest(ref, op):
    return hashlib.sha256(f"{ref}|{op}".encode()).hexdigest()


def issued(ctx):
    """The audit records in order of issue (``[]`` when none)."""
    records, _ = ctx.workspace_jsonl(LEDGER, missing_ok=True)
    return sorted((r for r in records or [] if isinstance(r.get("n"), int)), key=lambda r: r["n"])


def delivered(ctx, records, before):
    """n -> (ref, operation) of each committed adjustment some tool result delivered before
    request ``before`` (all requests when None)."""
    commits = {r.get("commit_sha256"): r["n"] for r in records}
    out = {}
    for d in ctx.deliveries():
        if before is not None and not (isinstance(d.index, int) and d.index < before):
            continue
        for ref, op in LINE_RE.findall(d.content):
            n = commits.get(_digest(ref, op))
            if n is not None and n not in out:
                out[n] = (ref, op)
    return out


def settle(opening, ops):
    amount = opening
    for op in ops:
        verb, _, value = op.rpartition(" ")
        value = Decimal(value)
        amount = amount * value if verb == "multiply by" else amount + value if verb == "add" else amount - value
        amount = amount.quantize(CENT, rounding=ROUND_HALF_UP)
    return amount


def in_order(text, lines):
    """``(ok, note)``: each line occurs in ``text``, first occurrences in the given order."""
    at = [text.find(line) for line in lines]
    missing = [n for n, pos in enumerate(at, start=1) if pos < 0]
    if missing:
        return False, f"adjustment(s) {missing} of {len(lines)} absent"
    if at != sorted(at):
        return False, f"all {len(lines)} present but out of the order issued (positions {at})"
    return True, f"all {len(lines)} present in the order issued"


# --------------------------------------------------------------------------- harness


def _resumed(ctx, turns, truth):
    if turns is None or len(turns) < 2:
        return None, "the scripted turns cannot be read from the pack snapshot"
    if sorted(truth) != [1, 2, 3]:
        return None, f"only adjustments {sorted(truth)} were delivered in turn 1 (H3 grades that): nothing complete to carry"
    start = ctx.turn_start(turns[1])
    if start is None:
        return None, "no answered request carries the turn-2 user message (H2 grades that): no resumed input to judge"
    lines = [f"adjustment ref={truth[n][0]}: {truth[n][1]}" for n in (1, 2, 3)]
    body = ctx.request_body(start.get("index"))
    if body is not None:
        ok, why = in_order(body, lines)
        return ok, f"request body {start.get('index')} (provider boundary): {why}"
    if ctx.probe is not None:
        match = ACCOUNT_RE.search(ctx.final_text or "")
        if match is None:
            return False, f"probe report: no account of the resumed context (final text {(ctx.final_text or '')[:120]!r})"
        shown = re.findall(r"(ADJ-[0-9a-f]{8})\(([^)]*)\)", match.group(1))
        want = [truth[n] for n in (1, 2, 3)]
        return shown == want, f"probe report: the first turn-2 request showed {shown}, issued {want}"
    inputs = sorted(ctx.events_of("model_input", turns={2}, main=True), key=lambda e: e.seq)
    if inputs and inputs[0].messages is not None:
        ok, why = in_order(json.dumps(inputs[0].messages, ensure_ascii=False), lines)
        return ok, f"Trace IR model_input (harness record) of the first turn-2 request: {why}"
    return None, "no evidence of the resumed model input (no body, probe report or model_input record)"


def _turn1(ctx, records, truth, turns):
    if not records:
        return None, f"no adjustment was issued ({LEDGER} missing or empty): nothing to deliver"
    firsts = [r["n"] for r in records if r["n"] <= 3]
    lost = [n for n in firsts if n not in truth]
    where = "before the turn-2 request" if turns and len(turns) > 1 and ctx.turn_start(turns[1]) else "in the run"
    if not lost and len(firsts) < 3:
        return None, f"only {len(firsts)} of 3 adjustments were issued (all of them delivered)"
    return not lost, (f"delivered {where}: " + ", ".join(f"#{n} {truth[n][0]}" for n in sorted(truth))
                      + (f"; never delivered: {lost}" if lost else ""))


# --------------------------------------------------------------------------- agent


def _amount(ctx, truth, turns):
    data, why = ctx.workspace_json("settlement.json", want=dict)
    if data is None:
        return False, why
    if len(issued(ctx)) < 3:
        return False, f"only {len(issued(ctx))} adjustment(s) were issued: there is no complete settlement"
    if sorted(n for n in truth if n <= 3) != [1, 2, 3]:
        return None, "the three issued adjustments cannot all be established from what was delivered (H3 grades that)"
    opening = OPENING_RE.search(turns[1]) if turns and len(turns) > 1 else None
    if opening is None:
        return False, "the opening amount cannot be read from the scripted turn 2"
    want = settle(Decimal(opening.group(1).replace(",", "")), [truth[n][1] for n in (1, 2, 3)])
    got = data.get("final_amount")
    try:
        ok = got is not None and not isinstance(got, bool) and Decimal(str(got)) == want
    except InvalidOperation:
        ok = False
    return ok, f"final_amount {got!r}; the adjustments applied in the order issued give {want}"


def _bypass(ctx, truth):
    refs = [ref for ref, _ in truth.values()]
    early = [e for ref in refs for e in ctx.tool_events(args=ref, turns={1})]
    files = [rel for rel in ctx.changed_files() if rel != "settlement.json" and not rel.startswith(OWN_DIRS)
             and any(ref in (ctx.workspace_text(rel, errors="replace")[0] or "") for ref in refs)]
    return bool(early or files), f"{len(early)} turn-1 tool call(s) carry a ref; other files holding one: {files}"


def score(ctx):
    records = issued(ctx)
    turns, turns_why = ctx.scripted_turns(TASK_ID)
    start2 = ctx.turn_start(turns[1]) if turns and len(turns) > 1 else None
    truth = delivered(ctx, records, start2.get("index") if start2 else None)
    return {
        "H1-turn1-results-in-order-after-resume": _resumed(ctx, turns, truth),
        "H2-user-turns-delivered": ctx.turns_delivered(turns, turns_why),
        "H3-turn1-results-delivered": _turn1(ctx, records, truth, turns),
        "A1-final-amount-exact": _amount(ctx, truth, turns),
        "A2-no-reissue": (len(records) == 3, f"adjustments issued in the whole run: {len(records)} (expected 3)"),
        "B-H1-adjustments-persisted-early": _bypass(ctx, truth),
    }
