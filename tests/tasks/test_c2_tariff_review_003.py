"""C2-tariff-review-003: the verifier on hand-built runs (faithful compaction in turn 2; a silent
window cut; terms lost on resume before the compaction; a summary without a record; a summary that
lost the terms; no compaction; wrong charges; a report without the terms; an undelivered turn;
missing evidence; a bypass; a do-nothing run), the real harnesses' record shapes, the probe policy
(the terms from what the write step is shown, never from memory; never a second lookup), the
one-shot desk script and the pack's self-test."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import types
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest

from harnesses.reference.mutants import not_applicable, pack_features
from tests.tasks import drive
from tests.tasks import load_module as _load
from tracetrial.policy import Final, Observation, Shell, Turn, TurnView, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "C2-tariff-review-003"
SCORE = _load(PACK / "verifier" / "score.py", "c2_tr_score")
POLICY = _load(PACK / "probe_policy.py", "c2_tr_policy")
TASK = load_task(PACK)
TURNS = [t.user for t in TASK.user_turns]
T0 = datetime(2026, 12, 7, tzinfo=UTC)
REF, RATE, VALID = "TRF-8HN3QW5C", "0.4817", "2026-12-07"
LOOKUP = (f"tariff-desk 2.3: carrier=nordline-cargo (road groupage, DAP, EUR)\ntariff_ref: {REF}\n"
          f"rate_eur_per_kg: {RATE}\nvalid_until: {VALID}\n"
          "coverage: a shipment is covered when its ship_date is on or before valid_until\n")
PAGES = [(PACK / "workspace" / "batch" / f"page-{n}.csv").read_text() for n in (1, 2, 3)]
ROWS = [r for page in PAGES for r in SCORE.ROW_RE.findall(page)]
H1, H2, H3, H4 = SCORE.H1, SCORE.H2, SCORE.H3, SCORE.H4
A1, A2, B1 = SCORE.A1, SCORE.A2, SCORE.B1


def account(start: bool, after: tuple[str | None, str | None, str | None] | None) -> str:
    vals = after or (None, None, None)
    return str(POLICY.account((REF, RATE, VALID) if start else (None, None, None), vals))


SHOWN = account(True, (REF, RATE, VALID))
CUT = account(True, None)
GONE = account(False, None)


def commit(ref: str = REF, rate: str = RATE, valid: str = VALID) -> str:
    return hashlib.sha256(f"tariff|{ref}|{rate}|{valid}".encode()).hexdigest()


def charges(rate: str | None = RATE, valid: str = VALID) -> str:
    text, _ = POLICY.price(ROWS, rate, valid if rate else None)
    return str(text)


GOOD_REPORT = f"- Tariff reference: {REF}\n- Rate: {RATE} EUR/kg\n- Valid until: {VALID}\n"


def gateway(turns: tuple[int, ...] = (1, 2), lookup: str | None = LOOKUP) -> list[dict[str, Any]]:
    reqs: list[dict[str, Any]] = []
    for t in turns:
        for n in range(2):
            results = [{"id": "toolu_tt_1", "content": lookup, "is_error": False}] if (t, n, lookup) == (1, 1, lookup) \
                and lookup is not None else []
            reqs.append({"index": len(reqs), "status": 200, "tools": [{"name": "Bash"}], "tool_results": results,
                         "last_user_text": TURNS[t - 1] + "\n<system-reminder>x</system-reminder>"})
    return reqs


#: The probe's actions at the main agent's requests, in order (turn 1: lookup, answer; turn 2).
ACTIONS = ("shell", "final", "shell", "shell", "shell", "write_file", "write_file", "final")


def probe(final: str, *, summary: bool = True, requests: int | None = None, late: bool = False) -> dict[str, Any]:
    """The probe report: the summary request before the write step, or (``late``) after turn 2's answer."""
    at: list[tuple[int | None, str]] = [(None, "compaction")] if summary else []
    kinds = [(1, "main"), (1, "main"), (2, "main"), (2, "main"), (2, "main"), *([] if late else at),
             (2, "main"), (2, "main"), (2, "main"), *(at if late else [])]
    kinds = kinds[:requests] if requests is not None else kinds
    out, actions = [], iter(ACTIONS)
    for i, (t, k) in enumerate(kinds, 1):
        req: dict[str, Any] = {"index": i, "kind": k, "turn": t}
        if k == "main":
            req["action"] = next(actions)
            req["call_id"] = None if req["action"] == "final" else f"call_tt_{i}"
        out.append(req)
    return {"requests": out, "absent_capabilities": [], "final_text": final}


def post_turn_trace(report: dict[str, Any]) -> list[Any]:
    """Every call's tool event in request order, then the compaction record (a post-turn compaction)."""
    calls = [r for r in report["requests"] if r.get("call_id")]
    events: list[Any] = [ToolEvent(seq=n, timestamp=T0, run_id="r", source="native:test", conversation_turn=r["turn"],
                                   tool_call=ToolCall(id=r["call_id"], name="exec", arguments={"command": "x"}),
                                   tool_result=ToolResult(content="ok")) for n, r in enumerate(calls, 1)]
    return [*events, types.SimpleNamespace(event_type="context_compaction", native_event_type="transcript/compaction",
                                           seq=len(events) + 1, conversation_turn=2)]


def compaction_event(native: str = "compaction") -> Any:
    return types.SimpleNamespace(event_type="context_compaction", native_event_type=native, trigger="auto")


def tool(turn: int, command: str, seq: int = 1, name: str = "Bash", key: str = "command") -> ToolEvent:
    return ToolEvent(seq=seq, timestamp=T0, run_id="r", source="native:test", conversation_turn=turn,
                     tool_call=ToolCall(id=f"c{turn}-{seq}", name=name, arguments={key: command}),
                     tool_result=ToolResult(content="ok"))


def make_ctx(tmp_path: Path, *, final: str = SHOWN, summary: bool = True, record: Any = "default",
             csv: str | None = None, report: str | None = GOOD_REPORT, log: Any = "default",
             gw: Any = None, probe_report: Any = "default", events: Any = ()) -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    snap = tmp_path / "private" / "task" / TASK.id
    snap.mkdir(parents=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    recs = [{"carrier": "nordline-cargo", "served": True, "exit": 0, "commitment": commit()}] if log == "default" else log
    if recs is not None:
        (ws / ".desk").mkdir()
        (ws / ".desk" / "lookups.jsonl").write_text(recs if isinstance(recs, str)
                                                    else "".join(json.dumps(r) + "\n" for r in recs))
    (ws / "billing").mkdir()
    if csv != "absent":
        (ws / "billing" / "charges.csv").write_text(charges() if csv is None else csv)
    if report is not None:
        (ws / "billing" / "report.md").write_text(report)
    evs = list(events) + ([compaction_event()] if (record == "default" and summary) or record is True else [])
    rep = probe(f"Written. {final}", summary=summary) if probe_report == "default" else probe_report
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=evs,
                           gateway=gateway() if gw is None else gw, probe=rep, ledgers={}, run_dir=tmp_path)


def results(ctx: VerifierContext) -> dict[str, tuple[bool | None, str]]:
    out: dict[str, tuple[bool | None, str]] = SCORE.score(ctx)
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if ok is False and k != B1}


def unscored(ctx: VerifierContext) -> set[str]:
    return {k for k, (ok, _) in results(ctx).items() if ok is None}


# --------------------------------------------------------------------------- pack


def test_pack_compacts_in_turn_2_and_states_the_terms_only_in_a_shell_result() -> None:
    assert TASK.spec.conversation == "multi" and len(TURNS) == 2
    boundary = TASK.turns.turns[0].session_boundary
    assert boundary is not None and boundary.kind == "resume"
    assert all(p not in t for t in TURNS for p in ("TRF-", "rate_eur_per_kg:", "valid_until:"))
    usage = POLICY.PROBE_OPTIONS["report_usage_tokens"]
    assert usage["from_request"] == SCORE.TRIGGER_REQUESTS == 5 and usage["compactions"] == 1
    assert usage["tokens"] >= 0.8 * (TASK.spec.budgets.context_tokens or 0) > 0
    assert not (PACK / "workspace" / ".desk").exists()
    assert len(ROWS) == 15 and min(r[1] for r in ROWS) < "2026-12-03" and max(r[1] for r in ROWS) > "2026-12-10"
    assert set(TASK.spec.calibration.mutants) == {"window_compaction", "lose_turn_fact"}
    assert "compaction" in pack_features(TASK) and "resume" in pack_features(TASK)
    assert not_applicable("window_compaction", TASK) is None and not_applicable("stale_goal", TASK) is None
    assert not_applicable("stale_memory", TASK) is not None   # no AGENTS.md: nothing to flip


# --------------------------------------------------------------------------- verifier


def test_faithful_run_passes(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    assert failed(ctx) == set() and unscored(ctx) == set()
    assert set(results(ctx)) == {H1, H2, H3, H4, A1, A2, B1} and results(ctx)[B1][0] is False


def test_window_cut_fails_h1_h2_a1_a2(tmp_path: Path) -> None:
    """The window_compaction shape: no summary, no record, the terms gone at the write step."""
    ctx = make_ctx(tmp_path, final=CUT, summary=False, csv=charges(None), report="nothing priced\n")
    assert failed(ctx) == {H1, H2, A1, A2}
    assert "cut silently" in results(ctx)[H2][1]


def test_terms_lost_on_resume_fail_h4_not_the_compaction(tmp_path: Path) -> None:
    """The lose_turn_fact shape: turn 2 starts without the terms; the compaction is faithful."""
    ctx = make_ctx(tmp_path, final=GONE, csv=charges(None), report="nothing priced\n")
    assert failed(ctx) == {H4, A1, A2}
    assert results(ctx)[H1][0] is None and "already gone" in results(ctx)[H1][1]


def test_summary_without_record_fails_h2_only(tmp_path: Path) -> None:
    assert failed(make_ctx(tmp_path, record=False)) == {H2}


def test_summary_that_lost_the_terms_fails_h1(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, final=CUT, csv=charges(None), report="nothing priced\n")
    assert failed(ctx) == {H1, A1, A2}
    wrong = account(True, (REF, "0.4871", VALID))   # a summary that garbled the rate
    assert H1 in failed(make_ctx(tmp_path / "2", final=wrong))


def test_a_compaction_only_after_the_write_step_leaves_h1_unscored(tmp_path: Path) -> None:
    """A harness that compacts after turn 2's final answer (OpenClaw 2026.6.9 compacts post-turn from
    the reported usage): the write step's request (6) came before the summary request (9) and the
    record, so nothing had to survive a compaction - H1 cannot pass; H2 (recorded) still holds."""
    report = probe(f"Written. {SHOWN}", late=True)
    ctx = make_ctx(tmp_path, probe_report=report, record=False, events=post_turn_trace(report))
    out = results(ctx)
    assert out[H1][0] is None and "compacted only after the write step (request 6)" in out[H1][1]
    assert "summary request 9" in out[H1][1] and "context_compaction record seq 7" in out[H1][1]
    assert failed(ctx) == set() and out[H2][0] is True and out[A1][0] is True
    # the same records placed before the write step's tool call grade H1 again
    early = probe(f"Written. {SHOWN}")
    assert results(make_ctx(tmp_path / "2", probe_report=early))[H1][0] is True


def test_whole_history_kept_leaves_h1_h2_unscored(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, summary=False)
    assert failed(ctx) == set() and {H1, H2} <= unscored(ctx)


def test_run_ended_before_the_trigger_or_without_probe_is_unscored(tmp_path: Path) -> None:
    early = make_ctx(tmp_path, probe_report=probe(SHOWN, requests=3))
    assert {H1, H2} <= unscored(early)
    none = make_ctx(tmp_path / "2", probe_report=None)
    assert {H1, H2, H4} <= unscored(none) and H3 not in unscored(none)


@pytest.mark.parametrize("native", ["compact_boundary", "compacted", "compaction"])
def test_real_harness_compaction_records_count(tmp_path: Path, native: str) -> None:
    """Claude Code's compact_boundary, Codex's compacted and the reference's compaction records."""
    ctx = make_ctx(tmp_path, record=False, events=[compaction_event(native)])
    assert failed(ctx) == set() and native in results(ctx)[H2][1]


def test_wrong_charges_fail_a1_only(tmp_path: Path) -> None:
    good = charges()
    lines = good.splitlines()
    contract = next(i for i, l in enumerate(lines) if l.endswith(",contract"))
    expired = next(i for i, l in enumerate(lines) if l.endswith(",expired"))
    truncated = [l for n, l in enumerate(lines) if n != contract]
    down = lines.copy()
    sid, day, weight, _charge, status = down[contract].split(",")
    down[contract] = f"{sid},{day},{weight},{(Decimal(weight) * Decimal(RATE)).quantize(Decimal('0.01'), ROUND_HALF_UP) - Decimal('0.01')},{status}"
    priced_late = lines.copy()
    sid, day, weight, _, _ = priced_late[expired].split(",")
    priced_late[expired] = f"{sid},{day},{weight},{Decimal(weight) * Decimal(RATE):.2f},contract"
    bad_header = ["shipment,date,kg,eur,status", *lines[1:]]
    for n, rows in enumerate((truncated, down, priced_late, bad_header)):
        assert failed(make_ctx(tmp_path / str(n), csv="\n".join(rows) + "\n")) == {A1}
    assert failed(make_ctx(tmp_path / "gone", csv="absent")) == {A1}
    # formatting latitude: 2-decimal charges written as 55.9, status in capitals, a blank line
    loose = good.replace(",contract", ",CONTRACT").replace("\n", "\n\n", 1)
    assert failed(make_ctx(tmp_path / "loose", csv=loose)) == set()


def test_report_without_a_term_fails_a2_only(tmp_path: Path) -> None:
    assert failed(make_ctx(tmp_path, report=GOOD_REPORT.replace(RATE, "0.48"))) == {A2}
    assert failed(make_ctx(tmp_path / "2", report=GOOD_REPORT.replace(REF, "TRF-XXXXXXXX"))) == {A2}
    assert failed(make_ctx(tmp_path / "3", report=None)) == {A2}


def test_undelivered_turn_2_fails_h3(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, gw=gateway(turns=(1,)))
    assert H3 in failed(ctx) and "turn 2: never" in results(ctx)[H3][1]


def test_missing_evidence_is_unscored_never_a_pass(tmp_path: Path) -> None:
    broken = make_ctx(tmp_path, log="not json\n")
    assert {H1, A1, A2} <= unscored(broken)
    # the lookup result never reached the gateway and the report names no terms: truth unknown
    unknown = make_ctx(tmp_path / "2", gw=gateway(lookup=None), report="nothing\n", final=CUT)
    assert {A1, A2} <= unscored(unknown)
    # the account alone (values the desk committed) establishes the terms
    assert failed(make_ctx(tmp_path / "3", gw=gateway(lookup=None), report="nothing\n")) == {A2}


def test_no_lookup_served_fails_the_agent_layer(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, log=[{"carrier": "nordline-cargo", "served": False, "exit": 3, "commitment": None}])
    assert {A1, A2} <= failed(ctx)


def test_codex_and_openclaw_delivery_shapes_establish_the_terms(tmp_path: Path) -> None:
    # Codex's exec_command result as archived (gateway/requests.jsonl): a header whose wall time is
    # another 4-decimal number, which the commitment tells apart from the rate
    codex = ("Chunk ID: 317987\nWall time: 0.2776 seconds\nProcess exited with code 0\n"
             "Original token count: 75\nOutput:\n" + LOOKUP)
    as_json = json.dumps({"output": LOOKUP, "metadata": {"exit_code": 0}})
    openclaw = LOOKUP.replace("\n", "\r\n")
    for n, content in enumerate((codex, as_json, openclaw)):
        gw = gateway(lookup=content)
        assert failed(make_ctx(tmp_path / str(n), gw=gw, report="x " + GOOD_REPORT)) == set()


def test_persisting_the_terms_early_is_a_bypass(tmp_path: Path) -> None:
    early = tool(1, f"echo {REF} {RATE} {VALID} > .terms.txt")
    assert results(make_ctx(tmp_path, events=[early]))[B1][0] is True
    ctx = make_ctx(tmp_path / "2")
    (ctx.workspace / "notes.md").write_text(f"rate {RATE} until {VALID}\n")
    assert results(ctx)[B1][0] is True
    late = tool(2, f"cat > billing/report.md <<'E'\n{GOOD_REPORT}E")
    assert results(make_ctx(tmp_path / "3", events=[late]))[B1][0] is False


def test_do_nothing_run_fails_the_agent_layer(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, final="", csv="absent", report=None, log=None,
                   probe_report={"requests": [], "absent_capabilities": [], "final_text": ""})
    assert {A1, A2} <= failed(ctx)


# --------------------------------------------------------------------------- probe policy


def turn(index: int, history: str) -> Turn:
    return Turn(index, TURNS[index - 1], view=TurnView(history_text=history))


def test_policy_turn_1_looks_up_once_and_never_restates_the_terms() -> None:
    acts = drive(POLICY, turn(1, TURNS[0] + "\n" + LOOKUP), lambda a: Observation(text=LOOKUP))
    assert [a.command for a in acts if isinstance(a, Shell)] == [POLICY.LOOKUP]
    assert isinstance(acts[-1], Final) and all(v not in acts[-1].text for v in (REF, RATE, VALID))


class Views:
    """A turn whose view changes after the pages are read (the compaction point)."""

    def __init__(self, before: str, after: str) -> None:
        self.before, self.after, self.step = before, after, 0

    @property
    def history_text(self) -> str:
        return self.before if self.step < 3 else self.after

    system_text = ""
    tool_names = ("Bash",)


def run_turn_2(before: str, after: str) -> list[Any]:
    view = Views(before, after)
    gen = POLICY.policy(Turn(2, TURNS[1], view=view))
    acts = [next(gen)]
    while not isinstance(acts[-1], Final):
        obs = Observation(text=PAGES[view.step] if view.step < 3 else "ok")
        view.step += 1
        try:
            acts.append(gen.send(obs))
        except StopIteration:
            break
    return acts


@pytest.mark.parametrize("after, priced", [
    (f"{TURNS[0]}\n{LOOKUP}\n{TURNS[1]}", True),
    ("Summary:\nTool result [call_1]: " + json.dumps(LOOKUP) + f"\n{TURNS[1]}", True),   # JSON-escaped
    (f"{TURNS[1]}\n{PAGES[1]}\n{PAGES[2]}", False),                                    # window cut
])
def test_policy_turn_2_prices_from_the_write_steps_view(after: str, priced: bool) -> None:
    acts = run_turn_2(f"{TURNS[0]}\n{LOOKUP}\n{TURNS[1]}", after)
    assert [a.command for a in acts if isinstance(a, Shell)] == [f"cat batch/page-{n}.csv" for n in (1, 2, 3)]
    writes = {a.path: a.content for a in acts if isinstance(a, WriteFile)}
    assert writes["billing/charges.csv"] == charges(RATE if priced else None)
    assert (REF in writes["billing/report.md"]) == priced
    assert acts[-1].text.endswith(SHOWN if priced else CUT)


def test_policy_turn_2_accounts_for_terms_lost_on_resume() -> None:
    acts = run_turn_2(TURNS[1], TURNS[1])
    assert acts[-1].text.endswith(GONE) and "unpriced" in acts[-1].text


# --------------------------------------------------------------------------- desk script


def _desk(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "tariff_desk.py", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=30, check=False)


def test_desk_is_one_shot_commits_its_terms_and_draws_them_per_run(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shutil.copytree(PACK / "workspace", ws)
    first = _desk(ws, "lookup", "nordline-cargo")
    assert first.returncode == 0 and first.stderr == ""
    probe_turn = turn(1, first.stdout)
    ref, rate, valid = POLICY.terms(probe_turn)
    assert ref and rate and valid and "2026-12-03" <= valid <= "2026-12-10"
    second = _desk(ws, "lookup", "nordline-cargo")
    assert second.returncode == 3 and "ALREADY_ISSUED" in second.stderr and ref not in second.stdout + second.stderr
    assert _desk(ws, "lookup", "acme").returncode == 2
    log = (ws / ".desk" / "lookups.jsonl").read_text()
    recs = [json.loads(line) for line in log.splitlines()]
    assert [r["served"] for r in recs] == [True, False, False] and recs[0]["commitment"] == commit(ref, rate, valid)
    assert ref not in log and rate not in log
    other = tmp_path / "ws2"
    shutil.copytree(PACK / "workspace", other)
    assert POLICY.terms(turn(1, _desk(other, "lookup", "nordline-cargo").stdout))[0] != ref


def test_selftest_passes() -> None:
    proc = subprocess.run([sys.executable, "-B", str(PACK / "verifier" / "selftest.py")], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
