"""TraceTrial pytest plugin entry point (``pytest11``): options, markers, thin hooks."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tracetrial", "TraceTrial harness benchmark")
    group.addoption("--tt-harness", action="store", default=None,
                    help="comma-separated harness names (default: every installed harness)")
    group.addoption("--tt-model", action="store", default="probe",
                    help="comma-separated model aliases from models.yaml (default: probe)")
    group.addoption("--tt-sandbox", action="store", default="auto",
                    choices=("auto", "docker", "bwrap", "local"), help="sandbox backend")
    group.addoption("--tt-output", action="store", default="outputs", help="archive folder")
    group.addoption("--tt-judge", action="store", default=None,
                    help="judge model alias for semantic rubrics (none: they are 'unscored')")
    group.addoption("--tt-rerun", action="store_true", default=False,
                    help="re-run cells whose archive is already complete")
