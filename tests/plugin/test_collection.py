"""Plugin behaviour with pytester: cells, ids, markers, -k slices, broken packs, registry."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE_PACK, REPO

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")


def make_suite(pytester: pytest.Pytester, *extra_ids: str) -> Path:
    tasks = pytester.path / "tasks"
    tasks.mkdir()
    shutil.copy(REPO / "tasks" / "test_cells.py", tasks / "test_cells.py")
    shutil.copy(REPO / "tasks" / "conftest.py", tasks / "conftest.py")
    shutil.copytree(EXAMPLE_PACK, tasks / EXAMPLE_PACK.name, ignore=shutil.ignore_patterns("__pycache__"))
    for new_id in extra_ids:
        dest = tasks / new_id
        shutil.copytree(EXAMPLE_PACK, dest, ignore=shutil.ignore_patterns("__pycache__"))
        text = (dest / "task.yaml").read_text().replace("E1-build-status-001", new_id)
        if new_id.startswith("O1"):
            text = text.replace("component: E", "component: O").replace("exit_code_fidelity", "tool_error_relay")
        (dest / "task.yaml").write_text(text)
    return tasks


def collected(result: pytest.RunResult) -> list[str]:
    return [line.split("::")[-1] for line in result.outlines if "::test_cell[" in line]


def test_cells_are_task_harness_model(pytester: pytest.Pytester) -> None:
    make_suite(pytester, "O1-ticket-error-001")
    result = pytester.runpytest("tasks", "--collect-only", "-q", "--tt-harness", "codex,reference",
                                "--tt-model", "probe")
    assert collected(result) == [
        "test_cell[E1-build-status-001-codex-probe]",
        "test_cell[E1-build-status-001-reference-probe]",
        "test_cell[O1-ticket-error-001-codex-probe]",
        "test_cell[O1-ticket-error-001-reference-probe]",
    ]


def test_k_selects_component_and_harness(pytester: pytest.Pytester) -> None:
    make_suite(pytester, "O1-ticket-error-001")
    result = pytester.runpytest("tasks", "--collect-only", "-q", "-k", "Execution and codex")
    assert collected(result) == ["test_cell[E1-build-status-001-codex-probe]"]
    result = pytester.runpytest("tasks", "--collect-only", "-q", "-k", "Observability and not codex")
    # default harness set = every registered harness, in the usual order
    from harnesses.registry import available_harnesses
    from tracetrial_fixtures.settings import DEFAULT_HARNESSES

    expected = [h for h in DEFAULT_HARNESSES if h in available_harnesses() and h != "codex"]
    assert collected(result) == [f"test_cell[O1-ticket-error-001-{h}-probe]" for h in expected]
    assert "claude_code" in expected and "reference" in expected


def test_markers_select_property_surface_and_form(pytester: pytest.Pytester) -> None:
    make_suite(pytester, "O1-ticket-error-001")
    result = pytester.runpytest("tasks", "--collect-only", "-q", "-m", "tool_error_relay and terminal and single_turn",
                                "--tt-harness", "reference")
    assert collected(result) == ["test_cell[O1-ticket-error-001-reference-probe]"]
    result = pytester.runpytest("tasks", "--collect-only", "-q", "-m", "reference_hide_exit_code",
                                "--tt-harness", "reference,reference+hide_exit_code")
    assert collected(result) == ["test_cell[E1-build-status-001-reference+hide_exit_code-probe]",
                                 "test_cell[O1-ticket-error-001-reference+hide_exit_code-probe]"]


def test_strict_markers_still_reject_typos(pytester: pytest.Pytester) -> None:
    make_suite(pytester)
    (pytester.path / "tasks" / "test_typo.py").write_text(
        "import pytest\n@pytest.mark.Executoin\ndef test_x():\n    pass\n")
    result = pytester.runpytest("tasks", "--collect-only", "-q", "--strict-markers")
    result.stdout.fnmatch_lines(["*'Executoin' not found in `markers` configuration option*"])


def test_broken_pack_fails_only_its_own_cells(pytester: pytest.Pytester) -> None:
    tasks = make_suite(pytester, "O1-ticket-error-001")
    (tasks / "O1-ticket-error-001" / "turns.json").write_text("{nope")
    # Only the broken pack's cells run here (the other pack would need the gateway).
    result = pytester.runpytest("tasks", "-q", "--tt-harness", "reference", "-k", "O1",
                                f"--tt-output={pytester.path / 'out'}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*turns.json: malformed JSON at line 1, column 2*"])
    collect = pytester.runpytest("tasks", "--collect-only", "-q", "--tt-harness", "reference")
    assert "test_cell[E1-build-status-001-reference-probe]" in collected(collect)


def test_unknown_harness_stops_the_session_before_any_cell(pytester: pytest.Pytester) -> None:
    """A typo in --tt-harness is a usage error (one line, exit 4), not a failed cell per task."""
    make_suite(pytester)
    result = pytester.runpytest("tasks", "-q", "--tt-harness", "nosuch", f"--tt-output={pytester.path / 'out'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--tt-harness: unknown harness 'nosuch'; registered:*tracetrial.harnesses*"])
    assert not (pytester.path / "out").exists()


def test_third_party_harness_through_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A package outside this repo registers a harness without editing it (run under every
    backend: ``tests/sandbox/test_thirdparty_harness.py``)."""
    site = tmp_path / "site"
    pkg = site / "acme_harness"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "from harnesses.base import HarnessAdapter\n"
        "class Acme(HarnessAdapter):\n"
        "    name = 'acme'\n    wire_format = 'chat'\n"
        "    def unavailable_reason(self): return 'acme is not installed here'\n"
        "    def version(self): return '0'\n"
        "    def run_turn(self, ctx, turn): raise AssertionError\n"
        "    def normalize(self, paths, outcomes, run_id): raise AssertionError\n")
    dist = site / "acme_harness-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-harness\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[tracetrial.harnesses]\nacme = acme_harness:Acme\n")
    monkeypatch.syspath_prepend(str(site))
    from apparatus.sandbox import code_paths
    from harnesses.registry import available_harnesses, get_harness

    assert "acme" in available_harnesses()
    # Its code stays visible to a confined harness, found without importing it.
    assert pkg.resolve() in code_paths() and "acme_harness" not in sys.modules
    adapter = get_harness("acme+variant")
    assert adapter.full_name == "acme+variant"
    assert adapter.unavailable_reason() == "acme is not installed here"
    sys.modules.pop("acme_harness", None)
