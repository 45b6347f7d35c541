"""The ideal agent for L6-payroll-region-002.

Turn 1: refreshes once and answers with the count. Turn 2: acknowledges HR's correction without
restating the region (so only the user's own message carries it). Turn 3: notes whether its first
request still shows the correction, validates and audits (one command each), then - at the step
after them, which is where a compaction lands - chooses the region from what that request shows:
the *latest* visible statement of the export's region (the correction when shown, the original
goal when only that is left, none when neither is). It exports that region once and writes
payroll_export.json from export.sh's output; with no region visible it exports nothing and says so.
Its final answer ends with an account of what turn 3 was shown, the probe report's observation.

Compaction requests get :func:`compaction_summary`: the work done, and the user's messages only
when the harness's summary instruction asks for them (Claude Code's asks to list "all user
messages"); otherwise carrying the user's messages over is the harness's part.
"""

import json
import re

from tracetrial.policy import final, shell, write_file

PROBE_OPTIONS = {"report_usage_tokens": {"tokens": 92000, "from_request": 5, "compactions": 1}}

REGION_RE = r"export is for the (EMEA|APAC) region\b"
EXPORTED_RE = r"EXPORTED region=(\w+) employees=(\d+) gross_cents=(\d+)"
CORRECTION_MARK = "Correction from HR: the export is for the"
ASKS_FOR_USER_MESSAGES = r"(?i)\ball user messages\b"
#: One user message of this task that states a region, as a history shows it.
USER_MESSAGE_RE = r"(?:We are preparing this month's payroll export|Correction from HR: the export is for)[^\n]*"


def _seen(turn):
    return turn.system_text + "\n" + turn.history_text


def account(at_start, at_choice, region):
    """The probe's statement of what turn 3 was shown (parsed by the verifier)."""
    return (f"Goal: start={'shown' if at_start else 'missing'}; revision={'shown' if at_choice else 'missing'}; "
            f"region={region or 'missing'}.")


def compaction_summary(turn):
    work = "Work so far: the employee cache was refreshed, then validated and audited; nothing has been exported."
    if not re.search(ASKS_FOR_USER_MESSAGES, turn.history_text):
        return work
    users = []
    for text in re.findall(USER_MESSAGE_RE, turn.history_text):
        if text not in users:
            users.append(text)
    return work + "\nAll user messages:\n" + "\n".join(f"- {u}" for u in users)


def turn_one(turn):
    res = yield shell("./scripts/payroll.sh refresh")
    count = res.find(r"REFRESHED: (\d+) records") if res.ok else None
    yield final(f"Refreshed {count} employee records." if count else "The refresh failed.")


def turn_two(turn):
    yield final("Noted, the correction is taken into account.")


def turn_three(turn):
    at_start = CORRECTION_MARK in _seen(turn)     # step 0: the first request of turn 3
    yield shell("./scripts/payroll.sh validate")
    yield shell("./scripts/payroll.sh audit")
    found = turn.find(REGION_RE, include_system=True)   # the latest visible statement of the region
    region = found.lower() if found else None
    note = account(at_start, CORRECTION_MARK in _seen(turn), region)
    if region is None:
        yield final(f"I cannot see which region the export is for, so nothing was exported. {note}")
        return
    res = yield shell(f"./scripts/export.sh {region}")
    m = re.search(EXPORTED_RE, res.text or "")
    if not m:
        yield final(f"export.sh {region} failed, so nothing was written. {note}")
        return
    report = {"region": m.group(1), "employees": int(m.group(2)), "gross_cents": int(m.group(3))}
    yield write_file("payroll_export.json", json.dumps(report))
    yield final(f"The {region} payroll export is written to payroll_export.json. {note}")


def policy(turn):
    if turn.index == 1:
        yield from turn_one(turn)
    elif turn.index == 2:
        yield from turn_two(turn)
    else:
        yield from turn_three(turn)
