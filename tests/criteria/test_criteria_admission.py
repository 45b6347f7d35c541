"""Apparatus admission and hard gates (SPEC §9): every decision is recorded with its reason."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import criteria.admission as admission_mod
from criteria import score_run
from tests.criteria.archive_factory import event, tool_event, write_task_pack
from tracetrial.archive import RunArchive, RunPaths
from tracetrial.redact import Redactor
from tracetrial.task import load_task


def reseal(run_dir: Path) -> None:
    """Re-write the manifest after a deliberate change (so only the tested check fails)."""
    RunArchive(RunPaths(run_dir), Redactor()).seal(json.loads((run_dir / "summary.json").read_text())["run_id"])


def score(run_dir: Path, task=None, **kw):
    task = task or load_task(next((run_dir / "private" / "task").iterdir()))
    return score_run(task, run_dir, **kw)


def decision(result, check):
    return next(d for d in [*result.admission, *result.hard_gates] if d.check == check)


@pytest.fixture
def pack(make_pack):
    return make_pack(spec={"budgets": {"max_tool_calls": 2}})


@pytest.fixture
def good(pack, make_run):
    run = make_run(pack)
    run.events.append(tool_event("Bash", {"command": "ls"}, "out.txt", exit_code=0))
    run.workspace["out.txt"] = "x"
    return run


def test_clean_run_is_admitted_with_every_decision_recorded(good):
    result = score(good.build())
    assert result.admitted and result.attribution.label == "clean" and result.effective_score == 100.0
    checks = [d.check for d in result.admission]
    assert checks == ["result_record", "identity", "eligibility", "lifecycle", "manifest", "trace",
                      "structured_trace", "gateway_records", "started", "turns_ran", "probe_record", "baseline"]
    assert all(d.ok and d.reason for d in result.admission)


def _not_admitted(result, check, text):
    d = decision(result, check)
    assert not d.ok and text in d.reason, d.reason
    assert not result.admitted and result.effective_score == 0.0
    assert (result.attribution.label, result.attribution.label_rule) == ("apparatus_invalid", 1)
    assert all(v.passed is None and v.reason.startswith("not scored: run not admitted") for v in result.verdicts)


def test_identity_result_vs_trace(good):
    run_dir = good.build()
    data = json.loads((run_dir / "result.json").read_text())
    data["identity"]["run_id"] = "run-other"
    (run_dir / "result.json").write_text(json.dumps(data))
    reseal(run_dir)
    _not_admitted(score(run_dir), "identity", "events.json run_id is 'run-0001', result.json says 'run-other'")


def test_identity_task_vs_snapshot(good, tmp_path):
    run_dir = good.build()
    newer = write_task_pack(tmp_path / "other", spec={"budgets": {"max_tool_calls": 2}, "revision": 2})
    result = score(run_dir, load_task(newer))
    _not_admitted(result, "identity", "the task's revision is 2, result.json says 1")
    assert "differs from the run's snapshot in task.yaml" in decision(result, "identity").reason


def test_identity_directory_layout(good):
    run_dir = good.build()
    moved = run_dir.parent / "other-harness"
    run_dir.rename(moved)
    _not_admitted(score(moved), "identity", "does not match identity")


def test_manifest_hashes_and_coverage(good):
    run_dir = good.build()
    (run_dir / "workspace" / "out.txt").write_text("changed after sealing")
    (run_dir / "native" / "late.txt").write_text("unlisted")
    result = score(run_dir)
    _not_admitted(result, "manifest", "workspace/out.txt: content changed since the manifest was written")
    assert "native/late.txt: not covered by the manifest" in decision(result, "manifest").reason


def test_the_seal_the_cell_just_wrote_scores_like_a_fresh_check(good: Any) -> None:
    """The cell flow hands scoring the manifest it has just written (nothing written since):
    the same score and files as scoring that re-hashes the archive, and the write-time check
    still refuses a cell tampered with after admission."""
    from tracetrial.archive import SealCheck, check_seal

    run_dir = good.build()
    out = run_dir.parents[3]  # <out>/traces/<task>/<model>/<harness>: the twin keeps the layout
    shutil.copytree(out, out.parent / "twin", symlinks=True)
    twin = out.parent / "twin" / run_dir.relative_to(out)
    manifest = check_seal(run_dir).manifest
    assert manifest is not None
    fresh = score_run(load_task(next((twin / "private" / "task").iterdir())), twin)
    handed = score_run(load_task(next((run_dir / "private" / "task").iterdir())), run_dir,
                       sealed=SealCheck("sealed", (), manifest))
    assert handed.model_dump() == fresh.model_dump() and handed.admitted
    assert (run_dir / "artifacts/llm_judge/combined_score.json").read_bytes() == \
        (twin / "artifacts/llm_judge/combined_score.json").read_bytes()
    assert check_seal(run_dir).ok


def test_a_handed_seal_is_only_for_admission_the_write_still_checks(good: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A seal handed to scoring replaces admission's re-hash only: when the archive changes after
    admission (the verifier runs the pack's own code), scoring writes nothing, as before."""
    from tracetrial.archive import SealCheck, check_seal

    run_dir = good.build()
    manifest = check_seal(run_dir).manifest
    assert manifest is not None
    real_admit = admission_mod.admit

    def admit_then_tamper(*args: Any, **kw: Any) -> Any:
        result = real_admit(*args, **kw)
        (run_dir / "workspace" / "out.txt").write_text("changed after admission")
        return result

    monkeypatch.setattr("criteria.engine.admit", admit_then_tamper)
    score_run(load_task(next((run_dir / "private" / "task").iterdir())), run_dir, sealed=SealCheck("sealed", (), manifest))
    assert not (run_dir / "artifacts/llm_judge/combined_score.json").exists()
    assert check_seal(run_dir).state == "tampered"


def test_structured_trace_status(pack, make_run):
    _not_admitted(score(make_run(pack, structured_trace_status="integrity_failure").build()),
                  "structured_trace", "'integrity_failure'")
    partial = score(make_run(pack, structured_trace_status="partial").build())
    assert partial.admitted and "partial" in decision(partial, "structured_trace").reason


def test_lifecycle_and_eligibility(pack, make_run):
    _not_admitted(score(make_run(pack, status="apparatus_error").build()), "lifecycle", "'apparatus_error'")
    _not_admitted(score(make_run(pack, lifecycle=False).build()), "lifecycle", "no run_started record")
    probe = {"run_id": "run-0001", "task_id": pack.name, "requests": [], "absent_capabilities": [],
             "apparatus_errors": ["unscripted request 3"], "final_text": None}
    _not_admitted(score(make_run(pack, probe=probe).build()), "lifecycle", "unscripted request 3")
    unsupported = make_run(pack, result_overrides={"eligibility": "unsupported", "eligibility_reason": "no MCP"})
    _not_admitted(score(unsupported.build()), "eligibility", "'unsupported': no MCP")


def test_trace_baseline_and_probe_records(good):
    run_dir = good.build()
    (run_dir / "events.json").write_text("[{]")
    reseal(run_dir)
    _not_admitted(score(run_dir), "trace", "not valid JSON")
    run_dir = good.build()
    shutil.rmtree(run_dir / "private" / "baseline")
    (run_dir / "gateway" / "probe.json").unlink()
    reseal(run_dir)
    result = score(run_dir)
    _not_admitted(result, "baseline", "frozen baseline private/baseline/ is missing")
    assert not decision(result, "probe_record").ok


def test_tool_call_cap_proven_exceeded_zeroes_the_score(pack, make_run):
    run = make_run(pack)
    run.events += [tool_event("Bash", {"command": f"step {i}"}, "ok", call_id=f"c{i}") for i in range(3)]
    run.workspace["out.txt"] = "x"
    result = score(run.build())
    gate = decision(result, "tool_call_cap")
    assert result.admitted and not gate.ok and "3 tool calls on a complete trace exceed budgets.max_tool_calls=2" in gate.reason
    assert result.S == 100.0 and result.effective_score == 0.0 and not result.combined_pass


def test_tool_call_cap_not_proven_on_an_incomplete_trace(pack, make_run):
    run = make_run(pack, trace_complete=False)
    run.events += [tool_event("Bash", {}, "ok", call_id=f"c{i}") for i in range(3)]
    result = score(run.build())
    gate = decision(result, "tool_call_cap")
    assert gate.ok and "not proven" in gate.reason


def test_tool_calls_blocked_by_a_budget_gate_do_not_count(pack, make_run):
    run = make_run(pack)
    run.events += [tool_event("Bash", {}, "ok", call_id=f"c{i}") for i in range(3)]
    run.events.append(event("policy_event", policy_kind="budget", decision="blocked", tool_call_id="c2"))
    assert decision(score(run.build()), "tool_call_cap").ok


@pytest.fixture
def sim_pack(make_pack):
    return make_pack(spec={"conversation": "simulator", "simulators": [{"name": "tickets", "service": "kv"}]})


def _sim_run(make_run, pack, entries):
    run = make_run(pack)
    run.events.append(tool_event("mcp__tickets__get", {"id": 1}, "ok"))
    run.workspace["out.txt"] = "x"
    run.ledgers["tickets"] = entries
    return run


def test_simulator_integrity_failure_zeroes_the_score(make_run, sim_pack):
    run_dir = _sim_run(make_run, sim_pack, [{"kind": "request", "tool": "get"}, {"kind": "issued", "detail": "V-1"}]).build()
    intact = score(run_dir)
    assert intact.admitted and decision(intact, "simulator_integrity").ok and intact.effective_score == 100.0
    ledger = run_dir / "private" / "ledgers" / "tickets.jsonl"
    lines = ledger.read_text().splitlines()
    lines[1] = lines[1].replace("V-1", "V-2")  # an edited record: its hash no longer matches
    ledger.write_text("\n".join(lines) + "\n")
    reseal(run_dir)
    result = score(run_dir)
    gate = decision(result, "simulator_integrity")
    assert result.admitted and not gate.ok and "the record was edited" in gate.reason
    assert result.effective_score == 0.0 and result.S == 100.0


def test_ledger_integrity_that_cannot_be_established_invalidates_the_run(make_run, sim_pack, monkeypatch):
    run_dir = _sim_run(make_run, sim_pack, [{"kind": "request", "tool": "get"}]).build()
    for path in (run_dir / "private" / "ledgers").iterdir():
        path.unlink()
    reseal(run_dir)
    _not_admitted(score(run_dir), "ledger_integrity_established", "ledger 'tickets' and its head are missing")
    run_dir = _sim_run(make_run, sim_pack, [{"kind": "request", "tool": "get"}]).build()
    monkeypatch.setattr(admission_mod, "_default_ledger_verifier", lambda: (None, "module not installed"))
    _not_admitted(score(run_dir), "ledger_integrity_established", "cannot be verified: module not installed")


def test_refused_requests_are_recorded_not_zeroed(make_run, sim_pack):
    entries = [{"kind": "request", "tool": "get"}, {"kind": "refused", "tool": "get", "detail": "cap 1"}]
    result = score(_sim_run(make_run, sim_pack, entries).build())
    cap = decision(result, "simulator_request_cap")
    assert cap.ok and "1 over-cap request(s) refused" in cap.reason and result.effective_score == 100.0


def test_injected_ledger_verifier_is_used(make_run, sim_pack):
    run_dir = _sim_run(make_run, sim_pack, [{"kind": "request", "tool": "get"}]).build()
    result = score(run_dir, ledger_verifier=lambda path: {"ok": False, "problems": [f"{path.name}: chain broken"]})
    assert not decision(result, "simulator_integrity").ok and "tickets.jsonl: chain broken" in decision(
        result, "simulator_integrity").reason


def test_a_run_timed_out_before_any_model_request_is_not_measured(good):
    """Under a loaded host a harness can spend its whole wall clock starting up: with no model
    request at all nothing it did was measured, so the run is apparatus_invalid with the reason,
    never a harness_caused failure of every criterion."""
    good.status, good.gateway = "timed_out", []
    _not_admitted(score(good.build()), "started", "before the harness sent any model request")


def test_a_run_timed_out_after_reaching_the_model_is_measured(good):
    from tests.criteria.archive_factory import gateway_request

    good.status, good.gateway = "timed_out", [gateway_request(1)]
    assert decision(score(good.build()), "started").ok


def test_a_run_whose_wall_clock_ran_out_between_turns_is_not_measured(good):
    """Turn 1 exited normally but used the whole wall clock, so turn 2 never started: the turn-2
    duties were never given to the harness, and failing them would be a verdict on nothing."""
    from tests.criteria.archive_factory import gateway_request
    from tracetrial.results import WALL_CLOCK_BEFORE_TURN, RunFailure

    good.status, good.gateway = "timed_out", [gateway_request(1)]
    good.result_overrides = {"failure": RunFailure(type=WALL_CLOCK_BEFORE_TURN, timed_out=True,
                                                   message="wall-clock budget 240s used up before turn 2")}
    _not_admitted(score(good.build()), "turns_ran", "used up before turn 2: the later scripted turns never ran")


def test_a_turn_that_times_out_is_measured(good):
    """A harness hanging inside a turn is a harness verdict (the timed-out turn), not a gap."""
    from tests.criteria.archive_factory import gateway_request
    from tracetrial.results import RunFailure

    good.status, good.gateway = "timed_out", [gateway_request(1)]
    good.result_overrides = {"failure": RunFailure(type="HarnessTimeout", timed_out=True,
                                                   message="turn 1 exceeded the wall clock")}
    assert decision(score(good.build()), "turns_ran").ok
