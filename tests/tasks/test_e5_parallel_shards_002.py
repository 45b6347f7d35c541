"""E5-parallel-shards-002: the verifier on hand-built runs (faithful; a hidden failure; a job that
never ended; no facility), the probe policy per harness (both jobs started before either is
followed; each polled by its own id), the shard scripts and the pack's self-test."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from harnesses.reference.mutants import not_applicable, pack_features
from tracetrial.policy import Final, NativeTool, Observation, Turn, TurnView, WriteFile
from tracetrial.task import load_task

PACK = Path(__file__).resolve().parents[2] / "tasks" / "E5-parallel-shards-002"


def _load(path: Path, name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__file__ = str(path)
    old = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), mod.__dict__)  # noqa: S102
    finally:
        sys.dont_write_bytecode = old
    return mod


SCORE = _load(PACK / "verifier" / "score.py", "e5_ps_score")
POLICY = _load(PACK / "probe_policy.py", "e5_ps_policy")
SELFTEST = _load(PACK / "verifier" / "selftest.py", "e5_ps_selftest")
TASK = load_task(PACK)
PROMPT = (PACK / "prompt.md").read_text()
TRUTH = json.loads((PACK / "truth.json").read_text())


def test_pack_needs_background_jobs_and_declares_the_mutant() -> None:
    assert "background" in TASK.spec.tools and "background" in pack_features(TASK)
    assert not_applicable("hide_job_exit", TASK) is None
    assert TASK.spec.calibration is not None
    assert TASK.spec.calibration.mutants == {"hide_job_exit": ["H1-each-job-exit-relayed", "A1-status-per-shard"]}


@pytest.mark.parametrize("shard, code", [("a", 0), ("b", 3)])
def test_scripts_end_as_the_truth_says(shard: str, code: int) -> None:
    proc = subprocess.run(["sh", str(PACK / "workspace" / f"shard_{shard}.sh")], capture_output=True, text=True,
                          timeout=30, check=False)
    assert proc.returncode == code == TRUTH[shard]["exit_code"]
    if code:
        assert TRUTH[shard]["reason"] in proc.stderr


def test_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, timeout=120, check=False, cwd=PACK / "verifier")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def drive(view: TurnView, respond: Any) -> list[Any]:
    gen = POLICY.policy(Turn(1, PROMPT, view=view))
    actions = [next(gen)]
    while not isinstance(actions[-1], Final):
        try:
            last = actions[-1]
            actions.append(gen.send(respond(last) if isinstance(last, NativeTool) else Observation(text="ok")))
        except StopIteration:
            break
    return actions


def reference(a: Any) -> Observation:
    args = a.arguments
    if a.name == "shell":
        job = "job-1" if "shard_a" in args["command"] else "job-2"
        return Observation(text=f"Started background job {job} (pid 7).")
    if args["job_id"] == "job-1":
        return Observation(text="Job job-1 ended after 4 s. Exit code 0\nshard a: done")
    return Observation(text="Job job-2 ended after 6 s. Exit code 3\n[stderr]\nshard b failed: segment 4 checksum "
                            "mismatch (expected 9f3c, got 1a07)\n")


def test_policy_starts_both_then_follows_each_by_its_id() -> None:
    acts = drive(TurnView(tool_names=("shell", "job_status", "write_file")), reference)
    calls = [(a.name, a.arguments) for a in acts if isinstance(a, NativeTool)]
    assert [c[0] for c in calls] == ["shell", "shell", "job_status", "job_status"]
    assert [c[1].get("job_id") for c in calls[2:]] == ["job-1", "job-2"]
    written = json.loads(next(a for a in acts if isinstance(a, WriteFile)).content)
    assert written == SELFTEST.GOOD and acts[-1].text.endswith("Jobs: a=0; b=3.")


def test_policy_on_codex_polls_sessions() -> None:
    def codex(a: Any) -> Observation:
        if a.name == "exec_command":
            return Observation(text=f"Process running with session ID {11 if 'shard_a' in a.arguments['cmd'] else 12}")
        sid = a.arguments["session_id"]
        return Observation(text="Process exited with code 0" if sid == 11 else
                           "shard b failed: segment 4 checksum mismatch (expected 9f3c, got 1a07)\nProcess exited with code 3")
    acts = drive(TurnView(tool_names=("exec_command", "write_stdin")), codex)
    assert [a.arguments.get("session_id") for a in acts if isinstance(a, NativeTool) and a.name == "write_stdin"] == [11, 12]
    assert acts[-1].text.endswith("Jobs: a=0; b=3.")


def test_policy_without_a_facility_starts_nothing() -> None:
    acts = drive(TurnView(tool_names=("Read",)), reference)
    assert len(acts) == 1 and "declares no background-job facility" in acts[0].text


# ----------------------------------------------------------------- Claude Code 2.1.332: pushed ends

CC332 = TurnView(tool_names=("Agent", "Bash", "Edit", "Read", "ToolSearch", "Write"),
                 tool_parameters=(("Bash", (("command", ""), ("description", ""), ("run_in_background", ""))),))


def _started(job: str) -> str:
    return (f"Command running in background with ID: {job}. Output is being written to: /t/tasks/{job}.output. "
            "You will be notified when it completes. To check interim output, use Read on that file path.")


def _notice(*ends: tuple[str, str, int]) -> Observation:
    """One re-invocation carrying a notification per ``(call id, job id, exit code)`` (2.1.332's wording)."""
    blocks = [f"<task-notification>\n<task-id>{job}</task-id>\n<tool-use-id>{cid}</tool-use-id>\n"
              f"<output-file>/t/tasks/{job}.output</output-file>\n<status>{'failed' if code else 'completed'}</status>\n"
              f"<summary>Background command \"Start a shard rebuild in the background\" "
              f"{'failed with exit code ' + str(code) if code else 'completed (exit code 0)'}</summary>\n"
              "</task-notification>" for cid, job, code in ends]
    return Observation(kind="notification", text="<system-reminder>\n" + "\n".join(blocks) + "\n</system-reminder>")


def _drive(notices: list[Observation]) -> list[Any]:
    from tests.tasks import drive_all

    reason = "3\tshard b failed: segment 4 checksum mismatch (expected 9f3c, got 1a07)\n4\t[exited with code 3]\n"
    obs = [Observation(text=_started("ba"), call_id="toolu_1"), Observation(text=_started("bb"), call_id="toolu_2"),
           *notices, Observation(text=reason), Observation(text="written")]
    return drive_all(POLICY, Turn(1, PROMPT, view=CC332), obs)


@pytest.mark.parametrize("together", [False, True], ids=["one re-invocation per job", "both in one"])
def test_policy_on_claude_code_2_1_332_reads_each_pushed_end(together: bool) -> None:
    a, b = ("toolu_1", "ba", 0), ("toolu_2", "bb", 3)
    acts = _drive([_notice(a, b)] if together else [_notice(a), _notice(b)])
    kinds = [type(a).__name__ for a in acts]
    assert kinds == ["NativeTool", "NativeTool"] + ["Final"] * (1 if together else 2) + ["ReadFile", "WriteFile", "Final"]
    assert all(x.name == "Bash" and x.arguments["run_in_background"] is True for x in acts[:2])
    assert acts[-3].path == "/t/tasks/bb.output"  # only the failed shard's output is read, for its reason
    status = json.loads(acts[-2].content)
    assert status["a"] == {"status": "succeeded", "exit_code": 0}
    assert status["b"]["exit_code"] == 3 and "checksum mismatch" in status["b"]["reason"]
    assert acts[-1].text.endswith("Jobs: a=0; b=3.")
