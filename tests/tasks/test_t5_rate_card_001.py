"""T5-rate-card-001: the verifier on hand-built runs (faithful; a body cut without notice; no skill
channel; a wrong quote; no probe report), the probe policy (it loads the skill the harness's own way
and quotes only from what it is then shown), the pack's skill files and its self-test."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

from harnesses.reference.mutants import not_applicable, pack_features
from tracetrial.policy import Final, NativeTool, Observation, ReadFile, Turn, TurnView, WriteFile
from tracetrial.task import load_task
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "T5-rate-card-001"


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


SCORE = _load(PACK / "verifier" / "score.py", "t5_rc_score")
POLICY = _load(PACK / "probe_policy.py", "t5_rc_policy")
SELFTEST = _load(PACK / "verifier" / "selftest.py", "t5_rc_selftest")
TASK = load_task(PACK)
PROMPT = (PACK / "prompt.md").read_text()
TRUTH = json.loads((PACK / "truth.json").read_text())
SKILL = (PACK / "workspace" / "skills" / "rate-card" / "SKILL.md").read_text()
BODY = SKILL.split("---\n", 2)[2]
H1, A1 = "H1-skill-body-relayed", "A1-quote-correct"


def failed(ctx: VerifierContext) -> set[str]:
    out: dict[str, tuple[bool | None, str]] = SCORE.score(ctx)
    return {k for k, (ok, _) in out.items() if ok is False}


def test_pack_ships_one_skill_for_each_harness_location_and_the_truth_matches_it() -> None:
    for where in (".claude", ".agents"):
        assert (PACK / "workspace" / where / "skills" / "rate-card" / "SKILL.md").read_text() == SKILL
    assert "skills" in pack_features(TASK) and not_applicable("truncate_skill", TASK) is None
    assert TASK.spec.calibration is not None and TASK.spec.calibration.mutants == {"truncate_skill": [H1, A1]}
    rate = re.search(POLICY.ROW_RE, BODY)
    assert rate is not None and int(rate.group(1)) == TRUTH["rate_cents_per_kg"]
    assert TRUTH["total_cents"] == TRUTH["rate_cents_per_kg"] * TRUTH["weight_kg"]
    assert len(re.findall(POLICY.ROWS_RE, BODY)) == TRUTH["rows"]
    assert re.search(POLICY.CHECKSUM_RE, BODY).group(1) == TRUTH["checksum"]   # type: ignore[union-attr]
    assert BODY.encode().find(b"| Z097 |") > 1024 and BODY.rstrip().endswith(TRUTH["checksum"])
    assert not re.search(POLICY.ROW_RE, PROMPT)


def test_verdicts(tmp_path: Path) -> None:
    ctx = SELFTEST._ctx
    assert failed(ctx(tmp_path / "a", final=SELFTEST.WHOLE)) == set()
    assert failed(ctx(tmp_path / "b", final=SELFTEST.CUT, quote={**SELFTEST.GOOD, "rate_cents_per_kg": None})) == {H1, A1}
    missing_checksum = "Skill: rows=120; zone=shown; checksum=missing."
    assert H1 in failed(ctx(tmp_path / "c", final=missing_checksum))
    assert SCORE.score(ctx(tmp_path / "d", final=SELFTEST.WHOLE, probe=False))[H1][0] is None


def test_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, timeout=120, check=False, cwd=PACK / "verifier")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def drive(before: TurnView, after: TurnView, result: str) -> list[Any]:
    turn = Turn(1, PROMPT, view=before)
    gen = POLICY.policy(turn)
    actions = [next(gen)]
    while not isinstance(actions[-1], Final):
        turn._view = after
        try:
            actions.append(gen.send(Observation(text=result)))
        except StopIteration:
            break
    return actions


def test_policy_loads_the_skill_the_harness_way() -> None:
    for tools, want in ((("skill", "shell"), ("skill", {"name": "rate-card"})),
                        (("Skill", "Bash"), ("Skill", {"skill": "rate-card"}))):
        acts = drive(TurnView(tool_names=tools), TurnView(history_text=BODY), "Launching skill")
        assert (acts[0].name, acts[0].arguments) == want and isinstance(acts[0], NativeTool)
        quote = json.loads(next(a for a in acts if isinstance(a, WriteFile)).content)
        assert quote == {**SELFTEST.GOOD} and acts[-1].text.endswith(SELFTEST.WHOLE)
    listed = TurnView(system_text="<skill><location>/ws/skills/rate-card/SKILL.md</location></skill>", tool_names=("read",))
    acts = drive(listed, TurnView(history_text=BODY), BODY)
    assert isinstance(acts[0], ReadFile) and acts[0].path == "/ws/skills/rate-card/SKILL.md"


def test_policy_with_a_cut_body_invents_no_rate() -> None:
    cut = BODY.encode()[:1024].decode(errors="ignore")
    acts = drive(TurnView(tool_names=("skill",)), TurnView(history_text=cut), cut)
    quote = json.loads(next(a for a in acts if isinstance(a, WriteFile)).content)
    assert quote["rate_cents_per_kg"] is None and quote["card_checksum"] is None
    assert "zone=missing; checksum=missing." in acts[-1].text


def test_policy_without_a_skill_channel_writes_nothing() -> None:
    acts = drive(TurnView(tool_names=("Bash",)), TurnView(), "")
    assert len(acts) == 1 and "offers no way to load" in acts[0].text


def test_policy_does_not_embed_the_rate() -> None:
    src = (PACK / "probe_policy.py").read_text()
    assert str(TRUTH["rate_cents_per_kg"]) not in src and TRUTH["checksum"] not in src


# ------------------------------------------------------------------ Codex 0.171.0: skills listed under a root alias

CODEX_ROOTS = ("<skills_instructions>\n## Skills\n### Skill roots\n"
               "- `r0` = `/home/u/.codex/skills/.system`\n- `r1` = `/tmp/run/workspace/.agents/skills`\n"
               "### Available skills\n- imagegen: Generate images. (file: r0/imagegen/SKILL.md)\n"
               "- rate-card: The skill. (file: r1/rate-card/SKILL.md)\n</skills_instructions>")


def test_policy_reads_a_listed_short_path_under_its_skill_root() -> None:
    """Codex 0.171.0 lists 'r1/rate-card/SKILL.md' and defines r1 in its Skill roots table: the
    probe reads the expanded absolute path (read literally it was 'No such file or directory')."""
    acts = drive(TurnView(history_text=CODEX_ROOTS, tool_names=("exec_command",)), TurnView(history_text=BODY), BODY)
    assert isinstance(acts[0], ReadFile) and acts[0].path == "/tmp/run/workspace/.agents/skills/rate-card/SKILL.md"


def test_policy_keeps_an_absolute_listed_path_as_it_is() -> None:
    listed = TurnView(history_text="- rate-card: The skill. (file: /ws/.agents/skills/rate-card/SKILL.md)",
                      tool_names=("exec_command",))
    acts = drive(listed, TurnView(history_text=BODY), BODY)
    assert isinstance(acts[0], ReadFile) and acts[0].path == "/ws/.agents/skills/rate-card/SKILL.md"


def test_a_failed_probe_load_leaves_h1_unscored(tmp_path: Path) -> None:
    """The archived Codex 0.171.0 flip: the probe's read of the short path failed; that is not the
    harness failing to relay the skill."""
    out = SCORE.score(SELFTEST._ctx(tmp_path, final=SELFTEST.CUT, quote=None, load_failed=True))
    assert out[H1][0] is None and "No such file or directory" in out[H1][1]
    assert out[A1][0] is False
