"""TraceTrial pytest plugin entry point (``pytest11``): options, markers, thin hooks.

Logic lives in the sibling modules: :mod:`.settings` (option resolution),
:mod:`.collect` (task packs -> cells), :mod:`.cell` (the flow of one cell),
:mod:`.services` (probe server + gateway), :mod:`.scoring` (criteria as
sub-checks, terminal lines and reports).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tracetrial_fixtures import scoring
from tracetrial_fixtures.collect import (
    CellSpec,
    build_cells,
    cell_param,
    harness_names,
    marker_name,
    static_markers,
)
from tracetrial_fixtures.services import Services
from tracetrial_fixtures.settings import Settings, resolve_settings

if TYPE_CHECKING:
    from ci.baseline import Baseline

SETTINGS_KEY = pytest.StashKey[Settings]()
SERVICES_KEY = pytest.StashKey[Services]()
CELL_LINES_KEY = pytest.StashKey[list[str]]()
#: The ``--tt-baseline`` file, when given (its known failures mark cells at collection).
BASELINE_KEY: pytest.StashKey[Baseline] = pytest.StashKey()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tracetrial", "TraceTrial harness benchmark")
    group.addoption("--tt-harness", action="store", default=None,
                    help="comma-separated harness names, e.g. codex,reference+hide_exit_code "
                         "(default: claude_code,codex,openclaw,deepseek,reference)")
    group.addoption("--tt-model", action="store", default=None,
                    help="comma-separated model aliases from models.yaml (default: probe)")
    group.addoption("--tt-sandbox", action="store", default=None,
                    help="sandbox backend: auto|docker|bwrap|local (default: auto)")
    group.addoption("--tt-output", action="store", default=None, help="archive folder (default: outputs)")
    group.addoption("--tt-judge", action="store", default=None,
                    help="judge model alias for semantic rubrics (none: those criteria are 'unscored')")
    group.addoption("--tt-rerun", action="store_true", default=False,
                    help="re-run cells whose archive is already complete (default: resume)")
    group.addoption("--tt-record-bodies", action="store_true", default=False,
                    help="also archive full provider request bodies (redacted)")
    group.addoption("--tt-tasks", action="store", default=None,
                    help="task-pack folder to collect (default: the folder of the cells module)")
    group.addoption("--tt-baseline", action="store", default=None,
                    help="tt-baseline/1 file (e.g. ci/baselines/probe.json): cells with known failing "
                         "criteria are xfail(strict=True); a new failure or a fixed one is red")


def pytest_configure(config: pytest.Config) -> None:
    settings = resolve_settings(config)
    config.stash[SETTINGS_KEY] = settings
    config.stash[CELL_LINES_KEY] = []
    baseline = config.getoption("--tt-baseline")
    if baseline:
        from ci.baseline import BaselineError, load

        try:
            config.stash[BASELINE_KEY] = load(Path(baseline))
        except BaselineError as exc:
            raise pytest.UsageError(f"--tt-baseline: {exc}") from exc
    for line in static_markers():
        config.addinivalue_line("markers", line)
    for name in harness_names(settings):
        config.addinivalue_line("markers", f"{marker_name(name)}: cells of the {name} harness")
    for model in settings.models:
        config.addinivalue_line("markers", f"{marker_name(model)}: cells run with the {model} model")
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(CellProgress(config), "tracetrial-progress")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "tt_cell_spec" not in metafunc.fixturenames:
        return
    settings = metafunc.config.stash[SETTINGS_KEY]
    tasks_dir = settings.tasks_dir or Path(metafunc.definition.path).parent
    cells = build_cells(tasks_dir, settings)
    baseline = metafunc.config.stash.get(BASELINE_KEY, None)
    metafunc.parametrize("tt_cell_spec", [cell_param(c, baseline) for c in cells])


def pytest_report_header(config: pytest.Config) -> list[str]:
    lines = []
    settings = config.stash.get(SETTINGS_KEY, None)
    if settings is not None and settings.sandbox == "auto":
        from apparatus.sandbox import auto_backend

        # Say which backend "auto" means on this machine before any cell runs.
        lines.append(f"tracetrial sandbox: auto -> {auto_backend()}")
    elif settings is not None:
        lines.append(f"tracetrial sandbox: {settings.sandbox}")
    baseline = config.stash.get(BASELINE_KEY, None)
    if baseline is not None:
        known = sum(1 for k in baseline.cells if baseline.known_failures(k))
        lines.append(f"tracetrial baseline: {config.getoption('--tt-baseline')} ({baseline.protocol}, "
                     f"{len(baseline.cells)} cells, {known} with known failing criteria)")
    return lines


@pytest.fixture(scope="session")
def tt_services(request: pytest.FixtureRequest) -> Iterator[Services]:
    """The probe model server and LiteLLM gateway of this process (started on first use)."""
    settings = request.config.stash[SETTINGS_KEY]
    services = Services(output=settings.output, record_bodies=settings.record_bodies)
    request.config.stash[SERVICES_KEY] = services
    yield services
    services.close()


@pytest.fixture
def tt_cell(tt_cell_spec: CellSpec, tt_services: Services, request: pytest.FixtureRequest) -> scoring.CellResult:
    """Run the cell (task × harness × model) and return its archived result.

    Apparatus failures surface as errors of this fixture; harness behaviour is
    judged by the test through :func:`scoring.check_cell`.
    """
    settings = request.config.stash[SETTINGS_KEY]
    result = scoring.run_cell(tt_cell_spec, settings, tt_services)
    request.node.user_properties.append(("tt_run_dir", str(result.paths.root)))
    return result


@pytest.fixture
def tt_check(subtests: pytest.Subtests, request: pytest.FixtureRequest) -> scoring.Checker:
    """Report each criterion of a cell as a sub-check, then the cell verdict (against the
    cell's ``--tt-baseline`` known failures, if any)."""
    return scoring.Checker(subtests, request.node)


class CellProgress:
    """Writes one progress line per finished cell as it finishes (controller only)."""

    def __init__(self, config: pytest.Config):
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        props = dict(report.user_properties)
        # Sub-check reports of a cell carry the same properties: one line per cell.
        if "tt_run_dir" not in props or report.nodeid in scoring.REPORTED:
            return
        scoring.REPORTED.add(report.nodeid)
        line = scoring.progress_line(Path(str(props["tt_run_dir"])))
        if not line:
            return
        scoring.PROGRESS.append(line)
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if tr is not None and self.config.get_verbosity() >= 0:
            tr.ensure_newline()
            tr.write_line(f"[tt] {line}")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    scoring.terminal_summary(terminalreporter, config.stash[SETTINGS_KEY])


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # Only the controller aggregates (workers never write shared files).
    if hasattr(session.config, "workerinput"):
        return
    scoring.write_session_reports(session.config.stash[SETTINGS_KEY])
