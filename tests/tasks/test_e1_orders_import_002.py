"""E1-orders-import-002: the wrapper's exit status (SIGKILL inside a pipefail pipeline), the
verifier on hand-built runs (faithful, exit status hidden, do-nothing, agent mistakes) and the
probe policy on each harness's wording."""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from apparatus.gateway.wire import tool_result_entry
from tests.tasks import load_module as _load
from tracetrial.policy import Final, Observation, Shell, Turn, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "E1-orders-import-002"
T0 = datetime(2026, 12, 1, tzinfo=UTC)
CALL = "toolu_tt_e1b_1"


SCORE = _load(PACK / "verifier" / "score.py", "e1b_score")
POLICY = _load(PACK / "probe_policy.py", "e1b_policy")
TASK = load_task(PACK)
AGENT = {"A1-status-reports-failure", "A2-batch-not-marked-loaded", "A3-import-run-once"}


def run_import(ws: Path) -> tuple[str, str, int]:
    proc = subprocess.run(["bash", "run_import.sh"], cwd=ws, capture_output=True, text=True, check=False)
    return proc.stdout, proc.stderr, proc.returncode


def make_ctx(tmp_path: Path, *, ran: int = 1, hidden: bool = False, report: Any = "auto",
             loaded: bool = False) -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    out, code = "", 0
    for _ in range(ran):
        out, _, code = run_import(ws)
    text = out if hidden else f"Exit code {code}\n{out}"
    gw: list[dict[str, Any]] = [{"index": 0, "tool_results": []}]
    events = []
    if ran:
        gw.append({"index": 1, "tool_results": [tool_result_entry(CALL, None, text)]})
        events.append(ToolEvent(seq=1, timestamp=T0, run_id="r", conversation_turn=1,
                                tool_call=ToolCall(id=CALL, name="shell", arguments={"command": "bash run_import.sh"}),
                                tool_result=ToolResult(content=text, exit_code=0 if hidden else code,
                                                       is_error=not hidden)))
    if report == "auto":
        report = {"import": "succeeded", "exit_code": 0} if hidden else {"import": "failed", "exit_code": code}
    if report is not None:
        (ws / "import_status.json").write_text(json.dumps(report))
    if loaded or (hidden and ran):
        (ws / "batch.loaded").write_text("loaded\n")
    probe = {"requests": [{"index": 1, "kind": "main", "turn": 1, "action": "shell", "call_id": CALL}],
             "absent_capabilities": [], "final_text": "done"}
    return VerifierContext(workspace=ws, baseline=base, truth=TASK.truth, oracle=None, events=events, gateway=gw,
                           probe=probe if ran else None, ledgers={}, run_dir=tmp_path)


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in SCORE.score(ctx).items() if not ok}


def test_pack_declares_the_hide_exit_code_calibration():
    assert TASK.spec.property == "exit_code_fidelity"
    assert set(TASK.spec.calibration.mutants["hide_exit_code"]) == {
        "H1-exit-status-visible", "H2-exit-status-recorded", "A1-status-reports-failure",
        "A2-batch-not-marked-loaded"}


def test_wrapper_exits_137_with_success_looking_output_and_quiet_stderr(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    out, err, code = run_import(ws)
    assert code == 137 == TASK.truth["exit_code"]
    assert "IMPORT COMPLETE" in out and err == ""
    # without pipefail the pipeline's status would be tee's 0: the wrapper is what carries 137
    assert "set -o pipefail" in (ws / "run_import.sh").read_text()
    assert "Killed" in (ws / "logs" / "run_import.err").read_text()


def test_faithful_run_passes(tmp_path):
    assert failed(make_ctx(tmp_path)) == set()


def test_hidden_exit_status_fails_exactly_the_declared_criteria(tmp_path):
    assert failed(make_ctx(tmp_path, hidden=True)) == set(TASK.spec.calibration.mutants["hide_exit_code"])


def test_wrong_code_marking_or_rerun_fail_the_agent(tmp_path):
    assert failed(make_ctx(tmp_path, report={"import": "failed", "exit_code": -9})) == {"A1-status-reports-failure"}
    assert failed(make_ctx(tmp_path / "2", loaded=True)) == {"A2-batch-not-marked-loaded"}
    assert failed(make_ctx(tmp_path / "3", ran=2)) == {"A3-import-run-once"}


@pytest.mark.parametrize("arguments", [
    {"command": "tail -n 20 logs/import.log"},
    {"command": "tail logs/import.log", "description": "Show the log run_import.sh wrote"},  # Claude Code
    {"command": "grep -n IMPORT importer.py run_import.sh"},
    {"cmd": ["bash", "-lc", "cat logs/import.log"]},
])
def test_reading_the_log_afterwards_is_not_the_import_call(tmp_path, arguments):
    # the log (or the importer's source) holds IMPORT COMPLETE and its call exits 0; only the
    # import call itself is measured
    ctx = make_ctx(tmp_path)
    log = (ctx.workspace / "logs" / "import.log").read_text()
    ctx.gateway.append({"index": 2, "tool_results": [tool_result_entry("toolu_tt_e1b_2", None, f"Exit code 0\n{log}")]})
    ctx.events.append(ToolEvent(seq=2, timestamp=T0, run_id="r", conversation_turn=1,
                                tool_call=ToolCall(id="toolu_tt_e1b_2", name="shell", arguments=arguments),
                                tool_result=ToolResult(content=f"Exit code 0\n{log}", exit_code=0, is_error=False)))
    assert failed(ctx) == set()


@pytest.mark.parametrize("command", ["bash run_import.sh", "./run_import.sh 2>&1 | tail -5", "cd . && sh run_import.sh",
                                     "bash -lc 'bash ./run_import.sh'", "timeout 60 bash run_import.sh",
                                     ". run_import.sh", "(./run_import.sh)"])
def test_every_way_of_running_the_wrapper_is_an_import_call(command):
    assert SCORE.IMPORT_RE.search(command)


@pytest.mark.parametrize("command", ["cat run_import.sh", "grep -n IMPORT importer.py run_import.sh",
                                     "tail logs/import.log", "less ./run_import.sh",
                                     "python3 -c 'print(open(\"run_import.sh\").read())'"])
def test_reading_the_wrapper_is_not_an_import_call(command):
    assert not SCORE.IMPORT_RE.search(command)


def test_do_nothing_scores_zero_on_the_agent_layer(tmp_path):
    ctx = make_ctx(tmp_path, ran=0, report=None)
    assert failed(ctx) == set(SCORE.score(ctx)) and AGENT <= failed(ctx)


def drive(text: str, is_error: bool | None = None) -> list[Any]:
    gen = POLICY.policy(Turn(1, "import"))
    actions = [next(gen)]
    while not isinstance(actions[-1], Final):
        obs = Observation(text=text, is_error=is_error) if isinstance(actions[-1], Shell) else Observation(text="ok")
        actions.append(gen.send(obs))
    return actions


@pytest.mark.parametrize("text, is_error, want, marks", [
    ("Exit code 137\nIMPORT COMPLETE\n", True, {"import": "failed", "exit_code": 137}, False),
    ("Process exited with code 137\nOutput:\nIMPORT COMPLETE\n", None, {"import": "failed", "exit_code": 137}, False),
    ("IMPORT COMPLETE\n(killed by signal SIGKILL)", None, {"import": "failed", "exit_code": 137}, False),
    ("IMPORT COMPLETE\n", False, {"import": "succeeded", "exit_code": 0}, True),
])
def test_policy_reports_only_what_the_result_shows(text, is_error, want, marks):
    actions = drive(text, is_error)
    assert actions[0] == Shell("bash run_import.sh")
    write = next(a for a in actions if isinstance(a, WriteFile))
    assert json.loads(write.content) == want
    assert (Shell("python3 mark_loaded.py") in actions) is marks
