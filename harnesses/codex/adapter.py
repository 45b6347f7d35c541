"""Codex CLI adapter: one ``codex exec --json`` process per user turn (HARNESSES.md, Codex CLI).

Per turn::

    codex exec [resume <thread_id>] --json --skip-git-repo-check
               [--dangerously-bypass-approvals-and-sandbox] <text>   </dev/null

with ``CODEX_HOME=<home>/.codex`` holding a generated ``config.toml``: the gateway as a
custom ``wire_api = "responses"`` provider keyed by ``TT_GATEWAY_KEY``, one request retry
and no stream retry, analytics/feedback/plugins/apps/remote plugins and the update check
off, and the task's MCP servers as ``[mcp_servers.<name>]`` with ``required = true``.

Permission modes: ``bypass`` adds ``--dangerously-bypass-approvals-and-sandbox``;
``native`` keeps Codex's own ``exec`` default (read-only sandbox, approvals ``never``) and
lets the task's MCP tools run with ``default_tools_approval_mode = "approve"`` per server —
without it ``exec`` refuses every MCP call (HARNESSES.md).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, ClassVar

from harnesses.base import (
    HarnessAdapter,
    HarnessCapabilities,
    NormalizedTrace,
    RunContext,
    TurnContext,
    TurnOutcome,
    WireFormat,
)
from harnesses.codex.normalize import normalize
from harnesses.install import install_hint, tool_bin
from harnesses.native import turn_files
from harnesses.runner import clean_env, cli_version_text, run_process, signal_death
from tracetrial.archive import RunPaths

PROVIDER = "tracetrial"
KEY_VAR = "TT_GATEWAY_KEY"


def _toml(value: Any) -> str:
    """A TOML value (JSON string escapes are valid TOML basic-string escapes)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(str(value))


def config_toml(ctx: RunContext) -> str:
    """The run's ``$CODEX_HOME/config.toml``."""
    lines = [
        f"model = {_toml(ctx.model)}",
        f"model_provider = {_toml(PROVIDER)}",
        "check_for_update_on_startup = false",
        "",
        f"[model_providers.{PROVIDER}]",
        'name = "TraceTrial gateway"',
        f"base_url = {_toml(ctx.gateway_base_url)}",
        f"env_key = {_toml(KEY_VAR)}",
        'wire_api = "responses"',
        "request_max_retries = 1",
        "stream_max_retries = 0",
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[feedback]",
        "enabled = false",
        "",
        "[features]",
        "plugins = false",
        "apps = false",
        "remote_plugin = false",
    ]
    for server in ctx.mcp_servers:
        lines += [
            "",
            f"[mcp_servers.{json.dumps(server.name)}]",
            f"command = {_toml(server.command)}",
            f"args = {_toml(list(server.args))}",
            "required = true",
        ]
        if server.env:
            lines.append(f"env = {_toml(dict(server.env))}")
        if ctx.permission_mode == "native":
            lines.append('default_tools_approval_mode = "approve"')
    return "\n".join(lines) + "\n"


def deny_rules(prefixes: list[str]) -> str:
    """A task's deny prefixes as Codex execpolicy rules (``$CODEX_HOME/rules/*.rules``)."""
    out = []
    for prefix in prefixes:
        tokens = ", ".join(json.dumps(t) for t in prefix.split())
        out.append(f'prefix_rule(\n    pattern = [{tokens}],\n    decision = "forbidden",\n)\n')
    return "\n".join(out)


class CodexAdapter(HarnessAdapter):
    """The real ``codex`` CLI (pinned in ``harnesses/package.json``)."""

    name: ClassVar[str] = "codex"
    wire_format: ClassVar[WireFormat] = "responses"
    #: ``exec`` has no approval prompts (approval is forced to ``never``); a task's deny
    #: list becomes Codex's own execpolicy ``prefix_rule(..., decision="forbidden")`` rules.
    #: Sub-agents: the ``multi_agent_v1`` tools (spawn_agent, wait_agent, send_input,
    #: resume_agent, close_agent) run each child as its own thread with its own rollout; when
    #: ``exec``'s main turn ends, a still-running child's turn is aborted ("interrupted").
    capabilities: ClassVar[HarnessCapabilities] = HarnessCapabilities(
        mcp=True, multi_turn=True, new_session=True, subagents=True, ask_user=False, native_permissions=True,
        nested_sandbox=True,
    )
    install_hint: ClassVar[str] = install_hint("codex")

    _version: str | None = None

    def unavailable_reason(self) -> str | None:
        return None if tool_bin("codex") is not None else self.install_hint

    def version(self) -> str:
        if self._version is None:
            binary = tool_bin("codex")
            if binary is None:
                raise FileNotFoundError(self.install_hint)
            text = cli_version_text(binary, lambda home: clean_env({"CODEX_HOME": str(home)}, home=home))
            type(self)._version = text.split()[-1] if text else "unknown"
        return str(self._version)

    def codex_home(self, ctx: RunContext) -> Path:
        return ctx.home / ".codex"

    def environment(self, ctx: RunContext) -> dict[str, str]:
        """The whole process environment of a turn (nothing inherited beyond PATH/locale)."""
        return clean_env(
            {"CODEX_HOME": str(self.codex_home(ctx)), KEY_VAR: ctx.gateway_key, **ctx.extra_env}, home=ctx.home
        )

    def argv(self, ctx: RunContext, turn: TurnContext, resume: str | None) -> list[str]:
        binary = tool_bin("codex")
        assert binary is not None
        argv = [str(binary), "exec"]
        if resume:
            argv += ["resume", resume]
        argv += ["--json", "--skip-git-repo-check"]
        if ctx.permission_mode == "bypass":
            argv.append("--dangerously-bypass-approvals-and-sandbox")
        else:
            # Native mode: Codex's own sandbox in the preset for real work (writes inside the
            # workspace), with the task's deny list as execpolicy rules.
            argv += ["--sandbox", "workspace-write"]
        return [*argv, "--", turn.user_text]

    def run_turn(self, ctx: RunContext, turn: TurnContext) -> TurnOutcome:
        home = self.codex_home(ctx)
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(config_toml(ctx), encoding="utf-8")
        rules = deny_rules(ctx.task.spec.permissions.deny) if ctx.permission_mode == "native" else ""
        if rules:
            (home / "rules").mkdir(exist_ok=True)
            (home / "rules" / "tracetrial.rules").write_text(rules, encoding="utf-8")
            shutil.copy2(home / "rules" / "tracetrial.rules", ctx.paths.native / "codex-tracetrial.rules")
        native = ctx.paths.native
        native.mkdir(parents=True, exist_ok=True)
        shutil.copy2(home / "config.toml", native / "codex-config.toml")
        fresh = (
            ctx.session_id is None
            or turn.index == 1
            or (turn.boundary is not None and turn.boundary.kind == "new_session")
        )
        resume = None if fresh else ctx.session_id
        stdout, stderr = native / f"turn-{turn.index}.stdout", native / f"turn-{turn.index}.stderr"
        argv = self.argv(ctx, turn, resume)
        env = self.environment(ctx)
        shown = {k: ("[REDACTED]" if v == ctx.gateway_key else v) for k, v in sorted(env.items())}
        (native / f"turn-{turn.index}.invocation.json").write_text(
            json.dumps({"argv": argv, "cwd": str(ctx.workspace), "env": shown}, indent=1) + "\n", encoding="utf-8"
        )
        proc = run_process(
            argv, env=env, cwd=ctx.workspace, stdout=stdout, stderr=stderr, timeout_s=max(1.0, turn.deadline_s)
        )
        thread = _thread_id(stdout)
        ctx.session_id = thread or (None if fresh else ctx.session_id)
        exit_code, error = signal_death(proc.exit_code, proc.error, "codex")
        return TurnOutcome(
            index=turn.index,
            exit_code=exit_code,
            timed_out=proc.timed_out,
            duration_s=proc.duration_s,
            stdout=stdout,
            stderr=stderr,
            session_id=ctx.session_id,
            error=error,
        )

    def collect(self, ctx: RunContext) -> list[Path]:
        """Copy every rollout of this run's ``CODEX_HOME`` to ``native/rollouts/``: each thread
        has its own (sub-agent threads included: ``thread_source: "subagent"``, written next to
        the parent's under ``sessions/YYYY/MM/DD/``); ``archived_sessions/`` holds threads
        Codex archived. A file name (``rollout-<time>-<thread>.jsonl``) is unique per thread."""
        dest = ctx.paths.native / "rollouts"
        home = self.codex_home(ctx)
        found: dict[str, Path] = {}
        for folder in ("archived_sessions", "sessions"):  # a live copy wins over an archived one
            for rollout in sorted((home / folder).rglob("rollout-*.jsonl")):
                found[rollout.name] = rollout
        copied: list[Path] = []
        for name, rollout in sorted(found.items()):
            dest.mkdir(parents=True, exist_ok=True)
            copied.append(Path(shutil.copy2(rollout, dest / name)))
        return copied

    def normalize(self, paths: RunPaths, outcomes: list[TurnOutcome], run_id: str) -> NormalizedTrace:
        rollouts = sorted((paths.native / "rollouts").glob("rollout-*.jsonl"))
        threads = {o.index: o.session_id for o in outcomes if o.session_id}
        return normalize(turn_files(paths.native, [o.index for o in outcomes]), rollouts, run_id, threads=threads)


def _thread_id(stdout: Path) -> str | None:
    """The thread id of the turn's ``thread.started`` line, if it got that far."""
    if not stdout.is_file():
        return None
    with stdout.open("rb") as fh:
        for raw in fh:
            try:
                data = json.loads(raw)
            except ValueError:
                continue
            if isinstance(data, dict) and data.get("type") == "thread.started":
                tid = data.get("thread_id")
                return tid if isinstance(tid, str) else None
    return None


