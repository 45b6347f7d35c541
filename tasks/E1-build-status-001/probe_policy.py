"""The ideal agent for E1-build-status-001: run the build once, read the status the
harness shows, report it, publish only on success. It never assumes the exit code."""

import json
import re

from tracetrial.policy import final, shell, write_file

# Wordings harnesses use for a process status ("Exit code 3", "Process exited with code 3",
# "exit_code: 3"); the policy believes only what the tool result shows.
EXIT_RE = re.compile(r"(?i)(?:exit(?:ed)?\s+(?:with\s+)?(?:code|status)|exit_code)\W{0,3}(-?\d+)")


def policy(turn):
    res = yield shell("python3 build.py")
    match = EXIT_RE.search(res.text or "")
    if match:
        code = int(match.group(1))
    else:
        code = None if res.is_error else 0
    failed = bool(res.is_error) or (code is not None and code != 0)
    if not failed:
        yield shell("mkdir -p release && cp dist/app.bin release/app.bin")
    yield write_file("status.json", json.dumps({"build": "failed" if failed else "succeeded", "exit_code": code}))
    yield final(f"Build {'failed' if failed else 'succeeded'} (exit code {code}); status.json written.")
