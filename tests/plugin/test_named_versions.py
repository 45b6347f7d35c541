"""``--tt-harness <name>@<version>`` (issue 18 item 4): a named version installed next to
the pins runs as its own cells beside the plain pinned name; one that is not installed is a
usage error naming the install command."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harnesses.test_named_versions import fake_version
from tests.plugin.test_collection import collected, make_suite
from tests.plugin.test_usage_errors import usage_error

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "tools"
    fake_version(root, "codex", "9.9.9")
    monkeypatch.setenv("TT_TOOLS_DIR", str(root))
    return root


def test_named_version_next_to_the_pin(pytester: pytest.Pytester, tools: Path) -> None:
    make_suite(pytester)
    result = pytester.runpytest("tasks", "--collect-only", "-q", "--tt-harness", "codex@9.9.9,codex")
    assert collected(result) == ["test_cell[E1-build-status-001-codex@9.9.9-probe]",
                                 "test_cell[E1-build-status-001-codex-probe]"]
    # The named version's keyword (marker) selects only its cells; the pin keeps its own.
    result = pytester.runpytest("tasks", "--collect-only", "-q", "--tt-harness", "codex@9.9.9,codex",
                                "-k", "codex_9_9_9")
    assert collected(result) == ["test_cell[E1-build-status-001-codex@9.9.9-probe]"]
    result = pytester.runpytest("tasks", "--collect-only", "-q", "--tt-harness", "codex@9.9.9,codex",
                                "-m", "codex")
    assert collected(result) == ["test_cell[E1-build-status-001-codex-probe]"]


def test_not_installed_version_names_the_install_command(pytester: pytest.Pytester, tools: Path) -> None:
    make_suite(pytester)
    line = usage_error(pytester.runpytest("tasks", "--collect-only", "-q", "--tt-harness", "codex,codex@9.9.8"))
    assert line == ("ERROR: --tt-harness: codex@9.9.8 is not installed; run: tracetrial install codex@9.9.8 "
                    "(installed named versions: 9.9.9)")


@pytest.mark.parametrize(("name", "message"), [
    ("reference@1.0", "'reference' has no named versions"),
    ("nosuch@1.0", "unknown harness 'nosuch@1.0'"),
    ("codex@../../x", "is not a version"),
])
def test_bad_named_versions_are_usage_errors(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                            name: str, message: str) -> None:
    make_suite(pytester)
    monkeypatch.setenv("TT_HARNESS", name)
    line = usage_error(pytester.runpytest("tasks", "--collect-only", "-q"))
    assert line.startswith("ERROR: TT_HARNESS: ") and message in line


def test_pinned_version_spelled_with_at_is_refused(pytester: pytest.Pytester) -> None:
    from harnesses.install import pinned_version

    make_suite(pytester)
    pin = pinned_version("codex")
    line = usage_error(pytester.runpytest("tasks", "--collect-only", "-q", "--tt-harness", f"codex@{pin}"))
    assert f"codex@{pin} is the pinned version; select it as 'codex'" in line


def test_baseline_marks_follow_the_named_key(pytester: pytest.Pytester, tools: Path) -> None:
    import json

    make_suite(pytester)
    baseline = pytester.path / "baseline.json"
    baseline.write_text(json.dumps({"schema": "tt-baseline/1", "protocol": "probe",
                                    "harness_versions": {"codex": "0.145.0", "codex@9.9.9": "9.9.9"},
                                    "cells": {"E1-build-status-001/probe/codex@9.9.9": {"H1": "fail"},
                                              "E1-build-status-001/probe/codex": {"H1": "pass"}}}))
    pytester.makeconftest("""
import pytest

def pytest_collection_modifyitems(items):
    for item in items:
        marks = [m.kwargs.get("known") for m in item.iter_markers("tt_baseline")]
        print("MARK", item.name, marks)
""")
    result = pytester.runpytest("tasks", "--collect-only", "-q", "-s", "--tt-harness", "codex@9.9.9,codex",
                                f"--tt-baseline={baseline}")
    marks = [line for line in result.outlines if line.startswith("MARK")]
    assert "MARK test_cell[E1-build-status-001-codex@9.9.9-probe] [{'H1': 'fail'}]" in marks
    assert "MARK test_cell[E1-build-status-001-codex-probe] []" in marks
