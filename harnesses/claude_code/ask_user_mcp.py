"""Claude Code's ask-user channel, opened for a headless run: a permission-prompt MCP server.

``claude -p`` declares ``AskUserQuestion`` only when a permission-prompt tool is configured
(``--permission-prompt-tool``; the Agent SDK's ``canUseTool`` is the same hook over stdio): with
none there is nobody to ask, so the tool is left out of the inventory. A task whose work needs
the user (``tools: [..., ask_user]``) must reach the channel Claude Code really has, so the
adapter registers this server for such tasks and names its ``prompt`` tool as the prompt tool.

Claude Code calls ``prompt`` with ``{tool_name, input, tool_use_id}`` before a tool runs and
reads back JSON text: ``{"behavior": "allow", "updatedInput": {...}}`` or ``{"behavior": "deny",
"message": ...}``. For ``AskUserQuestion`` every question goes to the benchmark's simulated user
(:class:`apparatus.simulators.AskUserResponder`, ledger under the run's ``private/``) and the
answers ride back in ``updatedInput.answers`` (question text → chosen label), which is how
Claude Code's own tool receives a user's picks. Any other request is refused with the words
Claude Code uses when a headless run meets a tool it was not granted, so the server changes
nothing but the ask-user channel.

Run as ``python -m harnesses.claude_code.ask_user_mcp --task <pack> --run-private <dir>``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from apparatus.simulators.user import option_labels
from harnesses.claude_code.adapter import ASK_PROMPT_TOOL, ASK_SERVER

#: The tool Claude Code calls: ``mcp__<ASK_SERVER>__<TOOL>`` is the adapter's ASK_PROMPT_TOOL.
TOOL = "prompt"
assert ASK_PROMPT_TOOL == f"mcp__{ASK_SERVER}__{TOOL}"

ASK_TOOL = "AskUserQuestion"


def decide(request: dict[str, Any], answer: Any) -> dict[str, Any]:
    """The prompt tool's decision for one permission request (pure apart from ``answer``).

    ``answer(question, options, call_id, raw)`` returns the simulated user's text for one
    question. ``AskUserQuestion`` is allowed with the answers filled in; anything else is denied.
    """
    tool = str(request.get("tool_name", ""))
    data = request.get("input")
    if tool != ASK_TOOL or not isinstance(data, dict):
        return {"behavior": "deny",
                "message": f"Claude requested permissions to use {tool}, but you haven't granted it yet."}
    questions = data.get("questions")
    answers: dict[str, str] = {}
    for q in questions if isinstance(questions, list) else []:
        if not isinstance(q, dict) or not isinstance(q.get("question"), str):
            continue
        answers[q["question"]] = answer(q["question"], option_labels(q), request.get("tool_use_id"), q)
    return {"behavior": "allow", "updatedInput": {**data, "answers": answers}}


def _server(task: Path, run_private: Path) -> Any:
    import mcp_types as types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server

    from apparatus.simulators.user import AskUserResponder, ClarificationRequest
    from tracetrial.task import load_task

    responder = AskUserResponder.from_task(load_task(task), run_private)

    def answer(question: str, options: list[str] | None, call_id: Any, raw: Any) -> str:
        return responder.answer(ClarificationRequest(
            question=question, options=options, request_id=str(call_id) if call_id else None, raw=raw)).text

    async def list_tools(ctx: ServerRequestContext[Any, Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(
            name=TOOL, description="Permission prompts of the benchmark's headless run (the user's channel).",
            input_schema={"type": "object", "properties": {
                "tool_name": {"type": "string"}, "input": {"type": "object"}, "tool_use_id": {"type": "string"}},
                "required": ["tool_name", "input"]})])

    async def call_tool(ctx: ServerRequestContext[Any, Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        decision = decide(dict(params.arguments or {}), answer)
        return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(decision))])

    return Server(ASK_SERVER, version="1", on_list_tools=list_tools, on_call_tool=call_tool)


async def _serve(task: Path, run_private: Path) -> None:
    from mcp.server.lowlevel import NotificationOptions
    from mcp.server.stdio import stdio_server

    server = _server(task, run_private)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options(NotificationOptions()))


def main(argv: Sequence[str] | None = None) -> int:
    """Serve the prompt tool on stdin/stdout until Claude Code closes the stream."""
    import anyio

    p = argparse.ArgumentParser(prog="python -m harnesses.claude_code.ask_user_mcp")
    p.add_argument("--task", type=Path, required=True, help="the task pack folder")
    p.add_argument("--run-private", type=Path, required=True, help="the run's private folder (ledger)")
    args = p.parse_args(argv)
    anyio.run(_serve, args.task, args.run_private)
    return 0


if __name__ == "__main__":
    sys.exit(main())
