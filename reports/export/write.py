"""Write the exports of an output folder: one ATIF file per cell, one OTLP JSON file per folder.

Where ATIF files go: ``<out>/<task>/<model>/<harness>/trajectory.json`` (the cell's path under
``traces/``), by default ``out = OUTPUT/exports/atif``; a repetition after the first (``--tt-repeat``,
``OUTPUT/repeats/rep-<i>/traces/…``) goes to ``<out>/repeats/rep-<i>/<task>/<model>/<harness>/``. Never inside a cell folder: a cell is
sealed by its ``manifest.json``, and an export is derived data that must not change it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from reports.export.atif import to_atif
from reports.export.calls import CellArchive, load_cell
from reports.records import run_dirs
from tracetrial.archive import repetition_of, repetition_root
from tracetrial.errors import TraceTrialError
from tracetrial.files import atomic_write_text
from tracetrial.redact import Redactor

ATIF_DEFAULT = Path("exports") / "atif"


@dataclass
class ExportOutcome:
    """What an export wrote and which cells it could not read (with the reason)."""

    written: list[Path] = field(default_factory=list)
    #: Cells exported (one file each for ATIF; all in one file for OTel).
    cells: int = 0
    failed: list[tuple[Path, str]] = field(default_factory=list)


def cell_dirs(output: Path) -> list[Path]:
    """Every cell folder of an output (``traces/<task>/<model>/<harness>/``, then those of each
    repetition under ``repeats/``), sorted within each."""
    return [d for _rep, d in run_dirs(output)]


def _cells(output: Path, outcome: ExportOutcome) -> list[CellArchive]:
    cells: list[CellArchive] = []
    for root in cell_dirs(output):
        try:
            cells.append(load_cell(root))
        except TraceTrialError as exc:
            outcome.failed.append((root, str(exc)))
    return cells


def atif_path(output: Path, cell: Path, out: Path | None = None) -> Path:
    """Where :func:`export_atif` writes the trajectory of ``cell`` (a folder under ``output``)."""
    rep = repetition_of(cell)
    root = repetition_root(output, rep)
    prefix = root.relative_to(output) if rep > 1 else Path()
    return (out or output / ATIF_DEFAULT) / prefix / cell.relative_to(root / "traces") / "trajectory.json"


def export_atif(output: Path, out: Path | None = None) -> ExportOutcome:
    """Write one ATIF v1.7 ``trajectory.json`` per readable cell of ``output``."""
    outcome = ExportOutcome()
    for cell in _cells(output, outcome):
        try:
            trajectory = to_atif(cell)
        except (TraceTrialError, ValueError) as exc:
            outcome.failed.append((cell.root, f"{cell.root}: cannot map to ATIF: {exc}"))
            continue
        target = atif_path(output, cell.root, out)
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(target, json.dumps(trajectory, indent=1, ensure_ascii=False) + "\n")
        outcome.written.append(target)
        outcome.cells += 1
    return outcome


def export_otel(output: Path, target: Path, *, content: bool = False,
                redactor: Redactor | None = None,
                encode: Callable[..., str] | None = None) -> ExportOutcome:
    """Write one OTLP JSON file holding the spans of every readable cell of ``output``."""
    from reports.export.otel import to_otlp_json

    outcome = ExportOutcome()
    cells = _cells(output, outcome)
    text = (encode or to_otlp_json)(cells, content=content,
                                    redactor=redactor or Redactor.from_environment())
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, text)
    outcome.written.append(target)
    outcome.cells = len(cells)
    return outcome
