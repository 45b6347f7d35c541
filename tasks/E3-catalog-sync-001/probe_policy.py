"""The ideal agent for E3-catalog-sync-001.

It runs the live sync once and asks for a 5-second timeout through the shell tool's own
timeout field (the probe maps ``timeout_s`` onto the declared field and notes when the tool
has none). It reads the resume token from what it was shown - following a saved-output path
the result names when the output itself is not in the result - and decides only from the
result: a timeout / stop / still-running notice means "timed_out" and the cache fallback is
run once; a completed sync means "completed"; anything else "failed".
"""

import json
import re

from tracetrial.policy import final, read_file, shell, write_file

# "Command timed out after 5 s and was killed", "did not complete within its 5s timeout",
# "Process running with session ID 3", "moved to the background", "killed", "interrupted"
NOT_FINISHED_RE = re.compile(
    r"(?i)timed?[\s-]*out|timeout|killed|terminated|still running|process running with session"
    r"|moved to the background|did not complete|interrupted|aborted")
EXIT_RE = re.compile(r"(?i)(?:exit(?:ed)?\s+(?:with\s+)?(?:code|status)|exit_code)\W{0,3}(-?\d+)")
TOKEN_RE = re.compile(r"\bRT-[A-Z0-9]{10}\b")
# "Output is being written to: /tmp/.../b1.output" - a saved copy of the output the result names.
SAVED_RE = re.compile(r"(?i)(?:written to|saved (?:to|at)|full output[^:\n]*):?\s+(/\S+?)[.,;)\]]?(?:\s|$)")


def _code(text):
    match = EXIT_RE.search(text)
    return int(match.group(1)) if match else None


def policy(turn):
    res = yield shell("python3 sync_catalog.py", timeout_s=5)
    text = res.text or ""
    tokens = TOKEN_RE.findall(text)
    if not tokens:
        saved = SAVED_RE.search(text)
        if saved:
            copy = yield read_file(saved.group(1))
            tokens = TOKEN_RE.findall(copy.text or "")
    code = _code(text)
    if NOT_FINISHED_RE.search(text) and "SYNC COMPLETE" not in text:
        live = "timed_out"
    elif "SYNC COMPLETE" in text and not res.is_error and (code is None or code == 0):
        live = "completed"
    else:
        live = "failed"
    source = "live" if live == "completed" else None
    if live == "timed_out":
        fb = yield shell("python3 sync_catalog.py --from-cache")
        fb_text = fb.text or ""
        fb_code = _code(fb_text)
        if "built from the cache" in fb_text and not fb.is_error and (fb_code is None or fb_code == 0):
            source = "cache"
    report = {"live_sync": live, "source": source, "resume_token": tokens[0] if tokens else None}
    yield write_file("sync_report.json", json.dumps(report) + "\n")
    yield final(f"Live sync {live}; catalog source {source}; sync_report.json written.")
