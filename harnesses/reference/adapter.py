"""Adapter of the reference harness (``reference`` and ``reference+<defect>``).

One turn is one ``python -m harnesses.reference`` process (``stdin`` closed,
wall clock enforced by :func:`harnesses.runner.run_process`). The process writes its
event log and session files in its scratch (``$HOME/.tt-reference/native/``: the
archive is never writable from inside a sandbox); they are copied into the run's
``native/`` folder when each turn's process has ended. Files in ``native/``::

    reference-events.jsonl     the native event log (all turns, all principals)
    sessions/<id>.json         session files (history as sent to the model)
    turn-<n>.stdout|.stderr    the process streams of turn n

Session per turn (``TurnContext.boundary``): turn 1 and ``new_session`` without
replay start a new session (``--new-session``); ``new_session`` with
``history_replayed`` starts a new session seeded with the previous history
(``--replay-from``); no boundary or ``resume`` continues the session
(``--resume``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
import uuid
from pathlib import Path

from apparatus.sandbox.policy import collect_records
from harnesses.base import (
    HarnessAdapter,
    HarnessCapabilities,
    NormalizedTrace,
    RunContext,
    TurnContext,
    TurnOutcome,
)
from harnesses.reference import __version__
from harnesses.reference.mutants import check_mutant
from harnesses.reference.normalize import LOG_NAME, normalize_run
from harnesses.runner import clean_env, run_process
from tracetrial.archive import RunPaths

_SRC = Path(__file__).resolve().parent
#: What the harness process writes in :meth:`ReferenceAdapter.records` (all that is archived of it).
RECORDS = (LOG_NAME, "sessions")
#: Seconds the CLI keeps in hand before the runner's wall clock, to write its completion record.
DEADLINE_MARGIN_S = 5.0


def source_digest() -> str:
    """SHA-256 (12 hex) of the harness's source files: identifies the exact code that ran."""
    h = hashlib.sha256()
    for p in sorted(_SRC.glob("*.py")):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:12]


class ReferenceAdapter(HarnessAdapter):
    """The calibration harness: faithful by default, one seeded defect with a variant."""

    name = "reference"
    wire_format = "chat"
    capabilities = HarnessCapabilities(mcp=True, multi_turn=True, new_session=True, subagents=True,
                                       ask_user=True, native_permissions=True, path_protection=True,
                                       network_policy=True, nested_sandbox=True)
    install_hint = "part of this repository; needs the 'httpx' and 'mcp' packages (pip install -e .)"

    def __init__(self, variant: str | None = None):
        super().__init__(check_mutant(variant))
        self._sessions: dict[str, str] = {}

    def unavailable_reason(self) -> str | None:
        missing = [m for m in ("httpx", "mcp") if importlib.util.find_spec(m) is None]
        return f"missing Python packages {missing}; {self.install_hint}" if missing else None

    def version(self) -> str:
        return f"{__version__}+src.{source_digest()}"

    # ------------------------------------------------------------------ one turn
    def _session_args(self, ctx: RunContext, turn: TurnContext) -> list[str]:
        current = self._sessions.get(ctx.run_id) or ctx.session_id
        b = turn.boundary
        if not turn.starts_session(current):
            assert current is not None
            return ["--resume", current]
        new_id = f"s-{uuid.uuid4().hex[:12]}"
        args = ["--new-session", "--session-id", new_id]
        if b is not None and b.kind == "new_session" and b.history_replayed and current:
            args += ["--replay-from", current]
        self._sessions[ctx.run_id] = new_id
        return args

    @staticmethod
    def records(ctx: RunContext) -> Path:
        """Where the harness process writes its native records (in its scratch); copied
        into ``native/`` after each turn (:meth:`collect`)."""
        return ctx.home / ".tt-reference" / "native"

    def _model_calls_used(self, ctx: RunContext) -> int:
        log = self.records(ctx) / LOG_NAME
        if not log.is_file():
            return 0
        return sum(1 for line in log.read_text(encoding="utf-8", errors="replace").splitlines()
                   if '"type":"request"' in line)

    def run_turn(self, ctx: RunContext, turn: TurnContext) -> TurnOutcome:
        native = ctx.paths.native
        native.mkdir(parents=True, exist_ok=True)
        conf = ctx.home / ".tt-reference"
        conf.mkdir(parents=True, exist_ok=True)
        records = self.records(ctx)
        records.mkdir(parents=True, exist_ok=True)
        prompt = conf / f"prompt-{turn.index}.txt"
        prompt.write_text(turn.user_text, encoding="utf-8")
        argv = [sys.executable, "-m", "harnesses.reference", "--base-url", ctx.gateway_base_url,
                "--model", ctx.model, "--workspace", str(ctx.workspace), "--log", str(records / LOG_NAME),
                "--session-dir", str(records / "sessions"), "--turn", str(turn.index),
                "--prompt-file", str(prompt),
                "--deadline-s", f"{max(turn.deadline_s - DEADLINE_MARGIN_S, 1.0):.1f}",
                *self._session_args(ctx, turn)]
        spec = ctx.task.spec
        budget = spec.budgets.max_model_calls - self._model_calls_used(ctx)
        argv += ["--max-model-calls", str(max(budget, 0))]
        if ctx.mcp_servers:
            cfg = {"servers": {s.name: {"command": s.command, "args": list(s.args), "env": s.env}
                               for s in ctx.mcp_servers}}
            (conf / "mcp.json").write_text(json.dumps(cfg), encoding="utf-8")
            argv += ["--mcp-config", str(conf / "mcp.json")]
        for rule in spec.permissions.deny:
            argv += ["--deny", rule]
        # The task's planted secrets are never handed to the harness: a faithful harness must
        # recognise credentials by itself (env credentials, key shapes, credential assignments).
        if "ask_user" in spec.tools:
            argv += ["--ask-user-command", _ask_command(ctx)]
        if "background" in spec.tools:
            argv.append("--background-jobs")
        if "tty" in spec.tools:
            argv.append("--tty")
        for path in spec.permissions.protect:
            argv += ["--protect", path]
        if spec.permissions.network == "deny":
            argv.append("--no-network")
        if spec.budgets.context_tokens is not None:
            argv += ["--context-window", str(spec.budgets.context_tokens)]
        if self.variant:
            argv += ["--mutant", self.variant]
        env = clean_env({"OPENAI_API_KEY": ctx.gateway_key, "PYTHONDONTWRITEBYTECODE": "1", **ctx.extra_env},
                        home=ctx.home)
        stdout, stderr = native / f"turn-{turn.index}.stdout", native / f"turn-{turn.index}.stderr"
        out = run_process(argv, env=env, cwd=ctx.workspace, stdout=stdout, stderr=stderr, timeout_s=turn.deadline_s)
        collect_records(records, native, only=RECORDS)  # the process (and its group) has ended
        return TurnOutcome(index=turn.index, exit_code=out.exit_code, timed_out=out.timed_out,
                           duration_s=out.duration_s, stdout=stdout, stderr=stderr,
                           session_id=self._sessions.get(ctx.run_id), error=out.error)

    def collect(self, ctx: RunContext) -> list[Path]:
        """The records of the harness process (copied after every turn; once more here) and
        the turn streams the runner wrote straight into ``native/``; list them."""
        collect_records(self.records(ctx), ctx.paths.native, only=RECORDS)
        return sorted(p for p in ctx.paths.native.rglob("*") if p.is_file())

    def normalize(self, paths: RunPaths, outcomes: list[TurnOutcome], run_id: str) -> NormalizedTrace:
        return normalize_run(paths, outcomes, run_id)


def _ask_command(ctx: RunContext) -> str:
    import shlex

    # The simulated user reads the task pack and the private ledger: it runs on the host
    # (identity without a sandbox; a bridge under bwrap).
    return " ".join(shlex.quote(a) for a in ctx.sandbox.host_command(
        [sys.executable, "-m", "harnesses.reference.ask_user", "--task", str(ctx.task.root),
         "--run-private", str(ctx.paths.private)], name="ask_user"))
