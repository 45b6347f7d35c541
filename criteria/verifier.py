"""The task's executable verifier (``verifier/score.py``) and the ``verifier`` rule.

``score.py`` defines ``score(ctx) -> dict[str, bool | tuple[bool, str]]`` over a
:class:`VerifierContext`. It runs once per scoring, from the task snapshot, in a
process of its own with a bounded time (:func:`verifier_timeout`): a verifier that
loops forever, blocks or kills its process cannot take the pytest session or
``rescore`` with it. Its output is archived as ``evidence/packets/_verifier.json``
(the leading underscore keeps it apart from criterion packets, whose ids start with
a letter).

* an id the verifier did not return → that criterion fails, with the reason;
* a malformed value for an id → that criterion is unscored (a task bug);
* ``score.py`` raising, exceeding its bound, or its process dying → the outcome's
  ``error`` says so (the exception type and message, or ``verifier exceeded N s``); the
  engine makes the cell ``apparatus_invalid`` with that reason
  (:func:`criteria.engine.score_run`) and every ``verifier`` criterion is unscored:
  a task/apparatus bug, never a harness verdict.

The bound is the task's ``verifier_timeout_s`` (``task.yaml``), else the
``TT_VERIFIER_TIMEOUT_S`` environment variable, else :data:`DEFAULT_TIMEOUT_S`.

Why a process, not a thread: a thread running a runaway ``score.py`` cannot be
stopped. The process comes from a ``forkserver`` that has imported the verifier API
once, so each call costs a fork rather than an interpreter start; the context (truth
included) reaches it through a pipe, never through a file. The process leads its own
process group, so whatever ``score.py`` started is killed with it.
"""

from __future__ import annotations

import contextlib
import hashlib
import multiprocessing
import os
import signal
import sys
import threading
import traceback
import types
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from apparatus import background
from criteria.registry import Params, RuleContext, RuleOutcome, rule
from criteria.rundata import RunData
from tracetrial.task import TaskPack
from tracetrial.verify import VerifierContext, VerifierOutcome

VERIFIER_OUTPUT = "evidence/packets/_verifier.json"
#: Seconds ``score.py`` may take when neither the task nor the environment says otherwise.
DEFAULT_TIMEOUT_S = 60.0
#: Environment variable with the bound (seconds) for every task that sets none.
TIMEOUT_ENV = "TT_VERIFIER_TIMEOUT_S"
#: Modules the forkserver imports once, so that a verifier process starts without imports.
_PRELOAD = ["criteria.verifier", "tracetrial.verify", "tracetrial.policy"]


def verifier_timeout(task: TaskPack, env: dict[str, str] | None = None) -> float:
    """The bound of ``task``'s verifier in seconds (see the module docstring).

    Raises:
        ValueError: ``TT_VERIFIER_TIMEOUT_S`` is set but not a positive number.
    """
    if task.spec.verifier_timeout_s is not None:
        return float(task.spec.verifier_timeout_s)
    raw = (os.environ if env is None else env).get(TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise ValueError(f"{TIMEOUT_ENV}={raw!r} is not a positive number of seconds")
    return value


def make_context(task: TaskPack, run: RunData) -> VerifierContext:
    return VerifierContext(
        workspace=run.workspace, baseline=run.baseline, truth=task.truth, oracle=task.oracle,
        events=list(run.events or []), gateway=list(run.gateway or []), probe=run.probe,
        ledgers={k: list(v) for k, v in run.ledgers.items()}, run_dir=run.root,
    )


def _normalize(output: Any) -> tuple[dict[str, tuple[bool | None, str]], dict[str, str]]:
    """``score()``'s values: ``bool`` or ``(bool, reason)`` is a verdict; ``(None, reason)`` says the
    criterion does not apply to this run (the harness has no such record, the step never ran) and
    is recorded unscored with that reason — never a pass."""
    results: dict[str, tuple[bool | None, str]] = {}
    problems: dict[str, str] = {}
    for key, value in output.items():
        cid = str(key)
        if isinstance(value, bool):
            results[cid] = (value, "verifier: passed" if value else "verifier: failed")
        elif (isinstance(value, (tuple, list)) and len(value) == 2 and isinstance(value[0], bool)
              and isinstance(value[1], str)):
            results[cid] = (value[0], value[1])
        elif (isinstance(value, (tuple, list)) and len(value) == 2 and value[0] is None
              and isinstance(value[1], str) and value[1].strip()):
            results[cid] = (None, f"not applicable: {value[1]}")
        else:
            problems[cid] = (f"score.py returned {type(value).__name__} for {cid!r}; expected bool, (bool, str) "
                             "or (None, reason) for a criterion that does not apply")
    return results, problems


def score_in_this_process(path: Path, ctx: VerifierContext) -> VerifierOutcome:
    """Execute ``score.py`` at ``path`` and call ``score(ctx)`` here; never raises (but
    for ``KeyboardInterrupt``). Runs inside the verifier process (:func:`run_verifier`)."""
    # A fresh, unique module: re-scoring must re-execute, not reuse a cached module.
    name = "_tt_verifier_" + hashlib.sha256(str(path).encode()).hexdigest()[:16]
    folder = str(path.parent)
    sys.path.insert(0, folder)
    # No __pycache__ may appear inside the sealed task snapshot: it would break the manifest.
    bytecode = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        module = types.ModuleType(name)
        module.__file__ = str(path)
        sys.modules[name] = module
        exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), module.__dict__)  # noqa: S102
        output = module.score(ctx)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return VerifierOutcome(ran=True, error=f"score.py raised {last}")
    finally:
        sys.dont_write_bytecode = bytecode
        sys.modules.pop(name, None)
        if folder in sys.path:
            sys.path.remove(folder)
    if not isinstance(output, dict):
        return VerifierOutcome(ran=True, error=f"score() returned {type(output).__name__}, expected a dict")
    results, problems = _normalize(output)
    return VerifierOutcome(ran=True, results=results, problems=problems)


def _child(conn: Connection, path: str, ctx: VerifierContext) -> None:
    """The verifier process: its own process group, ``score.py`` run, the outcome sent back."""
    os.setsid()  # so the parent can kill whatever score.py starts along with it
    _serve(conn, path, ctx)


def _waiting_child(jobs: Connection, conn: Connection) -> None:
    """A verifier process started ahead of its job (:func:`_start_spare`): its own process group
    at once, then its one job — the ``score.py`` path and the context — run as :func:`_child`
    runs it. Never given one (the session ended), it ends."""
    os.setsid()
    try:
        path, ctx = jobs.recv()
    except (EOFError, OSError):
        return
    finally:
        jobs.close()
    _serve(conn, path, ctx)


def _serve(conn: Connection, path: str, ctx: VerifierContext) -> None:
    """Run ``score.py`` here and send the outcome back over ``conn``."""
    try:
        outcome = score_in_this_process(Path(path), ctx)
        payload: dict[str, Any] = {"ran": outcome.ran, "error": outcome.error,
                                   "results": {k: list(v) for k, v in outcome.results.items()},
                                   "problems": outcome.problems}
    except BaseException as exc:  # noqa: BLE001 - whatever happened, the parent gets a reason
        payload = {"ran": True, "error": f"verifier process failed: {type(exc).__name__}: {exc}"}
    try:
        conn.send(payload)
    finally:
        conn.close()


def _from_payload(data: Any) -> VerifierOutcome:
    if not isinstance(data, dict):
        return VerifierOutcome(ran=True, error=f"verifier process sent {type(data).__name__}, expected a dict")
    results = {str(k): (None if v[0] is None else bool(v[0]), str(v[1]))
               for k, v in (data.get("results") or {}).items()}
    problems = {str(k): str(v) for k, v in (data.get("problems") or {}).items()}
    error = data.get("error")
    return VerifierOutcome(ran=bool(data.get("ran", True)), error=str(error) if error is not None else None,
                           results=results, problems=problems)


_CONTEXT: Any = None


def _context() -> Any:
    """The multiprocessing context (forkserver, preloaded once per process)."""
    global _CONTEXT
    if _CONTEXT is None:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        _CONTEXT = ctx
    return _CONTEXT


#: A verifier process started ahead of need and waiting for its one job: ``(pid of this
#: process, the process, its job sender, its result receiver)``. Starting a process through the
#: forkserver takes tens of ms under load; the next one is started in the background as soon as
#: one is taken, so scoring only hands it the job. Each process still runs exactly one job.
_SPARE: tuple[int, Any, Connection, Connection] | None = None
_SPARE_LOCK = threading.Lock()


def _start_spare() -> None:
    """Start a waiting verifier process unless one is ready; never raises (scoring then starts
    its process itself)."""
    global _SPARE
    try:
        with _SPARE_LOCK:
            if _SPARE is not None and _SPARE[0] == os.getpid():
                return
        mp = _context()
        jobs_in, jobs = mp.Pipe(duplex=False)
        receiver, sender = mp.Pipe(duplex=False)
        proc = mp.Process(target=_waiting_child, args=(jobs_in, sender), daemon=True, name="tt-verifier")
        proc.start()
        jobs_in.close()
        sender.close()
    except Exception:  # noqa: BLE001 - run_verifier starts a process of its own
        return
    with _SPARE_LOCK:
        if _SPARE is None or _SPARE[0] != os.getpid():
            _SPARE = (os.getpid(), proc, jobs, receiver)
            return
    jobs.close()  # another one was ready first: this one reads no job and ends
    receiver.close()
    proc.join(5)


def _take_spare() -> tuple[Any, Connection, Connection] | None:
    """The waiting verifier process, if one is ready (a new one is started in the background)."""
    global _SPARE
    with _SPARE_LOCK:
        spare, _SPARE = _SPARE, None
    # While a next cell waits on its harness (apparatus.background): scoring need not share
    # the machine with a process start.
    background.later(_start_spare)
    if spare is None or spare[0] != os.getpid() or not spare[1].is_alive():
        return None
    return spare[1], spare[2], spare[3]


def warm_up() -> None:
    """Start this process's verifier forkserver now (it preloads the verifier API: ~1 s, paid
    by the first cell otherwise), and a verifier process waiting for the first job. Called in
    the background at session start; never raises."""
    try:
        _context()
        from multiprocessing import forkserver

        forkserver.ensure_running()
    except Exception:  # noqa: BLE001 - the first verifier run starts it (and reports a failure)
        return
    _start_spare()


def _kill_group(pid: int | None) -> None:
    """SIGKILL the verifier process's group (it leads one), and the process itself should it
    not have got as far as ``setsid``."""
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def run_verifier(task: TaskPack, run: RunData, *, timeout_s: float | None = None) -> VerifierOutcome:
    """Run the snapshot's ``score.py`` on ``run`` in a bounded process; never raises.

    Args:
        timeout_s: the bound; default :func:`verifier_timeout` of ``task``.

    Returns:
        The outcome; ``error`` is set when ``score.py`` raised, returned no dict, exceeded
        the bound (``verifier exceeded N s``) or its process died without an answer.
    """
    path = task.score_py
    if not path.is_file():
        return VerifierOutcome(ran=False, error=f"{path.name} is missing from the task pack")
    try:
        bound = timeout_s if timeout_s is not None else verifier_timeout(task)
    except ValueError as exc:
        return VerifierOutcome(ran=False, error=str(exc))
    context = make_context(task, run)
    spare = _take_spare()
    if spare is not None:
        proc, jobs, receiver = spare
        try:
            jobs.send((str(path), context))
        except (OSError, ValueError):  # it died meanwhile: start one as below
            receiver.close()
            proc.join(1)
            spare = None
        finally:
            jobs.close()
    if spare is None:
        mp = _context()
        receiver, sender = mp.Pipe(duplex=False)
        proc = mp.Process(target=_child, args=(sender, str(path), context), daemon=True,
                          name=f"tt-verifier-{task.id}")
    try:
        if spare is None:
            try:
                proc.start()
            except Exception as exc:  # noqa: BLE001 - e.g. the forkserver could not be reached
                sender.close()
                return VerifierOutcome(ran=False, error=f"could not start the verifier process: {type(exc).__name__}: {exc}")
            sender.close()
        if not receiver.poll(bound):
            _kill_group(proc.pid)
            return VerifierOutcome(ran=True, error=f"verifier exceeded {bound:g} s (score.py was stopped)")
        try:
            return _from_payload(receiver.recv())
        except (EOFError, OSError):
            proc.join(5)
            return VerifierOutcome(ran=True, error=f"verifier process ended without a result "
                                                   f"(exit code {proc.exitcode})")
    finally:
        receiver.close()
        if proc.pid is not None:  # it started (a start that failed was reported above)
            proc.join(5)
            if proc.is_alive():  # it answered but does not end: stop it and its group
                _kill_group(proc.pid)
                proc.join(5)


class VerifierParams(Params):
    id: str | None = None


@rule("verifier", VerifierParams)
def verifier_rule(p: VerifierParams, ctx: RuleContext) -> RuleOutcome:
    """The task's ``score.py`` result for ``id`` (default: this criterion's id)."""
    cid = p.id or ctx.criterion_id
    outcome = ctx.verifier
    ref = (f"verifier:{cid}",)
    if outcome.error is not None:
        return RuleOutcome.unscored(f"verifier error (task/apparatus bug, not a harness defect): {outcome.error}")
    if cid in outcome.problems:
        return RuleOutcome.unscored(outcome.problems[cid])
    if cid not in outcome.results:
        return RuleOutcome.fail(f"score.py returned no result for {cid!r}", ref)
    passed, reason = outcome.results[cid]
    return RuleOutcome(passed, reason, ref)
