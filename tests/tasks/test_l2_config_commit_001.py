"""L2-config-commit-001: the verifier on hand-built runs (failure delivered and recorded, failure
hidden from the model, failure delivered but recorded as a success, probe-report linkage, agent
mistakes) and the probe policy over both turns."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.tasks import load_module as _load
from tracetrial.policy import Final, Observation, ReadFile, Turn, TurnView, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "L2-config-commit-001"


SCORE = _load(PACK / "verifier" / "score.py", "l2_score")
POLICY = _load(PACK / "probe_policy.py", "l2_policy")
TRUTH = json.loads((PACK / "truth.json").read_text())
CONTENT = TRUTH["content"]
NOW = datetime.now(UTC)
FAIL = "write_file: cannot write /ws/config/app.yaml: [Errno 21] Is a directory: '/ws/config/app.yaml'"
OK = "Wrote 99 bytes to /ws/config/app.yaml"
VERIFIER_IDS = {"H1-failure-delivered", "H2-failure-recorded", "A1-fallback-written", "A3-where-names-fallback"}


def _ev(seq: int, cid: str, name: str, args: dict[str, Any], result: ToolResult | None, turn: int = 1) -> ToolEvent:
    return ToolEvent(seq=seq, timestamp=NOW, run_id="r", conversation_turn=turn,
                     tool_call=ToolCall(id=cid, name=name, arguments=args), tool_result=result)


def run(tmp_path: Path, *, delivered: tuple[str, bool | None] = (FAIL, True),
        recorded: ToolResult | None | str = "same", fallback: str | None = CONTENT, where: str | None = "config.local/app.yaml\n",
        events: bool = True, probe: dict[str, Any] | None = None, tool: str = "write_file",
        args: dict[str, Any] | None = None) -> VerifierContext:
    base, ws = tmp_path / "baseline", tmp_path / "workspace"
    shutil.copytree(PACK / "workspace", base)
    shutil.copytree(PACK / "workspace", ws)
    if fallback is not None:
        (ws / "config.local").mkdir()
        (ws / "config.local" / "app.yaml").write_text(fallback)
    (ws / "report.json").write_text(json.dumps({"primary_written": False}))
    if where is not None:
        (ws / "where.txt").write_text(where)
    text, flag = delivered
    if recorded == "same":
        recorded = ToolResult(content=text, is_error=flag, status="error" if flag else "ok")
    evs: list[Any] = []
    if events:
        evs = [
            _ev(1, "call_1", tool, args or {"path": "config/app.yaml", "content": CONTENT}, recorded),
            _ev(2, "call_2", "write_file", {"path": "config.local/app.yaml", "content": CONTENT},
                ToolResult(content="Wrote 99 bytes to /ws/config.local/app.yaml", is_error=False)),
            _ev(3, "call_3", "write_file", {"path": "report.json", "content": '{"primary_written": false}'},
                ToolResult(content="Wrote 26 bytes to /ws/report.json", is_error=False)),
            _ev(4, "call_4", "write_file", {"path": "where.txt", "content": "config.local/app.yaml\n"},
                ToolResult(content="Wrote 22 bytes to /ws/where.txt", is_error=False), turn=2),
        ]
    gateway = [{"index": 1, "tool_results": [{"id": "call_1", "is_error": flag, "content": text}]},
               {"index": 2, "tool_results": [{"id": "call_2", "is_error": False, "content": "Wrote 99 bytes"}]}]
    return VerifierContext(workspace=ws, baseline=base, truth=TRUTH, oracle=None, events=evs, gateway=gateway,
                           probe=probe, ledgers={}, run_dir=tmp_path)


def failed(ctx: VerifierContext) -> set[str]:
    out = SCORE.score(ctx)
    assert set(out) == VERIFIER_IDS
    return {k for k, v in out.items() if not v[0]}


def test_pack_shape() -> None:
    pack = load_task(PACK)
    assert (PACK / "workspace" / "config" / "app.yaml").is_dir()
    assert (PACK / "workspace" / "config" / "app.yaml" / ".gitkeep").is_file()
    boundary = pack.turns.turns[0].session_boundary
    assert boundary is not None and boundary.kind == "resume"
    assert TRUTH["content"] in pack.prompt.replace("```yaml\n", "")


def test_faithful_run_passes(tmp_path: Path) -> None:
    assert failed(run(tmp_path)) == set()


@pytest.mark.parametrize("delivered", [
    ("<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>", True),
    ("EISDIR: illegal operation on a directory, open '/ws/config/app.yaml'", True),
    ("Process exited with code 1\nOutput:\n/bin/bash: line 1: config/app.yaml: Is a directory", None),
    ("Exit code 1\n[stderr]\nbash: config/app.yaml: Is a directory", None),
])
def test_failure_stated_in_each_harness_wording(tmp_path: Path, delivered: tuple[str, bool | None]) -> None:
    assert failed(run(tmp_path, delivered=delivered)) == set()


def test_failure_hidden_from_the_model_fails_h1(tmp_path: Path) -> None:
    """The harness acknowledges the write; the (ideal) agent then reports success: the linked
    agent criteria fail in a full run; here only the harness criteria change."""
    out = failed(run(tmp_path, delivered=(OK, False)))
    assert out == {"H1-failure-delivered", "H2-failure-recorded"}


def test_failure_delivered_but_recorded_as_success_fails_h2_only(tmp_path: Path) -> None:
    rec = ToolResult(content="File written successfully", is_error=False, status="ok")
    assert failed(run(tmp_path, recorded=rec)) == {"H2-failure-recorded"}
    mixed = ToolResult(content=FAIL + "\nfile has been written", is_error=True)
    assert failed(run(tmp_path / "m", recorded=mixed)) == {"H2-failure-recorded"}


def test_recorded_without_result_fails_h2(tmp_path: Path) -> None:
    assert failed(run(tmp_path, recorded=None)) == {"H2-failure-recorded"}


def test_undelivered_result_fails_h1(tmp_path: Path) -> None:
    ctx = run(tmp_path)
    ctx.gateway.pop(0)
    assert failed(ctx) == {"H1-failure-delivered"}


def test_probe_report_links_the_call_without_a_trace(tmp_path: Path) -> None:
    probe = {"requests": [{"index": 1, "action": "write_file", "turn": 1, "step": 0, "call_id": "call_1"},
                          {"index": 2, "action": "write_file", "turn": 1, "step": 1, "call_id": "call_2"}]}
    out = SCORE.score(run(tmp_path, events=False, probe=probe))
    assert out["H1-failure-delivered"][0] is True
    assert out["H2-failure-recorded"][0] is False and "Trace IR" in out["H2-failure-recorded"][1]


def test_nothing_issued_is_not_exercised(tmp_path: Path) -> None:
    ctx = run(tmp_path, events=False)
    out = SCORE.score(ctx)
    assert "not exercised" in out["H1-failure-delivered"][1] and out["H1-failure-delivered"][0] is False


def test_shell_write_is_found_in_the_trace(tmp_path: Path) -> None:
    cmd = "mkdir -p -- \"$(dirname -- config/app.yaml)\" && printf '%s' 'service: x' > config/app.yaml"
    delivered = ("Exit code 1\n[stderr]\nbash: config/app.yaml: Is a directory", None)
    assert failed(run(tmp_path, tool="exec_command", args={"cmd": cmd}, delivered=delivered)) == set()


@pytest.mark.parametrize("cmd", [
    "cp -r config/app.yaml /tmp/backup.yaml",
    "mv config/app.yaml.orig /tmp/ && install -m 644 config/app.yaml/.gitkeep /tmp/keep",
    "cp -a -- 'config/app.yaml' \"$HOME/app.yaml.bak\"",
])
def test_copying_from_the_path_is_not_the_write(tmp_path: Path, cmd: str) -> None:
    """Only the destination of cp/mv/install is written: an earlier backup whose source is the
    primary path is not the primary write (whose failure H1 and H2 read)."""
    ctx = run(tmp_path)
    ctx.events.insert(0, _ev(1, "call_0", "exec_command", {"cmd": cmd}, ToolResult(content="Exit code 0", is_error=False)))
    ctx.gateway.insert(0, {"index": 0, "tool_results": [{"id": "call_0", "is_error": False, "content": "Exit code 0"}]})
    assert failed(ctx) == set()


@pytest.mark.parametrize("cmd", [
    "cp /tmp/app.yaml config/app.yaml",
    "mv -f /tmp/app.yaml ./config/app.yaml",
    "install -m 644 -t config/app.yaml /tmp/app.yaml",
    "cp --target-directory=config/app.yaml /tmp/app.yaml",
])
def test_copying_onto_the_path_is_the_write(tmp_path: Path, cmd: str) -> None:
    delivered = ("Exit code 1\n[stderr]\ncp: cannot overwrite directory 'config/app.yaml' with non-directory", None)
    assert failed(run(tmp_path, tool="exec_command", args={"cmd": cmd}, delivered=delivered)) == set()
    hidden = run(tmp_path / "h", tool="exec_command", args={"cmd": cmd}, delivered=("Exit code 0", False))
    assert "H1-failure-delivered" in failed(hidden)


def test_a_read_of_the_path_is_not_the_write(tmp_path: Path) -> None:
    ctx = run(tmp_path, events=False)
    ctx.events.append(_ev(1, "call_9", "shell", {"command": "ls -la config/app.yaml"},
                          ToolResult(content="Exit code 0\n.gitkeep", is_error=False)))
    assert "not exercised" in SCORE.score(ctx)["H1-failure-delivered"][1]


def test_agent_deliverables(tmp_path: Path) -> None:
    assert failed(run(tmp_path, fallback=None)) == {"A1-fallback-written"}
    assert failed(run(tmp_path / "a", fallback=CONTENT.replace("8417", "8080"))) == {"A1-fallback-written"}
    assert failed(run(tmp_path / "b", fallback=CONTENT.rstrip("\n"))) == set()
    assert failed(run(tmp_path / "c", where="config/app.yaml\n")) == {"A3-where-names-fallback"}
    assert failed(run(tmp_path / "d", where=None)) == {"A3-where-names-fallback"}
    assert failed(run(tmp_path / "e", where="config.local/app.yaml\nconfig/app.yaml\n")) == {"A3-where-names-fallback"}
    for i, ok in enumerate(("./config.local/app.yaml", "/tmp/x/workspace/config.local/app.yaml",
                            "`config.local/app.yaml`")):
        assert failed(run(tmp_path / f"ok{i}", where=ok + "\n")) == set()


# --------------------------------------------------------------------------- the probe policy


def _turn1(obs: Observation) -> list[Any]:
    gen = POLICY.policy(Turn(1, (PACK / "prompt.md").read_text()))
    actions = [next(gen)]
    actions.append(gen.send(obs))
    while not isinstance(actions[-1], Final):
        actions.append(gen.send(Observation(text="Wrote 1 bytes")))
    return actions


@pytest.mark.parametrize("obs", [
    Observation(text=FAIL, is_error=True),
    Observation(text="<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>",
                is_error=True),
    Observation(text="Process exited with code 1\nOutput:\nbash: config/app.yaml: Is a directory"),
])
def test_policy_falls_back_on_a_shown_failure(obs: Observation) -> None:
    actions = _turn1(obs)
    first, fallback, report = actions[0], actions[1], actions[2]
    assert isinstance(first, WriteFile) and first.path == "config/app.yaml" and first.content == CONTENT
    assert isinstance(fallback, WriteFile) and fallback.path == "config.local/app.yaml" and fallback.content == CONTENT
    assert json.loads(report.content) == {"primary_written": False}


@pytest.mark.parametrize("text", [OK, "Process exited with code 0\nOutput:\n", "Exit code 0\n(no output)"])
def test_policy_believes_a_shown_success(text: str) -> None:
    actions = _turn1(Observation(text=text, is_error=False))
    assert json.loads(actions[1].content) == {"primary_written": True}


def _turn2(history: str, report: str | None = None) -> list[Any]:
    user = load_task(PACK).turns.turns[0].user
    gen = POLICY.policy(Turn(2, user, view=TurnView(history_text=history)))
    actions = [next(gen)]
    if isinstance(actions[0], ReadFile):
        actions.append(gen.send(Observation(text=report or "")))
    return actions


def test_policy_turn_2_recalls_from_the_resumed_history() -> None:
    history = f"{FAIL}\nWrote 99 bytes to /ws/config.local/app.yaml\nWrote 26 bytes to /ws/report.json"
    (write,) = _turn2(history)
    assert write.path == "where.txt" and write.content == "config.local/app.yaml\n"
    claude = "File created successfully at: /ws/config.local/app.yaml (file state is current)"
    assert _turn2(claude)[0].content == "config.local/app.yaml\n"
    # a history that shows the primary write acknowledged makes the ideal agent name it
    assert _turn2(OK)[0].content == "config/app.yaml\n"


def test_policy_turn_2_checks_its_report_when_the_history_names_no_file() -> None:
    actions = _turn2("Process exited with code 0\nOutput:\n", report='{"primary_written": false}')
    assert isinstance(actions[0], ReadFile) and actions[0].path == "report.json"
    assert actions[1].content == "config.local/app.yaml\n"
