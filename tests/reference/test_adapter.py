"""The reference adapter: registration, mutant selection, per-turn sessions and budgets, the
ask-user bridge to the benchmark's simulated user, and its normalized trace framed by the
kernel's assembler."""

from __future__ import annotations

import dataclasses
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from harnesses.assemble import assemble
from harnesses.base import RunContext, TurnContext
from harnesses.reference.adapter import ReferenceAdapter
from harnesses.reference.mutants import MUTANTS, UnknownMutantError
from harnesses.registry import UnknownHarnessError, get_harness
from tests.reference.chat_server import ChatServer, Reply, Request, call, say
from tracetrial.archive import RunPaths
from tracetrial.task import SessionBoundary, TaskPack, Turn, Turns, load_task
from tracetrial.trace_io import load_events, write_events

REPO = Path(__file__).resolve().parents[2]
E1 = REPO / "tasks" / "E1-build-status-001"


def test_registry_and_mutant_selection() -> None:
    ref = get_harness("reference")
    assert isinstance(ref, ReferenceAdapter) and ref.variant is None and ref.unavailable_reason() is None
    caps = ref.capabilities
    assert all([caps.mcp, caps.multi_turn, caps.new_session, caps.subagents, caps.ask_user, caps.native_permissions])
    assert ref.wire_format == "chat" and ref.version().startswith("0.1.0+src.")
    for name in MUTANTS:
        assert get_harness(f"reference+{name}").full_name == f"reference+{name}"
    with pytest.raises(UnknownMutantError) as err:
        get_harness("reference+hide_exitcode")
    assert isinstance(err.value, UnknownHarnessError)
    assert "hide_exitcode" in str(err.value) and all(m in str(err.value) for m in MUTANTS)


def test_mutant_table_documents_every_defect() -> None:
    import harnesses.reference.mutants as mod

    for name, m in MUTANTS.items():
        assert f"``{name}``" in mod.__doc__ and m.component in mod.__doc__


def _ctx(tmp_path: Path, task: TaskPack, server: ChatServer, run_id: str = "run-1") -> RunContext:
    paths = RunPaths(tmp_path / "run")
    paths.make()
    ws = tmp_path / "ws"
    shutil.copytree(task.workspace, ws)
    home = tmp_path / "home"
    home.mkdir()
    return RunContext(run_id=run_id, task=task, paths=paths, workspace=ws, model="scripted",
                      gateway_base_url=server.base_url, gateway_key="sk-tt-gateway-test-key", mcp_servers=[],
                      permission_mode="bypass", wall_clock_s=60, home=home)


def _last_user(req: Request) -> str:
    return next(m["content"] for m in reversed(req.messages) if m["role"] == "user")


def test_turns_sessions_budget_and_assembled_trace(tmp_path: Path) -> None:
    base = load_task(E1)
    spec = base.spec.model_copy(update={"budgets": base.spec.budgets.model_copy(update={"max_model_calls": 4})})
    task = dataclasses.replace(base, spec=spec, turns=Turns(turns=[
        Turn(user="Second: what did the build print?"),
        Turn(user="Third: fresh start.", session_boundary=SessionBoundary(kind="new_session"))]))

    def script(req: Request) -> Reply:
        last = _last_user(req)
        if last.startswith("Run the build"):
            return say("built") if req.tool_result("b1") else call("b1", "shell", {"command": "python3 build.py"})
        if last.startswith("Second"):
            return say("it printed BUILD SUCCESS")
        return call("x1", "shell", {"command": "true"})

    server = ChatServer(script).start()
    try:
        ctx = _ctx(tmp_path, task, server)
        adapter = ReferenceAdapter()
        outcomes = [adapter.run_turn(ctx, TurnContext(i, t.user, t.session_boundary, 60))
                    for i, t in enumerate(task.user_turns, start=1)]
    finally:
        server.stop()
    assert [o.exit_code for o in outcomes] == [0, 0, 1]  # turn 3 hits the run's model-call budget
    assert outcomes[0].session_id == outcomes[1].session_id != outcomes[2].session_id
    t1, _, t2, t3 = server.requests
    assert t1.tool_result("b1") is None and "BUILD SUCCESS" in json.dumps(t2.messages)  # resumed history
    assert [m["role"] for m in t3.messages] == ["system", "user"]  # new session, no replay
    assert json.loads(outcomes[2].stdout.read_text().splitlines()[-1])["status"] == "budget_exhausted"
    assert {p.name for p in adapter.collect(ctx)} >= {"reference-events.jsonl", "turn-1.stdout", "turn-3.stderr",
                                                      f"{outcomes[0].session_id}.json"}

    trace = adapter.normalize(ctx.paths, outcomes, ctx.run_id)
    assert trace.trace_complete and trace.structured_trace_status == "complete"
    now = datetime.now(UTC)
    events = assemble(run_id=ctx.run_id, task_id=task.id, harness=adapter.full_name, model="scripted",
                      form="multi", turns=task.user_turns, outcomes=outcomes, native=trace, gateway_records=[],
                      started=now, finished=now, failure=None)
    write_events(ctx.paths.events, events)
    loaded = load_events(ctx.paths.events)
    starts = [i for i, e in enumerate(loaded) if e.event_type == "conversation_turn_started"]
    assert len(starts) == 3 and [e.seq for e in loaded] == list(range(1, len(loaded) + 1))
    build = next(e for e in loaded if e.event_type == "tool" and e.tool_call.id == "b1")
    assert build.tool_result.exit_code == 3 and build.conversation_turn == 1


def test_ask_user_bridge_answers_from_the_simulated_user(tmp_path: Path) -> None:
    pack = tmp_path / "tasks" / E1.name
    shutil.copytree(E1, pack, ignore=shutil.ignore_patterns("__pycache__"))
    raw = yaml.safe_load((pack / "task.yaml").read_text())
    raw["tools"] = ["shell", "write_file", "ask_user"]
    (pack / "task.yaml").write_text(yaml.safe_dump(raw))
    (pack / "truth.json").write_text(json.dumps({"exit_code": 3, "build": "failed", "ask_user": {
        "answers": [{"match": "(?i)channel", "answer": "#release-7"}]}}))
    task = load_task(pack)
    server = ChatServer({"main": [call("q1", "ask_user", {"question": "Which channel should I post to?"}),
                                  say("ok")]}).start()
    try:
        ctx = _ctx(tmp_path, task, server)
        outcome = ReferenceAdapter().run_turn(ctx, TurnContext(1, task.prompt, None, 60))
    finally:
        server.stop()
    assert outcome.exit_code == 0, outcome.stderr.read_text()
    assert server.requests[-1].tool_result("q1") == "#release-7"
    ledger = [json.loads(x) for x in (ctx.paths.private / "ledgers" / "_ask_user.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in ledger] == ["request", "issued"]
    assert ledger[0]["detail"]["question"] == "Which channel should I post to?"
