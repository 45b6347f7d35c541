"""One cell of the archive as the reports see it, and the archive reader.

:func:`load_runs` walks ``<output>/traces/<task>/<model>/<harness>/`` and reads
each cell's ``artifacts/llm_judge/combined_score.json`` (authoritative scores),
``summary.json`` (token usage) and ``result.json`` (identity, status, reasons).
Every cell folder yields exactly one :class:`RunRecord`: a cell without a
readable combined score is kept as ``not_scored`` with the reason taken from
``result.json``, never dropped.

Repetitions (``--tt-repeat K``): ``<output>/traces/`` holds repetition 1 and
``<output>/repeats/rep-<i>/traces/`` repetition ``i`` (each a complete output that every
archive reader accepts on its own); :func:`load_runs` reads them all, and each
:class:`RunRecord` carries its ``repetition``.

Each cell's seal is verified first (:func:`tracetrial.archive.check_seal`): a cell whose
files do not match its manifest (a changed or unlisted file, the score included) is
``tampered``, named with the first mismatching file, and none of its numbers are read; a
half-written one (files the manifest lists are missing) and a legacy one (sealed before
the manifest covered the score) are ``not_scored`` with that reason.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from reports.schema import CellStatus
from tracetrial.archive import check_seal, repetition_roots
from tracetrial.files import load_yaml
from tracetrial.results import CombinedScore, ResultRecord, Summary
from tracetrial.taxonomy import COMPONENTS
from tracetrial.trace import TokenUsage


#: The calibration instrument: the faithful reference harness and its mutants (``reference+<defect>``).
CALIBRATION_HARNESS = "reference"


def harness_family(harness: str) -> str:
    """``claude_code@2.1.332`` -> ``claude_code``; ``reference+hide_exit_code`` -> ``reference``."""
    return harness.split("@", 1)[0].split("+", 1)[0]


def is_calibration(harness: str) -> bool:
    """Whether ``harness`` is the calibration instrument (``reference``, a mutant, any version of them):
    its runs audit the tasks and are kept out of the corpus pools unless asked."""
    return harness_family(harness) == CALIBRATION_HARNESS


@dataclass(frozen=True, slots=True)
class RunRecord:
    """Everything the aggregation needs about one cell (in memory only).

    Score fields are meaningful only when ``combined`` is True (a readable
    ``combined_score.json`` exists). ``p``/``n``/``u`` are the stored layer counts
    (core criteria only); ``agent_success`` and ``clean`` are the stored flags
    (so a hard-gated run is not a success). A layer is *failing* when ``p < n``:
    the raw failed set (``F_H`` / ``Z_A``) is non-empty or a criterion is
    unscored — unscored is never a pass.
    """

    task_id: str
    model: str
    harness: str
    component: str
    task_property: str | None
    protocol: str | None
    rel_path: str
    status: CellStatus
    reason: str | None = None
    combined: bool = False
    admitted: bool = False
    p_H: int = 0
    n_H: int = 0
    p_A: int = 0
    n_A: int = 0
    u_H: int = 0
    u_A: int = 0
    unscored_H: tuple[str, ...] = ()
    unscored_A: tuple[str, ...] = ()
    S_H: float | None = None
    S_A: float | None = None
    S: float | None = None
    effective_score: float | None = None
    label: str | None = None
    F_H: tuple[str, ...] = ()
    Z_A: tuple[str, ...] = ()
    B: tuple[str, ...] = ()
    Z_H: tuple[str, ...] = ()
    agent_success: bool = False
    clean: bool = False
    #: The stored ``combined_pass``: S = 100 after hard gates.
    combined_pass: bool = False
    links: int = 0
    linked_agent_failures: int = 0
    unlinked_agent_failures: int = 0
    judge: str | None = None
    usage: TokenUsage | None = None
    problems: tuple[str, ...] = field(default=())
    #: The native version that ran (``result.json``'s ``harness_version``), if recorded.
    harness_version: str | None = None
    #: Every criterion's final state, ``(id, layer, "pass" | "fail" | "unscored")``, in the
    #: score's order (read for the version diff; empty when no score was read).
    verdicts: tuple[tuple[str, str, str], ...] = ()
    #: Diagnostic criteria (never in a score) that failed, and those left unscored.
    diagnostic_failed: tuple[str, ...] = ()
    diagnostic_unscored: tuple[str, ...] = ()
    #: Which repetition of the cell this run is (1 unless the session ran ``--tt-repeat``).
    repetition: int = 1

    @property
    def measured(self) -> bool:
        return self.status == "measured"

    @property
    def calibration(self) -> bool:
        """A run of the calibration instrument (``reference`` or a mutant), see :func:`is_calibration`."""
        return is_calibration(self.harness)

    @property
    def cell_key(self) -> tuple[str, str, str]:
        """``(task, model, harness)``: the cell this run repeats."""
        return (self.task_id, self.model, self.harness)

    @property
    def harness_not_passed(self) -> tuple[str, ...]:
        return _union(self.F_H, self.unscored_H)

    @property
    def agent_not_passed(self) -> tuple[str, ...]:
        return _union(self.Z_A, self.unscored_A)

    @property
    def harness_failing(self) -> bool:
        """At least one core harness criterion did not pass (raw ``F_H ≠ ∅`` or an unscored one)."""
        return not (self.n_H > 0 and self.p_H == self.n_H)

    @property
    def agent_failing(self) -> bool:
        """At least one core agent criterion did not pass (raw ``Z_A ≠ ∅`` or an unscored one)."""
        return not (self.n_A > 0 and self.p_A == self.n_A)

    @property
    def gated(self) -> bool:
        """A hard gate lowered the effective score below ``S``."""
        return (self.S is not None and self.effective_score is not None
                and self.effective_score < self.S - 1e-9)


def _union(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    if not b:
        return a
    seen = dict.fromkeys(a)
    seen.update(dict.fromkeys(b))
    return tuple(seen)


def _component(task_id: str, snapshot: dict[str, Any] | None) -> str:
    letter = task_id[:1]
    if letter in COMPONENTS:
        return letter
    comp = (snapshot or {}).get("component")
    return comp if isinstance(comp, str) and comp in COMPONENTS else "?"


def _read_snapshot(run_dir: Path, task_id: str) -> dict[str, Any] | None:
    path = run_dir / "private" / "task" / task_id / "task.yaml"
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    return data if isinstance(data, dict) else None


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _not_scored_reason(result: ResultRecord | None, result_error: str | None, score_error: str) -> str:
    if result is None:
        return f"{score_error}; {result_error or 'result.json missing'}"
    parts = [f"{score_error}; run status {result.status}"]
    if result.exception is not None:
        exc = result.exception
        msg = exc.message.strip().splitlines()[0] if exc.message.strip() else ""
        parts.append(f"{exc.origin} error {exc.type}" + (f": {msg}" if msg else ""))
    return "; ".join(parts)


def _check(cs: CombinedScore) -> list[str]:
    """Cheap consistency checks of one combined score (reported, never 'fixed')."""
    out: list[str] = []
    if cs.agent_success and not (cs.agent.n > 0 and cs.agent.p == cs.agent.n):
        out.append(f"agent_success is true but p_A={cs.agent.p} < n_A={cs.agent.n}")
    for name, layer in (("harness", cs.harness), ("agent", cs.agent)):
        if layer.n <= 0:
            out.append(f"empty {name} verdict vector (n=0)")
        elif not math.isclose(layer.score, 50 * layer.p / layer.n, abs_tol=1e-6):
            out.append(f"{name} score {layer.score} != 50*p/n = {50 * layer.p / layer.n:.4f}")
        if layer.p + layer.unscored > layer.n:
            out.append(f"{name} p + unscored > n ({layer.p}+{layer.unscored}>{layer.n})")
        verdicts = [v for v in cs.verdicts if v.layer == name and v.role == "core"]
        if verdicts:
            passed = sum(1 for v in verdicts if v.passed is True)
            unscored = sum(1 for v in verdicts if v.passed is None)
            if (passed, len(verdicts), unscored) != (layer.p, layer.n, layer.unscored):
                out.append(f"{name} LayerScore (p={layer.p}, n={layer.n}, unscored={layer.unscored}) "
                           f"disagrees with the core verdicts (p={passed}, n={len(verdicts)}, unscored={unscored})")
    if not math.isclose(cs.S, cs.S_H + cs.S_A, abs_tol=1e-6):
        out.append(f"S {cs.S} != S_H + S_A")
    f_h, z_a = set(cs.attribution.F_H), set(cs.attribution.Z_A)
    for link in cs.attribution.L_act:
        h, a = link.get("harness", link.get("h")), link.get("agent", link.get("a"))
        if (h is not None and h not in f_h) or (a is not None and a not in z_a):
            out.append(f"activated link {h}->{a} does not join a failed harness and a failed agent criterion")
    return out


def read_run(output: Path, run_dir: Path, snapshots: dict[str, dict[str, Any] | None], *,
             repetition: int = 1) -> RunRecord:
    """Build the :class:`RunRecord` of one cell folder (``snapshots`` caches task.yaml per task;
    ``rel_path`` is relative to ``output``, which may be a parent of the repetition's root)."""
    rel = run_dir.relative_to(output).as_posix()
    task_dir, model_dir, harness_dir = run_dir.parts[-3:]
    seal = check_seal(run_dir)
    if seal.state == "tampered":
        # Nothing inside the cell is trusted (a forged score is as consistent as a real one):
        # the folder names identify it, and none of its numbers are read or pooled.
        return RunRecord(task_id=task_dir, model=model_dir, harness=harness_dir,
                         component=_component(task_dir, None), task_property=None, protocol=None, rel_path=rel,
                         status="tampered", reason=f"tampered: {seal.describe()}", repetition=repetition)

    result: ResultRecord | None = None
    result_error: str | None = None
    try:
        result = ResultRecord.model_validate_json((run_dir / "result.json").read_bytes())
    except FileNotFoundError:
        result_error = "result.json missing"
    except (OSError, ValidationError, ValueError) as exc:
        result_error = f"result.json unreadable: {_first_line(exc)}"

    cs: CombinedScore | None = None
    score_error = ""
    try:
        cs = CombinedScore.model_validate_json(
            (run_dir / "artifacts" / "llm_judge" / "combined_score.json").read_bytes())
    except FileNotFoundError:
        score_error = "no combined_score.json"
    except (OSError, ValidationError, ValueError) as exc:
        score_error = f"combined_score.json unreadable: {_first_line(exc)}"

    identity = cs.identity if cs is not None else (result.identity if result is not None else None)
    task_id = identity.task_id if identity else task_dir
    model = identity.model if identity else model_dir
    harness = identity.harness if identity else harness_dir
    protocol = identity.protocol if identity else None
    if task_id not in snapshots:
        snapshots[task_id] = _read_snapshot(run_dir, task_id)
    snap = snapshots[task_id]
    prop = snap.get("property") if snap else None
    base: dict[str, Any] = {
        "task_id": task_id, "model": model, "harness": harness, "component": _component(task_id, snap),
        "task_property": prop if isinstance(prop, str) else None, "protocol": protocol, "rel_path": rel,
        "harness_version": identity.harness_version if identity else None, "repetition": repetition,
    }
    problems: list[str] = []
    if result_error and cs is not None:
        problems.append(result_error)

    usage: TokenUsage | None = None
    try:
        usage = Summary.model_validate_json((run_dir / "summary.json").read_bytes()).usage
    except FileNotFoundError:
        pass
    except (OSError, ValidationError, ValueError) as exc:
        problems.append(f"summary.json unreadable (usage unavailable): {_first_line(exc)}")

    if seal.state == "incomplete":
        return RunRecord(**base, status="not_scored", reason=f"half-written archive: {seal.describe()}",
                         usage=usage, problems=tuple(problems))
    if seal.state == "legacy" and cs is not None:
        return RunRecord(**base, status="not_scored", reason=f"score not sealed: {seal.describe()}",
                         usage=usage, problems=tuple(problems))

    if result is not None and result.eligibility != "eligible":
        status: CellStatus = result.eligibility
        return RunRecord(**base, status=status, reason=result.eligibility_reason or result.eligibility,
                         problems=tuple(problems))
    if cs is None:
        return RunRecord(**base, status="not_scored",
                         reason=_not_scored_reason(result, result_error, score_error),
                         usage=usage, problems=tuple(problems))

    problems.extend(_check(cs))
    if identity and (task_id, model, harness) != (task_dir, model_dir, harness_dir):
        # Folder names are safe_component() of the identity; only flag real disagreements.
        from tracetrial.archive import safe_component
        if (safe_component(task_id), safe_component(model), safe_component(harness)) != (task_dir, model_dir, harness_dir):
            problems.append(f"identity {task_id}/{model}/{harness} does not match the folder {rel}")
    att = cs.attribution
    reason = None
    status = "measured"
    if not cs.admitted:
        status = "apparatus_invalid"
        failed = [d.check + (f" ({d.reason})" if d.reason else "") for d in cs.admission if not d.ok]
        reason = "not admitted: " + ("; ".join(failed) if failed else "admission failed")
    return RunRecord(
        **base, status=status, reason=reason, combined=True, admitted=cs.admitted,
        p_H=cs.harness.p, n_H=cs.harness.n, p_A=cs.agent.p, n_A=cs.agent.n,
        u_H=cs.harness.unscored, u_A=cs.agent.unscored,
        unscored_H=tuple(v.id for v in cs.verdicts if v.layer == "harness" and v.role == "core" and v.passed is None),
        unscored_A=tuple(v.id for v in cs.verdicts if v.layer == "agent" and v.role == "core" and v.passed is None),
        agent_success=cs.agent_success, clean=cs.clean, combined_pass=cs.combined_pass,
        S_H=cs.S_H, S_A=cs.S_A, S=cs.S, effective_score=cs.effective_score, label=att.label,
        F_H=tuple(att.F_H), Z_A=tuple(att.Z_A), B=tuple(att.B), Z_H=tuple(att.Z_H),
        links=len(att.L_act), linked_agent_failures=len(att.linked_agent_failures),
        unlinked_agent_failures=len(att.unlinked_agent_failures), judge=cs.judge,
        usage=usage, problems=tuple(problems),
        verdicts=tuple((v.id, v.layer, "unscored" if v.passed is None else ("pass" if v.passed else "fail"))
                       for v in cs.verdicts),
        diagnostic_failed=tuple(v.id for v in cs.verdicts if v.role == "diagnostic" and v.passed is False),
        diagnostic_unscored=tuple(v.id for v in cs.verdicts if v.role == "diagnostic" and v.passed is None),
    )


def _cell_dirs(traces: Path) -> list[Path]:
    """Exactly the depth-3 folders ``<task>/<model>/<harness>`` (nested result.json files of
    tools or simulators deeper in a run folder are not runs)."""
    out: list[Path] = []
    for level1 in sorted(os.scandir(traces), key=lambda e: e.name):
        if not level1.is_dir():
            continue
        for level2 in sorted(os.scandir(level1.path), key=lambda e: e.name):
            if not level2.is_dir():
                continue
            for level3 in sorted(os.scandir(level2.path), key=lambda e: e.name):
                if level3.is_dir():
                    out.append(Path(level3.path))
    return out


def run_dirs(output: Path) -> list[tuple[int, Path]]:
    """``(repetition, cell folder)`` of every cell of every repetition under ``output``: repetition 1
    first, each repetition's cells sorted by path."""
    return [(rep, d) for rep, root in repetition_roots(output) for d in _cell_dirs(root / "traces")]


def load_runs(output: Path) -> list[RunRecord]:
    """Read every cell of ``<output>/traces`` (and of each repetition under ``<output>/repeats/``)
    into a :class:`RunRecord` (repetition 1 first, each sorted by path).

    Returns an empty list when there is no ``traces/`` folder.
    """
    output = Path(output)
    snapshots: dict[str, dict[str, Any] | None] = {}
    return [read_run(output, d, snapshots, repetition=rep) for rep, d in run_dirs(output)]
