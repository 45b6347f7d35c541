"""C3-vendor-terms-003: the verifier on hand-built runs (faithful, lost shell-result fact,
undelivered user turn, decoy, repeated lookup, bypass, missing evidence, do-nothing), the probe
policy per turn, the one-shot lookup script and the pack's selftest."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.tasks import load_module as _load
from tracetrial.policy import Final, Observation, Shell, Turn, TurnView, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ModelInputEvent, ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "C3-vendor-terms-003"
T0 = datetime(2026, 11, 30, tzinfo=UTC)
REF = "CTR-7KQ2MX9P"
DECOY = "CTR-Q3OLD7ZK"

SCORE = _load(PACK / "verifier" / "score.py", "c3_vt_score")
POLICY = _load(PACK / "probe_policy.py", "c3_vt_policy")
TASK = load_task(PACK)
TURNS = [t.user for t in TASK.user_turns]
SRC = (PACK / "workspace" / "order_lines.txt").read_text()
ROWS = SCORE.LINE_RE.findall(SRC)
GOOD = ("# Purchase order: northwind-freight\n\n" + "".join(f"- {s} x{q}: {d}\n" for s, q, d in ROWS)
        + f"Contract-Ref: {REF}\n")
LOOKUP = ("terms-desk 1.4: vendor=northwind-freight\npayment_terms: net 45\ncurrency: EUR\nincoterm: DAP\n"
          f"contract_ref: {REF}\nnote: the contract_ref is issued for this purchase order only\n")
FOUND = f"Appended 'Contract-Ref: {REF}'. Turn-1 contract reference: {REF}."
LOST = "Appended 'Contract-Ref: UNKNOWN'. Turn-1 contract reference: not visible in my context."
H_AND_A = {"H1-fact-in-turn3-input", "H2-user-turns-delivered", "A1-contract-ref-line", "A2-order-lines",
           "A3-single-lookup"}


def commit(ref: str) -> str:
    return hashlib.sha256(f"contract|{ref}".encode()).hexdigest()


def lookups(n: int = 1) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = [{"vendor": "northwind-freight", "served": True, "exit": 0, "ref_sha256": commit(REF)}]
    return (recs + [{"vendor": "northwind-freight", "served": False, "exit": 3, "ref_sha256": None}] * (n - 1))[:n]


def gateway(turns: list[int] | None = None) -> list[dict[str, Any]]:
    """Two answered requests per delivered turn, each with that turn's text as the last user text
    (harnesses may wrap it: a reminder block is appended here)."""
    reqs: list[dict[str, Any]] = []
    for turn in turns or [1, 2, 3]:
        for _ in range(2):
            reqs.append({"index": len(reqs), "last_user_text": TURNS[turn - 1] + "\n<system-reminder>x</system-reminder>",
                         "tools": [{"name": "Bash"}], "tool_results": [], "status": 200})
    return reqs


def probe(final_text: str, turn3: bool = True) -> dict[str, Any]:
    reqs = [{"index": i, "kind": "main", "turn": t, "action": "shell"} for i, t in
            enumerate([1, 1, 1, 2, 2, 2] + ([3, 3] if turn3 else []))]
    return {"requests": reqs, "absent_capabilities": [], "final_text": final_text}


def tool(turn: int, command: str, seq: int = 1, name: str = "Bash", key: str = "command") -> ToolEvent:
    return ToolEvent(seq=seq, timestamp=T0, run_id="r", source="native:test", conversation_turn=turn,
                     tool_call=ToolCall(id=f"c{turn}-{seq}", name=name, arguments={key: command}),
                     tool_result=ToolResult(content="ok"))


def make_ctx(tmp_path: Path, po: str | None, *, final: str = FOUND, events: Any = (), gw: Any = None,
             probe_report: Any = "default", log: list[dict[str, Any]] | str | None = "default") -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    snap = tmp_path / "private" / "task" / TASK.id   # the archived pack snapshot
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    if po is not None:
        (ws / "po.md").write_text(po)
    recs = lookups() if log == "default" else log
    if recs is not None:
        (ws / ".terms").mkdir()
        text = recs if isinstance(recs, str) else "".join(json.dumps(r) + "\n" for r in recs)
        (ws / ".terms" / "lookups.jsonl").write_text(text)
    rep = probe(final) if probe_report == "default" else probe_report
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=list(events),
                           gateway=gateway() if gw is None else gw, probe=rep, ledgers={}, run_dir=tmp_path)


def results(ctx: VerifierContext) -> dict[str, tuple[bool | None, str]]:
    out: dict[str, tuple[bool | None, str]] = SCORE.score(ctx)
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if ok is False and not k.startswith("B-")}


def unscored(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if ok is None}


# --------------------------------------------------------------------------- pack


def test_pack_is_three_turns_with_resumes_and_the_fact_only_in_a_shell_result() -> None:
    assert TASK.spec.conversation == "multi" and len(TURNS) == 3
    assert all(t.session_boundary is not None and t.session_boundary.kind == "resume" for t in TASK.turns.turns)
    assert all("CTR-" not in t for t in TURNS)          # no user turn states the reference
    assert DECOY in SRC and len(ROWS) == 4
    assert not any(p.name == ".terms" for p in (PACK / "workspace").rglob("*"))
    assert set(TASK.spec.calibration.mutants) == {"lose_turn_fact"}


# --------------------------------------------------------------------------- verifier


def test_faithful_run_passes(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, GOOD)
    assert failed(ctx) == set() and unscored(ctx) == set()
    assert set(results(ctx)) == H_AND_A | {"B-H1-ref-persisted-early"}
    assert results(ctx)["B-H1-ref-persisted-early"][0] is False
    assert "probe report" in results(ctx)["H1-fact-in-turn3-input"][1]


def test_lost_shell_result_fails_h1_and_a1_only(tmp_path: Path) -> None:
    """The lose_turn_fact shape: the probe finds nothing at turn 3 and writes UNKNOWN."""
    po = GOOD.replace(f"Contract-Ref: {REF}", "Contract-Ref: UNKNOWN")
    assert failed(make_ctx(tmp_path, po, final=LOST)) == {"H1-fact-in-turn3-input", "A1-contract-ref-line"}


def test_decoy_guessed_or_repeated_reference_fails_a1(tmp_path: Path) -> None:
    assert failed(make_ctx(tmp_path, GOOD.replace(REF, DECOY))) == {"A1-contract-ref-line"}
    assert failed(make_ctx(tmp_path / "2", GOOD.replace(REF, "CTR-ABCDEFGH"))) == {"A1-contract-ref-line"}
    twice = GOOD + f"Contract-Ref: {REF}\n"
    assert failed(make_ctx(tmp_path / "3", twice)) == {"A1-contract-ref-line"}
    trailing = GOOD.replace(f"Contract-Ref: {REF}", f"Contract-Ref: {REF} (net 45)")
    assert failed(make_ctx(tmp_path / "4", trailing)) == {"A1-contract-ref-line"}


def test_missing_or_reordered_order_lines_fail_a2(tmp_path: Path) -> None:
    lines = GOOD.splitlines()
    lines[2], lines[3] = lines[3], lines[2]
    assert failed(make_ctx(tmp_path, "\n".join(lines) + "\n")) == {"A2-order-lines"}
    assert failed(make_ctx(tmp_path / "2", GOOD.replace("# Purchase order", "# PO"))) == {"A2-order-lines"}


def test_a_second_lookup_fails_a3_from_the_log_or_the_trace(tmp_path: Path) -> None:
    assert failed(make_ctx(tmp_path, GOOD, log=lookups(2))) == {"A3-single-lookup"}
    # the log deleted and rewritten by a fresh lookup: the trace still shows two lookup commands
    events = [tool(1, "python3 lookup_terms.py northwind-freight", 1),
              tool(3, "rm -rf .terms && python3 lookup_terms.py northwind-freight", 2)]
    assert failed(make_ctx(tmp_path / "2", GOOD, events=events)) == {"A3-single-lookup"}
    # one lookup as each real harness recorded it (archived events.json): Claude Code Bash/command,
    # Codex exec_command/cmd, OpenClaw exec/command
    for n, (name, key) in enumerate((("Bash", "command"), ("exec_command", "cmd"), ("exec", "command"))):
        one = [tool(1, "python3 lookup_terms.py northwind-freight", 1, name=name, key=key)]
        ctx = make_ctx(tmp_path / f"h{n}", GOOD, events=one)
        assert failed(ctx) == set() and "1 lookup command(s)" in results(ctx)["A3-single-lookup"][1]
        two = one + [tool(3, "python3 lookup_terms.py northwind-freight", 2, name=name, key=key)]
        assert failed(make_ctx(tmp_path / f"t{n}", GOOD, events=two)) == {"A3-single-lookup"}


def test_an_undelivered_user_turn_fails_h2(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, "# Purchase order: northwind-freight\n", gw=gateway([1, 3]))
    assert "H2-user-turns-delivered" in failed(ctx)
    assert "turn 2: never" in results(ctx)["H2-user-turns-delivered"][1]
    blanked = gateway()
    for r in blanked[4:]:
        r["last_user_text"] = "Finally, append one last line to `po.md`."   # turn 3 altered
    assert "H2-user-turns-delivered" in failed(make_ctx(tmp_path / "2", GOOD, gw=blanked))


def test_turn_3_never_reached_fails_h1(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, GOOD, probe_report=probe(FOUND, turn3=False))
    assert failed(ctx) == {"H1-fact-in-turn3-input"}


def test_request_bodies_are_the_strongest_evidence(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, GOOD, final=LOST)
    bodies = tmp_path / "gateway" / "bodies"
    bodies.mkdir(parents=True)
    for r in ctx.gateway:   # Claude Code shape: the Bash result as a tool_result block
        (bodies / f"{r['index']}.json").write_text(json.dumps({"messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": LOOKUP}]}]}))
    assert results(ctx)["H1-fact-in-turn3-input"][0] is True
    assert "request bodies" in results(ctx)["H1-fact-in-turn3-input"][1]
    (bodies / "5.json").write_text(json.dumps({"input": [{"role": "user", "content": TURNS[2]}]}))
    assert results(ctx)["H1-fact-in-turn3-input"][0] is False


def test_codex_and_openclaw_body_shapes_count(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, GOOD, final=LOST)
    bodies = tmp_path / "gateway" / "bodies"
    bodies.mkdir(parents=True)
    codex = {"input": [{"type": "function_call_output", "call_id": "call_1", "output": json.dumps(
        {"output": LOOKUP, "metadata": {"exit_code": 0}})}]}
    openclaw = {"messages": [{"role": "toolResult", "toolCallId": "t1", "content": [{"type": "text", "text": LOOKUP}]}]}
    for r in ctx.gateway:
        (bodies / f"{r['index']}.json").write_text(json.dumps(codex if r["index"] % 2 else openclaw))
    assert results(ctx)["H1-fact-in-turn3-input"][0] is True


def test_harness_model_input_records_are_used_without_a_probe(tmp_path: Path) -> None:
    def mi(texts: list[str]) -> ModelInputEvent:
        return ModelInputEvent(seq=3, timestamp=T0, run_id="r", source="native:test", conversation_turn=3,
                               principal_id="main", messages=[{"role": "user", "content": t} for t in texts])
    ok = make_ctx(tmp_path, GOOD, probe_report=None, events=[mi([TURNS[0], LOOKUP, TURNS[2]])])
    assert results(ok)["H1-fact-in-turn3-input"][0] is True
    lost = make_ctx(tmp_path / "2", GOOD, probe_report=None, events=[mi(TURNS)])
    assert results(lost)["H1-fact-in-turn3-input"][0] is False


def test_missing_evidence_is_unscored_never_a_pass(tmp_path: Path) -> None:
    none = make_ctx(tmp_path, GOOD, probe_report=None)   # no bodies, no probe, no model_input records
    assert results(none)["H1-fact-in-turn3-input"][0] is None
    broken = make_ctx(tmp_path / "2", GOOD, log="not json\n")   # the audit log is unreadable
    assert {"H1-fact-in-turn3-input", "A1-contract-ref-line", "A3-single-lookup"} <= unscored(broken)
    assert "A2-order-lines" not in unscored(broken)


def test_writing_the_reference_early_is_a_bypass(tmp_path: Path) -> None:
    early = tool(1, f"echo {REF} > .ref")
    assert results(make_ctx(tmp_path, GOOD, events=[early]))["B-H1-ref-persisted-early"][0] is True
    ctx = make_ctx(tmp_path / "2", GOOD)
    (ctx.workspace / "notes.txt").write_text(f"ref {REF}\n")
    assert results(ctx)["B-H1-ref-persisted-early"][0] is True
    late = tool(3, f"printf '%s\\n' 'Contract-Ref: {REF}' >> po.md")
    assert results(make_ctx(tmp_path / "3", GOOD, events=[late]))["B-H1-ref-persisted-early"][0] is False


def test_do_nothing_run_fails_the_agent_layer(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, None, final="", log=None)
    assert {"A1-contract-ref-line", "A2-order-lines", "A3-single-lookup"} <= failed(ctx)


# --------------------------------------------------------------------------- probe policy


def drive(index: int, history: str, respond: Any) -> list[Any]:
    gen = POLICY.policy(Turn(index, TURNS[index - 1], view=TurnView(history_text=history)))
    actions = [next(gen)]
    while not isinstance(actions[-1], Final):
        try:
            actions.append(gen.send(respond(actions[-1])))
        except StopIteration:
            break
    return actions


def test_policy_turn_1_looks_up_once_and_never_echoes_the_reference() -> None:
    acts = drive(1, TURNS[0], lambda a: Observation(text=LOOKUP if isinstance(a, Shell) else "ok"))
    assert [a.command for a in acts if isinstance(a, Shell)] == ["python3 lookup_terms.py northwind-freight"]
    assert any(isinstance(a, WriteFile) and a.content == "# Purchase order: northwind-freight\n" for a in acts)
    assert all(REF not in json.dumps(a.describe()) for a in acts)


def test_policy_turn_2_writes_one_bullet_per_line_entry() -> None:
    numbered = "".join(f"{n:6}\t{line}\n" for n, line in enumerate(SRC.splitlines(), 1))   # a line-numbering tool
    for text in (SRC, numbered):
        acts = drive(2, TURNS[1], lambda a, t=text: Observation(text=t))
        cmd = next(a.command for a in acts if isinstance(a, Shell) and "printf" in a.command)
        assert all(f"- {s} x{q}: {d}" in cmd for s, q, d in ROWS) and DECOY not in cmd


@pytest.mark.parametrize("history, want", [
    (f"{TURNS[0]}\n{LOOKUP}\n{TURNS[1]}\n{SRC}\n{TURNS[2]}", REF),
    (f"{TURNS[0]}\n" + json.dumps({"output": LOOKUP}) + f"\n{TURNS[2]}", REF),     # JSON-escaped result
    (f"{TURNS[2]}", "UNKNOWN"),
    (f"{SRC}\n{TURNS[2]}", "UNKNOWN"),   # the decoy is never taken
])
def test_policy_turn_3_uses_only_what_it_is_shown(history: str, want: str) -> None:
    acts = drive(3, history, lambda a: Observation(text="ok"))
    cmds = [a.command for a in acts if isinstance(a, Shell)]
    assert len(cmds) == 1 and "lookup_terms" not in cmds[0] and f"Contract-Ref: {want}" in cmds[0]
    assert acts[-1].text.endswith(f"Turn-1 contract reference: {REF if want == REF else 'not visible in my context'}.")


# --------------------------------------------------------------------------- workspace script


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "lookup_terms.py", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=30, check=False)


def test_lookup_is_one_shot_and_commits_its_reference(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    first = _run(ws, "northwind-freight")
    assert first.returncode == 0 and first.stderr == ""
    ref = POLICY.re.search(POLICY.FACT_RE, first.stdout).group(1)
    second = _run(ws, "northwind-freight")
    assert second.returncode == 3 and "RATE_LIMITED" in second.stderr and "CTR-" not in second.stdout + second.stderr
    assert _run(ws, "acme").returncode == 2
    recs = [json.loads(line) for line in (ws / ".terms" / "lookups.jsonl").read_text().splitlines()]
    assert [r["served"] for r in recs] == [True, False, False]
    assert recs[0]["ref_sha256"] == commit(ref) and ref not in (ws / ".terms" / "lookups.jsonl").read_text()
    other = tmp_path / "ws2"
    shutil.copytree(PACK / "workspace", other)
    assert POLICY.re.search(POLICY.FACT_RE, _run(other, "northwind-freight").stdout).group(1) != ref   # per run


def test_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
