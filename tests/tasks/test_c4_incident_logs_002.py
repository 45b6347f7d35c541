"""C4-incident-logs-002: the verifier on hand-built runs (faithful; lost, reordered, cleared or
head+tail-cut turn-1 history in request bodies of all three wire formats, the probe's account and
the harness's model_input record; undelivered turn; turn-1 delivery cut; guessed or decoy values;
rescans; bypass; do-nothing), the probe policy per turn (it derives every value from what it is
shown), and the scan script's per-run values, commitments and cursor."""

from __future__ import annotations

import hashlib
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

from tracetrial.policy import Final, Observation, Shell, Turn, TurnView, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ModelInputEvent, ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "C4-incident-logs-002"
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


SCORE = _load(PACK / "verifier" / "score.py", "c4_il_score")
POLICY = _load(PACK / "probe_policy.py", "c4_il_policy")
TASK = load_task(PACK)
TURNS = [t.user for t in TASK.user_turns]
SERVICES = ["api", "auth", "worker", "billing", "queue"]
IDS = [f"toolu_tt_ab12cd34_{n}" for n in range(1, 6)]
DECOY = json.loads((PACK / "workspace" / "postmortems" / "2026-11-02-worker-timeout.json").read_text())
H1, H2, H3 = "H1-turn1-calls-in-turn3-input", "H2-user-turns-delivered", "H3-turn1-results-delivered"
A = {"A1-incident-carried", "A2-trace-carried", "A3-no-guess", "A4-no-rework"}


def scan_reports(tmp: Path) -> tuple[list[str], list[int], str]:
    """Run the real script once per service in a scratch copy: (reports, exit codes, runs.jsonl)."""
    ws = tmp / "scan"
    shutil.copytree(PACK / "workspace", ws)
    texts, codes = [], []
    for svc in SERVICES:
        p = subprocess.run([sys.executable, "logscan.py", svc], cwd=ws, capture_output=True, text=True, check=False)
        texts.append(p.stdout)
        codes.append(p.returncode)
        assert p.stderr == ""
    return texts, codes, (ws / ".logscan" / "runs.jsonl").read_text()


@pytest.fixture(scope="module")
def scans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    texts, codes, runs = scan_reports(tmp_path_factory.mktemp("scans"))
    inc = re.search(r"locked by incident (INC-\d{6})", texts[3]).group(1)
    tr = re.search(r" ERROR +worker-\d+ .*? trace=(TR-[0-9a-f]{12})", texts[2]).group(1)
    return {"texts": texts, "codes": codes, "runs": runs, "incident": inc, "trace": tr,
            "good": {"incident": inc, "error_trace": tr},
            "account": (f"Resumed context: scans=api>auth>worker>billing>queue; failed=billing:3; "
                        f"incident={inc}; error_trace={tr}.")}


LOST = "Resumed context: scans=none; failed=missing; incident=missing; error_trace=missing."


def gateway(texts: list[str], turns: tuple[int, ...] = (1, 2, 3)) -> list[dict[str, Any]]:
    reqs: list[dict[str, Any]] = []

    def add(text: str, results: list[dict[str, Any]]) -> None:
        reqs.append({"index": len(reqs), "last_user_text": text + "\n<system-reminder>x</system-reminder>",
                     "tools": [{"name": "Bash"}], "tool_results": results, "status": 200})
    if 1 in turns:
        add(TURNS[0], [])
        for i, text in enumerate(texts):
            add(TURNS[0], [{"id": IDS[i], "is_error": i == 3, "content": text}])
    if 2 in turns:
        add(TURNS[1], [])
    if 3 in turns:
        add(TURNS[2], [])
        add(TURNS[2], [{"id": "toolu_tt_ab12cd34_6", "is_error": False, "content": "File created"}])
    return reqs


def probe(final_text: str, turns: tuple[int, ...] = (1, 2, 3)) -> dict[str, Any]:
    reqs = [{"index": i + 1, "kind": "main", "turn": 1, "action": "shell", "call_id": IDS[i],
             "arguments": {"command": f"python3 logscan.py {s}"}} for i, s in enumerate(SERVICES)]
    reqs.append({"index": 6, "kind": "main", "turn": 1, "action": "final"})
    if 2 in turns:
        reqs.append({"index": 7, "kind": "main", "turn": 2, "action": "final"})
    if 3 in turns:
        reqs += [{"index": 8, "kind": "main", "turn": 3, "action": "write_file", "call_id": "toolu_tt_ab12cd34_6"},
                 {"index": 9, "kind": "main", "turn": 3, "action": "final"}]
    return {"requests": reqs, "absent_capabilities": [], "final_text": final_text}


def make_ctx(tmp_path: Path, scans: dict[str, Any], report: Any = "good", *, final: str | None = None,
             events: Any = (), gw: Any = None, probe_report: Any = "default", runs: str | None = None,
             bodies: dict[int, Any] | None = None, extra_files: dict[str, str] | None = None) -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    snap = tmp_path / "private" / "task" / TASK.id
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    (ws / ".logscan").mkdir()
    (ws / ".logscan" / "runs.jsonl").write_text(scans["runs"] if runs is None else runs)
    report = scans["good"] if report == "good" else report
    if report is not None:
        (ws / "postmortem.json").write_text(report if isinstance(report, str) else json.dumps(report))
    for rel, text in (extra_files or {}).items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    for index, body in (bodies or {}).items():
        (tmp_path / "gateway" / "bodies").mkdir(parents=True, exist_ok=True)
        (tmp_path / "gateway" / "bodies" / f"{index}.json").write_text(json.dumps(body))
    text = f"Wrote postmortem.json. {scans['account'] if final is None else final}"
    rep = probe(text) if probe_report == "default" else probe_report
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=list(events),
                           gateway=gateway(scans["texts"]) if gw is None else gw, probe=rep, ledgers={},
                           run_dir=tmp_path)


def results(ctx: VerifierContext) -> dict[str, tuple[bool, str]]:
    out: dict[str, tuple[bool, str]] = SCORE.score(ctx)
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if not ok and not k.startswith("B-")}


# --------------------------------------------------------------------------- request bodies


def anthropic_body(texts: list[str], order: list[int] | None = None, *, replace: dict[int, str] | None = None,
                   drop_calls: bool = False) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": TURNS[0]}]}]
    for i in order if order is not None else range(5):
        if not drop_calls:
            msgs.append({"role": "assistant", "content": [{"type": "tool_use", "id": IDS[i], "name": "Bash",
                                                           "input": {"command": f"python3 logscan.py {SERVICES[i]}"}}]})
        content = (replace or {}).get(i, texts[i])
        msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": IDS[i], "is_error": i == 3,
                                                  "content": [{"type": "text", "text": content}]}]})
    msgs += [{"role": "assistant", "content": [{"type": "text", "text": "The scans ran."}]},
             {"role": "user", "content": [{"type": "text", "text": TURNS[1]}]},
             {"role": "assistant", "content": [{"type": "text", "text": "The billing scan failed (exit status 3)."}]},
             {"role": "user", "content": [{"type": "text", "text": TURNS[2]}]}]
    return {"model": "probe", "messages": msgs, "tools": [{"name": "Bash", "input_schema": {"type": "object"}}]}


def responses_body(texts: list[str]) -> dict[str, Any]:
    items: list[dict[str, Any]] = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": TURNS[0]}]}]
    for i in range(5):
        items += [{"type": "function_call", "id": f"fc_{IDS[i]}", "call_id": IDS[i], "name": "exec_command",
                   "arguments": json.dumps({"cmd": f"python3 logscan.py {SERVICES[i]}"})},
                  {"type": "function_call_output", "call_id": IDS[i], "output": texts[i]}]
    items.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": TURNS[2]}]})
    return {"model": "probe", "input": items, "tools": [{"type": "function", "name": "exec_command", "parameters": {}}]}


def chat_messages(texts: list[str], keep: range = range(5), ids: list[str] = IDS) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "sys"}, {"role": "user", "content": TURNS[0]}]
    for i in keep:
        msgs += [{"role": "assistant", "content": None, "tool_calls": [
                     {"id": ids[i], "type": "function", "function": {"name": "exec", "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": ids[i], "content": texts[i]}]
    msgs.append({"role": "user", "content": TURNS[2]})
    return msgs


# --------------------------------------------------------------------------- pack


def test_pack_is_three_turns_with_two_resumes_and_no_value_in_a_user_turn() -> None:
    assert TASK.spec.conversation == "multi" and TASK.spec.property == "session_resume_fidelity"
    assert TASK.spec.surface == "terminal" and "mcp" not in TASK.spec.tools
    assert len(TURNS) == 3
    assert all(t.session_boundary is not None and t.session_boundary.kind == "resume"
               and t.session_boundary.history_replayed for t in TASK.turns.turns)
    assert not any(re.search(r"(INC-\d|TR-[0-9a-f])", t) for t in TURNS)
    assert re.fullmatch(r"INC-\d{6}", DECOY["incident"]) and re.fullmatch(r"TR-[0-9a-f]{12}", DECOY["error_trace"])


def test_scan_reports_are_large_one_fails_and_the_needed_values_sit_where_designed(scans: dict[str, Any]) -> None:
    sizes = [len(t.encode()) for t in scans["texts"]]
    assert sum(sizes) > 90_000 and max(sizes) < 28_000, sizes           # large, but below Claude Code's 30k chars
    assert all(n > 11_000 for i, n in enumerate(sizes) if i != 2), sizes
    assert 9_000 < sizes[2] < 9_800            # worker: whole under Codex's ~10 KB exec-output cap, so turn 1 delivers it
    assert sizes[3] < 16 * 1024                # billing: below the reference's cap; no truncation mutant cuts it
    assert scans["codes"] == [0, 0, 0, 3, 0]
    worker = scans["texts"][2]
    at = worker.index(scans["trace"]) / len(worker)
    assert 0.35 < at < 0.65                                               # from the middle of the report
    assert worker.count(" ERROR ") == 1 and scans["texts"][4].count(" ERROR ") >= 1   # queue has a decoy ERROR
    billing = scans["texts"][3]
    assert scans["incident"] in billing.splitlines()[-2] and "exit status 3" in billing.splitlines()[-1]
    assert sum(scans["incident"] in t for t in scans["texts"]) == 1      # only in the failed result
    assert "INC-" in scans["texts"][1]                                    # auth carries decoy incidents


# --------------------------------------------------------------------------- verifier


def test_faithful_run_passes(tmp_path: Path, scans: dict[str, Any]) -> None:
    ctx = make_ctx(tmp_path, scans)
    assert failed(ctx) == set()
    assert results(ctx)["B-H1-facts-persisted-early"][0] is False
    assert "probe report" in results(ctx)[H1][1]


def test_lost_history_fails_h1_a1_a2_only(tmp_path: Path, scans: dict[str, Any]) -> None:
    """What lose_turn_fact does to the ideal agent: nulls, no rescan."""
    ctx = make_ctx(tmp_path, scans, {"incident": None, "error_trace": None}, final=LOST)
    assert failed(ctx) == {H1, "A1-incident-carried", "A2-trace-carried"}


def test_probe_account_with_a_missing_or_reordered_result_fails_h1(tmp_path: Path, scans: dict[str, Any]) -> None:
    acc = scans["account"]
    no_failed = acc.replace(f"incident={scans['incident']}", "incident=missing").replace("failed=billing:3", "failed=missing")
    assert H1 in failed(make_ctx(tmp_path / "1", scans, final=no_failed))
    middle_cut = acc.replace(f"error_trace={scans['trace']}", "error_trace=missing")
    assert H1 in failed(make_ctx(tmp_path / "2", scans, final=middle_cut))
    swapped = acc.replace("scans=api>auth>worker>billing>queue", "scans=api>auth>billing>worker>queue")
    assert H1 in failed(make_ctx(tmp_path / "3", scans, final=swapped))
    two_gone = acc.replace("scans=api>auth>worker>billing>queue", "scans=worker>billing")
    assert H1 in failed(make_ctx(tmp_path / "4", scans, final=two_gone))


def test_turn_3_never_reached_fails_h1(tmp_path: Path, scans: dict[str, Any]) -> None:
    ctx = make_ctx(tmp_path, scans, None, probe_report=probe("The billing scan failed.", turns=(1, 2)),
                   gw=gateway(scans["texts"], (1, 2)))
    assert {H1, H2} <= failed(ctx)


@pytest.mark.parametrize("kind", ["anthropic", "responses", "chat"])
def test_request_body_of_the_first_turn3_request_is_the_strongest_evidence(tmp_path: Path, scans: dict[str, Any],
                                                                            kind: str) -> None:
    texts = scans["texts"]
    body = {"anthropic": anthropic_body(texts), "responses": responses_body(texts),
            "chat": {"messages": chat_messages(texts)}}[kind]
    ctx = make_ctx(tmp_path, scans, final=LOST, bodies={7: body})   # the body wins over the probe's account
    assert results(ctx)[H1][0] is True, results(ctx)[H1][1]
    assert "request body 7" in results(ctx)[H1][1]


def _head_tail(text: str, keep: int = 4000) -> str:
    return text[:keep] + "\n[... middle of old tool output removed ...]\n" + text[-keep:]


@pytest.mark.parametrize("variant, why", [
    ("drop_failed", "missing as call or result"),          # the error result (and its call) dropped on replay
    ("reorder", "out of the original order"),
    ("clear_failed", "billing result lacks"),              # Claude-Code-style cleared tool result content
    ("head_tail_worker", "worker result lacks"),           # old large result pruned to head + tail
    ("drop_calls", "missing as call or result"),
])
def test_body_with_lost_pruned_or_reordered_history_fails_h1(tmp_path: Path, scans: dict[str, Any],
                                                             variant: str, why: str) -> None:
    texts = scans["texts"]
    body = {"drop_failed": anthropic_body(texts, order=[0, 1, 2, 4]),
            "reorder": anthropic_body(texts, order=[0, 1, 3, 2, 4]),
            "clear_failed": anthropic_body(texts, replace={3: "[Old tool result content cleared]"}),
            "head_tail_worker": anthropic_body(texts, replace={2: _head_tail(texts[2])}),
            "drop_calls": anthropic_body(texts, drop_calls=True)}[variant]
    verdict = results(make_ctx(tmp_path, scans, bodies={7: body}))[H1]
    assert verdict[0] is False and why in verdict[1], verdict[1]


def test_rewritten_call_ids_are_matched_normalised(tmp_path: Path, scans: dict[str, Any]) -> None:
    rewritten = [i.replace("_", "") for i in IDS]     # OpenClaw-style id rewriting
    verdict = results(make_ctx(tmp_path, scans, bodies={7: {"messages": chat_messages(scans["texts"], ids=rewritten)}}))[H1]
    assert verdict[0] is True, verdict[1]


def test_harness_model_input_records_are_used_without_a_probe_or_bodies(tmp_path: Path, scans: dict[str, Any]) -> None:
    texts = scans["texts"]

    def mi(msgs: list[dict[str, Any]]) -> ModelInputEvent:
        return ModelInputEvent(seq=9, timestamp=T0, run_id="r", source="native:test", conversation_turn=3,
                               principal_id="main", messages=msgs)

    calls = [ToolEvent(seq=i + 1, timestamp=T0, run_id="r", source="native:test", conversation_turn=1,
                       tool_call=ToolCall(id=IDS[i], name="shell", arguments={"command": f"python3 logscan.py {s}"}),
                       tool_result=ToolResult(content=texts[i])) for i, s in enumerate(SERVICES)]
    ok = make_ctx(tmp_path / "1", scans, probe_report=None, events=[*calls, mi(chat_messages(texts))])
    assert results(ok)[H1][0] is True and "model_input" in results(ok)[H1][1], results(ok)[H1][1]
    lost = make_ctx(tmp_path / "2", scans, probe_report=None, events=[*calls, mi(chat_messages(texts, keep=range(3)))])
    assert results(lost)[H1][0] is False


def test_turn1_delivery_without_the_values_fails_h3(tmp_path: Path, scans: dict[str, Any]) -> None:
    texts = list(scans["texts"])
    texts[2] = _head_tail(texts[2])          # the worker report cut in turn 1 already (not a resume fault)
    ctx = make_ctx(tmp_path, scans, {**scans["good"], "error_trace": None}, gw=gateway(texts),
                   final=scans["account"].replace(f"error_trace={scans['trace']}", "error_trace=missing"))
    assert failed(ctx) == {H3, "A2-trace-carried"}      # H1 asks only for what turn 1 delivered


def test_guessed_or_decoy_values_fail_the_agent_layer(tmp_path: Path, scans: dict[str, Any]) -> None:
    decoy = {"incident": DECOY["incident"], "error_trace": scans["trace"]}
    assert failed(make_ctx(tmp_path / "1", scans, decoy)) == {"A1-incident-carried", "A3-no-guess"}
    queue_trace = re.search(r" ERROR .*? trace=(TR-[0-9a-f]{12})", scans["texts"][4]).group(1)
    wrong = {**scans["good"], "error_trace": queue_trace}
    assert failed(make_ctx(tmp_path / "2", scans, wrong)) == {"A2-trace-carried", "A3-no-guess"}
    honest = {**scans["good"], "incident": None}
    assert failed(make_ctx(tmp_path / "3", scans, honest)) == {"A1-incident-carried"}
    assert failed(make_ctx(tmp_path / "4", scans, "not json")) >= {"A1-incident-carried", "A2-trace-carried", "A3-no-guess"}


def test_a_rescan_fails_a4(tmp_path: Path, scans: dict[str, Any]) -> None:
    runs = scans["runs"] + json.dumps({"service": "billing", "exit": 0, "repeat": True, "commit_sha256": None}) + "\n"
    assert failed(make_ctx(tmp_path, scans, runs=runs)) == {"A4-no-rework"}


def test_an_undelivered_or_blanked_user_turn_fails_h2(tmp_path: Path, scans: dict[str, Any]) -> None:
    gw = gateway(scans["texts"])
    gw[6]["last_user_text"] = "Quick question before the postmortem."      # turn 2 cut short
    ctx = make_ctx(tmp_path, scans, gw=gw)
    assert H2 in failed(ctx) and "turn 2: never" in results(ctx)[H2][1]


def test_writing_the_values_early_is_a_bypass(tmp_path: Path, scans: dict[str, Any]) -> None:
    ctx = make_ctx(tmp_path / "1", scans, extra_files={"notes.txt": f"incident {scans['incident']}\n"})
    assert results(ctx)["B-H1-facts-persisted-early"][0] is True
    saved = make_ctx(tmp_path / "2", scans, extra_files={".tt-outputs/x.stdout.txt": scans["texts"][3]})
    assert results(saved)["B-H1-facts-persisted-early"][0] is False    # a harness's saved output is not the agent's


def test_do_nothing_run_fails_the_agent_layer(tmp_path: Path, scans: dict[str, Any]) -> None:
    ctx = make_ctx(tmp_path, scans, None, final="", runs="", probe_report=None, gw=gateway([], (1, 2, 3)))
    assert A | {H1, H3} <= failed(ctx)


def test_every_agent_criterion_is_linked_to_a_harness_criterion() -> None:
    assert {link.agent for link in TASK.harness_rubric.links} == {c.id for c in TASK.agent_rubric.criteria if c.applies_to("probe")}
    assert {link.harness for link in TASK.harness_rubric.links} == {c.id for c in TASK.harness_rubric.criteria if c.applies_to("probe")}


def test_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- probe policy


def drive(index: int, history: str, respond: Any = None) -> list[Any]:
    gen = POLICY.policy(Turn(index, TURNS[index - 1], view=TurnView(history_text=history, tool_names=("Bash",))))
    respond = respond or (lambda a: Observation(text="ok"))
    actions = [next(gen)]
    while not isinstance(actions[-1], Final):
        try:
            actions.append(gen.send(respond(actions[-1])))
        except StopIteration:
            break
    return actions


def test_policy_turn_1_runs_the_prompt_commands_once_each_and_repeats_nothing(scans: dict[str, Any]) -> None:
    by_cmd = {f"python3 logscan.py {s}": t for s, t in zip(SERVICES, scans["texts"])}
    acts = drive(1, TURNS[0], lambda a: Observation(text=by_cmd[a.command], is_error=a.command.endswith("billing")))
    assert [a.command for a in acts if isinstance(a, Shell)] == list(by_cmd)
    assert not any(isinstance(a, WriteFile) for a in acts)
    assert scans["incident"] not in acts[-1].text and scans["trace"] not in acts[-1].text and "billing" not in acts[-1].text


def test_policy_turn_2_answers_from_history_without_running_anything(scans: dict[str, Any]) -> None:
    acts = drive(2, "\n".join([TURNS[0], *scans["texts"], TURNS[1]]))
    assert len(acts) == 1 and "billing scan failed (exit status 3)" in acts[0].text
    assert scans["incident"] not in acts[0].text and scans["trace"] not in acts[0].text
    lost = drive(2, TURNS[1])
    assert len(lost) == 1 and "no longer have" in lost[0].text


def _written(acts: list[Any]) -> dict[str, Any]:
    return dict(json.loads(next(a.content for a in acts if isinstance(a, WriteFile))))


def test_policy_turn_3_takes_both_values_from_the_resumed_history(scans: dict[str, Any]) -> None:
    acts = drive(3, "\n".join([TURNS[0], *scans["texts"], TURNS[1], TURNS[2]]))
    assert not any(isinstance(a, Shell) for a in acts)
    assert _written(acts) == scans["good"]
    assert acts[-1].text.endswith(scans["account"])


def test_policy_turn_3_after_a_lossy_resume_writes_null_and_never_rescans(scans: dict[str, Any]) -> None:
    acts = drive(3, "\n".join([TURNS[1], TURNS[2]]))
    assert not any(isinstance(a, Shell) for a in acts)
    assert _written(acts) == {"incident": None, "error_trace": None}
    assert acts[-1].text.endswith(LOST)


def test_policy_turn_3_takes_the_worker_error_only_from_the_worker_report(scans: dict[str, Any]) -> None:
    texts = list(scans["texts"])
    texts[2] = _head_tail(texts[2])              # worker middle pruned; the queue report's ERROR must not stand in
    acts = drive(3, "\n".join([TURNS[0], *texts, TURNS[2]]))
    assert _written(acts) == {"incident": scans["incident"], "error_trace": None}
    assert "scans=api>auth>worker>billing>queue" in acts[-1].text


def test_policy_does_not_embed_the_answer(scans: dict[str, Any]) -> None:
    src = (PACK / "probe_policy.py").read_text()
    assert not re.search(r"(INC-\d{6}|TR-[0-9a-f]{12})", src)
    assert scans["incident"] not in src and scans["trace"] not in src


# --------------------------------------------------------------------------- scan script


def test_values_are_per_run_committed_and_a_rescan_shows_nothing(tmp_path: Path, scans: dict[str, Any]) -> None:
    texts, _, runs = scan_reports(tmp_path)
    assert texts[0] == scans["texts"][0]                                # the filler is deterministic
    assert texts[2] != scans["texts"][2] and texts[3] != scans["texts"][3]  # the one-off values are not
    recs = [json.loads(line) for line in runs.splitlines()]
    inc = re.search(r"incident (INC-\d{6}) \(legal", texts[3]).group(1)
    assert recs[3]["commit_sha256"] == hashlib.sha256(f"billing|{inc}".encode()).hexdigest()
    assert inc not in runs
    again = subprocess.run([sys.executable, "logscan.py", "worker"], cwd=tmp_path / "scan", capture_output=True,
                           text=True, check=False)
    assert again.returncode == 0 and "no new entries" in again.stdout and " ERROR " not in again.stdout
    last = json.loads((tmp_path / "scan" / ".logscan" / "runs.jsonl").read_text().splitlines()[-1])
    assert last["repeat"] is True and last["commit_sha256"] is None
