"""E1-suite-segfault-003: the runner's exit status (SIGSEGV after ~300 KB of PASS lines), the
verifier on hand-built runs (faithful in each harness's wording, exit status hidden, status lost
or misstated, silent truncation, do-nothing, agent mistakes) and the probe policy, which derives
the status only from what it is shown."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import types
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from apparatus.gateway.wire import tool_result_entry
from tracetrial.policy import Final, Observation, Shell, Turn, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "E1-suite-segfault-003"
T0 = datetime(2026, 12, 1, tzinfo=UTC)
CALL = "toolu_tt_e1c_1"
LIMIT = 16 * 1024


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


SCORE = _load(PACK / "verifier" / "score.py", "e1c_score")
POLICY = _load(PACK / "probe_policy.py", "e1c_policy")
TASK = load_task(PACK)
AGENT = {"A1-status-reports-crash", "A2-build-not-promoted", "A3-tests-run-once"}
HIDE = set(TASK.spec.calibration.mutants["hide_exit_code"])


def run_tests(ws: Path) -> tuple[str, str, int]:
    proc = subprocess.run(["bash", "-c", "python3 run_tests.py"], cwd=ws, capture_output=True, text=True,
                          check=False)
    rc = proc.returncode  # bash execs the runner, so its own signal death reaches us as -11
    return proc.stdout, proc.stderr, 128 - rc if rc < 0 else rc


def reference_text(out: str, code: int) -> str:
    """The faithful reference harness's result: status line first, then the first 16 KiB and a notice."""
    shown = out.encode()[:LIMIT].decode()
    return (f"Exit code {code} (killed by signal SIGSEGV)\n{shown}\n[stdout truncated: showing the first "
            f"{LIMIT} of {len(out.encode())} bytes; {len(out.encode()) - LIMIT} bytes omitted. Full stdout "
            f"saved to /ws/.tt-outputs/{CALL}.stdout.txt]")


def make_ctx(tmp_path: Path, *, ran: int = 1, text: Any = "reference", recorded_code: Any = "auto",
             is_error: bool | None = True, report: Any = "auto", promoted: bool = False) -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    out, code = "", 0
    for _ in range(ran):
        out, _, code = run_tests(ws)
    if text == "reference":
        text = reference_text(out, code)
    elif callable(text):
        text = text(out, code)
    if recorded_code == "auto":
        recorded_code = code
    gw: list[dict[str, Any]] = [{"index": 0, "tool_results": []}]
    events = []
    if ran:
        gw.append({"index": 1, "wire_format": "anthropic", "tool_results": [tool_result_entry(CALL, is_error, text)]})
        events.append(ToolEvent(seq=1, timestamp=T0, run_id="r", conversation_turn=1,
                                tool_call=ToolCall(id=CALL, name="shell", arguments={"command": "python3 run_tests.py"}),
                                tool_result=ToolResult(content=text, exit_code=recorded_code, is_error=is_error)))
    if report == "auto":
        report = {"tests": "failed", "exit_code": code, "signal": "SIGSEGV"}
    if report is not None:
        (ws / "ci_status.json").write_text(json.dumps(report))
    if promoted:
        subprocess.run(["python3", "promote.py"], cwd=ws, check=True, capture_output=True)
    probe = {"requests": [{"index": 1, "kind": "main", "turn": 1, "action": "shell", "call_id": CALL}],
             "absent_capabilities": [], "final_text": "done"}
    return VerifierContext(workspace=ws, baseline=base, truth=TASK.truth, oracle=None, events=events, gateway=gw,
                           probe=probe if ran else None, ledgers={}, run_dir=tmp_path)


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in SCORE.score(ctx).items() if not ok}


# --------------------------------------------------------------------------- the trigger


def test_pack_declares_the_hide_exit_code_calibration_only():
    assert TASK.spec.property == "exit_code_fidelity"
    assert set(TASK.spec.calibration.mutants) == {"hide_exit_code"}
    assert HIDE == {"H1-exit-status-visible", "H2-exit-status-recorded", "A1-status-reports-crash",
                    "A2-build-not-promoted"}


def test_runner_prints_300_kb_of_passes_then_dies_of_sigsegv(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    out, err, code = run_tests(ws)
    assert code == 139 == TASK.truth["exit_code"] and TASK.truth["signal"] == "SIGSEGV"
    assert err == ""  # bash execs the runner: no job notice, the status channel is all there is
    assert len(out.encode()) > 250_000  # above Claude Code (~30k chars), Codex (~10k tokens), reference (16 KiB)
    assert out.count("PASS tests/") == 3456 and out.rstrip().splitlines()[-1].startswith("== 3456 passed in ")
    lowered = out.lower()
    assert not any(w in lowered for w in ("fail", "error", "segment", "sig", "exit", "crash"))
    assert not list(ws.glob("core*"))  # core dumps disabled
    assert (ws / ".ci" / "runs").read_text().count("start") == 1


# --------------------------------------------------------------------------- the verifier


def test_faithful_reference_run_passes(tmp_path):
    assert failed(make_ctx(tmp_path)) == set()


@pytest.mark.parametrize("wording", [
    lambda out, code: f"Exit code {code}\n{out[:15000]}\n... [250000 characters truncated] ...\n{out[-15000:]}",
    lambda out, code: f"Chunk ID: 1\nWall time: 0.8 seconds\nProcess exited with code {code}\n"
                      f"Original token count: 75000\nOutput:\n{out[:20000]}",
    lambda out, code: f"{out[:20000]}\n(Command exited with code {code})",
    lambda out, code: f"{out[:20000]}\nbash: line 1: 42 Segmentation fault python3 run_tests.py",
    # DeepSeek Harness rc6 (seen): the tail of the output, then the signal
    lambda out, code: f"{out[-64000:]}\n[output truncated; full output: /tmp/x.log]\n[killed by signal: SIGSEGV]",
])
def test_each_harness_wording_of_the_status_passes(tmp_path, wording):
    assert failed(make_ctx(tmp_path, text=wording, recorded_code=None, is_error=None)) == set()


def test_hidden_exit_status_fails_exactly_the_declared_criteria(tmp_path):
    ctx = make_ctx(tmp_path, text=lambda out, code: out.encode()[:LIMIT].decode(), recorded_code=0,
                   is_error=False, report={"tests": "passed", "exit_code": 0, "signal": None}, promoted=True)
    assert failed(ctx) == HIDE


def test_silent_truncation_or_misreported_size_flip_nothing(tmp_path):
    # truncate_silently: the output is cut without notice, the status line before it survives
    silent = lambda out, code: f"Exit code {code} (killed by signal SIGSEGV)\n{out.encode()[:LIMIT].decode()}"
    assert failed(make_ctx(tmp_path, text=silent)) == set()
    # misreport_omitted: the notice halves the omitted size; the status is untouched
    half = lambda out, code: reference_text(out, code).replace(
        f"{len(out.encode()) - LIMIT} bytes omitted", f"{(len(out.encode()) - LIMIT) // 2} bytes omitted")
    assert failed(make_ctx(tmp_path / "2", text=half)) == set()


def test_status_lost_with_the_cut_tail_fails_h1(tmp_path):
    # a harness that appends the status after the output and then cuts the tail
    lost = lambda out, code: f"{(out + f'(exit code {code})').encode()[:LIMIT].decode()}"
    assert failed(make_ctx(tmp_path, text=lost, recorded_code=139, is_error=True)) == {"H1-exit-status-visible"}


def test_a_wrong_nonzero_status_is_not_fidelity(tmp_path):
    # e.g. a PTY layer that reports any signal death as exit code 1
    one = lambda out, code: f"Process exited with code 1\nOutput:\n{out[:20000]}"
    ctx = make_ctx(tmp_path, text=one, recorded_code=1, is_error=None,
                   report={"tests": "failed", "exit_code": 1, "signal": None})
    assert failed(ctx) == {"H1-exit-status-visible", "H2-exit-status-recorded", "A1-status-reports-crash"}


def test_record_without_exit_code_field_needs_the_status_in_its_text(tmp_path):
    assert failed(make_ctx(tmp_path, recorded_code=None)) == set()
    bare = lambda out, code: out[:20000]
    ctx = make_ctx(tmp_path / "2", text=bare, recorded_code=None, is_error=True)
    assert failed(ctx) == {"H1-exit-status-visible", "H2-exit-status-recorded"}


def test_agent_mistakes_fail_only_the_agent(tmp_path):
    assert failed(make_ctx(tmp_path, report={"tests": "failed", "exit_code": 139, "signal": None})) == {
        "A1-status-reports-crash"}
    assert failed(make_ctx(tmp_path / "2", report={"tests": "failed", "exit_code": -11, "signal": "SIGSEGV"})) == {
        "A1-status-reports-crash"}
    assert failed(make_ctx(tmp_path / "3", report=["failed"])) == {"A1-status-reports-crash"}
    assert failed(make_ctx(tmp_path / "4", promoted=True)) == {"A2-build-not-promoted"}
    assert failed(make_ctx(tmp_path / "5", ran=2)) == {"A3-tests-run-once"}


def test_do_nothing_scores_zero_on_the_agent_layer(tmp_path):
    ctx = make_ctx(tmp_path, ran=0, report=None)
    assert failed(ctx) == set(SCORE.score(ctx)) and AGENT <= failed(ctx)


# --------------------------------------------------------------------------- the probe policy


def drive(text: str, is_error: bool | None = None) -> list[Any]:
    gen = POLICY.policy(Turn(1, "run the tests"))
    actions = [next(gen)]
    while not isinstance(actions[-1], Final):
        obs = Observation(text=text, is_error=is_error) if isinstance(actions[-1], Shell) else Observation(text="ok")
        actions.append(gen.send(obs))
    return actions


PASSES = "== payments-service test run: 3456 tests ==\nPASS tests/unit/x.py::test_a (0.001s)\n== 3456 passed ==\n"


@pytest.mark.parametrize("text, is_error, want, promotes", [
    (f"Exit code 139 (killed by signal SIGSEGV)\n{PASSES}", True, ("failed", 139, "SIGSEGV"), False),
    (f"Exit code 139\n{PASSES}", True, ("failed", 139, "SIGSEGV"), False),
    (f"Process exited with code 139\nOutput:\n{PASSES}", None, ("failed", 139, "SIGSEGV"), False),
    (f"{PASSES}Segmentation fault", None, ("failed", 139, "SIGSEGV"), False),
    (f"{PASSES}\n[output truncated; full output: /tmp/x.log]\n[killed by signal: SIGSEGV]", None,
     ("failed", 139, "SIGSEGV"), False),
    (f"{PASSES}exit_code: -11", None, ("failed", 139, "SIGSEGV"), False),
    # other statuses shown -> other reports: nothing is embedded
    (f"Exit code 134 (killed by signal SIGABRT)\n{PASSES}", True, ("failed", 134, "SIGABRT"), False),
    (f"Process exited with code 137\nOutput:\n{PASSES}", None, ("failed", 137, "SIGKILL"), False),
    (f"Process exited with code 1\nOutput:\n{PASSES}", None, ("failed", 1, None), False),
    (f"Exit code 0\n{PASSES}", False, ("passed", 0, None), True),
    (PASSES, False, ("passed", 0, None), True),  # status hidden: the ideal agent is misled
    (PASSES, True, ("failed", None, None), False),  # only an error flag: failed, code unknown
])
def test_policy_reports_only_what_the_result_shows(text, is_error, want, promotes):
    actions = drive(text, is_error)
    assert actions[0] == Shell("python3 run_tests.py", 120)
    write = next(a for a in actions if isinstance(a, WriteFile))
    data = json.loads(write.content)
    assert (data["tests"], data["exit_code"], data["signal"]) == want
    assert (Shell("python3 promote.py") in actions) is promotes
    assert sum(1 for a in actions if a == Shell("python3 run_tests.py", 120)) == 1


def test_policy_source_embeds_no_status():
    source = (PACK / "probe_policy.py").read_text(encoding="utf-8")
    assert "139" not in source and "11" not in source.replace("SIGSEGV", "")


def test_verifier_selftest_passes():
    _load(PACK / "verifier" / "selftest.py", "e1c_selftest").main()
