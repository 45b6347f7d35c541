"""A command the apparatus starts gets the signals a terminal's user would send at their default
action, whatever the apparatus inherited: run as a background job of a non-interactive shell
(or under ``nohup``) it has SIGINT, SIGQUIT (and SIGHUP) ignored, and an ignored signal stays
ignored across ``exec`` — a harness's Ctrl-C to a job on its terminal would never arrive."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator

import pytest

from apparatus import lifetime

TERMINAL_SIGNALS = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT)
SHOW_IGNORED = ["sh", "-c", "grep '^SigIgn:' /proc/self/status"]


def _ignored(status_line: bytes) -> set[int]:
    mask = int(status_line.split()[1], 16)
    return {sig for sig in TERMINAL_SIGNALS if mask & (1 << (sig - 1))}


@pytest.fixture
def as_a_background_job() -> Iterator[None]:
    """This process ignores the terminal's signals, as a ``nohup … &`` job does (restored after)."""
    before = {sig: signal.getsignal(sig) for sig in TERMINAL_SIGNALS}
    for sig in TERMINAL_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def test_a_plain_child_would_inherit_them_ignored(as_a_background_job: None) -> None:
    """The condition the supervisor undoes (so the next test can fail)."""
    out = subprocess.run(SHOW_IGNORED, capture_output=True, check=True).stdout
    assert _ignored(out) == set(TERMINAL_SIGNALS)


def test_a_supervised_command_starts_with_them_at_their_default(as_a_background_job: None) -> None:
    proc, _pid = lifetime.spawn(SHOW_IGNORED, stdout=subprocess.PIPE)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert _ignored(out) == set()
