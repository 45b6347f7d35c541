"""TraceTrial pytest plugin entry point (``pytest11``): options, markers, thin hooks.

Logic lives in the sibling modules: :mod:`.settings` (option resolution),
:mod:`.session` (the session's state on the config), :mod:`.collect` (task packs ->
cells), :mod:`.run` (whether and how one cell runs), :mod:`.cell` (the flow of one
cell), :mod:`.services` (probe server + gateway), :mod:`.checker` (criteria as
sub-checks) and :mod:`.progress` (progress lines, summary table, reports).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Generator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tracetrial.archive import RunPaths, repetition_root
from tracetrial_fixtures.cell import CellResult
from tracetrial_fixtures.checker import Checker
from tracetrial_fixtures.collect import (
    CellRef,
    build_cells,
    cell_param,
    harness_names,
    marker_name,
    mutant_not_applicable,
    static_markers,
)
from tracetrial_fixtures.progress import (
    CellProgress,
    spend_summary,
    terminal_summary,
    write_session_reports,
)
from tracetrial_fixtures.run import run_cell
from tracetrial_fixtures.run import warm_up as warm_up_cells
from tracetrial_fixtures.services import Services
from tracetrial_fixtures.session import SESSION_KEY, Session, is_worker, session_of
from tracetrial_fixtures.settings import resolve_settings
from tracetrial_fixtures.spend import estimate_lines


def pytest_addoption(parser: pytest.Parser) -> None:
    """The ``--tt-*`` options (each also read from a ``TT_*`` variable, see :mod:`.settings`)."""
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
    group.addoption("--tt-prune-mutants", action="store_true", default=False,
                    help="leave out reference+<defect> cells whose defect cannot act on the pack (it needs "
                         "MCP tools, a sub-agent, the ask-user tool, a deny rule or a resumed turn the pack "
                         "lacks); tracetrial calibrate passes it and reports those cells as not applicable")
    group.addoption("--tt-repeat", action="store", default=None, metavar="K",
                    help="run each cell K times, each repetition with its own recorded seed, archived side by "
                         "side: repetition 1 in <output>/traces/, repetition i in <output>/repeats/rep-<i>/traces/ "
                         "(the reports then give pass^k, pass@k and the agreement of repetitions; default 1)")
    group.addoption("--tt-max-cost", action="store", default=None, metavar="USD",
                    help="stop starting cells once the session's archived token usage, priced by the frozen "
                         "catalogue in models.yaml, reaches USD (cells in flight finish; the rest are skipped "
                         "naming the cap)")
    group.addoption("--tt-estimate", action="store_true", default=False,
                    help="dry run: print each selected cell's cost at its model-call budget from the task "
                         "budgets and the model's prices, and run nothing")
    group.addoption("--tt-baseline", action="store", default=None,
                    help="tt-baseline/1 file (e.g. ci/baselines/probe.json): cells with known failing "
                         "criteria are xfail(strict=True); a new failure or a fixed one is red")


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """``--tt-estimate`` runs nothing, so it needs no xdist workers: collect here, in one process."""
    if config.getoption("--tt-estimate", False) and getattr(config.option, "numprocesses", None):
        config.option.numprocesses = 0
        config.option.dist = "no"
        config.option.tx = []


def pytest_configure(config: pytest.Config) -> None:
    """Set up the :class:`Session`, register the markers, and (controller only) the progress lines."""
    session = Session(settings=resolve_settings(config))
    workerinput = getattr(config, "workerinput", None)
    session.spend_id = (workerinput or {}).get("tt_spend_id") or \
        f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
    config.stash[SESSION_KEY] = session
    baseline = config.getoption("--tt-baseline")
    if baseline:
        from ci.baseline import BaselineError, load

        try:
            session.baseline = load(Path(baseline))
        except BaselineError as exc:
            raise pytest.UsageError(f"--tt-baseline: {exc}") from exc
    for line in static_markers():
        config.addinivalue_line("markers", line)
    for name in harness_names(session.settings):
        config.addinivalue_line("markers", f"{marker_name(name)}: cells of the {name} harness")
    for model in session.settings.models:
        config.addinivalue_line("markers", f"{marker_name(model)}: cells run with the {model} model")
    if not is_worker(config):
        config.pluginmanager.register(CellProgress(config, session), "tracetrial-progress")
    if not (config.option.collectonly or session.settings.estimate) and \
            (is_worker(config) or not getattr(config.option, "numprocesses", None)):
        # This process may run cells (an xdist controller runs none): their one-off work starts
        # now, in the background, overlapping collection and the proxy's start.
        threading.Thread(target=warm_up_cells, args=(list(harness_names(session.settings)), session.settings.sandbox),
                         name="tt-cell-warm-up", daemon=True).start()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist: every worker adds to the controller's spend ledger (one cap for the session)."""
    node.workerinput["tt_spend_id"] = session_of(node.config).spend_id




@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """After ``-k``/``-m`` selection (trylast), over the selected cells:

    * ``--tt-estimate``: price them at their budgets, then deselect them all;
    * else, when one will run (not resumed from its archive), the proxy and the verifier's
      forkserver start now, in the background: the rest of the session's start and the first
      cell's preparation overlap them, and a session running no cell pays nothing. (The
      cells' other one-off work, :func:`~tracetrial_fixtures.run.warm_up`, started at
      configuration: a resumed cell reads its harness's version too.)
    """
    tt = session_of(config)
    settings = tt.settings
    if settings.estimate:
        refs = [item.callspec.params["tt_cell_spec"] for item in items
                if hasattr(item, "callspec") and "tt_cell_spec" in item.callspec.params]
        tt.estimate = estimate_lines(refs, settings)
        config.hook.pytest_deselected(items=list(items))
        items[:] = []
        return
    if config.option.collectonly:
        return
    for item in items:
        callspec = getattr(item, "callspec", None)
        ref = callspec.params.get("tt_cell_spec") if callspec is not None else None
        if not isinstance(ref, CellRef):
            continue
        paths = RunPaths.for_cell(repetition_root(settings.output, ref.repetition), ref.task_id, ref.model, ref.harness)
        if settings.rerun or not paths.combined_score.is_file():
            services_of(config).warm_up()
            # and the verifier's forkserver (it preloads the verifier API), off the first cell too
            from criteria.verifier import warm_up as warm_up_verifier

            threading.Thread(target=warm_up_verifier, name="tt-verifier-warm-up", daemon=True).start()
            return


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``tt_cell_spec`` with every task × harness × model cell."""
    if "tt_cell_spec" not in metafunc.fixturenames:
        return
    session = session_of(metafunc.config)
    tasks_dir = session.settings.tasks_dir or Path(metafunc.definition.path).parent
    cells = build_cells(tasks_dir, session.settings)
    if metafunc.config.getoption("--tt-prune-mutants"):
        cells = [c for c in cells if not mutant_not_applicable(c)]
    metafunc.parametrize("tt_cell_spec", [cell_param(c, session.baseline) for c in cells])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A cell's failure is reported without local variables, even under ``--showlocals``:
    frames of the cell's code hold the pack's truth and planted secrets in locals (its
    arguments are safe to show: :class:`CellRef` and the pack print their id only)."""
    config = item.config
    hide = "tt_cell_spec" in getattr(item, "fixturenames", ()) and bool(config.option.showlocals)
    if hide:
        config.option.showlocals = False
    try:
        return (yield)
    finally:
        if hide:
            config.option.showlocals = True


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Which sandbox backend the cells get, and the baseline in force."""
    session = config.stash.get(SESSION_KEY, None)
    if session is None:
        return []
    lines = []
    if session.settings.sandbox == "auto":
        from apparatus.sandbox import choose_backend

        # Say which backend "auto" means on this machine before any cell runs.
        lines.append(f"tracetrial sandbox: auto -> {choose_backend('auto')}")
    else:
        lines.append(f"tracetrial sandbox: {session.settings.sandbox}")
    baseline = session.baseline
    if baseline is not None:
        known = sum(1 for k in baseline.cells if baseline.known_failures(k))
        lines.append(f"tracetrial baseline: {config.getoption('--tt-baseline')} ({baseline.protocol}, "
                     f"{len(baseline.cells)} cells, {known} with known failing criteria)")
    return lines


SERVICES_KEY = pytest.StashKey[Services]()


def services_of(config: pytest.Config) -> Services:
    """This process's services (created once; stopped at the end of the session, whether or
    not a cell asked for them)."""
    services = config.stash.get(SERVICES_KEY, None)
    if services is None:
        settings = session_of(config).settings
        services = Services(output=settings.output, record_bodies=settings.record_bodies)
        config.stash[SERVICES_KEY] = services
        config.add_cleanup(services.close)
    return services


@pytest.fixture(scope="session")
def tt_services(request: pytest.FixtureRequest) -> Services:
    """The probe model server and LiteLLM gateway of this process (started on first use, or
    in the background as soon as the cells are being collected). Stopped by the cleanup
    :func:`services_of` registers, when the session ends: a session fixture's teardown runs
    inside the last cell's teardown, which would bill the proxy's stop to that cell."""
    return services_of(request.config)


@pytest.fixture
def tt_cell(tt_cell_spec: CellRef, tt_services: Services, request: pytest.FixtureRequest) -> CellResult:
    """Run the cell (task × harness × model) and return its archived result.

    The parameter names the pack; the pack is loaded here (see :class:`CellRef`).
    Apparatus failures surface as errors of this fixture; harness behaviour is
    judged by the test through :class:`~tracetrial_fixtures.checker.Checker`.
    """
    # Named first, so that a report of a cell that skips or errors here names it on its [tt] line.
    request.node.user_properties.append(("tt_cell", tt_cell_spec.label))
    result = run_cell(tt_cell_spec.load(), session_of(request.config), tt_services)
    request.node.user_properties.append(("tt_run_dir", str(result.paths.root)))
    return result


@pytest.fixture
def tt_check(subtests: pytest.Subtests, request: pytest.FixtureRequest) -> Checker:
    """Report each criterion of a cell as a sub-check, then the cell verdict (against the
    cell's ``--tt-baseline`` known failures, if any)."""
    return Checker(subtests, request.node)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    """The TraceTrial section: the per-harness table of the archive (controller only)."""
    if is_worker(config):
        return
    tt = session_of(config)
    if tt.settings.estimate:
        terminalreporter.section("TraceTrial estimate (--tt-estimate: nothing ran)")
        for line in tt.estimate or ["no cells selected"]:
            terminalreporter.line(line)
        return
    terminal_summary(terminalreporter, tt)
    spend_summary(terminalreporter, tt)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write ``<output>/reports/`` (controller only: workers never write shared files)."""
    if is_worker(session.config):
        return
    tt = session_of(session.config)
    if tt.settings.estimate:
        # A dry run that priced its cells succeeded; pytest would call "everything deselected" exit 5.
        if session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
            session.exitstatus = pytest.ExitCode.OK
        return
    write_session_reports(tt)
