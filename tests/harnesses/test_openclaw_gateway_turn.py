"""OpenClaw sub-agent runs go through the run's own OpenClaw Gateway (``sessions_spawn`` is Gateway
work in 2026.9.6): the adapter's config, environment and flags for a delegating task, the
Gateway-backed result shape, the sub-agent registry dump, and :mod:`harnesses.openclaw.gateway_turn`'s
rule for when the run's work is over (no task queued/running, no completion awaiting delivery,
every runtime run ended)."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import sys
from pathlib import Path

import pytest

from harnesses.base import RunContext, TurnContext
from harnesses.openclaw import gateway_turn
from harnesses.openclaw.adapter import (
    GATEWAY_TOKEN_VAR,
    GATEWAY_TURN,
    STATE_TABLES,
    OpenClawAdapter,
    config_dict,
    dump_tables,
    fresh_session_id,
    gateway_token,
    uses_gateway,
)
from tests.harnesses.capture import run_context
from tracetrial.task import load_task

REPO = Path(__file__).resolve().parents[2]
DELEGATING = "L4-pending-report-001"


def ctx_for(tmp_path: Path, task: str | None = DELEGATING, run_id: str = "r1") -> RunContext:
    ctx = run_context(tmp_path, url="http://127.0.0.1:9/tt/probe/r1/v1")
    ctx = dataclasses.replace(ctx, run_id=run_id)
    return dataclasses.replace(ctx, task=load_task(REPO / "tasks" / task)) if task else ctx


def test_only_delegating_tasks_use_the_gateway(tmp_path: Path) -> None:
    assert uses_gateway(ctx_for(tmp_path / "a"))
    assert not uses_gateway(ctx_for(tmp_path / "b", None))  # the example pack: agent exec as before


def test_gateway_config_is_loopback_with_the_token_from_the_environment(tmp_path: Path) -> None:
    ctx = ctx_for(tmp_path)
    cfg = config_dict(ctx, tmp_path / "log", 41234)
    assert cfg["gateway"] == {"mode": "local", "port": 41234, "bind": "loopback",
                              "auth": {"mode": "token", "token": "${" + GATEWAY_TOKEN_VAR + "}"}}
    assert gateway_token(ctx) not in json.dumps(cfg)
    assert "gateway" not in config_dict(ctx, tmp_path / "log")


def test_token_is_per_run_stable_across_turns_and_not_derived_from_the_run_id(tmp_path: Path) -> None:
    a, b = ctx_for(tmp_path / "a", run_id="run-a"), ctx_for(tmp_path / "b", run_id="run-b")
    assert gateway_token(a) == gateway_token(a) != gateway_token(b)
    assert "run-a" not in gateway_token(a)
    env = OpenClawAdapter().environment(a)
    assert env[GATEWAY_TOKEN_VAR] == gateway_token(a)
    assert GATEWAY_TOKEN_VAR not in OpenClawAdapter().environment(ctx_for(tmp_path / "c", None))


def test_gateway_turn_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = OpenClawAdapter()
    monkeypatch.setattr(OpenClawAdapter, "binary", lambda self: Path("/opt/openclaw"))
    ctx = ctx_for(tmp_path)
    adapter.prepare(ctx, TurnContext(1, "delegate it", None, 240))
    port = adapter._gateway_ports[ctx.run_id]
    written = json.loads((ctx.home / "openclaw-state" / "openclaw.json").read_text())
    assert written["gateway"]["port"] == port
    argv = adapter.argv(ctx, TurnContext(1, "delegate it", None, 240), None)
    assert argv[:2] == [sys.executable, str(GATEWAY_TURN)]
    split = argv.index("--")
    wrapper, agent = argv[:split], argv[split + 1:]
    assert wrapper[wrapper.index("--port") + 1] == str(port)
    assert wrapper[wrapper.index("--state") + 1] == str(ctx.home / "openclaw-state")
    assert float(wrapper[wrapper.index("--deadline") + 1]) == 235
    assert wrapper[wrapper.index("--gateway-log") + 1] == str(ctx.home / "openclaw-logs" / "gateway-turn-1.log")
    fresh = fresh_session_id(ctx, TurnContext(1, "x", None, 1))
    # the pin (2026.6.9) has no --message-file: the prompt is one --message= argument
    assert agent == ["/opt/openclaw", "agent", "--session-id", fresh, "--json", "--message=delegate it"]
    assert ctx.session_id == fresh
    # a resumed turn keeps its session
    again = adapter.argv(ctx, TurnContext(2, "more", None, 240), fresh)
    assert again[again.index("--session-id") + 1] == fresh


def test_session_of_a_gateway_backed_result(tmp_path: Path) -> None:
    out = tmp_path / "turn-1.stdout"
    out.write_text(json.dumps({"runId": "r-1", "status": "ok", "summary": "completed", "result": {
        "payloads": [], "meta": {"agentMeta": {"sessionId": "sess-9"}, "stopReason": "stop"}}}))
    assert OpenClawAdapter().session_from_output(out) == "sess-9"


def _state_db(path: Path, tasks: list[tuple[str, str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path)
    con.execute("create table task_runs (task_id text, runtime text, status text, delivery_status text, "
                "created_at integer, detail_json text)")
    con.executemany("insert into task_runs values (?, ?, ?, ?, ?, ?)",
                    [(f"t{i}", *t, i, json.dumps({"n": i})) for i, t in enumerate(tasks)])
    con.commit()
    con.close()


def _runs_db(state: Path, events: list[tuple[str, str]]) -> None:
    db = state / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
    db.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(db)
    con.execute("create table trajectory_runtime_events (run_id text, event_json text)")
    con.executemany("insert into trajectory_runtime_events values (?, ?)",
                    [(rid, json.dumps({"type": kind})) for rid, kind in events])
    con.commit()
    con.close()


@pytest.mark.parametrize(("tasks", "events", "busy"), [
    ([("subagent", "running", "pending")], [("p", "session.started"), ("p", "session.ended")], True),
    ([("subagent", "succeeded", "pending")], [("p", "session.ended")], True),  # completion not yet delivered
    ([("subagent", "succeeded", "delivered")], [("p", "session.started")], True),  # announce run still open
    ([("subagent", "succeeded", "delivered")], [("p", "session.started"), ("p", "session.ended")], False),
    ([], [], False),
])
def test_the_gateway_stays_up_while_the_run_has_work(tmp_path: Path, tasks: list[tuple[str, str, str]],
                                                     events: list[tuple[str, str]], busy: bool) -> None:
    _state_db(tmp_path / "state" / "openclaw.sqlite", tasks)
    _runs_db(tmp_path, events)
    working, mark = gateway_turn.busy(tmp_path)
    assert working is busy
    if not busy:
        assert gateway_turn.busy(tmp_path)[1] == mark  # unchanged records: the same fingerprint


def _trajectory_file(state: Path, session: str, events: list[tuple[str, str]], tail: str = "") -> None:
    """A 2026.6.x session trajectory file (one JSON record per line) plus ``tail`` verbatim."""
    path = state / "agents" / "main" / "sessions" / f"{session}.trajectory.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps({"runId": rid, "type": kind}) + "\n" for rid, kind in events)
    path.write_text(lines + tail, encoding="utf-8")


@pytest.mark.parametrize(("events", "tail", "busy"), [
    ([("p", "session.started")], "", True),  # the parent's run is still open
    ([("p", "session.started"), ("p", "session.ended")], "", False),
    ([("p", "session.started"), ("p", "session.ended")], '{"runId": "c", "type": "sess', True),  # mid-write
    ([("p", "session.started"), ("p", "session.ended")], "not json\n" + json.dumps({"type": "x"}) + "\n", False),
])
def test_the_gateway_reads_the_session_trajectory_files_of_2026_6(tmp_path: Path, events: list[tuple[str, str]],
                                                                   tail: str, busy: bool) -> None:
    """2026.6.x keeps the runtime trajectory in ``agents/*/sessions/<id>.trajectory.jsonl``: an open
    run there keeps the Gateway up like an open run in the SQLite store; a line still being written
    is unknown (busy), a finished malformed line is skipped (it would otherwise hold the Gateway
    up until the deadline)."""
    _state_db(tmp_path / "state" / "openclaw.sqlite", [])
    _trajectory_file(tmp_path, "s1", events, tail)
    assert gateway_turn.busy(tmp_path)[0] is busy


def test_the_sub_agent_registry_is_dumped_with_json_columns_parsed(tmp_path: Path) -> None:
    db = tmp_path / "openclaw.sqlite"
    _state_db(db, [("subagent", "succeeded", "delivered")])
    out = dump_tables(db, tmp_path, STATE_TABLES)
    assert [p.name for p in out] == ["task_runs.jsonl"]  # absent tables are skipped
    (row,) = [json.loads(line) for line in out[0].read_text().splitlines()]
    assert row["status"] == "succeeded" and row["detail"] == {"n": 0} and "detail_json" not in row


def _fake_openclaw(tmp_path: Path) -> Path:
    """A stand-in for ``openclaw gateway run``: says it listens, then idles until stopped."""
    fake = tmp_path / "openclaw"
    fake.write_text("#!/bin/sh\necho '[gateway] http server listening (fake)'\nexec sleep 60\n")
    fake.chmod(0o755)
    return fake


@pytest.mark.parametrize(("tasks", "exit_code"), [
    ([("subagent", "succeeded", "delivered")], 0),  # the run's work settled: the agent's own status
    ([("subagent", "running", "pending")], gateway_turn.TIMEOUT_EXIT),  # cut off at the deadline
])
def test_wrapper_exit_status(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                             tasks: list[tuple[str, str, str]], exit_code: int) -> None:
    for name, value in (("STOP_RESERVE_S", 0.2), ("POLL_S", 0.05), ("QUIET_S", 0.2), ("STOP_GRACE_S", 2.0)):
        monkeypatch.setattr(gateway_turn, name, value)
    _state_db(tmp_path / "state" / "openclaw.sqlite", tasks)
    agent = [sys.executable, "-c", "import sys; print('{\"runId\": \"r\"}'); sys.exit(0)"]
    code = gateway_turn.main(["--openclaw", str(_fake_openclaw(tmp_path)), "--port", "1", "--gateway-log",
                              str(tmp_path / "gw.log"), "--state", str(tmp_path), "--deadline", "8", "--", *agent])
    assert code == exit_code
    assert ("still queued, running or awaiting delivery" in capsys.readouterr().err) is (exit_code != 0)


def test_a_cut_off_gateway_turn_is_a_timed_out_turn(tmp_path: Path) -> None:
    """The wrapper's cut-off line (its last word, after the agent's own stderr) marks the turn as
    timed out: it used the whole wall clock with its sub-agent work unfinished, never a finished
    turn that happens to exit 2; a plain exit 2 (OpenClaw's own timeout) without it is not read
    as a cut-off."""
    from harnesses.openclaw.adapter import cut_off

    err = tmp_path / "turn-1.stderr"
    err.write_text("[agent] warning: slow tool\n" + gateway_turn.CUT_OFF + "\n")
    assert cut_off(err)
    err.write_text("[agent] error: request timed out\n")
    assert not cut_off(err)
    assert not cut_off(tmp_path / "missing.stderr")


@pytest.mark.parametrize(("delegates", "stderr", "timed_out"), [
    (True, "x\n" + gateway_turn.CUT_OFF + "\n", True),   # the Gateway turn cut off: timed out
    (True, "request timed out\n", False),                 # OpenClaw's own exit 2 stays what it was
    (False, gateway_turn.CUT_OFF + "\n", False),          # not a Gateway turn: the line means nothing
])
def test_the_adapter_reports_a_cut_off_turn_as_timed_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         delegates: bool, stderr: str, timed_out: bool) -> None:
    from harnesses.base import TurnContext, TurnOutcome
    from harnesses.cli_adapter import CliAdapter
    from harnesses.openclaw import adapter as oc
    from tests.harnesses.capture import run_context

    ctx = run_context(tmp_path, url="http://127.0.0.1:1")
    err = tmp_path / "turn-1.stderr"
    err.write_text(stderr)

    def fake_turn(self: CliAdapter, ctx: object, turn: TurnContext) -> TurnOutcome:
        return TurnOutcome(index=turn.index, exit_code=gateway_turn.TIMEOUT_EXIT, timed_out=False, duration_s=1.0,
                           stdout=tmp_path / "turn-1.stdout", stderr=err)

    monkeypatch.setattr(CliAdapter, "run_turn", fake_turn)
    monkeypatch.setattr(oc, "uses_gateway", lambda _ctx: delegates)
    out = oc.OpenClawAdapter().run_turn(ctx, TurnContext(1, "go", None, 60.0))
    assert out.timed_out is timed_out and out.exit_code == gateway_turn.TIMEOUT_EXIT
    assert (out.error == gateway_turn.CUT_OFF) is timed_out
