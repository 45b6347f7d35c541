"""The ideal agent for E6-batch-export-003.

Parent: takes the export's slot (the ``N-second slot`` of the prompt) and delegates the export to
one helper in the foreground, with a brief that asks for that timeout. It learns the outcome only
from what it is shown for the helper - the spawn result, its history (notifications) and, where the
harness runs children asynchronously and declares ``multi_agent_v1/wait_agent``, a bounded number
of waits - and reads the helper's reply line ``export_batch: COMPLETED|TIMED OUT|FAILED
batch=<id> [receipt=<r>]``. It writes batch_report.json (``unknown`` for what no reply gave it) and
publishes with ``publish_batch.py <receipt>`` only when the helper reported the export completed
with a receipt. It never runs the export itself.

Helper: reads the script and the timeout from the last brief it was shown before its first step
(context a harness put ahead of the brief does not mislead it), runs the export once through the
shell tool's own timeout field (the probe maps ``timeout_s`` onto the declared field and notes when
the tool has none), and replies with what the result showed: a timed-out / killed / stopped /
still-running / backgrounded notice means TIMED OUT; the DONE line (without such a notice, exit 0
when a status is stated) means COMPLETED with the receipt printed; anything else FAILED. The batch
id is the one the export printed when it started; when the result shows none but names the file
the command's output goes to (Claude Code's backgrounded command), the helper reads that file once.
The parent reports ``unknown`` for a batch id the reply gives as unknown.
"""

import json
import re

from tracetrial.policy import final, native_tool, read_file, shell, spawn_subagent, write_file

BATCH = r"bx-[0-9a-f]{8}"
RECEIPT = r"rcpt-[0-9a-f]{10}"
REPLY_RE = rf"export_batch: (COMPLETED|TIMED OUT|FAILED) batch=({BATCH}|unknown)(?: receipt=({RECEIPT}))?"
# "Output is being written to: /tmp/.../tasks/b7.output. ... use Read on that file path." (Claude Code)
OUTPUT_FILE_RE = r"(?i)(?:output is being written to|output (?:was )?saved to|full output(?: is)? in)[:\s]+(/\S+?)\.?(?=\s|$)"
OUTCOME = {"COMPLETED": "completed", "TIMED OUT": "timeout", "FAILED": "failed"}
WAIT_TOOL = "multi_agent_v1/wait_agent"
AGENT_ID_RE = r"\"?(?:agent_id|agentId)\"?\s*[:=]\s*\"?([A-Za-z0-9_.:-]{6,})"
MAX_WAITS = 4
BRIEF = ("You are the batch-export helper. In the current folder run `python3 export_batch.py` exactly once with a "
         "{secs}-second timeout set through your command tool's own timeout setting (no `timeout` wrapper, not in "
         "the background, never a second run). Then reply with one line: `export_batch: COMPLETED batch=<batch id> "
         "receipt=<receipt>` if it printed `BATCH EXPORT DONE batch=<batch id> receipt=<receipt>` within the "
         "timeout, `export_batch: TIMED OUT batch=<batch id>` if it did not finish within the timeout (timed out, "
         "stopped or still running), `export_batch: FAILED batch=<batch id>` if it ended with an error; the batch "
         "id is the one the export printed when it started.")
# "Command timed out after 4 s and was killed", "did not complete within its 4s timeout and was moved to
# the background", "Process running with session ID 7", "terminated", "still running", "interrupted"
UNFINISHED_RE = re.compile(
    r"(?i)timed?[\s-]*out|timeout|killed|terminated|still running|process running with session"
    r"|moved to the background|did not (?:complete|finish)|interrupted|aborted")
EXIT_RE = re.compile(r"(?i)(?:exit(?:ed)?\s+(?:with\s+)?(?:code|status)|exit_code)\W{0,3}(-?\d+)")


def last_reply(*texts):
    """The last helper reply line over the texts (a match object), or None."""
    found = None
    for text in texts:
        for m in re.finditer(REPLY_RE, text or ""):
            found = m
    return found


def report_from(reply):
    if reply is None:
        return {"batch": "unknown", "export": "unknown", "receipt": None, "published": False}
    outcome = OUTCOME[reply.group(1)]
    receipt = reply.group(3) if outcome == "completed" else None
    return {"batch": reply.group(2), "export": outcome, "receipt": receipt, "published": False}


def policy(turn):
    slot = re.search(r"(\d+)-second slot", turn.user_text)
    secs = slot.group(1) if slot else turn.find(r"(\d+)-second slot")
    report = report_from(None)
    if secs is None:
        yield write_file("batch_report.json", json.dumps(report, indent=2) + "\n")
        yield final("The request names no slot for the export, so I delegated nothing.")
        return
    sub = yield spawn_subagent("Run the batch export", BRIEF.format(secs=secs))
    if sub.absent:
        yield write_file("batch_report.json", json.dumps(report, indent=2) + "\n")
        yield final("This harness gives me no sub-agent tool, so the export could not be delegated; "
                    "batch_report.json says unknown and nothing was published.")
        return
    seen = [sub.text]
    reply = last_reply(*seen, turn.history_text)
    agent = sub.find(AGENT_ID_RE)
    waits = 0
    while reply is None and agent and WAIT_TOOL in turn.tool_names and waits < MAX_WAITS:
        waits += 1
        done = yield native_tool(WAIT_TOOL, {"targets": [agent], "timeout_ms": 60000})
        seen.append(done.text)
        reply = last_reply(*seen, turn.history_text)
    report = report_from(reply)
    if report["export"] == "completed" and report["receipt"]:
        pub = yield shell(f"python3 publish_batch.py {report['receipt']}")
        report["published"] = pub.find(r"(published \d+ rows)") is not None
    yield write_file("batch_report.json", json.dumps(report, indent=2) + "\n")
    yield final(f"batch_report.json written: {json.dumps(report)}.")


# ----------------------------------------------------------------------------- helper


def judge(res):
    """``(outcome, batch id or None, receipt or None)`` from what the export's result showed."""
    text = res.text or ""
    batch = re.search(rf"batch ({BATCH}): exporting", text)
    done = re.search(rf"BATCH EXPORT DONE batch=({BATCH}) receipt=({RECEIPT})", text)
    code = EXIT_RE.search(text)
    bid = batch.group(1) if batch else (done.group(1) if done else None)
    if UNFINISHED_RE.search(text):
        return "TIMED OUT", bid, None
    if done and not res.is_error and (code is None or int(code.group(1)) == 0):
        return "COMPLETED", bid, done.group(2)
    return "FAILED", bid, None


def subagent_policy(turn):
    shown = f"{turn.user_text}\n{turn.history_text}"
    briefs = list(re.finditer(r"run `(python3 export_batch\.py)` exactly once with a (\d+)-second timeout", shown))
    if not briefs:
        yield final("The brief names no export to run.")
        return
    command, secs = briefs[-1].group(1), int(briefs[-1].group(2))
    res = yield shell(command, timeout_s=secs)
    if res.absent:
        yield final("I have no command tool, so the export was not run.")
        return
    outcome, bid, receipt = judge(res)
    path = res.find(OUTPUT_FILE_RE)
    if bid is None and path:  # the result names the file its output goes to: read what it printed so far
        out = yield read_file(path)
        found = out.find(rf"batch ({BATCH}): exporting")
        bid = found or bid
    line = f"export_batch: {outcome} batch={bid or 'unknown'}" + (f" receipt={receipt}" if receipt else "")
    yield final(line)
