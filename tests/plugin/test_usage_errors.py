"""Bad ``--tt-*`` / ``TT_*`` input stops the session before any cell runs, with one line
naming where the value came from (issue 17)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.plugin.test_collection import collected, make_suite

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")


def usage_error(result: pytest.RunResult) -> str:
    """The session's single error line (and proof that no cell was even collected).

    The tests pass ``--collect-only`` so that, should the check regress, no real cell runs.
    """
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert not any("test_cell[" in line for line in result.outlines)
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1, result.errlines
    assert not any("Traceback" in line for line in result.errlines + result.outlines)
    return errors[0]


def test_unknown_harness_option(pytester: pytest.Pytester) -> None:
    make_suite(pytester)
    line = usage_error(pytester.runpytest("tasks", "--collect-only", "-q", "--tt-harness", "reference,nosuch"))
    assert "--tt-harness: unknown harness 'nosuch'; registered:" in line
    assert "reference" in line and "tracetrial.harnesses" in line


def test_unknown_mutant_env(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    make_suite(pytester)
    monkeypatch.setenv("TT_HARNESS", "reference+nosuch")
    line = usage_error(pytester.runpytest("tasks", "--collect-only", "-q"))
    assert "TT_HARNESS: unknown reference-harness mutant 'nosuch'" in line
    assert "hide_exit_code" in line


def test_known_mutant_accepted(pytester: pytest.Pytester) -> None:
    make_suite(pytester)
    result = pytester.runpytest("tasks", "--collect-only", "-q", "--tt-harness", "reference+hide_exit_code")
    assert collected(result) == ["test_cell[E1-build-status-001-reference+hide_exit_code-probe]"]


def test_unknown_model_option_and_env(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    make_suite(pytester)
    line = usage_error(pytester.runpytest("tasks", "--collect-only", "-q", "--tt-harness", "reference", "--tt-model", "nosuch"))
    assert "--tt-model: unknown model alias 'nosuch'; known:" in line and "probe" in line
    monkeypatch.setenv("TT_MODEL", "probe,nosuch2")
    line = usage_error(pytester.runpytest("tasks", "--collect-only", "-q", "--tt-harness", "reference"))
    assert line.startswith("ERROR: TT_MODEL: unknown model alias 'nosuch2'")


def test_sandbox_error_names_its_source(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    make_suite(pytester)
    line = usage_error(pytester.runpytest("tasks", "--collect-only", "-q", "--tt-sandbox", "nosuch"))
    assert "--tt-sandbox: invalid sandbox 'nosuch'" in line and "TT_SANDBOX" not in line
    monkeypatch.setenv("TT_SANDBOX", "nosuch")
    line = usage_error(pytester.runpytest("tasks", "--collect-only", "-q"))
    assert "TT_SANDBOX: invalid sandbox 'nosuch'" in line


def test_output_that_is_a_file(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    make_suite(pytester)
    afile = pytester.path / "afile"
    afile.write_text("x")
    line = usage_error(pytester.runpytest("tasks", "--collect-only", "-q", "--tt-harness", "reference", f"--tt-output={afile}"))
    assert f"--tt-output: {afile} is a file, not a folder" in line
    monkeypatch.setenv("TT_OUTPUT", str(afile / "sub" / "dir"))
    line = usage_error(pytester.runpytest("tasks", "--collect-only", "-q", "--tt-harness", "reference"))
    assert f"TT_OUTPUT: cannot create {afile / 'sub' / 'dir'}: {afile} is a file" in line


def test_output_that_cannot_be_written(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    make_suite(pytester)
    locked = pytester.path / "locked"
    locked.mkdir()
    # Root may write anywhere, so "unwritable" is simulated by os.access saying no.
    from tracetrial_fixtures import settings

    real = settings.os.access
    monkeypatch.setattr(settings.os, "access", lambda p, mode: False if Path(p) == locked else real(p, mode))
    result = pytester.runpytest_inprocess("tasks", "--collect-only", "-q", f"--tt-output={locked / 'out'}")
    line = usage_error(result)
    assert f"--tt-output: {locked / 'out'} cannot be created ({locked} is not writable)" in line


def test_valid_output_is_not_created_at_collection(pytester: pytest.Pytester) -> None:
    make_suite(pytester)
    out = pytester.path / "new" / "out"
    result = pytester.runpytest("tasks", "--collect-only", "-q", "--tt-harness", "reference", f"--tt-output={out}")
    assert result.ret == pytest.ExitCode.OK
    assert not out.parent.exists()


def test_third_party_harness_stays_accepted(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "acme_harness").mkdir(parents=True)
    (site / "acme_harness" / "__init__.py").write_text("")
    dist = site / "acme_harness-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-harness\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[tracetrial.harnesses]\nacme = acme_harness:Acme\n")
    monkeypatch.syspath_prepend(str(site))
    make_suite(pytester)
    result = pytester.runpytest_inprocess("tasks", "--collect-only", "-q", "--tt-harness", "acme,acme+x")
    assert collected(result) == ["test_cell[E1-build-status-001-acme-probe]",
                                 "test_cell[E1-build-status-001-acme+x-probe]"]
    sys.modules.pop("acme_harness", None)


def test_tasks_folder_that_is_not_one(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    make_suite(pytester)
    missing = pytester.path / "no-such-tasks"
    line = usage_error(pytester.runpytest("tasks", "--collect-only", "-q", f"--tt-tasks={missing}"))
    assert line == f"ERROR: --tt-tasks: {missing} does not exist; name the folder of task packs"
    afile = pytester.path / "afile"
    afile.write_text("x")
    monkeypatch.setenv("TT_TASKS", str(afile))
    line = usage_error(pytester.runpytest("tasks", "--collect-only", "-q"))
    assert line == f"ERROR: TT_TASKS: {afile} is a file, not a folder; name the folder of task packs"


@pytest.mark.parametrize("args", [["--tt-harness", "nosuch"], ["--tt-harness", "reference", "--tt-model", "nosuch"],
                                  ["--tt-sandbox", "nosuch"]], ids=["harness", "model", "sandbox"])
def test_a_real_run_stops_before_any_cell(pytester: pytest.Pytester, args: list[str]) -> None:
    """Not only at collection: a real run with a bad value runs no cell and writes nothing."""
    make_suite(pytester)
    out = pytester.path / "out"
    result = pytester.runpytest("tasks", "-q", f"--tt-output={out}", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.startswith("ERROR:")]
    assert len(errors) == 1 and f"{args[-2]}: " in errors[0], result.errlines
    assert not any("[tt]" in line or "test_cell[" in line for line in result.outlines)
    assert not out.exists()
