"""Fixtures of the criteria-engine tests: synthetic packs, runs, rule contexts, a scripted judge."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from criteria.errors import JudgeError
from criteria.registry import RuleContext, RuleOutcome, evaluate_rule
from criteria.rundata import load_run
from criteria.verifier import run_verifier
from tests.criteria.archive_factory import RunBuilder, write_task_pack
from tracetrial.rubric import RuleSpec
from tracetrial.task import load_task


@pytest.fixture
def make_pack(tmp_path: Path) -> Callable[..., Path]:
    """``make_pack(**write_task_pack kwargs) -> pack folder`` under ``tmp_path/tasks``."""
    return lambda **kw: write_task_pack(tmp_path / "tasks", **kw)


@pytest.fixture
def make_run(tmp_path: Path) -> Callable[..., RunBuilder]:
    """``make_run(pack, **RunBuilder fields) -> RunBuilder`` writing under ``tmp_path/out``."""
    return lambda pack, **kw: RunBuilder(tmp_path / "out", pack, **kw)


def context_for(builder: RunBuilder) -> RuleContext:
    """Build the run and return a rule context over its archive and task snapshot."""
    run_dir = builder.build()
    task = load_task(run_dir / "private" / "task" / builder.task_root.name)
    run = load_run(run_dir)
    return RuleContext(task=task, run=run, verifier_fn=lambda: run_verifier(task, run))


def check(ctx: RuleContext, rule_kind: str, /, **params: Any) -> RuleOutcome:
    """Evaluate one rule of ``rule_kind`` with ``params`` on ``ctx`` (as criterion ``X1``)."""
    return evaluate_rule(RuleSpec(kind=rule_kind, **params), "X1", ctx)


class ScriptedJudge:
    """Answers by criterion id from a table; records every prompt it saw.

    ``answers[cid]`` is the raw response text, or an exception instance to raise.
    """

    def __init__(self, answers: dict[str, Any], name: str = "scripted-judge"):
        self.answers = answers
        self.name = name
        self.prompts: dict[str, list[dict[str, str]]] = {}

    def complete(self, messages: list[dict[str, str]]) -> str:
        cid = re.search(r"^Criterion id: (\S+)$", messages[1]["content"], re.MULTILINE)
        assert cid is not None
        self.prompts[cid.group(1)] = messages
        answer = self.answers.get(cid.group(1))
        if answer is None:
            raise JudgeError(f"no scripted answer for {cid.group(1)}")
        if isinstance(answer, Exception):
            raise answer
        return str(answer)
