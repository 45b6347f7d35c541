"""Per-cell eligibility from the task's needs and the harness's declared capabilities."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from apparatus.simulators import eligibility
from harnesses.base import HarnessCapabilities
from tracetrial.task import PermissionSpec, TaskPack, Turn, Turns

FULL = HarnessCapabilities(mcp=True, multi_turn=True, new_session=True, subagents=True, ask_user=True,
                           native_permissions=True)


def _task(pack: TaskPack, **spec: Any) -> TaskPack:
    return replace(pack, spec=pack.spec.model_copy(update=spec))


def test_fully_capable_harness_is_eligible(pack: TaskPack) -> None:
    assert eligibility(pack, FULL) == ("eligible", None)


def test_harness_without_mcp_is_unsupported(pack: TaskPack) -> None:
    status, reason = eligibility(pack, FULL.model_copy(update={"mcp": False}))
    assert status == "unsupported"
    assert reason == "the task's tools are MCP simulators (tickets) but the harness cannot load MCP servers"


def test_ask_user_needed_as_a_means_is_unsupported(pack: TaskPack) -> None:
    status, reason = eligibility(pack, FULL.model_copy(update={"ask_user": False}))
    assert status == "unsupported"
    assert reason is not None and "has no structured ask-user (clarification) channel" in reason


def test_missing_target_capability_is_the_measured_result(pack: TaskPack) -> None:
    task = _task(pack, property="structured_user_clarification_channel")
    status, reason = eligibility(task, FULL.model_copy(update={"ask_user": False}))
    assert status == "eligible"
    assert reason is not None and "absence is the measured result" in reason


def test_several_missing_capabilities_are_all_named(pack: TaskPack) -> None:
    task = replace(_task(pack, tools=["shell", "subagent"], simulators=[], conversation="multi"),
                   turns=Turns(turns=[Turn(user="go on", session_boundary={"kind": "new_session"})]))
    caps = HarnessCapabilities(mcp=False, multi_turn=False, new_session=False, subagents=False)
    status, reason = eligibility(task, caps)
    assert status == "unsupported"
    assert reason == ("the task delegates to sub-agents but the harness cannot spawn sub-agents; "
                      "the task is a multi-turn conversation but the harness cannot continue a "
                      "conversation over several user turns; the task's turns declare a new_session "
                      "boundary but the harness cannot start a new session on the same workspace")


def test_native_deny_policy_without_native_permissions_is_non_comparable(pack: TaskPack) -> None:
    task = _task(pack, permissions=PermissionSpec(mode="native", deny=["rm -rf"]))
    status, reason = eligibility(task, FULL.model_copy(update={"native_permissions": False}))
    assert status == "non_comparable"
    assert reason is not None and "['rm -rf']" in reason
    assert eligibility(task, FULL)[0] == "eligible"


def test_binding_model_call_budget_without_a_budget_setting_is_non_comparable(pack: TaskPack) -> None:
    budgets = pack.spec.budgets.model_copy(update={"max_model_calls": 5, "model_calls_binding": True})
    task = _task(pack, budgets=budgets)
    status, reason = eligibility(task, FULL.model_copy(update={"model_call_budget": False}))
    assert status == "non_comparable"
    assert reason is not None and "model-call budget (5)" in reason and "no model-call budget setting" in reason
    assert eligibility(task, FULL)[0] == "eligible"
    # an ordinary budget is a cap, not a trigger: a harness without a budget setting stays eligible
    plain = _task(pack, budgets=pack.spec.budgets.model_copy(update={"max_model_calls": 5}))
    assert eligibility(plain, FULL.model_copy(update={"model_call_budget": False})) == ("eligible", None)


def test_only_the_real_clis_without_a_budget_setting_lack_it() -> None:
    from harnesses.registry import get_harness

    lacking = {name for name in ("claude_code", "codex", "openclaw", "deepseek", "reference")
               if not get_harness(name).capabilities.model_call_budget}
    assert lacking == {"codex", "openclaw", "deepseek"}


def test_a_history_hand_over_needs_a_harness_that_can_fork_a_session(pack: TaskPack) -> None:
    from tracetrial.task import SessionBoundary

    turns = Turns(turns=[Turn(user="second", session_boundary=SessionBoundary(
        kind="new_session", history_replayed=True, workspace_preserved=True))])
    task = replace(_task(pack, conversation="fixed"), turns=turns)
    status, reason = eligibility(task, FULL.model_copy(update={"history_replay": False}))
    assert status == "unsupported"
    assert reason is not None and "hands the earlier session's history over" in reason and "no headless fork" in reason
    assert eligibility(task, FULL) == ("eligible", None)
    # a new session without the hand-over needs no fork
    plain = replace(task, turns=Turns(turns=[Turn(user="second", session_boundary=SessionBoundary(
        kind="new_session", history_replayed=False, workspace_preserved=True))]))
    assert eligibility(plain, FULL.model_copy(update={"history_replay": False})) == ("eligible", None)


def test_only_claude_code_and_the_reference_fork_a_session() -> None:
    from harnesses.registry import get_harness

    forking = {name for name in ("claude_code", "codex", "openclaw", "deepseek", "reference")
               if get_harness(name).capabilities.history_replay}
    assert forking == {"claude_code", "reference"}
