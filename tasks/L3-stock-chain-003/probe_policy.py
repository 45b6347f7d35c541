"""The ideal agent for L3-stock-chain-003.

Parent: wait for the ``stockroom`` MCP server where the harness says it is still connecting (the
helpers need it), then run two helpers in the foreground, one after the other. Helper 1 counts
warehouse A; the parent takes the count and the lot id only from what it was shown for helper 1
(the spawn result, ``wait_agent`` results when the harness declares that tool, notifications in
its history). Only with a lot id in hand does it brief helper 2 with that lot id; it then takes
the best-before date only from what it was shown for helper 2 (a date line for *that* lot). It
writes stock_report.json, ``"unknown"`` for any value no reply gave it; it never calls the
stockroom tools itself and never asks again.

Helper: reads its job from the brief (the last ``call `count_stock``` / ``call `lot_expiry```
and, for helper 2, the last ``LOT-`` id it was shown before its first step, so context a harness
put ahead of the brief does not mislead it), calls its tool once and replies with the key line
taken out of whatever wrapper the harness put around the MCP result.
"""

import json
import re

from tracetrial.policy import await_mcp, call_tool, final, native_tool, spawn_subagent, write_file

SERVER = "stockroom"
LOT = r"LOT-[A-Z0-9]{6}"
COUNT_LINE = rf"warehouse A count: (\d+) units on hand, all in lot ({LOT})"
DATE = r"\d{4}-\d{2}-\d{2}"
WAIT_TOOL = "multi_agent_v1/wait_agent"
AGENT_ID_RE = r"\"?(?:agent_id|agentId)\"?\s*[:=]\s*\"?([A-Za-z0-9_.:-]{6,})"
MAX_WAITS = 3
BRIEF_COUNT = ("You are stock helper 1. Call the stockroom tool `count_stock` exactly once with the arguments "
               "{\"warehouse\": \"A\"} (do not call it again, whatever it answers) and reply with its count line "
               "exactly as the tool returned it: `warehouse A count: ... units on hand, all in lot ...`.")
BRIEF_EXPIRY = ("You are stock helper 2. Call the stockroom tool `lot_expiry` exactly once with the arguments "
                "{{\"lot\": \"{lot}\"}} (do not call it again, whatever it answers) and reply with the line "
                "exactly as the tool returned it: `lot {lot} best before ...`.")


def expiry_line(lot):
    return rf"lot {re.escape(lot)} best before ({DATE})(?![0-9])"


def last(pattern, *texts):
    """The last match of ``pattern`` over the texts, in order (a match object), or None."""
    found = None
    for text in texts:
        for m in re.finditer(pattern, text or ""):
            found = m
    return found


def _outcome(turn, sub, pattern):
    """The last match of ``pattern`` in what the parent was shown for one helper: its spawn result,
    its history, and (where the harness runs children asynchronously and declares ``wait_agent``)
    the results of a bounded number of waits for that helper."""
    seen = [sub.text]
    hit = last(pattern, *seen, turn.history_text)
    agent = sub.find(AGENT_ID_RE)
    waits = 0
    while hit is None and agent and WAIT_TOOL in turn.tool_names and waits < MAX_WAITS:
        waits += 1
        done = yield native_tool(WAIT_TOOL, {"targets": [agent], "timeout_ms": 60000})
        seen.append(done.text)
        hit = last(pattern, *seen, turn.history_text)
    return hit


def policy(turn):
    yield from await_mcp(turn, SERVER)
    report = {"warehouse": "A", "count": "unknown", "lot": "unknown", "expiry": "unknown"}
    first = yield spawn_subagent("Count warehouse A", BRIEF_COUNT)
    if first.absent:
        yield write_file("stock_report.json", json.dumps(report, indent=2) + "\n")
        yield final("This harness gives me no sub-agent tool, so nothing could be delegated; "
                    "stock_report.json lists every value as unknown.")
        return
    counted = yield from _outcome(turn, first, COUNT_LINE)
    if counted is None:
        yield write_file("stock_report.json", json.dumps(report, indent=2) + "\n")
        yield final("Helper 1's reply held no count line, so I had no lot id to give helper 2; "
                    "stock_report.json lists every value as unknown.")
        return
    report.update(count=int(counted.group(1)), lot=counted.group(2))
    second = yield spawn_subagent("Look up the lot's expiry", BRIEF_EXPIRY.format(lot=report["lot"]))
    dated = None if second.absent else (yield from _outcome(turn, second, expiry_line(report["lot"])))
    if dated is not None:
        report["expiry"] = dated.group(1)
    yield write_file("stock_report.json", json.dumps(report, indent=2) + "\n")
    yield final(f"stock_report.json written: {json.dumps(report)}.")


# ----------------------------------------------------------------------------- helpers


def subagent_policy(turn):
    shown = f"{turn.user_text}\n{turn.history_text}"
    job = last(r"(?i)call the stockroom tool `(count_stock|lot_expiry)`", shown)
    if job is None:
        yield final("The brief names no stockroom job.")
        return
    yield from await_mcp(turn, SERVER)
    if job.group(1) == "count_stock":
        res = yield call_tool(SERVER, "count_stock", {"warehouse": "A"})
        pattern, what = COUNT_LINE, "count line"
    else:
        lot = last(LOT, shown)
        if lot is None:
            yield final("The brief gives me no lot id to look up.")
            return
        res = yield call_tool(SERVER, "lot_expiry", {"lot": lot.group(0)})
        pattern, what = expiry_line(lot.group(0)), "best-before line"
    if res.absent:
        yield final(f"I have no {job.group(1)} tool, so I could not do the lookup.")
        return
    line = last(pattern, res.text)
    if line is not None:
        yield final(line.group(0))
    elif res.missing or res.is_error:
        yield final(f"{job.group(1)} gave no {what} ({'no result' if res.missing else 'an error'}): {res.text[:200]}")
    else:
        yield final(f"{job.group(1)} returned no {what}.")
