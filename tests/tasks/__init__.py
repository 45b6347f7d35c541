"""Unit tests of the task packs' verifiers and probe policies, one module per pack.

A pack's ``verifier/score.py`` and ``probe_policy.py`` are not importable modules (packs are
data folders, run by the apparatus in their own processes): :func:`load_module` loads one by
path for a test, without leaving bytecode inside the pack (a ``__pycache__`` there would change
the pack's digest, which keys its calibration record)."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tracetrial.policy import Final, Observation, Turn


def load_module(path: Path, name: str) -> types.ModuleType:
    """The module at ``path`` (a pack's ``score.py`` or ``probe_policy.py``) under ``name``."""
    mod = types.ModuleType(name)
    mod.__file__ = str(path)
    old = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), mod.__dict__)  # noqa: S102
    finally:
        sys.dont_write_bytecode = old
    return mod


def drive(policy: types.ModuleType, turn: Turn,
          respond: Callable[[Any], Observation] | Iterable[Observation]) -> list[Any]:
    """The actions a probe policy takes in ``turn`` until its ``Final`` (or until it or the
    observations run out): ``respond`` answers each action, or is the observations in order."""
    answer = respond if callable(respond) else None
    pending = None if callable(respond) else iter(respond)
    gen = policy.policy(turn)
    actions = [next(gen)]
    try:
        while not isinstance(actions[-1], Final):
            obs = answer(actions[-1]) if answer is not None else next(pending)  # type: ignore[arg-type]
            actions.append(gen.send(obs))
    except StopIteration:
        pass
    return actions


def drive_all(policy: types.ModuleType, turn: Turn, observations: Iterable[Observation]) -> list[Any]:
    """Every action a probe policy takes in ``turn`` while ``observations`` last, past a ``Final``
    too (a harness that re-invokes the model after the turn's answer resumes the policy with a
    ``notification`` observation)."""
    pending = iter(observations)
    gen = policy.policy(turn)
    actions = [next(gen)]
    try:
        for obs in pending:
            actions.append(gen.send(obs))
    except StopIteration:
        pass
    return actions
