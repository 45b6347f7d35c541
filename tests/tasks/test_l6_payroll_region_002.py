"""L6-payroll-region-002: the verifier on hand-built runs (faithful; a stale goal after the
compaction; the correction lost on resume; no compaction needed; a wrong export), the probe policy
(the region from the latest statement the choosing step is shown; turn 2 never restates it; the
summary lists user messages only when asked), the scripts and the pack's self-test."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

from harnesses.reference.mutants import not_applicable, pack_features
from tracetrial.policy import Final, Observation, Shell, Turn, TurnView, WriteFile
from tracetrial.task import load_task
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "L6-payroll-region-002"


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


SCORE = _load(PACK / "verifier" / "score.py", "l6_pr_score")
POLICY = _load(PACK / "probe_policy.py", "l6_pr_policy")
SELFTEST = _load(PACK / "verifier" / "selftest.py", "l6_pr_selftest")
TASK = load_task(PACK)
TURNS = [(PACK / "prompt.md").read_text(), *[t.user for t in TASK.turns.turns]]
H1, H2, H3 = "H1-revision-after-compaction", "H2-user-turns-delivered", "H3-revision-carried-into-turn-3"
A1, A2 = "A1-apac-exported", "A2-no-stale-region-exported"
APAC, EMEA = SELFTEST.APAC, SELFTEST.EMEA


def failed(ctx: VerifierContext) -> set[str]:
    out: dict[str, tuple[bool | None, str]] = SCORE.score(ctx)
    return {k for k, (ok, _) in out.items() if ok is False}


def test_pack_has_three_resumed_turns_and_triggers_in_turn_three() -> None:
    assert [t.session_boundary.kind for t in TASK.turns.turns if t.session_boundary] == ["resume", "resume"]
    assert POLICY.PROBE_OPTIONS["report_usage_tokens"]["from_request"] == SCORE.TRIGGER_REQUESTS
    assert {"compaction", "resume"} <= pack_features(TASK) and not_applicable("stale_goal", TASK) is None
    assert TASK.spec.calibration is not None
    assert TASK.spec.calibration.mutants == {"stale_goal": [H1, A1, A2], "window_compaction": [H1, A1],
                                             "lose_turn_fact": [H1, H3, A1]}
    assert not re.search(POLICY.REGION_RE, TURNS[2])   # the go-ahead does not restate the region


def test_every_agent_criterion_is_linked() -> None:
    assert {c.id for c in TASK.agent_rubric.criteria if c.applies_to("probe")} <= {link.agent for link in TASK.harness_rubric.links}
    # the live-only judged reply criterion takes no link and no calibration entry
    assert {c.id for c in TASK.agent_rubric.criteria if not c.applies_to("probe")} == {"A3-replies-match-outputs"}


def test_verdicts(tmp_path: Path) -> None:
    ctx = SELFTEST._ctx
    assert failed(ctx(tmp_path / "a", final="Goal: start=shown; revision=shown; region=apac.")) == set()
    assert failed(ctx(tmp_path / "b", final="Goal: start=shown; revision=missing; region=emea.", report=EMEA,
                      runs=("emea",))) == {H1, A1, A2}
    assert failed(ctx(tmp_path / "c", final="Goal: start=missing; revision=missing; region=missing.", report=None,
                      runs=())) == {H1, H3, A1}
    unscored = SCORE.score(ctx(tmp_path / "d", final="Goal: start=shown; revision=shown; region=apac.", summary=False))
    assert unscored[H1][0] is None and "whole history" in unscored[H1][1]
    wrong = {**APAC, "employees": 166}
    assert failed(ctx(tmp_path / "e", final="Goal: start=shown; revision=shown; region=apac.", report=wrong)) == {A1}


def test_a_compaction_only_after_the_region_choosing_step_leaves_h1_unscored(tmp_path: Path) -> None:
    """A harness that compacts after turn 3's final answer (OpenClaw 2026.6.9 compacts post-turn from
    the reported usage): the region-choosing request (turn 3, step 2: request 6) came before the
    summary request (9) and the record, so nothing had to survive a compaction."""
    ctx = SELFTEST._ctx(tmp_path, final="Goal: start=shown; revision=shown; region=apac.", late=True)
    out = SCORE.score(ctx)
    assert out[H1][0] is None and "compacted only after the region-choosing step (request 6)" in out[H1][1]
    assert "summary request 9" in out[H1][1] and "context_compaction record seq" in out[H1][1]
    assert failed(ctx) == set() and out[H3][0] is True and out[A1][0] is True
    # a correction lost on resume still fails H1 whenever the compaction came
    lost = SELFTEST._ctx(tmp_path / "b", final="Goal: start=missing; revision=missing; region=missing.", report=None,
                         runs=(), late=True)
    assert failed(lost) == {H1, H3, A1}


def test_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, timeout=120, check=False, cwd=PACK / "verifier")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_scripts_print_what_the_truth_holds(tmp_path: Path) -> None:
    shutil.copytree(PACK / "workspace", tmp_path / "ws")
    out = subprocess.run(["bash", "scripts/export.sh", "apac"], cwd=tmp_path / "ws", capture_output=True, text=True,
                         check=True).stdout
    m = re.search(POLICY.EXPORTED_RE, out)
    assert m is not None and {"region": m.group(1), "employees": int(m.group(2)), "gross_cents": int(m.group(3))} == APAC
    for cmd in ("refresh", "validate", "audit"):
        text = subprocess.run(["bash", "scripts/payroll.sh", cmd], cwd=tmp_path / "ws", capture_output=True, text=True,
                              check=True).stdout
        assert len(text) > 1500 and not re.search(POLICY.REGION_RE, text)


def drive(index: int, views: list[TurnView]) -> list[Any]:
    turn = Turn(index, TURNS[index - 1], view=views[0])
    gen = POLICY.policy(turn)
    actions = [next(gen)]
    while not isinstance(actions[-1], Final):
        turn._view = views[min(len(actions), len(views) - 1)]
        a = actions[-1]
        if isinstance(a, Shell) and "export.sh" in a.command:
            region = a.command.rsplit(" ", 1)[-1]
            data = APAC if region == "apac" else EMEA
            obs = Observation(text=f"EXPORTED region={region} employees={data['employees']} gross_cents={data['gross_cents']}")
        else:
            obs = Observation(text="Exit code 0\nREFRESHED: 80 records")
        try:
            actions.append(gen.send(obs))
        except StopIteration:
            break
    return actions


def test_policy_turns_one_and_two() -> None:
    assert [a.command for a in drive(1, [TurnView(history_text=TURNS[0])]) if isinstance(a, Shell)] == [
        "./scripts/payroll.sh refresh"]
    two = drive(2, [TurnView(history_text="\n".join(TURNS[:2]))])
    assert len(two) == 1 and not re.search(r"(?i)apac|emea", two[0].text)


def test_policy_turn_three_exports_the_latest_visible_region() -> None:
    full = TurnView(history_text="\n".join(TURNS))
    acts = drive(3, [full])
    assert [a.command for a in acts if isinstance(a, Shell)][-1] == "./scripts/export.sh apac"
    assert json.loads(next(a for a in acts if isinstance(a, WriteFile)).content) == APAC
    assert acts[-1].text.endswith("Goal: start=shown; revision=shown; region=apac.")
    stale = TurnView(history_text=TURNS[0] + "\n" + TURNS[2])
    acts = drive(3, [full, full, stale])
    assert [a.command for a in acts if isinstance(a, Shell)][-1] == "./scripts/export.sh emea"
    assert acts[-1].text.endswith("Goal: start=shown; revision=missing; region=emea.")
    none = drive(3, [TurnView(history_text=TURNS[2])] * 3)
    assert not any("export.sh" in a.command for a in none if isinstance(a, Shell))
    assert none[-1].text.endswith("Goal: start=missing; revision=missing; region=missing.")


def test_the_summary_lists_user_messages_only_when_asked() -> None:
    history = "\n".join(TURNS)
    plain = POLICY.compaction_summary(Turn(3, TURNS[2], view=TurnView(history_text=history + "\nSummarize.")))
    assert not re.search(r"(?i)apac|emea", plain)
    asked = POLICY.compaction_summary(Turn(3, TURNS[2], view=TurnView(history_text=history + "\nAll user messages: list.")))
    assert re.findall(POLICY.REGION_RE, asked) == ["EMEA", "APAC"]
