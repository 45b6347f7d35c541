"""C2-retention-config-001: the verifier on hand-built runs (faithful compaction; a silent window
cut; a summary without a record; a summary that lost a setting; no compaction needed; a run ended
before the trigger; a wrong config), the probe policy (it takes the settings from what the write
step is shown, never from memory), the inventory script, the adapters' hand-over of the window and
the pack's self-test."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from harnesses.reference.mutants import not_applicable, pack_features
from tracetrial.policy import Final, Observation, Shell, Turn, TurnView, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ContextCompactionEvent, ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "C2-retention-config-001"
T0 = datetime(2026, 12, 1, tzinfo=UTC)


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


SCORE = _load(PACK / "verifier" / "score.py", "c2_rc_score")
POLICY = _load(PACK / "probe_policy.py", "c2_rc_policy")
TASK = load_task(PACK)
PROMPT = (PACK / "prompt.md").read_text()
TRUTH = json.loads((PACK / "truth.json").read_text())
H1, H2, A1 = "H1-compaction-recorded", "H2-constraints-kept", "A1-config-respects-constraints"
GOOD = "region: eu-central-1\nretention_days: 400\nshards:\n  - alog-0b9e44\n  - alog-5d1a08\n  - alog-7f3c21\n"
SHOWN = "Context: prompt=shown; region=eu-central-1; retention_days=400."
CUT = "Context: prompt=missing; region=missing; retention_days=missing."


def event() -> ContextCompactionEvent:
    return ContextCompactionEvent(seq=5, timestamp=T0, run_id="r", source="native:test",
                                  native_event_type="compact_boundary", trigger="auto")


ACTIONS = ("shell", "shell", "shell", "write_file", "final")


def requests(kinds: tuple[str, ...]) -> list[dict[str, Any]]:
    """Probe-report requests: each main one takes the next of the probe's actions (a call id unless final)."""
    out, actions = [], iter(ACTIONS)
    for i, kind in enumerate(kinds):
        req: dict[str, Any] = {"index": i, "kind": kind, "turn": 1}
        if kind == "main":
            req["action"] = next(actions, "final")
            req["call_id"] = None if req["action"] == "final" else f"call_tt_{i}"
        out.append(req)
    return out


def tool(call_id: str, seq: int) -> ToolEvent:
    return ToolEvent(seq=seq, timestamp=T0, run_id="r", source="native:test", conversation_turn=1,
                     tool_call=ToolCall(id=call_id, name="exec", arguments={"command": "x"}),
                     tool_result=ToolResult(content="ok"))


def trace(kinds: tuple[str, ...], compaction_after: int) -> list[Any]:
    """Tool events of the calls in request order, with a compaction record after the first
    ``compaction_after`` of them (seq = position)."""
    calls = [r["call_id"] for r in requests(kinds) if r.get("call_id")]
    events: list[Any] = [tool(c, n) for n, c in enumerate(calls[:compaction_after], 1)]
    events.append(ContextCompactionEvent(seq=len(events) + 1, timestamp=T0, run_id="r", source="native:test",
                                         native_event_type="transcript/compaction", conversation_turn=1))
    events += [tool(c, len(events) + 1 + n) for n, c in enumerate(calls[compaction_after:])]
    return events


def make_ctx(tmp_path: Path, *, final: str = f"written. {SHOWN}", kinds: tuple[str, ...] | None = None,
             events: Any = (event(),), config: str | None = GOOD, probe: bool = True) -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if config is not None:
        (ws / "deploy").mkdir()
        (ws / "deploy" / "retention.yaml").write_text(config)
    kinds = ("main", "main", "main", "compaction", "main", "main") if kinds is None else kinds
    report = {"requests": requests(kinds), "absent_capabilities": [], "final_text": final} if probe else None
    return VerifierContext(workspace=ws, baseline=base, truth=TRUTH, oracle=None, events=list(events), gateway=[],
                           probe=report, ledgers={}, run_dir=tmp_path)


def results(ctx: VerifierContext) -> dict[str, tuple[bool | None, str]]:
    out: dict[str, tuple[bool | None, str]] = SCORE.score(ctx)
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if ok is False}


# --------------------------------------------------------------------------- pack


def test_pack_declares_the_window_and_the_usage_trigger() -> None:
    assert TASK.spec.budgets.context_tokens == 100000
    usage = POLICY.PROBE_OPTIONS["report_usage_tokens"]
    assert usage["tokens"] >= 0.8 * TASK.spec.budgets.context_tokens > 0
    assert usage["from_request"] == SCORE.TRIGGER_REQUESTS
    assert "compaction" in pack_features(TASK) and not_applicable("window_compaction", TASK) is None
    assert not_applicable("stale_goal", TASK) is not None   # one user turn: no revision to lose


def test_calibration_declares_the_target_mutant() -> None:
    assert TASK.spec.calibration is not None
    assert TASK.spec.calibration.mutants == {"window_compaction": [H1, H2, A1]}


def test_every_agent_criterion_is_linked_to_a_harness_criterion() -> None:
    assert {c.id for c in TASK.agent_rubric.criteria if c.applies_to("probe")} <= {link.agent for link in TASK.harness_rubric.links}


def test_inventory_prints_one_shard_id_per_part_and_the_truth_holds_them() -> None:
    ids = []
    for part in ("a", "b", "c"):
        out = subprocess.run(["bash", str(PACK / "workspace" / "scripts" / "inventory.sh"), part],
                             capture_output=True, text=True, check=True).stdout
        found = re.findall(POLICY.SHARD_RE, out)
        assert len(found) == 1 and len(out) > 4000
        assert not re.search(POLICY.REGION_RE, out) and not re.search(POLICY.RETENTION_RE, out)
        ids += found
    assert sorted(ids) == TRUTH["shards"]


# --------------------------------------------------------------------------- verifier


def test_faithful_compaction_passes(tmp_path: Path) -> None:
    out = results(make_ctx(tmp_path))
    assert failed(make_ctx(tmp_path / "2")) == set() and out[H2][0] is True
    assert "compact_boundary" in out[H1][1]


def test_a_silent_window_cut_fails_everything(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, final=CUT, kinds=("main",) * 5, events=(), config="shards:\n  - alog-0b9e44\n")
    assert failed(ctx) == {H1, H2, A1}
    assert "cut silently" in results(ctx)[H1][1]


def test_a_summary_without_a_record_fails_h1(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, events=())
    assert failed(ctx) == {H1} and "recorded no compaction" in results(ctx)[H1][1]


def test_a_record_without_a_summary_request_passes_h1(tmp_path: Path) -> None:
    assert failed(make_ctx(tmp_path, kinds=("main",) * 5)) == set()


def test_a_summary_that_lost_a_setting_fails_h2_and_a1(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, final="Context: prompt=missing; region=eu-central-1; retention_days=missing.",
                   config="region: eu-central-1\nshards: [alog-0b9e44, alog-5d1a08, alog-7f3c21]\n")
    assert failed(ctx) == {H2, A1}


def test_faithful_compaction_passes_h2_with_the_write_step_after_it(tmp_path: Path) -> None:
    out = results(make_ctx(tmp_path, events=trace(("main", "main", "main", "compaction", "main", "main"), 3)))
    assert out[H2][0] is True and out[H1][0] is True


def test_a_compaction_only_after_the_write_step_leaves_h2_unscored(tmp_path: Path) -> None:
    """OpenClaw 2026.6.9's shape: the harness compacts after the turn's final answer (post-turn, from
    the reported usage); the write step's request came before it, so nothing had to survive it."""
    kinds = ("main",) * 5 + ("compaction",)
    out = results(make_ctx(tmp_path, kinds=kinds, events=trace(kinds, 4)))
    assert out[H2][0] is None and out[H1][0] is True and out[A1][0] is True
    assert "compacted only after the write step (request 3)" in out[H2][1]
    assert "summary request 5" in out[H2][1] and "context_compaction record seq 5" in out[H2][1]


def test_a_record_before_the_write_steps_tool_call_is_a_compaction_it_had_to_survive(tmp_path: Path) -> None:
    """No summary request (a harness that compacts without the model): the record's place in the
    trace, before the write step's tool call, orders it."""
    kinds = ("main",) * 5
    assert results(make_ctx(tmp_path, kinds=kinds, events=trace(kinds, 3)))[H2][0] is True
    late = results(make_ctx(tmp_path / "late", kinds=kinds, events=trace(kinds, 4)))[H2]
    assert late[0] is None and "only after the write step" in late[1]


def test_a_record_that_cannot_be_placed_proves_no_compaction_before_the_write_step(tmp_path: Path) -> None:
    out = results(make_ctx(tmp_path, kinds=("main",) * 5))   # a record, no tool events, no summary request
    assert out[H2][0] is None and "cannot be placed" in out[H2][1] and out[H1][0] is True


def test_a_late_compaction_does_not_hide_a_lost_setting(tmp_path: Path) -> None:
    kinds = ("main",) * 5 + ("compaction",)
    ctx = make_ctx(tmp_path, kinds=kinds, events=trace(kinds, 4), final=CUT, config="shards: [alog-0b9e44]\n")
    assert failed(ctx) == {H2, A1}


def test_no_compaction_needed_leaves_the_harness_criteria_unscored(tmp_path: Path) -> None:
    out = results(make_ctx(tmp_path, kinds=("main",) * 5, events=()))
    assert out[H1][0] is None and out[H2][0] is None and out[A1][0] is True
    assert "whole history" in out[H1][1]


def test_a_run_ended_before_the_trigger_leaves_h_unscored(tmp_path: Path) -> None:
    out = results(make_ctx(tmp_path, kinds=("main", "main"), events=(), config=None, final="stopped"))
    assert out[H1][0] is None and out[H2][0] is None and out[A1][0] is False


def test_without_a_probe_report_h_is_unscored(tmp_path: Path) -> None:
    out = results(make_ctx(tmp_path, probe=False))
    assert out[H1][0] is None and out[H2][0] is None


@pytest.mark.parametrize("config, why", [
    ("region: eu-central-1\nretention_days: 40\nshards: [alog-0b9e44, alog-5d1a08, alog-7f3c21]\n", "retention_days"),
    ("region: eu-central-1\nretention_days: 400\nshards: [alog-7f3c21, alog-0b9e44, alog-5d1a08]\n", "shards"),
    (GOOD + "owner: me\n", "extra keys"),
    ("region: [\n", "missing or invalid"),
])
def test_a_wrong_config_fails_a1(tmp_path: Path, config: str, why: str) -> None:
    out = results(make_ctx(tmp_path, config=config))
    assert out[A1][0] is False and why in out[A1][1]


def test_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, timeout=120, check=False, cwd=PACK / "verifier")
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- probe policy


def drive(views: list[TurnView]) -> list[Any]:
    """Run the policy with the view of each step's request (``views[i]`` for step i)."""
    turn = Turn(1, PROMPT, view=views[0])
    gen = POLICY.policy(turn)
    actions = [next(gen)]
    outputs = {"a": "SHARD-ID: alog-7f3c21", "b": "SHARD-ID: alog-0b9e44", "c": "SHARD-ID: alog-5d1a08"}
    while not isinstance(actions[-1], Final):
        step = len(actions)
        turn._view = views[min(step, len(views) - 1)]
        a = actions[-1]
        obs = Observation(text=f"Exit code 0\n{outputs[a.command[-1]]}") if isinstance(a, Shell) else Observation(text="ok")
        try:
            actions.append(gen.send(obs))
        except StopIteration:
            break
    return actions


def test_policy_writes_the_settings_its_write_step_is_shown() -> None:
    acts = drive([TurnView(history_text=PROMPT)])
    assert [a.command for a in acts if isinstance(a, Shell)] == [f"./scripts/inventory.sh {p}" for p in "abc"]
    (w,) = [a for a in acts if isinstance(a, WriteFile)]
    assert w.path == "deploy/retention.yaml" and w.content == GOOD
    assert acts[-1].text.endswith(SHOWN)


def test_policy_after_a_summary_that_restates_the_prompt() -> None:
    summary = TurnView(history_text=f"[context compacted]\nUser: {PROMPT}\nTool result: SHARD-ID: alog-5d1a08")
    acts = drive([TurnView(history_text=PROMPT)] * 3 + [summary])
    assert next(a for a in acts if isinstance(a, WriteFile)).content == GOOD


def test_policy_after_a_silent_cut_invents_nothing() -> None:
    cut = TurnView(history_text="Exit code 0\nSHARD-ID: alog-0b9e44\nExit code 0\nSHARD-ID: alog-5d1a08")
    acts = drive([TurnView(history_text=PROMPT)] * 3 + [cut])
    w = next(a for a in acts if isinstance(a, WriteFile))
    assert "region" not in w.content and "retention_days" not in w.content and "alog-7f3c21" in w.content
    assert acts[-1].text.endswith(CUT)


def test_policy_does_not_embed_the_settings() -> None:
    src = (PACK / "probe_policy.py").read_text()
    assert "eu-central-1" not in src and "400" not in src and "alog-" not in src.replace("alog-[0-9a-f]", "")


# --------------------------------------------------------------------------- adapters


def test_each_adapter_hands_the_window_to_its_harness(tmp_path: Path) -> None:
    from harnesses.claude_code.adapter import ClaudeCodeAdapter
    from harnesses.codex.adapter import config_toml

    ctx = types.SimpleNamespace(task=TASK, model="probe", gateway_base_url="http://127.0.0.1:1/v1", mcp_servers=(),
                                gateway_key="k", extra_env={}, home=tmp_path)
    text = config_toml(ctx)   # type: ignore[arg-type]
    assert "model_context_window = 100000" in text and "model_auto_compact_token_limit = 80000" in text
    assert text.index("model_context_window") < text.index("[model_providers")   # a top-level key
    env = ClaudeCodeAdapter().environment(ctx)   # type: ignore[arg-type]
    assert env["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] == "100000"
    other = types.SimpleNamespace(**{**vars(ctx), "task": load_task(PACK.parent / "E1-build-status-001")})
    assert "CLAUDE_CODE_AUTO_COMPACT_WINDOW" not in ClaudeCodeAdapter().environment(other)   # type: ignore[arg-type]
    assert "model_context_window" not in config_toml(other)   # type: ignore[arg-type]
