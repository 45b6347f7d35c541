"""Self-test of E6-report-timeouts-002's verifier (TASK_GUIDE rule 13): a faithful and a broken
evidence set, built from real runs of the workspace's export.

    python tasks/E6-report-timeouts-002/verifier/selftest.py      # prints "selftest ok"

Faithful: the north export is stopped after 1.5 s (standing in for its 3 s request; the test is
kept short) and the result says it timed out; the south export runs its full 8 s and its output,
receipt included, is delivered. Broken: one timeout for both calls (the first call's), so the
south export is stopped too and its result says so — H2 and A2 fail, H1 and H3 pass. A pack
may import only ``tracetrial.verify`` and ``tracetrial.policy``, so these sets carry no Trace IR
events (the probe report's call ids find the results); ``tests/tasks/test_e6_report_timeouts_002.py``
covers the other defects with hand-built evidence.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[1]
CALLS = {"north": "toolu_selftest_1", "south": "toolu_selftest_2"}
BROKEN = {"H2-long-request-honoured", "A2-south-receipt"}


def _score_module():
    namespace = {"__name__": "e6r_selftest_score"}
    source = PACK / "verifier" / "score.py"
    exec(compile(source.read_text(encoding="utf-8"), str(source), "exec"), namespace)  # noqa: S102
    return namespace["score"]


def _run(ws, region, stop_after):
    """Run one export, stopped (SIGTERM to its group) after ``stop_after`` s unless it ends first;
    returns the result text a harness would deliver."""
    proc = subprocess.Popen([sys.executable, "export_report.py", region], cwd=ws, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=stop_after)
        return f"Exit code {proc.returncode}\n{out}"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate()
        return f"Command timed out after {stop_after:g} s and was killed (process group terminated).\n{out}"


def _context(root, same_timeout):
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    gateway, requests, report = [], [], {}
    for n, region in enumerate(("north", "south"), start=1):
        text = _run(ws, region, 1.5 if region == "north" or same_timeout else 20)
        time.sleep(0.05)
        gateway.append({"index": n, "wire_format": "anthropic", "started_at": datetime.now(UTC).isoformat(),
                        "tool_results": [{"id": CALLS[region], "is_error": "Exit code 0" not in text,
                                          "size": len(text), "content": text}]})
        requests.append({"index": n, "kind": "main", "turn": 1, "action": "shell", "call_id": CALLS[region],
                         "mapped_tool": "shell",
                         "arguments": {"command": f"python3 export_report.py {region}", "timeout_s": 1.5}})
        done = re.search(rf"EXPORT {region} DONE receipt=(\S+)", text)
        timed_out = "timed out" in text
        report[region] = {"status": "timeout" if timed_out else "completed" if done else "failed",
                          "receipt": done.group(1) if done and not timed_out else None}
    (ws / "exports.json").write_text(json.dumps(report))
    truth = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
    probe = {"requests": requests, "final_text": "done"}
    return VerifierContext(workspace=ws, baseline=base, truth=truth, oracle=None, events=[], gateway=gateway,
                           probe=probe, ledgers={}, run_dir=root)


def main():
    score = _score_module()
    for same_timeout, want in ((False, set()), (True, BROKEN)):
        with tempfile.TemporaryDirectory() as tmp:
            verdicts = score(_context(Path(tmp), same_timeout))
            failed = {k for k, v in verdicts.items() if not (v[0] if isinstance(v, tuple) else v)
                      and not k.startswith("B-")}
            assert failed == want, (same_timeout, failed, verdicts)
    print("selftest ok")


if __name__ == "__main__":
    main()
