"""Calibration of the task suite with the reference harness and its mutants.

The benchmark's own validity test (DESIGN.md §4, "Reference harness"): every task
must score 100/100 with the faithful ``reference`` harness, and each seeded-defect
mutant ``reference+<defect>`` must flip exactly the criteria the task declares for it
(``task.yaml`` → ``calibration.mutants``) — and nothing on a task that does not list
it. A task that a faithful harness cannot pass, or that a broken one still passes,
is a broken task.

Everything here reads archives only (pure apart from file reads).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from harnesses.reference.mutants import MUTANTS, not_applicable, pack_features
from tracetrial.archive import RunPaths
from tracetrial.results import CombinedScore
from tracetrial.task import TaskPack

Status = Literal["ok", "not_applicable", "missing", "unexpected", "mislabelled", "not_run", "not_admitted", "stale"]
#: Statuses of a calibrated cell: as declared, or a mutant whose defect cannot act on the pack.
CALIBRATED: frozenset[str] = frozenset({"ok", "not_applicable"})


@dataclass(frozen=True)
class CalibrationRow:
    """One (variant, task) cell of the discrimination table."""

    task: str
    variant: str
    expected: frozenset[str]
    flipped: frozenset[str]
    status: Status
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status in CALIBRATED


@dataclass
class CalibrationReport:
    rows: list[CalibrationRow] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.rows) and all(r.ok for r in self.rows)

    def problems(self) -> list[CalibrationRow]:
        return [r for r in self.rows if not r.ok]


@dataclass(frozen=True)
class _Cell:
    admitted: bool
    failed: frozenset[str]
    agent_failed: frozenset[str]
    label: str


def _cell(path: Path) -> _Cell | None:
    """What calibration reads of one archived cell, or None when absent."""
    if not path.is_file():
        return None
    score = CombinedScore.model_validate_json(path.read_text(encoding="utf-8"))
    failed = [v for v in score.verdicts if v.passed is False]
    return _Cell(score.admitted, frozenset(v.id for v in failed),
                 frozenset(v.id for v in failed if v.layer == "agent"), score.attribution.label)


def _failed(path: Path) -> tuple[bool, set[str]] | None:
    """(admitted, failed criterion ids) of one archived cell, or None when absent."""
    cell = _cell(path)
    return None if cell is None else (cell.admitted, set(cell.failed))


def stale_reason(cell: RunPaths, task: TaskPack, reference_version: str | None) -> str | None:
    """Why an archived cell does not measure this pack with this reference harness, or None.

    ``--report-only`` reads whatever the archive holds: a cell run before the pack or the
    reference harness changed would calibrate the old pair and be recorded for the new one."""
    import json

    try:
        record = json.loads(cell.result.read_text(encoding="utf-8"))
        digest = (record.get("resolved_config") or {}).get("pack_digest")
        version = (record.get("identity") or {}).get("harness_version")
    except (OSError, ValueError, AttributeError):
        return "its result.json is unreadable"
    # A cell that names no digest or version (hand-built, or archived before they were recorded)
    # is judged by its verdicts alone; one that names others is not this pack's calibration.
    if digest is not None and digest != task.digest:
        return (f"run on another version of the pack (digest {str(digest)[:12]}, now {task.digest[:12]}); "
                "re-run it (--rerun)")
    if reference_version is not None and version is not None and version != reference_version:
        return f"run by reference {version}, now {reference_version}; re-run it (--rerun)"
    return None


def features_used(cell: RunPaths) -> set[str]:
    """Which mutant-relevant features a cell's run used, read from its Trace IR (``events.json``)
    and ``result.json``: MCP tool calls, a sub-agent, an ask-user call, a policy denial (a deny
    rule, a protected path, no network), a second turn. The cross-check of pruning: a feature the faithful run used cannot be missing
    from the pack."""
    import json

    used: set[str] = set()
    try:
        events = json.loads(cell.events.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        events = []
    for ev in events if isinstance(events, list) else []:
        if not isinstance(ev, dict):
            continue
        call = ev.get("tool_call")
        name = str(call.get("name") or "") if isinstance(call, dict) else ""
        if name.startswith("mcp__"):
            used.add("mcp")
        if name == "ask_user":
            used.add("ask_user")
        if name == "spawn_subagent" or ev.get("principal_id") not in (None, "main"):
            used.add("subagent")
        if ev.get("event_type") == "policy_event" and ev.get("decision") == "deny":
            # which policy refused: a deny rule, a protected path, or the commands' missing network
            kind = ev.get("policy_kind")
            used.add({"protected_path": "protect", "sandbox": "network_deny"}.get(str(kind), "deny"))
    try:
        result = json.loads(cell.result.read_text(encoding="utf-8"))
        if len(result.get("turns") or []) > 1:
            used.add("resume")
    except (OSError, ValueError, AttributeError):
        pass
    return used


def calibrate(output: Path, tasks: Iterable[TaskPack], mutants: Iterable[str], *, model: str = "probe",
              reference_version: str | None = None) -> CalibrationReport:
    """Compare archived reference/mutant cells under ``output`` with each task's declaration.

    A cell archived for another version of the pack, or (when ``reference_version`` is given) by
    another version of the reference harness, is ``stale``: never read as a calibration of this one.
    """
    report = CalibrationReport()
    mutant_list = list(mutants)
    for task in sorted(tasks, key=lambda t: t.id):
        ref = _failed(RunPaths.for_cell(output, task.id, model, "reference").combined_score)
        if ref is None:
            report.rows.append(CalibrationRow(task.id, "reference", frozenset(), frozenset(), "not_run",
                                              "no archived reference cell"))
            continue
        admitted, ref_failed = ref
        stale = stale_reason(RunPaths.for_cell(output, task.id, model, "reference"), task, reference_version)
        if stale is not None:
            report.rows.append(CalibrationRow(task.id, "reference", frozenset(), frozenset(), "stale", stale))
            continue
        if not admitted:
            report.rows.append(CalibrationRow(task.id, "reference", frozenset(), frozenset(ref_failed),
                                              "not_admitted", "reference run not admitted"))
            continue
        status: Status = "ok" if not ref_failed else "unexpected"
        report.rows.append(CalibrationRow(task.id, "reference", frozenset(), frozenset(ref_failed), status,
                                          "" if not ref_failed else "the faithful harness must pass every criterion"))
        declared = task.spec.calibration.mutants
        used = features_used(RunPaths.for_cell(output, task.id, model, "reference"))
        for mutant in mutant_list:
            variant = f"reference+{mutant}"
            expected = frozenset(declared.get(mutant, []))
            got = _cell(RunPaths.for_cell(output, task.id, model, variant).combined_score)
            why = not_applicable(mutant, task)
            if why is not None and got is None:
                # Not run (--tt-prune-mutants): sound only if the faithful run never used what the
                # defect needs, and nothing may be declared for it.
                missing = set(MUTANTS[mutant].needs) - pack_features(task)
                contra = sorted(missing & used)  # a feature the pack lacks, yet the faithful run used
                if contra or expected:
                    report.rows.append(CalibrationRow(
                        task.id, variant, expected, frozenset(), "unexpected",
                        f"left out as not applicable ({why}) but "
                        + (f"the faithful run used {', '.join(contra)}: declare it in task.yaml"
                           if contra else "task.yaml declares flips for it")))
                else:
                    report.rows.append(CalibrationRow(task.id, variant, expected, frozenset(), "not_applicable",
                                                      why))
                continue
            if got is None:
                report.rows.append(CalibrationRow(task.id, variant, expected, frozenset(), "not_run",
                                                  "no archived cell"))
                continue
            stale = stale_reason(RunPaths.for_cell(output, task.id, model, variant), task, reference_version)
            if stale is not None:
                report.rows.append(CalibrationRow(task.id, variant, expected, frozenset(), "stale", stale))
                continue
            admitted, failed = got.admitted, set(got.failed)
            if not admitted:
                report.rows.append(CalibrationRow(task.id, variant, expected, frozenset(failed), "not_admitted",
                                                  "run not admitted"))
                continue
            flipped = frozenset(failed - ref_failed)
            if flipped == expected and got.agent_failed and got.label != "harness_caused":
                # TASK_GUIDE rule 10: a seeded harness defect that breaks the agent layer must be
                # attributed to the harness; otherwise the task blames the agent for it.
                report.rows.append(CalibrationRow(
                    task.id, variant, expected, flipped, "mislabelled",
                    f"agent criteria failed ({', '.join(sorted(got.agent_failed))}) but the run is "
                    f"labelled {got.label!r}, not 'harness_caused': link them to a harness criterion "
                    "the same defect flips"))
            elif flipped == expected:
                report.rows.append(CalibrationRow(task.id, variant, expected, flipped, "ok"))
            elif expected - flipped:
                report.rows.append(CalibrationRow(task.id, variant, expected, flipped, "missing",
                                                  "did not flip: " + ", ".join(sorted(expected - flipped))))
            else:
                report.rows.append(CalibrationRow(task.id, variant, expected, flipped, "unexpected",
                                                  "also flipped: " + ", ".join(sorted(flipped - expected))))
    return report


def format_table(report: CalibrationReport, *, only_nonempty: bool = False) -> list[str]:
    """The discrimination table: variant × task → criteria that flipped (✓ as declared)."""
    lines = [f"{'variant':<34} {'task':<30} {'status':<12} flipped criteria", "-" * 110]
    for row in report.rows:
        if only_nonempty and row.ok and not row.flipped and row.variant != "reference":
            continue
        flipped = ", ".join(sorted(row.flipped)) or "-"
        extra = f"  [{row.detail}]" if row.detail else ""
        lines.append(f"{row.variant:<34} {row.task:<30} {row.status:<12} {flipped}{extra}")
    bad = report.problems()
    lines.append("-" * 110)
    lines.append(f"{len(report.rows)} cells checked, {len(bad)} problem(s): "
                 + ("calibrated" if report.ok else "NOT calibrated"))
    return lines
