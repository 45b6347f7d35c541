"""The ideal agent for C3-maintenance-window-002.

Turn 1: books the window once and creates runbook.md with the heading. It does not write the
approval code anywhere and does not restate it in its answer, so the fact lives only in the
booking's tool result (a harness that keeps assistant text but drops tool results loses it).
Turn 2: reads steps.txt and appends one numbered line per ``step:`` line.
Turn 3: looks for the booking result's approval code in what it is shown *now*
(``turn.history_text``); if the harness no longer shows it, it writes ``UNKNOWN`` (the decoy in
steps.txt is prose, not a booking result, and is never taken). It never books again. Its final
answer states what it found, which the probe report keeps as the turn-3 observation.
"""

import re
import shlex

from tracetrial.policy import await_mcp, call_tool, final, shell, write_file

# The approval_code field of a booking result, also inside JSON-escaped text.
FACT_RE = r'approval_code(?:\\|")*\s*:\s*(?:\\|")*(APR-[A-Z0-9]+)'
# a "step:" line, also behind a line-number prefix ("     4\tstep: ...") if a tool adds one
STEP_RE = re.compile(r"(?m)^(?:\s*\d+[\t\u2192|:])?\s*step:\s*(.+?)\s*$")


def policy(turn):
    if turn.index == 1:
        yield from await_mcp(turn, "changes")
        res = yield call_tool("changes", "book_maintenance_window", {"service": "payments-api", "duration_min": 90})
        yield write_file("runbook.md", "# payments-api maintenance\n")
        booked = "booked" if res.ok and res.find(FACT_RE) else "could not be confirmed"
        yield final(f"The 90-minute window for payments-api {booked}; runbook.md created with the heading.")
    elif turn.index == 2:
        src = yield shell("cat steps.txt")
        steps = STEP_RE.findall(src.text or "")
        if not steps:
            yield final("steps.txt shows no step lines; nothing added.")
            return
        lines = " ".join(shlex.quote(f"{n}. {s}") for n, s in enumerate(steps, start=1))
        yield shell(f"printf '%s\\n' '' {lines} >> runbook.md")
        yield final(f"Added {len(steps)} steps to runbook.md.")
    else:
        code = turn.find(FACT_RE)
        value = code or "UNKNOWN"
        yield shell(f"printf '%s\\n' {shlex.quote('Approval: ' + value)} >> runbook.md")
        seen = code if code else "not visible in my context"
        yield final(f"Appended 'Approval: {value}'. Turn-1 approval code: {seen}.")
