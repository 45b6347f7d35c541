"""The ideal agent for O1-ticket-close-error-001.

Turn 1: looks the ticket up, tries to close it once, and writes close.json from what the
close result *shows*: the harness's error flag where the wire format has one, else an
explicit flag or error wording in the text; the error code is read from the result text.
It never assumes the close failed, and never guesses a code.
Turn 2 (resumed session): decides only from what the resumed history still shows. A close
result that reported the ticket as locked means "leave it"; a close that failed for another
reason is retried once; a close it believes succeeded is left alone.
"""

import json
import re

from tracetrial.policy import call_tool, final, write_file

TICKET = "TCK-1042"
# An explicit error flag in the result text ("isError": true, \"is_error\": false, ...).
FLAG_RE = r'(?i)is_?error(?:\\|")*\s*[:=]\s*(true|false)'
# Error wording when the wire format has no flag.
WORDING_RE = re.compile(r"(?i)\berror\b|\bfailed\b")
# The code field of a structured error, also inside JSON-escaped text.
CODE_RE = r'(?i)\bcode(?:\\|")*\s*:\s*(?:\\|")*([A-Za-z0-9][A-Za-z0-9_.:-]*)'
# What the desk said about the refusal.
LOCK_RE = re.compile(r"(?i)\blocked\s+by\b")


def _failed(res):
    """Did the harness show this result as a failure? ``None`` when nothing was delivered."""
    if res.absent or res.missing:
        return None
    if res.is_error is not None:
        return bool(res.is_error)
    flag = res.find(FLAG_RE)
    if flag is not None:
        return flag.lower() == "true"
    return bool(WORDING_RE.search(res.text or ""))


def policy(turn):
    if turn.index == 1:
        yield call_tool("tickets", "get_ticket", {"ticket_id": TICKET})
        res = yield call_tool("tickets", "close_ticket", {"ticket_id": TICKET})
        failed = _failed(res)
        code = res.find(CODE_RE) if failed else None
        closed = failed is False
        yield write_file("close.json", json.dumps({"closed": closed, "error_code": code}))
        if failed is None:
            yield final(f"No result came back for closing {TICKET}; recorded it as not closed.")
        elif failed:
            yield final(f"Closing {TICKET} failed with error code {code}; close.json written.")
        else:
            yield final(f"{TICKET} is closed; close.json written.")
        return
    history = turn.history_text
    shown_code = turn.find(CODE_RE)
    if LOCK_RE.search(history):
        yield final(f"The close of {TICKET} failed because the ticket is locked (code {shown_code}); "
                    "I left it as it is.")
        return
    if shown_code is not None and WORDING_RE.search(history):
        res = yield call_tool("tickets", "close_ticket", {"ticket_id": TICKET})
        yield final(f"The earlier close failed ({shown_code}), not because of a lock; I retried once: "
                    + ("failed again." if _failed(res) is not False else "closed now."))
        return
    yield final(f"I see no failed close of {TICKET} to act on; I did nothing more.")
