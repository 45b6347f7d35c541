"""The ideal agent for L5-shift-handoff-001.

Turn 1 (night shift): lists the open incidents once and answers with the counts only.
Turn 2 (same session, resumed): takes the severity-1/2 incident ids from what it is shown (the
turn-1 result; it lists again only when the history no longer shows them), opens the night batch
once and answers without restating the batch id, so the id lives only in the open_batch result.
Turn 3 (day shift, a new session seeded with the night's history): looks at what its *first*
turn-3 request shows (``turn.history_text`` at step 0) for the open_batch result's ``batch_id``
and for the night's turn-2 request. With the id it closes that batch once; without it, it closes
nothing, opens nothing, never takes an id from elsewhere (the shift log holds older, closed
batches) and says so. Its final answer ends with an account of the hand-off it was shown, which
the probe report keeps as the turn-3 observation.
"""

import re

from tracetrial.policy import await_mcp, call_tool, final

SERVER = "batches"
#: An incident of a list_incidents result: its id, then its severity (also inside JSON-escaped text).
INCIDENT_RE = r'id(?:\\|")*\s*:\s*(?:\\|")*(INC-\d{5})(?:\\|")*\s*,\s*(?:\\|")*severity(?:\\|")*\s*:\s*(\d)'
#: The batch_id field of an open_batch result.
BATCH_RE = r'batch_id(?:\\|")*\s*:\s*(?:\\|")*(BATCH-[A-Z0-9]{8})'
#: How the night's turn-2 request reads (the instruction the hand-off must carry).
NIGHT_REQUEST = "Open the night remediation batch now"


def urgent(pairs):
    """The ids of severity 1 or 2, first occurrence order, no repeats."""
    out = []
    for inc, sev in pairs:
        if sev in ("1", "2") and inc not in out:
            out.append(inc)
    return out


def account(batch, night):
    """The probe's statement of the hand-off it was shown (parsed by the verifier)."""
    return f"Hand-off: batch={batch or 'missing'}; night request={'shown' if night else 'missing'}."


def turn_one(turn):
    yield from await_mcp(turn, SERVER)
    res = yield call_tool(SERVER, "list_incidents", {})
    pairs = re.findall(INCIDENT_RE, res.text or "")
    if not (res.ok and pairs):
        yield final("The incident list could not be read.")
        return
    yield final(f"{len(pairs)} incidents are open, {len(urgent(pairs))} of them at severity 1 or 2.")


def turn_two(turn):
    ids = urgent(re.findall(INCIDENT_RE, turn.history_text))
    yield from await_mcp(turn, SERVER)
    if not ids:
        res = yield call_tool(SERVER, "list_incidents", {})
        ids = urgent(re.findall(INCIDENT_RE, res.text or "")) if res.ok else []
    if not ids:
        yield final("No severity 1 or 2 incident is visible to me, so no batch was opened.")
        return
    res = yield call_tool(SERVER, "open_batch", {"shift": "night", "incidents": ids})
    if res.absent:
        yield final("open_batch is not available to me in this session, so no batch was opened.")
        return
    opened = res.ok and res.find(BATCH_RE)
    yield final(f"The night batch {'is open' if opened else 'could not be opened'} ({len(ids)} incidents).")


def turn_three(turn):
    batch = turn.find(BATCH_RE)                 # step 0: the first request of the new session
    night = NIGHT_REQUEST in turn.history_text
    note = account(batch, night)
    if batch is None:
        yield final("The hand-off does not show me the batch id open_batch returned, so I closed nothing "
                    f"and opened nothing. {note}")
        return
    yield from await_mcp(turn, SERVER)
    res = yield call_tool(SERVER, "close_batch", {"batch_id": batch})
    if res.absent:
        yield final(f"close_batch is not available to me in this session, so the batch is still open. {note}")
        return
    state = "closed" if res.ok and re.search(r'status(?:\\|")*\s*:\s*(?:\\|")*closed', res.text or "") else "not closed"
    yield final(f"The night batch is {state}. {note}")


def policy(turn):
    if turn.index == 1:
        yield from turn_one(turn)
    elif turn.index == 2:
        yield from turn_two(turn)
    else:
        yield from turn_three(turn)
