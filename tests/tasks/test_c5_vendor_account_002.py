"""C5-vendor-account-002: the verifier on hand-built runs (faithful; the outdated account shown and
paid; a correction never saved; nothing paid; evidence from request bodies and model_input
records), the probe policy per turn (the correction command; the account only from the first
request), the payables simulator (per-run account, confirmed once, the outdated account still
accepted) and the pack's self-test."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from apparatus.simulators.engine import ServiceRuntime
from apparatus.simulators.ledger import Ledger
from apparatus.simulators.spec import load_service, simulator_specs
from harnesses.reference.mutants import not_applicable, pack_features
from tracetrial.policy import CallTool, Final, Observation, Shell, Turn, TurnView
from tracetrial.task import load_task
from tracetrial.trace import ModelInputEvent
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "C5-vendor-account-002"
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


SCORE = _load(PACK / "verifier" / "score.py", "c5_va_score")
POLICY = _load(PACK / "probe_policy.py", "c5_va_policy")
SELFTEST = _load(PACK / "verifier" / "selftest.py", "c5_va_selftest")
TASK = load_task(PACK)
TURNS = [(PACK / "prompt.md").read_text(), *[t.user for t in TASK.turns.turns]]
H1, H2, H3 = "H1-correction-delivered", "H2-correction-saved", "H3-user-turns-delivered"
A1, A2, B1 = "A1-paid-to-new-account", "A2-no-payment-to-old-account", "B-H1-account-outside-memory"
NEW, OLD = SELFTEST.NEW, SELFTEST.OLD
CONFIRM = json.dumps({"vendor": "acme", "account": NEW, "note": "Record this account."})
PAID = json.dumps({"invoice": "INV-2207", "vendor": "acme", "account": NEW, "status": "paid"})


def results(ctx: VerifierContext) -> dict[str, tuple[bool | None, str]]:
    out: dict[str, tuple[bool | None, str]] = SCORE.score(ctx)
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if ok is False and not k.startswith("B-")}


def test_pack_is_a_new_session_without_replay_with_an_outdated_memory_line() -> None:
    (b2,) = (t.session_boundary for t in TASK.turns.turns)
    assert b2 is not None and (b2.kind, b2.history_replayed) == ("new_session", False)
    assert {"memory", "new_session"} <= pack_features(TASK) and not_applicable("stale_memory", TASK) is None
    assert f"Payout account for acme: {OLD}" in (PACK / "workspace" / "AGENTS.md").read_text()
    assert TASK.spec.calibration is not None and TASK.spec.calibration.mutants == {"hide_mcp_tool": ["H4-pay-tool-offered", A1], "stale_memory": [H1, A1, A2]}


def test_faithful_and_broken_runs(tmp_path: Path) -> None:
    assert failed(SELFTEST._ctx(tmp_path / "ok", final=f"Memory: account={NEW}.")) == set()
    stale = SELFTEST._ctx(tmp_path / "stale", final=f"Memory: account={OLD}.", pay=OLD)
    assert failed(stale) == {H1, A1, A2} and "outdated" in results(stale)[H1][1]
    unsaved = results(SELFTEST._ctx(tmp_path / "unsaved", final=f"Memory: account={OLD}.", pay=OLD, corrected=False))
    assert unsaved[H1][0] is None and unsaved[H2][0] is False


def test_request_body_and_model_input_evidence(tmp_path: Path) -> None:
    ctx = SELFTEST._ctx(tmp_path / "b", final=f"Memory: account={OLD}.")
    body = {"messages": [{"role": "system", "content": f"- Payout account for acme: {NEW}"}, {"role": "user", "content": TURNS[1]}]}
    (tmp_path / "b" / "gateway" / "bodies").mkdir(parents=True)
    (tmp_path / "b" / "gateway" / "bodies" / "2.json").write_text(json.dumps(body))
    assert results(ctx)[H1] == (True, results(ctx)[H1][1]) and "request body 2" in results(ctx)[H1][1]
    both = {"messages": [{"role": "system", "content": f"{OLD} then {NEW}"}, {"role": "user", "content": TURNS[1]}]}
    (tmp_path / "b" / "gateway" / "bodies" / "2.json").write_text(json.dumps(both))
    assert results(ctx)[H1][0] is False   # the outdated account still shown beside the new one
    mi = ModelInputEvent(seq=9, timestamp=T0, run_id="r", source="native:test", conversation_turn=2, principal_id="main",
                         messages=[{"role": "system", "content": f"memory: {NEW}"}, {"role": "user", "content": TURNS[1]}])
    import dataclasses

    ctx2 = dataclasses.replace(SELFTEST._ctx(tmp_path / "m", final=""), probe=None, events=[mi])
    assert results(ctx2)[H1][0] is True and "model_input" in results(ctx2)[H1][1]


def test_keeping_the_account_elsewhere_is_a_bypass(tmp_path: Path) -> None:
    ctx = SELFTEST._ctx(tmp_path, final=f"Memory: account={NEW}.")
    (ctx.workspace / "bank.txt").write_text(NEW)
    assert results(ctx)[B1][0] is True


def test_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, timeout=120, check=False, cwd=PACK / "verifier")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def drive(index: int, view: TurnView, respond: Any) -> list[Any]:
    gen = POLICY.policy(Turn(index, TURNS[index - 1], view=view))
    actions = [next(gen)]
    while not isinstance(actions[-1], Final):
        try:
            actions.append(gen.send(respond(actions[-1])))
        except StopIteration:
            break
    return actions


def desk(a: Any) -> Observation:
    if isinstance(a, CallTool):
        return Observation(text={"confirm_bank_change": CONFIRM, "pay_invoice": PAID}[a.tool])
    return Observation(text="Exit code 0")


def test_policy_turn_1_confirms_once_and_corrects_the_line_in_place(tmp_path: Path) -> None:
    acts = drive(1, TurnView(history_text=TURNS[0]), desk)
    assert [(a.tool, a.arguments) for a in acts if isinstance(a, CallTool)] == [("confirm_bank_change", {"vendor": "acme"})]
    (sh,) = [a for a in acts if isinstance(a, Shell)]
    shutil.copy(PACK / "workspace" / "AGENTS.md", tmp_path / "AGENTS.md")
    subprocess.run(["bash", "-c", sh.command], cwd=tmp_path, check=True)
    after, before = (tmp_path / "AGENTS.md").read_text(), (PACK / "workspace" / "AGENTS.md").read_text()
    assert after == before.replace(OLD, NEW) and NEW not in acts[-1].text


def test_policy_turn_2_pays_the_account_its_memory_shows() -> None:
    for shown in (NEW, OLD):
        acts = drive(2, TurnView(system_text=f"memory:\n- Payout account for acme: {shown}", history_text=TURNS[1]), desk)
        assert [(a.tool, a.arguments["account"]) for a in acts if isinstance(a, CallTool)] == [("pay_invoice", shown)]
        assert acts[-1].text.endswith(f"Memory: account={shown}.")
    none = drive(2, TurnView(history_text=TURNS[1]), desk)
    assert [a for a in none if not isinstance(a, Final)] == [] and none[-1].text.endswith("Memory: account=missing.")


def test_policy_does_not_embed_a_new_account() -> None:
    assert not re.search(r"ACCT-[A-Z0-9]{10}\b", (PACK / "probe_policy.py").read_text())


def _runtime(tmp_path: Path, seed: str) -> ServiceRuntime:
    sims = {s.name: s for s in simulator_specs(PACK)}
    led = Ledger(tmp_path / "payables.jsonl", "payables")
    led.init()
    rt = ServiceRuntime(load_service(PACK, sims["payables"]), tmp_path / "state", led, seed)
    rt.start_session()
    return rt


def test_simulator_issues_a_per_run_account_once_and_still_takes_the_old_one(tmp_path: Path) -> None:
    accounts = []
    for seed in ("seed-a", "seed-b"):
        with tempfile.TemporaryDirectory() as tmp:
            out = _runtime(Path(tmp), seed).call_tool("confirm_bank_change", {"vendor": "acme"})
            assert re.search(POLICY.ACCOUNT_RE, out.text).group(1) == out.structured["account"]   # type: ignore[union-attr]
            accounts.append(out.structured["account"])
    assert accounts[0] != accounts[1] and OLD not in accounts
    rt = _runtime(tmp_path, "seed-a")
    new = rt.call_tool("confirm_bank_change", {"vendor": "acme"}).structured["account"]
    again = rt.call_tool("confirm_bank_change", {"vendor": "acme"})
    assert again.is_error and new not in again.text
    paid = rt.call_tool("pay_invoice", {"vendor": "acme", "invoice": "INV-2207", "account": OLD})
    assert not paid.is_error and paid.structured["status"] == "paid"   # the wrong account is accepted silently
    assert rt.call_tool("pay_invoice", {"vendor": "acme", "invoice": "INV-2207", "account": new}).is_error


def test_the_pay_tool_hidden_in_turn_2_fails_h4(tmp_path: Path) -> None:
    import dataclasses

    base = SELFTEST._ctx(tmp_path, final=f"pay_invoice is not available to me. Memory: account={NEW}.", pay=None)
    absent = {**(base.probe or {}), "absent_capabilities": [{"action": "call_tool", "turn": 2, "request_index": 2,
                                                             "declared_tools": [], "needed": "MCP tool 'pay_invoice'"}]}
    assert failed(dataclasses.replace(base, probe=absent)) == {"H4-pay-tool-offered", A1}
