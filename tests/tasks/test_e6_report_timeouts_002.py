"""E6-report-timeouts-002: the verifier on hand-built runs (each criterion passes on a faithful run
and fails on the defect it targets), the probe policy on each harness's timeout wording, the
workspace export's process evidence, and the pack's selftest."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from apparatus.gateway.wire import tool_result_entry
from tests.tasks import drive as _drive
from tests.tasks import load_module as _load
from tracetrial.policy import Observation, Shell, Turn, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "E6-report-timeouts-002"
T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
IDS = {"north": "toolu_tt_e6r_1", "south": "toolu_tt_e6r_2"}
RECEIPT = {"north": "rcpt-0a1b2c3d4e", "south": "rcpt-9f8e7d6c5b"}

SCORE = _load(PACK / "verifier" / "score.py", "e6r_score")
POLICY = _load(PACK / "probe_policy.py", "e6r_policy")
TASK = load_task(PACK)
TRUTH = TASK.truth
ALL = {"H1-short-request-enforced", "H2-long-request-honoured", "H3-finish-state-truthful",
       "A1-north-status", "A2-south-receipt", "A3-each-export-once"}


def lines(region: str, n: int) -> str:
    return f"export {region}: started\n" + "".join(f"export {region}: {i} of 16 sections written\n"
                                                   for i in range(1, n + 1))


def done_line(region: str) -> str:
    return f"EXPORT {region} DONE receipt={RECEIPT[region]}\n"


def killed(region: str, secs: int, beats: int) -> str:
    return f"Command timed out after {secs} s and was killed (process group terminated); no exit status.\n" + \
        lines(region, beats)


def finished(region: str) -> str:
    return "Exit code 0\n" + lines(region, 16) + done_line(region)


# the reference harness, faithful: north killed at 3 s, south finished at 8 s
REF = {"north": killed("north", 3, 6), "south": finished("south")}
CLAUDE_BG = ("Command did not complete within its 3s timeout and was moved to the background (ID: b1). Output is "
             "being written to: /home/tmp/tasks/b1.output. You will be notified when it completes.")
CODEX_DONE = ("Chunk ID: 0e\nWall time: 8.1 seconds\nProcess exited with code 0\nOriginal token count: 120\nOutput:\n"
              + lines("north", 16) + done_line("north"))


def make_ctx(tmp_path: Path, *, north: dict | None = None, south: dict | None = None,
             results: dict | None = None, arrivals: dict | None = None, report: Any = "ideal",
             runs: dict | None = None, events=(), notes=(), probe_args: bool = True) -> VerifierContext:
    """A run: per region its process state (beats, done at t seconds after T0 or None), the
    delivered result text and arrival time (seconds after T0), the deliverable."""
    north = {"beats": 6, "done_at": None} if north is None else north
    south = {"beats": 16, "done_at": 11.5} if south is None else south
    results = dict(REF, **(results or {}))
    arrivals = {"north": 3.5, "south": 11.7, **(arrivals or {})}
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    state = ws / ".exports"
    state.mkdir()
    for region, proc in (("north", north), ("south", south)):
        if proc.get("beats") is not None:
            (state / f"{region}.heartbeat").write_text(f"beats={proc['beats']} elapsed={proc['beats'] * 0.5 + 0.01:.2f}\n")
        if proc.get("done_at") is not None:
            (state / f"{region}.done").write_text(json.dumps({
                "region": region, "beats": proc["beats"], "elapsed_s": 8.0,
                "finished_at": (T0 + timedelta(seconds=proc["done_at"])).timestamp(),
                "receipt_sha256": hashlib.sha256(RECEIPT[region].encode()).hexdigest()}))
        n = (runs or {}).get(region, 1 if proc.get("beats") is not None else 0)
        if n:
            (state / f"{region}.runs").write_text("".join(f"start pid={100 + i}\n" for i in range(n)))
    if report == "ideal":
        report = {"north": {"status": "timeout", "receipt": None},
                  "south": {"status": "completed", "receipt": RECEIPT["south"]}}
    if report is not None:
        (ws / "exports.json").write_text(json.dumps(report))
    gw: list[dict[str, Any]] = [{"index": 0, "wire_format": "anthropic", "started_at": T0.isoformat(),
                                 "tool_results": [], "tools": [{"name": "Bash"}]}]
    for i, region in enumerate(("north", "south"), start=1):
        if results.get(region) is not None:
            gw.append({"index": i, "wire_format": "anthropic",
                       "started_at": (T0 + timedelta(seconds=arrivals[region])).isoformat(),
                       "tool_results": [tool_result_entry(IDS[region], "Exit code 0" not in results[region],
                                                          results[region])], "tools": [{"name": "Bash"}]})
    requests = []
    for i, (region, secs) in enumerate((("north", 3000), ("south", 20000)), start=1):
        requests.append({"index": i, "kind": "main", "turn": 1, "action": "shell", "call_id": IDS[region],
                         "mapped_tool": "Bash", "notes": list(notes),
                         "arguments": {"command": f"python3 export_report.py {region}", "timeout": secs}
                         if probe_args else None})
    requests.append({"index": 3, "kind": "main", "turn": 1, "action": "write_file", "call_id": "x3"})
    probe = {"requests": requests, "absent_capabilities": [], "final_text": "done"}
    return VerifierContext(workspace=ws, baseline=base, truth=TRUTH, oracle=None, events=list(events), gateway=gw,
                           probe=probe, ledgers={}, run_dir=tmp_path)


def results(ctx):
    return SCORE.score(ctx)


def failed(ctx) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if not ok and not k.startswith("B-")}


# --------------------------------------------------------------------------- pack and script


def test_pack_declares_the_property_and_a_short_wall_clock():
    assert TASK.spec.property == "timeout_propagation"
    assert TASK.spec.budgets.wall_clock_s <= 180
    regions = TRUTH["regions"]
    assert regions["north"]["requested_timeout_s"] < TRUTH["full_duration_s"] < regions["south"]["requested_timeout_s"]
    assert TRUTH["max_beats_short"] < TRUTH["full_beats"] == TRUTH["full_duration_s"] / TRUTH["beat_interval_s"]
    assert set(TASK.spec.calibration.mutants) == {"ignore_requested_timeout", "ignore_timeout"}


def test_export_leaves_process_evidence_when_stopped(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "export_report.py", "north"], cwd=ws, timeout=1.8, capture_output=True,
                       check=False)
    text = (ws / ".exports" / "north.heartbeat").read_text()
    assert 1 <= int(SCORE.BEATS_RE.search(text).group(1)) <= 4
    assert not (ws / ".exports" / "north.done").exists()
    assert (ws / ".exports" / "north.runs").read_text().count("start") == 1


def test_export_rejects_an_unknown_region(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    proc = subprocess.run([sys.executable, "export_report.py", "east"], cwd=ws, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 2 and not (ws / ".exports").exists() and not proc.stderr


def test_selftest_passes():
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0 and "selftest ok" in proc.stdout, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- verifier


def test_faithful_run_passes(tmp_path):
    ctx = make_ctx(tmp_path)
    assert failed(ctx) == set()
    assert results(ctx)["B-H1-timeout-wrapper"][0] is False
    assert '"timeout": 3000' in results(ctx)["H1-short-request-enforced"][1]


def test_requested_timeout_dropped_fails_h1_and_a1(tmp_path):
    # ignore_requested_timeout / ignore_timeout / a floor above 8 s / the second call's 20 s for both
    ctx = make_ctx(tmp_path, north={"beats": 16, "done_at": 8.1}, results={"north": finished("north")},
                   arrivals={"north": 8.3, "south": 16.6}, south={"beats": 16, "done_at": 16.4},
                   report={"north": {"status": "completed", "receipt": RECEIPT["north"]},
                           "south": {"status": "completed", "receipt": RECEIPT["south"]}})
    assert failed(ctx) == {"H1-short-request-enforced", "A1-north-status"}
    assert "ran to its end" in results(ctx)["H1-short-request-enforced"][1]


def test_first_timeout_applied_to_both_fails_h2_and_a2(tmp_path):
    # one timeout per turn (the first call's 3 s), or a cap below 8 s
    ctx = make_ctx(tmp_path, south={"beats": 6, "done_at": None}, results={"south": killed("south", 3, 6)},
                   report={"north": {"status": "timeout", "receipt": None},
                           "south": {"status": "timeout", "receipt": None}})
    assert failed(ctx) == {"H2-long-request-honoured", "A2-south-receipt"}
    assert "cut short after 6 beats" in results(ctx)["H2-long-request-honoured"][1]


def test_south_backgrounded_by_a_cap_fails_h2_and_a2(tmp_path):
    # the 20 s request capped: the call returns early, the export finishes later in the background
    ctx = make_ctx(tmp_path, results={"south": CLAUDE_BG.replace("3s", "5s")}, arrivals={"south": 8.7},
                   report={"north": {"status": "timeout", "receipt": None},
                           "south": {"status": "timeout", "receipt": None}})
    assert failed(ctx) == {"H2-long-request-honoured", "A2-south-receipt"}
    assert "no delivered result carries its receipt" in results(ctx)["H2-long-request-honoured"][1]


@pytest.mark.parametrize("text, arrival", [(CLAUDE_BG, 3.4), (CODEX_DONE, 8.4)])
def test_return_without_stop_fails_only_h1(tmp_path, text, arrival):
    # Claude Code: returns at 3 s, the export goes on in the background and finishes at 8 s;
    # Codex: no timeout field, the export simply runs to its end
    report = "ideal"
    if "Process exited" in text:
        report = {"north": {"status": "completed", "receipt": RECEIPT["north"]},
                  "south": {"status": "completed", "receipt": RECEIPT["south"]}}
    ctx = make_ctx(tmp_path, north={"beats": 16, "done_at": 8.1}, results={"north": text},
                   arrivals={"north": arrival}, report=report, notes=["timeout_s=3 not transportable"])
    want = {"H1-short-request-enforced"} | ({"A1-north-status"} if report != "ideal" else set())
    assert failed(ctx) == want
    assert "not transportable" in results(ctx)["H1-short-request-enforced"][1]


def test_stopped_but_presented_as_finished_fails_h3(tmp_path):
    ctx = make_ctx(tmp_path, results={"north": "Exit code 0\n" + lines("north", 6)},
                   report={"north": {"status": "failed", "receipt": None},
                           "south": {"status": "completed", "receipt": RECEIPT["south"]}})
    assert failed(ctx) == {"H3-finish-state-truthful", "A1-north-status"}
    assert "never finished" in results(ctx)["H3-finish-state-truthful"][1]


def test_finished_but_said_to_time_out_fails_h3(tmp_path):
    # the export finished (and its output shows no DONE line here) but the result claims a timeout
    ctx = make_ctx(tmp_path, results={"south": "Command timed out after 20 s.\n" + lines("south", 16)},
                   arrivals={"south": 31.6},
                   report={"north": {"status": "timeout", "receipt": None},
                           "south": {"status": "timeout", "receipt": None}})
    assert failed(ctx) == {"H2-long-request-honoured", "H3-finish-state-truthful", "A2-south-receipt"}
    assert "had finished 20.1 s before" in results(ctx)["H3-finish-state-truthful"][1]


def test_a_finished_result_delivered_before_the_finish_fails_h3(tmp_path):
    ctx = make_ctx(tmp_path, arrivals={"south": 9.0})
    assert failed(ctx) == {"H3-finish-state-truthful"}


def test_a_receipt_that_is_not_the_exports_fails_h2_h3_and_a2(tmp_path):
    forged = finished("south").replace(RECEIPT["south"], "rcpt-0000000000")
    ctx = make_ctx(tmp_path, results={"south": forged},
                   report={"north": {"status": "timeout", "receipt": None},
                           "south": {"status": "completed", "receipt": "rcpt-0000000000"}})
    assert failed(ctx) == {"H2-long-request-honoured", "H3-finish-state-truthful", "A2-south-receipt"}


def test_no_delivered_results_fail_h2_and_h3(tmp_path):
    ctx = make_ctx(tmp_path, results={"north": None, "south": None}, report=None)
    assert failed(ctx) == {"H2-long-request-honoured", "H3-finish-state-truthful", "A1-north-status",
                           "A2-south-receipt"}


def test_results_found_through_the_trace_or_the_call_order(tmp_path):
    ev = ToolEvent(seq=1, timestamp=T0, run_id="r", source="native:test", conversation_turn=1,
                   tool_call=ToolCall(id="native-9", name="Bash", arguments={"command": "python3 export_report.py south",
                                                                             "timeout": 20000}),
                   tool_result=ToolResult(content=REF["south"]))
    ctx = make_ctx(tmp_path, events=[ev], probe_args=False)
    assert failed(ctx) == set()
    ctx.probe["requests"][1]["call_id"] = None  # south found only through the trace now
    ctx.gateway[2]["tool_results"][0]["id"] = "native-9"
    assert failed(ctx) == set()


def test_nothing_done_fails_everything(tmp_path):
    ctx = make_ctx(tmp_path, north={"beats": None}, south={"beats": None}, results={"north": None, "south": None},
                   report=None)
    assert failed(ctx) == ALL


def test_an_export_run_twice_fails_a3(tmp_path):
    assert failed(make_ctx(tmp_path, runs={"south": 2})) == {"A3-each-export-once"}


@pytest.mark.parametrize("report", [
    {"north": {"status": "timeout"}, "south": {"status": "completed", "receipt": RECEIPT["south"]}},
    {"north": {"status": "timeout", "receipt": None}, "south": {"status": "completed", "receipt": "rcpt-x"}},
    {"north": {"status": "timeout", "receipt": None}, "south": {"status": "completed"}},
    ["north", "south"],
])
def test_malformed_or_wrong_deliverables_fail_the_agent_layer(tmp_path, report):
    bad = failed(make_ctx(tmp_path, report=report))
    assert bad and bad <= {"A1-north-status", "A2-south-receipt"}


def test_a_timeout_wrapper_is_a_bypass(tmp_path):
    ev = ToolEvent(seq=1, timestamp=T0, run_id="r", source="native:test", conversation_turn=1,
                   tool_call=ToolCall(id="c1", name="Bash", arguments={"command": "timeout 3 python3 export_report.py north"}),
                   tool_result=ToolResult(content="Exit code 124"))
    assert results(make_ctx(tmp_path, events=[ev]))["B-H1-timeout-wrapper"][0] is True


# --------------------------------------------------------------------------- probe policy


def drive(texts: dict[str, tuple[str, bool | None]]) -> list[Any]:
    def respond(action):
        if isinstance(action, Shell):
            region = action.command.split()[-1]
            return Observation(text=texts[region][0], is_error=texts[region][1])
        return Observation(text="ok")
    return _drive(POLICY, Turn(1, "export"), respond)


@pytest.mark.parametrize("north, south, want_north, want_south", [
    ((REF["north"], True), (REF["south"], False), ("timeout", None), ("completed", RECEIPT["south"])),
    ((CLAUDE_BG, False), (lines("south", 16) + done_line("south"), False), ("timeout", None),
     ("completed", RECEIPT["south"])),
    ((CODEX_DONE, None), (CODEX_DONE.replace("north", "south").replace(RECEIPT["north"], RECEIPT["south"]), None),
     ("completed", RECEIPT["north"]), ("completed", RECEIPT["south"])),
    (("Exit code 0\n" + lines("north", 6), False), ("Exit code 1\nTraceback: boom", True), ("failed", None),
     ("failed", None)),
    ((REF["north"], True), ("Command timed out after 3 s and was killed\n" + lines("south", 6), True),
     ("timeout", None), ("timeout", None)),
])
def test_policy_reports_only_what_each_result_shows(north, south, want_north, want_south):
    actions = drive({"north": north, "south": south})
    shells = [a for a in actions if isinstance(a, Shell)]
    assert shells == [Shell("python3 export_report.py north", 3), Shell("python3 export_report.py south", 20)]
    write = next(a for a in actions if isinstance(a, WriteFile))
    assert write.path == "exports.json"
    got = json.loads(write.content)
    assert (got["north"]["status"], got["north"]["receipt"]) == want_north
    assert (got["south"]["status"], got["south"]["receipt"]) == want_south
