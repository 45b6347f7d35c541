"""Claude Code adapter: one ``claude -p`` process per user turn (HARNESSES.md, Claude Code).

Per turn::

    claude -p --output-format stream-json --verbose --model <alias>
           (--session-id <uuid> | --resume <id>)
           (--dangerously-skip-permissions | --allowedTools mcp__<server> ...)
           [--mcp-config <home>/tt-mcp.json --strict-mcp-config]
           [--permission-prompt-tool mcp__tt_user__prompt]   (tasks with ask_user)
           --max-turns <budget left> -- <text>   </dev/null

with a clean environment: per-run ``HOME``/``TMPDIR``/``CLAUDE_CODE_TMPDIR`` inside
``ctx.home``, the gateway as ``ANTHROPIC_BASE_URL`` with the gateway key, every model
alias routed to the run's model, no non-essential traffic and one retry at most.

The task's model-call budget (``budgets.max_model_calls``) is Claude Code's ``--max-turns``: on
2.1.220 one turn is one main-agent model request (whatever number of tool calls it carries); after
the N-th it runs that response's tools and stops (``result`` subtype ``error_max_turns``,
``is_error`` true, exit 1). The budget is the run's, so each turn gets what the earlier turns left
(:func:`model_calls_used`); at least 1, since ``--max-turns 0`` means no limit.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import uuid
from pathlib import Path
from typing import ClassVar

from apparatus.sandbox.policy import collect_records, copy_record, is_record_folder
from harnesses.base import (
    HarnessCapabilities,
    NormalizedTrace,
    RunContext,
    TurnContext,
    TurnOutcome,
    WireFormat,
    asks_user,
    recorded_time,
)
from harnesses.claude_code.normalize import normalize
from harnesses.cli_adapter import CliAdapter
from harnesses.install import install_hint
from harnesses.native import read_jsonl, turn_files
from harnesses.runner import clean_env
from tracetrial.archive import RunPaths

#: Model alias variables: all are routed to the run's model so no call escapes the gateway route.
MODEL_ENV_VARS = (
    "ANTHROPIC_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "CLAUDE_CODE_SUBAGENT_MODEL",
)


def model_calls_used(native: Path, before: int) -> int:
    """The main agent's model requests in the run's turns before ``before``: the distinct
    ``message.id`` of the ``assistant`` lines without ``parent_tool_use_id`` in each
    ``turn-<k>.stdout`` (stream-json writes one line per content block of a response, all with
    the response's id; a sub-agent's lines carry the spawning call's id)."""
    ids: set[str] = set()
    for files in turn_files(native, list(range(1, before))) if before > 1 else []:
        for line in read_jsonl(files.stdout):
            data = line.data or {}
            message = data.get("message")
            if (data.get("type") == "assistant" and not data.get("parent_tool_use_id")
                    and isinstance(message, dict) and message.get("id")):
                ids.add(f"{files.index}:{message['id']}")
    return len(ids)


def max_turns(ctx: RunContext, turn: TurnContext) -> int:
    """``--max-turns`` for this turn: the task's model-call budget less the calls already used
    (never below 1: Claude Code reads 0 as unlimited)."""
    used = model_calls_used(ctx.paths.native, turn.index)
    return max(ctx.task.spec.budgets.max_model_calls - used, 1)


#: The permission-prompt MCP server that opens Claude Code's ask-user channel in a headless run
#: (``harnesses.claude_code.ask_user_mcp``; not imported here, it runs as its own process).
ASK_SERVER = "tt_user"
ASK_PROMPT_TOOL = f"mcp__{ASK_SERVER}__prompt"



#: Tools pre-approved in native permission mode (the task's deny rules still apply).
ROUTINE_TOOLS = ("Bash", "Read", "Write", "Edit")


class ClaudeCodeAdapter(CliAdapter):
    """The real ``claude`` CLI (pinned in ``harnesses/package.json``)."""

    name: ClassVar[str] = "claude_code"
    wire_format: ClassVar[WireFormat] = "anthropic"
    capabilities: ClassVar[HarnessCapabilities] = HarnessCapabilities(
        mcp=True, multi_turn=True, new_session=True, subagents=True, ask_user=True, native_permissions=True
    )
    install_hint: ClassVar[str] = install_hint("claude_code")
    binary_name: ClassVar[str] = "claude"

    def parse_version(self, text: str) -> str:
        return text.split()[0]  # "2.1.220 (Claude Code)"

    # ------------------------------------------------------------------------------ run
    def environment(self, ctx: RunContext) -> dict[str, str]:
        """The whole process environment of a turn (nothing inherited beyond PATH/locale)."""
        tmp = ctx.home / "tmp"
        extra = {
            "ANTHROPIC_BASE_URL": ctx.gateway_base_url,
            "ANTHROPIC_API_KEY": ctx.gateway_key,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "IS_SANDBOX": "1",
            "CLAUDE_CODE_MAX_RETRIES": "1",
            "CLAUDE_CODE_TMPDIR": str(tmp),
            **{var: ctx.model for var in MODEL_ENV_VARS},
            **ctx.extra_env,
        }
        window = ctx.task.spec.budgets.context_tokens
        if window is not None:
            # The task's context window (its trigger is context pressure): Claude Code compacts
            # proactively against this window once the reported prompt size nears it.
            extra["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] = str(window)
        if ctx.mcp_servers or asks_user(ctx):
            # Claude Code connects MCP servers without waiting by default, so a slow server start
            # can leave the task's tools out of the first request (seen on --resume turns).
            # Waiting for them is its own setting, the counterpart of Codex's `required = true`.
            extra["MCP_CONNECTION_NONBLOCKING"] = "false"
        return clean_env(extra, home=ctx.home)

    def _mcp_flags(self, ctx: RunContext) -> list[str]:
        servers: dict[str, dict[str, object]] = {
            s.name: {"type": "stdio", "command": s.command, "args": list(s.args), "env": dict(s.env)}
            for s in ctx.mcp_servers
        }
        flags: list[str] = []
        if asks_user(ctx):
            # Headless Claude Code declares AskUserQuestion only when a permission-prompt tool
            # answers for the user; ours relays the questions to the simulated user and refuses
            # everything else as ``-p`` does on its own (harnesses.claude_code.ask_user_mcp).
            # It reads the pack and writes the private ledger, so it runs on the host.
            cmd = ctx.sandbox.host_command(
                [sys.executable, "-m", "harnesses.claude_code.ask_user_mcp", "--task", str(ctx.task.root),
                 "--run-private", str(ctx.paths.private)],
                env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
                stderr=ctx.paths.private / f"{ASK_SERVER}.stderr", name=ASK_SERVER)
            servers[ASK_SERVER] = {"type": "stdio", "command": cmd[0], "args": cmd[1:], "env": {}}
            flags += ["--permission-prompt-tool", ASK_PROMPT_TOOL]
        if not servers:
            return []
        path = ctx.home / "tt-mcp.json"
        path.write_text(json.dumps({"mcpServers": servers}, indent=1), encoding="utf-8")
        shutil.copy2(path, ctx.paths.native / "claude-mcp-config.json")
        return ["--mcp-config", str(path), "--strict-mcp-config", *flags]

    def _permission_flags(self, ctx: RunContext) -> list[str]:
        if ctx.permission_mode == "bypass":
            return ["--dangerously-skip-permissions"]
        # Native mode is how a user runs a headless agent for real work: routine tools are
        # pre-approved, the task's own MCP servers too, and the deny rules (which take
        # precedence in Claude Code) carve out what policy forbids. Anything else keeps
        # Claude Code's own approval behaviour (refused headless, reported to the model).
        flags: list[str] = ["--allowedTools", *ROUTINE_TOOLS]
        for server in ctx.mcp_servers:
            flags += ["--allowedTools", f"mcp__{server.name}"]
        for prefix in ctx.task.spec.permissions.deny:
            # A task's deny entry is a command prefix; Claude Code's native rule for it is
            # ``Bash(<prefix>:*)`` (its own prefix matcher decides what else it covers).
            flags += ["--disallowedTools", f"Bash({prefix}:*)"]
        return flags

    def argv(self, ctx: RunContext, turn: TurnContext, resume: str | None) -> list[str]:
        # A fresh session has the id the adapter chose (``--session-id``), so the turn's
        # transcript is known by name before Claude Code reports it.
        session_flags = ["--resume", resume] if resume else ["--session-id", str(ctx.session_id)]
        if ctx.replay_from and not resume:
            # A hand-over to a new session: a fork of the earlier one, under the id we chose.
            session_flags = ["--resume", ctx.replay_from, "--fork-session", "--session-id", str(ctx.session_id)]
        # The prompt goes after ``--`` so a user text starting with "-" is never read as a flag.
        return [
            str(self.binary()),
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--model",
            ctx.model,
            *session_flags,
            *self._permission_flags(ctx),
            *self._mcp_flags(ctx),
            "--max-turns",
            str(max_turns(ctx, turn)),
            "--",
            turn.user_text,
        ]

    def new_session_id(self) -> str:
        return str(uuid.uuid4())

    def can_resume(self, ctx: RunContext, session_id: str) -> bool:
        # An earlier turn that died before Claude Code wrote its session left nothing to resume:
        # the turn then starts that session under the same id.
        return bool(list((ctx.home / ".claude" / "projects").glob(f"*/{session_id}.jsonl")))

    def session_from_output(self, stdout: Path) -> str | None:
        """The session id of the first ``system/init`` line."""
        for line in read_jsonl(stdout):
            if line.data is not None and line.data.get("type") == "system" and line.data.get("subtype") == "init":
                sid = line.data.get("session_id")
                return sid if isinstance(sid, str) else None
        return None

    # -------------------------------------------------------------------------- collect
    def collect(self, ctx: RunContext) -> list[Path]:
        """Copy every session transcript of this run's HOME (with ``tool-results/`` and
        ``subagents/``) to ``native/transcripts/``."""
        dest = ctx.paths.native / "transcripts"
        copied: list[Path] = []
        # HOME is agent-writable: records only (regular files really inside HOME, no symlink
        # followed), so a planted link never archives a host file as the harness's transcript
        for transcript in sorted((ctx.home / ".claude" / "projects").glob("*/*.jsonl")):
            target = copy_record(transcript, dest / transcript.name, ctx.home)
            if target is None:
                continue
            copied.append(target)
            extras = transcript.with_suffix("")
            if is_record_folder(extras, ctx.home):
                copied += collect_records(extras, dest / extras.name)
        return copied

    def normalize(self, paths: RunPaths, outcomes: list[TurnOutcome], run_id: str) -> NormalizedTrace:
        transcripts = sorted((paths.native / "transcripts").glob("*.jsonl"))
        return normalize(turn_files(paths.native, [o.index for o in outcomes]), transcripts, run_id,
                         at=recorded_time(outcomes))
