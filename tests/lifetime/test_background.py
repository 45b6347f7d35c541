"""apparatus.background: work a cell leaves runs when a cell next waits on its harness, or
after a bounded wait; in order; a failure does not stop the rest."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from apparatus import background


@pytest.fixture
def slow_fallback(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A fallback long enough that only :func:`background.idle` can release the work."""
    monkeypatch.setattr(background, "MAX_WAIT_S", 30.0)
    background.idle()  # nothing queued by an earlier test is held back
    yield
    background.idle()


def test_queued_work_waits_for_idle_then_runs_in_order(slow_fallback: None) -> None:
    done: list[str] = []
    finished = threading.Event()
    background.later(lambda: done.append("a"))
    background.later(lambda: done.append("b"))
    background.later(finished.set)
    time.sleep(0.3)
    assert done == [], "work ran before the apparatus waited on a harness"
    background.idle()
    assert finished.wait(10)
    assert done == ["a", "b"]


def test_work_queued_after_idle_waits_for_the_next_idle(slow_fallback: None) -> None:
    first, second = threading.Event(), threading.Event()
    background.later(first.set)
    background.idle()
    assert first.wait(10)
    background.later(second.set)
    assert not second.wait(0.3), "an earlier idle released work queued after it"
    background.idle()
    assert second.wait(10)


def test_unreleased_work_runs_after_the_longest_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(background, "MAX_WAIT_S", 0.2)
    ran = threading.Event()
    begun = time.monotonic()
    background.later(ran.set)
    assert ran.wait(10)
    assert time.monotonic() - begun >= 0.15


def test_a_failing_piece_of_work_does_not_stop_the_rest(slow_fallback: None) -> None:
    ran = threading.Event()

    def broken() -> None:
        raise RuntimeError("boom")

    background.later(broken)
    background.later(ran.set)
    background.idle()
    assert ran.wait(10)


def test_flush_runs_what_is_queued_and_says_so(slow_fallback: None) -> None:
    done: list[int] = []
    for i in range(3):
        background.later(lambda i=i: done.append(i))
    assert background.flush(10)
    assert done == [0, 1, 2]
