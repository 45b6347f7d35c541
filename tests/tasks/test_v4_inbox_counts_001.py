"""V4-inbox-counts-001: the verifier on hand-built runs of each harness's reporting style."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.tasks import load_module as _load
from tracetrial.policy import Final, Observation, Shell, Turn, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import NativeEvent, TaskCompletionEvent, TokenUsage, TokenUsageEvent
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "V4-inbox-counts-001"
T0 = datetime(2026, 11, 30, tzinfo=UTC)
CALLS = [(900, 70), (1050, 20), (1150, 12)]


SCORE = _load(PACK / "verifier" / "score.py", "v4_score")
POLICY = _load(PACK / "probe_policy.py", "v4_policy")
TASK = load_task(PACK)
TRUTH = TASK.truth
GOOD = {"csv_files": TRUTH["csv_files"], "data_rows": TRUTH["data_rows"]}


def gateway(calls=CALLS, refused: int = 0) -> list[dict[str, Any]]:
    reqs = [{"index": i, "status": 501, "error": "Unsupported method", "usage": None, "tool_results": []}
            for i in range(refused)]
    for tin, tout in calls:
        reqs.append({"index": len(reqs), "status": 200, "error": None, "tool_results": [],
                     "usage": {"input_tokens": tin, "output_tokens": tout, "cache_read_tokens": None,
                               "cache_write_tokens": None, "reasoning_tokens": None}})
    return reqs


def usage_event(seq: int, tin: int, tout: int, scope: str, source: str = "native:test", **kw) -> TokenUsageEvent:
    return TokenUsageEvent(seq=seq, timestamp=T0, run_id="r", source=source, conversation_turn=1,
                           principal_id="main", usage=TokenUsage(input_tokens=tin, output_tokens=tout, **kw),
                           usage_scope=scope, usage_aggregate=scope != "call")


def apparatus_usage() -> list[TokenUsageEvent]:
    """The gateway-sourced usage records the assembler adds: never the harness's report."""
    return [usage_event(50 + i, tin, tout, "call", source="gateway") for i, (tin, tout) in enumerate(CALLS)]


def reference_events(model_calls: int = 3, calls=CALLS) -> list[Any]:
    evs: list[Any] = [usage_event(i + 1, tin, tout, "call") for i, (tin, tout) in enumerate(calls)]
    evs.append(TaskCompletionEvent(seq=10, timestamp=T0, run_id="r", source="native:reference", conversation_turn=1,
                                   principal_id="main", status="completed",
                                   content={"status": "completed", "model_calls": model_calls, "tool_calls": 2}))
    return evs + apparatus_usage()


def claude_events(num_turns: int = 3, tin: int = 3100, tout: int = 102) -> list[Any]:
    raw = {"type": "result", "subtype": "success", "num_turns": num_turns,
           "usage": {"input_tokens": tin, "output_tokens": tout, "cache_read_input_tokens": 0,
                     "cache_creation_input_tokens": 0}}
    return [usage_event(1, tin, tout, "turn", cache_read_tokens=0, cache_write_tokens=0).model_copy(
                update={"raw_event": raw}),
            NativeEvent(seq=2, timestamp=T0, run_id="r", source="native:claude_code/stdout", conversation_turn=1,
                        principal_id="main", native_event_type="result", status="completed", raw_event=raw),
            *apparatus_usage()]


def codex_events(tin: int = 3100, tout: int = 102) -> list[Any]:
    return [usage_event(1, tin, tout, "run"), *apparatus_usage()]


def make_ctx(tmp_path: Path, events, counts: Any = GOOD, gw=None) -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if counts is not None:
        (ws / "counts.json").write_text(json.dumps(counts))
    return VerifierContext(workspace=ws, baseline=base, truth=TRUTH, oracle=None, events=list(events),
                           gateway=gateway() if gw is None else gw, probe=None, ledgers={}, run_dir=tmp_path)


def failed(ctx) -> set[str]:
    return {k for k, (ok, _) in SCORE.score(ctx).items() if not ok}


# --------------------------------------------------------------------------- pack


def test_truth_matches_the_recomputed_counts():
    assert SCORE.real_counts(PACK / "workspace") == (TRUTH["csv_files"], TRUTH["data_rows"])
    names = {p.name for p in (PACK / "workspace" / "inbox").rglob("*") if p.is_file()}
    assert {"orders.csv.tmp", "2026-10-31-orders.csv.bak", "README.txt"} <= names  # decoys present


# --------------------------------------------------------------------------- verifier


def test_reference_style_report_passes(tmp_path):
    assert failed(make_ctx(tmp_path, reference_events())) == set()


def test_claude_style_report_passes_and_refused_requests_are_not_model_calls(tmp_path):
    assert failed(make_ctx(tmp_path, claude_events(), gw=gateway(refused=1))) == set()


def test_codex_style_report_has_usage_but_no_call_count(tmp_path):
    ctx = make_ctx(tmp_path, codex_events())
    assert failed(ctx) == {"H2-model-calls-match-gateway"}
    assert SCORE.score(ctx)["H2-model-calls-match-gateway"][1].startswith("not reported")


def test_misreported_usage_fails_h1(tmp_path):
    assert failed(make_ctx(tmp_path, claude_events(tout=55))) == {"H1-usage-matches-gateway"}
    lost_call = reference_events(calls=CALLS[:2])
    assert failed(make_ctx(tmp_path / "2", lost_call)) == {"H1-usage-matches-gateway"}


def test_an_answered_request_without_gateway_usage_leaves_h1_unscored(tmp_path):
    """The gateway's own record lacks usage for an answered request: the measured total is
    incomplete on the measuring side, so H1 is unscored (never a harness fail, never a pass)."""
    gw = gateway()
    gw[1]["usage"] = None
    out = SCORE.score(make_ctx(tmp_path, reference_events(), gw=gw))
    assert out["H1-usage-matches-gateway"][0] is None
    assert "1 answered request(s) without usage" in out["H1-usage-matches-gateway"][1]
    assert out["H2-model-calls-match-gateway"][0] is True
    partial = gateway()
    partial[2]["usage"] = {"input_tokens": 1150, "output_tokens": None}
    assert SCORE.score(make_ctx(tmp_path / "2", claude_events(), gw=partial))["H1-usage-matches-gateway"][0] is None


def test_no_reported_usage_fails_h1_even_with_a_gateway_gap(tmp_path):
    gw = gateway()
    gw[0]["usage"] = None
    out = SCORE.score(make_ctx(tmp_path, apparatus_usage(), gw=gw))
    assert out["H1-usage-matches-gateway"][0] is False and "not reported" in out["H1-usage-matches-gateway"][1]


def test_misreported_call_count_fails_h2(tmp_path):
    assert failed(make_ctx(tmp_path, reference_events(model_calls=2))) == {"H2-model-calls-match-gateway"}
    assert failed(make_ctx(tmp_path / "2", claude_events(num_turns=5))) == {"H2-model-calls-match-gateway"}


def test_apparatus_usage_alone_is_not_a_report(tmp_path):
    ctx = make_ctx(tmp_path, apparatus_usage())
    assert failed(ctx) == {"H1-usage-matches-gateway", "H2-model-calls-match-gateway"}
    assert "not reported" in SCORE.score(ctx)["H1-usage-matches-gateway"][1]


def test_native_stdout_final_record_is_read_when_the_trace_lacks_it(tmp_path):
    ctx = make_ctx(tmp_path, codex_events())
    (tmp_path / "native").mkdir()
    (tmp_path / "native" / "turn-1.stdout").write_text(
        json.dumps({"type": "system"}) + "\n" + json.dumps({"type": "result", "num_turns": 3}) + "\n")
    assert failed(ctx) == set()


@pytest.mark.parametrize("counts, bad", [
    ({"csv_files": 6, "data_rows": 44}, {"A1-csv-file-count"}),
    ({"csv_files": 5, "data_rows": 53}, {"A2-data-row-count"}),
    ({"csv_files": "5", "data_rows": 44.0}, {"A1-csv-file-count", "A2-data-row-count"}),
    (None, {"A1-csv-file-count", "A2-data-row-count"}),
])
def test_wrong_counts_fail_the_agent_layer(tmp_path, counts, bad):
    assert failed(make_ctx(tmp_path, reference_events(), counts=counts)) == bad


# --------------------------------------------------------------------------- probe policy


def test_policy_writes_what_the_count_command_printed(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    import subprocess

    gen = POLICY.policy(Turn(1, "count"))
    action = next(gen)
    assert isinstance(action, Shell)
    out = subprocess.run(["bash", "-c", action.command], cwd=ws, capture_output=True, text=True, check=True).stdout
    action = gen.send(Observation(text=f"Chunk ID: 1\nProcess exited with code 0\nOutput:\n{out}"))
    assert isinstance(action, WriteFile) and json.loads(action.content) == GOOD
    assert isinstance(gen.send(Observation(text="ok")), Final)
