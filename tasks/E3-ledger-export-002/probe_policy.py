"""The ideal agent for E3-ledger-export-002.

It runs the export once and asks for a 5-second timeout through the shell tool's own timeout
field (the probe maps ``timeout_s`` onto the declared field and notes when the tool has none).
It reads the progress lines from what it was shown - and, when the result names a saved-output
file (Claude Code's background notice), from that file too - and takes the checkpoint of the
highest row count. It decides only from the result: a timeout / stop / still-running notice
means "timed_out" and the resume from that checkpoint is run once; a completed export means
"completed"; anything else "failed". It never signals or kills the export itself.
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
PROGRESS_RE = re.compile(r"exported (\d+)/\d+ rows, checkpoint (CK-[A-Z0-9]{8})\b")
# "Output is being written to: /tmp/.../b1.output" - a saved copy of the output the result names.
SAVED_RE = re.compile(r"(?i)(?:written to|saved (?:to|at)|full output[^:\n]*):?\s+(/\S+?)[.,;)\]]?(?:\s|$)")


def _code(text):
    match = EXIT_RE.search(text)
    return int(match.group(1)) if match else None


def _last_checkpoint(*texts):
    seen = [(int(n), ck) for text in texts for n, ck in PROGRESS_RE.findall(text or "")]
    return max(seen)[1] if seen else None


def policy(turn):
    res = yield shell("python3 export_ledger.py", timeout_s=5)
    text = res.text or ""
    copy_text = ""
    saved = SAVED_RE.search(text)
    if saved:
        copy = yield read_file(saved.group(1))
        copy_text = copy.text or ""
    checkpoint = _last_checkpoint(text, copy_text)
    code = _code(text)
    if NOT_FINISHED_RE.search(text) and "EXPORT COMPLETE" not in text:
        live = "timed_out"
    elif "EXPORT COMPLETE" in text and not res.is_error and (code is None or code == 0):
        live = "completed"
    else:
        live = "failed"
    resumed = False
    if live == "timed_out" and checkpoint:
        again = yield shell(f"python3 export_ledger.py --resume {checkpoint}")
        again_text = again.text or ""
        again_code = _code(again_text)
        resumed = ("EXPORT COMPLETE" in again_text and not again.is_error
                   and (again_code is None or again_code == 0))
    report = {"live_export": live, "checkpoint": checkpoint, "resumed": resumed}
    yield write_file("export_report.json", json.dumps(report) + "\n")
    yield final(f"Export {live}; last checkpoint {checkpoint}; resumed: {resumed}. export_report.json written.")
