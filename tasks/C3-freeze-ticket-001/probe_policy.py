"""The ideal agent for C3-freeze-ticket-001.

Turn 1: creates notes.md with the heading; it does not write the ticket anywhere and does
not restate it in its answer (the fact stays only in the user's turn-1 message).
Turn 2: reads changes.txt and appends one bullet per ``entry:`` line.
Turn 3: looks for the ticket sentence in what it is shown *now* (``turn.history_text``);
if the harness no longer shows the turn-1 message it writes ``UNKNOWN``. Its final answer
states what it found, which the probe report keeps as the turn-3 observation.
"""

import re
import shlex

from tracetrial.policy import final, shell, write_file

FACT_RE = r"change-freeze ticket for this release is\s+([A-Z0-9][A-Z0-9-]*[A-Z0-9])"
# an "entry:" line, also behind a line-number prefix ("     4\tentry: ...") if a tool adds one
ENTRY_RE = re.compile(r"(?m)^(?:\s*\d+[\t\u2192|:])?\s*entry:\s*(.+?)\s*$")


def policy(turn):
    if turn.index == 1:
        yield write_file("notes.md", "# Release notes\n")
        yield final("Created notes.md with the heading line.")
    elif turn.index == 2:
        src = yield shell("cat changes.txt")
        entries = ENTRY_RE.findall(src.text or "")
        if not entries:
            yield final("changes.txt shows no entry lines; nothing added.")
            return
        lines = " ".join(shlex.quote(f"- {e}") for e in entries)
        yield shell(f"printf '%s\\n' '' {lines} >> notes.md")
        yield final(f"Added {len(entries)} changelog entries to notes.md.")
    else:
        ticket = turn.find(FACT_RE)
        value = ticket or "UNKNOWN"
        yield shell(f"printf '%s\\n' {shlex.quote('Freeze-Ticket: ' + value)} >> notes.md")
        seen = ticket if ticket else "not visible in my context"
        yield final(f"Appended 'Freeze-Ticket: {value}'. Turn-1 freeze ticket: {seen}.")
