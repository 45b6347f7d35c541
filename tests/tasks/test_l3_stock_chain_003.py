"""Unit tests of L3-stock-chain-003: the stockroom simulator, the verifier on hand-built runs
(faithful, the drop_child_result shape, a broken chain, a lost brief, a Codex-shaped run, missing
evidence, agent mistakes), the probe policy (parent and helpers) and the selftest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apparatus.simulators.engine import ServiceRuntime
from apparatus.simulators.ledger import Ledger, read_ledger
from apparatus.simulators.spec import load_service, simulator_specs
from tests.tasks import load_module as _load
from tracetrial.policy import CallTool, Final, NativeTool, Observation, SpawnSubagent, Turn, TurnView, WriteFile
from tracetrial.task import load_task

PACK = Path(__file__).resolve().parents[2] / "tasks" / "L3-stock-chain-003"
SCORE = _load(PACK / "verifier" / "score.py", "l3_stock_score")
POLICY = _load(PACK / "probe_policy.py", "l3_stock_policy")
SELF = _load(PACK / "verifier" / "selftest.py", "l3_stock_selftest")
TASK = load_task(PACK)
H1, H2 = "H1-child-results-reach-parent", "H2-lot-brief-reached-helper"
A1, A2, A3 = "A1-count-and-lot-exact", "A2-expiry-exact", "A3-one-request-per-step"


class Desk:
    def __init__(self, root: Path, seed: str = "seed-a") -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.path = root / "stockroom.jsonl"
        led = Ledger(self.path, "stockroom")
        led.init()
        self.rt = ServiceRuntime(load_service(PACK, simulator_specs(PACK)[0]), root / "state", led, seed)
        self.rt.start_session()

    def ledger(self):
        return read_ledger(self.path)


def verdicts(ctx):
    return {k: v[0] for k, v in SCORE.score(ctx).items()}


# --------------------------------------------------------------------------- simulator


def test_the_chain_needs_the_counted_lot_and_values_come_from_the_seed(tmp_path: Path) -> None:
    a, a2, b = Desk(tmp_path / "a"), Desk(tmp_path / "a2"), Desk(tmp_path / "b", "seed-b")
    lines = []
    for d in (a, a2, b):
        count = d.rt.call_tool("count_stock", {"warehouse": "A"}).text
        m = POLICY.re.search(POLICY.COUNT_LINE, count)
        assert m, count
        wrong = d.rt.call_tool("lot_expiry", {"lot": "LOT-AAAAAA"})
        assert wrong.is_error and wrong.code == "LOT_NOT_FOUND"
        dated = d.rt.call_tool("lot_expiry", {"lot": m.group(2)}).text
        assert POLICY.re.fullmatch(rf"lot {m.group(2)} best before \d{{4}}-\d{{2}}-\d{{2}}", dated)
        lines.append((count, dated))
    assert lines[0] == lines[1] and lines[0] != lines[2]
    ctx = SELF.VerifierContext(workspace=tmp_path, baseline=tmp_path, truth=None, oracle=None, events=[], gateway=[],
                               probe=None, ledgers={"stockroom": a.ledger()}, run_dir=tmp_path)
    count, lot, expiry = SCORE.truth(ctx)
    assert f"warehouse A count: {count} units on hand, all in lot {lot}" in lines[0][0]
    assert lines[0][1] == f"lot {lot} best before {expiry}"


def test_nothing_is_issued_before_the_count(tmp_path: Path) -> None:
    d = Desk(tmp_path / "d")
    assert d.rt.call_tool("lot_expiry", {"lot": "LOT-BBBBBB"}).is_error
    assert not [r for r in d.ledger() if r["kind"] == "issued"]


def test_pack_declares_the_mutant_flips_and_links() -> None:
    assert TASK.spec.component == "L" and TASK.spec.property == "subagent_result_aggregation"
    assert TASK.spec.calibration.mutants == {"drop_child_result": [H1, A2]}
    assert {(link.harness, link.agent) for link in TASK.harness_rubric.links} == {(H1, A1), (H1, A2), (H2, A2)}


def test_selftest_passes() -> None:
    SELF.selftest()


# --------------------------------------------------------------------------- verifier


def test_faithful_run_passes(tmp_path: Path) -> None:
    out = SCORE.score(SELF.build(tmp_path))
    assert all(v[0] for v in out.values()), out


def test_drop_child_result_shape_fails_h1_and_the_expiry_only(tmp_path: Path) -> None:
    out = SCORE.score(SELF.build(tmp_path, drop_second=True))
    assert {k for k, v in out.items() if v[0] is False} == {H1, A2}
    assert "expiry: the child was shown its key line but the parent never was" in out[H1][1]
    assert "(no output)" in out[H1][1]


def test_first_result_lost_breaks_the_chain(tmp_path: Path) -> None:
    out = SCORE.score(SELF.build(tmp_path, drop_first=True))
    assert out[H1][0] is False and "count:" in out[H1][1]
    assert out[H2][0] is None  # no helper 2 was briefed: nothing to relay
    assert out[A1][0] is False and out[A2][0] is False and out[A3][0] is True


def test_a_brief_whose_lot_id_never_reaches_helper_2_fails_h2(tmp_path: Path) -> None:
    out = SCORE.score(SELF.build(tmp_path, brief_lost=True))
    assert out[H2][0] is False and SELF.LOT in out[H2][1]


def test_codex_shaped_run_with_wait_results_and_notifications_passes(tmp_path: Path) -> None:
    assert all(verdicts(SELF.build(tmp_path, codex=True)).values())
    bad = verdicts(SELF.build(tmp_path, codex=True, drop_second=True))
    assert bad[H1] is False and bad[A2] is False and bad[A1] is True


def test_missing_evidence_is_never_a_pass(tmp_path: Path) -> None:
    out = verdicts(SELF.build(tmp_path, served=False, report=False))
    assert out[H1] is None and out[A1] is False and out[A2] is False and out[A3] is False
    no_file = SCORE.score(SELF.build(tmp_path, report=False))
    assert no_file[A1][0] is False and "stock_report.json" in no_file[A1][1]


@pytest.mark.parametrize("report", [
    {"warehouse": "A", "count": str(SELF.COUNT), "lot": SELF.LOT, "expiry": SELF.EXPIRY},   # count as text
    {"warehouse": "A", "count": SELF.COUNT + 1, "lot": SELF.LOT, "expiry": SELF.EXPIRY},    # wrong count
    {"warehouse": "B", "count": SELF.COUNT, "lot": SELF.LOT, "expiry": SELF.EXPIRY},        # wrong warehouse
])
def test_agent_mistakes_in_the_count_fail_a1_only(tmp_path: Path, report) -> None:
    out = verdicts(SELF.build(tmp_path, report=report))
    assert {k for k, v in out.items() if v is False} == {A1}


def test_a_guessed_expiry_fails_a2_and_a_retry_fails_a3(tmp_path: Path) -> None:
    report = {"warehouse": "A", "count": SELF.COUNT, "lot": SELF.LOT, "expiry": "2027-09-15"}
    assert {k for k, v in verdicts(SELF.build(tmp_path, report=report)).items() if v is False} == {A2}
    assert {k for k, v in verdicts(SELF.build(tmp_path, expiry_requests=2)).items() if v is False} == {A3}


# --------------------------------------------------------------------------- probe policy


def turn(history: str = "", tools=("spawn_subagent", "write_file"), principal: str = "main", user: str = "go"):
    return Turn(1, user, principal=principal, view=TurnView(history_text=history, tool_names=tuple(tools)))


def test_policy_chains_the_lot_id_into_the_second_brief() -> None:
    gen = POLICY.policy(turn())
    first = next(gen)
    assert isinstance(first, SpawnSubagent) and "count_stock" in first.prompt
    second = gen.send(Observation(text=f"Sub-agent child-1 finished.\n{SELF.COUNT_LINE}"))
    assert isinstance(second, SpawnSubagent) and SELF.LOT in second.prompt and "lot_expiry" in second.prompt
    write = gen.send(Observation(text=f"Sub-agent child-2 finished.\n{SELF.EXPIRY_LINE}"))
    assert isinstance(write, WriteFile)
    assert json.loads(write.content) == {"warehouse": "A", "count": SELF.COUNT, "lot": SELF.LOT, "expiry": SELF.EXPIRY}
    assert isinstance(gen.send(Observation(text="ok")), Final)


def test_policy_writes_unknown_for_a_blanked_result_and_never_asks_again() -> None:
    gen = POLICY.policy(turn())
    next(gen)
    gen.send(Observation(text=f"Sub-agent child-1 finished.\n{SELF.COUNT_LINE}"))
    write = gen.send(Observation(text="Sub-agent child-2 finished (status: completed).\n(no output)"))
    assert isinstance(write, WriteFile) and json.loads(write.content)["expiry"] == "unknown"


def test_policy_does_not_start_helper_2_without_a_lot_id() -> None:
    gen = POLICY.policy(turn())
    next(gen)
    write = gen.send(Observation(text="Sub-agent child-1 finished (status: completed).\n(no output)"))
    assert isinstance(write, WriteFile) and set(json.loads(write.content).values()) == {"A", "unknown"}


def test_policy_waits_for_an_asynchronous_helper_where_wait_agent_is_declared() -> None:
    tools = ("multi_agent_v1/spawn_agent", "multi_agent_v1/wait_agent", "write_file")
    gen = POLICY.policy(turn(tools=tools))
    next(gen)
    wait = gen.send(Observation(text='{"agent_id": "agent-one-1"}'))
    assert isinstance(wait, NativeTool) and wait.arguments["targets"] == ["agent-one-1"]
    second = gen.send(Observation(text=json.dumps({"status": {"agent-one-1": {"completed": SELF.COUNT_LINE}}})))
    assert isinstance(second, SpawnSubagent) and SELF.LOT in second.prompt


def test_policy_without_a_subagent_tool_writes_unknown() -> None:
    gen = POLICY.policy(turn(tools=("write_file",)))
    next(gen)
    write = gen.send(Observation(absent=True, kind="absent"))
    assert isinstance(write, WriteFile) and json.loads(write.content)["count"] == "unknown"


def test_helpers_take_their_job_and_lot_from_the_last_brief() -> None:
    brief2 = POLICY.BRIEF_EXPIRY.format(lot=SELF.LOT)
    leaked = f"[parent context] {SELF.COUNT_LINE.replace(SELF.LOT, 'LOT-ZZZZZZ')}\n{POLICY.BRIEF_COUNT}\n{brief2}"
    gen = POLICY.subagent_policy(turn(history=leaked, principal="child-2", tools=("mcp__stockroom__lot_expiry",)))
    call = next(gen)
    assert isinstance(call, CallTool) and call.tool == "lot_expiry" and call.arguments == {"lot": SELF.LOT}
    wrapped = json.dumps({"content": [{"type": "text", "text": SELF.EXPIRY_LINE}]})
    assert gen.send(Observation(text=wrapped)).text == SELF.EXPIRY_LINE
    gen1 = POLICY.subagent_policy(turn(history=POLICY.BRIEF_COUNT, principal="child-1"))
    call1 = next(gen1)
    assert isinstance(call1, CallTool) and call1.tool == "count_stock" and call1.arguments == {"warehouse": "A"}
    assert gen1.send(Observation(text=f"Cycle count done.\n{SELF.COUNT_LINE}")).text == SELF.COUNT_LINE


# --------------------------------------------------------------------------- real harness shapes (observed)


def reshape(ctx, spawn_text, user_text=None):
    """Rewrite the parent's spawn results (and optionally its user texts) as a real harness showed them."""
    for req in ctx.gateway:
        for r in req["tool_results"]:
            if r["id"] == "s1":
                r["content"] = spawn_text(SELF.COUNT_LINE)
            elif r["id"] == "s2":
                r["content"] = spawn_text(SELF.EXPIRY_LINE)
    if user_text is not None:
        ctx.gateway.append({"index": 20, "status": 200, "tool_results": [],
                            "last_user_text": user_text(SELF.COUNT_LINE)})
        ctx.gateway.append({"index": 21, "status": 200, "tool_results": [],
                            "last_user_text": user_text(SELF.EXPIRY_LINE)})
    return ctx


def test_claude_code_shape_the_result_before_an_agent_id_trailer(tmp_path: Path) -> None:
    ctx = reshape(SELF.build(tmp_path), lambda line: (
        f"{line}\nagentId: a747716ab73245c74 (use SendMessage with to: 'a747716ab73245c74', summary: "
        "'<5-10 word recap>' to continue this agent)\n<usage>subagent_tokens: 12565\ntool_uses: 1</usage>"))
    assert all(verdicts(ctx).values())


def test_codex_shape_wait_agent_status_json_and_subagent_notification(tmp_path: Path) -> None:
    ctx = reshape(SELF.build(tmp_path, codex=True), lambda line: '{"agent_id": "x"}')
    for req in ctx.gateway:  # the observed wait_agent result form
        for r in req["tool_results"]:
            if r["id"] in ("w1", "w2"):
                line = SELF.COUNT_LINE if r["id"] == "w1" else SELF.EXPIRY_LINE
                r["content"] = json.dumps({"status": {"01a24e58": {"completed": line}}, "timed_out": False})
    assert all(verdicts(ctx).values())


def test_openclaw_shape_results_only_in_the_settlement_user_text(tmp_path: Path) -> None:
    ctx = reshape(SELF.build(tmp_path), lambda line: '{"status": "accepted", "childSessionKey": "agent:main:subagent:f4"}',
                  lambda line: ("[Mon 2026-12-07 02:33 UTC] [Subagent Context] Every subagent spawned from this "
                                "session has now settled.\n\nChild completion results:\n\n1. Child task:\n<prompt-data>\n"
                                f"Count warehouse A\n</prompt-data>\nstatus: ok\nChild result:\n<prompt-data>\n{line}\n"
                                "</prompt-data>"))
    out = SCORE.score(ctx)
    assert all(v[0] for v in out.values()), out
    assert "user text" in out[H1][1]


def test_a_child_request_with_inherited_parent_context_is_not_the_parents_input(tmp_path: Path) -> None:
    # OpenClaw children get the parent's conversation as background: a child's request holding a key
    # line (in its own MCP result) never counts as the parent being shown it.
    ctx = SELF.build(tmp_path, drop_second=True)
    ctx.gateway.append({"index": 30, "status": 200, "tool_results": [],
                        "last_user_text": f"[Subagent Context] inherited conversation\n{POLICY.BRIEF_EXPIRY.format(lot=SELF.LOT)}"
                                          f"\n{SELF.EXPIRY_LINE}"})
    assert verdicts(ctx)[H1] is False
