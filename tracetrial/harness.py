"""What the domain knows of a harness: its wire format, its native capabilities, and the
MCP servers a cell asks it to register.

These are data, shared by the apparatus (eligibility, simulator launch, sandbox rules) and
the harness adapters, so they live in the kernel rather than beside the adapter contract.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

#: The provider wire format a harness speaks to its model.
WireFormat = Literal["anthropic", "responses", "chat"]


class HarnessCapabilities(BaseModel):
    """What a harness can do natively. Cells needing a missing capability are recorded as
    ``unsupported`` (not scored as harness failures)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mcp: bool = True
    multi_turn: bool = True
    new_session: bool = True
    subagents: bool = False
    ask_user: bool = False
    native_permissions: bool = False
    #: The harness can be given a model-call budget and stops the run when it is used up (Claude
    #: Code's ``--max-turns``, the reference's ``--max-model-calls``). True by default because an
    #: agent loop with a step limit is the norm; adapters of harnesses without one say so, and a
    #: task whose budget is its trigger (``budgets.model_calls_binding``) is then non-comparable.
    model_call_budget: bool = True
    #: The harness can open a new session that carries an earlier session's history (Claude
    #: Code's ``--resume <id> --fork-session``, the reference's ``--replay-from``): what a
    #: ``new_session`` boundary with ``history_replayed: true`` asks for. True by default like
    #: ``model_call_budget``; adapters of CLIs with no headless fork say so, and such a task is
    #: then unsupported rather than scored on a session the apparatus could not hand over.
    history_replay: bool = True
    #: The harness can run a shell command in the background and later report its completion, exit
    #: status and output (Claude Code's ``run_in_background``, Codex's exec sessions, OpenClaw's
    #: process tool, the reference's ``job_status``): what ``tools: [background]`` asks for. True by
    #: default like ``history_replay``; an adapter of a harness without it says so.
    background_jobs: bool = True
    #: The runner can kill a turn of this harness mid-way (its turns are processes the runner
    #: starts: :func:`harnesses.runner.run_process`), what a task's ``interrupts`` need. False for
    #: a harness whose turns run inside a long-lived runtime the runner does not start per turn.
    turn_interrupt: bool = True
    #: The harness can keep named workspace paths from being changed or deleted by any of its
    #: tools, whatever the command's form (an OS-level guard, not a command-text check): what a
    #: task's ``permissions.protect`` asks for. False by default: an adapter that translates it
    #: into the harness's own setting says so.
    path_protection: bool = False
    #: Workspace paths the harness's own sandbox keeps read-only in its native mode whatever the
    #: command, with no setting (Codex's workspace-write sandbox: ``.git``). A task protecting only
    #: these is eligible without ``path_protection``.
    protected_by_default: tuple[str, ...] = ()
    #: The harness can run its commands without network access (its own sandbox setting): what
    #: ``permissions.network: deny`` asks for. False by default, like ``path_protection``.
    network_policy: bool = False
    #: The harness confines its own commands with kernel namespaces (Codex's bundled
    #: bubblewrap); the docker backend then lets the container create namespaces.
    nested_sandbox: bool = False
    #: Capabilities the harness has but the adapter does not reach yet, each with where the
    #: harness keeps it (e.g. an ask-user channel only a client of the harness's app server can
    #: answer). A task needing one is ``unsupported`` with that reason: an apparatus gap to close
    #: (TASK_GUIDE rule 12), never a harness verdict, even where the capability is the target.
    apparatus_gaps: dict[str, str] = Field(default_factory=dict)


@dataclass(frozen=True)
class McpServer:
    """A stdio MCP server the harness must register in its own config."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
