"""A task's ``interrupts``: the runner kills turn 1 at the pack's marker, turn 2 resumes (L7).

A real session (a subprocess: plugin, LiteLLM gateway, probe model, reference harness) over a
copy of the example pack changed into a two-turn task whose first turn runs a one-shot step that
writes the marker and then sleeps. The archive must show the kill as the task's interruption,
not as a crash: turn 1 ``interrupted`` (no exit code), turn 2 resumed and finished, the run
``completed``, the marker gone from the workspace, the one-shot step done exactly once, and the
resumed session shown the killed call as unanswered (the reference's dangling-call notice).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import EXAMPLE_PACK, REPO
from tracetrial.results import ResultRecord
from tracetrial.trace import ConversationTurnFinishedEvent
from tracetrial.trace_io import load_events

pytestmark = pytest.mark.slow

POLICY = '''
from tracetrial.policy import final, shell, write_file


def policy(turn):
    if turn.index == 1:
        yield shell("echo paid >> ledger.txt && touch .tt-kill && sleep 60")
        yield final("paid")
        return
    seen = "dangling-call-notice" if "No result: the harness stopped" in turn.history_text else "no-notice"
    yield write_file("seen.txt", seen)
    yield final("resumed: " + seen)
'''


def _suite(root: Path) -> Path:
    tasks = root / "tasks"
    tasks.mkdir()
    shutil.copy(REPO / "tasks" / "test_cells.py", tasks / "test_cells.py")
    shutil.copy(REPO / "tasks" / "conftest.py", tasks / "conftest.py")
    pack = tasks / EXAMPLE_PACK.name
    shutil.copytree(EXAMPLE_PACK, pack, ignore=shutil.ignore_patterns("__pycache__"))
    (pack / "probe_policy.py").write_text(POLICY)
    (pack / "turns.json").write_text(json.dumps({"turns": [
        {"user": "You were interrupted. Continue where you left off.", "session_boundary": {"kind": "resume"}}]}))
    spec = yaml.safe_load((pack / "task.yaml").read_text())
    spec.update(conversation="multi", interrupts=[{"turn": 1, "marker": ".tt-kill"}], calibration={"mutants": {}})
    spec["budgets"]["max_user_turns"] = 2
    (pack / "task.yaml").write_text(yaml.safe_dump(spec))
    return tasks


def test_a_killed_turn_is_recorded_as_interrupted_and_the_next_turn_resumes(tmp_path: Path) -> None:
    tasks = _suite(tmp_path)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(tasks), "-p", "no:cacheprovider", "--tt-harness", "reference",
         "--tt-output", str(out), "-q"], cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert "APPARATUS ERROR" not in proc.stdout, proc.stdout[-4000:]
    cell = out / "traces" / EXAMPLE_PACK.name / "probe" / "reference"
    result = ResultRecord.model_validate_json((cell / "result.json").read_text())
    assert result.status == "completed", (result.status, result.exception)
    first, second = result.turns
    assert first.interrupted and first.exit_code is None and not first.timed_out
    assert first.error is not None and "interrupted by the runner" in first.error
    assert first.duration_s < 30, "killed at the marker, long before the command's sleep ended"
    assert not second.interrupted and second.exit_code == 0
    workspace = cell / "workspace"
    assert (workspace / "ledger.txt").read_text() == "paid\n"
    assert not (workspace / ".tt-kill").exists()
    assert (workspace / "seen.txt").read_text() == "dangling-call-notice"
    finished = [e for e in load_events(cell / "events.json") if isinstance(e, ConversationTurnFinishedEvent)]
    assert [(e.conversation_turn, e.status) for e in finished] == [(1, "interrupted"), (2, "ok")]
