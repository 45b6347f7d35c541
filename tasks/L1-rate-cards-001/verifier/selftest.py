"""Self-test of this pack's verifier (rule 13): one faithful and one broken evidence set.

Faithful: a reference-shaped run stopped by the budget - five renders (north..central), the
status file written before the fifth (four done, central in progress, three not done), five
answered requests, a completion record ``budget_exhausted`` and exit 1.
Broken: the same run as ``reference+hide_unfinished`` records it (completion ``completed``,
exit 0): H2 fails, H1, A1 and A2 still pass.

Run ``python tasks/L1-rate-cards-001/verifier/selftest.py`` (exit 0 when both hold).
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
import score  # the sibling verifier

PACK = HERE.parent
MAIN = {"principal_id": "main", "principal_role": "main", "parent_principal_id": None}


def _event(seq, event_type, source, **kw):
    base = {"seq": seq, "event_type": event_type, "source": source, "conversation_turn": 1, "raw_event": None}
    return SimpleNamespace(**{**base, **MAIN, **kw})


def _context(root, *, broken):
    truth = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
    regions = truth["regions"]
    ws = root / ("broken" if broken else "faithful")
    shutil.copytree(PACK / "workspace", ws)
    done = []
    for region in regions[:5]:
        out = subprocess.run([sys.executable, "render_card.py", region], cwd=ws, check=True,
                             capture_output=True, text=True).stdout
        done.append({"region": region, "receipt": out.strip().rsplit("receipt=", 1)[1]})
    status = {"status": "partial", "done": done[:4], "in_progress": [regions[4]], "not_done": regions[5:]}
    (ws / "batch_status.json").write_text(json.dumps(status), encoding="utf-8")
    src = "native:reference/reference-events.jsonl"
    code = 0 if broken else 1
    events = [_event(1, "native_event", src, native_event_type="session", status="new"),
              _event(2, "native_diagnostic", src, diagnostic_type="budget", detail={"kind": "budget"}),
              _event(3, "task_completion", src, status="completed" if broken else "budget_exhausted",
                     child_principal_id=None, content={}),
              _event(9, "conversation_turn_finished", "runner", exit_code=code, status="ok" if code == 0 else "error")]
    probe = {"requests": [{"index": i, "kind": "main", "action": "shell", "principal": "main", "status": 200}
                          for i in range(1, 6)], "final_text": None}
    gateway = [{"index": i, "status": 200, "error": None} for i in range(1, 6)]
    return VerifierContext(workspace=ws, baseline=PACK / "workspace", truth=truth, oracle=None, events=events,
                           gateway=gateway, probe=probe, ledgers={}, run_dir=ws)


def selftest():
    with tempfile.TemporaryDirectory() as tmp:
        good = score.score(_context(Path(tmp), broken=False))
        assert all(v[0] for v in good.values()), good
        bad = score.score(_context(Path(tmp), broken=True))
        failed = {k for k, v in bad.items() if not v[0]}
        assert failed == {score.H2}, bad


if __name__ == "__main__":
    selftest()
    print("selftest ok")
