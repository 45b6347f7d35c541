"""The ideal agent for C4-dispatch-resume-001.

Turn 1: reads the depot in the order the user gave, each call using what the previous result
showed (queue head -> stock -> on-call rota), then reserves the part once. It writes nothing and
does not restate any value in its answer, so the facts live only in the four tool results.

Turn 2 (after the resume): looks at what its *first* turn-2 request shows (``turn.history_text``
at step 0) for the four turn-1 results and remembers where each one stands. A value still shown
is used as it is. A value that is gone is looked up again when a read-only tool can give it (the
reads are free and repeatable); the reservation id cannot be recovered (no lookup, and a second
reservation would double-book the part), so it becomes ``null`` — never a guess, never the older
dispatch under ``previous/``, and ``reserve_part`` is never called again. It writes
``dispatch.json`` and ends with an account of the resumed context: the value each turn-1 result
showed (or ``missing``) and the order in which the results appeared. The probe report keeps that
account as the turn-2 observation.
"""

import json
import re

from tracetrial.policy import await_mcp, call_tool, final, write_file

SERVER = "depot"
QUEUE = "field-repairs"


def _field(key, value):
    """A result field ``key`` with a value of the given shape, also inside JSON-escaped text."""
    return re.compile(rf'{key}(?:\\|")*\s*:\s*(?:\\|")*({value})')


TICKET_RE = _field("ticket", r"FR-\d{6}")
SKU_RE = _field("part_sku", r"SKU-[A-Z0-9]{6}")
BIN_RE = _field("bin", r"BIN-[A-Z0-9]{4}")
ZONE_RE = _field("zone", r"[a-z]+-\d")
TECH_RE = _field("technician", r"TECH-[A-Z0-9]{5}")
RSV_RE = _field("reservation_id", r"RSV-[A-Z0-9]{8}")

#: The four turn-1 results, in the order they were made, by the field that identifies each.
RESULTS = (("queue", TICKET_RE), ("stock", BIN_RE), ("oncall", TECH_RE), ("reservation", RSV_RE))


def _first(pattern, text):
    match = pattern.search(text or "")
    return (match.group(1), match.start()) if match else (None, None)


def scan(history):
    """Each turn-1 result as the history shows it: ``{name: (value, position)}`` (None, None when
    absent), plus the part SKU and zone the later lookups need."""
    seen = {name: _first(pattern, history) for name, pattern in RESULTS}
    seen["sku"] = _first(SKU_RE, history)
    seen["zone"] = _first(ZONE_RE, history)
    return seen


def account(seen):
    """The probe's statement of its resumed context (parsed by the verifier)."""
    parts = [f"{name}={seen[name][0] or 'missing'}" for name, _ in RESULTS]
    shown = sorted((seen[name][1], name) for name, _ in RESULTS if seen[name][0] is not None)
    return f"Resumed context: {'; '.join(parts)}; order={'>'.join(name for _, name in shown) or 'none'}."


def turn_one(turn):
    yield from await_mcp(turn, SERVER)
    head = yield call_tool(SERVER, "get_queue_head", {"queue": QUEUE})
    ticket, sku = head.find(TICKET_RE.pattern), head.find(SKU_RE.pattern)
    if not (head.ok and ticket and sku):
        yield final("The queue lookup did not return a ticket and part, so nothing was reserved.")
        return
    stock = yield call_tool(SERVER, "check_stock", {"part_sku": sku})
    bin_, zone = stock.find(BIN_RE.pattern), stock.find(ZONE_RE.pattern)
    if not (stock.ok and bin_ and zone):
        yield final("The stock lookup did not return a bin and zone, so nothing was reserved.")
        return
    rota = yield call_tool(SERVER, "get_oncall", {"zone": zone})
    tech = rota.find(TECH_RE.pattern)
    if not (rota.ok and tech):
        yield final("The on-call lookup did not return a technician, so nothing was reserved.")
        return
    held = yield call_tool(SERVER, "reserve_part", {"ticket": ticket, "part_sku": sku, "bin": bin_, "technician": tech})
    if held.ok and held.find(RSV_RE.pattern):
        yield final("The data is gathered and the reservation went through; nothing is written yet.")
    else:
        yield final("The data is gathered but the reservation could not be confirmed; nothing is written yet.")


def turn_two(turn):
    seen = scan(turn.history_text)          # step 0: the first request after the resume
    note = account(seen)
    ticket, tech, rsv = seen["queue"][0], seen["oncall"][0], seen["reservation"][0]
    sku, bin_, zone = seen["sku"][0], seen["stock"][0], seen["zone"][0]
    reread = []
    if ticket is None or sku is None or bin_ is None or tech is None:
        yield from await_mcp(turn, SERVER)
    if ticket is None or sku is None:
        head = yield call_tool(SERVER, "get_queue_head", {"queue": QUEUE})
        reread.append("queue")
        if head.ok:
            ticket, sku = ticket or head.find(TICKET_RE.pattern), sku or head.find(SKU_RE.pattern)
    if sku is not None and (bin_ is None or (tech is None and zone is None)):
        stock = yield call_tool(SERVER, "check_stock", {"part_sku": sku})
        reread.append("stock")
        if stock.ok:
            bin_, zone = bin_ or stock.find(BIN_RE.pattern), zone or stock.find(ZONE_RE.pattern)
    if tech is None and zone is not None:
        rota = yield call_tool(SERVER, "get_oncall", {"zone": zone})
        reread.append("oncall")
        if rota.ok:
            tech = rota.find(TECH_RE.pattern)
    dispatch = {"ticket": ticket, "part_sku": sku, "bin": bin_, "technician": tech, "reservation_id": rsv}
    yield write_file("dispatch.json", json.dumps(dispatch, indent=2) + "\n")
    lost = [k for k, v in dispatch.items() if v is None]
    done = "Wrote dispatch.json" + (f" (looked up again: {', '.join(reread)})" if reread else "")
    done += f"; null because not recoverable: {', '.join(lost)}." if lost else "."
    yield final(f"{done} {note}")


def policy(turn):
    if turn.index == 1:
        yield from turn_one(turn)
    else:
        yield from turn_two(turn)
