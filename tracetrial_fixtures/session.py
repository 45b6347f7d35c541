"""The plugin's state for one pytest session, kept on the config (not in module globals).

One :class:`Session` per ``pytest.Config``, stored under :data:`SESSION_KEY` by
``pytest_configure``. Every process has its own: under xdist the controller's records
the progress lines and writes the reports, while each worker's only runs cells. An
in-process session (``pytester``) has its own config, so its cells never show up in the
session that started it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

from tracetrial_fixtures.settings import Settings

if TYPE_CHECKING:
    from ci.baseline import Baseline

__all__ = ["SESSION_KEY", "Session", "is_worker", "session_of"]


@dataclass
class Session:
    """What the plugin knows and collects during one pytest session."""

    settings: Settings
    #: The ``--tt-baseline`` file, when given (its known failures mark cells at collection).
    baseline: Baseline | None = None
    #: Harness name -> why no sandbox can wrap it (an adapter that starts its processes
    #: without ``run_process``/``Confinement.wrap``). Empty: every built-in harness is
    #: confinable (DeepSeek's JSON-RPC runtime goes through ``wrap``). Such a harness runs
    #: on ``local`` under ``auto`` and is skipped under an explicit docker or bwrap.
    unconfinable: dict[str, str] = field(default_factory=dict)
    #: Progress lines of finished cells, in finishing order (controller only).
    progress: list[str] = field(default_factory=list)
    #: Node ids already given a progress line (sub-check reports repeat a cell's id).
    reported: set[str] = field(default_factory=set)
    #: Lines for the end of the session summary (a report that could not be written).
    notes: list[str] = field(default_factory=list)
    #: Names this session's spend ledger (``--tt-max-cost``); the controller's, handed to its workers.
    spend_id: str = ""
    #: ``--tt-estimate``: the dry run's table (controller, or the process that collected).
    estimate: list[str] = field(default_factory=list)
    #: Cells not started because the session reached ``--tt-max-cost`` (controller: from reports).
    capped: int = 0


SESSION_KEY = pytest.StashKey[Session]()


def session_of(config: pytest.Config) -> Session:
    """The :class:`Session` of ``config`` (set up by the plugin's ``pytest_configure``)."""
    return config.stash[SESSION_KEY]


def is_worker(config: pytest.Config) -> bool:
    """An xdist worker: it runs cells; the controller reports them."""
    return hasattr(config, "workerinput")
