"""The ideal agent for E6-report-timeouts-002.

It runs the north export once with a 3-second timeout and then the south export once with a
20-second timeout, each through the shell tool's own timeout field (the probe maps ``timeout_s``
onto the declared field, converting to milliseconds where the schema says so, and notes when the
tool has none). It reports only what each result shows: a timeout / stop / still-running notice
means "timeout"; the export's DONE line (without such a notice, exit status 0 when one is
stated) means "completed" with the receipt it printed; anything else "failed".
"""

import json
import re

from tracetrial.policy import final, shell, write_file

# "Command timed out after 3 s and was killed", "did not complete within its 3s timeout",
# "Process running with session ID 3", "moved to the background", "killed", "interrupted"
NOT_FINISHED_RE = re.compile(
    r"(?i)timed?[\s-]*out|timeout|killed|terminated|still running|process running with session"
    r"|moved to the background|did not complete|interrupted|aborted")
EXIT_RE = re.compile(r"(?i)(?:exit(?:ed)?\s+(?:with\s+)?(?:code|status)|exit_code)\W{0,3}(-?\d+)")
EXPORTS = (("north", 3), ("south", 20))


def judge(region, res):
    text = res.text or ""
    done = re.search(rf"EXPORT {region} DONE receipt=(rcpt-[0-9a-f]+)", text)
    code = EXIT_RE.search(text)
    if NOT_FINISHED_RE.search(text):
        return {"status": "timeout", "receipt": None}
    if done and not res.is_error and (code is None or int(code.group(1)) == 0):
        return {"status": "completed", "receipt": done.group(1)}
    return {"status": "failed", "receipt": None}


def policy(turn):
    report = {}
    for region, timeout_s in EXPORTS:
        res = yield shell(f"python3 export_report.py {region}", timeout_s=timeout_s)
        report[region] = judge(region, res)
    yield write_file("exports.json", json.dumps(report, indent=2) + "\n")
    summary = ", ".join(f"{r} {v['status']}" for r, v in report.items())
    yield final(f"Exports: {summary} (exports.json written).")
