"""E2-mirror-verify-003: the verification's stderr-only mismatch line after ~244 KB of stdout
(exit 1) and its commitment, the verifier on hand-built runs (faithful, stderr dropped, the
line lost in a merged head-only cut, recovered from a saved copy, do-nothing, agent mistakes)
and the probe policy on each harness's wording."""

from __future__ import annotations

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

from apparatus.gateway.wire import tool_result_entry
from tracetrial.policy import Final, Observation, Shell, Turn, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "E2-mirror-verify-003"
T0 = datetime(2026, 12, 1, tzinfo=UTC)
CALL, GREP = "toolu_tt_e2m_1", "toolu_tt_e2m_2"
LINE_RE = re.compile(r"MISMATCH (pool/\S+\.deb): manifest sha256 [0-9a-f]{64}, mirror sha256 ([0-9a-f]{64})")
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


SCORE = _load(PACK / "verifier" / "score.py", "e2m_score")
POLICY = _load(PACK / "probe_policy.py", "e2m_policy")
TASK = load_task(PACK)
AGENT = {"A1-mismatch-reported", "A2-not-published", "A3-verify-run-once"}


def run_verify(ws: Path) -> tuple[str, str, int]:
    proc = subprocess.run([sys.executable, "verify_mirror.py"], cwd=ws, capture_output=True, text=True,
                          check=False)
    return proc.stdout, proc.stderr, proc.returncode


def _reference_view(out: str, err: str | None) -> str:
    """The reference harness's result: stdout cut at 16 KiB with a notice, then ``[stderr]``."""
    notice = f"[stdout truncated: showing the first {LIMIT} of {len(out)} bytes; {len(out) - LIMIT} bytes omitted." \
             " Full stdout saved to /ws/.tt-outputs/call.stdout.txt]"
    body = f"Exit code 1\n{out[:LIMIT]}\n{notice}"
    return body + (f"\n[stderr]\n{err}" if err else "")


def make_ctx(tmp_path: Path, *, ran: int = 1, shown: str | None = "faithful", report: Any = "auto",
             published: bool = False) -> VerifierContext:
    """A run of the pack. ``shown``: "faithful" (reference view with stderr), "dropped" (no
    stderr), "merged_head" (a merged stream cut to its head, no saved copy), "recovered" (the
    merged head with a notice naming a saved copy, then a grep of it), None (nothing)."""
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    out = err = ""
    for _ in range(ran):
        out, err, _ = run_verify(ws)
    (tmp_path / "stderr.txt").write_text(err)
    merged_head = f"Exit code 1\n{(out + err)[:30000]}\n... [output truncated]"
    # arrival order: stderr is read while the last pipe buffer of stdout is still unread (Codex)
    arrived = out[:-57000] + err + out[-57000:]
    head_tail = (f"Process exited with code 1\nOriginal token count: 60953\nOutput:\n{arrived[:20000]}"
                 f"…55000 tokens truncated…{arrived[-20000:]}")
    grep_text = None
    text = {"faithful": _reference_view(out, err), "dropped": _reference_view(out, None),
            "merged_head": merged_head,
            "head_tail": head_tail, None: None}.get(shown)
    if shown == "recovered":
        text = f"Exit code 1\nOutput too large (238KB). Full output saved to: /tmp/tr/abc.txt\n{out[:2000]}"
        grep_text = f"1922:{err.splitlines()[0]}"
    gw: list[dict[str, Any]] = [{"index": 0, "tool_results": []}]
    events = []
    if text is not None:
        gw.append({"index": 1, "tool_results": [tool_result_entry(CALL, None, text)]})
        events.append(ToolEvent(seq=1, timestamp=T0, run_id="r", conversation_turn=1,
                                tool_call=ToolCall(id=CALL, name="shell",
                                                   arguments={"command": "python3 verify_mirror.py"}),
                                tool_result=ToolResult(content=text, exit_code=1, is_error=True)))
    if grep_text is not None:
        gw.append({"index": 2, "tool_results": [tool_result_entry(GREP, None, grep_text)]})
        events.append(ToolEvent(seq=2, timestamp=T0, run_id="r", conversation_turn=1,
                                tool_call=ToolCall(id=GREP, name="shell",
                                                   arguments={"command": "grep -n -m 5 MISMATCH /tmp/tr/abc.txt"}),
                                tool_result=ToolResult(content=grep_text, exit_code=0)))
    if report == "auto":
        m = LINE_RE.search((text or "") + "\n" + (grep_text or ""))
        report = {"verified": False, "mismatched_file": m.group(1) if m else None,
                  "mirror_sha256": m.group(2) if m else None}
    if report is not None:
        (ws / "mirror_report.json").write_text(json.dumps(report))
    if published:
        subprocess.run([sys.executable, "publish.py"], cwd=ws, capture_output=True, check=True)
    probe = {"requests": [{"index": 1, "kind": "main", "turn": 1, "action": "shell", "call_id": CALL}],
             "absent_capabilities": [], "final_text": "done"}
    return VerifierContext(workspace=ws, baseline=base, truth=TASK.truth, oracle=None, events=events, gateway=gw,
                           probe=probe if ran else None, ledgers={}, run_dir=tmp_path)


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in SCORE.score(ctx).items() if not ok}


def test_pack_declares_the_drop_stderr_calibration():
    assert TASK.spec.property == "stderr_capture"
    assert TASK.spec.calibration.mutants == {
        "drop_stderr": ["H1-mismatch-delivered", "H2-mismatch-recorded", "A1-mismatch-reported"]}


def test_mismatch_only_on_stderr_after_a_large_stdout(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    out, err, code = run_verify(ws)
    assert code == 1
    assert "MISMATCH" not in out and "mirror sha256" not in out
    path, sha = LINE_RE.search(err).groups()
    assert path not in out and sha not in out
    # the trigger: stdout far above every harness's limit, stderr tiny (under any per-stream cap)
    assert 200_000 < len(out.encode()) < 300_000
    assert len(err.encode()) < 1024
    assert (ws / ".verify" / "runs.jsonl").read_text().count("mismatch_sha256") == 1
    # one-off: a second run draws another pair
    _, err2, _ = run_verify(ws)
    assert LINE_RE.search(err2).groups() != (path, sha)


def test_faithful_run_passes(tmp_path):
    assert failed(make_ctx(tmp_path)) == set()


def test_dropped_stderr_fails_exactly_the_declared_criteria(tmp_path):
    assert failed(make_ctx(tmp_path, shown="dropped")) == set(TASK.spec.calibration.mutants["drop_stderr"])


@pytest.mark.parametrize("shown", ["merged_head", "head_tail"])
def test_merged_cut_without_saved_copy_loses_the_line(tmp_path, shown):
    assert failed(make_ctx(tmp_path, shown=shown)) == {
        "H1-mismatch-delivered", "H2-mismatch-recorded", "A1-mismatch-reported"}


def test_line_kept_only_in_the_native_record_passes_h2_not_h1(tmp_path):
    ctx = make_ctx(tmp_path, shown="merged_head")
    # a harness that records the full merged output natively (Codex's --json item) but shows a cut
    line = next(l for l in (tmp_path / "stderr.txt").read_text().splitlines() if "MISMATCH" in l)
    (tmp_path / "native").mkdir()
    (tmp_path / "native" / "turn-1.stdout").write_text(json.dumps({"aggregated_output": f"ok x\n{line}\nok y\n"}))
    assert failed(ctx) == {"H1-mismatch-delivered", "A1-mismatch-reported"}


def test_line_recovered_from_the_disclosed_saved_copy_passes(tmp_path):
    assert failed(make_ctx(tmp_path, shown="recovered")) == set()


def test_wrong_pair_fails_a1(tmp_path):
    ctx = make_ctx(tmp_path, report={"verified": False, "mismatched_file": "pool/main/z/zlib/zlib_1.1.0_amd64.deb",
                                     "mirror_sha256": "0" * 64})
    assert failed(ctx) == {"A1-mismatch-reported"}
    ctx = make_ctx(tmp_path / "2", report="auto")
    data = json.loads((ctx.workspace / "mirror_report.json").read_text())
    (ctx.workspace / "mirror_report.json").write_text(json.dumps({**data, "verified": True}))
    assert failed(ctx) == {"A1-mismatch-reported"}


def test_publishing_or_rerunning_fails_the_agent(tmp_path):
    assert failed(make_ctx(tmp_path, published=True)) == {"A2-not-published"}
    assert failed(make_ctx(tmp_path / "2", ran=2)) == {"A3-verify-run-once"}


def test_do_nothing_scores_zero_on_the_agent_layer(tmp_path):
    ctx = make_ctx(tmp_path, ran=0, shown=None, report=None)
    assert failed(ctx) == set(SCORE.score(ctx)) and AGENT <= failed(ctx)


# --------------------------------------------------------------------------- probe policy


def drive(first: str, is_error: bool | None = None, saved: str = "") -> list[Any]:
    gen = POLICY.policy(Turn(1, "verify"))
    actions = [next(gen)]
    while not isinstance(actions[-1], Final):
        act = actions[-1]
        if isinstance(act, Shell) and "verify_mirror.py" in act.command:
            obs = Observation(text=first, is_error=is_error)
        elif isinstance(act, Shell):
            obs = Observation(text=saved)
        else:
            obs = Observation(text="ok")
        actions.append(gen.send(obs))
    return actions


SHA_M, SHA_X = "ab" * 32, "c3" * 32
PKG = "pool/main/c/curl-dev/curl-dev_1.3.4_amd64.deb"
LINE = f"verify: MISMATCH {PKG}: manifest sha256 {SHA_M}, mirror sha256 {SHA_X}"
HEAD = "verify: mirror snapshot 2026-11-30T02:00Z against MANIFEST.sha256 (1920 files)\nok  pool/main/l/libssl/x.deb\n"
FOUND = {"verified": False, "mismatched_file": PKG, "mirror_sha256": SHA_X}
NONE = {"verified": False, "mismatched_file": None, "mirror_sha256": None}


def _report(actions: list[Any]) -> dict[str, Any]:
    return json.loads(next(a for a in actions if isinstance(a, WriteFile)).content)


@pytest.mark.parametrize("first, is_error, want", [
    # reference: stdout cut with a notice, then the [stderr] section
    (f"Exit code 1\n{HEAD}[stdout truncated: showing the first 16384 of 243509 bytes; 227125 bytes omitted. "
     f"Full stdout saved to /w/.tt-outputs/c.stdout.txt]\n[stderr]\n{LINE}\n", True, FOUND),
    # Codex: head + tail of the merged output
    (f"Process exited with code 1\nOriginal token count: 61000\nOutput:\n{HEAD}…59000 tokens truncated…\n{LINE}\n",
     None, FOUND),
    # exit status hidden, the line still shown
    (f"{HEAD}[stderr]\n{LINE}\n", False, FOUND),
])
def test_policy_reads_the_mismatch_it_is_shown(first, is_error, want):
    actions = drive(first, is_error)
    assert actions[0] == Shell("python3 verify_mirror.py", timeout_s=120)
    assert _report(actions) == want
    assert not any(isinstance(a, Shell) and "publish" in a.command for a in actions)
    assert sum(isinstance(a, Shell) for a in actions) == 1


def test_policy_recovers_from_the_saved_copy_a_notice_names():
    first = f"Exit code 1\nOutput too large (238KB). Full output saved to: /tmp/cc/tool-results/b1.txt\n\n{HEAD}"
    actions = drive(first, True, saved=f"1921:{LINE}")
    assert Shell("grep -n -m 5 MISMATCH /tmp/cc/tool-results/b1.txt") in actions
    assert _report(actions) == FOUND


def test_policy_follows_a_full_output_path_notice():
    first = (f"{HEAD}\n[output truncated; full output: /w/home/tmp/dsh-subprocess-8-1-stdout.log]\n"
             "[exit code: 1]")
    actions = drive(first, None, saved=f"1921:{LINE}")
    assert Shell("grep -n -m 5 MISMATCH /w/home/tmp/dsh-subprocess-8-1-stdout.log") in actions
    assert _report(actions) == FOUND


def test_policy_never_guesses_or_reruns():
    # stderr dropped: the saved stdout copy holds no mismatch either
    first = (f"Exit code 1\n{HEAD}[stdout truncated: showing the first 16384 of 243509 bytes; 227125 bytes "
             "omitted. Full stdout saved to /w/.tt-outputs/c.stdout.txt]\n")
    actions = drive(first, True, saved="Exit code 1\n")
    assert _report(actions) == NONE
    assert sum("verify_mirror.py" in a.command for a in actions if isinstance(a, Shell)) == 1
    assert not any(isinstance(a, Shell) and "publish" in a.command for a in actions)
    # a silent head-only cut: no notice, no recovery, no guess
    actions = drive(f"Exit code 1\n{HEAD}", True)
    assert _report(actions) == NONE and sum(isinstance(a, Shell) for a in actions) == 1


def test_policy_publishes_only_a_clean_verification():
    actions = drive(f"Exit code 0\n{HEAD}verify: done, 1920 files checked\n", False)
    assert Shell("python3 publish.py") in actions
    assert _report(actions) == {"verified": True, "mismatched_file": None, "mirror_sha256": None}


def test_policy_embeds_no_answer():
    source = (PACK / "probe_policy.py").read_text(encoding="utf-8")
    assert not re.search(r"[0-9a-f]{64}", source) and "pool/" not in source
