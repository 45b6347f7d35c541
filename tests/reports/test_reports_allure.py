"""Allure enrichment: labels, one step per criterion, archive attachments.

The in-process tests listen on allure's own hook manager (what allure-pytest does
under ``--alluredir``); one subprocess test checks the real result files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import allure_commons
import pytest

from reports.allure import attach_cell
from reports.synthetic import make_combined, write_cell
from tracetrial.archive import RunPaths
from tracetrial.results import ExceptionInfo


class Recorder:
    """Collects the allure hook calls made by :func:`attach_cell`."""

    def __init__(self) -> None:
        self.labels: list[tuple[str, str]] = []
        self.params: dict[str, Any] = {}
        self.steps: list[dict[str, Any]] = []
        self.attachments: list[tuple[str, str | None]] = []   # (name, step title or None)
        self._open: list[dict[str, Any]] = []
        self.description = ""

    @allure_commons.hookimpl
    def add_label(self, label_type: Any, labels: Any) -> None:
        self.labels += [(str(getattr(label_type, "value", label_type)), str(v)) for v in labels]

    @allure_commons.hookimpl
    def add_parameter(self, name: str, value: Any, excluded: Any, mode: Any) -> None:
        self.params[name] = value

    @allure_commons.hookimpl
    def add_description(self, test_description: str) -> None:
        self.description = test_description

    @allure_commons.hookimpl
    def start_step(self, uuid: Any, title: str, params: Any) -> None:
        step = {"title": title, "exc": None}
        self.steps.append(step)
        self._open.append(step)

    @allure_commons.hookimpl
    def stop_step(self, uuid: Any, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        self._open.pop()["exc"] = exc_val

    def _attach(self, name: str) -> None:
        self.attachments.append((name, self._open[-1]["title"] if self._open else None))

    @allure_commons.hookimpl
    def attach_data(self, body: Any, name: str, attachment_type: Any, extension: Any) -> None:
        self._attach(name)

    @allure_commons.hookimpl
    def attach_file(self, source: Any, name: str, attachment_type: Any, extension: Any) -> None:
        assert Path(source).is_file()
        self._attach(name)


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    rec = Recorder()
    allure_commons.plugin_manager.register(rec)
    try:
        yield rec
    finally:
        allure_commons.plugin_manager.unregister(rec)


def _cell(out: Path) -> RunPaths:
    cs = make_combined("E1-exit-code-001", "probe", "codex", {"H1": False, "H2": True, "H3": None},
                       {"A1": False}, links=[("H1", "A1")], with_packets=True)
    return write_cell(out, cs, prop="exit_code_fidelity")


def test_labels_and_parameter(recorder: Recorder, tmp_path: Path) -> None:
    attach_cell(_cell(tmp_path))
    labels = dict(recorder.labels)
    assert labels["epic"] == "Execution"
    assert labels["feature"] == "exit_code_fidelity"
    assert labels["story"] == "E1-exit-code-001"
    assert labels["suite"] == "codex"
    assert recorder.params == {"model": "probe"}
    assert ("tag", "protocol:probe") in recorder.labels and ("tag", "label:harness_caused") in recorder.labels
    assert "S_H 16.7 + S_A 0.0" in recorder.description


def test_one_step_per_criterion_with_verdict_status_and_packet(recorder: Recorder, tmp_path: Path) -> None:
    attach_cell(_cell(tmp_path))
    titles = [s["title"] for s in recorder.steps]
    assert titles == ["[harness] H1 — FAIL", "[harness] H2 — PASS", "[harness] H3 — UNSCORED",
                      "[agent] A1 — FAIL"]
    exc = {s["title"].split()[1]: s["exc"] for s in recorder.steps}
    assert isinstance(exc["H1"], AssertionError) and exc["H2"] is None
    assert isinstance(exc["H3"], pytest.skip.Exception)          # unscored: skipped, never passed
    assert ("H1 evidence packet", "[harness] H1 — FAIL") in recorder.attachments
    assert ("H1 verdict", "[harness] H1 — FAIL") in recorder.attachments


def test_archive_files_attached_to_the_test(recorder: Recorder, tmp_path: Path) -> None:
    attach_cell(_cell(tmp_path))
    top = [name for name, step in recorder.attachments if step is None]
    assert top == ["combined_score.json", "events.json", "workspace.diff", "cell page", "trajectory.atif.json"]


def test_packet_outside_the_run_folder_is_not_followed(recorder: Recorder, tmp_path: Path) -> None:
    cs = make_combined("E1-x-001", "m", "h", {"H1": False}, {"A1": True})
    paths = write_cell(tmp_path, cs)
    cs.verdicts[0].packet_path = "../../../../../etc/passwd"
    attach_cell(paths, cs)
    names = [n for n, _ in recorder.attachments]
    assert "H1 evidence packet" not in names and "H1 evidence packet (missing)" in names


def test_not_scored_cell_is_labelled_from_result_json(recorder: Recorder, tmp_path: Path) -> None:
    paths = write_cell(tmp_path, None, task_id="L4-pending-001", model="m", harness="openclaw", status="failed",
                       exception=ExceptionInfo(type="X", message="boom", origin="harness"))
    attach_cell(paths)
    labels = dict(recorder.labels)
    assert (labels["epic"], labels["story"], labels["suite"]) == ("Lifecycle", "L4-pending-001", "openclaw")
    assert recorder.steps == [] and "Not scored" in recorder.description
    assert [n for n, _ in recorder.attachments][:4] == ["result.json", "events.json", "workspace.diff",
                                                        "cell page (missing)"]  # no score: no page, said so


def test_views_are_built_only_when_something_listens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --alluredir nothing receives attachments: no page or trajectory is built."""
    import reports.allure as A

    monkeypatch.setattr(A, "_attach_views", lambda paths: pytest.fail("views built with no listener"))
    attach_cell(_cell(tmp_path))


def test_an_unreadable_trace_gives_a_note_not_a_failure(recorder: Recorder, tmp_path: Path) -> None:
    paths = _cell(tmp_path)
    paths.events.write_text("not json", encoding="utf-8")
    attach_cell(paths)
    assert "trajectory.atif.json (missing)" in [n for n, _ in recorder.attachments]


def test_real_allure_results_written_by_allure_pytest(tmp_path: Path) -> None:
    """End to end through allure-pytest (``--alluredir``) in a child pytest."""
    paths = _cell(tmp_path / "out")
    test_file = tmp_path / "test_cell.py"
    test_file.write_text(textwrap.dedent(f"""
        from pathlib import Path
        from reports.allure import attach_cell

        def test_cell():
            attach_cell(Path({str(paths.root)!r}))
    """), encoding="utf-8")
    results = tmp_path / "allure-results"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:tracetrial",
         f"--alluredir={results}", str(test_file)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (result,) = [json.loads(p.read_text()) for p in results.glob("*-result.json")]
    labels = {(lb["name"], lb["value"]) for lb in result["labels"]}
    assert {("epic", "Execution"), ("feature", "exit_code_fidelity"), ("story", "E1-exit-code-001"),
            ("suite", "codex")} <= labels
    assert result["parameters"] == [{"name": "model", "value": "'probe'"}]   # allure repr()s values
    assert [(s["name"], s["status"]) for s in result["steps"]] == [
        ("[harness] H1 — FAIL", "failed"), ("[harness] H2 — PASS", "passed"),
        ("[harness] H3 — UNSCORED", "skipped"), ("[agent] A1 — FAIL", "failed")]
    assert result["status"] == "passed"          # the verdicts do not decide the test outcome here
    names = [a["name"] for a in result["attachments"]]
    assert names == ["combined_score.json", "events.json", "workspace.diff", "cell page", "trajectory.atif.json"]
    for a in result["attachments"] + result["steps"][0]["attachments"]:
        assert (results / a["source"]).is_file()
    files = {a["name"]: results / a["source"] for a in result["attachments"]}
    page = files["cell page"].read_text(encoding="utf-8")
    assert "E1-exit-code-001" in page and "H1" in page and "<html" in page.lower()  # the drill-down page
    trajectory = json.loads(files["trajectory.atif.json"].read_text(encoding="utf-8"))
    assert trajectory["schema_version"] == "ATIF-v1.7"
