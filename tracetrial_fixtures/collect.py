"""Task packs -> parametrized cells (task × harness × model).

Cells are ordinary parametrized tests (custom Items would not get fixtures).
Ids are ``<task>-<harness>-<model>`` (with ``--tt-repeat K``: ``…-rep<i>``, one test per repetition); markers carry the component name
(``Execution``), the property slug, the harness, the model alias, the surface
and the conversation form, so ``-k "Execution and codex"`` selects a slice.
A broken pack still yields its cells: they fail with the loader's message while
other packs run. A cell's parameter is a :class:`CellRef` (pack id and folder, harness,
model): the pack itself, truth and planted secrets included, is loaded inside the cell,
so no test id, parameter, allure result or traceback carries it.

With ``--tt-baseline``, a cell whose baseline records failing (or unscored)
criteria carries ``tt_baseline(known={criterion: state})``; the checker turns it
into ``xfail(strict=True)`` once the verdicts are known (see
:class:`tracetrial_fixtures.checker.Checker` for why not at collection).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tracetrial.errors import TaskPackErrors
from tracetrial.task import BrokenPack, TaskPack, discover, load_task
from tracetrial.taxonomy import COMPONENTS, PROPERTIES, collision_free, property_keyword
from tracetrial_fixtures.settings import DEFAULT_HARNESSES, Settings

if TYPE_CHECKING:
    from ci.baseline import Baseline

SURFACES = ("workflow", "terminal", "coding")
FORMS = ("single", "multi", "simulator")


def marker_name(value: str) -> str:
    """A harness or model name as a marker/keyword identifier (``reference+x`` -> ``reference_x``),
    with no component name inside it (see :func:`tracetrial.taxonomy.collision_free`)."""
    return collision_free(re.sub(r"\W", "_", value))


def static_markers() -> list[str]:
    """Markers registered for every session (``--strict-markers``)."""
    lines = ["tt_cell: a TraceTrial task x harness x model cell",
             ("tt_baseline(known): criteria the --tt-baseline file records as not passing for this cell "
              "(the cell is xfail(strict=True) on exactly those)")]
    lines += [f"{name}: cells of the {name} component" for name in COMPONENTS.values()]
    lines += [f"{property_keyword(c, p)}: cells of the {p} property" for c, props in PROPERTIES.items()
              for p in props]
    lines += [f"{s}: cells on the {s} surface" for s in SURFACES]
    lines += [f"{f}_turn: {f}-turn conversation cells" if f != "simulator" else "simulator_driven: simulator-driven cells" for f in FORMS]
    return lines


#: pytest-timeout's method for cells. "signal" raises inside the cell, so its cleanup runs
#: and the session goes on to the next cell and its reports; "thread" (what the project's own
#: tests use) ends the whole process, orphaning the proxy and losing every report.
CELL_TIMEOUT_METHOD = "signal"
#: A broken pack's cell only reports the loader's message.
BROKEN_PACK_TIMEOUT_S = 300


def cell_timeout(seconds: float) -> pytest.MarkDecorator:
    """The last-resort timeout of a cell, method included: cells carry their own settings,
    so a tasks folder run outside this repository (another rootdir, none of the project's
    ``[tool.pytest.ini_options]``) behaves the same. The cell's own bounds (turn wall clock,
    verifier bound) fire first."""
    return pytest.mark.timeout(seconds, method=CELL_TIMEOUT_METHOD)


def form_marker(form: str) -> str:
    return "simulator_driven" if form == "simulator" else f"{form}_turn"


def repetition_suffix(repetition: int, repetitions: int) -> str:
    """``-rep<i>`` on the id of every repetition when a cell runs more than once, else nothing
    (the ids of a single-run session are unchanged)."""
    return f"-rep{repetition}" if repetitions > 1 else ""


@dataclass(frozen=True)
class CellRef:
    """What a cell's test parameter holds: the pack's id and folder, the harness, the model.

    Nothing private: pytest prints parameters in tracebacks and ``-v`` output, and
    allure-pytest records their repr. The pack (truth, planted secrets) is loaded inside
    the cell (:meth:`load`), never carried by the parameter.
    """

    task_id: str
    path: Path
    harness: str
    model: str
    #: Which run of the cell (1-based) and how many the session makes (``--tt-repeat``).
    repetition: int = 1
    repetitions: int = 1

    @property
    def id(self) -> str:
        return f"{self.task_id}-{self.harness}-{self.model}" + repetition_suffix(self.repetition, self.repetitions)

    @property
    def label(self) -> str:
        """``<task> <harness> <model>`` (``… rep <i>`` after the first repetition), as ``[tt]`` lines name a cell."""
        return f"{self.task_id} {self.harness} {self.model}" + (f" rep {self.repetition}" if self.repetition > 1 else "")

    def __repr__(self) -> str:
        return f"CellRef({self.id!r})"

    def load(self) -> CellSpec:
        """The cell with its pack loaded now (a pack that no longer loads: a broken pack)."""
        try:
            pack: TaskPack | BrokenPack = load_task(self.path)
        except TaskPackErrors as exc:
            pack = BrokenPack(self.path, exc)
        return CellSpec(pack, self.harness, self.model, self.repetition, self.repetitions)


@dataclass(frozen=True, repr=False)
class CellSpec:
    """One cell to run: a pack (or a broken pack), a harness name and a model alias."""

    pack: TaskPack | BrokenPack
    harness: str
    model: str
    repetition: int = 1
    repetitions: int = 1

    @property
    def id(self) -> str:
        return f"{self.pack.id}-{self.harness}-{self.model}" + repetition_suffix(self.repetition, self.repetitions)

    @property
    def ref(self) -> CellRef:
        """The cell as its test parameter (no pack contents)."""
        return CellRef(self.pack.id, self.pack.root, self.harness, self.model, self.repetition, self.repetitions)

    def __repr__(self) -> str:
        # A traceback through the cell's code shows its arguments: never the pack's contents.
        return f"CellSpec({self.id!r})"


def harness_names(settings: Settings) -> tuple[str, ...]:
    """The harnesses to parametrize: ``--tt-harness``, else every registered harness
    (built-ins in their usual order, then third-party entry points)."""
    if settings.harnesses:
        return settings.harnesses
    from harnesses.registry import available_harnesses

    registered = available_harnesses()
    first = [h for h in DEFAULT_HARNESSES if h in registered]
    return tuple(first + [h for h in registered if h not in first])


def mutant_not_applicable(cell: CellSpec) -> str | None:
    """Why a ``reference+<defect>`` cell's defect cannot act on its pack, else ``None`` (every other
    cell, a broken pack and an unknown defect included: those fail the usual way)."""
    if not cell.harness.startswith("reference+") or not isinstance(cell.pack, TaskPack):
        return None
    from harnesses.reference.mutants import MUTANTS, not_applicable

    defect = cell.harness.split("+", 1)[1].split("@", 1)[0]
    return not_applicable(defect, cell.pack) if defect in MUTANTS else None


def build_cells(tasks_dir: Path, settings: Settings) -> list[CellSpec]:
    """Every task × harness × model cell, once per repetition (``--tt-repeat``; the repetitions of
    a cell are adjacent, so ``-x`` or a crash stops on a cell, not midway through the suite)."""
    packs = discover(tasks_dir)
    k = settings.repeat
    return [CellSpec(p, h, m, i, k) for p in packs for h in harness_names(settings) for m in settings.models
            for i in range(1, k + 1)]


def cell_param(cell: CellSpec, baseline: Baseline | None = None) -> object:
    marks: list[pytest.MarkDecorator] = [pytest.mark.tt_cell]
    if baseline is not None:
        from ci.baseline import cell_key

        known = baseline.known_failures(cell_key(cell.pack.id, cell.model, cell.harness))
        if known:
            marks.append(pytest.mark.tt_baseline(known=known))
    marks.append(getattr(pytest.mark, marker_name(cell.harness)))
    marks.append(getattr(pytest.mark, marker_name(cell.model)))
    if isinstance(cell.pack, TaskPack):
        spec = cell.pack.spec
        marks += [
            getattr(pytest.mark, COMPONENTS[spec.component]),
            getattr(pytest.mark, property_keyword(spec.component, spec.property)),
            getattr(pytest.mark, spec.surface),
            getattr(pytest.mark, form_marker(spec.conversation)),
            cell_timeout(spec.budgets.wall_clock_s * 2 + 300),
        ]
    else:
        marks.append(cell_timeout(BROKEN_PACK_TIMEOUT_S))
        # A broken pack still carries its component when the id says it, so
        # "-k Execution" keeps showing the broken Execution packs.
        letter = cell.pack.id[:1]
        if letter in COMPONENTS:
            marks.append(getattr(pytest.mark, COMPONENTS[letter]))
    return pytest.param(cell.ref, id=cell.id, marks=marks)
