"""The release manifest (SPEC §10; issue 24 item 7): one file that pins a published selection
of runs to the archive, so its numbers can be audited and re-derived from the archive alone.

:func:`build_release` reads an output folder (``<output>/traces/<task>/<model>/<harness>/``:
``result.json``, ``manifest.json``, ``summary.json``, ``artifacts/llm_judge/combined_score.json``
and the task snapshot under ``private/task/<task>/``; with ``--tt-repeat``, every repetition under
``<output>/repeats/rep-<i>/traces/`` too) and returns a :class:`ReleaseManifest`
(``tt-release/1``) that links every selected run to its task revision and pack digest, its
resolved config (inline and as a SHA-256), its harness version, its key artifact paths, its
score summary and the path, size and SHA-256 of every one of its files (its ``manifest.json``
included), plus each task's protocol stage. Nothing is written (:func:`write_release` writes);
:func:`verify_release` re-hashes every listed file, re-checks every cell's seal and re-derives
the manifest's fields from the archive.

Runs of the ``reference`` harness and its mutants (``reference+<defect>``) are *calibration*
runs: they audit the tasks and are never among the *evaluated* runs. They are read from the
output itself or from a separate calibration archive (``calibration=``, e.g. the folder
``tracetrial calibrate`` wrote; then the output's own calibration runs are left out), and are
included for every selected task whatever the ``harnesses``/``models`` selection, because the
audit must be re-derivable too.

Protocol stages (SPEC §3), each decided from the archive only. A *cell* stage holds for one run:

* **executed** -- the cell is sealed (:func:`tracetrial.archive.check_seal`: ``sealed``, or a
  ``legacy`` seal), its ``result.json`` reads, the pair was ``eligible`` and the harness ran
  (status ``completed``, ``failed`` or ``timed_out``; not ``skipped`` nor ``apparatus_error``).
* **apparatus_valid** -- executed, and the report reader (:func:`reports.records.read_run`) finds
  a sealed, admitted combined score (status ``measured``: admission passed, no legacy seal).
* **measured** -- apparatus valid, both verdict vectors are non-empty, the stored score is
  self-consistent (no problem from the reader's checks: ``S = S_H + S_A``, ``50·p/n``, the layer
  counts agree with the verdicts, links join failed criteria, identity agrees with the folder) and
  the score's identity equals ``result.json``'s.
* **attributable** -- measured, every core criterion has a final verdict (unscored only as
  ``not applicable: <reason>``, a criterion that does not apply to the run), and the stored
  SPEC §6 sets and label re-derive from the verdicts: ``F_H``/``Z_A`` are the failed core
  criteria, ``B ⊆ F_H``, ``Z_H = F_H − B``, every activated link joins ``F_H × Z_A``, and the
  label and rule equal :func:`criteria.scoring.run_label` of them.

A *task* stage holds for the task:

1. **authored** -- every selected cell of the task (calibration runs included) archived a task
   snapshot that loads as a valid pack (:func:`tracetrial.task.load_task`), whose ``id`` is the
   task and whose ``revision`` is the run's ``task_revision``; the cells agree on the revision,
   the recorded ``pack_digest`` and the snapshot's digest.
2. **audited** -- the task's calibration verifies (:func:`reports.calibration.calibrate` over the
   calibration archive, model ``probe``): the faithful ``reference`` run is admitted and passes
   every criterion, every mutant flips exactly what the snapshot's ``task.yaml`` declares (or is
   left out as not applicable), and every calibration run ran the same pack digest as the
   evaluated runs.
3. **cross_harness_eligible** -- at least two evaluated harnesses (by name, ``@version`` and
   ``+variant`` stripped) have an ``eligible`` run of the task.
4. **executed**, 5. **apparatus_valid**, 6. **measured**, 7. **attributable** -- every eligible
   evaluated run of the task holds that cell stage (unsupported and non-comparable pairs are
   not measured by design and do not count), and there is at least one.

Each stage is reported with ``reached`` and a reason; the task's ``stage`` is the last stage of
the unbroken prefix reached (``None`` when not even authored).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field, ValidationError

import tracetrial
from criteria.scoring import run_label
from harnesses.reference.mutants import MUTANTS
from reports.calibration import calibrate
from reports.records import (
    CALIBRATION_HARNESS,
    RunRecord,
    _cell_dirs,
    harness_family,
    is_calibration,
    read_run,
    run_dirs,
)
from reports.schema import CellStatus
from tracetrial.archive import (
    COMBINED_SCORE,
    MANIFEST,
    REPEATS_DIR,
    SCORING_OUTPUTS,
    SealCheck,
    SealState,
    check_seal,
    repetition_of,
    safe_component,
    sha256_file,
)
from tracetrial.errors import TaskPackErrors, TraceTrialError
from tracetrial.files import atomic_write_text
from tracetrial.model import StrictModel
from tracetrial.results import CombinedScore, ResultRecord
from tracetrial.task import TaskPack, load_task, pack_digest

RELEASE_SCHEMA = "tt-release/1"
#: Where ``tracetrial release OUTPUT`` writes, relative to OUTPUT (never inside a sealed cell).
DEFAULT_RELEASE = Path("release") / "manifest.json"

StageName = Literal["authored", "audited", "cross_harness_eligible", "executed", "apparatus_valid",
                    "measured", "attributable"]
#: The protocol stages in order (SPEC §3).
STAGES: tuple[StageName, ...] = ("authored", "audited", "cross_harness_eligible", "executed",
                                 "apparatus_valid", "measured", "attributable")
#: The stages a single run can reach (the last four of :data:`STAGES`).
CELL_STAGES: tuple[StageName, ...] = STAGES[3:]
_RAN = ("completed", "failed", "timed_out")
_NOT_APPLICABLE = "not applicable:"


class ReleaseError(TraceTrialError):
    """The archive cannot be released: a selected cell is tampered or half-written, or nothing
    was selected."""


class FileEntry(StrictModel):
    """One archived file: its path relative to the run's archive root, size and SHA-256."""

    path: str
    size: int
    sha256: str


class StageCheck(StrictModel):
    """Whether one protocol stage holds, and why (or why not)."""

    stage: StageName
    reached: bool
    reason: str


class RunScore(StrictModel):
    """The published numbers of one run, as stored in its ``combined_score.json``."""

    S_H: float
    S_A: float
    S: float
    effective_score: float
    p_H: int
    n_H: int
    unscored_H: int
    p_A: int
    n_A: int
    unscored_A: int
    admitted: bool
    agent_success: bool
    combined_pass: bool
    clean: bool
    label: str
    label_rule: int
    judge: str | None


class RunEntry(StrictModel):
    """One selected run: identity, task revision, resolved config, artifacts and checksums."""

    archive: Literal["main", "calibration"] = Field(description="Which archive root ``path`` is under.")
    path: str = Field(description="The cell folder relative to its archive root (posix).")
    repetition: int = Field(default=1, description="Which repetition of the cell (--tt-repeat): 1 under "
                                                   "traces/, i under repeats/rep-<i>/traces/.")
    role: Literal["evaluated", "calibration"]
    run_id: str | None
    task_id: str
    task_revision: int | None
    pack_digest: str | None = Field(description="resolved_config.pack_digest of result.json.")
    snapshot_digest: str | None = Field(description="pack_digest of the archived snapshot private/task/<task>/.")
    model: str
    harness: str
    harness_version: str | None
    protocol: str | None
    seal: SealState
    run_status: str | None = Field(description="result.json status (completed, failed, timed_out, ...).")
    eligibility: str | None
    eligibility_reason: str | None
    report_status: CellStatus = Field(description="The cell's status as the reports read it.")
    report_reason: str | None
    resolved_config: dict[str, Any]
    resolved_config_sha256: str | None = Field(description="SHA-256 of resolved_config as canonical JSON "
                                                           "(sorted keys, no whitespace).")
    score: RunScore | None
    stages: list[StageCheck]
    artifacts: dict[str, str] = Field(description="Key files (result, events, summary, manifest, combined_score, "
                                                  "snapshot) by name, relative to the archive root.")
    files: list[FileEntry] = Field(description="Every file of the cell, manifest.json included.")


class TaskEntry(StrictModel):
    """One task of the release and its protocol stage."""

    task_id: str
    revision: int | None
    pack_digest: str | None
    component: str | None
    property: str | None
    stage: StageName | None = Field(description="Last stage of the unbroken prefix reached; None: not authored.")
    stages: list[StageCheck]
    runs: list[str] = Field(description="Evaluated runs (cell paths in the main archive).")
    calibration_runs: list[str] = Field(description="Calibration runs (cell paths in the calibration archive).")


class Selection(StrictModel):
    """What was selected (``None``: everything)."""

    tasks: list[str] | None = None
    harnesses: list[str] | None = None
    models: list[str] | None = None


class ReleaseManifest(StrictModel):
    """``release/manifest.json`` (``tt-release/1``)."""

    schema_: Literal["tt-release/1"] = Field(default="tt-release/1", alias="schema")
    generated_at: str | None = None
    tracetrial_version: str
    archives: dict[str, str] = Field(description="Archive roots: 'main' is '.', 'calibration' is relative to "
                                                 "the main archive (or absolute).")
    selection: Selection
    counts: dict[str, int]
    tasks: list[TaskEntry]
    runs: list[RunEntry]

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# --------------------------------------------------------------------------------------- build


#: ``claude_code@2.1.332`` → ``claude_code``; ``reference+hide_exit_code`` → ``reference``.
base_harness = harness_family
_is_calibration = is_calibration


def _canonical_sha256(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                          .encode("utf-8")).hexdigest()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _files(root: Path, prefix: str, seal: SealCheck) -> list[FileEntry]:
    """Every file of a sealed cell: the manifest's entries (``check_seal`` just verified each
    one's size and SHA-256), ``manifest.json`` itself and, under a legacy seal, the scoring
    outputs the seal never covered (hashed here)."""
    assert seal.manifest is not None
    entries = [FileEntry(path=f"{prefix}/{e.path}", size=e.size, sha256=e.sha256) for e in seal.manifest.files]
    listed = {e.path for e in seal.manifest.files}
    if seal.state == "legacy":
        for out in SCORING_OUTPUTS:
            base = root / out
            if not base.is_dir():
                continue
            for p in sorted(base.rglob("*")):
                rel = p.relative_to(root).as_posix()
                if p.is_file() and not p.is_symlink() and rel not in listed:
                    entries.append(FileEntry(path=f"{prefix}/{rel}", size=p.stat().st_size, sha256=sha256_file(p)))
    m = root / MANIFEST
    entries.append(FileEntry(path=f"{prefix}/{MANIFEST}", size=m.stat().st_size, sha256=sha256_file(m)))
    return sorted(entries, key=lambda e: e.path)


def _attribution_problem(cs: CombinedScore) -> str | None:
    """Why the stored SPEC §6 sets and label do not re-derive from the verdicts (None: they do)."""
    core = [v for v in cs.verdicts if v.role == "core"]
    open_ = [v.id for v in core if v.passed is None and not v.reason.startswith(_NOT_APPLICABLE)]
    if open_:
        return f"core criteria without a final verdict (unscored): {', '.join(open_)}"
    att = cs.attribution
    f_h = {v.id for v in core if v.layer == "harness" and v.passed is False}
    z_a = {v.id for v in core if v.layer == "agent" and v.passed is False}
    if set(att.F_H) != f_h:
        return f"stored F_H {sorted(att.F_H)} is not the failed core harness criteria {sorted(f_h)}"
    if set(att.Z_A) != z_a:
        return f"stored Z_A {sorted(att.Z_A)} is not the failed core agent criteria {sorted(z_a)}"
    if not set(att.B) <= f_h:
        return f"stored B {sorted(att.B)} is not a subset of F_H"
    if set(att.Z_H) != f_h - set(att.B):
        return f"stored Z_H {sorted(att.Z_H)} is not F_H - B {sorted(f_h - set(att.B))}"
    for link in att.L_act:
        h, a = link.get("harness"), link.get("agent")
        if h not in f_h or a not in z_a:
            return f"activated link {h}->{a} does not join a failed harness and a failed agent criterion"
    label, rule = run_label(cs.admitted, att.L_act, att.Z_H, att.Z_A, att.B)
    if (label, rule) != (att.label, att.label_rule):
        return f"stored label {att.label!r} (rule {att.label_rule}) but the sets give {label!r} (rule {rule})"
    return None


def _cell_stages(seal: SealCheck, result: ResultRecord | None, result_error: str | None, rec: RunRecord,
                 cs: CombinedScore | None) -> list[StageCheck]:
    out: list[StageCheck] = []

    def add(stage: StageName, ok: bool, yes: str, no: str) -> bool:
        after = not out or out[-1].reached
        held = ok and after
        reason = yes if held else (no if after else f"{out[-1].stage} not reached")
        out.append(StageCheck(stage=stage, reached=held, reason=reason))
        return held

    if seal.state not in ("sealed", "legacy"):
        no = f"seal {seal.state}: {seal.describe()}"
    elif result is None:
        no = result_error or "result.json missing"
    elif result.eligibility != "eligible":
        no = f"{result.eligibility}: {result.eligibility_reason or 'no reason recorded'}"
    elif result.status not in _RAN:
        no = f"the harness did not run (status {result.status})"
    else:
        no = ""
    add("executed", not no, f"ran to status {result.status if result else '?'} in a {seal.state} cell", no)
    add("apparatus_valid", rec.status == "measured", "admitted, sealed score",
        f"{rec.status}: {rec.reason or 'no reason recorded'}")
    measured_no = ""
    if rec.problems:
        measured_no = "inconsistent score: " + "; ".join(rec.problems)
    elif cs is None or cs.harness.n <= 0 or cs.agent.n <= 0:
        measured_no = "an empty verdict vector"
    elif result is not None and cs.identity != result.identity:
        measured_no = "the score's identity differs from result.json's"
    add("measured", not measured_no, f"S={cs.S:g} (S_H={cs.S_H:g}, S_A={cs.S_A:g})" if cs else "", measured_no)
    attr_no = (_attribution_problem(cs) or "") if cs is not None else "no score"
    add("attributable", not attr_no, f"label {cs.attribution.label} (rule {cs.attribution.label_rule})" if cs else "",
        attr_no)
    return out


@dataclass
class _Cell:
    """What the builder read of one cell (kept for the task stages)."""

    entry: RunEntry
    root: Path
    snapshot_error: str | None
    snapshot_root: Path | None


def _read_cell(archive: Literal["main", "calibration"], archive_root: Path, root: Path,
               snapshots: dict[str, dict[str, Any] | None]) -> tuple[_Cell, SealCheck]:
    rel = root.relative_to(archive_root).as_posix()
    task_dir, model_dir, harness_dir = root.parts[-3:]
    seal = check_seal(root)
    rec = read_run(archive_root, root, snapshots)
    result: ResultRecord | None = None
    result_error: str | None = None
    cs: CombinedScore | None = None
    if seal.state not in ("tampered", "unsealed", "incomplete"):
        try:
            result = ResultRecord.model_validate_json((root / "result.json").read_bytes())
        except FileNotFoundError:
            result_error = "result.json missing"
        except (OSError, ValidationError, ValueError) as exc:
            result_error = f"result.json unreadable: {_first_line(exc)}"
        if rec.combined:
            cs = CombinedScore.model_validate_json((root / COMBINED_SCORE).read_bytes())
    ident = result.identity if result is not None else (cs.identity if cs is not None else None)
    task_id = ident.task_id if ident else task_dir
    snap = root / "private" / "task" / task_id
    snapshot_digest: str | None = None
    snapshot_error: str | None = None
    if snap.is_dir() and not snap.is_symlink():
        snapshot_digest = pack_digest(snap)
    else:
        snapshot_error = f"no task snapshot private/task/{task_id}/"
    config = result.resolved_config if result is not None else {}
    digest = config.get("pack_digest")
    artifacts = {"result": "result.json", "events": "events.json", "summary": "summary.json", "manifest": MANIFEST,
                 "combined_score": COMBINED_SCORE, "snapshot": f"private/task/{task_id}/task.yaml"}
    score = None
    if cs is not None:
        score = RunScore(S_H=cs.S_H, S_A=cs.S_A, S=cs.S, effective_score=cs.effective_score,
                         p_H=cs.harness.p, n_H=cs.harness.n, unscored_H=cs.harness.unscored,
                         p_A=cs.agent.p, n_A=cs.agent.n, unscored_A=cs.agent.unscored, admitted=cs.admitted,
                         agent_success=cs.agent_success, combined_pass=cs.combined_pass, clean=cs.clean,
                         label=cs.attribution.label, label_rule=cs.attribution.label_rule, judge=cs.judge)
    files = _files(root, rel, seal) if seal.state in ("sealed", "legacy") else []
    entry = RunEntry(
        archive=archive, path=rel, repetition=repetition_of(root),
        role="calibration" if _is_calibration(harness_dir) else "evaluated",
        run_id=ident.run_id if ident else None, task_id=task_id,
        task_revision=ident.task_revision if ident else None,
        pack_digest=digest if isinstance(digest, str) else None, snapshot_digest=snapshot_digest,
        model=ident.model if ident else model_dir, harness=ident.harness if ident else harness_dir,
        harness_version=ident.harness_version if ident else None, protocol=ident.protocol if ident else None,
        seal=seal.state, run_status=result.status if result else None,
        eligibility=result.eligibility if result else None,
        eligibility_reason=result.eligibility_reason if result else None,
        report_status=rec.status, report_reason=rec.reason,
        resolved_config=config, resolved_config_sha256=_canonical_sha256(config) if result is not None else None,
        score=score, stages=_cell_stages(seal, result, result_error, rec, cs),
        artifacts={k: f"{rel}/{v}" for k, v in artifacts.items() if (root / v).is_file()},
        files=files)
    return _Cell(entry, root, snapshot_error, snap if snapshot_digest is not None else None), seal


def _split(values: Iterable[str] | None) -> list[str] | None:
    if values is None:
        return None
    out = sorted({v.strip() for v in values if v.strip()})
    return out or None


def _selected(root: Path, selection: Selection, *, calibration: bool) -> bool:
    task_dir, model_dir, harness_dir = root.parts[-3:]
    if selection.tasks is not None and task_dir not in {safe_component(t) for t in selection.tasks}:
        return False
    if calibration:
        return True
    if selection.models is not None and model_dir not in {safe_component(m) for m in selection.models}:
        return False
    if selection.harnesses is not None:
        wanted = {safe_component(h) for h in selection.harnesses}
        if harness_dir not in wanted and base_harness(harness_dir) not in wanted:
            return False
    return True


def _stage_task(task_id: str, evaluated: list[_Cell], calibration: list[_Cell],
                cal_root: Path) -> TaskEntry:
    stages: list[StageCheck] = []
    cells = evaluated + calibration
    # 1. authored
    pack: TaskPack | None = None
    revisions = sorted({c.entry.task_revision for c in cells if c.entry.task_revision is not None})
    digests = sorted({c.entry.pack_digest for c in cells if c.entry.pack_digest is not None})
    snap_digests = sorted({c.entry.snapshot_digest for c in cells if c.entry.snapshot_digest is not None})
    problems = [f"{c.entry.path}: {c.snapshot_error}" for c in cells if c.snapshot_error]
    problems += [f"{c.entry.path}: no pack_digest in result.json's resolved_config" for c in cells
                 if c.entry.pack_digest is None]
    if len(revisions) > 1:
        problems.append(f"the runs name different task revisions {revisions}")
    if len(digests) > 1:
        problems.append(f"the runs ran {len(digests)} different pack digests")
    if len(snap_digests) > 1:
        problems.append(f"the runs archived {len(snap_digests)} different task snapshots")
    source = next((c for c in evaluated + calibration if c.snapshot_root is not None), None)
    if source is not None and source.snapshot_root is not None:
        try:
            pack = load_task(source.snapshot_root)
        except TaskPackErrors as exc:
            problems.append(f"{source.entry.path}: the task snapshot does not load: {_first_line(exc)}")
        else:
            if pack.spec.id != task_id:
                problems.append(f"the snapshot's id is {pack.spec.id!r}")
            if revisions and pack.spec.revision not in revisions:
                problems.append(f"the snapshot is revision {pack.spec.revision}, the runs name {revisions}")
    revision = revisions[0] if len(revisions) == 1 else None
    digest = digests[0] if len(digests) == 1 else None
    stages.append(StageCheck(stage="authored", reached=not problems and pack is not None,
                             reason="; ".join(problems) if problems else
                             f"revision {revision}, pack {digest[:12] if digest else '?'}, snapshot loads"))
    # 2. audited
    audit_no = ""
    audited_ok = (0, 0)
    if pack is None:
        audit_no = "no loadable task snapshot to audit against"
    elif not calibration:
        audit_no = f"no calibration run ({CALIBRATION_HARNESS}, {CALIBRATION_HARNESS}+<defect>) of the task"
    else:
        other = sorted({c.entry.path for c in calibration if c.entry.pack_digest != digest})
        report = calibrate(cal_root, [pack], sorted(MUTANTS))
        bad = report.problems()
        if other:
            audit_no = f"calibration ran another pack digest: {', '.join(other[:3])}"
        elif bad:
            shown = "; ".join(f"{r.variant}: {r.status}" + (f" ({r.detail})" if r.detail else "") for r in bad[:3])
            audit_no = f"calibration: {len(bad)} problem(s): {shown}" + (" ..." if len(bad) > 3 else "")
        audited_ok = (len(report.rows), sum(1 for r in report.rows if r.status == "not_applicable"))
    stages.append(StageCheck(stage="audited", reached=not audit_no,
                             reason=audit_no or f"calibrated: {audited_ok[0]} cell(s), reference 100/100, every "
                                                f"mutant as declared ({audited_ok[1]} not applicable)"))
    # 3. cross-harness eligible
    eligible = [c for c in evaluated if c.entry.eligibility == "eligible"]
    names = sorted({base_harness(c.entry.harness) for c in eligible})
    others = sorted({f"{c.entry.harness}: {c.entry.eligibility}" for c in evaluated
                     if c.entry.eligibility != "eligible"})
    stages.append(StageCheck(stage="cross_harness_eligible", reached=len(names) >= 2,
                             reason=(f"eligible on {len(names)} harness(es): {', '.join(names) or 'none'}"
                                     + (f"; {'; '.join(others)}" if others else ""))))
    # 4-7. every eligible evaluated run holds the cell stage
    for i, stage in enumerate(CELL_STAGES):
        if not eligible:
            stages.append(StageCheck(stage=stage, reached=False, reason="no eligible evaluated run"))
            continue
        failing = [c for c in eligible if not c.entry.stages[i].reached]
        reason = (f"{len(eligible)} eligible run(s)" if not failing else
                  f"{len(failing)} of {len(eligible)} eligible run(s) not {stage}: "
                  + "; ".join(f"{c.entry.path}: {c.entry.stages[i].reason}" for c in failing[:3])
                  + (" ..." if len(failing) > 3 else ""))
        stages.append(StageCheck(stage=stage, reached=not failing, reason=reason))
    reached: StageName | None = None
    for s in stages:
        if not s.reached:
            break
        reached = s.stage
    return TaskEntry(task_id=task_id, revision=revision, pack_digest=digest,
                     component=pack.spec.component if pack else None, property=pack.spec.property if pack else None,
                     stage=reached, stages=stages, runs=[c.entry.path for c in evaluated],
                     calibration_runs=[c.entry.path for c in calibration])


def _archive_label(main: Path, other: Path) -> str:
    try:
        return Path(os.path.relpath(other.resolve(), main.resolve())).as_posix()
    except ValueError:  # another drive
        return str(other.resolve())


def build_release(output: Path, *, calibration: Path | None = None, tasks: Iterable[str] | None = None,
                  harnesses: Iterable[str] | None = None, models: Iterable[str] | None = None,
                  generated_at: str | None = None, only: Sequence[tuple[str, str]] | None = None) -> ReleaseManifest:
    """The release manifest of ``output``'s selected runs (pure: reads files, writes nothing).

    Args:
        output: a ``--tt-output`` folder (with ``traces/``).
        calibration: the archive holding the calibration runs (default: ``output`` itself).
        tasks, harnesses, models: select evaluated runs (``None``: all); a harness matches by
            its folder name or its name without ``@version``/``+variant``. Calibration runs are
            selected by ``tasks`` only.
        generated_at: stamped as given (the builder reads no clock).
        only: exactly these cells, as ``(archive, path)`` (what :func:`verify_release` re-derives).

    Raises:
        ReleaseError: nothing selected, or a selected cell is tampered, half-written or unsealed
            (each named); a release never pins a cell whose files do not match its seal.
    """
    output = Path(output)
    cal_root = Path(calibration) if calibration is not None else output
    if not (output / "traces").is_dir():
        raise ReleaseError(f"{output} has no traces/ folder (not a --tt-output archive)")
    if calibration is not None and not (cal_root / "traces").is_dir():
        raise ReleaseError(f"calibration archive {cal_root} has no traces/ folder")
    selection = Selection(tasks=_split(tasks), harnesses=_split(harnesses), models=_split(models))
    wanted = set(only) if only is not None else None
    separate = calibration is not None and cal_root.resolve() != output.resolve()
    snapshots: dict[str, dict[str, Any] | None] = {}
    cells: list[_Cell] = []
    bad: list[str] = []

    def take(archive: Literal["main", "calibration"], root: Path, base: Path) -> None:
        cell, seal = _read_cell(archive, base, root, snapshots)
        if seal.state in ("tampered", "incomplete", "unsealed"):
            where = root if archive == "calibration" and separate else root.relative_to(base)
            bad.append(f"{where.as_posix()}: {seal.state}: {seal.describe()}")
        cells.append(cell)

    for _rep, d in run_dirs(output):  # every repetition (--tt-repeat): the pass^k figures rest on them
        cal = _is_calibration(d.name)
        if cal and separate:
            continue  # calibration runs come from the calibration archive
        if (("main", d.relative_to(output).as_posix()) in wanted if wanted is not None
                else _selected(d, selection, calibration=cal)):
            take("main", d, output)
    task_ids = {c.entry.task_id for c in cells}
    if separate:
        for d in _cell_dirs(cal_root / "traces"):
            if not _is_calibration(d.name):
                continue
            if (("calibration", d.relative_to(cal_root).as_posix()) in wanted if wanted is not None
                    else _selected(d, selection, calibration=True)
                    and d.parts[-3] in {safe_component(t) for t in task_ids}):
                take("calibration", d, cal_root)
    if bad:
        raise ReleaseError(f"{len(bad)} selected cell(s) do not match their seal: " + "; ".join(bad))
    if not cells:
        raise ReleaseError(f"no cell of {output} matches the selection")
    cells.sort(key=lambda c: (c.entry.archive, c.entry.path))
    by_task: dict[str, tuple[list[_Cell], list[_Cell]]] = {}
    for c in cells:
        ev, cal_cells = by_task.setdefault(c.entry.task_id, ([], []))
        (cal_cells if c.entry.role == "calibration" else ev).append(c)
    task_entries = [_stage_task(t, ev, cal_cells, cal_root) for t, (ev, cal_cells) in sorted(by_task.items())]
    counts: dict[str, int] = {
        "runs": len(cells), "evaluated": sum(1 for c in cells if c.entry.role == "evaluated"),
        "calibration": sum(1 for c in cells if c.entry.role == "calibration"),
        "files": sum(len(c.entry.files) for c in cells), "tasks": len(task_entries),
    }
    for stage in STAGES:
        counts[f"tasks_{stage}"] = sum(1 for t in task_entries if t.stage == stage)
    counts["tasks_not_authored"] = sum(1 for t in task_entries if t.stage is None)
    archives = {"main": "."}
    if separate:
        archives["calibration"] = _archive_label(output, cal_root)
    return ReleaseManifest(generated_at=generated_at, tracetrial_version=tracetrial.__version__, archives=archives,
                           selection=selection, counts=counts, tasks=task_entries, runs=[c.entry for c in cells])


def release_text(manifest: ReleaseManifest) -> str:
    """The manifest as written (the bytes whose SHA-256 a publication quotes)."""
    return manifest.model_dump_json(indent=1, by_alias=True) + "\n"


def write_release(manifest: ReleaseManifest, path: Path, output: Path) -> str:
    """Write the manifest atomically; return its SHA-256.

    Raises:
        ReleaseError: ``path`` is inside ``output/traces/`` or ``output/repeats/`` (sealed cells' trees).
    """
    target = Path(path).resolve()
    for tree in ("traces", REPEATS_DIR):
        cells = (Path(output) / tree).resolve()
        if target == cells or cells in target.parents:
            raise ReleaseError(f"{path} is inside {output}/{tree}/: a release manifest is never written into the "
                               "archive's cells (default: OUTPUT/release/manifest.json)")
    text = release_text(manifest)
    atomic_write_text(Path(path), text)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# -------------------------------------------------------------------------------------- verify


@dataclass(frozen=True)
class ReleaseProblem:
    """One difference between the release manifest and the archive (``path`` as shown)."""

    path: str
    issue: str

    def __str__(self) -> str:
        return f"{self.path}: {self.issue}"


@dataclass(frozen=True)
class ReleaseCheck:
    """:func:`verify_release`'s answer."""

    manifest: ReleaseManifest | None
    problems: tuple[ReleaseProblem, ...]
    files: int = 0

    @property
    def ok(self) -> bool:
        return self.manifest is not None and not self.problems


def _diff(stored: Any, derived: Any, where: str = "") -> list[tuple[str, Any, Any]]:
    """``(dotted path, stored, derived)`` wherever two JSON values differ."""
    if isinstance(stored, dict) and isinstance(derived, dict):
        out: list[tuple[str, Any, Any]] = []
        for k in sorted(stored.keys() | derived.keys()):
            out += _diff(stored.get(k), derived.get(k), f"{where}.{k}" if where else str(k))
        return out
    if isinstance(stored, list) and isinstance(derived, list) and len(stored) == len(derived):
        return [d for i, (a, b) in enumerate(zip(stored, derived, strict=True)) for d in _diff(a, b, f"{where}[{i}]")]
    return [] if stored == derived else [(where or "(root)", stored, derived)]


def _describe_diff(diffs: list[tuple[str, Any, Any]]) -> str:
    def short(v: Any) -> str:
        text = json.dumps(v, ensure_ascii=False)
        return text if len(text) <= 60 else text[:57] + "..."

    shown = "; ".join(f"{p}: manifest {short(a)}, archive {short(b)}" for p, a, b in diffs[:3])
    return f"the release manifest differs from what the archive gives ({shown}" + (
        f"; and {len(diffs) - 3} more)" if len(diffs) > 3 else ")")


def verify_release(path: Path, output: Path, *, calibration: Path | None = None) -> ReleaseCheck:
    """Check a release manifest against the archive: every listed file re-hashed (changed or
    missing named), every listed cell's seal re-checked (a tampered cell flagged, e.g. a file
    added to it), then the manifest's fields re-derived from the archive (a hand-edited score,
    stage or config in the manifest named). Pure over the files.

    ``calibration`` overrides where the calibration archive is (default: as the manifest says,
    relative to ``output``).
    """
    output = Path(output)
    try:
        manifest = ReleaseManifest.model_validate_json(Path(path).read_bytes())
    except FileNotFoundError:
        return ReleaseCheck(None, (ReleaseProblem(str(path), "no release manifest (run: tracetrial release OUTPUT)"),))
    except (OSError, ValidationError, ValueError) as exc:
        return ReleaseCheck(None, (ReleaseProblem(str(path), f"unreadable release manifest: {_first_line(exc)}"),))
    roots: dict[str, Path] = {"main": output}
    if "calibration" in manifest.archives:
        roots["calibration"] = (Path(calibration) if calibration is not None
                                else Path(os.path.normpath(output / manifest.archives["calibration"])))
    problems: list[ReleaseProblem] = []

    def shown(archive: str, rel: str) -> str:
        return rel if archive == "main" else (roots[archive] / rel).as_posix()

    files = 0
    for run in manifest.runs:
        root = roots.get(run.archive)
        if root is None:
            problems.append(ReleaseProblem(run.path, f"names archive {run.archive!r}, which the manifest does not list"))
            continue
        for entry in run.files:
            files += 1
            p = root / entry.path
            if p.is_symlink() or not p.is_file():
                problems.append(ReleaseProblem(shown(run.archive, entry.path), "listed in the release but missing"))
            elif p.stat().st_size != entry.size or sha256_file(p) != entry.sha256:
                problems.append(ReleaseProblem(shown(run.archive, entry.path),
                                               "content changed since the release (sha256 mismatch)"))
        cell = root / run.path
        if not cell.is_dir():
            problems.append(ReleaseProblem(shown(run.archive, run.path), "the run's folder is missing"))
            continue
        seal = check_seal(cell)
        if seal.state != run.seal:
            problems.append(ReleaseProblem(shown(run.archive, run.path),
                                           f"cell {seal.state} (released {run.seal}): {seal.describe(3)}"))
    if not problems:
        try:
            derived = build_release(output, calibration=roots.get("calibration"),
                                    tasks=manifest.selection.tasks, harnesses=manifest.selection.harnesses,
                                    models=manifest.selection.models, generated_at=manifest.generated_at,
                                    only=[(r.archive, r.path) for r in manifest.runs])
        except ReleaseError as exc:
            problems.append(ReleaseProblem(str(path), f"cannot re-derive: {exc}"))
        else:
            stored_runs = {(r.archive, r.path): r.model_dump(mode="json") for r in manifest.runs}
            for r in derived.runs:
                key = (r.archive, r.path)
                diffs = _diff(stored_runs.get(key), r.model_dump(mode="json"))
                if diffs:
                    problems.append(ReleaseProblem(shown(r.archive, r.path), _describe_diff(diffs)))
            stored_tasks = {t.task_id: t.model_dump(mode="json") for t in manifest.tasks}
            derived_tasks = {t.task_id: t.model_dump(mode="json") for t in derived.tasks}
            for task_id in sorted(stored_tasks.keys() | derived_tasks.keys()):
                diffs = _diff(stored_tasks.get(task_id), derived_tasks.get(task_id))
                if diffs:
                    problems.append(ReleaseProblem(f"task {task_id}", _describe_diff(diffs)))
            # (tracetrial_version may differ: a newer TraceTrial verifies an older release)
            for name, stored, got in (("counts", manifest.counts, derived.counts),
                                      ("archives", manifest.archives, derived.archives)):
                diffs = _diff(stored, got, name)
                if diffs:
                    problems.append(ReleaseProblem(str(path), _describe_diff(diffs)))
    return ReleaseCheck(manifest, tuple(problems), files)
