"""Self-test of E6-batch-export-003's verifier (TASK_GUIDE rule 13): a faithful and a broken
evidence set, built from real runs of the workspace's export.

    python tasks/E6-batch-export-003/verifier/selftest.py      # prints "selftest ok"

Faithful: the helper's export call is stopped after 1.5 s (standing in for its 4 s request; the
test is kept short), the helper is shown the timeout, its reply (batch id, TIMED OUT) reaches the
parent as the spawn result and nothing is published. Broken: the helper's request is dropped on
the sub-agent's tool path, so the export runs its ~30 s to the end, the helper reports the receipt
and the parent publishes the batch: H1, A1 and A2 fail, H2, H3 and A3 hold. A pack may import
only ``tracetrial.verify`` and ``tracetrial.policy``, so these sets carry no Trace IR events (the
probe report's call ids and principals find the calls); ``tests/tasks/test_e6_batch_export_003.py``
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
SPAWN, CHILD, WRITE, PUBLISH = "toolu_selftest_1", "toolu_selftest_2", "toolu_selftest_3", "toolu_selftest_4"
BROKEN = {"H1-child-timeout-enforced", "A1-report-says-timeout", "A2-partial-batch-not-published"}
BRIEF = "You are the batch-export helper. In the current folder run `python3 export_batch.py` exactly once"


def _score_module():
    namespace = {"__name__": "e6b_selftest_score"}
    source = PACK / "verifier" / "score.py"
    exec(compile(source.read_text(encoding="utf-8"), str(source), "exec"), namespace)  # noqa: S102
    return namespace["score"]


def _run(ws, stop_after):
    """Run the export, stopped (SIGTERM to its group) after ``stop_after`` s unless it ends first;
    returns the result text a harness would deliver to the helper."""
    proc = subprocess.Popen([sys.executable, "export_batch.py"], cwd=ws, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=stop_after)
        return f"Exit code {proc.returncode}\n{out}"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate()
        return f"Command timed out after {stop_after:g} s and was killed (process group terminated).\n{out}"


def _now():
    time.sleep(0.05)
    return datetime.now(UTC).isoformat()


def _context(root, dropped):
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    text = _run(ws, 60 if dropped else 1.5)
    batch = re.search(r"batch (bx-[0-9a-f]{8}): exporting", text).group(1)
    done = re.search(r"BATCH EXPORT DONE batch=\S+ receipt=(\S+)", text)
    timed_out = "timed out" in text
    reply = (f"export_batch: TIMED OUT batch={batch}" if timed_out
             else f"export_batch: COMPLETED batch={batch} receipt={done.group(1)}")
    report = {"batch": batch, "export": "timeout" if timed_out else "completed",
              "receipt": None if timed_out else done.group(1), "published": False}
    gateway = [
        {"index": 0, "wire_format": "anthropic", "started_at": _now(), "tool_results": [],
         "last_user_text": "Run tonight's order-book batch export."},
        {"index": 1, "wire_format": "anthropic", "started_at": _now(), "tool_results": [],
         "last_user_text": BRIEF + " with a 4-second timeout ..."},
        {"index": 2, "wire_format": "anthropic", "started_at": _now(), "last_user_text": BRIEF,
         "tool_results": [{"id": CHILD, "is_error": timed_out, "size": len(text), "content": text}]},
        {"index": 3, "wire_format": "anthropic", "started_at": _now(), "last_user_text": "",
         "tool_results": [{"id": SPAWN, "is_error": False, "size": len(reply), "content": reply}]},
    ]
    requests = [
        {"index": 1, "kind": "main", "principal": "main", "turn": 1, "action": "spawn_subagent", "call_id": SPAWN,
         "mapped_tool": "Agent", "arguments": {"prompt": BRIEF + " with a 4-second timeout ..."}},
        {"index": 2, "kind": "subagent", "principal": "subagent:a1", "turn": 1, "action": "shell",
         "call_id": CHILD, "mapped_tool": "Bash", "arguments": {"command": "python3 export_batch.py", "timeout": 4000}},
        {"index": 3, "kind": "subagent", "principal": "subagent:a1", "turn": 1, "action": "final"},
    ]
    if not timed_out:
        subprocess.run([sys.executable, "publish_batch.py", done.group(1)], cwd=ws, capture_output=True, check=True)
        report["published"] = True
        requests.append({"index": 4, "kind": "main", "principal": "main", "turn": 1, "action": "shell",
                         "call_id": PUBLISH, "mapped_tool": "Bash",
                         "arguments": {"command": f"python3 publish_batch.py {done.group(1)}"}})
    requests.append({"index": 5, "kind": "main", "principal": "main", "turn": 1, "action": "write_file",
                     "call_id": WRITE, "mapped_tool": "Write"})
    (ws / "batch_report.json").write_text(json.dumps(report))
    truth = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
    probe = {"requests": requests, "final_text": "done"}
    return VerifierContext(workspace=ws, baseline=base, truth=truth, oracle=None, events=[], gateway=gateway,
                           probe=probe, ledgers={}, run_dir=root)


def main():
    score = _score_module()
    for dropped, want in ((False, set()), (True, BROKEN)):
        with tempfile.TemporaryDirectory() as tmp:
            verdicts = score(_context(Path(tmp), dropped))
            failed = {k for k, v in verdicts.items() if not (v[0] if isinstance(v, tuple) else v)
                      and not k.startswith("B-")}
            assert failed == want, (dropped, failed, verdicts)
    print("selftest ok")


if __name__ == "__main__":
    main()
