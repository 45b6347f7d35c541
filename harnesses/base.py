"""The harness adapter contract.

An adapter is a small class: an install check and version, a per-turn launch
of the native CLI (or JSON-RPC exchange) with ``stdin`` closed and budgets
enforced by :mod:`harnesses.runner`, collection of native session files into
the archive, and a **pure** normalizer from archived native records to Trace IR
events (in its own module, no I/O beyond reading the archived files it is given).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar, Literal

from apparatus.sandbox import LocalSandbox, Sandbox
from harnesses.accounting import RecordAccounting
from tracetrial.archive import RunPaths
from tracetrial.harness import HarnessCapabilities, McpServer, WireFormat
from tracetrial.task import SessionBoundary, TaskPack
from tracetrial.trace import EventBase, StructuredTraceStatus

__all__ = ["EPOCH", "HarnessAdapter", "HarnessCapabilities", "McpServer", "NormalizedTrace", "RunContext",
           "TurnContext", "TurnOutcome", "WireFormat", "asks_user", "recorded_time"]

#: The timestamp of normalized events when no turn start was recorded (a fixed value, so a
#: normalizer's output never depends on when it ran).
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class RunContext:
    """Everything an adapter needs for one run (one cell)."""

    run_id: str
    task: TaskPack
    paths: RunPaths
    workspace: Path
    model: str
    gateway_base_url: str
    gateway_key: str
    mcp_servers: list[McpServer]
    permission_mode: Literal["bypass", "native"]
    wall_clock_s: float
    home: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    session_id: str | None = None
    #: During a turn that opens a new session carrying history (a ``new_session`` boundary with
    #: ``history_replayed``, on a harness with ``history_replay``): the session it forks.
    replay_from: str | None = None
    #: The cell's sandbox (default: local, no isolation). ``run_process`` wraps through the
    #: cell's confinement; adapters use ``sandbox.host_command`` for helpers that must run
    #: outside it (they read private files).
    sandbox: Sandbox = field(default_factory=LocalSandbox)


def asks_user(ctx: RunContext) -> bool:
    """The task's work needs the user's answer (``ask_user`` among its tools): an adapter then
    opens the harness's own ask-user channel for the run."""
    return "ask_user" in ctx.task.spec.tools


@dataclass(frozen=True)
class TurnContext:
    """One user turn: 1-based index, text and the declared boundary before it."""

    index: int
    user_text: str
    boundary: SessionBoundary | None
    deadline_s: float

    def starts_session(self, current: str | None) -> bool:
        """Whether this turn opens a new session: turn 1, a ``new_session`` boundary, or no
        session yet (``current`` is the run's session id so far)."""
        new_session = self.boundary is not None and self.boundary.kind == "new_session"
        return current is None or self.index == 1 or new_session


@dataclass
class TurnOutcome:
    """What one turn's process did. Paths are inside the run directory."""

    index: int
    exit_code: int | None
    timed_out: bool
    duration_s: float
    stdout: Path
    stderr: Path
    session_id: str | None = None
    error: str | None = None
    #: When the turn's process was started (UTC), stamped by the cell runner; normalizers
    #: take it as their fallback timestamp so the same archive always normalizes the same.
    started_at: datetime | None = None
    #: The runner killed the turn on purpose (the task's ``interrupts``): not a crash.
    interrupted: bool = False


def recorded_time(outcomes: Sequence[TurnOutcome]) -> datetime:
    """The timestamp a normalizer gives its events: the recorded start of the run's first
    turn (:attr:`TurnOutcome.started_at`), else :data:`EPOCH` — never the current time, so
    normalizing the same archive twice gives the same events."""
    return next((o.started_at for o in outcomes if o.started_at is not None), EPOCH)


@dataclass
class NormalizedTrace:
    """A normalizer's output: events in native order (``seq`` assigned later)."""

    events: list[EventBase]
    structured_trace_status: StructuredTraceStatus
    trace_complete: bool
    notes: list[str] = field(default_factory=list)
    #: What became of every native record the normalizer read (issue 18).
    accounting: RecordAccounting | None = None


class HarnessAdapter(ABC):
    """Base class of every adapter."""

    name: ClassVar[str]
    wire_format: ClassVar[WireFormat]
    capabilities: ClassVar[HarnessCapabilities] = HarnessCapabilities()
    install_hint: ClassVar[str] = ""

    #: The named version this adapter runs (``claude_code@2.1.332``: ``"2.1.332"``), installed
    #: next to the pins by ``tracetrial install``; ``None``: the pinned install (the plain name).
    #: Set by :func:`harnesses.registry.get_harness`; an adapter that supports named versions
    #: resolves its binary/runtime from :func:`harnesses.install.version_root` when it is set.
    release: str | None = None
    #: Whether ``<name>@<version>`` can select this adapter (only installed harnesses).
    named_versions: ClassVar[bool] = False

    def __init__(self, variant: str | None = None):
        #: e.g. the mutant name of ``reference+hide_exit_code``.
        self.variant = variant

    @property
    def full_name(self) -> str:
        """The harness as cells, archive folders, results, baselines and reports name it:
        ``name``, ``name+variant`` or, for a named version, ``name@version``."""
        name = f"{self.name}+{self.variant}" if self.variant else self.name
        return f"{name}@{self.release}" if self.release else name

    @abstractmethod
    def unavailable_reason(self) -> str | None:
        """``None`` when the harness can run here, else why not and how to install it."""

    @abstractmethod
    def version(self) -> str:
        """The installed native version (recorded in every run)."""

    @abstractmethod
    def run_turn(self, ctx: RunContext, turn: TurnContext) -> TurnOutcome:
        """Launch one turn; stream stdout/stderr to ``ctx.paths.native``; never raise on a
        harness crash or hang (return the outcome)."""

    def collect(self, ctx: RunContext) -> list[Path]:
        """Copy native session files into ``ctx.paths.native``; return what was archived."""
        return []

    @abstractmethod
    def normalize(self, paths: RunPaths, outcomes: list[TurnOutcome], run_id: str) -> NormalizedTrace:
        """Archived native records -> Trace IR events (pure: reads only archived files)."""
