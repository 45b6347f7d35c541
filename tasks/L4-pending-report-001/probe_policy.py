"""The ideal agent for L4-pending-report-001.

Parent: delegate the slow job to a background helper, then write report.json from what the
spawn result says - "pending" unless the harness says the helper finished (then "done" with
the value from the helper's reply, or null if the reply has none). When the harness comes back
later with a notification that the helper finished, it updates report.json the same way.
It never runs the job, never reads job_result.json, never waits on purpose.

Helper: run the job once and reply with the value it printed.
"""

import json
import re

from tracetrial.policy import final, shell, spawn_subagent, write_file

CHILD_PROMPT = (
    "You are the reconciliation helper. In the current folder run `python3 slow_job.py` exactly once "
    "(it takes about 20 seconds; let it run to its end). Reply with the line "
    "`reconciliation value: <value>` exactly as the job printed it.")

# Wordings harnesses use to say a sub-agent has finished: "<status>completed</status>",
# "(status: completed)", '"status": "completed"', Codex wait results '{"completed": ...}'.
DONE_RE = re.compile(r"(?i)\bstatus\W{0,4}(?:completed|finished|done|succeeded)\b|\"completed\"\s*:")
VALUE_RE = r"reconciliation value:\s*(RECON-[0-9a-f]+)"


def _state(text):
    """(job, value) from a text the harness delivered about the helper."""
    value = None
    for value in re.findall(VALUE_RE, text or ""):
        pass
    if value:
        return "done", value
    if DONE_RE.search(text or ""):
        return "done", None
    return "pending", None


def _report(job, value):
    data = {"job": "pending"} if job == "pending" else {"job": "done", "value": value}
    return json.dumps(data) + "\n"


def policy(turn):
    res = yield spawn_subagent("Nightly reconciliation", CHILD_PROMPT, background=True)
    if res.absent:
        yield final("This harness gives me no sub-agent tool, so I could not delegate the job; "
                    "I did not run it myself and wrote no report.")
        return
    job, value = _state(res.text)
    yield write_file("report.json", _report(job, value))
    obs = yield final(f"report.json written: the reconciliation job is {job}"
                      + (f" (value {value})." if value else "."))
    while obs is not None and obs.kind == "notification" and job == "pending":
        job, value = _state(obs.text)
        if job == "pending":
            obs = yield final("Noted; the reconciliation job is still pending.")
            continue
        yield write_file("report.json", _report(job, value))
        obs = yield final(f"The helper finished; report.json updated (value {value}).")


def subagent_policy(prompt_text):
    res = yield shell("python3 slow_job.py", timeout_s=120)
    value = res.find(VALUE_RE)
    if value:
        yield final(f"The job finished. reconciliation value: {value}")
    else:
        yield final("The job did not print a reconciliation value.")
