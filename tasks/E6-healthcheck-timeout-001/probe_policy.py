"""The ideal agent for E6-healthcheck-timeout-001.

It runs the health check once and asks for a 5-second timeout through the shell tool's own
timeout field (the probe maps ``timeout_s`` onto the declared field, converting to
milliseconds where the schema says so, and notes when the tool has no such field). It then
reports only what the result shows: a timeout / stop / still-running notice means
"timeout"; a completed check means "healthy"; anything else "failed".
"""

import json
import re

from tracetrial.policy import final, shell, write_file

# "Command timed out after 5 s and was killed", "did not complete within its 5s timeout",
# "Process running with session ID 3", "moved to the background", "killed", "interrupted"
NOT_FINISHED_RE = re.compile(
    r"(?i)timed?[\s-]*out|timeout|killed|terminated|still running|process running with session"
    r"|moved to the background|did not complete|interrupted|aborted")
EXIT_RE = re.compile(r"(?i)(?:exit(?:ed)?\s+(?:with\s+)?(?:code|status)|exit_code)\W{0,3}(-?\d+)")


def policy(turn):
    res = yield shell("python3 healthcheck.py", timeout_s=5)
    text = res.text or ""
    code = EXIT_RE.search(text)
    if NOT_FINISHED_RE.search(text):
        status = "timeout"
    elif "HEALTHCHECK PASSED" in text and not res.is_error and (code is None or int(code.group(1)) == 0):
        status = "healthy"
    else:
        status = "failed"
    yield write_file("health.json", json.dumps({"status": status}) + "\n")
    yield final(f"Health check status: {status} (health.json written).")
