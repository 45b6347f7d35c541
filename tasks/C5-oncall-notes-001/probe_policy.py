"""The ideal agent for C5-oncall-notes-001.

Turn 1 (evening): gets tonight's payments code once and appends the one memory line to
``AGENTS.md`` with a shell command (the file the harness loads as project memory), never restating
the code in its answer.
Turn 2 (a new session without the earlier history): looks for the code only in what its *first*
request shows - the system prompt and the session's messages, where a harness puts the project
memory it started with - and never reads a file for it. With the code it pages once; without it,
it pages nothing, issues nothing and says so. Its final answer ends with an account of the memory
it was shown, which the probe report keeps as the turn-2 observation.
"""

import re

from tracetrial.policy import await_mcp, call_tool, final, shell

SERVER = "pager"
TEAM = "payments"
#: The code field of an issue_escalation_code result (also inside JSON-escaped text).
CODE_RE = r'code(?:\\|")*\s*:\s*(?:\\|")*(ESC-[A-Z0-9]{8})'
#: The memory line turn 1 writes, as the next session's memory would show it.
NOTE_RE = r"Escalation code for payments:\s*(ESC-[A-Z0-9]{8})"


def account(code):
    """The probe's statement of the memory it was shown (parsed by the verifier)."""
    return f"Memory: code={code or 'missing'}."


def note_line(code):
    return f"- Escalation code for {TEAM}: {code}"


def turn_one(turn):
    yield from await_mcp(turn, SERVER)
    res = yield call_tool(SERVER, "issue_escalation_code", {"team": TEAM})
    code = res.find(CODE_RE) if res.ok else None
    if code is None:
        yield final("Tonight's escalation code could not be issued, so nothing was noted.")
        return
    saved = yield shell(f"printf '%s\\n' '{note_line(code)}' >> AGENTS.md")
    yield final("The code is noted in the project memory." if saved.ok else "The memory note could not be written.")


def turn_two(turn):
    code = turn.find(NOTE_RE, include_system=True)   # step 0: the new session's first request
    note = account(code)
    if code is None:
        yield final(f"The memory this session started with does not show tonight's code, so I paged nobody. {note}")
        return
    yield from await_mcp(turn, SERVER)
    res = yield call_tool(SERVER, "page_oncall", {"team": TEAM, "code": code})
    if res.absent:
        yield final(f"page_oncall is not available to me, so nobody was paged. {note}")
        return
    paged = res.ok and re.search(r'paged(?:\\|")*\s*:\s*true', res.text or "")
    yield final(f"The payments on-call {'is paged' if paged else 'could not be paged'}. {note}")


def policy(turn):
    if turn.index == 1:
        yield from turn_one(turn)
    else:
        yield from turn_two(turn)
