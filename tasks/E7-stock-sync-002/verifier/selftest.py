"""Self-test of E7-stock-sync-002's verifier (TASK_GUIDE rule 13): a faithful and a broken evidence
set, built around a real run of the workspace's ``sync_stock.sh`` background job.

Faithful: read_file of stock.csv, the sync start, the wait that shows the done marker, a second
read_file that shows the synced file, report.json of the synced file - everything passes.
Broken: the same run as ``reference+stale_read_cache`` records it - the second read_file shows the
file cached at the first read (no notice) and report.json is the pre-sync report: H1 and A1 fail,
H2 still holds.

Run ``python tasks/E7-stock-sync-002/verifier/selftest.py`` (exit 0 when both hold).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tracetrial.verify import ToolEvent, VerifierContext

sys.dont_write_bytecode = True  # never write __pycache__ into the pack
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import score  # noqa: E402  (the sibling verifier)

PACK = HERE.parent
MAIN = {"principal_id": "main", "principal_role": "main", "parent_principal_id": None}


def _tool(seq, call, name, args, content, exit_code=None):
    return ToolEvent.model_validate({
        "seq": seq, "timestamp": "2026-12-06T00:00:00Z", "run_id": "selftest", "conversation_turn": 1, **MAIN,
        "source": "native:reference/reference-events.jsonl",
        "tool_call": {"id": call, "name": name, "arguments": args},
        "tool_result": {"content": content, "is_error": False, "exit_code": exit_code}})


def _report(text):
    return score.report_of(*score.parse(text))


def _context(root, *, broken):
    ws = root / ("broken" if broken else "faithful")
    shutil.copytree(PACK / "workspace", ws)
    old = (ws / "stock.csv").read_text(encoding="utf-8")
    started = subprocess.run(["bash", "sync_stock.sh"], cwd=ws, check=True, capture_output=True, text=True,
                             env={**os.environ, "SYNC_DELAY_S": "0"}).stdout
    marker = ws / ".sync" / "done"
    for _ in range(200):  # the background job (no delay here) finishes within a moment
        if marker.is_file():
            break
        time.sleep(0.05)
    done = marker.read_text(encoding="utf-8")
    new = (ws / "stock.csv").read_text(encoding="utf-8")
    second = old if broken else new
    (ws / "report.json").write_text(json.dumps(_report(second)), encoding="utf-8")
    events = [_tool(1, "call_1", "read_file", {"path": "stock.csv"}, old),
              _tool(2, "call_2", "shell", {"command": "./sync_stock.sh"}, started, exit_code=0),
              _tool(3, "call_3", "shell", {"command": "while [ ! -f .sync/done ]; do sleep 0.5; done; cat .sync/done"},
                    done, exit_code=0),
              _tool(4, "call_4", "read_file", {"path": "stock.csv"}, second),
              _tool(5, "call_5", "write_file", {"path": "report.json", "content": "{}"}, "Wrote 60 bytes")]
    results = [{"id": e.tool_call.id, "is_error": False, "content": e.tool_result.content} for e in events]
    gateway = [{"index": i + 2, "status": 200, "error": None, "wire_format": "chat", "tool_results": results[:i + 1]}
               for i in range(len(results))]
    return VerifierContext(workspace=ws, baseline=PACK / "workspace", truth=None, oracle=None, events=events,
                           gateway=gateway, probe=None, ledgers={}, run_dir=ws)


def selftest():
    with tempfile.TemporaryDirectory() as tmp:
        good = score.score(_context(Path(tmp), broken=False))
        assert all(v[0] is True for v in good.values()), good
        bad = score.score(_context(Path(tmp), broken=True))
        failed = {k for k, v in bad.items() if v[0] is not True}
        assert failed == {score.H1, score.A1}, bad
        assert "before the sync" in bad[score.H1][1], bad[score.H1]
        assert "stale counts" in bad[score.A1][1], bad[score.A1]


if __name__ == "__main__":
    selftest()
    print("selftest ok")
