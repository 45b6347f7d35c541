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

from apparatus.sandbox.policy import copy_record
from harnesses.base import (
    HarnessCapabilities,
    NormalizedTrace,
    RunContext,
    TurnContext,
    TurnOutcome,
    WireFormat,
    recorded_time,
)
from harnesses.cli_adapter import CliAdapter
from harnesses.codex.normalize import normalize
from harnesses.install import install_hint
from harnesses.native import read_jsonl, turn_files
from harnesses.runner import clean_env
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


#: Share of the task's context window at which Codex is told to compact (its own default ratio is
#: not documented for an unknown model; the reference uses the same 80 %).
AUTO_COMPACT_SHARE = 0.8


def _context_window(ctx: RunContext) -> list[str]:
    """Top-level keys for a task whose trigger is context pressure (``budgets.context_tokens``):
    the window, and the prompt size at which Codex compacts mid-turn."""
    window = ctx.task.spec.budgets.context_tokens
    if window is None:
        return []
    return [f"model_context_window = {window}",
            f"model_auto_compact_token_limit = {int(window * AUTO_COMPACT_SHARE)}"]


def config_toml(ctx: RunContext) -> str:
    """The run's ``$CODEX_HOME/config.toml``."""
    lines = [
        f"model = {_toml(ctx.model)}",
        f"model_provider = {_toml(PROVIDER)}",
        "check_for_update_on_startup = false",
        *_context_window(ctx),
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


class CodexAdapter(CliAdapter):
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
        model_call_budget=False,  # exec has no turn/request limit (only token budgets for goals)
        history_replay=False,  # `codex fork` is interactive only; `exec resume` continues the same session
        nested_sandbox=True,
        # request_user_input is answered only by a client of `codex app-server` (with the
        # `default_mode_request_user_input` feature, or in Plan mode): `codex exec` declares it but
        # answers "unavailable in Default mode", and its own client rejects the question.
        apparatus_gaps={"ask_user": "request_user_input, answered through `codex app-server`'s "
                                    "item/tool/requestUserInput request; the adapter drives `codex exec`"},
        # Native mode's workspace-write sandbox: commands get no network (``network_access`` is
        # off unless configured) and ``.git`` stays read-only inside the writable workspace
        # (observed on 0.145.0 in the docker sandbox: EROFS for ``find -delete`` and a
        # redirection into it, EPERM for a socket connect). No setting protects other paths.
        network_policy=True,
        protected_by_default=(".git",),
    )
    install_hint: ClassVar[str] = install_hint("codex")
    binary_name: ClassVar[str] = "codex"

    def version_env(self, home: Path) -> dict[str, str]:
        return clean_env({"CODEX_HOME": str(home)}, home=home)

    def parse_version(self, text: str) -> str:
        return text.split()[-1]  # "codex-cli 0.145.0"

    def codex_home(self, ctx: RunContext) -> Path:
        return ctx.home / ".codex"

    def environment(self, ctx: RunContext) -> dict[str, str]:
        """The whole process environment of a turn (nothing inherited beyond PATH/locale)."""
        return clean_env(
            {"CODEX_HOME": str(self.codex_home(ctx)), KEY_VAR: ctx.gateway_key, **ctx.extra_env}, home=ctx.home
        )

    def argv(self, ctx: RunContext, turn: TurnContext, resume: str | None) -> list[str]:
        argv = [str(self.binary()), "exec"]
        if resume:
            argv += ["resume", resume]
        argv += ["--json", "--skip-git-repo-check"]
        if ctx.permission_mode == "bypass":
            argv.append("--dangerously-bypass-approvals-and-sandbox")
        else:
            # Native mode: Codex's own sandbox in the preset for real work (writes inside the
            # workspace), with the task's deny list as execpolicy rules. `exec resume` has no
            # --sandbox flag (it exits 2: "unexpected argument"); the same setting as a config
            # override is accepted there, so a resumed native turn keeps the sandbox.
            argv += ["-c", 'sandbox_mode="workspace-write"'] if resume else ["--sandbox", "workspace-write"]
            if ctx.task.spec.permissions.network == "deny":
                # Codex's default, stated so that a changed default cannot open the network.
                argv += ["-c", "sandbox_workspace_write.network_access=false"]
        return [*argv, "--", turn.user_text]

    def prepare(self, ctx: RunContext, turn: TurnContext) -> None:
        """``$CODEX_HOME/config.toml`` and, in native mode, the deny rules (copies of both in
        ``native/``)."""
        home = self.codex_home(ctx)
        home.mkdir(parents=True, exist_ok=True)
        (home / "config.toml").write_text(config_toml(ctx), encoding="utf-8")
        rules = deny_rules(ctx.task.spec.permissions.deny) if ctx.permission_mode == "native" else ""
        if rules:
            (home / "rules").mkdir(exist_ok=True)
            (home / "rules" / "tracetrial.rules").write_text(rules, encoding="utf-8")
            shutil.copy2(home / "rules" / "tracetrial.rules", ctx.paths.native / "codex-tracetrial.rules")
        shutil.copy2(home / "config.toml", ctx.paths.native / "codex-config.toml")

    def session_from_output(self, stdout: Path) -> str | None:
        """The thread id of the turn's ``thread.started`` line."""
        for line in read_jsonl(stdout):
            if line.data is not None and line.data.get("type") == "thread.started":
                tid = line.data.get("thread_id")
                return tid if isinstance(tid, str) else None
        return None

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
            # CODEX_HOME is agent-writable: a planted symlink is never followed
            target = copy_record(rollout, dest / name, ctx.home)
            if target is not None:
                copied.append(target)
        return copied

    def normalize(self, paths: RunPaths, outcomes: list[TurnOutcome], run_id: str) -> NormalizedTrace:
        rollouts = sorted((paths.native / "rollouts").glob("rollout-*.jsonl"))
        threads = {o.index: o.session_id for o in outcomes if o.session_id}
        return normalize(turn_files(paths.native, [o.index for o in outcomes]), rollouts, run_id, threads=threads,
                         at=recorded_time(outcomes))
