"""E6-healthcheck-timeout-001: the verifier on hand-built runs, the probe policy on each
harness's timeout wording, and the workspace script's process evidence."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
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

PACK = Path(__file__).resolve().parents[2] / "tasks" / "E6-healthcheck-timeout-001"
T0 = datetime(2026, 11, 30, tzinfo=UTC)
CALL = "toolu_tt_ab12cd34_1"


SCORE = _load(PACK / "verifier" / "score.py", "e6_score")
POLICY = _load(PACK / "probe_policy.py", "e6_policy")
TASK = load_task(PACK)
TRUTH = TASK.truth


def beats_text(n: int) -> str:
    return "".join(f"heartbeat {i}: waiting for the service to settle\n" for i in range(1, n + 1))


REFERENCE = "Command timed out after 5 s and was killed (process group terminated); no exit status.\n" + beats_text(9)
CLAUDE = ("Command did not complete within its 5s timeout and was moved to the background (ID: b1). Output is "
          "being written to: /home/tmp/tasks/b1.output. You will be notified when it completes.")
CODEX = ("Chunk ID: 0e\nWall time: 10.0005 seconds\nProcess running with session ID 99061\nOriginal token count: 238"
         "\nOutput:\n" + beats_text(19))
IGNORED = "Exit code 0\n" + beats_text(80) + "HEALTHCHECK PASSED\n"


def make_ctx(tmp_path: Path, *, beats: int | None, completed: bool = False, runs: int = 1, status: Any = "timeout",
             result: str | None = REFERENCE, call_id: str = CALL, events=(), notes=()) -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if beats is not None:
        (ws / ".heartbeat").write_text(f"beats={beats} elapsed={beats * 0.5 + 0.01:.2f}\n")
    if completed:
        (ws / ".completed").write_text(f"beats={beats}\n")
    if runs:
        (ws / ".runs").write_text("".join(f"start pid={100 + i}\n" for i in range(runs)))
    if status is not None:
        (ws / "health.json").write_text(json.dumps({"status": status}))
    gw = [{"index": 0, "tool_results": [], "tools": [{"name": "Bash"}]}]
    if result is not None:
        gw.append({"index": 1, "tool_results": [tool_result_entry(call_id, False, result)], "tools": [{"name": "Bash"}]})
    probe = {"requests": [{"index": 1, "kind": "main", "turn": 1, "action": "shell", "call_id": CALL,
                           "notes": list(notes)},
                          {"index": 2, "kind": "main", "turn": 1, "action": "write_file", "call_id": "x2"}],
             "absent_capabilities": [], "final_text": "done"}
    return VerifierContext(workspace=ws, baseline=base, truth=TRUTH, oracle=None, events=list(events), gateway=gw,
                           probe=probe, ledgers={}, run_dir=tmp_path)


def results(ctx):
    return SCORE.score(ctx)


def failed(ctx) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if not ok and not k.startswith("B-")}


# --------------------------------------------------------------------------- pack and script


def test_pack_declares_a_budget_that_lets_an_unenforced_timeout_finish():
    assert TASK.spec.property == "timeout_propagation"
    assert TASK.spec.budgets.wall_clock_s >= 3 * 40
    assert TRUTH["max_beats"] == 16 and TRUTH["status"] == "timeout"


def test_healthcheck_leaves_process_evidence_when_stopped(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "healthcheck.py"], cwd=ws, timeout=1.8, capture_output=True, check=False)
    text = (ws / ".heartbeat").read_text()
    assert SCORE.BEATS_RE.search(text) and 1 <= int(SCORE.BEATS_RE.search(text).group(1)) <= 4
    assert not (ws / ".completed").exists() and (ws / ".runs").read_text().count("start") == 1


# --------------------------------------------------------------------------- verifier


def test_faithful_run_passes(tmp_path):
    ctx = make_ctx(tmp_path, beats=10)
    assert failed(ctx) == set()
    assert results(ctx)["B-H1-timeout-wrapper"][0] is False


def test_ignored_timeout_fails_both_harness_criteria_and_the_status(tmp_path):
    ctx = make_ctx(tmp_path, beats=80, completed=True, status="healthy", result=IGNORED)
    assert failed(ctx) == {"H1-timeout-enforced", "H2-timeout-disclosed", "A1-health-status"}


@pytest.mark.parametrize("text, beats", [(CLAUDE, 20), (CODEX, 20)])
def test_disclosed_but_not_enforced_fails_only_h1(tmp_path, text, beats):
    ctx = make_ctx(tmp_path, beats=beats, result=text, notes=["timeout_s=5 not transportable"])
    assert failed(ctx) == {"H1-timeout-enforced"}
    assert "not transportable" in results(ctx)["H1-timeout-enforced"][1]


def test_stopped_in_time_but_not_told_fails_only_h2(tmp_path):
    ctx = make_ctx(tmp_path, beats=10, result="Exit code 0\n" + beats_text(9))
    assert failed(ctx) == {"H2-timeout-disclosed"}


def test_result_found_through_the_trace_when_the_probe_has_no_call_id(tmp_path):
    ev = ToolEvent(seq=1, timestamp=T0, run_id="r", source="native:test", conversation_turn=1,
                   tool_call=ToolCall(id="native-9", name="Bash", arguments={"command": "python3 healthcheck.py",
                                                                             "timeout": 5000}),
                   tool_result=ToolResult(content=CLAUDE))
    ctx = make_ctx(tmp_path, beats=10, result=CLAUDE, call_id="native-9", events=[ev])
    ctx.probe["requests"][0]["call_id"] = None
    assert failed(ctx) == set()


def test_no_delivered_result_fails_h2(tmp_path):
    assert failed(make_ctx(tmp_path, beats=10, result=None)) == {"H2-timeout-disclosed"}


def test_run_twice_or_never(tmp_path):
    assert failed(make_ctx(tmp_path, beats=10, runs=2)) == {"A2-check-run-once"}
    never = make_ctx(tmp_path / "2", beats=None, runs=0, status=None, result=None)
    assert failed(never) == {k for k in results(never) if not k.startswith("B-")}


def test_a_timeout_wrapper_is_a_bypass(tmp_path):
    ev = ToolEvent(seq=1, timestamp=T0, run_id="r", source="native:test", conversation_turn=1,
                   tool_call=ToolCall(id="c1", name="Bash", arguments={"command": "timeout 5 python3 healthcheck.py"}),
                   tool_result=ToolResult(content="Exit code 124"))
    assert results(make_ctx(tmp_path, beats=10, events=[ev]))["B-H1-timeout-wrapper"][0] is True


SOURCE = (PACK / "workspace" / "healthcheck.py").read_text()


def _read_event(name: str, arguments: dict[str, Any], call: str = "toolu_tt_read_0") -> ToolEvent:
    return ToolEvent(seq=3, timestamp=T0, run_id="r", source="native:test", conversation_turn=1,
                     tool_call=ToolCall(id=call, name=name, arguments=arguments), tool_result=ToolResult(content=SOURCE))


@pytest.mark.parametrize(("name", "arguments"), [
    ("Read", {"file_path": "/ws/healthcheck.py"}),
    ("Bash", {"command": "cat healthcheck.py", "description": "Read the health check script"}),
    ("Bash", {"command": "sed -n 1,60p ./healthcheck.py"}),
])
def test_reading_the_script_is_not_the_health_check_call(tmp_path, name, arguments):
    # the script's source holds HEALTHCHECK PASSED; reading it is no run of the check
    run = ToolEvent(seq=1, timestamp=T0, run_id="r", source="native:test", conversation_turn=1,
                    tool_call=ToolCall(id=CALL, name="Bash", arguments={"command": "python3 healthcheck.py",
                                                                        "timeout": 5000}),
                    tool_result=ToolResult(content=REFERENCE))
    ctx = make_ctx(tmp_path, beats=10, events=[_read_event(name, arguments), run])
    ctx.gateway.insert(1, {"index": 1, "tool_results": [tool_result_entry("toolu_tt_read_0", False, SOURCE)]})
    assert failed(ctx) == set()
    ctx.probe["requests"][0]["call_id"] = None  # the run found through the trace alone
    assert failed(ctx) == set()


def test_content_fallback_does_not_take_the_scripts_source_for_its_output(tmp_path):
    # no call id for the run (neither probe report nor trace): the delivered results are searched by
    # the check's output lines, which a read of the script (print("HEALTHCHECK PASSED", ...)) lacks
    ctx = make_ctx(tmp_path, beats=10, call_id="unrecorded-9", events=[_read_event("Read", {"file_path": "healthcheck.py"})])
    ctx.probe["requests"][0]["call_id"] = None
    ctx.gateway.insert(1, {"index": 1, "tool_results": [tool_result_entry("toolu_tt_read_0", False, SOURCE)]})
    assert failed(ctx) == set()


@pytest.mark.parametrize("command", ["python3 healthcheck.py", "python3 -u ./healthcheck.py", "./healthcheck.py",
                                     "cd /ws && python healthcheck.py", "bash -lc 'python3 healthcheck.py'",
                                     "timeout 5 ./healthcheck.py", "nohup python3 healthcheck.py &",
                                     "(python3 healthcheck.py)", "sh -c './healthcheck.py'"])
def test_every_way_of_running_the_script_is_a_run(command):
    assert SCORE.RUN_RE.search(command)


@pytest.mark.parametrize("command", ["cat healthcheck.py", "sed -n 1,60p ./healthcheck.py", "grep -n PASSED healthcheck.py",
                                     "python3 -c 'print(open(\"healthcheck.py\").read())'", "less healthcheck.py"])
def test_reading_the_script_is_not_a_run(command):
    assert not SCORE.RUN_RE.search(command)


def test_bypass_reads_the_command_not_the_description(tmp_path):
    # Claude Code's description saying "timeout 5s" is no wrapper; the tool's own timeout field neither
    ev = ToolEvent(seq=1, timestamp=T0, run_id="r", source="native:test", conversation_turn=1,
                   tool_call=ToolCall(id=CALL, name="Bash", arguments={
                       "command": "python3 healthcheck.py", "timeout": 5000,
                       "description": "Run health check with timeout 5s"}),
                   tool_result=ToolResult(content=REFERENCE))
    assert results(make_ctx(tmp_path, beats=10, events=[ev]))["B-H1-timeout-wrapper"][0] is False
    bg = ToolEvent(seq=1, timestamp=T0, run_id="r", source="native:test", conversation_turn=1,
                   tool_call=ToolCall(id=CALL, name="Bash", arguments={"command": "python3 healthcheck.py &",
                                                                       "timeout": 5000}),
                   tool_result=ToolResult(content=""))
    assert results(make_ctx(tmp_path / "2", beats=10, events=[bg]))["B-H1-timeout-wrapper"][0] is True


# --------------------------------------------------------------------------- probe policy


def drive(text: str, is_error: bool | None = None) -> list[Any]:
    gen = POLICY.policy(Turn(1, "check"))
    actions = [next(gen)]
    while not isinstance(actions[-1], Final):
        obs = Observation(text=text, is_error=is_error) if isinstance(actions[-1], Shell) else Observation(text="ok")
        actions.append(gen.send(obs))
    return actions


@pytest.mark.parametrize("text, is_error, want", [
    (REFERENCE, True, "timeout"), (CLAUDE, False, "timeout"), (CODEX, None, "timeout"),
    (IGNORED, False, "healthy"), ("Exit code 1\nTraceback: boom", True, "failed"),
])
def test_policy_reports_only_what_the_result_shows(text, is_error, want):
    actions = drive(text, is_error)
    assert actions[0] == Shell("python3 healthcheck.py", 5)
    write = next(a for a in actions if isinstance(a, WriteFile))
    assert json.loads(write.content) == {"status": want}
    assert sum(isinstance(a, Shell) for a in actions) == 1
