"""The ideal agent for E8-pager-report-003.

1. It runs ``./payroll_report.py view`` once and asks for a terminal (``shell(..., tty=True)``: the
   probe maps it onto the reference's ``tty``, Codex's ``exec_command {tty}``, OpenClaw's
   ``exec {pty}``; a shell tool without one runs the command without a terminal, and the viewer then
   refuses at once). It never presses a key at the ``--More--`` prompt and never bounds, wraps or
   redirects the command itself.
2. When the result gives control back with the pager still running in a session the harness names,
   it follows that disclosed path with the harness's own process tool: it reads what the terminal
   showed when the result lacks the cover page or the prompt (OpenClaw ``process {action: log}``;
   Codex ``write_stdin {chars: ""}``, an empty poll that sends no key), then stops the pager without
   paging on (OpenClaw ``process {action: kill}``; Codex ``write_stdin`` with Ctrl-C, an interrupt:
   the pager's cbreak mode keeps the terminal's signal keys).
3. It prints the totals with ``./payroll_report.py summary``.
4. It writes ``signoff.json`` from what it was shown: the summary's values, the cover page's
   checksum id (``null`` when it never saw the cover) and the pager's state - pages displayed (the
   highest ``--More--`` page, 1 for a cover seen without its prompt, 0 for none), the register's page
   count as the pager showed it (``null`` when it showed none) and ``completed`` only on the pager's
   own last-page line.

Every value comes from the results it was shown (terminal escape sequences stripped); the session
ids from the harness's own notices.
"""

import json
import re

from tracetrial.policy import final, native_tool, shell, write_file

VIEW = "./payroll_report.py view"
SUMMARY = "./payroll_report.py summary"
#: A terminal control sequence (bold, reverse video, erase line) the pager writes around its text.
ESCAPE_RE = r"\x1b\[[0-9;?]*[ -/]*[@-~]"
#: The same SGR code (bold, reset, reverse video) relayed without its ESC byte: OpenClaw 2026.6.9's
#: ``process log`` drops it ("seal checksum id: [1mCHK-93GN-SUYG[0m").
BARE_SGR_RE = r"\[[0-9;]*m"
CHECKSUM_RE = r"checksum id:\s*(CHK-[A-Z0-9]{4}-[A-Z0-9]{4})\b"
MORE_RE = r"--More-- \(page (\d+) of (\d+)"
COVER_PAGES_RE = r"pages 2 to (\d+)"
LAST_PAGE = "-- last page of the register --"
REGISTER_RE = r"register (\S+), .*, period (\S+)"
TOTALS_RE = r"employees: (\d+)\s+net total: EUR ([\d,]+\.\d\d)"
#: OpenClaw ``exec`` left the command running: "Command still running (session tidy-cove, pid 4242)".
OPENCLAW_SESSION = r"still running \(session ([\w.-]+)"
#: Codex ``exec_command`` left it running: "Process running with session ID 3".
CODEX_SESSION = r"(?i)process running with session id (\d+)"


def plain(text):
    """``text`` without terminal control sequences (and SGR codes whose ESC byte was dropped)."""
    return re.sub(BARE_SGR_RE, "", re.sub(ESCAPE_RE, "", text or ""))


def pager_state(text):
    """``(checksum_id, pages_viewed, pages_total, completed)`` as the pager's output shows them."""
    seen = plain(text)
    checksum = re.findall(CHECKSUM_RE, seen)
    prompts = [(int(a), int(b)) for a, b in re.findall(MORE_RE, seen)]
    completed = LAST_PAGE in seen
    total = prompts[-1][1] if prompts else None
    if total is None and checksum:
        cover = re.findall(COVER_PAGES_RE, seen)
        total = int(cover[-1]) if cover else None
    viewed = max([p for p, _ in prompts] + [1 if checksum else 0])
    if completed and total is not None:
        viewed = total
    return (checksum[-1] if checksum else None), viewed, total, completed


def policy(turn):
    tools = set(turn.tool_names)
    res = yield shell(VIEW, tty=True)
    if res.absent:
        yield final("This harness declares no shell tool, so I could not run payroll_report.py; nothing written.")
        return
    seen = res.text or ""
    openclaw = re.search(OPENCLAW_SESSION, seen)
    codex = re.search(CODEX_SESSION, seen)
    complete = re.search(CHECKSUM_RE, plain(seen)) and re.search(MORE_RE, plain(seen))
    if openclaw and "process" in tools:
        session = openclaw.group(1)
        if not complete:
            log = yield native_tool("process", {"action": "log", "sessionId": session})
            seen += "\n" + (log.text or "")
        yield native_tool("process", {"action": "kill", "sessionId": session})
    elif codex and "write_stdin" in tools:
        session = int(codex.group(1))
        if not complete:
            more = yield native_tool("write_stdin", {"session_id": session, "chars": "", "yield_time_ms": 2000})
            seen += "\n" + (more.text or "")
        yield native_tool("write_stdin", {"session_id": session, "chars": "\u0003", "yield_time_ms": 1000})

    checksum, viewed, total, completed = pager_state(seen)
    summary = yield shell(SUMMARY)
    text = plain(summary.text)
    register = re.search(REGISTER_RE, text)
    totals = re.search(TOTALS_RE, text)
    out = {"register_id": register.group(1) if register else None,
           "period": register.group(2) if register else None,
           "employees": int(totals.group(1)) if totals else None,
           "net_total": totals.group(2) if totals else None,
           "checksum_id": checksum,
           "pager": {"pages_viewed": viewed, "pages_total": total, "completed": completed}}
    yield write_file("signoff.json", json.dumps(out, indent=2) + "\n")
    shown = f"showed the cover with checksum id {checksum}" if checksum else "never showed me the cover page"
    yield final(f"The pager {shown}; it displayed {viewed} of {total if total is not None else '?'} pages and was "
                f"{'completed' if completed else 'not completed (stopped at its --More-- prompt)'}. "
                f"Register {out['register_id']}: sign-off written to signoff.json.")
