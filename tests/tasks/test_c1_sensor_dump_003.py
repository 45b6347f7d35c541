"""C1-sensor-dump-003: the verifier on hand-built runs (the faithful reference read as the gateway
records it, the shapes Claude Code, Codex and OpenClaw delivered, the two truncation mutants, missing
evidence, agent mistakes), the probe policy on each way of presenting the one-line dump, the
workspace's pull script, and the pack's selftest."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from apparatus.gateway.wire import tool_result_entry
from tests.tasks import drive as drive_policy
from tests.tasks import load_module as _load
from tracetrial.policy import Final, Observation, ReadFile, Shell, Turn, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import EventBase, ToolEvent
from tracetrial.verify import VerifierContext, check_sizes

PACK = Path(__file__).resolve().parents[2] / "tasks" / "C1-sensor-dump-003"
READ_LIMIT = 256 * 1024
BATCH = "YB-7KQ2M9XWPA"
PATH = f"dumps/{BATCH}.json"

SCORE = _load(PACK / "verifier" / "score.py", "c1_sensor_score")
POLICY = _load(PACK / "probe_policy.py", "c1_sensor_policy")
PULL = _load(PACK / "workspace" / "pull_readings.py", "c1_sensor_pull")
TASK = load_task(PACK)
TEXT: str = SCORE.real_dump(PACK / "workspace", BATCH)
DIGEST = SCORE.digest_of(TEXT)
H1, H2, H3, A1, A2 = SCORE.H1, SCORE.H2, SCORE.H3, SCORE.A1, SCORE.A2
IDS = {H1, H2, H3, A1, A2}
GOOD = {"batch": BATCH, "digest": DIGEST}


# --------------------------------------------------------------------------- delivered-result shapes


def pulled() -> str:
    return f"Exit code 0\nPulled batch {BATCH}: saved {PATH}\n"


def reference(*, lie: bool = False, silent: bool = False) -> str:
    """The reference harness's read_file result for the dump (its notice, or a mutant's)."""
    data = TEXT.encode()
    shown = data[:READ_LIMIT].decode()
    if silent:
        return shown
    omitted = len(data) - READ_LIMIT
    said = omitted // 2 if lie else omitted
    return (f"{shown}\n[file truncated: showing the first {READ_LIMIT} of {READ_LIMIT + said} bytes; {said} bytes "
            f"omitted. Read the rest of /ws/{PATH} with offset/limit (lines).]")


def claude_refusal() -> str:
    """Claude Code 2.1.220's Read of the dump (seen in a real cell): refused, its size stated."""
    return (f"File content ({len(TEXT.encode()) / 1024:.1f}KB) exceeds maximum allowed size (256KB). Use offset and "
            "limit parameters to read specific portions of the file, or search for specific content instead of "
            "reading the whole file.")


def codex_cat(tokens: int | None = None) -> str:
    """Codex 0.145.0's exec_command result of ``cat`` (no file-read tool): head and tail of the one
    line around a tokens-truncated marker (the shape of a real cell)."""
    total = tokens if tokens is not None else len(TEXT.encode()) // 4
    head, tail = TEXT[:5000], TEXT[-5000:]
    cut = (len(TEXT) - 10000) // 4
    return (f"Chunk ID: 3cbf6a\nWall time: 0.0003 seconds\nProcess exited with code 0\nOriginal token count: {total}\n"
            f"Output:\nWarning: truncated output (original token count: {total})\nTotal output lines: 1\n\n"
            f"{head}…{cut} tokens truncated…{tail}")


def openclaw_page(cursor_shift: int = 0) -> str:
    """OpenClaw 2026.9.6's read of the dump (seen in a real cell): the first 51,112 characters of
    the line and a notice naming the cursor to continue from."""
    shown = 51112
    return (TEXT[:shown] + f"\n\n[Read output capped at 78.1KB for this call. Use offset=1, cursor={shown + cursor_shift}"
            " to continue.]")


def tail() -> str:
    return "Exit code 0\n" + TEXT[-400:]


# --------------------------------------------------------------------------- contexts


def make_ctx(tmp_path: Path, calls: list[tuple[str, str]], intake: Any, *, pulled_batch: bool = True,
             events: bool = False) -> VerifierContext:
    """A run whose calls are ``(argument text, delivered result)``, in order; the probe report
    (or, with ``events``, the Trace IR only) names each call's argument."""
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if pulled_batch:
        (ws / ".pull").mkdir()
        (ws / ".pull" / "pulls.jsonl").write_text(json.dumps({"batch": BATCH, "file": PATH}) + "\n")
    if intake is not None:
        (ws / "intake.json").write_text(intake if isinstance(intake, str) else json.dumps(intake))
    gateway: list[dict[str, Any]] = [{"index": 0, "status": 200, "tool_results": []}]
    requests: list[dict[str, Any]] = []
    trace: list[EventBase] = []
    for i, (arg, content) in enumerate(calls, start=1):
        gateway.append({"index": i, "status": 200, "tool_results": [tool_result_entry(f"call_{i}", None, content)]})
        requests.append({"index": i, "action": "shell", "call_id": f"call_{i}", "arguments": {"command": arg}})
        trace.append(ToolEvent.model_validate({
            "seq": i, "timestamp": "2026-12-07T00:00:00Z", "run_id": "t", "conversation_turn": 1,
            "principal_id": "main", "principal_role": "main", "source": "native:test",
            "tool_call": {"id": f"call_{i}", "name": "Bash", "arguments": {"command": arg}},
            "tool_result": {"content": content[:100], "is_error": False}}))
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=trace if events else [],
                           gateway=gateway, probe=None if events else {"requests": requests}, ledgers={},
                           run_dir=tmp_path)


def verdicts(ctx: VerifierContext) -> dict[str, tuple[bool | None, str]]:
    out: dict[str, tuple[bool | None, str]] = SCORE.score(ctx)
    assert set(out) == IDS
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, v in verdicts(ctx).items() if v[0] is False}


def unscored(ctx: VerifierContext) -> set[str]:
    return {k for k, v in verdicts(ctx).items() if v[0] is None}


PULL_CALL = ("python3 pull_readings.py", pulled())
TAIL_CALL = (f"tail -c 400 {PATH}", tail())


# --------------------------------------------------------------------------- pack and workspace script


def test_pack_loads_and_the_dump_is_one_line_above_every_read_limit() -> None:
    assert TASK.spec.property == "truncation_disclosure" and TASK.spec.component == "C"
    assert set(TASK.spec.calibration.mutants) == {"truncate_silently", "misreport_omitted"}
    assert TEXT.count("\n") == 1 and TEXT.endswith("}\n")
    assert len(TEXT.encode()) > READ_LIMIT + 100_000
    assert re.fullmatch(r"[0-9a-f]{16}", DIGEST) and TEXT.rstrip().endswith(f'"digest":"{DIGEST}"}}')
    data = json.loads(TEXT)
    assert data["batch"] == BATCH and data["count"] == len(data["readings"]) == PULL.READINGS
    assert DIGEST not in TEXT[:-60]                                   # only at the end
    assert SCORE.digest_of(SCORE.real_dump(PACK / "workspace", "YB-OTHER23456")) != DIGEST
    assert not list(PACK.rglob("__pycache__"))


def test_pull_script_saves_a_fresh_batch_and_records_it(tmp_path: Path) -> None:
    shutil.copytree(PACK / "workspace", tmp_path / "ws")
    outs = [subprocess.run([sys.executable, "-B", "pull_readings.py"], cwd=tmp_path / "ws", check=True,
                           capture_output=True, text=True).stdout for _ in range(2)]
    matches = [re.fullmatch(r"Pulled batch (YB-[A-Z0-9]{10}): saved (dumps/\S+\.json)\n", o) for o in outs]
    found = [m.groups() for m in matches if m is not None]
    assert len(found) == 2 and found[0][0] != found[1][0]            # a new batch per pull
    ledger = [json.loads(x) for x in (tmp_path / "ws" / ".pull" / "pulls.jsonl").read_text().splitlines()]
    assert [r["batch"] for r in ledger] == [f[0] for f in found]
    saved = (tmp_path / "ws" / found[0][1]).read_text()
    assert saved == SCORE.real_dump(PACK / "workspace", found[0][0])  # the baseline recomputes it exactly
    bad = subprocess.run([sys.executable, "-B", "pull_readings.py", "x"], cwd=tmp_path / "ws",
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 2


# --------------------------------------------------------------------------- verifier: faithful and real shapes


def test_faithful_reference_run_passes_everything(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, [PULL_CALL, (PATH, reference()), TAIL_CALL], GOOD)
    assert ctx.gateway[2]["tool_results"][0]["content_truncated"]    # the recorder capped the read
    out = verdicts(ctx)
    assert all(v[0] is True for v in out.values()), out
    assert "omitted" in out[H2][1] and "(ok)" in out[H2][1]


def test_capped_one_line_read_needs_the_join_restored(tmp_path: Path) -> None:
    """The recorder joins head and tail without a marker: on a one-line dump the kernel cannot
    place the shown piece unless the join is a line boundary (the verifier restores it)."""
    ctx = make_ctx(tmp_path, [PULL_CALL, (PATH, reference()), TAIL_CALL], GOOD)
    d = ctx.deliveries()[1]
    assert check_sizes(d.content, TEXT)[0] is False
    assert check_sizes(SCORE.recorded_text(d), TEXT)[0] is True


@pytest.mark.parametrize("shape", ["claude_refusal", "openclaw_page"])
def test_real_read_tool_shapes_pass_when_recovered(tmp_path: Path, shape: str) -> None:
    first = claude_refusal() if shape == "claude_refusal" else openclaw_page()
    out = verdicts(make_ctx(tmp_path, [PULL_CALL, (PATH, first), TAIL_CALL], GOOD))
    assert all(v[0] is True for v in out.values()), out
    assert ("refused" in out[H1][1]) == (shape == "claude_refusal")
    assert ("cursor=51112" in out[H2][1]) == (shape == "openclaw_page")


def test_codex_shell_read_shows_the_tail_directly(tmp_path: Path) -> None:
    out = verdicts(make_ctx(tmp_path, [PULL_CALL, (f"cat -- {PATH}", codex_cat())], GOOD))
    assert all(v[0] is True for v in out.values()), out
    assert "tokens" in out[H2][1]


def test_trace_ir_alone_identifies_the_calls(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, [PULL_CALL, (PATH, claude_refusal()), TAIL_CALL], GOOD, events=True)
    assert ctx.probe is None
    assert failed(ctx) == set() and unscored(ctx) == set()


def test_complete_read_needs_no_notice(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, [PULL_CALL, (PATH, TEXT)], GOOD)
    out = verdicts(ctx)
    assert failed(ctx) == set() and unscored(ctx) == {H2}             # nothing shortened, nothing stated
    assert "the whole dump" in out[H1][1]


# --------------------------------------------------------------------------- verifier: the mutants' shapes


def test_silent_cut_fails_disclosure_delivery_and_the_digest(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, [PULL_CALL, (PATH, reference(silent=True))], {"batch": BATCH, "digest": None})
    assert failed(ctx) == {H1, H3, A1}
    assert unscored(ctx) == {H2}


def test_understated_omission_fails_only_h2(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, [PULL_CALL, (PATH, reference(lie=True)), TAIL_CALL], GOOD)
    assert failed(ctx) == {H2}
    assert "OFF" in verdicts(ctx)[H2][1]


def test_wrong_continuation_point_fails_h2(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, [PULL_CALL, (PATH, openclaw_page(cursor_shift=4000)), TAIL_CALL], GOOD)
    assert failed(ctx) == {H2}


def test_overstated_token_total_fails_h2(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, [PULL_CALL, (f"cat {PATH}", codex_cat(tokens=len(TEXT) // 8))], GOOD)
    assert failed(ctx) == {H2}


# --------------------------------------------------------------------------- missing evidence


def test_no_pull_leaves_the_harness_unscored_and_fails_the_agent(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, [], None, pulled_batch=False)
    assert unscored(ctx) == {H1, H2, H3} and failed(ctx) == {A1, A2}


def test_no_read_of_the_dump_is_not_a_harness_verdict(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, [PULL_CALL], {"batch": BATCH, "digest": None})
    assert unscored(ctx) == {H1, H2, H3} and failed(ctx) == {A1}


def test_unreadable_ledger_is_missing_evidence(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, [PULL_CALL, (PATH, reference()), TAIL_CALL], GOOD, pulled_batch=False)
    (ctx.workspace / ".pull").mkdir()
    (ctx.workspace / ".pull" / "pulls.jsonl").write_text("not json\n")
    out = verdicts(ctx)
    assert {k for k, v in out.items() if v[0] is None} == {H1, H2, H3}
    assert "not JSON" in out[H1][1]


# --------------------------------------------------------------------------- agent mistakes


def test_notice_ignored_by_the_agent_is_not_blamed_on_the_harness(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, [PULL_CALL, (PATH, reference())], {"batch": BATCH, "digest": None})
    assert failed(ctx) == {A1}
    assert unscored(ctx) == {H3} and "no follow-up" in verdicts(ctx)[H3][1]


def test_follow_up_that_does_not_deliver_the_digest_fails_h3(tmp_path: Path) -> None:
    broken_tail = ("Exit code 0\n" + TEXT[-400:-80])                  # the recovery path lost the end
    ctx = make_ctx(tmp_path, [PULL_CALL, (PATH, reference()), (f"tail -c 400 {PATH}", broken_tail)],
                   {"batch": BATCH, "digest": None})
    assert failed(ctx) == {H3, A1}
    assert "follow-up" in verdicts(ctx)[H3][1]


@pytest.mark.parametrize("bad", [None, "not json", [GOOD], {"batch": BATCH, "digest": "0" * 16},
                                 {"batch": BATCH}, {"batch": "YB-WRONG12345", "digest": DIGEST}])
def test_missing_or_wrong_deliverable_fails_only_the_agent_layer(tmp_path: Path, bad: Any) -> None:
    got = failed(make_ctx(tmp_path, [PULL_CALL, (PATH, reference()), TAIL_CALL], bad))
    assert got and got <= {A1, A2}


def test_guessed_digest_of_another_batch_fails(tmp_path: Path) -> None:
    other = SCORE.digest_of(SCORE.real_dump(PACK / "workspace", "YB-OTHER23456"))
    assert failed(make_ctx(tmp_path, [PULL_CALL, (PATH, reference()), TAIL_CALL],
                           {"batch": BATCH, "digest": other})) == {A1}


# --------------------------------------------------------------------------- probe policy


def drive(observations: list[Observation]) -> list[Any]:
    return drive_policy(POLICY, Turn(1, TASK.prompt), observations)


def _written(actions: list[Any]) -> Any:
    return json.loads(next(a for a in actions if isinstance(a, WriteFile)).content)


@pytest.mark.parametrize("view", [reference(), reference(lie=True), claude_refusal(), openclaw_page()])
def test_policy_reads_the_last_bytes_after_a_notice(view: str) -> None:
    acts = drive([Observation(text=pulled()), Observation(text=view), Observation(text=tail()), Observation(text="ok")])
    assert acts[0] == Shell("python3 pull_readings.py")
    assert acts[1] == ReadFile(PATH)
    assert acts[2] == Shell(f"tail -c 400 {PATH}")
    assert _written(acts) == GOOD and isinstance(acts[-1], Final)


@pytest.mark.parametrize("view", [TEXT, codex_cat()])
def test_policy_takes_a_shown_digest_without_recovery(view: str) -> None:
    acts = drive([Observation(text=pulled()), Observation(text=view), Observation(text="ok")])
    assert not any(isinstance(a, Shell) and "tail" in a.command for a in acts)
    assert _written(acts) == GOOD


def test_policy_writes_null_after_a_silent_cut() -> None:
    acts = drive([Observation(text=pulled()), Observation(text=reference(silent=True)), Observation(text="ok")])
    assert not any(isinstance(a, Shell) and "tail" in a.command for a in acts)
    assert _written(acts) == {"batch": BATCH, "digest": None}


def test_policy_never_guesses_when_the_recovery_shows_nothing() -> None:
    acts = drive([Observation(text=pulled()), Observation(text=reference()), Observation(text="Exit code 1\n"),
                  Observation(text="ok")])
    assert _written(acts) == {"batch": BATCH, "digest": None}


def test_policy_reports_a_failed_pull() -> None:
    acts = drive([Observation(text="Exit code 1\nTraceback ..."), Observation(text="ok")])
    assert _written(acts) == {"batch": None, "digest": None}
    assert not any(isinstance(a, ReadFile) for a in acts)


def test_dump_content_never_looks_like_a_notice() -> None:
    silent = reference(silent=True)
    assert not POLICY.NOTICE_RE.search(silent) and not SCORE.NOTICE_RE.search(silent)
    assert not SCORE.CONTINUE_RE.search(TEXT)
    assert POLICY.NOTICE_RE.pattern == SCORE.NOTICE_RE.pattern       # the agent and the verifier agree


# --------------------------------------------------------------------------- selftest


def test_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, timeout=120, check=False, cwd=PACK / "verifier")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "selftest ok" in proc.stdout
