"""Apparatus admission and hard gates (SPEC §9). Every decision carries its reason.

Admission (a failed check → ``apparatus_invalid``; nothing is scored):
identity agreement (result.json, events.json, summary, manifest, gateway and
probe records, the task given, the run's task snapshot, the directory layout),
eligibility, lifecycle records, manifest coverage and hashes, trace validity,
structured-trace status, provider-boundary and probe records, the frozen
baseline, and whether ledger integrity can be established at all.

Hard gates (the run stays admitted, the effective score becomes 0): a
simulator ledger that fails its integrity check, and a complete trace proving
more ``tool`` events than ``budgets.max_tool_calls`` that no gate blocked.
Over-cap simulator requests were refused before touching state; they are
recorded as budget violations and not zeroed a second time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from criteria.rundata import LEDGER_DIR, TASK_SNAPSHOT_DIR, RunData, read_json_file
from tracetrial.archive import SCORABLE, Manifest, SealCheck, check_seal, safe_component
from tracetrial.errors import ArchiveError
from tracetrial.results import WALL_CLOCK_BEFORE_TURN, AdmissionDecision, CellIdentity
from tracetrial.task import TaskPack
from tracetrial.trace import PolicyEvent, RunStartedEvent, ToolEvent

LedgerVerifier = Callable[[Path], Any]
#: Files whose bytes must agree between the task given to scoring and the run's snapshot.
TASK_FILES = ("task.yaml", "verifier/harness_score.yaml", "verifier/agent_score.yaml",
              "verifier/score.py", "truth.json", "oracle.json")
REQUIRED_COVERED = ("result.json", "events.json", "summary.json")
_BLOCKING = frozenset({"deny", "denied", "block", "blocked", "refuse", "refused", "reject", "rejected"})


@dataclass
class AdmissionResult:
    identity: CellIdentity
    decisions: list[AdmissionDecision] = field(default_factory=list)
    hard_gates: list[AdmissionDecision] = field(default_factory=list)

    @property
    def admitted(self) -> bool:
        return all(d.ok for d in self.decisions)

    def add(self, check: str, problems: list[str], ok_reason: str) -> None:
        self.decisions.append(AdmissionDecision(check=check, ok=not problems,
                                                reason="; ".join(problems) if problems else ok_reason))


def fallback_identity(task: TaskPack, run: RunData) -> CellIdentity:
    """An identity for a run whose result.json is unusable (labelled as reconstructed)."""
    run_id = run.events[0].run_id if run.events else (run.summary.run_id if run.summary else "unknown")
    return CellIdentity(run_id=run_id, task_id=task.id, task_revision=task.spec.revision,
                        harness=run.root.name, model=run.root.parent.name, protocol="probe")


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _identity_problems(task: TaskPack, run: RunData, ident: CellIdentity) -> list[str]:
    out: list[str] = []

    def differ(what: str, got: Any, want: Any) -> None:
        if got is not None and got != want:
            out.append(f"{what} is {got!r}, result.json says {want!r}")

    if run.events:
        differ("events.json run_id", run.events[0].run_id, ident.run_id)
        first = run.events[0]
        if isinstance(first, RunStartedEvent):
            for name in ("task_id", "harness", "model"):
                differ(f"run_started.{name}", getattr(first, name), getattr(ident, name))
    if run.summary is not None:
        differ("summary.json run_id", run.summary.run_id, ident.run_id)
    manifest, _ = read_json_file(run.root, "manifest.json")
    if isinstance(manifest, dict):
        differ("manifest.json run_id", manifest.get("run_id"), ident.run_id)
    bad = sorted({str(r.get("run_id")) for r in run.gateway or [] if r.get("run_id") not in (None, ident.run_id)})
    if bad:
        out.append(f"gateway records belong to other run(s) {bad[:3]}")
    if run.probe is not None:
        differ("probe.json run_id", run.probe.get("run_id"), ident.run_id)
        differ("probe.json task_id", run.probe.get("task_id"), ident.task_id)
    config = run.result.resolved_config if run.result is not None else {}
    for name in ("run_id", "task_id", "harness", "model", "protocol"):
        if isinstance(config.get(name), str):
            differ(f"resolved_config.{name}", config[name], getattr(ident, name))
    differ("the task being scored", task.id, ident.task_id)
    differ("the task's revision", task.spec.revision, ident.task_revision)
    snapshot = run.root / TASK_SNAPSHOT_DIR / ident.task_id
    if not snapshot.is_dir():
        out.append(f"task snapshot {TASK_SNAPSHOT_DIR}/{ident.task_id}/ is missing")
    elif snapshot.resolve() != Path(task.root).resolve():
        changed = [f for f in TASK_FILES if _digest(snapshot / f) != _digest(Path(task.root) / f)]
        if changed:
            out.append(f"the task pack differs from the run's snapshot in {', '.join(changed)}")
    if run.root.parent.parent.parent.name == "traces":
        try:
            expected = (safe_component(ident.task_id), safe_component(ident.model), safe_component(ident.harness))
        except ArchiveError as exc:
            out.append(str(exc))
        else:
            actual = (run.root.parent.parent.name, run.root.parent.name, run.root.name)
            if actual != expected:
                out.append(f"run directory {'/'.join(actual)} does not match identity {'/'.join(expected)}")
    return out


def _lifecycle_problems(run: RunData) -> list[str]:
    out = []
    if run.result is not None:
        if run.result.status in ("apparatus_error", "skipped"):
            out.append(f"result status is {run.result.status!r}")
        exc = run.result.exception
        if exc is not None and exc.origin == "apparatus":
            out.append(f"apparatus exception {exc.type}: {exc.message[:200]}")
    if run.events is not None:
        types = {getattr(e, "event_type", "") for e in run.events}
        if "run_started" not in types:
            out.append("events.json has no run_started record")
        if not types & {"run_finished", "run_failed"}:
            out.append("events.json has neither run_finished nor run_failed (lifecycle incomplete)")
    if run.probe is not None and run.probe.get("apparatus_errors"):
        out.append(f"probe apparatus errors: {'; '.join(map(str, run.probe['apparatus_errors']))[:300]}")
    return out


def _manifest_problems(run: RunData, seal: SealCheck | None = None) -> list[str]:
    check = seal if seal is not None else check_seal(run.root)
    # A legacy (tt-manifest/1) seal verifies the run's files; only its old score was never
    # sealed, and scoring is replacing that score now.
    problems = [] if check.state in SCORABLE else [str(p) for p in check.problems]
    out = problems[:10]
    if len(problems) > 10:
        out.append(f"... and {len(problems) - 10} more")
    raw, _ = read_json_file(run.root, "manifest.json")
    if raw is not None:
        try:
            listed = {e.path for e in Manifest.model_validate(raw).files}
        except ValueError:
            listed = set()
        out += [f"{rel} is not covered by the manifest" for rel in REQUIRED_COVERED if rel not in listed]
    return out


def _trace_status_problems(run: RunData) -> list[str]:
    if run.summary is None:
        return [f"summary.json unusable: {run.summary_error}"]
    status = run.summary.structured_trace_status
    if status in ("unavailable", "integrity_failure"):
        return [f"structured trace status is {status!r}: evidence cannot be established"]
    return []


def _start_problems(run: RunData) -> list[str]:
    """A run that timed out before its harness sent a single model request measured no duty of
    the harness: nothing it did reached the provider boundary, so every criterion would fail for
    a start-up that did not finish in the wall clock — on a loaded host the usual cause. Such a
    run is not measured (a harness that truly hangs at start-up shows the same way, named here,
    never as a verdict on the duties the task grades)."""
    if run.result is None or run.result.status != "timed_out" or run.gateway is None or run.gateway:
        return []
    wall = run.summary.wall_seconds if run.summary is not None else None
    spent = f" after {wall:.0f} s" if isinstance(wall, (int, float)) else ""
    return [f"timed out{spent} before the harness sent any model request: its start-up never reached the "
            "model, so no duty was measured (on a loaded host raise wall_clock_s or re-run with --tt-rerun)"]


def _unrun_turn_problems(run: RunData) -> list[str]:
    """A run whose wall clock ran out *between* turns (every turn that ran exited normally; the
    runner never started the next scripted turn) measured none of the later turns' duties: their
    criteria would fail for turns the harness was never given. Not measured, with the reason —
    a harness that hangs *inside* a turn is a timed-out turn instead, and that is measured."""
    failure = run.result.failure if run.result is not None else None
    if failure is None or failure.type != WALL_CLOCK_BEFORE_TURN:
        return []
    return [f"{failure.message}: the later scripted turns never ran, so their duties were not measured "
            "(on a loaded host raise wall_clock_s or re-run with --tt-rerun)"]


def _default_ledger_verifier() -> tuple[LedgerVerifier | None, str | None]:
    try:
        from apparatus.simulators.ledger import verify_ledger
    except ImportError as exc:  # the simulator package is optional for the criteria engine
        return None, f"apparatus.simulators.ledger is unavailable ({exc})"
    return verify_ledger, None


def _ledger_problems(result: Any) -> list[str]:
    """Problems from a verifier result: a LedgerCheck-like object, dict, bool or list."""
    if result is None or result is True:
        return []
    if result is False:
        return ["ledger verification failed"]
    if isinstance(result, (list, tuple)):
        return [str(p) for p in result]
    ok = result.get("ok") if isinstance(result, dict) else getattr(result, "ok", None)
    problems = result.get("problems") if isinstance(result, dict) else getattr(result, "problems", None)
    if problems:
        return [str(p) for p in problems]
    return [] if ok is True else ["ledger verification failed"]


def _ledgers(task: TaskPack, run: RunData, result: AdmissionResult,
             verifier: LedgerVerifier | None, verifier_missing: str | None) -> None:
    folder = run.root / LEDGER_DIR
    names = {s.name for s in task.spec.simulators}
    if folder.is_dir() and not folder.is_symlink():
        names |= {p.stem for p in folder.glob("*.jsonl")}
    if not names:
        return
    cannot, integrity = [], []
    for name in sorted(names):
        path = folder / f"{name}.jsonl"
        if not path.exists() and not path.with_name(path.name + ".head").exists():
            cannot.append(f"ledger {name!r} and its head are missing")
            continue
        if verifier is None:
            cannot.append(f"ledger {name!r} cannot be verified: {verifier_missing}")
            continue
        try:
            problems = _ledger_problems(verifier(path))
        except Exception as exc:  # noqa: BLE001 - a verifier crash is the apparatus's failure, not the harness's
            cannot.append(f"ledger {name!r}: verifier raised {type(exc).__name__}: {exc}")
            continue
        integrity += [f"{name}: {p}" for p in problems[:5]]
    result.add("ledger_integrity_established", cannot, f"{len(names)} ledger(s) verifiable")
    ok = not integrity
    result.hard_gates.append(AdmissionDecision(
        check="simulator_integrity", ok=ok,
        reason=f"{len(names)} ledger(s) pass their integrity check" if ok
        else "simulator integrity failure -> effective score 0: " + "; ".join(integrity)))
    refused = sum(1 for recs in run.ledgers.values() for r in recs if r.get("kind") == "refused")
    if refused:
        result.hard_gates.append(AdmissionDecision(
            check="simulator_request_cap", ok=True,
            reason=f"{refused} over-cap request(s) refused before touching state: recorded as budget "
                   "violations, not zeroed again"))


def _tool_cap(task: TaskPack, run: RunData) -> AdmissionDecision:
    cap = task.spec.budgets.max_tool_calls
    summary = run.summary
    if run.events is None or summary is None or not summary.trace_complete \
            or summary.structured_trace_status != "complete":
        return AdmissionDecision(check="tool_call_cap", ok=True,
                                 reason=f"cap {cap} not proven exceeded: the trace is not complete")
    blocked = {e.tool_call_id for e in run.events if isinstance(e, PolicyEvent) and e.tool_call_id
               and e.decision.lower() in _BLOCKING and "budget" in f"{e.policy_kind} {e.reason_code}".lower()}
    calls = [e for e in run.events if isinstance(e, ToolEvent) and e.tool_call.id not in blocked]
    if len(calls) > cap:
        return AdmissionDecision(check="tool_call_cap", ok=False,
                                 reason=f"{len(calls)} tool calls on a complete trace exceed "
                                        f"budgets.max_tool_calls={cap} (none blocked) -> effective score 0")
    return AdmissionDecision(check="tool_call_cap", ok=True, reason=f"{len(calls)} tool call(s) within the cap {cap}")


def admit(task: TaskPack, run: RunData, *, ledger_verifier: LedgerVerifier | None = None,
          seal: SealCheck | None = None) -> AdmissionResult:
    """Every admission check and hard gate of one run (never raises).

    Args:
        ledger_verifier: ``path -> LedgerCheck``; default
            :func:`apparatus.simulators.ledger.verify_ledger`, imported lazily.
        seal: the run directory's seal as this process has just written it, nothing written
            since (see :func:`criteria.engine.score_run`); default: :func:`check_seal` hashes
            every file again.
    """
    ident = run.result.identity if run.result is not None else fallback_identity(task, run)
    result = AdmissionResult(identity=ident)

    def missing(value: object, error: str | None, what: str) -> list[str]:
        return [error or f"{what} unusable"] if value is None else []

    result.add("result_record", missing(run.result, run.result_error, "result.json"), "result.json is valid")
    if run.result is None:
        result.decisions[-1].reason += "; identity reconstructed from the run directory"
    result.add("identity", _identity_problems(task, run, ident),
               "result, trace, summary, manifest, gateway, probe, task and snapshot agree")
    eligibility = run.result.eligibility if run.result is not None else "eligible"
    why = run.result.eligibility_reason if run.result is not None else None
    result.add("eligibility", [] if eligibility == "eligible" else [f"cell is {eligibility!r}: {why}"],
               "cell is eligible")
    result.add("lifecycle", _lifecycle_problems(run), "lifecycle records complete, no apparatus error")
    result.add("manifest", _manifest_problems(run, seal), "every file is covered by the manifest with matching sha256")
    result.add("trace", missing(run.events, run.events_error, "events.json"), "events.json is valid Trace IR")
    status = run.summary.structured_trace_status if run.summary is not None else None
    result.add("structured_trace", _trace_status_problems(run), f"structured trace status {status!r}")
    result.add("gateway_records", missing(run.gateway, run.gateway_error, "gateway records"),
               f"{len(run.gateway or [])} provider-boundary record(s)")
    result.add("started", _start_problems(run), "the harness reached the model before any time-out")
    result.add("turns_ran", _unrun_turn_problems(run), "every scripted turn was started")
    if ident.protocol == "probe":
        result.add("probe_record", missing(run.probe, run.probe_error, "probe record"), "probe record present")
    baseline_ok = run.baseline.is_dir() and not run.baseline.is_symlink()
    result.add("baseline", [] if baseline_ok else ["frozen baseline private/baseline/ is missing"],
               "frozen baseline present")
    verifier, unavailable = (ledger_verifier, None) if ledger_verifier is not None else _default_ledger_verifier()
    _ledgers(task, run, result, verifier, unavailable)
    result.hard_gates.insert(0, _tool_cap(task, run))
    return result
