"""Resume trusts only a cell whose seal verifies (issue 17): a tampered cell is neither
re-reported nor silently re-run; it fails naming the first mismatching file, and its
archive is kept exactly as found.

The cell runner's resume is checked directly on built archives (fast); the slow tests
archive one real cell (E1 on a reference mutant, probe model, local sandbox) once per
module and resume a copy of it in a pytest session.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from criteria import score_run
from harnesses.registry import get_harness
from tests.criteria.archive_factory import (
    RunBuilder,
    flip_one_byte,
    forge_clean_score,
    rule_criterion,
    write_task_pack,
)
from tests.plugin.test_session import write_suite
from tracetrial.archive import verify_manifest
from tracetrial.task import load_task
from tracetrial_fixtures.cell import CellRunner
from tracetrial_fixtures.services import Services

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

CELL = Path("traces") / "E1-build-status-001" / "probe" / "reference+hide_exit_code"
COMBINED_SCORE = "artifacts/llm_judge/combined_score.json"
ARGS = ["tasks", "-p", "no:cacheprovider", "--tt-harness=reference+hide_exit_code", "--tt-sandbox=local"]


def built_cell(tmp_path: Path) -> tuple[CellRunner, Path]:
    """A scored, sealed cell of the reference harness (failing H1) and the runner that would resume it."""
    pack = write_task_pack(tmp_path / "tasks", harness=[rule_criterion("H1", "trace_event_exists", event_type="tool")],
                           agent=[rule_criterion("A1", "verifier")], truth={"verifier_pass": {"A1": True}})
    run = RunBuilder(tmp_path / "out", pack, harness="reference")
    run_dir = run.build()
    score_run(load_task(run_dir / "private" / "task" / pack.name), run_dir)
    # Resuming a tampered cell must decide before anything starts: no services exist here.
    runner = CellRunner(load_task(pack), get_harness("reference"), "probe", tmp_path / "out",
                        Services.__new__(Services))
    assert runner.paths.root == run_dir
    return runner, run_dir


def _cell_of_pack(tmp_path: Path, digest: str | None) -> CellRunner:
    """A scored cell whose result.json names ``digest`` as its pack's (``"own"``: the pack's real
    digest; ``None``: no digest, as archives before the field)."""
    pack = write_task_pack(tmp_path / "tasks", harness=[rule_criterion("H1", "trace_event_exists", event_type="tool")],
                           agent=[rule_criterion("A1", "verifier")], truth={"verifier_pass": {"A1": True}})
    digest = load_task(pack).digest if digest == "own" else digest
    config = {} if digest is None else {"pack_digest": digest}
    run_dir = RunBuilder(tmp_path / "out", pack, harness="reference",
                         result_overrides={"resolved_config": config}).build()
    score_run(load_task(run_dir / "private" / "task" / pack.name), run_dir)
    return CellRunner(load_task(pack), get_harness("reference"), "probe", tmp_path / "out",
                      Services.__new__(Services))


@pytest.mark.parametrize(("recorded", "resumed"), [("own", True), (None, True), ("0" * 64, False)])
def test_resume_runs_a_cell_of_another_pack_revision_again(tmp_path: Path, recorded: str | None, resumed: bool) -> None:
    """A cell archived on another revision of the pack (another pack digest in result.json) is
    not re-reported as if it measured the current task; an archive older than the field resumes."""
    from tracetrial_fixtures.cell import load_existing

    runner = _cell_of_pack(tmp_path, recorded)
    score, problem = load_existing(runner.paths, runner.task.digest)
    assert problem is None and (score is not None) == resumed


@pytest.mark.parametrize(("archived", "now", "resumed"), [
    ("0.1.0+src.aaaa", "0.1.0+src.aaaa", True), ("0.1.0+src.aaaa", "0.1.0+src.bbbb", False),
    (None, "0.1.0+src.bbbb", True), ("0.1.0+src.aaaa", None, True)])
def test_resume_runs_a_cell_of_another_harness_version_again(tmp_path: Path, archived: str | None, now: str | None,
                                                             resumed: bool) -> None:
    """A cell another version of the harness ran (an upgraded CLI; the reference after its source
    changed, e.g. a recalibration) is measured again, not re-reported; an archive without the
    version, or a harness whose version cannot be read now, resumes as before."""
    from tracetrial.results import CellIdentity
    from tracetrial_fixtures.cell import load_existing

    pack = write_task_pack(tmp_path / "tasks", harness=[rule_criterion("H1", "trace_event_exists", event_type="tool")],
                           agent=[rule_criterion("A1", "verifier")], truth={"verifier_pass": {"A1": True}})
    task = load_task(pack)
    builder = RunBuilder(tmp_path / "out", pack, harness="reference")
    identity = CellIdentity(run_id=builder.run_id, task_id=task.id, task_revision=task.spec.revision,
                            harness="reference", harness_version=archived, model="probe", protocol="probe")
    builder.result_overrides = {"identity": identity}
    run_dir = builder.build()
    score_run(load_task(run_dir / "private" / "task" / pack.name), run_dir)
    runner = CellRunner(task, get_harness("reference"), "probe", tmp_path / "out", Services.__new__(Services))
    score, problem = load_existing(runner.paths, task.digest, now)
    assert problem is None and (score is not None) == resumed


def test_resume_re_reports_an_intact_cell(tmp_path: Path) -> None:
    runner, _ = built_cell(tmp_path)
    result = runner.run()
    assert result.resumed and result.problem is None and result.score is not None


@pytest.mark.parametrize("tamper", ["forge", "byte"])
def test_the_runner_never_trusts_nor_reruns_a_tampered_cell(tmp_path: Path, tamper: str) -> None:
    runner, run_dir = built_cell(tmp_path)
    if tamper == "forge":
        forge_clean_score(run_dir)
        first = COMBINED_SCORE
    else:
        flip_one_byte(run_dir / "events.json")
        first = "events.json"
    kept = tree(run_dir)
    result = runner.run()
    assert result.score is None and not result.resumed
    assert result.problem is not None
    assert result.problem.startswith(f"archive tampered, not trusted and not re-run: {first}: content changed")
    assert "--tt-rerun" in result.problem
    assert tree(run_dir) == kept


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real session's archive of one failing cell (the mutant hides the exit code)."""
    root = tmp_path_factory.mktemp("tamper-run")
    write_suite(root)
    out = root / "out"
    proc = subprocess.run([sys.executable, "-m", "pytest", *ARGS, f"--tt-output={out}"], cwd=root,
                          env={**os.environ, "TT_NO_REPORTS": "1"}, capture_output=True, text=True,
                          timeout=600, check=False)
    assert "5 failed" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert verify_manifest(out / CELL).ok
    return out


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def resume(pytester: pytest.Pytester, archive: Path, tamper: str) -> tuple[pytest.RunResult, Path, dict[str, bytes]]:
    """Resume a copy of ``archive`` whose cell was tampered with (``forge`` / ``byte``)."""
    write_suite(pytester.path)
    out = pytester.path / "out"
    shutil.copytree(archive, out)
    cell = out / CELL
    if tamper == "forge":
        forge_clean_score(cell)
    else:
        flip_one_byte(cell / "events.json")
    kept = tree(cell)
    result = pytester.runpytest(*ARGS, f"--tt-output={out}")
    return result, cell, kept


@pytest.mark.slow
def test_resume_flags_a_consistently_forged_score(pytester: pytest.Pytester, archive: Path) -> None:
    result, cell, kept = resume(pytester, archive, "forge")
    result.assert_outcomes(failed=1)  # the forged "clean" score is not re-reported as a pass
    result.stdout.fnmatch_lines([(f"*archive tampered, not trusted and not re-run: {COMBINED_SCORE}: content "
                                  "changed since the manifest was written (sha256 mismatch)*")])
    # the cell's line shows no (forged) score, only why it is not trusted
    result.stdout.fnmatch_lines([(f"*[[]tt] E1-build-status-001 reference+hide_exit_code probe  archive TAMPERED, "
                                  f"not trusted: {COMBINED_SCORE}: content changed*")])
    assert "S 100.0" not in result.stdout.str()
    # the session's table (the note wraps at 80 columns)
    result.stdout.fnmatch_lines(["excluded cells: *", "*1 TAMPERED (see reports/summary.md)"], consecutive=True)
    assert tree(cell) == kept  # kept exactly as found: not re-run, not re-scored


@pytest.mark.slow
def test_resume_flags_one_changed_byte_in_events_json(pytester: pytest.Pytester, archive: Path) -> None:
    result, cell, kept = resume(pytester, archive, "byte")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*[[]tt] E1-build-status-001 reference+hide_exit_code probe  archive TAMPERED, not trusted: events.json: *",
        "*archive tampered, not trusted and not re-run: events.json: content changed*re-run it with --tt-rerun",
    ])
    assert tree(cell) == kept  # the evidence is not deleted by a silent re-run
