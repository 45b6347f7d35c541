"""The 7 components and their mechanism-level properties (SPEC §2)."""

from __future__ import annotations

import re
from typing import Literal

ComponentLetter = Literal["C", "E", "G", "L", "O", "T", "V"]

#: Component letter -> marker/keyword name used in pytest selection.
COMPONENTS: dict[str, str] = {
    "C": "Context",
    "E": "Execution",
    "G": "Governance",
    "L": "Lifecycle",
    "O": "Observability",
    "T": "Tools",
    "V": "Verification",
}

#: Component letter -> property slugs (order = property number, 1-based).
PROPERTIES: dict[str, tuple[str, ...]] = {
    "C": (
        "truncation_disclosure",
        "rolling_compaction_fidelity",
        "cross_turn_fact_retention",
        "session_resume_fidelity",
        "persistent_memory_behaviour",
        "subagent_context_isolation",
    ),
    "E": (
        "exit_code_fidelity",
        "stderr_capture",
        "timeout_behaviour",
        "shell_state_persistence",
        "background_process_supervision",
        "timeout_propagation",
        "stale_artifact_handling",
        "pty_termination",
    ),
    "G": (
        "execution_governance",
        "approval_guardrail_consistency",
        "network_restriction",
        "destructive_action_control",
        "secret_credential_redaction",
    ),
    "L": (
        "model_call_budget",
        "committed_vs_acknowledged_state",
        "subagent_result_aggregation",
        "pending_child_handling",
        "workflow_handoff",
        "goal_revision",
        "session_resume",
    ),
    "O": (
        "tool_error_relay",
        "harness_error_refusal_notice",
        "event_provenance",
        "diagnostic_state",
        "auditable_completion_info",
    ),
    "T": (
        "tool_availability",
        "naming_registration",
        "argument_transport",
        "structured_result_fidelity",
        "skill_result_relay",
        "dynamic_tool_discovery",
        "structured_user_clarification_channel",
    ),
    "V": (
        "claim_execution_consistency",
        "citable_completion_receipts",
        "unfinished_work_disclosure",
        "reported_value_artifact_consistency",
    ),
}


#: A component name as it may appear inside another keyword without selecting that component.
_SHORT = {"Context": "ctx", "Execution": "exec", "Governance": "gov", "Lifecycle": "lcycle",
          "Observability": "obs", "Tools": "tool", "Verification": "verif"}


def collision_free(keyword: str, own: str | None = None) -> str:
    """``keyword`` with every component name other than ``own`` (a letter) shortened.

    pytest's ``-k`` matches keyword *substrings*, case-insensitively, so a cell of
    ``claim_execution_consistency`` (Verification) would be selected by ``-k Execution``.
    Cell keywords go through this so ``-k "<Component> and <harness>"`` selects exactly
    that component (``claim_execution_consistency`` -> ``claim_exec_consistency``).
    """
    own_name = COMPONENTS.get(own or "")
    out = keyword
    for name, short in _SHORT.items():
        if name == own_name:
            continue
        out = re.sub(re.escape(name), short, out, flags=re.IGNORECASE)
    return out


def property_keyword(letter: str, prop: str) -> str:
    """The marker and ``-k`` keyword of a property (:func:`collision_free` of its slug)."""
    return collision_free(prop, letter)


def component_name(letter: str) -> str:
    """``"E"`` -> ``"Execution"``."""
    return COMPONENTS[letter]


def property_number(letter: str, prop: str) -> int:
    """1-based number of a property inside its component (``E``, ``exit_code_fidelity`` -> 1)."""
    return PROPERTIES[letter].index(prop) + 1
