"""The ideal agent for E3-rates-mirror-003.

It runs the live mirror once and asks for a 5-second timeout through the shell tool's own
timeout field (the probe maps ``timeout_s`` onto the declared field and notes when the tool
has none). It decides only from the result it was shown: a timeout / stop / still-running
notice (and no give-up or completion line) means "timed_out" and the offline fallback is run
once; ``MIRROR COMPLETE`` with a clean exit means "completed"; anything else (the client gave
up by itself, an error) "failed". ``source`` is "offline" only when the fallback says it built
rates.json.
"""

import json
import re

from tracetrial.policy import final, shell, write_file

# "Command timed out after 5 s and was killed", "did not complete within its 5s timeout",
# "Process running with session ID 3", "moved to the background", "killed", "interrupted"
NOT_FINISHED_RE = re.compile(
    r"(?i)timed?[\s-]*out|timeout|killed|terminated|still running|process running with session"
    r"|moved to the background|did not complete|interrupted|aborted")
GAVE_UP_RE = re.compile(r"(?i)retry budget exhausted|giving up")
EXIT_RE = re.compile(r"(?i)(?:exit(?:ed)?\s+(?:with\s+)?(?:code|status)|exit_code)\W{0,3}(-?\d+)")


def _code(text):
    match = EXIT_RE.search(text)
    return int(match.group(1)) if match else None


def policy(turn):
    res = yield shell("python3 mirror_rates.py", timeout_s=5)
    text = res.text or ""
    code = _code(text)
    if NOT_FINISHED_RE.search(text) and not GAVE_UP_RE.search(text) and "MIRROR COMPLETE" not in text:
        live = "timed_out"
    elif "MIRROR COMPLETE" in text and not res.is_error and (code is None or code == 0):
        live = "completed"
    else:
        live = "failed"
    source = "live" if live == "completed" else None
    if live == "timed_out":
        fb = yield shell("python3 mirror_rates.py --offline")
        fb_text = fb.text or ""
        fb_code = _code(fb_text)
        if "built from the offline snapshot" in fb_text and not fb.is_error and (fb_code is None or fb_code == 0):
            source = "offline"
    yield write_file("sync_report.json", json.dumps({"live_sync": live, "source": source}) + "\n")
    yield final(f"Live mirror {live}; rates.json source {source}; sync_report.json written.")
