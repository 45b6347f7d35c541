"""The 7 components and their mechanism-level properties (SPEC §2)."""

from __future__ import annotations

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


def component_name(letter: str) -> str:
    """``"E"`` -> ``"Execution"``."""
    return COMPONENTS[letter]


def property_number(letter: str, prop: str) -> int:
    """1-based number of a property inside its component (``E``, ``exit_code_fidelity`` -> 1)."""
    return PROPERTIES[letter].index(prop) + 1
