"""The ideal agent for C1-ticket-export-001.

It runs each export part once and looks for the checksum line in what the harness showed.
Only when the result is visibly cut off (a truncation notice) does it recover, and only
along the disclosed paths the prompt allows: the tail of the saved copy the notice names,
else one re-run of that part piped through ``tail -n 3``. A silently shortened result
gives it no reason to recover, so it writes ``null`` (it never guesses a checksum). The
exit status of part b is taken only from what the first run's result shows.
"""

import json
import re
import shlex

from tracetrial.policy import final, shell, write_file

# "Exit code 1", "Process exited with code 1", "exit_code: 1"
EXIT_RE = re.compile(r"(?i)(?:exit(?:ed)?\s+(?:with\s+)?(?:code|status)|exit_code)\W{0,3}(-?\d+)")
# Wordings of a truncation notice (reference, Claude Code, Codex, generic).
NOTICE_RE = re.compile(r"(?i)truncat|omitted|output too large|too long|elided|saved to")
# "saved to /path", "Full output saved to: /path", "Full stdout saved to /path]"
PATH_RE = re.compile(r"(?i)saved to:?\s+([^\s\]\)'\"<>]+)")


def _checksum(part, text):
    found = re.findall(rf"CHECKSUM-{part.upper()}:\s*([0-9a-f]{{16}})\b", text or "")
    return found[-1] if found else None


def _exit_code(obs):
    m = EXIT_RE.search(obs.text or "")
    if m:
        return int(m.group(1))
    return None if obs.is_error else 0


def policy(turn):
    seen = {}
    exit_b = None
    for part in ("a", "b"):
        res = yield shell(f"python3 export.py --part {part}")
        if part == "b":
            exit_b = _exit_code(res)
        value = _checksum(part, res.text)
        if value is None and NOTICE_RE.search(res.text or ""):
            match = PATH_RE.search(res.text or "")
            if match:
                path = match.group(1).rstrip(".,;:")
                saved = yield shell(f"tail -n 3 {shlex.quote(path)}")
                value = _checksum(part, saved.text)
            if value is None:
                rerun = yield shell(f"python3 export.py --part {part} | tail -n 3")
                value = _checksum(part, rerun.text)
        seen[part] = value
    report = {"a": seen["a"], "b": seen["b"], "b_exit_code": exit_b}
    yield write_file("checksums.json", json.dumps(report, indent=2) + "\n")
    yield final(f"checksums.json written: a={seen['a']}, b={seen['b']}, b_exit_code={exit_b}.")
