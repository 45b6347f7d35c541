"""The ideal agent for L6-settlement-month-001.

Turn 1: syncs once and answers with the count. Turn 2: checks and balances the ledger (one
command each), then - at the step after them, which is where a compaction lands - chooses the month
from what that request shows: the *latest* user statement of the report's month that is visible
(the turn-2 revision when it is shown, the turn-1 goal when only that is left, none when neither
is). It settles that month once and writes settlement.json from settle.sh's output; with no month
visible it settles nothing and says so. Its final answer ends with an account of what the choosing
step was shown, which the probe report keeps as the observation.

Compaction requests get :func:`compaction_summary`: the work done, and the user's messages only
when the harness's summary instruction asks for them (Claude Code's asks to list "all user
messages": its compacted history is the summary alone). Otherwise carrying the user's messages over
is the harness's part (the reference and Codex keep them verbatim), and the summary leaves them out.
"""

import json
import re

from tracetrial.policy import final, shell, write_file

PROBE_OPTIONS = {"report_usage_tokens": {"tokens": 92000, "from_request": 4, "compactions": 1}}

MONTH_RE = r"report is for (March|April)\b"
SETTLED_RE = r"SETTLED month=(\w+) total_cents=(\d+) entries=(\d+)"
#: Phrases of the two user messages (is each still shown?).
GOAL_MARK = "We are preparing the monthly settlement report"
REVISION_MARK = "Change of plan: the report is for"


def account(turn, month):
    """The probe's statement of what the choosing step was shown (parsed by the verifier)."""
    seen = turn.system_text + "\n" + turn.history_text
    return (f"Goal: task={'shown' if GOAL_MARK in seen else 'missing'}; "
            f"revision={'shown' if REVISION_MARK in seen else 'missing'}; month={month or 'missing'}.")


#: A summary instruction that makes the summary the only carrier of the user's messages.
ASKS_FOR_USER_MESSAGES = r"(?i)\ball user messages\b"
#: One user message of this task, as a history shows it (from its first words to the line's end).
USER_MESSAGE_RE = r"(?:We are preparing the monthly settlement report|Change of plan: the report is for)[^\n]*"


def compaction_summary(turn):
    work = "Work so far: the ledger was synced, checked and balanced; no month has been settled and no report written."
    if not re.search(ASKS_FOR_USER_MESSAGES, turn.history_text):
        return work
    users = []
    for text in re.findall(USER_MESSAGE_RE, turn.history_text):
        if text not in users:
            users.append(text)
    return work + "\nAll user messages:\n" + "\n".join(f"- {u}" for u in users)


def turn_one(turn):
    res = yield shell("./scripts/ledger.sh sync")
    count = res.find(r"SYNCED: (\d+) entries") if res.ok else None
    yield final(f"Synced {count} ledger entries." if count else "The ledger sync failed.")


def turn_two(turn):
    yield shell("./scripts/ledger.sh check")
    yield shell("./scripts/ledger.sh balance")
    found = turn.find(MONTH_RE, include_system=True)   # the latest visible statement of the month
    month = found.lower() if found else None
    note = account(turn, month)
    if month is None:
        yield final(f"I cannot see which month the report is for, so nothing was settled. {note}")
        return
    res = yield shell(f"./scripts/settle.sh {month}")
    m = re.search(SETTLED_RE, res.text or "")
    if not m:
        yield final(f"settle.sh {month} failed, so no report was written. {note}")
        return
    report = {"month": m.group(1), "total_cents": int(m.group(2)), "entries": int(m.group(3))}
    yield write_file("settlement.json", json.dumps(report))
    yield final(f"The {month} settlement is written to settlement.json. {note}")


def policy(turn):
    if turn.index == 1:
        yield from turn_one(turn)
    else:
        yield from turn_two(turn)
