"""A capability the harness has but the adapter does not reach yet (``apparatus_gaps``) makes a
task needing it ``unsupported`` with where the harness keeps it: an apparatus gap, never a harness
verdict, even for the clarification-channel property whose target is that capability (an
absent channel stays the measured result)."""

from __future__ import annotations

from pathlib import Path

from tracetrial.eligibility import eligibility
from tracetrial.harness import HarnessCapabilities
from tracetrial.task import load_task

TASKS = Path(__file__).resolve().parents[2] / "tasks"


def test_an_unreached_ask_user_channel_is_an_apparatus_gap() -> None:
    task = load_task(TASKS / "T7-region-clarify-001")
    state, reason = eligibility(task, HarnessCapabilities(apparatus_gaps={"ask_user": "behind its app server"}))
    assert state == "unsupported"
    assert reason is not None and "behind its app server" in reason and "apparatus gap" in reason


def test_a_truly_absent_channel_is_still_measured() -> None:
    task = load_task(TASKS / "T7-region-clarify-001")
    state, reason = eligibility(task, HarnessCapabilities(ask_user=False))
    assert state == "eligible" and reason is not None and "measured result" in reason


def test_a_gap_matters_only_to_tasks_that_need_it() -> None:
    task = load_task(TASKS / "E1-build-status-001")
    assert eligibility(task, HarnessCapabilities(apparatus_gaps={"ask_user": "x"}))[0] == "eligible"
