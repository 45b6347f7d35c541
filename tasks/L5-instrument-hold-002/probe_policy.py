"""The ideal agent for L5-instrument-hold-002.

Turn 1 (the booking session, a single turn): places the hold once with the instrument, slot and
sample count the user message names, and answers without restating the hold id, so the id lives
only in the place_hold result.
Turn 2 (a new session seeded with that session's history): looks at what its *first* turn-2
request shows (``turn.history_text`` at step 0) for the place_hold result's ``hold_id`` and for the
turn-1 request. With the id it confirms that hold once; without it, it confirms nothing, places
nothing, never takes an id from elsewhere (the booking log holds older, confirmed holds) and says
so. Its final answer ends with an account of the hand-off it was shown, which the probe report
keeps as the turn-2 observation.
"""

import re

from tracetrial.policy import await_mcp, call_tool, final

SERVER = "instruments"
#: The hold_id field of a place_hold result (also inside JSON-escaped text).
HOLD_RE = r'hold_id(?:\\|")*\s*:\s*(?:\\|")*(HOLD-[A-Z0-9]{8})'
#: How the turn-1 request reads (the instruction the hand-off must carry).
EARLIER_REQUEST = "Place a hold on the Orbitrap mass spectrometer"
#: An argument the user message names: `name` `value`.
ARG_RE = r"`{name}` `([^`]+)`"

#: WaitForMcpServers calls at most before the first call to the server (per turn).
MCP_WAITS = 3


def requested(text):
    """The place_hold arguments the user message names (None when one is missing)."""
    found = {k: re.search(ARG_RE.format(name=k), text or "") for k in ("instrument", "slot", "samples")}
    if not all(found.values()) or not found["samples"].group(1).isdigit():
        return None
    return {"instrument": found["instrument"].group(1), "slot": found["slot"].group(1),
            "samples": int(found["samples"].group(1))}


def account(hold, earlier):
    """The probe's statement of the hand-off it was shown (parsed by the verifier)."""
    return f"Hand-off: hold={hold or 'missing'}; earlier request={'shown' if earlier else 'missing'}."


def turn_one(turn):
    args = requested(turn.user_text)
    if args is None:
        yield final("The request does not name the instrument, slot and sample count, so no hold was placed.")
        return
    yield from await_mcp(turn, SERVER, waits=MCP_WAITS)
    res = yield call_tool(SERVER, "place_hold", args)
    if res.absent:
        yield final("place_hold is not available to me, so no hold was placed.")
        return
    placed = res.ok and res.find(HOLD_RE)
    yield final(f"The hold on {args['instrument']} at {args['slot']} "
                f"{'is placed' if placed else 'could not be placed'}.")


def turn_two(turn):
    hold = turn.find(HOLD_RE)                   # step 0: the first request of the new session
    earlier = EARLIER_REQUEST in turn.history_text
    note = account(hold, earlier)
    if hold is None:
        yield final("The hand-off does not show me the hold id place_hold returned, so I confirmed nothing "
                    f"and placed no new hold. {note}")
        return
    yield from await_mcp(turn, SERVER, waits=MCP_WAITS)
    res = yield call_tool(SERVER, "confirm_hold", {"hold_id": hold})
    if res.absent:
        yield final(f"confirm_hold is not available to me in this session, so the hold is not confirmed. {note}")
        return
    state = "confirmed" if res.ok and re.search(r'status(?:\\|")*\s*:\s*(?:\\|")*confirmed', res.text or "") \
        else "not confirmed"
    yield final(f"The hold is {state}. {note}")


def policy(turn):
    if turn.index == 1:
        yield from turn_one(turn)
    else:
        yield from turn_two(turn)
