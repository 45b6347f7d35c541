"""C4-fx-settlement-003: the verifier on hand-built runs (faithful by probe account, request body of
each wire format and the harness's model_input record; lost, reordered or partial resumed history;
undelivered turn-1 result; wrong-order or guessed amount; re-issue; bypass; missing evidence
unscored; do-nothing), the probe policy per turn (every value derived from what it is shown), and
the fxdesk script (per-run values, commitments, mixed kinds, re-issue logged)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import types
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tracetrial.policy import CallView, Final, Shell, Turn, TurnView, WriteFile

PACK = Path(__file__).resolve().parents[2] / "tasks" / "C4-fx-settlement-003"


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


SELF = _load(PACK / "verifier" / "selftest.py", "c4_fx_selftest")
SCORE = _load(PACK / "verifier" / "score.py", "c4_fx_score")
POLICY = _load(PACK / "probe_policy.py", "c4_fx_policy")
ADJS, FINAL, GOOD = SELF.ADJS, SELF.FINAL, SELF.GOOD
H1, H2, H3 = "H1-turn1-results-in-order-after-resume", "H2-user-turns-delivered", "H3-turn1-results-delivered"
A1, A2, B = "A1-final-amount-exact", "A2-no-reissue", "B-H1-adjustments-persisted-early"
PROMPT = (PACK / "prompt.md").read_text()
TURN2 = json.loads((PACK / "turns.json").read_text())["turns"][0]["user"]


def run(tmp_path: Path, **kwargs: Any) -> dict[str, tuple[bool | None, str]]:
    out = SCORE.score(SELF.build(tmp_path, **kwargs))
    assert set(out) == {H1, H2, H3, A1, A2, B}
    return out


def verdicts(out: dict[str, tuple[bool | None, str]]) -> dict[str, bool | None]:
    return {k: v[0] for k, v in out.items()}


@pytest.mark.parametrize("name,kwargs,want", SELF.CASES, ids=[c[0] for c in SELF.CASES])
def test_selftest_cases(tmp_path: Path, name: str, kwargs: dict[str, Any], want: set[str]) -> None:
    assert SELF.failed(run(tmp_path, **kwargs)) == want, name


def test_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- wire formats of the resumed body


def responses_body(adjs: list[tuple[str, str]]) -> dict[str, Any]:
    """Codex 0.145 (Responses API, as archived): function_call / function_call_output items, the
    output a text with Codex's own exec header before the command's output."""
    items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "p"}]}]
    for n, (ref, op) in enumerate(adjs):
        items.append({"type": "function_call", "call_id": f"call_{n}", "name": "shell", "arguments": "{}"})
        items.append({"type": "function_call_output", "call_id": f"call_{n}",
                      "output": f"Chunk ID: 9b0067\nWall time: 0.0000 seconds\nProcess exited with code 0\n"
                                f"Original token count: 57\nOutput:\n{SELF.result_text(ref, op)}"})
    return {"input": items}


def chat_body(adjs: list[tuple[str, str]]) -> dict[str, Any]:
    """OpenClaw (Chat Completions, as archived): assistant tool_calls (ids like calltt498e0b181)
    and role: tool messages carrying the output whole."""
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "p"}]
    for n, (ref, op) in enumerate(adjs):
        msgs.append({"role": "assistant", "content": None,
                     "tool_calls": [{"id": f"calltt498e0b18{n}", "type": "function",
                                     "function": {"name": "exec", "arguments": '{"command":"python3 fxdesk.py next"}'}}]})
        msgs.append({"role": "tool", "tool_call_id": f"calltt498e0b18{n}", "content": SELF.result_text(ref, op)})
    return {"messages": msgs}


@pytest.mark.parametrize("make", [SELF.anthropic_body, responses_body, chat_body], ids=["anthropic", "responses", "chat"])
def test_body_in_order_passes_and_reorder_or_loss_fails(tmp_path: Path, make: Any) -> None:
    ok = run(tmp_path / "ok", settlement=GOOD, body=make(ADJS))
    assert ok[H1][0] is True and "request body" in ok[H1][1]
    swapped = run(tmp_path / "swap", settlement=GOOD, body=make([ADJS[0], ADJS[2], ADJS[1]]))
    assert swapped[H1][0] is False and "out of the order" in swapped[H1][1]
    partial = run(tmp_path / "part", settlement=GOOD, body=make(ADJS[:2]))
    assert partial[H1][0] is False and "absent" in partial[H1][1]


def test_body_wins_over_the_probe_account(tmp_path: Path) -> None:
    out = run(tmp_path, settlement=GOOD, final=SELF.account(ADJS, FINAL), body=chat_body(ADJS[1:]))
    assert out[H1][0] is False


def test_model_input_record_when_no_body_and_no_probe(tmp_path: Path) -> None:
    good = run(tmp_path / "a", settlement=GOOD, probe=False, model_input=chat_body(ADJS)["messages"])
    assert good[H1][0] is True and "model_input" in good[H1][1]
    lost = run(tmp_path / "b", settlement=GOOD, probe=False, model_input=[{"role": "assistant", "content": "Issued."}])
    assert lost[H1][0] is False


def test_probe_account_out_of_order_fails(tmp_path: Path) -> None:
    out = run(tmp_path, settlement=GOOD, final=SELF.account([ADJS[1], ADJS[0], ADJS[2]], FINAL))
    assert out[H1][0] is False


# --------------------------------------------------------------------------- missing evidence, agent mistakes


def test_no_evidence_of_the_resumed_input_is_unscored(tmp_path: Path) -> None:
    out = run(tmp_path, settlement=GOOD, probe=False)
    assert out[H1][0] is None and "no evidence" in out[H1][1]


def test_turn1_result_not_delivered_blames_the_harness(tmp_path: Path) -> None:
    out = run(tmp_path, settlement=GOOD, final=SELF.account(ADJS, FINAL), delivered=[0, 2])
    assert out[H3][0] is False and "never delivered: [2]" in out[H3][1]
    assert out[H1][0] is None and out[A1][0] is None          # truth cannot be established: unscored, never a pass


def test_undelivered_turn2_fails_h2_and_leaves_h1_unscored(tmp_path: Path) -> None:
    out = run(tmp_path, settlement=GOOD, final=SELF.account(ADJS, FINAL), turns_shown=(True, False))
    assert out[H2][0] is False and out[H1][0] is None


@pytest.mark.parametrize("settlement,why", [
    (None, "missing"), ("{not json", "invalid"), ({"final_amount": "49799.60"}, "49799.59"),
    ({"final_amount": True}, "49799.59"), ({"final_amount": "about 49800"}, "49799.59"),
    ({"final_amount": None, "refs": None}, "None"),
])
def test_agent_amount_mistakes(tmp_path: Path, settlement: Any, why: str) -> None:
    out = run(tmp_path, settlement=settlement, final=SELF.account(ADJS, FINAL))
    assert out[A1][0] is False and why in out[A1][1]


def test_amount_as_number_is_accepted(tmp_path: Path) -> None:
    assert run(tmp_path, settlement={"final_amount": 49799.59}, final=SELF.account(ADJS, FINAL))[A1][0] is True


def test_do_nothing_fails_the_agent_layer(tmp_path: Path) -> None:
    out = verdicts(run(tmp_path, issued=[], final=None))
    assert out[A1] is False and out[A2] is False
    assert out[H3] is None and out[H1] is None


def test_reissue_and_bypass(tmp_path: Path) -> None:
    out = run(tmp_path / "r", settlement=GOOD, final=SELF.account(ADJS, FINAL), extra=2)
    assert out[A2] == (False, "adjustments issued in the whole run: 5 (expected 3)")
    ctx = SELF.build(tmp_path / "b", settlement=GOOD, final=SELF.account(ADJS, FINAL))
    (ctx.workspace / "notes.txt").write_text(f"{ADJS[0][0]} first\n")
    assert SCORE.score(ctx)[B][0] is True
    assert run(tmp_path / "c", settlement=GOOD, final=SELF.account(ADJS, FINAL))[B][0] is False


def test_lose_turn_fact_shape_is_linked(tmp_path: Path) -> None:
    """The mutant's run: turn 1 intact and delivered, the resumed request shows no adjustment, the
    probe writes nulls and does not re-issue: H1 and A1 fail, H2, H3 and A2 pass."""
    out = verdicts(run(tmp_path, settlement={"final_amount": None, "refs": None}, final=SELF.account([], None)))
    assert out == {H1: False, H2: True, H3: True, A1: False, A2: True, B: False}
    links = {(lk["harness"], lk["agent"]) for lk in
             __import__("yaml").safe_load((PACK / "verifier" / "harness_score.yaml").read_text())["links"]}
    assert (H1, A1) in links and (H1, A2) in links and (H3, A1) in links


# --------------------------------------------------------------------------- probe policy


def drive(turn: Turn) -> list[Any]:
    gen, out = POLICY.policy(turn), []
    try:
        action = next(gen)
        while True:
            out.append(action)
            action = gen.send(None)
    except StopIteration:
        pass
    return out


def test_policy_turn1_runs_the_listed_commands_once_and_names_nothing() -> None:
    acts = drive(Turn(1, PROMPT))
    assert [a.command for a in acts if isinstance(a, Shell)] == ["python3 fxdesk.py next"] * 3
    assert isinstance(acts[-1], Final) and "ADJ-" not in acts[-1].text
    assert isinstance(drive(Turn(1, "hello"))[-1], Final)


def _turn2(calls: list[tuple[str, str]] | None = None, history: str = "") -> Turn:
    views = tuple(CallView("shell", "{}", SELF.result_text(r, o)) for r, o in calls or [])
    return Turn(2, TURN2, view=TurnView(history_text=history, calls=views))


def test_policy_turn2_applies_the_shown_adjustments_in_the_shown_order() -> None:
    acts = drive(_turn2(ADJS))
    written = json.loads(next(a for a in acts if isinstance(a, WriteFile)).content)
    assert written == GOOD
    assert SELF.account(ADJS, FINAL) in acts[-1].text
    other = drive(_turn2([ADJS[1], ADJS[0], ADJS[2]]))
    assert json.loads(next(a for a in other if isinstance(a, WriteFile)).content)["final_amount"] == "49765.70"


def test_policy_turn2_falls_back_to_history_and_writes_nulls_when_lost() -> None:
    hist = "".join(SELF.result_text(r, o) for r, o in ADJS)
    acts = drive(_turn2(history=hist))
    assert json.loads(next(a for a in acts if isinstance(a, WriteFile)).content)["final_amount"] == FINAL
    lost = drive(_turn2(ADJS[:2]))
    assert json.loads(next(a for a in lost if isinstance(a, WriteFile)).content) == {"final_amount": None, "refs": None}
    assert not [a for a in lost if isinstance(a, Shell)]          # never re-issues
    assert "final=missing" in lost[-1].text


# --------------------------------------------------------------------------- the fxdesk script


def test_fxdesk_commits_mixes_kinds_and_logs_reissues(tmp_path: Path) -> None:
    import shutil
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    outs = [subprocess.run([sys.executable, "fxdesk.py", "next"], cwd=ws, capture_output=True, text=True,
                           check=True).stdout for _ in range(4)]
    lines = [POLICY.ADJ_RE.search(o).groups() for o in outs]
    recs = [json.loads(x) for x in (ws / ".fxdesk" / "issued.jsonl").read_text().splitlines()]
    assert [r["n"] for r in recs] == [1, 2, 3, 4]
    for (ref, op), rec in zip(lines, recs):
        assert rec["commit_sha256"] == hashlib.sha256(f"{ref}|{op}".encode()).hexdigest()
        assert ref not in (ws / ".fxdesk" / "issued.jsonl").read_text()
    assert {r["kind"] for r in recs[:3]} == {"multiply", "fee"}
    assert len({ref for ref, _ in lines}) == 4
    bad = subprocess.run([sys.executable, "fxdesk.py"], cwd=ws, capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and len((ws / ".fxdesk" / "issued.jsonl").read_text().splitlines()) == 4


def test_order_changes_the_result() -> None:
    opening = Decimal("48250.00")
    assert POLICY.settle(opening, ADJS) != POLICY.settle(opening, [ADJS[1], ADJS[0], ADJS[2]])
    assert str(SCORE.settle(opening, [o for _, o in ADJS])) == FINAL
