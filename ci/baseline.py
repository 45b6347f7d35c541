"""Stored verdict baselines (``tt-baseline/1``): the model, and reading one from an archive.

A baseline records, for every measured cell of a session, the state of each
criterion (``pass``, ``fail`` or ``unscored``) and the version of each harness
that produced them::

    {"schema": "tt-baseline/1", "protocol": "probe",
     "harness_versions": {"codex": "0.145.0", ...},
     "cells": {"<task>/<model>/<harness>": {"<criterion>": "pass" | "fail" | "unscored", ...}}}

:func:`load` and :func:`store` are the only functions that touch the baseline
file; :func:`read_output` is the only one that reads an archive (each cell's seal,
its authoritative ``artifacts/llm_judge/combined_score.json``, and ``result.json``
for cells without a score). Everything else here is pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tracetrial.archive import check_seal
from tracetrial.results import CombinedScore, CriterionVerdict, ResultRecord

__all__ = [
    "Baseline",
    "BaselineError",
    "CellState",
    "OutputSnapshot",
    "State",
    "cell_key",
    "from_output",
    "load",
    "merge",
    "read_output",
    "state_of",
    "store",
]

State = Literal["pass", "fail", "unscored"]
#: criterion id -> state, for one cell.
CellState = dict[str, State]

SCHEMA = "tt-baseline/1"


class BaselineError(Exception):
    """A baseline file is missing, unreadable or not a ``tt-baseline/1`` document."""


class Baseline(BaseModel):
    """A stored verdict baseline (the ``tt-baseline/1`` file)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_: Literal["tt-baseline/1"] = Field(default="tt-baseline/1", alias="schema")
    protocol: str = Field(description="'probe' or 'live': the protocol every cell was run under.")
    harness_versions: dict[str, str | None] = Field(
        default_factory=dict, description="Harness name (as in the cell key) -> version that produced the cells.")
    cells: dict[str, CellState] = Field(
        default_factory=dict, description="'<task>/<model>/<harness>' -> criterion id -> state.")

    def harness_of(self, key: str) -> str:
        """The harness part of a cell key."""
        return key.rsplit("/", 1)[-1]

    def known_failures(self, key: str) -> CellState:
        """The criteria of ``key`` that the baseline records as not passing (fail or unscored)."""
        return {cid: s for cid, s in self.cells.get(key, {}).items() if s != "pass"}

    def to_json(self) -> str:
        """Stable text: fixed top-level order, cells and criteria sorted, one criterion a line."""
        doc = {
            "schema": self.schema_,
            "protocol": self.protocol,
            "harness_versions": dict(sorted(self.harness_versions.items())),
            "cells": {k: dict(sorted(v.items())) for k, v in sorted(self.cells.items())},
        }
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def cell_key(task_id: str, model: str, harness: str) -> str:
    """The baseline key of a cell: ``<task>/<model>/<harness>`` (the archive's folder order;
    a named version keys its own cells: ``E1-x-001/probe/claude_code@2.1.332``, while the
    plain pinned name keeps its keys)."""
    return f"{task_id}/{model}/{harness}"


def state_of(verdict: CriterionVerdict) -> State:
    """``pass`` / ``fail`` / ``unscored`` (``passed is None``: never a pass)."""
    if verdict.passed is None:
        return "unscored"
    return "pass" if verdict.passed else "fail"


def load(path: Path) -> Baseline:
    """Read a baseline file.

    Raises:
        BaselineError: the file is missing, not JSON, or not a ``tt-baseline/1`` document.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise BaselineError(f"no baseline at {path}; record one with: tracetrial gate --update "
                            f"--baseline {path} <output>") from exc
    except OSError as exc:
        raise BaselineError(f"cannot read baseline {path}: {exc}") from exc
    try:
        return Baseline.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(document)"
        raise BaselineError(f"{path} is not a {SCHEMA} baseline: {where}: {first['msg']}") from exc


def store(baseline: Baseline, path: Path) -> None:
    """Write ``baseline`` to ``path`` (stable key order, trailing newline)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(baseline.to_json(), encoding="utf-8")


@dataclass(frozen=True)
class OutputSnapshot:
    """What one session's archive says, in baseline terms (in memory only).

    Attributes:
        baseline: the measured cells as a :class:`Baseline` (what ``--update`` stores).
        versions: cell key -> harness version of that cell (measured or not).
        reasons: cell key -> criterion id -> the verdict's reason (for readable diffs).
        unmeasured: cell key -> why the cell has no usable verdicts (no score, not admitted,
            not eligible, half-written archive, score not sealed).
        tampered: cell key (from the folder names) -> the first file that does not match the
            cell's manifest; nothing else of the cell is read.
        protocols: every protocol seen among the cells.
        problems: archive problems (unreadable files, one harness with several versions).
    """

    baseline: Baseline
    versions: dict[str, str | None] = field(default_factory=dict)
    reasons: dict[str, dict[str, str]] = field(default_factory=dict)
    unmeasured: dict[str, str] = field(default_factory=dict)
    tampered: dict[str, str] = field(default_factory=dict)
    protocols: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def harnesses(self) -> set[str]:
        """Harnesses with at least one cell folder in the output (measured or not)."""
        return {k.rsplit("/", 1)[-1] for k in (*self.versions, *self.unmeasured, *self.tampered)}


def _cell_dirs(output: Path) -> list[Path]:
    """The depth-3 folders ``traces/<task>/<model>/<harness>`` (sorted)."""
    traces = output / "traces"
    if not traces.is_dir():
        return []
    return sorted(p for p in traces.glob("*/*/*") if p.is_dir())


def _read_model(path: Path, model: type[CombinedScore | ResultRecord]) -> tuple[object | None, str | None]:
    try:
        return model.model_validate_json(path.read_bytes()), None
    except FileNotFoundError:
        return None, f"no {path.name}"
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return None, f"{path.name} unreadable: {first}"


def read_output(output: Path) -> OutputSnapshot:
    """Read every cell of ``<output>/traces`` into an :class:`OutputSnapshot`.

    A cell is *measured* when its seal verifies, its ``combined_score.json`` is readable
    and the run was admitted; its criteria are every stored verdict (core and diagnostic).
    A cell whose files do not match its manifest is listed in ``tampered``; other cells are
    listed in ``unmeasured`` with the reason, never silently dropped.
    """
    output = Path(output)
    cells: dict[str, CellState] = {}
    versions: dict[str, str | None] = {}
    reasons: dict[str, dict[str, str]] = {}
    unmeasured: dict[str, str] = {}
    tampered: dict[str, str] = {}
    protocols: set[str] = set()
    problems: list[str] = []
    for run_dir in _cell_dirs(output):
        task_dir, model_dir, harness_dir = run_dir.parts[-3:]
        seal = check_seal(run_dir)
        if seal.state == "tampered":
            # Nothing inside the cell is trusted, its identity included: the folder names key it.
            tampered[cell_key(task_dir, model_dir, harness_dir)] = seal.describe()
            continue
        score, score_err = _read_model(run_dir / "artifacts" / "llm_judge" / "combined_score.json", CombinedScore)
        result, result_err = _read_model(run_dir / "result.json", ResultRecord)
        ident = (score.identity if isinstance(score, CombinedScore)
                 else result.identity if isinstance(result, ResultRecord) else None)
        key = (cell_key(ident.task_id, ident.model, ident.harness) if ident
               else cell_key(task_dir, model_dir, harness_dir))
        if ident is not None:
            versions[key] = ident.harness_version
            protocols.add(ident.protocol)
        if seal.state == "incomplete":
            unmeasured[key] = f"half-written archive: {seal.describe()}"
            continue
        if seal.state == "legacy" and isinstance(score, CombinedScore):
            unmeasured[key] = f"score not sealed: {seal.describe()}"
            continue
        if isinstance(result, ResultRecord) and result.eligibility != "eligible":
            unmeasured[key] = f"not eligible ({result.eligibility}): {result.eligibility_reason or '-'}"
            continue
        if not isinstance(score, CombinedScore):
            status = f"; run status {result.status}" if isinstance(result, ResultRecord) else f"; {result_err}"
            unmeasured[key] = f"{score_err}{status}"
            if score_err and "unreadable" in score_err:
                problems.append(f"{run_dir.relative_to(output).as_posix()}: {score_err}")
            continue
        if not score.admitted:
            failed = "; ".join(d.check + (f" ({d.reason})" if d.reason else "") for d in score.admission if not d.ok)
            unmeasured[key] = f"run not admitted: {failed or 'admission failed'}"
            continue
        cells[key] = {v.id: state_of(v) for v in score.verdicts}
        reasons[key] = {v.id: v.reason for v in score.verdicts}
    by_harness: dict[str, set[str | None]] = {}
    for key, version in versions.items():
        by_harness.setdefault(key.rsplit("/", 1)[-1], set()).add(version)
    harness_versions: dict[str, str | None] = {}
    for harness, found in sorted(by_harness.items()):
        if len(found) > 1:
            shown = ", ".join(sorted(str(v) for v in found))
            problems.append(f"harness {harness} ran at several versions in this output: {shown}")
        named = harness.partition("@")[2]
        if named and any(v != named for v in found):
            # A named version keys its own cells (``<task>/<model>/<name>@<version>``); the
            # version that ran must be the one its name says.
            shown = ", ".join(sorted(str(v) for v in found))
            problems.append(f"harness {harness} is named for version {named} but ran version {shown}")
        harness_versions[harness] = max(found, key=str)
    protocol = next(iter(protocols)) if len(protocols) == 1 else ("mixed" if protocols else "unknown")
    if len(protocols) > 1:
        problems.append(f"output mixes protocols: {', '.join(sorted(protocols))}")
    baseline = Baseline(protocol=protocol, harness_versions=harness_versions, cells=cells)
    return OutputSnapshot(baseline=baseline, versions=versions, reasons=reasons, unmeasured=unmeasured,
                          tampered=tampered, protocols=tuple(sorted(protocols)), problems=tuple(problems))


def from_output(output: Path) -> Baseline:
    """The baseline an output would record: its measured cells and harness versions."""
    return read_output(output).baseline


def merge_cells(old: Baseline, new: Baseline) -> Baseline:
    """``old`` with only ``new``'s cells replaced or added; every other cell and every stored
    version is kept. For recording new task packs into a baseline without re-running the rest:
    the caller checks that each harness in ``new`` ran at its stored version (a baseline mixing
    versions of one harness would hold it to two releases at once)."""
    return Baseline(protocol=old.protocol, harness_versions={**new.harness_versions, **old.harness_versions},
                    cells={**old.cells, **new.cells})


def merge(old: Baseline | None, new: Baseline, harnesses: set[str] | None = None) -> Baseline:
    """``old`` with the cells and versions of ``harnesses`` (default: those in ``new``) replaced by ``new``'s.

    Cells of other harnesses are kept, so a maintainer who re-records one harness does not
    drop the others. Protocols must agree (checked by the caller).
    """
    if old is None:
        return new
    replace = set(new.harness_versions) if harnesses is None else harnesses
    cells: dict[str, CellState] = {k: v for k, v in old.cells.items() if old.harness_of(k) not in replace}
    cells.update(new.cells)
    versions: Mapping[str, str | None] = {h: v for h, v in old.harness_versions.items() if h not in replace}
    return Baseline(protocol=new.protocol, harness_versions={**versions, **new.harness_versions}, cells=cells)
