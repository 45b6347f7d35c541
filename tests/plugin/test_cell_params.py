"""What a cell's test item carries (issue 17): a parameter with nothing private in it, and
its own settings, so a tasks folder run outside this repository (another rootdir, none of
the project's ``[tool.pytest.ini_options]``) behaves the same."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE_PACK, REPO
from tests.plugin.test_collection import make_suite
from tracetrial.task import load_task
from tracetrial_fixtures.collect import CELL_TIMEOUT_METHOD, CellRef

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

SECRET = "planted-0c4f1d9e8b7a6c5d"
TRUTH = "truthmark-5e6f7a8b9c0d1e2f"


def _plant(tasks: Path) -> Path:
    pack = tasks / EXAMPLE_PACK.name
    with (pack / "task.yaml").open("a") as fh:
        fh.write(f'\nsecrets:\n  - "{SECRET}"\n')
    (pack / "truth.json").write_text(f'{{"exit_code": 3, "build": "failed", "marker": "{TRUTH}"}}')
    return pack


def test_the_parameter_and_the_pack_print_no_secret_and_no_truth(pytester: pytest.Pytester) -> None:
    pack = _plant(make_suite(pytester))
    items, _ = pytester.inline_genitems("tasks", "--tt-harness", "reference,reference+hide_exit_code")
    assert len(items) == 2
    for item in items:
        param = item.callspec.params["tt_cell_spec"]   # what allure-pytest records, pytest prints
        assert isinstance(param, CellRef) and param.path == pack.resolve()
        cell = param.load()                            # loaded inside the cell
        assert cell.pack.truth["marker"] == TRUTH and cell.pack.spec.secrets == [SECRET]
        for shown in (repr(param), repr(cell), repr(cell.pack), repr(cell.pack.spec), item.nodeid):
            assert SECRET not in shown and TRUTH not in shown, shown
    assert repr(load_task(pack)) == f"TaskPack(id={EXAMPLE_PACK.name!r}, root={str(pack.resolve())!r})"


def test_a_pack_broken_after_collection_fails_its_cell(pytester: pytest.Pytester) -> None:
    pack = _plant(make_suite(pytester))
    items, _ = pytester.inline_genitems("tasks", "--tt-harness", "reference")
    (pack / "prompt.md").unlink()
    cell = items[0].callspec.params["tt_cell_spec"].load()
    assert "prompt.md" in str(cell.pack.error)


def test_cells_carry_their_own_timeout_and_method(pytester: pytest.Pytester) -> None:
    """pytester's folder has no ini: the marks are all a cell gets, as outside the repo."""
    tasks = make_suite(pytester)
    broken = tasks / "E2-broken-pack-001"
    broken.mkdir()
    (broken / "task.yaml").write_text("id: E2-broken-pack-001\n")
    items, _ = pytester.inline_genitems("tasks", "--tt-harness", "reference")
    assert len(items) == 2
    for item in items:
        mark = item.get_closest_marker("timeout")
        assert mark is not None and mark.args[0] > 0
        assert mark.kwargs == {"method": CELL_TIMEOUT_METHOD} and CELL_TIMEOUT_METHOD == "signal"


def test_a_tasks_folder_outside_the_repo_collects_with_strict_markers(tmp_path: Path) -> None:
    """``pytest /elsewhere/tasks`` from the repo: the rootdir moves to the copy, yet the cells
    are collected, their markers registered (``--strict-markers``) and selectable."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    for name in ("test_cells.py", "conftest.py"):
        (tasks / name).write_bytes((REPO / "tasks" / name).read_bytes())
    import shutil

    shutil.copytree(EXAMPLE_PACK, tasks / EXAMPLE_PACK.name, ignore=shutil.ignore_patterns("__pycache__"))
    proc = subprocess.run([sys.executable, "-m", "pytest", str(tasks), "--collect-only", "-q", "-p", "no:cacheprovider",
                           "--strict-markers", "-m", "Execution and exit_code_fidelity and reference",
                           "--tt-harness", "reference,codex"],
                          cwd=REPO, env={**os.environ}, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "test_cells.py::test_cell[E1-build-status-001-reference-probe]" in proc.stdout
    assert "codex-probe" not in proc.stdout and "1/2 tests collected" in proc.stdout
    header = subprocess.run([sys.executable, "-m", "pytest", str(tasks), "--collect-only", "-p", "no:cacheprovider",
                             "--tt-harness", "reference"], cwd=REPO, capture_output=True, text=True, timeout=300,
                            check=False)
    # The rootdir is the common ancestor of the repo (the invocation folder) and the copy: where
    # that is depends on where the checkout lives, but it is never the repo, and no ini is used.
    (rootdir,) = [line for line in header.stdout.splitlines() if line.startswith("rootdir: ")]
    assert rootdir != f"rootdir: {REPO}" and "configfile" not in header.stdout, header.stdout[-2000:]
