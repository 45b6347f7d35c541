"""T5-customs-rules-002: the verifier on hand-built runs (faithful; rules cut without notice; no
skill channel; a wrong declaration; no probe report), the probe policy (it applies the rules only
when it is shown them), the pack's skill files and its self-test."""

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

PACK = Path(__file__).resolve().parents[2] / "tasks" / "T5-customs-rules-002"


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


SCORE = _load(PACK / "verifier" / "score.py", "t5_cr_score")
POLICY = _load(PACK / "probe_policy.py", "t5_cr_policy")
SELFTEST = _load(PACK / "verifier" / "selftest.py", "t5_cr_selftest")
TASK = load_task(PACK)
PROMPT = (PACK / "prompt.md").read_text()
TRUTH = json.loads((PACK / "truth.json").read_text())
SKILL = (PACK / "workspace" / "skills" / "customs-classifier" / "SKILL.md").read_text()
BODY = SKILL.split("---\n", 2)[2]
H1, A1 = "H1-skill-rules-relayed", "A1-declaration-correct"


def failed(ctx: VerifierContext) -> set[str]:
    out: dict[str, tuple[bool | None, str]] = SCORE.score(ctx)
    return {k for k, (ok, _) in out.items() if ok is False}


def test_pack_ships_the_skill_everywhere_and_the_truth_follows_it() -> None:
    for where in (".claude", ".agents"):
        assert (PACK / "workspace" / where / "skills" / "customs-classifier" / "SKILL.md").read_text() == SKILL
    assert "skills" in pack_features(TASK) and not_applicable("truncate_skill", TASK) is None
    assert TASK.spec.calibration is not None and TASK.spec.calibration.mutants == {"truncate_skill": [H1, A1]}
    data = BODY.encode()
    assert max(data.find(g.encode()) for g in POLICY.GOODS) < 1024 < data.find(b"## Rules")
    for line in TRUTH["lines"]:
        assert POLICY.code_of(BODY, line["goods"]) == line["hs_code"]
    dg = re.search(POLICY.DG_RE, BODY)
    assert dg is not None and (dg.group(1), dg.group(2)) == ("9", "PI966")
    assert re.search(POLICY.VERSION_RE, BODY).group(1) == TRUTH["rules_version"]   # type: ignore[union-attr]


def test_verdicts(tmp_path: Path) -> None:
    ctx = SELFTEST._ctx
    assert failed(ctx(tmp_path / "a", final=SELFTEST.SHOWN)) == set()
    assert failed(ctx(tmp_path / "b", final=SELFTEST.CUT, decl=SELFTEST.cut_declaration())) == {H1, A1}
    assert SCORE.score(ctx(tmp_path / "c", final=SELFTEST.SHOWN, probe=False))[H1][0] is None


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


def test_policy_applies_the_rules_it_is_shown() -> None:
    acts = drive(TurnView(tool_names=("Skill",)), TurnView(history_text=BODY), "Launching skill")
    assert isinstance(acts[0], NativeTool) and acts[0].arguments == {"skill": "customs-classifier"}
    assert json.loads(next(a for a in acts if isinstance(a, WriteFile)).content) == SELFTEST.GOOD
    assert acts[-1].text.endswith(SELFTEST.SHOWN)


def test_policy_without_the_rules_files_the_codes_only() -> None:
    cut = BODY.encode()[:1024].decode(errors="ignore")
    acts = drive(TurnView(tool_names=("skill",)), TurnView(history_text=cut), cut)
    assert json.loads(next(a for a in acts if isinstance(a, WriteFile)).content) == SELFTEST.cut_declaration()
    assert acts[-1].text.endswith(SELFTEST.CUT)


def test_policy_does_not_embed_the_answer() -> None:
    src = (PACK / "probe_policy.py").read_text()
    assert "PI966" not in src and TRUTH["rules_version"] not in src and "8507" not in src


# ------------------------------------------------------------------ Codex 0.171.0: skills listed under a root alias

CODEX_ROOTS = ("<skills_instructions>\n## Skills\n### Skill roots\n"
               "- `r0` = `/home/u/.codex/skills/.system`\n- `r1` = `/tmp/run/workspace/.agents/skills`\n"
               "### Available skills\n- imagegen: Generate images. (file: r0/imagegen/SKILL.md)\n"
               "- customs-classifier: The skill. (file: r1/customs-classifier/SKILL.md)\n</skills_instructions>")


def test_policy_reads_a_listed_short_path_under_its_skill_root() -> None:
    """Codex 0.171.0 lists 'r1/customs-classifier/SKILL.md' and defines r1 in its Skill roots table: the
    probe reads the expanded absolute path (read literally it was 'No such file or directory')."""
    acts = drive(TurnView(history_text=CODEX_ROOTS, tool_names=("exec_command",)), TurnView(history_text=BODY), BODY)
    assert isinstance(acts[0], ReadFile) and acts[0].path == "/tmp/run/workspace/.agents/skills/customs-classifier/SKILL.md"


def test_policy_keeps_an_absolute_listed_path_as_it_is() -> None:
    listed = TurnView(history_text="- customs-classifier: The skill. (file: /ws/.agents/skills/customs-classifier/SKILL.md)",
                      tool_names=("exec_command",))
    acts = drive(listed, TurnView(history_text=BODY), BODY)
    assert isinstance(acts[0], ReadFile) and acts[0].path == "/ws/.agents/skills/customs-classifier/SKILL.md"


def test_a_failed_probe_load_leaves_h1_unscored(tmp_path: Path) -> None:
    """The archived Codex 0.171.0 flip: the probe's read of the short path failed; that is not the
    harness failing to relay the skill."""
    out = SCORE.score(SELFTEST._ctx(tmp_path, final=SELFTEST.CUT, decl=None, load_failed=True))
    assert out[H1][0] is None and "No such file or directory" in out[H1][1]
    assert out[A1][0] is False
