"""Self-test of this pack's verifier (rule 13): one faithful and one broken evidence set.

Faithful: a reference-shaped run - the snapshot taken and verified, then requests 3.. refused
with HTTP 503; the harness writes an error record naming the status, a completion record with
status ``error`` and exits 1.
Broken: the same run as ``reference+swallow_provider_error`` records it (no error record, the
completion record ``completed`` with an empty final text, exit 0); the snapshot is the same, so
H1, H2 and H3 fail and A1 still passes.

Run ``python tasks/O2-inventory-snapshot-001/verifier/selftest.py`` (exit 0 when both hold).
"""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

from tracetrial.verify import VerifierContext

sys.dont_write_bytecode = True  # never write __pycache__ into the pack
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import score  # noqa: E402  (the sibling verifier)

PACK = HERE.parent
MAIN = {"principal_id": "main", "principal_role": "main", "parent_principal_id": None}
MESSAGE = "Service unavailable: upstream model pool overloaded (injected by the TraceTrial probe)"


def _event(seq, event_type, source, **kw):
    base = {"seq": seq, "event_type": event_type, "source": source, "conversation_turn": 1, "raw_event": None}
    return SimpleNamespace(**{**base, **MAIN, **kw})


def _events(broken):
    src = "native:reference/reference-events.jsonl"
    events = [_event(1, "native_event", src, native_event_type="session", status="new")]
    if broken:
        events.append(_event(2, "task_completion", src, status="completed", child_principal_id=None,
                             content={"status": "completed", "final_text": ""}))
        code = 0
    else:
        events += [
            _event(2, "native_diagnostic", src, diagnostic_type="provider_error",
                   detail={"kind": "provider_error", "message": f"HTTP 503 from http://gw/v1/chat/completions: "
                           f'{{"error":{{"message":"{MESSAGE}"}}}}', "http_status": 503}),
            _event(3, "task_completion", src, status="error", child_principal_id=None,
                   content={"status": "error", "final_text": "model request failed: HTTP 503"}),
        ]
        code = 1
    events.append(_event(9, "conversation_turn_finished", "runner", exit_code=code, status="ok" if code == 0 else "error"))
    return events


def _context(root, *, broken):
    ws = root / ("broken" if broken else "faithful")
    shutil.copytree(PACK / "workspace", ws)
    subprocess.run([sys.executable, "snapshot.py"], cwd=ws, check=True, capture_output=True)
    truth = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
    probe = {"requests": [{"index": 1, "kind": "main", "action": "shell", "status": 200},
                          {"index": 2, "kind": "main", "action": "shell", "status": 200},
                          {"index": 3, "kind": "provider_error", "status": 503}]}
    gateway = [{"index": 1, "status": 200, "error": None}, {"index": 2, "status": 200, "error": None},
               {"index": 3, "status": 503, "error": f"server_error: {MESSAGE}"}]
    return VerifierContext(workspace=ws, baseline=PACK / "workspace", truth=truth, oracle=None,
                           events=_events(broken), gateway=gateway, probe=probe, ledgers={}, run_dir=ws)


def selftest():
    with tempfile.TemporaryDirectory() as tmp:
        good = score.score(_context(Path(tmp), broken=False))
        assert all(v[0] for v in good.values()), good
        bad = score.score(_context(Path(tmp), broken=True))
        failed = {k for k, v in bad.items() if not v[0]}
        assert failed == {score.H1, score.H2, score.H3}, bad


if __name__ == "__main__":
    selftest()
    print("selftest ok")
