"""The template of an adapter that runs its harness as one CLI process per user turn.

:class:`CliAdapter` holds what every such adapter does the same way; a subclass gives only
what is specific to its CLI::

    class MyAdapter(CliAdapter):
        name = "my_cli"
        wire_format = "chat"
        binary_name = "my-cli"                 # under .tt-tools/node_modules/.bin

        def parse_version(self, text): ...     # ``my-cli --version`` output -> version
        def environment(self, ctx): ...        # the whole process environment of a turn
        def argv(self, ctx, turn, resume): ... # the command (``resume``: session to continue)
        def session_from_output(self, stdout): ...  # the session id the turn reported
        def normalize(self, paths, outcomes, run_id): ...

One turn (:meth:`CliAdapter.run_turn`): the session decision (a new session on turn 1,
after a ``new_session`` boundary or before any session id — one that hands the history over
(``history_replayed``) sets ``ctx.replay_from`` to the session it forks, for ``argv``, when the
harness declares ``history_replay``; else resume it, unless
:meth:`~CliAdapter.can_resume` says there is nothing to resume), the subclass's per-turn
files (:meth:`~CliAdapter.prepare`), the process with stdout/stderr streamed to
``native/turn-<n>.stdout|.stderr`` (:func:`~harnesses.runner.run_process`), the redacted
invocation record ``native/turn-<n>.invocation.json`` (written before the process starts and
again when it has ended, with what the run did: :meth:`~CliAdapter.invocation_extra`) and the
:class:`TurnOutcome` (a signal death reported as a crash). The installed version is read once
per class from ``<binary> --version``. ``collect`` and ``normalize`` stay the subclass's; its
normalizer gets ``at=recorded_time(outcomes)`` (:func:`harnesses.base.recorded_time`).

The DeepSeek adapter (a JSON-RPC runtime, not a one-shot CLI) uses the module functions
:func:`write_invocation` and :func:`turn_outcome`.
"""

from __future__ import annotations

import json
import re
import threading
import time
from abc import abstractmethod
from pathlib import Path
from typing import Any, ClassVar

from harnesses.base import HarnessAdapter, RunContext, TurnContext, TurnOutcome
from harnesses.install import install_version_hint, tool_bin, version_problem, version_root
from harnesses.native import TurnFiles, turn_files
from harnesses.runner import ProcessOutcome, clean_env, cli_version_text, run_process, signal_death

__all__ = ["CliAdapter", "turn_outcome", "write_invocation"]

#: What the invocation record shows instead of the gateway key.
REDACTED = "[REDACTED]"


#: Environment names whose values are credentials (an adapter's own, e.g. OpenClaw's per-run
#: ``OPENCLAW_GATEWAY_TOKEN``): never written to the invocation record either.
CREDENTIAL_NAME = re.compile(r"(?:^|_)(?:TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|KEY)$", re.IGNORECASE)


def write_invocation(path: Path, argv: list[str], env: dict[str, str], ctx: RunContext, **extra: Any) -> None:
    """Record the exact command, working directory and environment of a turn (plus
    ``extra``); the gateway key and any credential-named variable are never written (shown as
    ``[REDACTED]``)."""
    shown = {k: (REDACTED if v == ctx.gateway_key or (v and CREDENTIAL_NAME.search(k)) else v)
             for k, v in sorted(env.items())}
    record = {"argv": argv, "cwd": str(ctx.workspace), "env": shown, **extra}
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def turn_outcome(index: int, proc: ProcessOutcome, files: TurnFiles, session_id: str | None,
                 binary: str) -> TurnOutcome:
    """The outcome of a turn from its process's: a process killed by a signal is a crash
    (no exit code, the signal named in ``error``)."""
    assert files.stderr is not None
    exit_code, error = signal_death(proc.exit_code, proc.error, binary)
    return TurnOutcome(index=index, exit_code=exit_code, timed_out=proc.timed_out, duration_s=proc.duration_s,
                       stdout=files.stdout, stderr=files.stderr, session_id=session_id, error=error)


#: Serializes the reading of CLI versions (:meth:`CliAdapter.version`).
_VERSION_LOCK = threading.Lock()


class CliAdapter(HarnessAdapter):
    """An adapter whose harness is one CLI process per user turn (the module docstring
    lists what a subclass gives)."""

    #: The CLI's executable under the project-local tools (:func:`harnesses.install.tool_bin`).
    binary_name: ClassVar[str]
    #: The installed version of each adapter class and named version, read once.
    _versions: ClassVar[dict[tuple[type[CliAdapter], str | None], str]] = {}
    named_versions: ClassVar[bool] = True

    # ------------------------------------------------------------------------ install
    def tools_root(self) -> Path | None:
        """The install this adapter runs: ``None`` for the pins, else the named version's
        folder (``<tools>/versions/<name>@<version>/``)."""
        return version_root(self.name, self.release) if self.release else None

    def missing_hint(self) -> str:
        """How to install what this adapter runs (the pin or the named version)."""
        return install_version_hint(self.name, self.release) if self.release else self.install_hint

    def unavailable_reason(self) -> str | None:
        if self.release:
            problem = version_problem(self.name, self.release)
            if problem is not None:
                return problem
        return None if tool_bin(self.binary_name, self.tools_root()) is not None else self.missing_hint()

    def binary(self) -> Path:
        """The installed CLI (``FileNotFoundError`` with the install hint when it is not)."""
        path = tool_bin(self.binary_name, self.tools_root())
        if path is None:
            raise FileNotFoundError(self.missing_hint())
        return path

    def version(self) -> str:
        key = (type(self), self.release)
        # Under the lock: a cell asking while the session's warm-up is reading the version
        # (tracetrial_fixtures.run.warm_up) waits for that answer instead of starting the CLI again.
        with _VERSION_LOCK:
            if key not in self._versions:
                text = cli_version_text(self.binary(), self.version_env)
                self._versions[key] = self.parse_version(text) if text else "unknown"
            return self._versions[key]

    def version_env(self, home: Path) -> dict[str, str]:
        """The environment of ``<binary> --version`` with the throwaway ``home``."""
        return clean_env({}, home=home)

    @abstractmethod
    def parse_version(self, text: str) -> str:
        """The version in the (non-empty) output of ``<binary> --version``."""

    # ------------------------------------------------------------------------ one turn
    @abstractmethod
    def environment(self, ctx: RunContext) -> dict[str, str]:
        """The whole process environment of a turn (nothing inherited beyond PATH/locale)."""

    @abstractmethod
    def argv(self, ctx: RunContext, turn: TurnContext, resume: str | None) -> list[str]:
        """The turn's command; ``resume`` is the session it continues (``None``: a fresh one,
        whose id, if the adapter chose it, is ``ctx.session_id``)."""

    @abstractmethod
    def session_from_output(self, stdout: Path) -> str | None:
        """The session id the turn's output reports, if it got that far."""

    def new_session_id(self) -> str | None:
        """The id of a new session when the adapter chooses it (``None``: the harness does)."""
        return None

    def can_resume(self, ctx: RunContext, session_id: str) -> bool:
        """Whether ``session_id`` has anything to resume (else the turn starts it afresh)."""
        return True

    def prepare(self, ctx: RunContext, turn: TurnContext) -> None:
        """Write the turn's config and input files before its process starts."""

    def invocation_extra(self, resume: str | None, started: float, ended: float) -> dict[str, Any]:
        """What the invocation record adds for this CLI (``started``/``ended``: epoch seconds)."""
        return {}

    def run_turn(self, ctx: RunContext, turn: TurnContext) -> TurnOutcome:
        native = ctx.paths.native
        native.mkdir(parents=True, exist_ok=True)
        ctx.replay_from = None
        if turn.starts_session(ctx.session_id):
            b = turn.boundary
            if (b is not None and b.kind == "new_session" and b.history_replayed and ctx.session_id
                    and self.capabilities.history_replay):
                # The new session is a fork of the one so far (``argv`` says how, per CLI).
                ctx.replay_from = ctx.session_id
            ctx.session_id = self.new_session_id()
            resume = None
        else:
            assert ctx.session_id is not None
            resume = ctx.session_id if self.can_resume(ctx, ctx.session_id) else None
        self.prepare(ctx, turn)
        (files,) = turn_files(native, [turn.index])
        assert files.stderr is not None
        argv = self.argv(ctx, turn, resume)
        env = self.environment(ctx)
        record = native / f"turn-{turn.index}.invocation.json"
        # Written before the process starts too, so a turn interrupted with the benchmark
        # itself still has its command on record; rewritten with the run's extras after.
        write_invocation(record, argv, env, ctx)
        started = time.time()
        proc = run_process(argv, env=env, cwd=ctx.workspace, stdout=files.stdout, stderr=files.stderr,
                           timeout_s=max(1.0, turn.deadline_s))
        write_invocation(record, argv, env, ctx, **self.invocation_extra(resume, started, time.time()))
        # The harness is the authority on which session it wrote to; a fresh turn that reported
        # none leaves only the id the adapter chose (if any), a resumed one its session.
        ctx.session_id = self.session_from_output(files.stdout) or ctx.session_id
        return turn_outcome(turn.index, proc, files, ctx.session_id, self.binary_name)
