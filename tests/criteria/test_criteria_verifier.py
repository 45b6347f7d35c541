"""The task's score.py: results by criterion id, missing ids, malformed values, crashes."""

from __future__ import annotations

from typing import Any

from tests.criteria.conftest import check, context_for

SCORE_PY = '''
import json

def score(ctx):
    report = json.loads((ctx.workspace / "report.json").read_text())
    return {
        "A1": report["status"] == ctx.truth["status"],
        "A2": (False, "the report lists 1 of 2 items"),
        "H9": "yes",
        "H5": (None, "the harness's final records state no model-call count"),
        "H6": (None, ""),
        "seen": (len(ctx.events) > 0 and isinstance(ctx.gateway, list) and ctx.run_dir.is_dir(), "ctx ok"),
    }
'''


def _ctx(make_pack, make_run, score_py=SCORE_PY, report='{"status": "failed"}'):
    pack = make_pack(truth={"status": "failed"}, score_py=score_py)
    run = make_run(pack)
    run.workspace["report.json"] = report
    return context_for(run)


def test_verifier_results_by_id(make_pack, make_run):
    ctx = _ctx(make_pack, make_run)
    assert check(ctx, "verifier", id="A1").passed is True
    failed = check(ctx, "verifier", id="A2")
    assert failed.passed is False and failed.reason == "the report lists 1 of 2 items"
    assert check(ctx, "verifier", id="seen").passed is True


def test_verifier_defaults_to_the_criterion_id(make_pack, make_run):
    ctx = _ctx(make_pack, make_run)
    from criteria.registry import evaluate_rule
    from tracetrial.rubric import RuleSpec

    assert evaluate_rule(RuleSpec(kind="verifier"), "A1", ctx).passed is True


def test_missing_id_fails_with_reason(make_pack, make_run):
    out = check(_ctx(make_pack, make_run), "verifier", id="A3")
    assert out.passed is False and "score.py returned no result for 'A3'" in out.reason


def test_malformed_value_is_unscored(make_pack, make_run):
    out = check(_ctx(make_pack, make_run), "verifier", id="H9")
    assert out.passed is None and "expected bool, (bool, str) or (None, reason)" in out.reason


def test_not_applicable_is_unscored_with_its_reason_never_a_pass(make_pack, make_run):
    out = check(_ctx(make_pack, make_run), "verifier", id="H5")
    assert out.passed is None
    assert out.reason == "not applicable: the harness's final records state no model-call count"
    blank = check(_ctx(make_pack, make_run), "verifier", id="H6")  # a reason is required
    assert blank.passed is None and "expected bool, (bool, str) or (None, reason)" in blank.reason


def test_crash_makes_every_verifier_criterion_unscored(make_pack, make_run):
    ctx = _ctx(make_pack, make_run, report="{broken")
    for cid in ("A1", "A2"):
        out = check(ctx, "verifier", id=cid)
        assert out.passed is None
        assert "JSONDecodeError: Expecting property name enclosed in double quotes" in out.reason
        assert "not a harness defect" in out.reason


def test_running_the_verifier_leaves_no_bytecode_in_the_snapshot(make_pack, make_run):
    ctx = _ctx(make_pack, make_run)
    check(ctx, "verifier", id="A1")
    assert not list((ctx.task.root / "verifier").glob("__pycache__"))


API_SCORE_PY = '''
from tracetrial.verify import call_ids


def score(ctx):
    event = ctx.first_tool_event("close_ticket")
    shown = ctx.deliveries(ids=call_ids(event))
    code = ctx.issued("tickets", "lock_code")
    data, why = ctx.workspace_json("close.json", want=dict)
    return {
        "H1": (bool(shown) and code in shown[0].content and shown[0].error_flag()[0] is True,
               f"{len(shown)} delivered result(s) of {event.tool_call.name if event else None}"),
        "A1": (False, why) if why else (data.get("error_code") == code, f"close.json = {data}"),
    }
'''


def test_a_score_py_on_the_verifier_api_reads_the_archive(make_pack, make_run):
    from tests.criteria.archive_factory import gateway_request, tool_event

    pack = make_pack(score_py=API_SCORE_PY)
    run = make_run(pack, ledgers={"tickets": [
        {"kind": "request", "tool": "close_ticket", "arguments": {"ticket_id": "T-1"}},
        {"kind": "issued", "tool": "close_ticket", "detail": {"name": "lock_code", "value": "E-LOCKED-1"}}]})
    run.events.append(tool_event("mcp__tickets__close_ticket", {"ticket_id": "T-1"}, "E-LOCKED-1",
                                 is_error=True, call_id="toolu_tt_1"))
    run.gateway.append(gateway_request(1, results=[("toolu-tt-1", '{"error": {"code": "E-LOCKED-1"}}', True)]))
    run.workspace["close.json"] = '{"closed": false, "error_code": "E-LOCKED-1"}'
    ctx = context_for(run)
    h1 = check(ctx, "verifier", id="H1")
    assert h1.passed is True and h1.reason == "1 delivered result(s) of mcp__tickets__close_ticket"
    assert check(ctx, "verifier", id="A1").passed is True


def test_a_missing_deliverable_fails_with_the_apis_reason(make_pack, make_run):
    ctx = context_for(make_run(make_pack(score_py=API_SCORE_PY)))
    h1, a1 = check(ctx, "verifier", id="H1"), check(ctx, "verifier", id="A1")
    assert h1.passed is False and h1.reason == "0 delivered result(s) of None"   # no matching call
    assert a1.passed is False and a1.reason.startswith("close.json missing or invalid: [Errno 2]")


def test_a_verifier_process_that_cannot_start_is_an_error_not_an_exception(make_pack, make_run, monkeypatch) -> None:
    """run_verifier never raises: a process that cannot be started (the forkserver unreachable)
    is the outcome's error."""
    import multiprocessing.process

    from criteria import verifier as mod

    def boom(self) -> None:
        raise BrokenPipeError("forkserver gone")

    ctx = _ctx(make_pack, make_run)
    monkeypatch.setattr(mod, "_SPARE", None)  # no process started ahead either
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", boom)
    outcome = mod.run_verifier(ctx.task, ctx.run, timeout_s=5)
    assert outcome.ran is False and outcome.error is not None
    assert "could not start the verifier process" in outcome.error and "forkserver gone" in outcome.error


def test_warm_up_starts_the_forkserver_and_never_raises(monkeypatch) -> None:
    from multiprocessing import forkserver

    from criteria import verifier as mod

    mod.warm_up()
    assert forkserver._forkserver._forkserver_pid is not None  # type: ignore[attr-defined]
    monkeypatch.setattr(forkserver, "ensure_running", lambda: (_ for _ in ()).throw(OSError("no")))
    mod.warm_up()  # a failure is left to the first verifier run


PID_SCORE_PY = """
import os


def score(ctx):
    return {"A1": (True, f"pid {os.getpid()} pgid {os.getpgid(0)}")}
"""


def test_each_scoring_runs_in_a_fresh_process_of_its_own_group(make_pack: Any, make_run: Any) -> None:
    """A verifier process is started ahead of its job (so scoring only hands it over), yet
    every run still gets a fresh process that leads its own process group."""
    from criteria import verifier as mod

    pack = make_pack(score_py=PID_SCORE_PY)
    ctx = context_for(make_run(pack))
    mod.warm_up()
    reasons = []
    for _ in range(3):
        out = mod.run_verifier(ctx.task, ctx.run, timeout_s=30)
        assert out.error is None and out.results["A1"][0] is True
        reasons.append(out.results["A1"][1])
    pids = [r.split()[1] for r in reasons]
    assert len(set(pids)) == 3 and all(r.split()[1] == r.split()[3] for r in reasons)
