"""Claude Code's ask-user channel in a headless run: for a task with ``ask_user`` the adapter
registers the permission-prompt MCP server and names its tool with ``--permission-prompt-tool``
(``claude -p`` declares AskUserQuestion only then, checked on 2.1.220); the server answers
AskUserQuestion from the simulated user and refuses every other request as ``-p`` does."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from harnesses.base import TurnContext
from harnesses.claude_code.adapter import ASK_PROMPT_TOOL, ASK_SERVER, ClaudeCodeAdapter
from harnesses.claude_code.ask_user_mcp import decide
from tests.harnesses.capture import base_url, run_context


def _ctx(tmp_path: Path, tools: list[str]) -> Any:
    ctx = run_context(tmp_path, url=base_url("http://127.0.0.1:9", "anthropic", "r1"))
    ctx.task = dataclasses.replace(ctx.task, spec=ctx.task.spec.model_copy(update={"tools": tools}))
    ctx.session_id = "s-new"
    return ctx


def test_an_ask_user_task_gets_the_prompt_tool_and_its_server(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, ["shell", "ask_user"])
    argv = ClaudeCodeAdapter().argv(ctx, TurnContext(1, "go", None, 30), None)
    assert argv[argv.index("--permission-prompt-tool") + 1] == ASK_PROMPT_TOOL
    config = json.loads(Path(argv[argv.index("--mcp-config") + 1]).read_text())
    server = config["mcpServers"][ASK_SERVER]
    assert "harnesses.claude_code.ask_user_mcp" in server["args"]
    assert str(ctx.paths.private) in server["args"]  # the ledger is the run's private one


def test_other_tasks_run_as_before(tmp_path: Path) -> None:
    argv = ClaudeCodeAdapter().argv(_ctx(tmp_path, ["shell"]), TurnContext(1, "go", None, 30), None)
    assert "--permission-prompt-tool" not in argv


def test_ask_user_question_is_answered_per_question() -> None:
    asked: list[tuple[str, list[str] | None, Any]] = []

    def answer(question: str, options: list[str] | None, call_id: Any, raw: Any) -> str:
        asked.append((question, options, call_id))
        return "eu-central-2"

    data = {"questions": [{"question": "Which region?", "header": "Region",
                           "options": [{"label": "Type the answer", "description": "x"},
                                       {"label": "Not known yet", "description": "y"}], "multiSelect": False}]}
    out = decide({"tool_name": "AskUserQuestion", "input": data, "tool_use_id": "toolu_1"}, answer)
    assert out == {"behavior": "allow", "updatedInput": {**data, "answers": {"Which region?": "eu-central-2"}}}
    assert asked == [("Which region?", ["Type the answer", "Not known yet"], "toolu_1")]


def test_every_other_permission_request_is_refused() -> None:
    out = decide({"tool_name": "Bash", "input": {"command": "rm -rf /"}}, lambda *a: "yes")
    assert out["behavior"] == "deny" and "Bash" in out["message"]
