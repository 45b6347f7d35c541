"""The regression gate: compare a session's verdicts with a stored baseline (pure).

:func:`compare` turns a :class:`~ci.baseline.Baseline` and an
:class:`~ci.baseline.OutputSnapshot` into a :class:`GateResult`;
:func:`format_result` renders it. Neither reads files.

What counts (per criterion of a cell, states ``pass`` / ``fail`` / ``unscored``):

* **regressed**: ``pass`` -> ``fail`` or ``pass`` -> ``unscored`` (unscored is never a pass);
* **improved**: ``fail`` / ``unscored`` -> ``pass``;
* **changed**: ``fail`` <-> ``unscored`` (still not passing; reported, not gating);
* **appeared** / **vanished**: a criterion or a whole cell present on one side only;
* **unmeasured**: a baseline cell whose run has no usable verdicts now (no score,
  not admitted, not eligible, half-written archive);
* **tampered**: a cell (in the baseline or not) whose files do not match its manifest,
  named with the first mismatching file; its verdicts are never read.

The gate fails (exit 1) on tampered cells, regressions, vanished cells or criteria, and
unmeasured baseline cells: a check that no longer runs cannot catch a regression, and a
forged archive proves nothing. Cells of a
harness that does not appear in the output at all are not compared (a maintainer
runs only their harness); they are listed as not run.

Harness versions: when a cell's harness version differs from the baseline's, the
gate **refuses** to compare (exit 3) and names harness, old and new version, unless
``allow_version_change`` is set; then it compares and labels every line of that
harness with the version change.

Repetitions (``--tt-repeat K``): every repetition is compared with the baseline on its own
(a regression in any repetition fails the gate); a baseline records one state per criterion, so
it is recorded only from repetitions that agree (:func:`repetition_disagreements`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ci.baseline import Baseline, OutputSnapshot, State

__all__ = [
    "EXIT_OK",
    "EXIT_REGRESSION",
    "EXIT_USAGE",
    "EXIT_VERSION_CHANGE",
    "Change",
    "GateResult",
    "VersionChange",
    "compare",
    "format_result",
    "repetition_disagreements",
]

EXIT_OK = 0
#: Tampered cells, regressions, vanished or unmeasured baseline cells.
EXIT_REGRESSION = 1
#: Unusable inputs: no baseline, empty output, protocol mismatch.
EXIT_USAGE = 2
#: A harness version differs from the baseline's and ``--allow-version-change`` was not given.
EXIT_VERSION_CHANGE = 3

ChangeKind = Literal["tampered", "regressed", "improved", "changed", "appeared", "vanished", "unmeasured"]
#: Kinds that fail the gate.
FATAL: frozenset[str] = frozenset({"tampered", "regressed", "vanished", "unmeasured"})
_ORDER: tuple[ChangeKind, ...] = ("tampered", "regressed", "vanished", "unmeasured", "improved", "changed",
                                  "appeared")


@dataclass(frozen=True)
class VersionChange:
    """A harness whose cells ran at another version than the baseline's."""

    harness: str
    old: str | None
    new: str | None

    @property
    def label(self) -> str:
        return f"{self.harness} {self.old or 'unknown'} -> {self.new or 'unknown'}"


@dataclass(frozen=True)
class Change:
    """One line of the diff: a criterion (or a whole cell when ``criterion`` is None) that moved."""

    kind: ChangeKind
    cell: str
    criterion: str | None = None
    old: State | None = None
    new: State | None = None
    reason: str = ""
    version: str | None = field(default=None, compare=False)

    @property
    def fatal(self) -> bool:
        return self.kind in FATAL


@dataclass(frozen=True)
class GateResult:
    """The outcome of one comparison.

    Attributes:
        changes: every difference, in report order.
        version_changes: harnesses whose version differs from the baseline's.
        refused: the comparison was refused (version change not allowed, protocol mismatch).
        refusal: why, in one sentence with the remedy.
        compared: number of baseline cells compared.
        not_run: baseline harnesses absent from the output (their cells were not compared).
        notes: informational lines (archive problems, unmeasured cells without a baseline).
    """

    changes: tuple[Change, ...] = ()
    version_changes: tuple[VersionChange, ...] = ()
    refused: bool = False
    refusal: str = ""
    exit_refused: int = EXIT_VERSION_CHANGE
    compared: int = 0
    not_run: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def of(self, kind: ChangeKind) -> list[Change]:
        return [c for c in self.changes if c.kind == kind]

    @property
    def failed(self) -> bool:
        return any(c.fatal for c in self.changes)

    @property
    def exit_code(self) -> int:
        if self.refused:
            return self.exit_refused
        return EXIT_REGRESSION if self.failed else EXIT_OK


def _compare_cell(key: str, old: dict[str, State], new: dict[str, State], reasons: dict[str, str],
                  version: str | None) -> list[Change]:
    out: list[Change] = []
    for cid in sorted(old.keys() | new.keys()):
        a, b = old.get(cid), new.get(cid)
        why = reasons.get(cid, "")
        if a is None:
            out.append(Change("appeared", key, cid, None, b, why, version))
        elif b is None:
            out.append(Change("vanished", key, cid, a, None, "no longer in the cell's verdicts", version))
        elif a == b:
            continue
        elif a == "pass":
            out.append(Change("regressed", key, cid, a, b, why, version))
        elif b == "pass":
            out.append(Change("improved", key, cid, a, b, why, version))
        else:
            out.append(Change("changed", key, cid, a, b, why, version))
    return out


def _version_changes(baseline: Baseline, snapshot: OutputSnapshot) -> list[VersionChange]:
    base_harnesses = {baseline.harness_of(k) for k in baseline.cells}
    found: dict[tuple[str, str | None, str | None], None] = {}
    for key, version in sorted(snapshot.versions.items()):
        harness = baseline.harness_of(key)
        if harness not in base_harnesses or harness not in baseline.harness_versions:
            continue  # a harness new to the baseline has nothing to differ from
        old = baseline.harness_versions[harness]
        if version != old:
            found[(harness, old, version)] = None
    return [VersionChange(h, o, n) for h, o, n in found]


def _summary(state: dict[str, State]) -> str:
    bad = [f"{cid} {s}" for cid, s in sorted(state.items()) if s != "pass"]
    return f"{len(state)} criteria" + (f", not passing: {', '.join(bad)}" if bad else ", all pass")


def repetition_disagreements(snapshots: Sequence[tuple[int, OutputSnapshot]]) -> list[str]:
    """One line per cell whose repetitions do not agree: a criterion in different states, or the
    cell measured in some repetitions only (tampered cells are named by the gate itself).

    Args:
        snapshots: ``(repetition, snapshot)`` of every repetition of one output.
    """
    lines: list[str] = []
    keys = sorted({k for _, s in snapshots for k in (*s.baseline.cells, *s.unmeasured)})
    for key in keys:
        measured = [rep for rep, s in snapshots if key in s.baseline.cells]
        if len(measured) != len(snapshots):
            missing = [rep for rep, _ in snapshots if rep not in measured]
            lines.append(f"{key}: measured in repetition(s) {', '.join(map(str, measured)) or 'none'}, "
                         f"not in {', '.join(map(str, missing))}")
            continue
        states = [(rep, s.baseline.cells[key]) for rep, s in snapshots]
        criteria = sorted({cid for _, st in states for cid in st})
        differing = []
        for cid in criteria:
            per_rep = [(rep, st.get(cid, "absent")) for rep, st in states]
            if len({state for _, state in per_rep}) > 1:
                differing.append(f"{cid} " + ", ".join(f"{state} in {rep}" for rep, state in per_rep))
        if differing:
            lines.append(f"{key}: " + "; ".join(differing))
    return lines


def compare(baseline: Baseline, snapshot: OutputSnapshot, *, allow_version_change: bool = False) -> GateResult:
    """Compare the measured cells of ``snapshot`` with ``baseline`` (see the module docstring)."""
    notes = list(snapshot.problems)
    # A refusal compares nothing, but still names every tampered cell.
    refused_notes = tuple(notes + [f"{k}: TAMPERED, refusing to trust this cell: {why}"
                                   for k, why in sorted(snapshot.tampered.items())])
    current = snapshot.baseline
    if snapshot.protocols and tuple(snapshot.protocols) != (baseline.protocol,):
        return GateResult(refused=True, exit_refused=EXIT_USAGE, notes=refused_notes, refusal=(
            f"the output ran under protocol {', '.join(snapshot.protocols)} but the baseline records "
            f"{baseline.protocol}: use a {', '.join(snapshot.protocols)} baseline"))
    versions = _version_changes(baseline, snapshot)
    if versions and not allow_version_change:
        lines = "; ".join(f"harness {v.harness}: baseline version {v.old or 'unknown'}, "
                          f"output version {v.new or 'unknown'}" for v in versions)
        return GateResult(version_changes=tuple(versions), refused=True, notes=refused_notes, refusal=(
            f"refusing to compare across harness versions ({lines}). Re-record the baseline with "
            f"--update, or compare anyway with --allow-version-change"))
    label = {v.harness: v.label for v in versions}
    ran = snapshot.harnesses
    changes: list[Change] = []
    compared = 0
    for key in sorted(baseline.cells):
        harness = baseline.harness_of(key)
        if harness not in ran:
            continue
        compared += 1
        version = label.get(harness)
        if key in snapshot.tampered:
            continue  # reported below, with every other tampered cell
        if key in current.cells:
            changes += _compare_cell(key, baseline.cells[key], current.cells[key],
                                     snapshot.reasons.get(key, {}), version)
        elif key in snapshot.unmeasured:
            changes.append(Change("unmeasured", key, reason=snapshot.unmeasured[key], version=version))
        else:
            changes.append(Change("vanished", key, reason=f"no run folder (baseline: {_summary(baseline.cells[key])})",
                                  version=version))
    changes += [Change("tampered", key, reason=f"refusing to trust this cell: {why}")
                for key, why in sorted(snapshot.tampered.items())]
    for key in sorted(current.cells.keys() - baseline.cells.keys()):
        changes.append(Change("appeared", key, reason=_summary(current.cells[key]),
                              version=label.get(current.harness_of(key))))
    notes += [f"{k}: not measured ({why}); not in the baseline" for k, why in sorted(snapshot.unmeasured.items())
              if k not in baseline.cells]
    not_run = sorted({baseline.harness_of(k) for k in baseline.cells} - ran)
    changes.sort(key=lambda c: (_ORDER.index(c.kind), c.cell, c.criterion or ""))
    return GateResult(changes=tuple(changes), version_changes=tuple(versions), compared=compared,
                      not_run=tuple(not_run), notes=tuple(notes))


def _line(c: Change) -> str:
    tag = f"  [{c.version}]" if c.version else ""
    if c.criterion is None:
        text = f"  {c.cell}  (whole cell)"
    else:
        move = f"{c.old or '-'} -> {c.new or '-'}"
        text = f"  {c.cell}  {c.criterion}  {move}"
    return text + tag + (f"\n      {c.reason}" if c.reason else "")


def _count(items: Iterable[Change]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in items:
        out[c.kind] = out.get(c.kind, 0) + 1
    return out


def format_result(result: GateResult, *, baseline_name: str = "baseline", output_name: str = "output",
                  harness_versions: dict[str, str | None] | None = None) -> list[str]:
    """The readable diff: a header, one section per kind of change, notes, and the verdict line."""
    lines = [f"tracetrial gate: {output_name} vs {baseline_name}"]
    if harness_versions:
        lines.append("harnesses: " + ", ".join(f"{h} {v or 'unknown'}" for h, v in sorted(harness_versions.items())))
    if result.refused:
        lines.append(f"REFUSED: {result.refusal}")
        lines += [f"note: {n}" for n in result.notes]
        lines.append(f"gate: REFUSED (exit {result.exit_code})")
        return lines
    if result.version_changes:
        lines.append("ACROSS HARNESS VERSIONS (--allow-version-change): "
                     + "; ".join(v.label for v in result.version_changes))
    lines.append(f"{result.compared} baseline cell(s) compared")
    if result.not_run:
        lines.append(f"not run in this output (not compared): {', '.join(result.not_run)}")
    for kind in _ORDER:
        items = result.of(kind)
        if items:
            lines.append(f"{kind.upper()} ({len(items)})")
            lines += [_line(c) for c in items]
    lines += [f"note: {n}" for n in result.notes]
    counts = _count(result.changes)
    tally = ", ".join(f"{counts[k]} {k}" for k in _ORDER if k in counts) or "no changes"
    verdict = "FAIL" if result.failed else "PASS"
    lines.append(f"gate: {verdict} ({tally}; exit {result.exit_code})")
    return lines
