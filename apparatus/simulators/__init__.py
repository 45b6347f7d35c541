"""Task simulators: business services exposed to the harness as MCP stdio servers (SPEC §3, §9).

A task declares its services in ``task.yaml`` (``simulators: [{name, service, caps}]``);
each service is a declarative YAML file (tools, schemas, state, seeded one-off
values, cases, effects, errors, faults) with an optional Python module for
custom handlers. See ``README.md`` in this folder for the format.

Public API:

* :func:`mcp_servers_for` — the :class:`harnesses.base.McpServer` list a cell hands to adapters.
* :func:`verify_ledger`, :func:`read_ledger`, :class:`LedgerCheck` — ledger integrity at admission.
* :func:`load_service` — validate a service definition (``tracetrial validate``).
* :class:`Call`, :class:`Reply` — the handler API of a service's Python module.
* :class:`ScriptedUser`, :class:`UserDecision`, :class:`AskUserResponder` — the simulated user.
* :func:`eligibility` — eligible / unsupported / non_comparable per (task, harness).
"""

from __future__ import annotations

from apparatus.simulators.errors import LedgerError, SimulatorConfigError, TemplateError
from apparatus.simulators.launch import SimulatorPaths, mcp_servers_for, serve_command
from apparatus.simulators.ledger import (
    GENESIS,
    Ledger,
    LedgerCheck,
    read_head,
    read_ledger,
    verify_ledger,
)
from apparatus.simulators.spec import LoadedService, ServiceSpec, load_service
from apparatus.simulators.user import (
    AskUserResponder,
    ClarificationAnswer,
    ClarificationRequest,
    ScriptedUser,
    UserDecision,
    UserScript,
    option_labels,
)
from tracetrial.eligibility import Eligibility, eligibility
from tracetrial.handlers import Call, Reply
from tracetrial.values import ValueSpec, derive_value

__all__ = [
    "GENESIS",
    "AskUserResponder",
    "Call",
    "ClarificationAnswer",
    "ClarificationRequest",
    "Eligibility",
    "Ledger",
    "LedgerCheck",
    "LedgerError",
    "LoadedService",
    "Reply",
    "ScriptedUser",
    "ServiceSpec",
    "SimulatorConfigError",
    "SimulatorPaths",
    "TemplateError",
    "UserDecision",
    "UserScript",
    "ValueSpec",
    "derive_value",
    "eligibility",
    "load_service",
    "mcp_servers_for",
    "option_labels",
    "read_head",
    "read_ledger",
    "serve_command",
    "verify_ledger",
]
