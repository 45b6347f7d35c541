"""Support events carry the times the apparatus observed (issue 18, part 7): each turn's
``conversation_turn_started`` is the turn's recorded start (``result.json`` ``turns``), its
``conversation_turn_finished`` that start plus the recorded duration — not the assembly time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from harnesses.assemble import assemble
from harnesses.base import NormalizedTrace, TurnOutcome
from tracetrial.task import SessionBoundary, Turn
from tracetrial.trace import (
    ConversationTurnFinishedEvent,
    ConversationTurnStartedEvent,
    SessionBoundaryEvent,
)

RUN_START = datetime(2026, 11, 30, 9, 0, 0, tzinfo=UTC)
RUN_END = RUN_START + timedelta(minutes=5)


def outcome(index: int, started: datetime | None, duration: float) -> TurnOutcome:
    return TurnOutcome(index=index, exit_code=0, timed_out=False, duration_s=duration, stdout=Path("x"),
                       stderr=Path("y"), started_at=started)


def events(outcomes: list[TurnOutcome]) -> list[object]:
    turns = [Turn(user="one"), Turn(user="two", session_boundary=SessionBoundary(kind="resume")), Turn(user="three")]
    return list(assemble(run_id="r", task_id="T", harness="h", model="m", form="multi_turn", turns=turns,
                         outcomes=outcomes, native=NormalizedTrace([], "complete", True), gateway_records=[],
                         started=RUN_START, finished=RUN_END, failure=None))


def test_each_turn_starts_and_ends_when_the_apparatus_saw_it() -> None:
    starts = [RUN_START + timedelta(seconds=s) for s in (2, 31, 77)]
    evs = events([outcome(i + 1, at, 12.5) for i, at in enumerate(starts)])
    started = [e for e in evs if isinstance(e, ConversationTurnStartedEvent)]
    finished = [e for e in evs if isinstance(e, ConversationTurnFinishedEvent)]
    assert [e.timestamp for e in started] == starts
    assert [e.timestamp for e in finished] == [s + timedelta(seconds=12.5) for s in starts]
    (boundary,) = [e for e in evs if isinstance(e, SessionBoundaryEvent)]
    assert boundary.timestamp == starts[1]


def test_a_turn_start_in_another_zone_is_written_in_utc() -> None:
    plus_two = datetime(2026, 11, 30, 11, 0, 5, tzinfo=UTC).astimezone(timezone(timedelta(hours=2)))
    evs = events([outcome(1, plus_two, 1.0), outcome(2, None, 1.0), outcome(3, None, 1.0)])
    started = [e for e in evs if isinstance(e, ConversationTurnStartedEvent)]
    assert started[0].timestamp == datetime(2026, 11, 30, 11, 0, 5, tzinfo=UTC)
    assert started[0].timestamp.utcoffset() == timedelta(0)
    # no recorded start (an archive from before turn times): the run's own frame
    assert [e.timestamp for e in started[1:]] == [RUN_START, RUN_START]
