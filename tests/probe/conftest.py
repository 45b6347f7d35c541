"""Fixtures for the probe-model tests: one server per module, policies written to tmp files."""

from __future__ import annotations

import itertools
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from apparatus.probe import ProbeServer

_ids = itertools.count(1)


@pytest.fixture(scope="module")
def probe() -> Iterator[ProbeServer]:
    server = ProbeServer().start()
    yield server
    server.stop()


@pytest.fixture
def write_policy(tmp_path: Path) -> Callable[[str], Path]:
    """Write a ``probe_policy.py`` from dedented source and return its path."""

    def write(source: str) -> Path:
        path = tmp_path / f"probe_policy_{next(_ids)}.py"
        path.write_text(textwrap.dedent(source), encoding="utf-8")
        return path

    return write


@pytest.fixture
def run_id() -> str:
    return f"run-{next(_ids)}"
