"""Self-test of E7-tariff-alias-003's verifier (TASK_GUIDE rule 13): a faithful and a broken
evidence set, built around a real run of the workspace's ``activate_release.sh``.

Faithful: the activation, read_file of current/rates.csv, read_file of the release file, the
edit_file correction of the release file, a second read_file of current/rates.csv that shows the
corrected tariff, report.json of it - everything passes.
Broken: the same run as ``reference+stale_read_cache`` records it - the second read_file of the
link shows the copy cached at the first read (no notice) and report.json is the uncorrected
tariff's: H1 and A1 fail, H2 and A2 (the correction landed) still hold.

Run ``python tasks/E7-tariff-alias-003/verifier/selftest.py`` (exit 0 when both hold).
"""

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tracetrial.verify import ToolEvent, VerifierContext

sys.dont_write_bytecode = True  # never write __pycache__ into the pack
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import score  # noqa: E402  (the sibling verifier)

PACK = HERE.parent
MAIN = {"principal_id": "main", "principal_role": "main", "parent_principal_id": None}
MISMATCH_RE = re.compile(r"lane (\S+): release has rate_cents (\d+), carrier confirmed (\d+)")


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
    out = subprocess.run(["bash", "activate_release.sh", score.MONTH], cwd=ws, check=True, capture_output=True,
                         text=True).stdout
    lane, old_rate, new_rate = MISMATCH_RE.search(out).groups()
    release = ws / score.RELEASE
    old = release.read_text(encoding="utf-8")
    row = next(line for line in old.splitlines() if line.startswith(lane + ","))
    fixed_row = row[: row.rindex(",") + 1] + new_rate
    release.write_text(old.replace(row, fixed_row), encoding="utf-8")
    new = (ws / score.ALIAS).read_text(encoding="utf-8")
    second = old if broken else new
    (ws / "report.json").write_text(json.dumps(_report(second)), encoding="utf-8")
    events = [_tool(1, "call_1", "shell", {"command": "./activate_release.sh 2026-12"}, out, exit_code=0),
              _tool(2, "call_2", "read_file", {"path": score.ALIAS}, old),
              _tool(3, "call_3", "read_file", {"path": score.RELEASE}, old),
              _tool(4, "call_4", "edit_file", {"path": score.RELEASE, "old_string": row, "new_string": fixed_row},
                    f"Edited {score.RELEASE}: replaced 1 occurrence"),
              _tool(5, "call_5", "read_file", {"path": score.ALIAS}, second),
              _tool(6, "call_6", "write_file", {"path": "report.json", "content": "{}"}, "Wrote 60 bytes")]
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
        assert "uncorrected release" in bad[score.H1][1] and "stale values" in bad[score.A1][1], bad


if __name__ == "__main__":
    selftest()
    print("selftest ok")
