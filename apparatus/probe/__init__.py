"""The probe model: a deterministic scripted ideal agent served as a native model API.

A task's policy (:mod:`tracetrial.policy`) is replayed on every request the real,
unmodified harness CLI sends, and the next action is answered as a tool call of
the tool that harness declared. See :mod:`apparatus.probe.server` for the
route table and :mod:`apparatus.probe.mapping` for the action → tool table.
"""

from __future__ import annotations

from apparatus.probe.loader import PolicyLoadError, PolicyModule, load_policy
from apparatus.probe.report import (
    AbsentCapability,
    ProbeOptions,
    ProbeRunReport,
    ProviderErrorSpec,
    RequestRecord,
    UsageSpec,
)
from apparatus.probe.server import ProbeServer

__all__ = [
    "AbsentCapability", "PolicyLoadError", "PolicyModule", "ProbeOptions", "ProbeRunReport", "ProbeServer",
    "ProviderErrorSpec", "RequestRecord", "UsageSpec", "load_policy",
]
