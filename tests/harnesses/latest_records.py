"""Shared checks of the latest-version golden tests (``test_<harness>_latest_records.py``).

A named version's captures (``golden/<harness>/<case>@<version>``, ``python -m
tests.harnesses.capture <harness>@<version>``) sit beside the pinned ones (``<case>``); their
snapshots are taken by each harness's ``test_golden_trace_snapshot`` with the pinned ones, so these
helpers check what every harness's latest captures must satisfy besides their snapshots.
"""

from __future__ import annotations

from harnesses.base import NormalizedTrace
from tests.harnesses.conftest import Golden, golden_cases, load_golden
from tests.harnesses.test_record_accounting import assert_accounted, normalize
from tracetrial.trace import NativeDiagnosticEvent


def latest_cases(harness: str, version: str) -> list[str]:
    """The case folders captured with ``harness@version``."""
    return [c for c in golden_cases(harness) if c.endswith(f"@{version}")]


def pinned_cases(harness: str) -> list[str]:
    """The case folders captured with the pinned version."""
    return [c for c in golden_cases(harness) if "@" not in c]


def assert_latest_cover_the_pinned_flows(harness: str, version: str) -> None:
    """There are captures of ``harness@version``, one per pinned flow, each of that version."""
    latest = latest_cases(harness, version)
    assert latest, f"no golden capture of {harness}@{version}"
    assert sorted(c.partition("@")[0] for c in latest) == sorted(pinned_cases(harness))
    for case in latest:
        meta = load_golden(harness, case).meta
        assert (meta["version"], meta["named_version"]) == (version, f"{harness}@{version}")


def assert_complete_and_accounted(g: Golden) -> NormalizedTrace:
    """The capture normalizes to a ``complete`` trace with every record accounted, none of an
    unknown type, and no diagnostic naming a lost record; returns the trace."""
    trace = normalize(g)
    assert_accounted(g, trace)
    acc = trace.accounting
    assert acc is not None and not acc.problems()
    assert not [r for r in acc.records if r.unknown_type]
    assert trace.structured_trace_status == "complete" and trace.trace_complete
    assert not [e for e in trace.events if isinstance(e, NativeDiagnosticEvent)
                and e.diagnostic_type in ("unknown_record_type", "unaccounted_record")]
    return trace
