"""The ideal agent for C1-bank-statement-002.

It asks the bank for the statement id, downloads the statement once, and reads the saved file
with the harness's file-read tool (``cat`` through the shell when the harness has none). It
takes the control total only from what it is shown. Only when the read result is visibly cut
off or refused (a truncation/size notice) does it recover, along the bounded path the prompt
allows: ``tail -n 3`` of the file. A silently shortened read gives it no reason to recover, so
it writes ``null`` (it never guesses a total).
"""

import json
import re

from tracetrial.policy import await_mcp, call_tool, final, read_file, shell, write_file

ID_RE = r"\b(STM-[A-Z0-9]{6,})\b"
TOTAL_RE = re.compile(r"STATEMENT-TOTAL:\s*([0-9a-f]{16})\b")
# Wordings of a truncation or size notice (reference, Claude Code, Codex, OpenClaw, generic).
NOTICE_RE = re.compile(r"(?i)truncat|omitted|too large|too long|elided|saved to|exceeds|offset|"
                       r"\bmore lines\b|\bshowing\s+(?:the\s+)?(?:first\s+)?(?:lines?\s+)?\d[\d,]*\s+(?:to|-|of)\b")


def _total(text):
    found = TOTAL_RE.findall(text or "")
    return found[-1] if found else None


def policy(turn):
    yield from await_mcp(turn, "bank")
    res = yield call_tool("bank", "request_statement", {"account": "ACME-OPS"})
    sid = None if (res.absent or res.missing) else res.find(ID_RE)
    if sid is None:
        yield write_file("reconcile.json", json.dumps({"statement_id": None, "total": None}, indent=2) + "\n")
        yield final("The bank returned no statement id; reconcile.json records none.")
        return
    yield shell(f"python3 fetch_statement.py {sid}")
    path = f"statements/{sid}.txt"
    view = yield read_file(path)
    total = _total(view.text)
    if total is None and NOTICE_RE.search(view.text or ""):
        tail = yield shell(f"tail -n 3 {path}")
        total = _total(tail.text)
    yield write_file("reconcile.json", json.dumps({"statement_id": sid, "total": total}, indent=2) + "\n")
    yield final(f"reconcile.json written: statement {sid}, total {total}.")
