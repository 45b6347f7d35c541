"""Running one cell from pytest: resolve the harness, decide whether the cell can run here
(installed CLI, model key, sandbox), then hand it to :class:`~tracetrial_fixtures.cell.CellRunner`.

What cannot run here is a *skip* with the reason; a broken pack or an unknown harness
fails only its own cells (as a ``problem`` the checker reports); an apparatus failure is
an error of the cell, never a harness failure.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from apparatus.sandbox import SandboxUnavailable, choose_backend
from tracetrial.archive import RunPaths, repetition_root
from tracetrial.errors import ApparatusError
from tracetrial.task import BrokenPack
from tracetrial_fixtures.cell import CellResult, CellRunner
from tracetrial_fixtures.collect import CellSpec
from tracetrial_fixtures.services import Services
from tracetrial_fixtures.session import Session
from tracetrial_fixtures.spend import CAP_REASON, SpendLedger, cell_cost, is_priced, prices_for

if TYPE_CHECKING:
    from criteria.judge import Judge
    from harnesses.base import HarnessAdapter

__all__ = ["run_cell", "warm_up"]



def run_cell(cell: CellSpec, session: Session, services: Services) -> CellResult:
    """Resolve the harness, check eligibility, run (or resume) the cell.

    A broken pack or an unknown harness is returned as a ``problem`` so the cell
    *fails* (in its call phase) with the precise message; other cells still run.
    """
    settings = session.settings
    paths = RunPaths.for_cell(repetition_root(settings.output, cell.repetition), cell.pack.id, cell.model,
                              cell.harness)
    if isinstance(cell.pack, BrokenPack):
        return CellResult(paths, None, problem=str(cell.pack.error))
    adapter = _adapter(cell.harness)
    if isinstance(adapter, str):
        return CellResult(paths, None, problem=adapter)
    reason = adapter.unavailable_reason()
    if reason:
        pytest.skip(reason)
    if cell.model != "probe":
        missing = services.registry.missing_key(cell.model)
        if missing:
            pytest.skip(f"model {cell.model!r} needs the environment variable {missing}")
    try:
        sandbox = choose_backend(settings.sandbox, network=cell.pack.isolation.network, harness=adapter.name,
                                 unconfinable=session.unconfinable.get(adapter.name))
    except SandboxUnavailable as exc:
        pytest.skip(str(exc))
    if sandbox == "local" and cell.model != "probe":
        warnings.warn(f"cell {cell.id}: live model on the 'local' sandbox: the agent acts on this host",
                      stacklevel=1)
    from tracetrial.eligibility import eligibility

    will_run = (settings.rerun or not paths.combined_score.is_file()) and \
        eligibility(cell.pack, adapter.capabilities)[0] == "eligible"
    ledger = SpendLedger(settings.output, session.spend_id)
    if will_run and settings.max_cost is not None:
        spent = ledger.total()
        if spent.usd >= settings.max_cost:
            # A resumed cell costs nothing and still passes; only new spending stops.
            pytest.skip(f"{CAP_REASON}: ${spent.usd:.4f} spent of ${settings.max_cost:g}; cell not started")
    if will_run:
        # This cell will run: the gateway starts in the background now (the session's first
        # cell only), overlapping the harness version probe and the cell's preparation.
        services.warm_up()
    runner = CellRunner(cell.pack, adapter, cell.model, settings.output, services,
                        judge=_judge(settings.judge), sandbox=sandbox, rerun=settings.rerun,
                        repetition=cell.repetition, repetitions=cell.repetitions)
    try:
        result = runner.run()
    except ApparatusError as exc:
        _record_spend(ledger, cell, paths, settings.output, settings.max_cost)
        pytest.fail(f"APPARATUS ERROR (not a harness defect): {exc}", pytrace=False)
    if not result.resumed and not result.skipped:
        _record_spend(ledger, cell, paths, settings.output, settings.max_cost)
    if result.skipped:
        pytest.skip(f"cell not eligible: {result.skipped}")
    return result


def warm_up(harnesses: Iterable[str], sandbox: str = "local") -> None:
    """Do in the background, from the session's start, what the session's first cell of each
    harness would otherwise do on its own clock: import the adapter (and the normalizer it
    imports) and read the harness version (a CLI's ``--version`` process; each adapter class
    keeps it for the session), ask whether docker can serve (``sandbox``: the ``--tt-sandbox``
    choice; only for ``auto`` and ``docker``), then import what every cell's flow and scoring
    import on first use, rule modules included. In the order a first cell needs them. The
    plugin starts it at configuration in each process that may run cells. Never raises: what
    fails here fails again, and is reported, in the cell that needs it."""
    names = list(dict.fromkeys(harnesses))
    _warm_harnesses(names[:1])  # the session's first cell's harness comes first
    if sandbox in ("auto", "docker"):
        # Whether docker can serve (choose_backend asks before the first cell runs): importing
        # the engine's SDK and asking the engine cost that cell ~0.3 s. Cached per process.
        try:
            from apparatus.sandbox import docker_reason

            docker_reason()
        except Exception:  # noqa: BLE001, S110 - the first cell asks again and reports a failure
            pass
    try:
        # What every cell's flow imports on first use: the simulators' launch, scoring (and its
        # rule modules), the evidence phase, the checker, the progress line, eligibility.
        for module in ("apparatus.simulators", "criteria", "criteria.rules_reconcile", "reports.allure",
                       "reports.terminal", "tracetrial.eligibility"):
            importlib.import_module(module)
        from criteria.registry import load_builtin_rules

        load_builtin_rules()
    except Exception:  # noqa: BLE001, S110 - the cell imports them again and reports a failure
        pass
    _warm_harnesses(names[1:])


def _warm_harnesses(names: list[str]) -> None:
    """Import each harness's adapter and read its version (see :func:`warm_up`)."""
    for name in names:
        try:
            adapter = _adapter(name)
            if not isinstance(adapter, str) and adapter.unavailable_reason() is None:
                adapter.version()
        except Exception:  # noqa: BLE001, S112 - the cell reports it
            continue


def _record_spend(ledger: SpendLedger, cell: CellSpec, paths: RunPaths, output: Path, cap: float | None) -> None:
    """Add what the cell just spent to the session's ledger (a free model's cells only under a cap)."""
    prices = prices_for(output)
    if cap is None and not is_priced(prices, cell.model):
        return
    ledger.add(cell.id, cell_cost(paths.summary, prices.get(cell.model)))


def _adapter(name: str) -> HarnessAdapter | str:
    """The harness's adapter, or why there is none (the cell's failure message)."""
    from harnesses.registry import UnknownHarnessError, get_harness

    try:
        return get_harness(name)
    except UnknownHarnessError as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - a broken third-party adapter fails its own cells only
        return f"harness {name!r} could not be loaded: {type(exc).__name__}: {exc}"


def _judge(spec: str | None) -> Judge | None:
    """The ``--tt-judge`` judge; without one, semantic criteria are ``unscored``."""
    if not spec:
        return None
    from criteria.judge import make_judge

    return make_judge(spec)
