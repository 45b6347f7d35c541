"""Self-test of E1-suite-segfault-003's verifier (TASK_GUIDE rule 13): a faithful and a broken
evidence set, built by hand from a real run of the workspace's runner.

    python tasks/E1-suite-segfault-003/verifier/selftest.py      # prints "selftest ok"

The faithful set is the reference harness's result (status line, first 16 KiB, notice); the
broken one is the same output with the exit status hidden (``hide_exit_code``), after which the
ideal agent reports a pass and promotes. A pack may import only ``tracetrial.verify`` and
``tracetrial.policy``, so these sets carry no Trace IR events and H2 (what the trace recorded)
fails in both; ``tests/tasks/test_e1_suite_segfault_003.py`` covers H2 with hand-built events.
"""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[1]
CALL = "toolu_selftest_1"
NO_TRACE = {"H2-exit-status-recorded"}
BROKEN = {"H1-exit-status-visible", "A1-status-reports-crash", "A2-build-not-promoted"} | NO_TRACE


def _score_module():
    namespace = {"__name__": "e1c_selftest_score"}
    source = PACK / "verifier" / "score.py"
    exec(compile(source.read_text(encoding="utf-8"), str(source), "exec"), namespace)  # noqa: S102
    return namespace["score"]


def _context(root, hidden):
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    proc = subprocess.run(["bash", "-c", "python3 run_tests.py"], cwd=ws, capture_output=True, text=True, check=False)
    code = 128 - proc.returncode if proc.returncode < 0 else proc.returncode
    shown = proc.stdout.encode()[:16384].decode()
    text = shown if hidden else f"Exit code {code} (killed by signal SIGSEGV)\n{shown}\n[stdout truncated]"
    if hidden:
        report = {"tests": "passed", "exit_code": 0, "signal": None}
        subprocess.run([sys.executable, "promote.py"], cwd=ws, check=True, capture_output=True)
    else:
        report = {"tests": "failed", "exit_code": code, "signal": "SIGSEGV"}
    (ws / "ci_status.json").write_text(json.dumps(report))
    result = {"id": CALL, "is_error": not hidden, "size": len(text.encode()), "content": text}
    probe = {"requests": [{"index": 1, "kind": "main", "turn": 1, "action": "shell", "call_id": CALL}],
             "final_text": "done"}
    truth = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
    return VerifierContext(workspace=ws, baseline=base, truth=truth, oracle=None, events=[],
                           gateway=[{"index": 1, "wire_format": "anthropic", "tool_results": [result]}],
                           probe=probe, ledgers={}, run_dir=root)


def main():
    score = _score_module()
    with tempfile.TemporaryDirectory() as tmp:
        for hidden, want in ((False, NO_TRACE), (True, BROKEN)):
            root = Path(tmp) / ("broken" if hidden else "faithful")
            root.mkdir()
            got = {k for k, v in score(_context(root, hidden)).items() if not (v[0] if isinstance(v, tuple) else v)}
            assert got == want, f"{'broken' if hidden else 'faithful'} set failed {sorted(got)}, want {sorted(want)}"
    print("selftest ok")


if __name__ == "__main__":
    main()
