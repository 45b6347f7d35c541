"""A task that kills a turn mid-way needs a harness whose turns the runner can kill."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tracetrial.eligibility import eligibility
from tracetrial.harness import HarnessCapabilities
from tracetrial.task import load_task


def _interrupted(pack: Path) -> Path:
    data = yaml.safe_load((pack / "task.yaml").read_text())
    data.update(conversation="multi", budgets={"max_user_turns": 2}, interrupts=[{"turn": 1, "marker": ".tt-kill"}])
    (pack / "task.yaml").write_text(yaml.safe_dump(data))
    (pack / "turns.json").write_text(json.dumps({"turns": [{"user": "Continue where you left off.",
                                                            "session_boundary": {"kind": "resume"}}]}))
    return pack


def test_a_harness_whose_turns_cannot_be_killed_is_unsupported(example_pack: Path) -> None:
    task = load_task(_interrupted(example_pack))
    state, reason = eligibility(task, HarnessCapabilities(turn_interrupt=False))
    assert state == "unsupported"
    assert reason is not None and "cannot kill mid-turn" in reason and "kills turn 1 mid-way" in reason


def test_a_harness_run_as_one_process_per_turn_is_eligible(example_pack: Path) -> None:
    task = load_task(_interrupted(example_pack))
    assert eligibility(task, HarnessCapabilities())[0] == "eligible"


def test_without_interrupts_the_capability_is_not_needed(example_pack: Path) -> None:
    assert eligibility(load_task(example_pack), HarnessCapabilities(turn_interrupt=False))[0] == "eligible"
