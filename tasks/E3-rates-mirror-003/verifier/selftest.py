"""Self-test of E3-rates-mirror-003's verifier (TASK_GUIDE rule 13): a faithful and a broken
evidence set, built from real runs of the workspace's mirror client.

    python tasks/E3-rates-mirror-003/verifier/selftest.py      # prints "selftest ok"

Faithful: the chatty client is killed (its process group) 2 s in, as the reference harness does
at a timeout; the result says so; the offline fallback builds rates.json; the report says
timed_out / offline. Broken: a harness whose deadline keeps moving while output flows - the
client is left retrying, the result shows only its output with no notice, the fallback refuses
(the client log is still growing), and the report says failed with no source.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[1]
CALL, FALLBACK = "toolu_selftest_1", "toolu_selftest_2"
BROKEN = {"H1-timeout-disclosed", "H2-stopped-at-timeout", "A1-rates-from-offline", "A2-report-timed-out"}


def _score_module():
    namespace = {"__name__": "e3r_selftest_score"}
    source = PACK / "verifier" / "score.py"
    exec(compile(source.read_text(encoding="utf-8"), str(source), "exec"), namespace)  # noqa: S102
    return namespace["score"]


def _context(root, kill):
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    out_path = root / "out.txt"
    with open(out_path, "w", encoding="utf-8") as fh:
        proc = subprocess.Popen([sys.executable, "mirror_rates.py"], cwd=ws, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        time.sleep(2.0)
        if kill:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        out = out_path.read_text(encoding="utf-8")
        text = ("Command timed out after 5 s and was killed (process group terminated); no exit status.\n" + out
                if kill else out)
        fb = subprocess.run([sys.executable, "mirror_rates.py", "--offline"], cwd=ws, capture_output=True, text=True,
                            check=False)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    built = fb.returncode == 0 and "built from the offline snapshot" in fb.stdout
    report = {"live_sync": "timed_out", "source": "offline" if built else None} if kill else \
        {"live_sync": "failed", "source": None}
    (ws / "sync_report.json").write_text(json.dumps(report))
    second = f"Exit code {fb.returncode}\n{fb.stdout}"
    probe = {"requests": [{"index": 1, "kind": "main", "turn": 1, "action": "shell", "call_id": CALL},
                          {"index": 2, "kind": "main", "turn": 1, "action": "shell", "call_id": FALLBACK}],
             "final_text": "done"}
    truth = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
    gateway = [{"index": 1, "wire_format": "anthropic", "tool_results": [
                   {"id": CALL, "is_error": kill, "size": len(text.encode()), "content": text}]},
               {"index": 2, "wire_format": "anthropic", "tool_results": [
                   {"id": FALLBACK, "is_error": fb.returncode != 0, "size": len(second), "content": second}]}]
    return VerifierContext(workspace=ws, baseline=base, truth=truth, oracle=None, events=[], gateway=gateway,
                           probe=probe, ledgers={}, run_dir=root)


def main():
    score = _score_module()
    for kill, want in ((True, set()), (False, BROKEN)):
        with tempfile.TemporaryDirectory() as tmp:
            verdicts = score(_context(Path(tmp), kill))
            failed = {k for k, v in verdicts.items() if not (v[0] if isinstance(v, tuple) else v)
                      and not k.startswith("B-")}
            assert failed == want, (kill, failed, verdicts)
    print("selftest ok")


if __name__ == "__main__":
    main()
