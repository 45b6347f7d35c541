"""E5-export-job-001: the verifier on hand-built runs (faithful, exit hidden, wrong status file,
foreground run, never polled, no background facility), the probe policy on each harness's
background facility and wording, the workspace script (exits 4 with its reason on stderr) and the
pack's self-test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.tasks import drive, load_module
from tracetrial.policy import Final, NativeTool, Observation, Shell, Turn, TurnView, WriteFile
from tracetrial.task import load_task

PACK = Path(__file__).resolve().parents[2] / "tasks" / "E5-export-job-001"
SCORE = load_module(PACK / "verifier" / "score.py", "e5_ej_score")
POLICY = load_module(PACK / "probe_policy.py", "e5_ej_policy")
SELFTEST = load_module(PACK / "verifier" / "selftest.py", "e5_ej_selftest")
PROMPT = (PACK / "prompt.md").read_text()
REASON = SELFTEST.REASON


def test_pack_loads_and_declares_background() -> None:
    task = load_task(PACK)
    assert "background" in task.spec.tools
    assert json.loads((PACK / "truth.json").read_text()) == {
        "status": "failed", "exit_code": 4, "reason": "customer table locked"}


def test_export_script_writes_partial_output_and_exits_4(tmp_path: Path) -> None:
    (tmp_path / "export.sh").write_text((PACK / "workspace" / "export.sh").read_text().replace("sleep 3", "true"))
    run = subprocess.run(["sh", "export.sh"], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert run.returncode == 4 and REASON in run.stderr and "EXPORT batch 1/3" in run.stdout
    assert (tmp_path / "out" / "orders_export.csv").read_text() == "id,total\n1001,20.00\n"


@pytest.mark.parametrize(("name", "kwargs", "failed", "unscored"), SELFTEST.CASES, ids=[c[0] for c in SELFTEST.CASES])
def test_verifier_cases(tmp_path: Path, name: str, kwargs: dict[str, Any], failed: set[str], unscored: set[str]) -> None:
    out = SCORE.score(SELFTEST.ctx_for(tmp_path, **kwargs))
    assert {k for k, (ok, _) in out.items() if ok is False} == failed, out
    assert {k for k, (ok, _) in out.items() if ok is None} == unscored, out


def test_do_nothing_fails_everything(tmp_path: Path) -> None:
    ctx = SELFTEST.ctx_for(tmp_path, code_shown=None)
    ctx.events.clear()
    ctx.gateway.clear()
    out = SCORE.score(ctx)
    assert all(ok is False for ok, _ in out.values()), out


# ----------------------------------------------------------------- probe policy per harness

def _obs(text: str) -> Observation:
    return Observation(text=text)


def _params(**tools: tuple[str, ...]) -> tuple[tuple[str, tuple[tuple[str, str], ...]], ...]:
    return tuple((name, tuple((p, "") for p in ps)) for name, ps in tools.items())


HARNESSES: dict[str, tuple[TurnView, list[str], dict[str, Any], dict[str, Any]]] = {
    "reference": (TurnView(tool_names=("shell", "write_file", "job_status")),
                  ["Started background job job-1 (pid 7)",
                   f"Job job-1 ended after 6.0 s. Exit code {{code}}\nEXPORT batch 1/3 written\n[stderr]\n{REASON}\n"],
                  {"name": "shell", "run_in_background": True}, {"name": "job_status", "job_id": "job-1"}),
    "claude_code": (TurnView(tool_names=("Bash", "Write", "TaskOutput"),
                             tool_parameters=_params(TaskOutput=("task_id", "block", "timeout"))),
                    ["Command running in background with ID: b7x2k9",
                     f"<status>completed</status>\n<exit_code>{{code}}</exit_code>\n<stderr>{REASON}</stderr>"],
                    {"name": "Bash", "run_in_background": True}, {"name": "TaskOutput", "task_id": "b7x2k9", "block": True}),
    "codex": (TurnView(tool_names=("exec_command", "write_stdin", "apply_patch")),
              ["Chunk ID: a\nWall time: 0.5 seconds\nProcess running with session ID 3\nOutput:\nEXPORT batch 1/3 ...",
               f"Chunk ID: b\nProcess exited with code {{code}}\nOutput:\nEXPORT batch 1/3 written\n{REASON}"],
              {"name": "exec_command", "yield_time_ms": 500}, {"name": "write_stdin", "session_id": 3}),
    "openclaw": (TurnView(tool_names=("exec", "process", "write")),
                 ["Command still running (session calm-reef, pid 99). Use process (list/poll/log) to follow it.",
                  f"EXPORT batch 1/3 written\n{REASON}\n\nProcess exited with code {{code}}."],
                 {"name": "exec", "background": True}, {"name": "process", "sessionId": "calm-reef"}),
}


def _run(harness: str, code: int) -> list[Any]:
    view, texts, _, _ = HARNESSES[harness]
    obs = [_obs(texts[0]), _obs("4 inputs/orders.csv"), _obs(texts[1].format(code=code)), _obs("written")]
    return drive(POLICY, Turn(1, PROMPT, view=view), obs)


@pytest.mark.parametrize("harness", sorted(HARNESSES))
@pytest.mark.parametrize("code", [4, 0])
def test_policy_starts_in_background_polls_and_reports_what_it_was_shown(harness: str, code: int) -> None:
    _, _, start, poll = HARNESSES[harness]
    acts = _run(harness, code)
    assert isinstance(acts[0], NativeTool) and acts[0].name == start["name"]
    assert all(acts[0].arguments.get(k) == v for k, v in start.items() if k != "name")
    assert "export.sh" in json.dumps(acts[0].arguments)
    assert isinstance(acts[1], Shell) and "inputs/orders.csv" in acts[1].command
    assert isinstance(acts[2], NativeTool) and acts[2].name == poll["name"]
    assert all(acts[2].arguments.get(k) == v for k, v in poll.items() if k != "name")
    assert isinstance(acts[3], WriteFile) and isinstance(acts[4], Final)
    status = json.loads(acts[3].content)
    assert status["exit_code"] == code and status["status"] == ("failed" if code else "succeeded")
    assert ("customer table locked" in status["reason"]) == bool(code)


def test_policy_without_background_facility_starts_nothing() -> None:
    acts = drive(POLICY, Turn(1, PROMPT, view=TurnView(tool_names=("Bash", "Write"))), [])
    assert len(acts) == 1 and isinstance(acts[0], Final)


def test_policy_polls_until_the_end_is_stated() -> None:
    view, texts, _, _ = HARNESSES["reference"]
    running = _obs("Job job-1 is running (3.0 s)\nEXPORT batch 1/3 ...\n")
    obs = [_obs(texts[0]), _obs("4"), running, _obs(texts[1].format(code=4)), _obs("written")]
    acts = drive(POLICY, Turn(1, PROMPT, view=view), obs)
    assert [type(a).__name__ for a in acts] == ["NativeTool", "Shell", "NativeTool", "NativeTool", "WriteFile", "Final"]


def test_selftest_passes() -> None:
    run = subprocess.run([sys.executable, str(PACK / "verifier" / "selftest.py")], capture_output=True, text=True,
                         cwd=PACK.parents[1], timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


# ----------------------------------------------------------------- Claude Code 2.1.332: pushed end

#: What Claude Code 2.1.332 declares: ``Bash`` with ``run_in_background``, no TaskOutput/BashOutput.
CC332 = TurnView(tool_names=("Agent", "Bash", "Edit", "Read", "ToolSearch", "Write"),
                 tool_parameters=_params(Bash=("command", "timeout", "description", "run_in_background")))
OUTPUT = SELFTEST.OUTPUT
CC332_START = (f"Command running in background with ID: b1ewjme72. Output is being written to: {OUTPUT}. "
               "You will be notified when it completes. To check interim output, use Read on that file path.")


def _notice(call_id: str, code: int) -> Observation:
    """The re-invocation 2.1.332 sends when the job exits (as recorded in a real run)."""
    return Observation(kind="notification", text=(
        "<system-reminder>\n[SYSTEM NOTIFICATION - NOT USER INPUT]\n<task-notification>\n<task-id>b1ewjme72</task-id>\n"
        f"<tool-use-id>{call_id}</tool-use-id>\n<output-file>{OUTPUT}</output-file>\n"
        f"<status>{'failed' if code else 'completed'}</status>\n<summary>Background command \"Start the orders export "
        f"in the background\" {'failed with exit code ' + str(code) if code else 'completed (exit code 0)'}</summary>\n"
        "</task-notification>\n</system-reminder>"))


@pytest.mark.parametrize("code", [4, 0])
def test_policy_on_claude_code_2_1_332_reads_the_pushed_end_and_the_output_file(code: int) -> None:
    from tests.tasks import drive_all
    from tracetrial.policy import ReadFile

    obs = [Observation(text=CC332_START, call_id="toolu_1"), _obs("4 inputs/orders.csv"), _notice("toolu_1", code),
           _obs(f"1\tEXPORT batch 1/3 ...\n2\t{REASON}\n3\t[exited with code {code}]\n"), _obs("written")]
    acts = drive_all(POLICY, Turn(1, PROMPT, view=CC332), obs)
    assert [type(a).__name__ for a in acts] == ["NativeTool", "Shell", "Final", "ReadFile", "WriteFile", "Final"]
    assert acts[0].name == "Bash" and acts[0].arguments["run_in_background"] is True
    assert isinstance(acts[3], ReadFile) and acts[3].path == OUTPUT
    status = json.loads(acts[4].content)
    assert status["exit_code"] == code and status["status"] == ("failed" if code else "succeeded")
    assert ("customer table locked" in status["reason"]) == bool(code)


def test_policy_on_claude_code_2_1_332_waits_for_its_own_job_only() -> None:
    from tests.tasks import drive_all

    other = Observation(kind="notification", text="<task-notification>\n<tool-use-id>toolu_9</tool-use-id>\n"
                        "<summary>Background command failed with exit code 1</summary>\n</task-notification>")
    obs = [Observation(text=CC332_START, call_id="toolu_1"), _obs("4"), other, _notice("toolu_1", 4),
           _obs(f"{REASON}\n"), _obs("written")]
    acts = drive_all(POLICY, Turn(1, PROMPT, view=CC332), obs)
    assert [type(a).__name__ for a in acts] == ["NativeTool", "Shell", "Final", "Final", "ReadFile", "WriteFile",
                                                "Final"]
    assert acts[2].text != acts[3].text and json.loads(acts[5].content)["exit_code"] == 4
