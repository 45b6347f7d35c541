"""Normalizers are pure over data: every harness's adapter normalizes the same archived records
to byte-identical ``events.json`` each time, its events stamped with the recorded start of the
first turn (``TurnOutcome.started_at``), or the fixed :data:`harnesses.base.EPOCH` when no turn
start was recorded — never the time the normalizer ran (``tracetrial rescore --renormalize``
relies on this)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from harnesses.base import EPOCH, TurnOutcome
from harnesses.registry import get_harness
from tests.harnesses.conftest import Golden, golden_cases, load_golden
from tracetrial.archive import RunPaths
from tracetrial.trace_io import renumber, write_events

HARNESSES = ("claude_code", "codex", "openclaw", "deepseek")
CASES = [(h, c) for h in HARNESSES for c in golden_cases(h)]
STARTED = datetime(2026, 11, 30, 9, 12, 25, 123456, tzinfo=UTC)


def outcomes(g: Golden, started: datetime | None) -> list[TurnOutcome]:
    """The turn outcomes the cell runner recorded for the capture (each turn a minute apart)."""
    return [
        TurnOutcome(index=t["index"], exit_code=t["exit_code"], timed_out=t["timed_out"], duration_s=t["duration_s"],
                    stdout=g.native / f"turn-{t['index']}.stdout", stderr=g.native / f"turn-{t['index']}.stderr",
                    session_id=t["session_id"],
                    started_at=started + timedelta(minutes=n) if started is not None else None)
        for n, t in enumerate(g.meta["turns"])
    ]


def events_json(harness: str, g: Golden, started: datetime | None, dest: Path) -> bytes:
    trace = get_harness(harness).normalize(RunPaths(g.root), outcomes(g, started), "run-golden")
    write_events(dest, renumber(trace.events))
    return dest.read_bytes()


@pytest.mark.parametrize(("harness", "case"), CASES)
def test_the_same_archive_normalizes_to_byte_identical_events(harness: str, case: str, tmp_path: Path) -> None:
    g = load_golden(harness, case)
    first = events_json(harness, g, STARTED, tmp_path / "first.json")
    time.sleep(0.01)  # a normalizer reading the clock would differ now
    second = events_json(harness, g, STARTED, tmp_path / "second.json")
    assert first == second
    trace = get_harness(harness).normalize(RunPaths(g.root), outcomes(g, STARTED), "run-golden")
    assert trace.events and {e.timestamp for e in trace.events} == {STARTED}  # the first turn's start


@pytest.mark.parametrize("harness", HARNESSES)
def test_without_a_recorded_turn_start_events_carry_the_fixed_epoch(harness: str, tmp_path: Path) -> None:
    g = load_golden(harness, "tool_roundtrip")
    first = events_json(harness, g, None, tmp_path / "first.json")
    assert first == events_json(harness, g, None, tmp_path / "second.json")
    trace = get_harness(harness).normalize(RunPaths(g.root), outcomes(g, None), "run-golden")
    assert {e.timestamp for e in trace.events} == {EPOCH}
