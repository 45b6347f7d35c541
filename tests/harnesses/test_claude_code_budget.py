"""The Claude Code adapter hands the task's model-call budget to Claude Code as ``--max-turns``
(what the earlier turns of the run left, never below 1: ``--max-turns 0`` means no limit), and
with the real CLI the flag caps the main agent's model requests at that number."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from harnesses.base import TurnContext
from harnesses.claude_code.adapter import ClaudeCodeAdapter, model_calls_used
from tests.harnesses.capture import Case, base_url, run_case, run_context
from tests.harnesses.conftest import needs_claude
from tests.harnesses.scripted_server import tool
from tracetrial.task import load_task


def _ctx(tmp_path: Path, budget: int):
    ctx = run_context(tmp_path, url=base_url("http://127.0.0.1:9", "anthropic", "r1"))
    budgets = ctx.task.spec.budgets.model_copy(update={"max_model_calls": budget})
    ctx.task = dataclasses.replace(ctx.task, spec=ctx.task.spec.model_copy(update={"budgets": budgets}))
    ctx.session_id = "s-new"
    return ctx


def _assistant(msg_id: str, parent: str | None = None) -> str:
    return json.dumps({"type": "assistant", "parent_tool_use_id": parent,
                       "message": {"id": msg_id, "role": "assistant", "content": [{"type": "text", "text": "x"}]}})


def _flag(argv: list[str]) -> str:
    return argv[argv.index("--max-turns") + 1]


def test_turn_one_gets_the_whole_budget_before_the_prompt(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, 5)
    argv = ClaudeCodeAdapter().argv(ctx, TurnContext(1, "-x", None, 30), None)
    assert _flag(argv) == "5"
    assert argv.index("--max-turns") < argv.index("--") and argv[-2:] == ["--", "-x"]


def test_later_turns_get_what_the_earlier_ones_left(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, 6)
    native = ctx.paths.native
    native.mkdir(parents=True, exist_ok=True)
    # turn 1: two main-agent responses (one spans two content-block lines) and a child's response
    (native / "turn-1.stdout").write_text("\n".join([
        json.dumps({"type": "system", "subtype": "init", "session_id": "s"}),
        _assistant("msg_1"), _assistant("msg_1"), _assistant("msg_2"),
        _assistant("msg_child", parent="toolu_1"), "not json",
        json.dumps({"type": "result", "subtype": "success"})]) + "\n")
    assert model_calls_used(native, 1) == 0 and model_calls_used(native, 2) == 2
    assert _flag(ClaudeCodeAdapter().argv(ctx, TurnContext(2, "go on", None, 30), "s")) == "4"
    # a run that used its budget up still gets 1, never 0 (which Claude Code reads as no limit)
    (native / "turn-2.stdout").write_text("\n".join(_assistant(f"m{i}") for i in range(9)) + "\n")
    assert model_calls_used(native, 3) == 11
    assert _flag(ClaudeCodeAdapter().argv(ctx, TurnContext(3, "again", None, 30), "s")) == "1"


@needs_claude
def test_the_real_cli_stops_after_the_budgeted_requests(tmp_path: Path) -> None:
    """A model that always asks for one more command: with a budget of 3 Claude Code sends 3
    requests, runs the third response's command and ends with ``error_max_turns``, exit 1."""
    task = load_task(Path(__file__).resolve().parents[2] / "tasks" / "E1-build-status-001")
    budgets = task.spec.budgets.model_copy(update={"max_model_calls": 3})
    task = dataclasses.replace(task, spec=task.spec.model_copy(update={"budgets": budgets}))
    script = [tool(f"toolu_b_{i}", "Bash", {"command": f"echo step-{i}", "description": "step"}) for i in range(8)]
    _, outcomes, served = run_case(ClaudeCodeAdapter(), Case(turns=[("keep going", None)], script=script),
                                     tmp_path, task)
    assert served == 3
    (outcome,) = outcomes
    assert outcome.exit_code == 1
    lines = [json.loads(x) for x in outcome.stdout.read_text().splitlines() if x.startswith("{")]
    result = [x for x in lines if x.get("type") == "result"][-1]
    assert result["subtype"] == "error_max_turns" and result["is_error"] is True
    assert "step-2" in outcome.stdout.read_text()  # the third response's command still ran
