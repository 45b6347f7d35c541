"""The flow of one cell (DESIGN.md §2): workspace -> simulators -> gateway/probe ->
harness turns -> normalize -> archive -> admission + scoring.

The archive is written even when the run fails; apparatus failures raise
:class:`~tracetrial.errors.ApparatusError` (a pytest *error*, never a harness
*failure*); a harness crash or hang is evidence and is scored.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import os
import shutil
import traceback
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from apparatus import background, tempstate
from apparatus.gateway.records import read_records
from apparatus.sandbox import Confinement, DockerSandbox, Sandbox, code_paths, confined, get_sandbox
from harnesses.assemble import assemble, summarize, turn_record
from harnesses.runner import interrupting
from harnesses.base import (
    HarnessAdapter,
    McpServer,
    RunContext,
    TurnContext,
    TurnOutcome,
)
from tracetrial.archive import Manifest, RunArchive, RunPaths, SealCheck, check_seal, repetition_root
from tracetrial.errors import ApparatusError
from tracetrial.redact import Redactor
from tracetrial.results import (
    CellIdentity,
    CombinedScore,
    ExceptionInfo,
    PhaseTiming,
    ResultRecord,
    WALL_CLOCK_BEFORE_TURN,
    RunFailure,
)
from tracetrial.task import TaskPack
from tracetrial.trace_io import write_events
from tracetrial_fixtures.services import Services

if TYPE_CHECKING:
    from criteria.judge import Judge


@dataclass
class CellResult:
    """What the test sees: the authoritative score, or why there is none."""

    paths: RunPaths
    score: CombinedScore | None
    skipped: str | None = None
    resumed: bool = False
    problem: str | None = None


def _now() -> datetime:
    return datetime.now(timezone.utc)


def new_run_id(task_id: str, model: str, harness: str) -> str:
    """URL- and path-safe, unique per run."""
    safe = "".join(c if c.isalnum() else "-" for c in f"{harness}-{model}")
    return f"{task_id}--{safe}--{uuid.uuid4().hex[:10]}"


def run_seed(run_id: str, task_id: str, model: str, harness: str, repetition: int, repetitions: int) -> str:
    """The run's seed (``resolved_config.seed``; the simulators derive their one-off values from it).

    A single run is seeded from its run id (fresh each run). A repeated cell (``--tt-repeat``) seeds
    each repetition from the cell and the repetition's index: repetitions differ from one another,
    and running repetition ``i`` again gives it the same seed, so a repeated measurement can be
    reproduced repetition by repetition.
    """
    basis = run_id if repetitions <= 1 else f"tt-repeat/{task_id}/{model}/{harness}/rep-{repetition}"
    return hashlib.sha256(basis.encode()).hexdigest()[:16]


def load_existing(paths: RunPaths, pack_digest: str | None = None,
                  harness_version: str | None = None) -> tuple[CombinedScore | None, str | None]:
    """What resuming finds in a cell's folder: ``(score, None)`` for a finished cell whose
    seal verifies, score included; ``(None, problem)`` for a cell that must be neither
    trusted nor re-run (tampered, or sealed and then half-deleted); ``(None, None)`` for a
    cell to run (no folder, never finished, or sealed without a score).

    A legacy cell (sealed before the manifest covered the score) is re-scored in place
    from its verified files and re-sealed, never re-run. A cell that ran on another revision
    of the pack (its ``result.json`` names another ``pack_digest``) is run again: its score
    measured a task that no longer exists. So is a cell another version of the harness ran
    (``identity.harness_version`` differs from ``harness_version``): an upgraded CLI, or the
    reference harness after its source changed, is measured, not assumed.
    """
    if not paths.root.is_dir():
        return None, None
    seal = check_seal(paths.root)
    if seal.state in ("tampered", "incomplete"):
        # Never re-run silently: re-running would delete the evidence of the tampering.
        what = "tampered" if seal.state == "tampered" else "half-written after its seal"
        return None, (f"archive {what}, not trusted and not re-run: {seal.describe(3)} — the cell is kept as "
                      f"found at {paths.root}; inspect it, then re-run it with --tt-rerun")
    if seal.state == "unsealed":
        return None, None  # the session that ran it stopped mid-cell: run it again
    if seal.state == "legacy" and paths.combined_score.is_file():
        from criteria.rescore import rescore_run

        rescore_run(paths.root)
    if not paths.combined_score.is_file():
        return None, None
    digest, version = _archived(paths)
    if pack_digest is not None and digest not in (None, pack_digest):
        return None, None
    if harness_version is not None and version not in (None, harness_version):
        return None, None
    try:
        return CombinedScore.model_validate_json(paths.combined_score.read_text(encoding="utf-8")), None
    except ValueError:
        return None, None


def _archived(paths: RunPaths) -> tuple[str | None, str | None]:
    """The pack digest and the harness version a sealed cell ran on, from one read of its
    ``result.json`` (``None`` each: not recorded, as in archives older than the field)."""
    try:
        record = json.loads(paths.result.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, None
    record = record if isinstance(record, dict) else {}
    config, identity = record.get("resolved_config"), record.get("identity")
    digest = config.get("pack_digest") if isinstance(config, dict) else None
    version = identity.get("harness_version") if isinstance(identity, dict) else None
    return (digest if isinstance(digest, str) else None), (version if isinstance(version, str) else None)


@contextlib.contextmanager
def _phase(timing: dict[str, PhaseTiming], name: str) -> Iterator[None]:
    """Time one phase of the cell into ``timing[name]`` (kept in ``result.json``: every archive
    carries where its cell's time went; ``benchmarks/cell_overhead.py`` tabulates it)."""
    begun = _now()
    try:
        yield
    finally:
        end = _now()
        timing[name] = PhaseTiming(started_at=begun.isoformat(), finished_at=end.isoformat(),
                                   seconds=(end - begun).total_seconds())


def _copy_pack(task: TaskPack, dest: Path) -> None:
    # symlinks=True: a pack's (validated, workspace-internal) links stay links, never the files
    # they name (tracetrial.task refuses any other link).
    shutil.copytree(task.root, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), dirs_exist_ok=True,
                    symlinks=True)


def workspace_diff(baseline: Path, after: Path) -> str:
    """A unified diff of text files (binary files are named, not diffed)."""
    def files(root: Path) -> dict[str, Path]:
        return {p.relative_to(root).as_posix(): p for p in root.rglob("*") if p.is_file() and not p.is_symlink()}

    a, b = files(baseline), files(after)
    out: list[str] = []
    for rel in sorted(a.keys() | b.keys()):
        old = a[rel].read_bytes() if rel in a else b""
        new = b[rel].read_bytes() if rel in b else b""
        if old == new:
            continue
        try:
            old_t, new_t = old.decode(), new.decode()
        except UnicodeDecodeError:
            out.append(f"Binary files a/{rel} and b/{rel} differ\n")
            continue
        out.extend(difflib.unified_diff(old_t.splitlines(True), new_t.splitlines(True),
                                        f"a/{rel}" if rel in a else "/dev/null",
                                        f"b/{rel}" if rel in b else "/dev/null"))
    return "".join(out)



def secret_scan(paths: RunPaths, secrets: list[str]) -> dict[str, Any]:
    """Where the task's planted secrets occur in the harness's native and gateway records."""
    found = []
    for index, secret in enumerate(secrets):
        needle = secret.encode()
        hits: dict[str, int] = {}
        for base in (paths.native, paths.gateway):
            for file in sorted(base.rglob("*")):
                if file.is_file() and not file.is_symlink():
                    count = file.read_bytes().count(needle)
                    if count:
                        hits[file.relative_to(paths.root).as_posix()] = count
        # The gateway redacts planted secrets as it records; each record counts them first.
        sent = sum(r["planted_secrets"][index] for r in read_records(paths.gateway / "requests.jsonl")
                   if index < len(r.get("planted_secrets") or []))
        if sent:
            hits["gateway/requests.jsonl"] = hits.get("gateway/requests.jsonl", 0) + sent
        found.append({"secret_index": index, "files": hits, "occurrences": sum(hits.values())})
    return {"secrets": len(secrets), "found": found}


class CellRunner:
    """Runs one cell end to end and archives it."""

    def __init__(self, task: TaskPack, adapter: HarnessAdapter, model: str, output: Path,
                 services: Services, *, judge: Judge | None = None, sandbox: str = "local", rerun: bool = False,
                 repetition: int = 1, repetitions: int = 1):
        self.task = task
        self.adapter = adapter
        self.model = model
        #: The session's output folder (all of it is hidden from the harness, every repetition included).
        self.output = output
        self.services = services
        self.judge = judge
        self.sandbox = sandbox
        self.rerun = rerun
        self.repetition = repetition
        self.repetitions = repetitions
        self.paths = RunPaths.for_cell(repetition_root(output, repetition), task.id, model, adapter.full_name)
        #: The manifest of a run that ended normally, as :meth:`_execute` sealed it: scoring follows
        #: with nothing written in between (an apparatus failure is scored against a full check).
        self._sealed: Manifest | None = None

    def _version(self) -> str | None:
        """The harness's version now (``None`` when it cannot be read: resuming then trusts the
        archive's, and running the cell reports why the harness is missing)."""
        try:
            return self.adapter.version()
        except Exception:  # noqa: BLE001 - an uninstalled CLI is reported when the cell runs
            return None

    # ------------------------------------------------------------------ run
    def run(self) -> CellResult:
        if not self.rerun:
            existing, problem = load_existing(self.paths, self.task.digest, self._version())
            if problem is not None:
                return CellResult(self.paths, None, problem=problem)
            if existing is not None:
                return CellResult(self.paths, existing, resumed=True)
        if self.paths.root.exists():
            shutil.rmtree(self.paths.root)
        self.paths.make()
        run_id = new_run_id(self.task.id, self.model, self.adapter.full_name)
        redactor = Redactor.from_environment(extra=self.task.spec.secrets)
        archive = RunArchive(self.paths, redactor)
        protocol = "probe" if self.model == "probe" else "live"
        identity = CellIdentity(run_id=run_id, task_id=self.task.id, task_revision=self.task.spec.revision,
                                harness=self.adapter.full_name, harness_version=None, model=self.model,
                                protocol=protocol)
        timing: dict[str, PhaseTiming] = {}
        started = _now()
        record = ResultRecord(identity=identity, status="failed")
        try:
            identity.harness_version = self.adapter.version()
            record = self._execute(run_id, identity, archive, redactor, timing, started)
        except ApparatusError as exc:
            record.status = "apparatus_error"
            record.exception = ExceptionInfo(type=type(exc).__name__, message=str(exc), origin="apparatus",
                                             traceback=traceback.format_exc(limit=8))
            record.timing = timing  # the phases that ran: where an apparatus failure struck
            archive.write_json("result.json", record)
            archive.seal(run_id)
            self._score_quietly()
            raise
        except Exception as exc:  # noqa: BLE001 - an apparatus bug: keep the archive, then report it
            record.status = "apparatus_error"
            record.exception = ExceptionInfo(type=type(exc).__name__, message=str(exc), origin="apparatus",
                                             traceback=traceback.format_exc(limit=12))
            record.timing = timing
            archive.write_json("result.json", record)
            archive.seal(run_id)
            self._score_quietly()
            raise ApparatusError(f"apparatus failure in cell {self.task.id}/{self.model}/{self.adapter.full_name}: "
                                 f"{type(exc).__name__}: {exc} (archive kept at {self.paths.root})") from exc
        if record.status == "skipped":
            return CellResult(self.paths, None, skipped=record.eligibility_reason)
        return CellResult(self.paths, self._score())

    def _score_quietly(self) -> None:
        """Score an apparatus-failed run as ``apparatus_invalid`` so reports count it
        (and ``tracetrial rescore`` reproduces the same file)."""
        try:
            self._score()
        except Exception:  # noqa: BLE001 - the apparatus error being raised is the story
            pass

    def _score(self) -> CombinedScore:
        from criteria import score_run
        from tracetrial.task import load_task

        snapshot = load_task(self.paths.private / "task" / self.task.id)
        # Admission need not hash the archive again: this runner sealed it just now, and every
        # process of the run (harness turns, simulators, endpoints) has ended; only reads since.
        sealed = SealCheck("sealed", (), self._sealed) if self._sealed is not None else None
        return score_run(snapshot, self.paths.root, judge=self.judge, sealed=sealed)

    # ------------------------------------------------------------- execute
    def _execute(self, run_id: str, identity: CellIdentity, archive: RunArchive, redactor: Redactor,
                 timing: dict[str, PhaseTiming], started: datetime) -> ResultRecord:
        task, adapter, paths = self.task, self.adapter, self.paths
        record = ResultRecord(identity=identity, status="failed")
        with _phase(timing, "pack_copy"):
            _copy_pack(task, paths.private / "task" / task.id)
            shutil.copytree(task.workspace, paths.private / "baseline", dirs_exist_ok=True, symlinks=True)

        from tracetrial.eligibility import eligibility

        elig, reason = eligibility(task, adapter.capabilities)
        record.eligibility, record.eligibility_reason = elig, reason
        if elig != "eligible":
            record.status = "skipped"
            record.timing = timing
            archive.write_json("result.json", record)
            self._sealed = archive.seal(run_id)
            return record

        # The sandbox (backend name resolved by run_cell): the harness is confined; simulators
        # read the pack and write private ledgers, so they run on the host behind a bridge.
        box = get_sandbox(self.sandbox)
        # The agent works in a temp dir outside the archive so private files are not a path away.
        # In this process's session folder (apparatus.tempstate): swept should the session be killed.
        # The sandbox hands it out: the docker backend's is the folder its (maybe already
        # started) container mounts, with an empty workspace already in it.
        with _phase(timing, "workspace"):
            # The shape of the cell's confinement (below): a container already started for a
            # cell like this one is taken over.
            scratch = box.scratch(f"tt-{task.id[:12]}-", network=task.isolation.network,
                                  limits=task.isolation.resources.model_dump(),
                                  nested=adapter.capabilities.nested_sandbox)
            workspace = scratch / "workspace"
            shutil.copytree(task.workspace, workspace, symlinks=True, dirs_exist_ok=True)
            if task.spec.workspace_repository:
                from apparatus.repository import init_repository

                init_repository(workspace, paths.private / "baseline")
            home = scratch / "home"
            home.mkdir()
        seed = run_seed(run_id, task.id, self.model, adapter.full_name, self.repetition, self.repetitions)

        from apparatus.simulators import mcp_servers_for

        try:
            with _phase(timing, "simulators"):
                mcp = mcp_servers_for(task, paths.private, seed) if task.spec.simulators else []
        except BaseException:
            box.cleanup()
            raise
        try:
            with _phase(timing, "sandbox_prepare"):
                box.prepare()  # the docker image is built (once) before the cell's clock starts
        except Exception as exc:  # noqa: BLE001 - any preparation failure is the apparatus's
            box.cleanup()
            shutil.rmtree(scratch, ignore_errors=True)
            raise ApparatusError(f"sandbox {box.name!r} could not be prepared: {exc} (run `tracetrial images build` "
                                 "to see the failing step, or choose another backend: --tt-sandbox bwrap|local)") from exc
        with _phase(timing, "gateway_route"):
            gateway = self.services.gateway()  # the session's first cell waits here for the proxy start
            # Only the scratch is writable: the harness writes its native records there and the
            # adapter copies them into the archive after each process ends (never the agent).
            confinement = Confinement(box, writable=[scratch], hidden=_hidden_paths(self.output, task.root),
                                      network=task.isolation.network, forward=[gateway.port],
                                      limits=task.isolation.resources.model_dump(),
                                      nested=adapter.capabilities.nested_sandbox)
            if box.name != "local":
                mcp = [McpServer(name=s.name, command=cmd[0], args=tuple(cmd[1:]))
                       for s in mcp
                       for cmd in [box.host_command([s.command, *s.args], env={**os.environ, **s.env},
                                                    stderr=paths.private / "sim" / f"{s.name}.stderr", name=s.name)]]
            probe = self.services.probe() if self.model == "probe" else None
            if probe is not None:
                probe.register_run(run_id, task)
            route = gateway.route_info(self.model, adapter.wire_format)
            record.resolved_config = {
                "sandbox": self.sandbox, "sandbox_detail": _sandbox_detail(box, task), "gateway_route": route, "wire_format": adapter.wire_format,
                "permission_mode": task.spec.permissions.mode, "budgets": task.spec.budgets.model_dump(),
                "mcp_servers": [s.name for s in mcp], "seed": seed,
                "harness_capabilities": adapter.capabilities.model_dump(),
                # what resuming compares: a cell of an earlier revision of the pack is run again
                "pack_digest": task.digest,
            }
            if self.repetitions > 1:
                record.resolved_config["repetition"] = {"index": self.repetition, "of": self.repetitions}
            gateway_key = gateway.api_key(run_id)
            redactor.add(gateway_key)
            if task.spec.secrets:  # before any request: the gateway's records never hold them in clear
                gateway.register_run(run_id, task.spec.secrets)
        ctx = RunContext(
            run_id=run_id, task=task, paths=paths, workspace=workspace, model=self.model,
            gateway_base_url=gateway.base_url(run_id, self.model, adapter.wire_format),
            gateway_key=gateway_key, mcp_servers=mcp,
            permission_mode=task.spec.permissions.mode, wall_clock_s=task.spec.budgets.wall_clock_s, home=home,
            sandbox=box,
        )
        outcomes: list[TurnOutcome] = []
        failure: tuple[str, str, bool] | None = None
        t0 = _now()
        budget = float(task.spec.budgets.wall_clock_s)
        interrupts = {i.turn: i.marker for i in task.spec.interrupts}
        endpoints = contextlib.ExitStack()
        # From here the apparatus waits on the harness: what earlier cells left for later (a
        # container's end, a scratch's removal, containers and verifier processes for cells to
        # come) runs now rather than while a cell is scored (apparatus.background).
        background.idle()
        try:
            if task.spec.endpoints:
                from apparatus.endpoints import serving

                record.resolved_config["endpoints"] = endpoints.enter_context(serving(
                    task.spec.endpoints, paths.private / "ledgers", [workspace, paths.private / "baseline"]))
            for index, turn in enumerate(task.user_turns, start=1):
                elapsed = (_now() - t0).total_seconds()
                remaining = budget - elapsed
                if remaining <= 1:
                    failure = (WALL_CLOCK_BEFORE_TURN, f"wall-clock budget {budget:.0f}s used up before turn {index}", True)
                    break
                turn_started = _now()
                marker = interrupts.get(index)
                with confined(confinement), interrupting(workspace / marker if marker else None, workspace) as armed:
                    outcome = adapter.run_turn(ctx, TurnContext(index, turn.user, turn.session_boundary, remaining))
                if outcome.started_at is None:
                    outcome.started_at = turn_started
                outcomes.append(outcome)
                if armed is not None and armed.fired:
                    # The task's deliberate kill: the next turn resumes the session (not a crash).
                    outcome.interrupted = True
                    continue
                if outcome.timed_out:
                    failure = ("HarnessTimeout", outcome.error or f"turn {index} exceeded the wall clock", True)
                    break
                if outcome.exit_code is None:
                    failure = ("HarnessCrash", outcome.error or f"turn {index} did not exit normally", False)
                    break
        finally:
            finished = _now()
            timing["execution"] = PhaseTiming(started_at=t0.isoformat(), finished_at=finished.isoformat(),
                                              seconds=(finished - t0).total_seconds())
            record.exit_codes = [o.exit_code for o in outcomes]
            record.started_at = started.isoformat()
            record.turns = [turn_record(o) for o in outcomes]
            with _phase(timing, "collection"):
                try:
                    # Native session files into native/ (hashed by the manifest). Before the
                    # sandbox cleanup: a runtime that outlives its turns (DeepSeek's JSON-RPC
                    # process) shuts down gracefully here, still inside its container.
                    adapter.collect(ctx)
                except Exception as exc:  # noqa: BLE001 - a missing native file is evidence, not a crash
                    (paths.native / "collect-error.txt").write_text(f"{type(exc).__name__}: {exc}\n")
                box.cleanup()  # host-side simulators finish writing their ledgers, then stop
                endpoints.close()  # and the task's HTTP endpoints
                probe_report = probe.finish_run(run_id) if probe is not None else None
                if probe_report is not None:
                    archive.write_json("gateway/probe.json", probe_report)
                try:
                    gateway.drain(run_id)  # every request of the run has its record line
                except Exception as exc:  # noqa: BLE001 - recorded; admission sees missing records
                    (paths.gateway / "drain-error.txt").write_text(f"{type(exc).__name__}: {exc}\n")
                src = gateway.records_path(run_id)
                if src.is_file():
                    archive.copy_in(src, "gateway/requests.jsonl")
                if (src.parent / "bodies").is_dir():  # only with --tt-record-bodies
                    archive.copy_in(src.parent / "bodies", "gateway/bodies")
                archive.copy_in(workspace, "workspace")
                archive.write_text("evidence/workspace.diff", workspace_diff(paths.private / "baseline", workspace))
                tempstate.remove_later(scratch)  # archived above; deleting it need not hold up the cell

        records = read_records(paths.gateway / "requests.jsonl")
        if probe_report is not None and probe_report.apparatus_errors:
            raise ApparatusError("probe model: " + "; ".join(probe_report.apparatus_errors))
        with _phase(timing, "normalization"):
            native = adapter.normalize(paths, outcomes, run_id)
            events = assemble(run_id=run_id, task_id=task.id, harness=adapter.full_name, model=self.model,
                              form=task.spec.conversation, turns=task.user_turns, outcomes=outcomes, native=native,
                              gateway_records=records, started=started, finished=finished, failure=failure)
            write_events(paths.events, events)
            wall = (finished - t0).total_seconds()
            archive.write_json("summary.json", summarize(run_id, events, native, records, wall, failure is not None))
        record.status = "timed_out" if failure and failure[2] else ("failed" if failure else "completed")
        if failure:
            record.exception = ExceptionInfo(type=failure[0], message=failure[1], origin="harness")
            record.failure = RunFailure(type=failure[0], message=failure[1], timed_out=failure[2])
        record.timing = timing
        archive.write_json("result.json", record)
        if task.spec.secrets:
            # Evidence for secret-redaction criteria must be taken *before* the archive
            # redactor scrubs the native records; it names files, never the values.
            archive.write_json("evidence/secret_scan.json", secret_scan(paths, task.spec.secrets))
        from criteria.rules_reconcile import write_reconciliation

        # native record vs provider boundary, from the redacted files (what rescore re-derives)
        with _phase(timing, "evidence"):
            write_reconciliation(archive)
        record.timing = timing
        archive.write_json("result.json", record)  # with the evidence phase; sealing and scoring come after
        self._sealed = archive.seal(run_id)
        return record


def _hidden_paths(output: Path, task_root: Path) -> list[Path]:
    """What the sandbox covers: the archive folder, the cell's task pack and — when it holds
    no code the harness runs — the folder of all packs (their truths are private too)."""
    hidden = [output, task_root]
    packs = task_root.resolve().parent
    if not any(code.is_relative_to(packs) for code in code_paths()):
        hidden.append(packs)
    return hidden


def _sandbox_detail(box: Sandbox, task: TaskPack) -> dict[str, Any]:
    """What the manifest records about the confinement (image for docker)."""
    detail: dict[str, Any] = {"backend": box.name, "network": task.isolation.network,
                              "limits": task.isolation.resources.model_dump()}
    if isinstance(box, DockerSandbox) and box.images is not None:
        detail["image"], detail["image_id"] = box.images.harnesses, box.images.harnesses_id
    return detail
