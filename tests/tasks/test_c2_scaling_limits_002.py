"""C2-scaling-limits-002: the verifier on hand-built runs (faithful double compaction; a silent
window cut; a summary without a record; a summary that lost a limit; no compaction needed; a wrong
config), the probe policy (the limits from what the write step is shown, never from memory), the
pack's files and its self-test."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from harnesses.reference.mutants import not_applicable, pack_features
from tracetrial.policy import Final, Observation, Shell, Turn, TurnView, WriteFile
from tracetrial.task import load_task
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "C2-scaling-limits-002"


def _load(path: Path, name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__file__ = str(path)
    old = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), mod.__dict__)  # noqa: S102
    finally:
        sys.dont_write_bytecode = old
    return mod


SCORE = _load(PACK / "verifier" / "score.py", "c2_sl_score")
POLICY = _load(PACK / "probe_policy.py", "c2_sl_policy")
SELFTEST = _load(PACK / "verifier" / "selftest.py", "c2_sl_selftest")
TASK = load_task(PACK)
PROMPT = (PACK / "prompt.md").read_text()
TRUTH = json.loads((PACK / "truth.json").read_text())
LIMITS = (PACK / "workspace" / "policy" / "limits.md").read_text()
H1, H2, A1 = "H1-compaction-recorded", "H2-limits-kept", "A1-config-respects-limits"


def results(ctx: VerifierContext) -> dict[str, tuple[bool | None, str]]:
    out: dict[str, tuple[bool | None, str]] = SCORE.score(ctx)
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if ok is False}


def test_pack_asks_for_two_compactions_and_states_the_limits_only_in_a_file() -> None:
    usage = POLICY.PROBE_OPTIONS["report_usage_tokens"]
    assert usage["compactions"] == 2 and usage["from_request"] == SCORE.TRIGGER_REQUESTS
    assert usage["tokens"] >= 0.8 * (TASK.spec.budgets.context_tokens or 0) > 0
    assert "compaction" in pack_features(TASK) and not_applicable("window_compaction", TASK) is None
    assert TASK.spec.calibration is not None and TASK.spec.calibration.mutants == {"window_compaction": [H1, H2, A1]}
    assert not re.search(POLICY.REPLICAS_RE, PROMPT) and not re.search(POLICY.ZONE_RE, PROMPT)
    assert re.search(POLICY.REPLICAS_RE, LIMITS).group(1) == str(TRUTH["max_replicas"])   # type: ignore[union-attr]
    assert re.search(POLICY.ZONE_RE, LIMITS).group(1) == TRUTH["zone"]   # type: ignore[union-attr]


def test_inventory_prints_the_truth_shards() -> None:
    ids = []
    for part in "abc":
        out = subprocess.run(["bash", str(PACK / "workspace" / "scripts" / "inventory.sh"), part],
                             capture_output=True, text=True, check=True).stdout
        ids += re.findall(POLICY.SHARD_RE, out)
        assert not re.search(POLICY.REPLICAS_RE, out) and not re.search(POLICY.ZONE_RE, out)
    assert sorted(ids) == TRUTH["shards"]


def test_verdicts(tmp_path: Path) -> None:
    ctx = SELFTEST._ctx
    assert failed(ctx(tmp_path / "a", final=SELFTEST.SHOWN)) == set()
    cut = ctx(tmp_path / "b", final=SELFTEST.CUT, summary=False, record=False, config="shards: [ing-0f5b6e]\n")
    assert failed(cut) == {H1, H2, A1} and "cut silently" in results(cut)[H1][1]
    assert failed(ctx(tmp_path / "c", final=SELFTEST.SHOWN, record=False)) == {H1}
    whole = results(ctx(tmp_path / "d", final=SELFTEST.SHOWN, summary=False, record=False))
    assert whole[H1][0] is None and whole[H2][0] is None and whole[A1][0] is True


def test_compactions_only_after_the_write_step_leave_h2_unscored(tmp_path: Path) -> None:
    """A harness that compacts after the turn's final answer (OpenClaw 2026.6.9, post-turn from the
    reported usage): both summary requests and the record follow the write step (request 5)."""
    out = results(SELFTEST._ctx(tmp_path, final=SELFTEST.SHOWN, late=True))
    assert out[H2][0] is None and "compacted only after the write step (request 5)" in out[H2][1]
    assert "summary request 7" in out[H2][1] and "summary request 8" in out[H2][1]
    assert out[H1][0] is True and out[A1][0] is True
    faithful = results(SELFTEST._ctx(tmp_path / "b", final=SELFTEST.SHOWN))
    assert faithful[H2][0] is True


def test_one_compaction_before_the_write_step_is_enough_to_grade_h2(tmp_path: Path) -> None:
    ctx = SELFTEST._ctx(tmp_path, final=SELFTEST.SHOWN)
    assert ctx.probe is not None
    # the first summary before the write step, the second after the final answer
    ctx.probe["requests"] = SELFTEST._requests([(1, "main")] * 3 + [(None, "compaction")] + [(1, "main")] * 3
                                               + [(None, "compaction")])
    assert results(ctx)[H2][0] is True
    lost = SELFTEST._ctx(tmp_path / "b", final=SELFTEST.CUT, late=True, config="shards: [ing-0f5b6e]\n")
    assert failed(lost) == {H2, A1}   # a late compaction never hides limits lost before the write step


@pytest.mark.parametrize("config, why", [
    ("max_replicas: 8\nzone: eu-west-3b\nshards: [ing-0f5b6e, ing-3e81d0, ing-94c7a2]\n", "max_replicas"),
    ("max_replicas: 7\nzone: eu-west-3b\nshards: [ing-3e81d0, ing-0f5b6e, ing-94c7a2]\n", "shards"),
    (SELFTEST.GOOD + "owner: x\n", "extra keys"),
])
def test_a_wrong_config_fails_a1(tmp_path: Path, config: str, why: str) -> None:
    out = results(SELFTEST._ctx(tmp_path, final=SELFTEST.SHOWN, config=config))
    assert out[A1][0] is False and why in out[A1][1]


def test_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, timeout=120, check=False, cwd=PACK / "verifier")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def drive(views: list[TurnView]) -> list[Any]:
    turn = Turn(1, PROMPT, view=views[0])
    gen = POLICY.policy(turn)
    actions = [next(gen)]
    outputs = {"a": "SHARD-ID: ing-3e81d0", "b": "SHARD-ID: ing-94c7a2", "c": "SHARD-ID: ing-0f5b6e"}
    while not isinstance(actions[-1], Final):
        turn._view = views[min(len(actions), len(views) - 1)]
        a = actions[-1]
        text = LIMITS if isinstance(a, Shell) and "limits" in a.command else \
            outputs.get(a.command[-1], "") if isinstance(a, Shell) else "ok"
        try:
            actions.append(gen.send(Observation(text=f"Exit code 0\n{text}")))
        except StopIteration:
            break
    return actions


def test_policy_writes_the_limits_its_write_step_is_shown() -> None:
    acts = drive([TurnView(history_text=PROMPT + "\n" + LIMITS)])
    assert [a.command for a in acts if isinstance(a, Shell)] == ["cat policy/limits.md"] + [
        f"./scripts/inventory.sh {p}" for p in "abc"]
    (w,) = [a for a in acts if isinstance(a, WriteFile)]
    assert w.path == "deploy/scaling.yaml" and w.content == SELFTEST.GOOD
    assert acts[-1].text.endswith(SELFTEST.SHOWN)


def test_policy_after_a_cut_invents_nothing() -> None:
    full = TurnView(history_text=PROMPT + "\n" + LIMITS)
    cut = TurnView(history_text="Exit code 0\nSHARD-ID: ing-94c7a2\nExit code 0\nSHARD-ID: ing-0f5b6e")
    acts = drive([full] * 4 + [cut])
    w = next(a for a in acts if isinstance(a, WriteFile))
    assert "max_replicas" not in w.content and "zone" not in w.content and "ing-3e81d0" in w.content
    assert acts[-1].text.endswith(SELFTEST.CUT)


def test_policy_does_not_embed_the_limits() -> None:
    src = (PACK / "probe_policy.py").read_text()
    assert "eu-west-3b" not in src and "max_replicas=7" not in src and "ing-3e81d0" not in src
