"""The task's executable verifier (``verifier/score.py``) and the ``verifier`` rule.

``score.py`` defines ``score(ctx) -> dict[str, bool | tuple[bool, str]]`` over a
:class:`VerifierContext`. It runs once per scoring, in-process, from the task
snapshot. Its output is archived as ``evidence/packets/_verifier.json`` (outside
the sealed set: scoring writes it after the manifest; the leading underscore
keeps it apart from criterion packets, whose ids start with a letter).

* an id the verifier did not return → that criterion fails, with the reason;
* a malformed value for an id → that criterion is unscored (a task bug);
* ``score.py`` raising → every ``verifier`` criterion is unscored with the
  exception's last traceback line: an apparatus/task bug, not a harness defect.
"""

from __future__ import annotations

import hashlib
import sys
import traceback
import types
from typing import Any

from criteria.registry import Params, RuleContext, RuleOutcome, rule
from criteria.rundata import RunData
from tracetrial.task import TaskPack
from tracetrial.verify import VerifierContext, VerifierOutcome

VERIFIER_OUTPUT = "evidence/packets/_verifier.json"


def make_context(task: TaskPack, run: RunData) -> VerifierContext:
    return VerifierContext(
        workspace=run.workspace, baseline=run.baseline, truth=task.truth, oracle=task.oracle,
        events=list(run.events or []), gateway=list(run.gateway or []), probe=run.probe,
        ledgers={k: list(v) for k, v in run.ledgers.items()}, run_dir=run.root,
    )


def _normalize(output: Any) -> tuple[dict[str, tuple[bool, str]], dict[str, str]]:
    results: dict[str, tuple[bool, str]] = {}
    problems: dict[str, str] = {}
    for key, value in output.items():
        cid = str(key)
        if isinstance(value, bool):
            results[cid] = (value, "verifier: passed" if value else "verifier: failed")
        elif (isinstance(value, (tuple, list)) and len(value) == 2 and isinstance(value[0], bool)
              and isinstance(value[1], str)):
            results[cid] = (value[0], value[1])
        else:
            problems[cid] = f"score.py returned {type(value).__name__} for {cid!r}; expected bool or (bool, str)"
    return results, problems


def run_verifier(task: TaskPack, run: RunData) -> VerifierOutcome:
    """Import the snapshot's ``score.py`` and call ``score(ctx)``; never raises."""
    path = task.score_py
    if not path.is_file():
        return VerifierOutcome(ran=False, error=f"{path.name} is missing from the task pack")
    # A fresh, unique module per call: re-scoring must re-execute, not reuse a cached module.
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
        output = module.score(make_context(task, run))
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return VerifierOutcome(ran=True, error=last)
    finally:
        sys.dont_write_bytecode = bytecode
        sys.modules.pop(name, None)
        if folder in sys.path:
            sys.path.remove(folder)
    if not isinstance(output, dict):
        return VerifierOutcome(ran=True, error=f"score() returned {type(output).__name__}, expected a dict")
    results, problems = _normalize(output)
    return VerifierOutcome(ran=True, results=results, problems=problems)


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
