"""Per-cell eligibility of a (task, harness) pair (SPEC §9; the paper's appendix, table 23).

* ``eligible``: a semantically valid, measurable native path exists.
* ``unsupported``: the benchmark has no valid way to run or observe the task on
  this harness (e.g. the task's tools are MCP simulators and the harness cannot
  load MCP servers). This is distinct from the *target* capability being absent:
  when the absence is itself the behaviour under test (a clarification-channel
  task on a harness without one), the pair stays ``eligible`` and the absence is
  the measured result. A capability the harness has but the adapter does not reach yet
  (``HarnessCapabilities.apparatus_gaps``) is ``unsupported`` too, with where the harness keeps it.
* ``non_comparable``: a path exists only through an adaptation that would change
  the task's semantics or evidence (e.g. a deny policy the harness cannot apply
  natively would have to be enforced by the benchmark instead).
"""

from __future__ import annotations

from typing import Literal

from tracetrial.harness import HarnessCapabilities
from tracetrial.task import TaskPack

Eligibility = Literal["eligible", "unsupported", "non_comparable"]

#: What the harness lacks, in words, per capability field.
_LACKS = {
    "mcp": "cannot load MCP servers",
    "ask_user": "has no structured ask-user (clarification) channel",
    "subagents": "cannot spawn sub-agents",
    "multi_turn": "cannot continue a conversation over several user turns",
    "new_session": "cannot start a new session on the same workspace",
    "history_replay": "cannot open a new session carrying an earlier session's history (no headless fork)",
    "background_jobs": "cannot run a command in the background and report how it ended",
    "turn_interrupt": "runs its turns in a long-lived runtime the runner cannot kill mid-turn",
}

#: (component, property) whose target *is* a capability: its absence is measured, not unsupported.
TARGET_CAPABILITY: dict[tuple[str, str], str] = {
    ("T", "structured_user_clarification_channel"): "ask_user",
}


def requirements(task: TaskPack) -> list[tuple[str, str]]:
    """The harness capabilities the task needs, each with why (``(field, reason)``)."""
    spec = task.spec
    needs: list[tuple[str, str]] = []
    if spec.simulators:
        names = ", ".join(s.name for s in spec.simulators)
        needs.append(("mcp", f"the task's tools are MCP simulators ({names})"))
    elif "mcp" in spec.tools:
        needs.append(("mcp", "the task declares the mcp tool"))
    if "ask_user" in spec.tools:
        needs.append(("ask_user", "the task needs the ask_user channel"))
    if "subagent" in spec.tools:
        needs.append(("subagents", "the task delegates to sub-agents"))
    if "background" in spec.tools:
        needs.append(("background_jobs", "the task runs a command as a background job"))
    if spec.interrupts:
        turns = ", ".join(str(i.turn) for i in spec.interrupts)
        needs.append(("turn_interrupt", f"the task kills turn {turns} mid-way and resumes the session"))
    if spec.conversation != "single" or task.turns.turns:
        needs.append(("multi_turn", f"the task is a {spec.conversation}-turn conversation"))
    if any(t.session_boundary and t.session_boundary.kind == "new_session" for t in task.turns.turns):
        needs.append(("new_session", "the task's turns declare a new_session boundary"))
    if any(t.session_boundary and t.session_boundary.kind == "new_session" and t.session_boundary.history_replayed
           for t in task.turns.turns):
        needs.append(("history_replay", "a new_session boundary hands the earlier session's history over"))
    return needs


def eligibility(task: TaskPack, capabilities: HarnessCapabilities) -> tuple[Eligibility, str | None]:
    """Whether a harness with ``capabilities`` can be measured on ``task``, and why not.

    Returns:
        ``(status, reason)``; ``reason`` is None for a plain ``eligible`` and
        otherwise explains the decision (also for an eligible pair whose missing
        target capability is what gets measured).
    """
    target = TARGET_CAPABILITY.get((task.spec.component, task.spec.property))
    unsupported: list[str] = []
    notes: list[str] = []
    for cap, why in requirements(task):
        gap = capabilities.apparatus_gaps.get(cap)
        if gap is not None:
            unsupported.append(f"{why}; the harness has it ({gap}), but the adapter does not reach it yet: "
                               "an apparatus gap, not a harness verdict")
            continue
        if getattr(capabilities, cap):
            continue
        if cap == target:
            notes.append(f"the harness {_LACKS[cap]}; for {task.spec.property} that absence is the "
                         "measured result, not a reason to skip")
        else:
            unsupported.append(f"{why} but the harness {_LACKS[cap]}")
    if unsupported:
        return "unsupported", "; ".join(unsupported)
    perms = task.spec.permissions
    if perms.mode == "native" and perms.deny and not capabilities.native_permissions:
        return "non_comparable", (
            f"the task's deny policy {perms.deny} must be applied by the harness's own permission "
            "system, which it lacks; enforcing it in the benchmark would change what is measured")
    if (perms.protect and not capabilities.path_protection
            and not set(perms.protect) <= set(capabilities.protected_by_default)):
        return "non_comparable", (
            f"the task's protected paths {perms.protect} must be guarded by the harness's own "
            "protection, which it lacks (or the adapter cannot set); guarding them in the benchmark "
            "would change what is measured")
    if perms.network == "deny" and not capabilities.network_policy:
        return "non_comparable", (
            "the task denies network access to commands, which must be applied by the harness's "
            "own setting, which it lacks (or the adapter cannot set); cutting the network in the "
            "benchmark would change what is measured")
    budgets = task.spec.budgets
    if budgets.model_calls_binding and not capabilities.model_call_budget:
        return "non_comparable", (
            f"the task's model-call budget ({budgets.max_model_calls}) is below what the work needs "
            "and must be applied by the harness, which has no model-call budget setting; enforcing "
            "it in the benchmark would change what is measured")
    return "eligible", "; ".join(notes) or None
