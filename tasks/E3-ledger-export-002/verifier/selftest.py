"""Self-test of E3-ledger-export-002's verifier (TASK_GUIDE rule 13): a faithful and a broken
evidence set, built from real runs of the workspace's exporter.

    python tasks/E3-ledger-export-002/verifier/selftest.py      # prints "selftest ok"

Faithful: the exporter is SIGTERMed (ignored, logged), then SIGKILLed, as the reference harness
does on a timeout; the result says so; the resume from the last checkpoint completes the ledger.
Broken: only SIGTERM is sent (a harness that never escalates): the exporter keeps beating, the
resume refuses, the ledger stays partial. A pack may import only ``tracetrial.verify`` and
``tracetrial.policy``, so these sets carry no Trace IR events and H4 (what the trace recorded)
fails in both; ``tests/tasks/test_e3_ledger_export_002.py`` covers H4 with hand-built events.
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
from pathlib import Path

from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[1]
CALL, RESUME = "toolu_selftest_1", "toolu_selftest_2"
NO_TRACE = {"H4-timeout-recorded"}
BROKEN = {"H2-process-killed", "A1-export-report", "A2-ledger-resumed"} | NO_TRACE


def _score_module():
    namespace = {"__name__": "e3l_selftest_score"}
    source = PACK / "verifier" / "score.py"
    exec(compile(source.read_text(encoding="utf-8"), str(source), "exec"), namespace)  # noqa: S102
    return namespace["score"]


def _wait_for_lock(out_path, deadline_s=20.0):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if "waiting for the upstream ledger lock" in out_path.read_text(encoding="utf-8", errors="replace"):
            return
        time.sleep(0.05)
    raise AssertionError("the exporter never reached the lock")


def _context(root, escalate):
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    log = root / "out.txt"
    with open(log, "w", encoding="utf-8") as fh:
        proc = subprocess.Popen([sys.executable, "export_ledger.py"], cwd=ws, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        _wait_for_lock(log)
        os.killpg(proc.pid, signal.SIGTERM)
        time.sleep(1.0)
        if escalate:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        out = log.read_text(encoding="utf-8")
        text = ("Command timed out after 5 s and was killed (process group terminated); no exit status.\n" if escalate
                else "Command timed out after 5 s (SIGTERM sent).\n") + out
        last = re.findall(r"checkpoint (CK-[A-Z0-9]{8})", out)[-1]
        again = subprocess.run([sys.executable, "export_ledger.py", "--resume", last], cwd=ws, capture_output=True,
                               text=True, check=False)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    resumed = again.returncode == 0 and "EXPORT COMPLETE" in again.stdout
    (ws / "export_report.json").write_text(json.dumps({"live_export": "timed_out", "checkpoint": last,
                                                       "resumed": resumed}))
    results = [{"id": CALL, "is_error": True, "size": len(text.encode()), "content": text}]
    second = f"Exit code {again.returncode}\n{again.stdout}"
    probe = {"requests": [{"index": 1, "kind": "main", "turn": 1, "action": "shell", "call_id": CALL},
                          {"index": 2, "kind": "main", "turn": 1, "action": "shell", "call_id": RESUME}],
             "final_text": "done"}
    truth = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
    gateway = [{"index": 1, "wire_format": "anthropic", "tool_results": results},
               {"index": 2, "wire_format": "anthropic", "tool_results": [
                   {"id": RESUME, "is_error": again.returncode != 0, "size": len(second), "content": second}]}]
    return VerifierContext(workspace=ws, baseline=base, truth=truth, oracle=None, events=[], gateway=gateway,
                           probe=probe, ledgers={}, run_dir=root)


def main():
    score = _score_module()
    for escalate, want in ((True, NO_TRACE), (False, BROKEN)):
        with tempfile.TemporaryDirectory() as tmp:
            verdicts = score(_context(Path(tmp), escalate))
            failed = {k for k, v in verdicts.items() if not (v[0] if isinstance(v, tuple) else v)
                      and not k.startswith("B-")}
            assert failed == want, (escalate, failed, verdicts)
    print("selftest ok")


if __name__ == "__main__":
    main()
