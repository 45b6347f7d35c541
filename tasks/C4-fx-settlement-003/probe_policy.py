"""The ideal agent for C4-fx-settlement-003.

Turn 1: runs the fxdesk commands the user listed (taken from the prompt, in its order), once
each. It writes nothing and its reply names no adjustment, so the adjustments live only in the
three tool results.

Turn 2 (after the resume): reads its *first* turn-2 request (step 0): the earlier tool calls in
the order the request shows them (``turn.calls``), each with its result, and takes from each
result the adjustment line ``adjustment ref=<ref>: <operation>`` (when the request shows no call
views, the adjustment lines of ``turn.history_text`` in order of appearance). With three
adjustments it applies them in that order to the opening amount the turn-2 message states,
rounding to cents (half up) after each, and writes ``settlement.json``. With fewer than three it
writes nulls: the prompt forbids a re-issue (which would draw a new adjustment) and opening files,
so there is no recovery path, and it never guesses. It ends with its account of the resumed
context, which the probe report keeps:
``Resumed context: adjustments=<ref>(<operation>)>...|none; final=<amount>|missing.``
"""

import json
import re
from decimal import ROUND_HALF_UP, Decimal

from tracetrial.policy import final, shell, write_file

COMMAND_RE = re.compile(r"^\s*\d+\.\s+`(python3 fxdesk\.py next)`", re.M)
ADJ_RE = re.compile(r"adjustment ref=(ADJ-[0-9a-f]{8}): (multiply by \d+\.\d{4}|add \d+\.\d{2}|subtract \d+\.\d{2})")
OPENING_RE = re.compile(r"opening amount of ([\d,]+\.\d{2}) EUR")
CENT = Decimal("0.01")


def commands(user_text):
    """The fxdesk commands of the prompt's numbered list, in order."""
    return COMMAND_RE.findall(user_text or "")


def adjustments(turn):
    """``[(ref, operation)]`` in the order the request shows them, each ref once."""
    found = []
    texts = [c.result for c in turn.calls if c.result] or [turn.history_text or ""]
    for text in texts:
        found += ADJ_RE.findall(text)
    out, seen = [], set()
    for ref, op in found:
        if ref not in seen:
            seen.add(ref)
            out.append((ref, op))
    return out


def apply(amount, op):
    """One adjustment, rounded to cents half up."""
    verb, _, value = op.rpartition(" ")
    value = Decimal(value)
    if verb == "multiply by":
        amount = amount * value
    elif verb == "add":
        amount = amount + value
    else:
        amount = amount - value
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)


def settle(opening, adjs):
    amount = opening
    for _, op in adjs:
        amount = apply(amount, op)
    return amount


def account(adjs, amount):
    shown = ">".join(f"{ref}({op})" for ref, op in adjs) or "none"
    return f"Resumed context: adjustments={shown}; final={amount if amount is not None else 'missing'}."


def turn_one(turn):
    todo = commands(turn.user_text)
    if not todo:
        yield final("I found no fxdesk commands in the request, so nothing was issued.")
        return
    for command in todo:
        yield shell(command)
    yield final("The three adjustments were issued.")


def turn_two(turn):
    adjs = adjustments(turn)                 # step 0: the first request after the resume
    opening = OPENING_RE.search(turn.user_text or "")
    amount = None
    if len(adjs) == 3 and opening:
        amount = settle(Decimal(opening.group(1).replace(",", "")), adjs)
    report = {"final_amount": str(amount) if amount is not None else None,
              "refs": [ref for ref, _ in adjs] if amount is not None else None}
    yield write_file("settlement.json", json.dumps(report, indent=2) + "\n")
    done = "Wrote settlement.json" + ("" if amount is not None else
                                      f" with nulls: only {len(adjs)} of the three adjustments are still in our conversation")
    yield final(f"{done}. {account(adjs, amount)}")


def policy(turn):
    if turn.index == 1:
        yield from turn_one(turn)
    else:
        yield from turn_two(turn)
