"""The ideal agent for O5-quarter-close-002: close the quarter from what it was shown.

Parent: pulls the three ledgers once, delegates December's check to one foreground helper and
takes December's figures only from the helper's answer (on Codex, whose children run
asynchronously, it waits with ``wait_agent`` when the spawn result holds no figures; a
notification in its history counts too), reads October and November with one ``cat`` and sums
them by the month of each posting's date, then writes close.json. It never runs the check itself.
Without a sub-agent tool, or without December's figures, it writes no close.json and says so.

Helper: takes the ledger from its delegated prompt (the last ``books.py check <ledger>`` it was
shown), runs the check once and replies with the ``checked …`` line exactly as printed.

Parent requests: pull, spawn, (wait,) cat, write, answer; helper: check, answer - so the turn's
total usage differs from the last response's and from the parent's requests alone.
"""

import json
import re

from tracetrial.policy import final, native_tool, shell, spawn_subagent, write_file

QUARTER = "2026-Q4"
OWN_MONTHS = ("2026-10", "2026-11")
CHECKED_MONTH = "2026-12"
CHECKED_RE = r"checked 2026-12: revenue=(\d+) costs=(\d+)"
LINE_RE = r"(checked 2026-12: revenue=\d+ costs=\d+[^\n]*)"
CHILD_PROMPT = ("You are the ledger-check helper. In the current folder run "
                "`python3 books.py check ledgers/2026-12.csv` exactly once and reply with the line "
                "`checked 2026-12: revenue=... costs=...` exactly as the command printed it.")
WAIT_TOOL = "multi_agent_v1/wait_agent"
AGENT_ID_RE = r"\"?(?:agent_id|agentId|id)\"?\s*[:=]\s*\"?([A-Za-z0-9_.:-]{6,})"
ROW_RE = r"(?m)^\s*([A-Za-z0-9_.-]+),(\d{4}-\d{2})-\d{2},(revenue|cost),(\d+)\s*$"


def december(*texts):
    """``{"revenue", "costs"}`` from the last checked line in the texts, or None."""
    found = None
    for text in texts:
        for m in re.finditer(CHECKED_RE, text or ""):
            found = {"revenue": int(m.group(1)), "costs": int(m.group(2))}
    return found


def month_sums(text):
    """``{month: {"revenue", "costs"}}`` summed over the ledger rows in ``text`` (month of the date)."""
    out = {}
    for _pid, month, account, amount in re.findall(ROW_RE, text or ""):
        sums = out.setdefault(month, {"revenue": 0, "costs": 0})
        sums["revenue" if account == "revenue" else "costs"] += int(amount)
    return out


def policy(turn):
    pulled = yield shell("python3 books.py pull")
    if "ledgers/2026-12.csv" not in (pulled.text or ""):
        yield final("The pull showed no ledgers, so close.json was not written.")
        return
    sub = yield spawn_subagent("Check the December ledger", CHILD_PROMPT)
    if sub.absent:
        yield final("This harness gives me no sub-agent tool, so December could not be checked by a helper; "
                    "close.json was not written.")
        return
    dec = december(sub.text, turn.history_text)
    if dec is None and WAIT_TOOL in turn.tool_names:
        agent_id = sub.find(AGENT_ID_RE)
        if agent_id:
            done = yield native_tool(WAIT_TOOL, {"targets": [agent_id], "timeout_ms": 120000})
            dec = december(sub.text, done.text, turn.history_text)
    if dec is None:
        yield final("The helper's answer held no checked December figures, so close.json was not written.")
        return
    shown = yield shell("cat ledgers/2026-10.csv ledgers/2026-11.csv")
    sums = month_sums(shown.text)
    if not all(m in sums for m in OWN_MONTHS):
        yield final("The October/November ledgers showed no postings, so close.json was not written.")
        return
    months = {m: sums[m] for m in OWN_MONTHS}
    months[CHECKED_MONTH] = dec
    revenue = sum(m["revenue"] for m in months.values())
    costs = sum(m["costs"] for m in months.values())
    close = {"quarter": QUARTER, "months": months, "revenue": revenue, "costs": costs, "net": revenue - costs}
    yield write_file("close.json", json.dumps(close, indent=2) + "\n")
    yield final(f"close.json written: revenue {revenue}, costs {costs}, net {revenue - costs} "
                f"(December as checked by the helper: revenue {dec['revenue']}, costs {dec['costs']}).")


def subagent_policy(turn):
    # The delegated prompt is the last thing the helper was shown before its first step.
    ledgers = re.findall(r"books\.py check (\S+\.csv)", f"{turn.history_text}\n{turn.user_text}")
    if not ledgers:
        yield final("My brief names no ledger to check.")
        return
    res = yield shell(f"python3 books.py check {ledgers[-1].strip('`')}")
    line = res.find(LINE_RE)
    yield final(line.strip() if line else "The check printed no checked line.")
