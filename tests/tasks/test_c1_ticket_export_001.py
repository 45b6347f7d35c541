"""C1-ticket-export-001: the verifier on hand-built runs and the probe policy on each
harness's way of presenting an oversized result."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from apparatus.gateway.wire import tool_result_entry
from tests.tasks import load_module as _load
from tracetrial.policy import Final, Observation, Shell, Turn, WriteFile
from tracetrial.task import load_task
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "C1-ticket-export-001"
REF_LIMIT = 16 * 1024


SCORE = _load(PACK / "verifier" / "score.py", "c1_score")
POLICY = _load(PACK / "probe_policy.py", "c1_policy")
TRUTH = json.loads((PACK / "truth.json").read_text())
REAL = SCORE.real_outputs(PACK / "workspace")
TEXT = {p: REAL[p][0] for p in "ab"}
LINE = {p: TEXT[p].rstrip("\n").splitlines()[-1] for p in "ab"}


# --------------------------------------------------------------------------- delivered-result formats


def reference(part: str, *, lie: bool = False) -> str:
    data = TEXT[part].encode()
    cut = REF_LIMIT
    omitted = len(data) - cut
    said = omitted // 2 if lie else omitted
    code = REAL[part][1]
    return (f"Exit code {code}\n{data[:cut].decode()}\n[stdout truncated: showing the first {cut} of {cut + said} "
            f"bytes; {said} bytes omitted. Full stdout saved to /ws/.tt-outputs/call_{part}.stdout.txt]")


def silent(part: str) -> str:
    return f"Exit code {REAL[part][1]}\n" + TEXT[part].encode()[:REF_LIMIT].decode()


def claude_persisted(part: str) -> str:
    size = len(TEXT[part].encode()) / 1024
    return (f"<persisted-output>\nOutput too large ({size:.1f}KB). Full output saved to: "
            f"/home/agent/.claude/projects/-ws/s1/tool-results/toolu_{part}.txt\n\nPreview (first 2KB):\n"
            f"{TEXT[part][:2000]}\n...\n</persisted-output>")


def claude_error(part: str, *, end_marker: bool = True) -> str:
    """Non-zero exit: stdout cut to 30,000 chars (+ '[N lines truncated]'), then the error text
    cut to its first and last 5,000 chars. ``end_marker=False`` is what Claude Code 2.1.220 was
    seen to deliver: the cut after 30,000 chars carries no notice."""
    out = TEXT[part].rstrip()
    head = out[:30000]
    lines = out.count("\n", 30000) + 1
    err = f"Exit code {REAL[part][1]}\n{head}" + (f"\n\n... [{lines} lines truncated] ..." if end_marker else "")
    gap = len(err) - 10000
    return f"{err[:5000]}\n\n... [{gap} characters truncated] ...\n\n{err[-5000:]}"


def codex(part: str, *, keep: int = 20000) -> str:
    data = TEXT[part].encode()
    tokens = (len(data) + 3) // 4
    return (f"Chunk ID: 1a2b\nWall time: 0.0512 seconds\nProcess exited with code {REAL[part][1]}\n"
            f"Original token count: {tokens}\nOutput:\nTotal output lines: {TEXT[part].count(chr(10))}\n\n"
            f"{data[:keep].decode()}…{(len(data) - 2 * keep) // 4} tokens truncated…{data[-keep:].decode()}")


def tail3(part: str) -> str:
    return "Exit code 0\n" + "\n".join(TEXT[part].rstrip("\n").splitlines()[-3:])


# --------------------------------------------------------------------------- contexts


def gateway(*results: str | None) -> list[dict[str, Any]]:
    """One request per delivered result (None: a request delivering nothing)."""
    reqs = []
    for i, content in enumerate(results):
        delivered = [] if content is None else [tool_result_entry(f"call_{i}", None, content)]
        reqs.append({"index": i, "tool_results": delivered, "tools": [{"name": "shell"}]})
    return reqs


def make_ctx(tmp_path: Path, results: list[str | None], checksums: Any) -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if checksums is not None:
        (ws / "checksums.json").write_text(json.dumps(checksums) if not isinstance(checksums, str) else checksums)
    return VerifierContext(workspace=ws, baseline=base, truth=TRUTH, oracle=None, events=[],
                           gateway=gateway(None, *results), probe=None, ledgers={}, run_dir=tmp_path)


GOOD = {"a": TRUTH["checksums"]["a"], "b": TRUTH["checksums"]["b"], "b_exit_code": 1}


def verdicts(ctx: VerifierContext) -> dict[str, bool]:
    return {k: v[0] for k, v in SCORE.score(ctx).items()}


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, ok in verdicts(ctx).items() if not ok}


# --------------------------------------------------------------------------- pack


def test_pack_loads_and_truth_matches_the_recomputation():
    task = load_task(PACK)
    assert task.spec.property == "truncation_disclosure"
    for part in "ab":
        assert LINE[part] == f"CHECKSUM-{part.upper()}: {TRUTH['checksums'][part]}"
        assert REAL[part][1] == TRUTH["exit_codes"][part]
        assert len(TEXT[part].encode()) == TRUTH["stdout_bytes"][part] > 120_000
    assert not list((PACK / "workspace").rglob("__pycache__"))


# --------------------------------------------------------------------------- verifier


def test_faithful_reference_run_passes_everything(tmp_path):
    ctx = make_ctx(tmp_path, [reference("a"), tail3("a"), reference("b"), tail3("b")], GOOD)
    assert failed(ctx) == set()


@pytest.mark.parametrize("fmt", ["claude", "codex"])
def test_real_harness_formats_pass_when_recovered(tmp_path, fmt):
    if fmt == "claude":
        results = [claude_persisted("a"), tail3("a"), claude_error("b"), tail3("b")]
    else:
        results = [codex("a"), codex("b")]
    assert failed(make_ctx(tmp_path, results, GOOD)) == set()


def test_unannounced_cut_after_a_stated_middle_cut_fails_only_h2(tmp_path):
    """Observed on Claude Code's exit-1 path: '[20011 characters truncated]' in the middle,
    and the ~147 KB after the first 30,000 characters dropped with no notice at all."""
    ctx = make_ctx(tmp_path, [claude_persisted("a"), tail3("a"), claude_error("b", end_marker=False), tail3("b")],
                   GOOD)
    assert failed(ctx) == {"H2-omitted-size-accurate"}
    assert "covered by no notice" in SCORE.score(ctx)["H2-omitted-size-accurate"][1]


def test_complete_delivery_needs_no_notice(tmp_path):
    full = {p: f"Exit code {REAL[p][1]}\n{TEXT[p]}" for p in "ab"}
    ctx = make_ctx(tmp_path, [full["a"], full["b"]], GOOD)
    assert ctx.gateway[1]["tool_results"][0]["content_truncated"]  # the recorder capped it
    assert failed(ctx) == set()


def test_silent_truncation_fails_disclosure_delivery_and_both_checksums(tmp_path):
    ctx = make_ctx(tmp_path, [silent("a"), silent("b")], {"a": None, "b": None, "b_exit_code": 1})
    assert failed(ctx) == {"H1-truncation-disclosed", "H3-checksum-delivered", "A1-checksum-a", "A2-checksum-b"}


def test_misreported_omitted_size_fails_only_h2(tmp_path):
    ctx = make_ctx(tmp_path, [reference("a", lie=True), tail3("a"), reference("b", lie=True), tail3("b")], GOOD)
    assert failed(ctx) == {"H2-omitted-size-accurate"}
    reason = SCORE.score(ctx)["H2-omitted-size-accurate"][1]
    assert "OFF" in reason


def test_silent_truncation_of_only_the_exit_1_path(tmp_path):
    ctx = make_ctx(tmp_path, [reference("a"), tail3("a"), silent("b")], {**GOOD, "b": None})
    assert failed(ctx) == {"H1-truncation-disclosed", "H3-checksum-delivered", "A2-checksum-b"}


def test_wrong_exit_code_fails_only_a3(tmp_path):
    ctx = make_ctx(tmp_path, [codex("a"), codex("b")], {**GOOD, "b_exit_code": 0})
    assert failed(ctx) == {"A3-b-exit-code"}


def test_hidden_exit_status_fails_h4_and_a3(tmp_path):
    """What hide_exit_code does: no exit status shown, so the model reports 0 (rule 10: the
    agent failure has a harness criterion that the same defect flips)."""
    def hidden(part: str) -> str:
        return reference(part).split("\n", 1)[1]

    ctx = make_ctx(tmp_path, [hidden("a"), tail3("a"), hidden("b"), tail3("b")], {**GOOD, "b_exit_code": 0})
    assert failed(ctx) == {"H4-b-exit-status-delivered", "A3-b-exit-code"}
    assert "no delivered result of part b's export states its exit status 1" in SCORE.score(ctx)[
        "H4-b-exit-status-delivered"][1]


@pytest.mark.parametrize("bad", [None, "not json", {"a": TRUTH["checksums"]["a"]}])
def test_missing_or_invalid_deliverable(tmp_path, bad):
    ctx = make_ctx(tmp_path, [codex("a"), codex("b")], bad)
    assert {"A2-checksum-b", "A3-b-exit-code"} <= failed(ctx)


def test_do_nothing_run_fails_every_criterion(tmp_path):
    ctx = make_ctx(tmp_path, [], None)
    assert failed(ctx) == set(verdicts(ctx))


def test_size_statement_checks_each_gap_not_the_whole_output():
    ok, notes = SCORE.check_sizes(claude_error("b"), TEXT["b"])
    assert ok, notes
    assert any("lines" in n for n in notes) and any("bytes" in n for n in notes)
    ok, notes = SCORE.check_sizes(codex("a"), TEXT["a"])
    assert ok and len(notes) == 3, notes
    wrong = claude_error("b").replace("lines truncated", "lines truncated", 1)
    wrong = wrong.replace(f"[{TEXT['b'].rstrip().count(chr(10), 30000) + 1} lines", "[900 lines")
    assert not SCORE.check_sizes(wrong, TEXT["b"])[0]


# --------------------------------------------------------------------------- probe policy


def drive(respond) -> list[Any]:
    """Run the policy, answering each action with ``respond(action)``; returns the actions."""
    gen = POLICY.policy(Turn(1, "export"))
    actions = [next(gen)]
    while not isinstance(actions[-1], Final):
        actions.append(gen.send(respond(actions[-1])))
    return actions


def written(actions: list[Any]) -> dict[str, Any]:
    return json.loads(next(a for a in actions if isinstance(a, WriteFile)).content)


def responder(first: dict[str, str]):
    def respond(action):
        if isinstance(action, WriteFile):
            return Observation(text=f"Wrote {len(action.content)} bytes")
        assert isinstance(action, Shell), action
        cmd = action.command
        part = "a" if "--part a" in cmd or "call_a" in cmd or "toolu_a" in cmd else "b"
        if cmd.startswith("tail -n 3") or "| tail -n 3" in cmd:
            return Observation(text=tail3(part))
        return Observation(text=first[part], is_error=None)
    return respond


def test_policy_reads_the_saved_copy_the_notice_names():
    actions = drive(responder({"a": reference("a"), "b": reference("b")}))
    cmds = [a.command for a in actions if isinstance(a, Shell)]
    assert cmds == ["python3 export.py --part a", "tail -n 3 /ws/.tt-outputs/call_a.stdout.txt",
                    "python3 export.py --part b", "tail -n 3 /ws/.tt-outputs/call_b.stdout.txt"]
    assert written(actions) == GOOD


@pytest.mark.parametrize("end_marker", [True, False])
def test_policy_reruns_with_tail_when_no_copy_is_named(end_marker):
    actions = drive(responder({"a": claude_persisted("a"), "b": claude_error("b", end_marker=end_marker)}))
    cmds = [a.command for a in actions if isinstance(a, Shell)]
    assert cmds[1].startswith("tail -n 3 /home/agent/.claude/") and cmds[3] == "python3 export.py --part b | tail -n 3"
    assert written(actions) == GOOD


def test_policy_needs_no_recovery_when_the_tail_is_shown():
    actions = drive(responder({"a": codex("a"), "b": codex("b")}))
    assert len([a for a in actions if isinstance(a, Shell)]) == 2
    assert written(actions) == GOOD


def test_policy_writes_null_after_a_silent_cut():
    actions = drive(responder({"a": silent("a"), "b": silent("b")}))
    assert len([a for a in actions if isinstance(a, Shell)]) == 2
    assert written(actions) == {"a": None, "b": None, "b_exit_code": 1}
