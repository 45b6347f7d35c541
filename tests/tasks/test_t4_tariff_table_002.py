"""T4-tariff-table-002: the tariff simulator (a seeded 150-190-line table with every lossy-conversion
shape, a text content that is only a summary, pages of the same stored table), the verifier on
hand-built two-turn runs (faithful relays in every wrapper the harnesses use; a harness that cuts
the large result with a notice and the pages that recover it; a silent cut; the structured
result dropped; each lossy conversion; the resumed history as the request body, the probe's
account or the harness's model_input record shows it; an undelivered turn; wrong or missing
deliverables; a do-nothing run) and the probe policy (it writes exactly what it was shown, pages
through a cut table, works from the resumed history or fetches again, and writes nothing when
only the summary arrived)."""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from apparatus.simulators.engine import ServiceRuntime
from apparatus.simulators.ledger import Ledger
from apparatus.simulators.spec import load_service, simulator_specs
from tests.tasks import drive as drive_policy
from tests.tasks import load_module as _load
from tracetrial.policy import CallTool, Final, NativeTool, Observation, Turn, TurnView, WriteFile
from tracetrial.task import load_task
from tracetrial.trace import EventBase, ModelInputEvent, ToolCall, ToolEvent, ToolResult
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "T4-tariff-table-002"
NOW = datetime.now(UTC)
SCORE = _load(PACK / "verifier" / "score.py", "t4_tariff_score")
POLICY = _load(PACK / "probe_policy.py", "t4_tariff_policy")
SIM = _load(PACK / "simulators" / "tariffs.py", "t4_tariff_sim")
TASK = load_task(PACK)
TURNS = [TASK.prompt, *(t.user for t in TASK.turns.turns)]
H1, H2, H3, H4 = SCORE.H1, SCORE.H2, SCORE.H3, SCORE.H4
A1, A2 = SCORE.A1, SCORE.A2
IDS = {H1, H2, H3, H4, A1, A2}
TRUTH = json.loads((PACK / "truth.json").read_text())
TOOL = "mcp__tariffs__get_tariff_table"
SCHEDULE = "EU-TARIC-2027-01"


def _runtime(tmp: Path, seed: str) -> tuple[ServiceRuntime, Path]:
    sims = {s.name: s for s in simulator_specs(PACK)}
    led = Ledger(tmp / "tariffs.jsonl", "tariffs")
    led.init()
    rt = ServiceRuntime(load_service(PACK, sims["tariffs"]), tmp / "state", led, seed)
    rt.start_session()
    return rt, tmp / "tariffs.jsonl"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, list[dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("sim")
    rt, path = _runtime(tmp, "unit-seed")
    out = rt.call_tool("get_tariff_table", {"schedule": SCHEDULE})
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return out.structured, out.text, records


@pytest.fixture
def table(served: tuple[dict[str, Any], str, list[dict[str, Any]]]) -> dict[str, Any]:
    return copy.deepcopy(served[0])


@pytest.fixture
def records(served: tuple[dict[str, Any], str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return copy.deepcopy(served[2])


# ------------------------------------------------------------------ relays, runs and deliverables


def relay(table: Any, summary: str = "Tariff schedule EU-TARIC-2027-01: 170 tariff lines in EUR. The lines "
                                     "themselves are in the structured result.") -> str:
    """The reference harness's relay: the MCP result as JSON (structuredContent kept)."""
    out: dict[str, Any] = {"isError": False, "content": [{"type": "text", "text": summary}]}
    if table is not None:
        out["structuredContent"] = table
    return json.dumps(out, ensure_ascii=False)


def openclaw(table: Any) -> str:
    """OpenClaw's relay through tool_call: an untrusted-content wrapper around the pretty JSON of the
    projected result, whose text part is ``structuredContent:\\n`` + the sorted, indented table."""
    text = "structuredContent:\n" + json.dumps(table, indent=2, sort_keys=True, ensure_ascii=False)
    body = {"tool": {"id": "mcp:tariffs:tariffs__get_tariff_table", "name": "tariffs__get_tariff_table",
                     "source": "mcp"}, "result": {"content": [{"type": "text", "text": text}]}}
    return ("SECURITY NOTICE: The following content is from an EXTERNAL, UNTRUSTED source.\n\n"
            "<<<EXTERNAL_UNTRUSTED_CONTENT id=\"x\">>>\nSource: API\n---\n"
            + json.dumps(body, indent=2, ensure_ascii=False) + "\n<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\"x\">>>")


def codex_cut(table: dict[str, Any], keep: int = 9000) -> str:
    """Codex's relay of a result above its inline limit: head and tail kept, a notice between."""
    text = json.dumps(table, ensure_ascii=False, separators=(",", ":"))
    return (f"Wall time: 0.65 seconds\nOutput:\n{text[:keep // 2]}…{len(text) - keep} chars truncated…"
            f"{text[-keep // 2:]}")


def codex_valid_cut(table: dict[str, Any], keep: int = 9000) -> str:
    """Codex's cut as seen on 0.145.0: the notice landed inside a key, so the head and the tail
    still form valid JSON — a table missing most of its lines (``line_count`` says so)."""
    text = json.dumps(table, ensure_ascii=False, separators=(",", ":"))
    head = text[:keep // 2]
    head = head[:head.rindex('{"line"') + 5]
    tail = text[-keep // 2:]
    tail = tail[tail.index('{"line"') + 5:]
    out = f"Wall time: 0.13 seconds\nOutput:\n{head}…23 chars truncated…{tail}"
    found = SCORE.tables_in(out)
    assert len(found) == 1 and len(found[0]["lines"]) < len(table["lines"]), "not the valid-JSON cut"
    return out


def quota_watch(table: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(SCORE.expected_quota_watch(table))


def duty_quote(table: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(SCORE.expected_duty_quote(table, 750))


def account(history: str) -> str:
    """The probe's turn-2 final text for a resumed history."""
    return str(POLICY.account(history)[1]) + "; used=history digest=x."


def run(tmp: Path, records: list[dict[str, Any]], *, delivered: list[str], recorded: Any = "same",
        raw_event: Any = None, watch: Any = "none", quote: Any = "none", final: str | None = None,
        body: Any = None, probe: bool = True, turn2: bool = True, call_ids: list[str] | None = None,
        events_main_inputs: Any = None, extra_results: list[dict[str, Any]] | None = None) -> VerifierContext:
    """A two-turn run. ``delivered[i]`` is the text of the i-th get_tariff_table call's result (turn 1,
    then turn-2 calls); ``final`` the probe's last final text (turn 2); ``body`` the archived body of
    the first turn-2 request."""
    ws = tmp / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    snap = tmp / "private" / "task" / TASK.id
    snap.mkdir(parents=True, exist_ok=True)
    for name in ("prompt.md", "turns.json"):
        shutil.copy(PACK / name, snap / name)
    for name, value in (("quota_watch.json", watch), ("duty_quote.json", quote)):
        if value != "none":
            (ws / name).write_text(value if isinstance(value, str) else json.dumps(value))
    ids = call_ids or [f"call_{i + 1}" for i in range(len(delivered))]
    results = [{"id": cid, "is_error": None, "content": text, "content_truncated": False,
                "size": len(text.encode()), "sha256": ""} for cid, text in zip(ids, delivered)]
    gateway = [{"index": 0, "wire_format": "chat", "status": 200, "error": None, "tool_results": [],
                "last_user_text": TURNS[0]},
               {"index": 1, "wire_format": "chat", "status": 200, "error": None,
                "tool_results": results[:1] + (extra_results or []), "last_user_text": TURNS[0]}]
    if turn2:
        gateway.append({"index": 2, "wire_format": "chat", "status": 200, "error": None, "tool_results": [],
                        "last_user_text": TURNS[1]})
        gateway.extend({"index": 3 + i, "wire_format": "chat", "status": 200, "error": None, "tool_results": [r],
                        "last_user_text": TURNS[1]} for i, r in enumerate(results[1:]))
    if body is not None:
        (tmp / "gateway" / "bodies").mkdir(parents=True, exist_ok=True)
        (tmp / "gateway" / "bodies" / "2.json").write_text(body if isinstance(body, str) else json.dumps(body))
    events: list[EventBase] = []
    for i, (cid, text) in enumerate(zip(ids, delivered)):
        content = text if recorded == "same" else recorded
        events.append(ToolEvent(
            seq=4 + i, timestamp=NOW, run_id="r", raw_event=raw_event,
            tool_call=ToolCall(id=cid, name=TOOL, arguments={"schedule": SCHEDULE}),
            tool_result=None if content is None and raw_event is None else ToolResult(content=content)))
    if events_main_inputs is not None:
        events.append(ModelInputEvent(seq=40, timestamp=NOW, run_id="r", conversation_turn=2,
                                      principal_role="main", messages=events_main_inputs))
    report = {"requests": [{"index": 1, "action": "call_tool", "mapped_tool": TOOL, "call_id": cid,
                            "arguments": {"schedule": SCHEDULE}} for cid in ids],
              "final_text": final}
    return VerifierContext(workspace=ws, baseline=ws, truth=TRUTH, oracle=None, events=events, gateway=gateway,
                           probe=report if probe else None, ledgers={"tariffs": records}, run_dir=tmp)


def faithful(tmp: Path, table: dict[str, Any], records: list[dict[str, Any]], **kw: Any) -> VerifierContext:
    """The reference harness's run: one whole result in turn 1, the table in the resumed history."""
    text = relay(table)
    kw.setdefault("delivered", [text])
    kw.setdefault("watch", quota_watch(table))
    kw.setdefault("quote", duty_quote(table))
    kw.setdefault("final", account(TURNS[0] + "\n" + text + "\nWrote 900 bytes\n" + TURNS[1]))
    return run(tmp, records, **kw)


def verdicts(ctx: VerifierContext) -> dict[str, tuple[bool | None, str]]:
    out: dict[str, tuple[bool | None, str]] = SCORE.score(ctx)
    assert set(out) == IDS
    return out


def failed(ctx: VerifierContext) -> set[str]:
    return {k for k, v in verdicts(ctx).items() if v[0] is False}


# ------------------------------------------------------------------ pack and simulator


def test_pack_is_two_turns_with_a_native_resume_and_declares_the_mutant() -> None:
    assert TASK.spec.property == "structured_result_fidelity" and TASK.spec.component == "T"
    assert TASK.spec.conversation == "multi" and len(TURNS) == 2
    boundary = TASK.turns.turns[0].session_boundary
    assert boundary is not None and boundary.kind == "resume" and boundary.history_replayed
    assert set(TASK.spec.calibration.mutants["drop_structured_content"]) == IDS - {H4}
    # turn 2 names the schedule and the weight, so a resume that loses turn 1 can still fetch again
    assert SCHEDULE in TURNS[1] and "750 kg consignment" in TURNS[1]


def test_the_table_holds_every_lossy_shape(table: dict[str, Any]) -> None:
    lines = table["lines"]
    assert 150 <= len(lines) <= 190
    size = len(json.dumps(table, ensure_ascii=False, separators=(",", ":")).encode())
    assert 20_000 <= size <= 60_000
    empty = [ln for ln in lines if ln["quota"] == {}]
    pref = [ln for ln in lines if ln["preferential"] is True]
    assert 6 <= len(empty) <= 9 and 7 <= len(pref) <= 10
    assert any(ln["quota"] is None for ln in lines) and any(ln["quota"] and "open_kg" in ln["quota"] for ln in lines)
    assert all(isinstance(ln["preferential"], bool) and isinstance(ln["licence"], str) for ln in lines)
    for chosen in (empty, pref):
        rates = [SCORE.band_rate(ln["bands"], 750) for ln in chosen]
        assert 1e-07 in rates and 0.1 + 0.2 in rates  # the float shapes sit in the 750 kg band
        assert any(ln["licence"] == "true" for ln in chosen)
    assert any(ln["notes"] == {} for ln in empty)
    assert any("." in k and any(ord(c) > 127 for c in "".join(ln["notes"])) for ln in empty for k in ln["notes"])
    assert any("origin" in ln for ln in empty) and any("origin" in ln for ln in pref)
    origin = next(ln["origin"] for ln in lines if "origin" in ln)
    assert isinstance(origin["rules"]["cumulation"]["zones"][0], list) and origin["rules"]["proof"]["waiver"] == {}
    assert any(ln["bands"][0][1] == 750 for ln in pref)  # a band boundary exactly at the weight
    assert all(b[-1][1] is None for b in (ln["bands"] for ln in lines))
    assert any(ord(c) > 0x3000 for ln in lines for c in ln["desc"])


def test_the_text_content_is_only_a_summary(served: tuple[dict[str, Any], str, list[dict[str, Any]]]) -> None:
    table, text, _ = served
    assert SCHEDULE in text and "structured result" in text and str(len(table["lines"])) in text
    assert table["revision"] not in text and "TL-" not in text
    assert SCORE.tables_in(text) == [] and SCORE.SUMMARY_RE.search(text)
    assert not SCORE.PARTIAL_RE.search(text)


def test_values_follow_the_seed(tmp_path: Path) -> None:
    def get(name: str, seed: str) -> Any:
        return _runtime(tmp_path / name, seed)[0].call_tool("get_tariff_table", {"schedule": SCHEDULE}).structured
    a, a2, b = get("a", "seed-a"), get("a2", "seed-a"), get("b", "seed-b")
    assert a == a2 and a != b and a["revision"] != b["revision"]


def test_pages_serve_the_stored_table(tmp_path: Path) -> None:
    rt, path = _runtime(tmp_path, "seed-p")
    whole = rt.call_tool("get_tariff_table", {"schedule": SCHEDULE}).structured
    pages = []
    offset = 0
    while offset < len(whole["lines"]):
        out = rt.call_tool("get_tariff_table", {"schedule": SCHEDULE, "offset": offset, "limit": 30})
        assert not out.is_error and f"tariff lines {offset + 1}-" in out.text and SCORE.SUMMARY_RE.search(out.text)
        assert out.structured == SCORE.page_of(whole, offset, 30) == SIM.page_of(whole, offset, 30)
        pages.append(out.structured)
        offset += 30
    assert POLICY.join(pages) == whole
    again = rt.call_tool("get_tariff_table", {"schedule": SCHEDULE}).structured
    assert again == whole
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    stored = [r for r in recs if r["kind"] == "transition" and (r["detail"] or {}).get("op") == "set"]
    assert len(stored) == 1 and stored[0]["detail"]["new"] == whole  # stored once, served from state after
    # a page is at most 50 lines, and a first page fits the smallest inline limit seen (OpenClaw ~20k chars)
    assert rt.call_tool("get_tariff_table", {"schedule": SCHEDULE, "offset": 0, "limit": 51}).is_error
    assert len(openclaw(SCORE.page_of(whole, 0, POLICY.PAGE))) < 19_000


def test_an_unknown_schedule_is_a_business_error(tmp_path: Path) -> None:
    out = _runtime(tmp_path, "s")[0].call_tool("get_tariff_table", {"schedule": "EU-TARIC-2026-12"})
    assert out.is_error and out.code == "SCHEDULE_NOT_FOUND"


def test_the_ledger_holds_the_served_table(served: tuple[dict[str, Any], str, list[dict[str, Any]]]) -> None:
    table, _, records = served
    got, note = SCORE.served_table(run(Path("/nonexistent"), records, delivered=[], turn2=False))
    assert got == table and "stored on request seq" in note


# ------------------------------------------------------------------ verifier: faithful runs


def test_faithful_reference_run_passes_everything(tmp_path: Path, table: dict[str, Any], records: Any) -> None:
    out = verdicts(faithful(tmp_path, table, records))
    assert all(v[0] for v in out.values()), out
    assert "probe's account" in out[H3][1]


@pytest.mark.parametrize("wrap", [
    lambda t: json.dumps(t, ensure_ascii=False, separators=(",", ":")),          # Claude Code: the JSON instead of the text
    lambda t: "Wall time: 0.2 seconds\nOutput:\n" + json.dumps(t, separators=(",", ":")),   # Codex (under its limit)
    openclaw,                                                                     # OpenClaw: escaped, sorted, indented
    lambda t: json.dumps({"content": [{"type": "text", "text": json.dumps(t)}]}),  # JSON text in a JSON string
    lambda t: "Summary.\n" + json.dumps(t, indent=1, ensure_ascii=True),          # text parts joined, ASCII escapes
], ids=["json-only", "codex-output", "openclaw-wrapper", "escaped-string", "joined-ascii"])
def test_every_lossless_wrapper_passes(tmp_path: Path, table: dict[str, Any], records: Any, wrap: Any) -> None:
    text = wrap(table)
    ctx = faithful(tmp_path, table, records, delivered=[text],
                   final=account(TURNS[0] + "\n" + text + "\n" + TURNS[1]))
    out = verdicts(ctx)
    assert all(v[0] for v in out.values()), out


@pytest.mark.parametrize("cutter", [codex_cut, codex_valid_cut], ids=["invalid-json", "valid-json"])
def test_a_cut_with_a_notice_is_not_graded_and_the_pages_are(tmp_path: Path, table: dict[str, Any],
                                                            records: Any, cutter: Any) -> None:
    """Codex/OpenClaw: the whole table is cut with a notice; the probe pages through it."""
    pages = [SCORE.page_of(table, off, 30) for off in range(0, len(table["lines"]), 30)]
    texts = [cutter(table)] + ["Wall time: 0.1 seconds\nOutput:\n" + json.dumps(p) for p in pages]
    history = TURNS[0] + "\n" + "\n".join(texts) + "\n" + TURNS[1]
    ctx = run(tmp_path, records, delivered=texts, watch=quota_watch(table), quote=duty_quote(table),
              final=account(history), turn2=True)
    out = verdicts(ctx)
    assert all(v[0] for v in out.values()), out
    assert "truncation matter" in out[H1][1] and f"{len(pages)} cop" not in out[H1][1]
    assert "page 0+30" in out[H1][1] and "truncation matter" in out[H2][1]
    assert f"tables={len(pages)}" in out[H3][1]


def test_only_cut_results_leave_h1_unscored(tmp_path: Path, table: dict[str, Any], records: Any) -> None:
    ctx = run(tmp_path, records, delivered=[codex_cut(table)], final=account(TURNS[0] + "\n" + TURNS[1]))
    out = verdicts(ctx)
    assert out[H1][0] is None and out[H2][0] is None and out[H3][0] is True


def test_a_silent_cut_fails_h1(tmp_path: Path, table: dict[str, Any], records: Any) -> None:
    text = json.dumps(table)[:9000]
    out = verdicts(run(tmp_path, records, delivered=[text], watch=quota_watch(table), quote=duty_quote(table),
                       final=account(TURNS[0] + "\n" + TURNS[1])))
    assert out[H1][0] is False and "without any notice" in out[H1][1]


@pytest.mark.parametrize("altered", [False, True])
def test_a_capped_record_is_read_from_the_archived_body(tmp_path: Path, table: dict[str, Any], records: Any,
                                                       altered: bool) -> None:
    """A relay above the recorder's 64 KiB (the table twice: an indented text part and the
    structuredContent) is judged from the archived body, found by its SHA-256."""
    second = _lossy(table, "float-fixed") if altered else table
    text = json.dumps({"content": [{"type": "text", "text": json.dumps(table, indent=2, ensure_ascii=False)}],
                       "structuredContent": second}, ensure_ascii=False)
    assert len(text.encode()) > 2 * 32 * 1024
    ctx = faithful(tmp_path, table, records, delivered=[text])
    result = ctx.gateway[1]["tool_results"][0]
    head, tail = text.encode()[:32768].decode(errors="ignore"), text.encode()[-32768:].decode(errors="ignore")
    result.update(content=head + tail, content_truncated=True, sha256=hashlib.sha256(text.encode()).hexdigest())
    out = verdicts(ctx)
    assert out[H1][0] is None and "recorded in part" in out[H1][1], out[H1]
    (tmp_path / "gateway" / "bodies").mkdir(parents=True)
    (tmp_path / "gateway" / "bodies" / "1.json").write_text(json.dumps(
        {"messages": [{"role": "tool", "tool_call_id": "call_1", "content": text}]}))
    out = verdicts(ctx)
    assert out[H1][0] is (not altered) and "2 cop" in out[H1][1], out[H1]


def test_a_live_run_without_probe_uses_the_trace_call_ids(tmp_path: Path, table: dict[str, Any],
                                                          records: Any) -> None:
    ctx = faithful(tmp_path, table, records, probe=False, call_ids=["toolu_01"],
                   events_main_inputs=[{"role": "tool", "content": relay(table)}])
    out = verdicts(ctx)
    assert all(v[0] for v in out.values()), out
    assert "model_input" in out[H3][1]


def test_h2_reads_the_native_record_when_the_recorded_content_lacks_it(tmp_path: Path, table: dict[str, Any],
                                                                       records: Any) -> None:
    raw = {"result": {"content": "summary", "structured_content": table}}
    out = verdicts(faithful(tmp_path, table, records, recorded="Tariff schedule summary.", raw_event=raw))
    assert out[H2][0] and "raw_event" in out[H2][1], out[H2]


def test_a_search_result_before_the_call_does_not_mask_the_call(tmp_path: Path, table: dict[str, Any],
                                                                records: Any) -> None:
    """OpenClaw: tool_search then tool_call; the search result carries the output schema only."""
    search = json.dumps([{"name": "tariffs__get_tariff_table", "outputSchema": TASK_OUTPUT_SCHEMA}])
    assert SCORE.tables_in(search) == []
    ctx = faithful(tmp_path, table, records, extra_results=[{"id": "call_0", "content": search}])
    assert failed(ctx) == set()


TASK_OUTPUT_SCHEMA = {"type": "object", "properties": {"schedule": {"type": "string"}, "currency": {"type": "string"},
                                                       "valid": {"type": "object"}, "lines": {"type": "array"}}}


# ------------------------------------------------------------------ verifier: defects


def test_dropped_structured_content_fails_the_declared_criteria(tmp_path: Path, table: dict[str, Any],
                                                               records: Any) -> None:
    """The drop_structured_content mutant: only the summary reaches the model, in both turns; the
    ideal agent writes nothing."""
    summary = relay(None, summary=f"Tariff schedule {SCHEDULE}: {len(table['lines'])} tariff lines in EUR. The "
                                  "lines themselves are in the structured result.")
    history = TURNS[0] + "\n" + summary + "\n" + TURNS[1]
    final = POLICY.account(history)[1] + "; used=none."
    ctx = run(tmp_path, records, delivered=[summary, summary], final=final)
    out = verdicts(ctx)
    assert failed(ctx) == set(TASK.spec.calibration.mutants["drop_structured_content"])
    assert "no tariff table" in out[H1][1] and "structured content lost" in out[H3][1]


def test_a_resume_without_turn_one_passes_h3(tmp_path: Path, table: dict[str, Any], records: Any) -> None:
    """lose_turn_fact: the resumed history has no trace of the result; the table is fetched again."""
    text = relay(table)
    ctx = faithful(tmp_path, table, records, delivered=[text, text], final=account(TURNS[1]))
    out = verdicts(ctx)
    assert all(v[0] for v in out.values()), out
    assert "resume-fidelity" in out[H3][1]


def _lossy(table: dict[str, Any], kind: str) -> dict[str, Any]:
    bad = copy.deepcopy(table)
    lines = bad["lines"]
    empty = [ln for ln in lines if ln["quota"] == {}]
    pref = [ln for ln in lines if ln["preferential"] is True]
    if kind == "bool-as-string":
        for ln in lines:
            ln["preferential"] = "true" if ln["preferential"] else "false"
    elif kind == "string-as-bool":
        for ln in lines:
            ln["licence"] = {"true": True, "false": False}.get(ln["licence"], ln["licence"])
    elif kind == "empty-object-as-null":
        for ln in empty:
            ln["quota"] = None
    elif kind == "empty-dropped":
        for ln in lines:
            if ln["notes"] == {}:
                del ln["notes"]
    elif kind == "null-dropped":
        for ln in lines:
            if ln["quota"] is None:
                del ln["quota"]
    elif kind == "float-shortened":
        for ln in lines:
            ln["bands"] = [[a, b, float(f"{r:.6g}")] for a, b, r in ln["bands"]]
    elif kind == "float-fixed":
        for ln in lines:
            ln["bands"] = [[a, b, float(f"{r:.6f}")] for a, b, r in ln["bands"]]
    elif kind == "arrays-flattened":
        for ln in pref:
            ln["bands"] = [x for band in ln["bands"] for x in band]
    elif kind == "depth-limited":
        for ln in lines:
            if "origin" in ln:
                ln["origin"]["rules"] = "[Object]"
    elif kind == "dotted-keys-split":
        for ln in empty:
            ln["notes"] = {k.split(".")[0]: v for k, v in ln["notes"].items()}
    elif kind == "unicode-mangled":
        for ln in lines:
            ln["desc"] = ln["desc"].encode("utf-8").decode("latin-1")
    elif kind == "line-dropped":
        lines.pop()
    return bad


LOSSY = ["bool-as-string", "string-as-bool", "empty-object-as-null", "empty-dropped", "null-dropped",
         "float-shortened", "float-fixed", "arrays-flattened", "depth-limited", "dotted-keys-split",
         "unicode-mangled", "line-dropped"]


@pytest.mark.parametrize("kind", LOSSY)
def test_each_lossy_conversion_fails_h1_h2_h3(tmp_path: Path, table: dict[str, Any], records: Any,
                                              kind: str) -> None:
    bad = _lossy(table, kind)
    assert SCORE.diff(table, bad), kind
    text = json.dumps(bad, ensure_ascii=False)
    if kind == "line-dropped":  # fewer lines than line_count: a cut; without a notice H1 fails
        out = verdicts(run(tmp_path, records, delivered=[text], final=account(TURNS[0] + text + TURNS[1])))
        assert out[H1][0] is False and "without any notice" in out[H1][1], out
        assert out[H2][0] is None and out[H3][0] is True, out
        return
    # the ideal agent copies what it was shown: the deliverables carry the loss as well
    watch = POLICY.quota_watch(bad)
    quote = POLICY.duty_quote(bad, 750)
    ctx = run(tmp_path, records, delivered=[text], watch=watch, quote=quote,
              final=account(TURNS[0] + "\n" + text + "\n" + TURNS[1]))
    out = verdicts(ctx)
    assert not out[H1][0] and not out[H2][0] and not out[H3][0], (kind, out)
    assert "altered" in out[H1][1]
    if kind != "null-dropped":  # it touches no selected line: harness_absorbed
        assert not (out[A1][0] and out[A2][0]), (kind, out)


def test_one_altered_copy_next_to_an_intact_one_fails_h1(tmp_path: Path, table: dict[str, Any],
                                                         records: Any) -> None:
    bad = _lossy(table, "empty-object-as-null")
    text = json.dumps({"content": [{"type": "text", "text": json.dumps(bad)}], "structuredContent": table})
    out = verdicts(faithful(tmp_path, table, records, delivered=[text]))
    assert not out[H1][0] and "1/2" in out[H1][1]


def test_an_altered_page_fails_h1(tmp_path: Path, table: dict[str, Any], records: Any) -> None:
    page = SCORE.page_of(table, 30, 30)
    page["lines"][0]["preferential"] = not page["lines"][0]["preferential"]
    texts = [codex_cut(table), json.dumps(SCORE.page_of(table, 0, 30)), json.dumps(page)]
    out = verdicts(run(tmp_path, records, delivered=texts, final=account(TURNS[1])))
    assert not out[H1][0] and "page 30+30" in out[H1][1]


# ------------------------------------------------------------------ verifier: the resumed history


def _body(*texts: str) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": TURNS[0]}]
    msgs += [{"role": "tool", "tool_call_id": f"call_{i}", "content": t} for i, t in enumerate(texts)]
    msgs += [{"role": "assistant", "tool_calls": [{"function": {"arguments": json.dumps(
        {"path": "quota_watch.json", "content": "{\"schedule\": \"x\", \"lines\": []}"})}}]},
             {"role": "user", "content": TURNS[1]}]
    return {"model": "probe", "messages": msgs, "tools": [{"type": "function", "function": {
        "name": TOOL, "parameters": {}, "outputSchema": TASK_OUTPUT_SCHEMA}}]}


@pytest.mark.parametrize("history,want", [
    ("table", True), ("summary-only", False), ("altered", False), ("nothing", True), ("pages", True),
    ("cut-only", True),
])
def test_h3_reads_the_archived_body_first(tmp_path: Path, table: dict[str, Any], records: Any, history: str,
                                          want: bool) -> None:
    summary = f"Tariff schedule {SCHEDULE}: 170 tariff lines in EUR."
    texts = {"table": [relay(table)], "summary-only": [relay(None, summary)],
             "altered": [relay(_lossy(table, "float-fixed"))], "nothing": [],
             "pages": [codex_cut(table)] + [json.dumps(SCORE.page_of(table, o, 30))
                                            for o in range(0, len(table["lines"]), 30)],
             "cut-only": [codex_cut(table), summary]}[history]
    # the probe's account says otherwise: the body wins
    ctx = faithful(tmp_path, table, records, body=_body(*texts), final="no account")
    out = verdicts(ctx)
    assert out[H3][0] is want, out[H3]
    assert "request body 2" in out[H3][1]


@pytest.mark.parametrize("final,want", [
    ("Resumed history: tables=0 digests=- cut=0 summary=shown; used=none.", False),
    ("Resumed history: tables=0 digests=- cut=1 summary=shown; used=call.", True),
    ("Resumed history: tables=0 digests=- cut=0 summary=absent; used=call.", True),
    ("Resumed history: tables=1 digests=full:0123456789abcdef cut=0 summary=shown; used=history.", False),
    ("Resumed history: tables=1 digests=full:{d} cut=1 summary=shown; used=history.", True),
    ("Resumed history: tables=2 digests=full:{d} cut=0 summary=absent; used=history.", False),
    ("12 lines quoted.", False),
])
def test_h3_reads_the_probe_account(tmp_path: Path, table: dict[str, Any], records: Any, final: str,
                                    want: bool) -> None:
    ctx = faithful(tmp_path, table, records, final=final.replace("{d}", SCORE.digest(table)))
    assert verdicts(ctx)[H3][0] is want


def test_h3_accepts_the_pages_the_probe_saw(tmp_path: Path, table: dict[str, Any], records: Any) -> None:
    labels = ",".join(f"p{o}+30:{SCORE.digest(SCORE.page_of(table, o, 30))}" for o in (0, 30))
    final = f"Resumed history: tables=2 digests={labels} cut=1 summary=absent; used=history pages digest=x."
    assert verdicts(faithful(tmp_path, table, records, final=final))[H3][0] is True
    final = final.replace(labels.split(":")[1][:16], "f" * 16)
    assert verdicts(faithful(tmp_path, table, records, final=final))[H3][0] is False


def test_h3_without_any_evidence_is_unscored(tmp_path: Path, table: dict[str, Any], records: Any) -> None:
    out = verdicts(faithful(tmp_path, table, records, probe=False))
    assert out[H3][0] is None


def test_an_undelivered_turn_fails_h4_and_h3(tmp_path: Path, table: dict[str, Any], records: Any) -> None:
    ctx = faithful(tmp_path, table, records, turn2=False, quote="none")
    assert failed(ctx) == {H3, H4, A2}


# ------------------------------------------------------------------ verifier: deliverables


@pytest.mark.parametrize("which,edit", [
    ("watch", lambda d: d.update(revision="REV-XXXXXX")),
    ("watch", lambda d: d.update(schedule="EU-TARIC-2026-12")),
    ("watch", lambda d: d["lines"].pop()),
    ("watch", lambda d: d["lines"].reverse()),
    ("watch", lambda d: d["lines"][0].update(quota=None)),
    ("watch", lambda d: d["lines"][0].update(preferential=str(d["lines"][0]["preferential"]).lower())),
    ("watch", lambda d: d["lines"][0].update(extra=1)),
    ("watch", lambda d: d["lines"][0].pop("notes")),
    ("quote", lambda d: d.update(weight_kg=750.5)),
    ("quote", lambda d: d["lines"][0].update(rate=round(d["lines"][0]["rate"], 2))),
    ("quote", lambda d: d["lines"][0].update(licence=d["lines"][0]["licence"] == "true")),
    ("quote", lambda d: d["lines"].pop(0)),
    ("quote", lambda d: d.pop("revision")),
], ids=["revision", "schedule", "line-missing", "order", "quota-null", "bool-string", "extra-field", "notes-dropped",
        "weight", "rate-rounded", "licence-bool", "line-missing-2", "revision-absent"])
def test_each_deliverable_defect_fails_its_criterion(tmp_path: Path, table: dict[str, Any], records: Any,
                                                     which: str, edit: Any) -> None:
    watch, quote = quota_watch(table), duty_quote(table)
    edit(watch if which == "watch" else quote)
    if which == "quote" and quote == duty_quote(table):
        pytest.skip("the edit left the value unchanged for this seed")
    ctx = faithful(tmp_path, table, records, watch=watch, quote=quote)
    assert failed(ctx) == ({A1} if which == "watch" else {A2})


def test_the_float_digits_of_the_750_kg_band_are_graded(tmp_path: Path, table: dict[str, Any],
                                                        records: Any) -> None:
    quote = duty_quote(table)
    hit = next(ln for ln in quote["lines"] if ln["rate"] == 0.1 + 0.2)
    hit["rate"] = 0.3
    assert failed(faithful(tmp_path, table, records, quote=quote)) == {A2}
    quote = duty_quote(table)
    tiny = next(ln for ln in quote["lines"] if ln["rate"] == 1e-07)
    tiny["rate"] = 0.0
    assert failed(faithful(tmp_path, table, records, quote=quote)) == {A2}


def test_numbers_are_compared_as_numbers(table: dict[str, Any]) -> None:
    assert SCORE.diff({"r": 1e-07, "w": 750}, json.loads('{"r": 1e-7, "w": 750.0}')) == []
    assert SCORE.diff({"b": True}, {"b": 1}) and SCORE.diff({"q": {}}, {"q": None}) and SCORE.diff({"q": {}}, {})


def test_invalid_or_missing_deliverables_fail_the_agent_layer(tmp_path: Path, table: dict[str, Any],
                                                              records: Any) -> None:
    assert failed(faithful(tmp_path / "a", table, records, watch="{not json", quote="[]")) == {A1, A2}
    assert failed(faithful(tmp_path / "b", table, records, watch="none", quote="none")) == {A1, A2}


def test_a_do_nothing_run_scores_zero_on_the_agent_layer(tmp_path: Path, records: Any) -> None:
    init_only = [r for r in records if r.get("kind") not in ("request", "transition") or
                 (r.get("detail") or {}).get("op") == "init"]
    ctx = run(tmp_path, init_only, delivered=[], turn2=False)
    assert {A1, A2} <= failed(ctx)


# ------------------------------------------------------------------ probe policy


def _turn(index: int, history: str = "", tools: tuple[str, ...] = (TOOL, "write_file")) -> Turn:
    return Turn(index, TURNS[index - 1], view=TurnView(history_text=history, tool_names=tools))


def _drive(turn: Turn, answers: Any) -> list[Any]:
    def respond(action: Any) -> Observation:
        if isinstance(action, CallTool):
            return Observation(text=answers(action.arguments), tool=TOOL, call_id="c1")
        return Observation(text="ok")
    return drive_policy(POLICY, turn, respond)


def _written(actions: list[Any], path: str) -> Any:
    writes = [a for a in actions if isinstance(a, WriteFile) and a.path == path]
    assert len(writes) == 1, actions
    return json.loads(writes[0].content)


@pytest.mark.parametrize("wrap", [relay, openclaw, lambda t: "Summary.\n" + json.dumps(t),
                                  lambda t: json.dumps({"content": [{"type": "text", "text": json.dumps(t)}]})])
def test_turn_one_writes_exactly_what_it_was_shown(table: dict[str, Any], wrap: Any) -> None:
    actions = _drive(_turn(1), lambda args: wrap(table))
    calls = [a for a in actions if isinstance(a, CallTool)]
    assert [c.arguments for c in calls] == [{"schedule": SCHEDULE}]
    assert SCORE.diff(quota_watch(table), _written(actions, "quota_watch.json")) == []
    assert isinstance(actions[-1], Final)


@pytest.mark.parametrize("cutter", [codex_cut, codex_valid_cut, lambda t: openclaw(t)[:20000] + "\n[truncated]",
                                    lambda t: json.dumps({**t, "lines": t["lines"][:40]})],
                         ids=["codex", "codex-valid-json", "openclaw", "silent-line-loss"])
def test_turn_one_pages_through_a_cut_table(table: dict[str, Any], cutter: Any) -> None:
    def answer(args: dict[str, Any]) -> str:
        if "offset" not in args:
            return str(cutter(table))
        return openclaw(SCORE.page_of(table, args["offset"], args["limit"]))
    actions = _drive(_turn(1), answer)
    calls = [a.arguments for a in actions if isinstance(a, CallTool)]
    pages = -(-len(table["lines"]) // POLICY.PAGE)
    assert len(calls) == 1 + pages and calls[1] == {"schedule": SCHEDULE, "offset": 0, "limit": POLICY.PAGE}
    assert SCORE.diff(quota_watch(table), _written(actions, "quota_watch.json")) == []


def test_the_policy_embeds_no_value(table: dict[str, Any]) -> None:
    other = copy.deepcopy(table)
    other["revision"] = "REV-OTHER9"
    for ln in other["lines"]:
        if ln["quota"] == {}:
            ln["quota"] = None
    other["lines"][5]["quota"] = {}
    written = _written(_drive(_turn(1), lambda args: relay(other)), "quota_watch.json")
    assert written == quota_watch(other) and len(written["lines"]) == 1


@pytest.mark.parametrize("text", [relay(None, "Tariff schedule EU-TARIC-2027-01: 170 tariff lines in EUR."),
                                  "{\"error\": {\"code\": \"X\"}}"])
def test_without_a_table_the_policy_writes_nothing(text: str) -> None:
    actions = _drive(_turn(1), lambda args: text)
    assert not any(isinstance(a, WriteFile) for a in actions)
    assert [a.arguments for a in actions if isinstance(a, CallTool)] == [{"schedule": SCHEDULE}]
    assert isinstance(actions[-1], Final) and "did not write" in actions[-1].text


def test_turn_two_works_from_the_resumed_history(table: dict[str, Any]) -> None:
    history = TURNS[0] + "\n" + openclaw(table) + "\nWrote 900 bytes\n" + TURNS[1]
    actions = _drive(_turn(2, history), lambda args: pytest.fail("no call needed"))
    assert SCORE.diff(duty_quote(table), _written(actions, "duty_quote.json")) == []
    final = actions[-1].text
    assert f"tables=1 digests=full:{SCORE.digest(table)} cut=0 summary=absent" in final and "used=history" in final


@pytest.mark.parametrize("cutter", [codex_cut, codex_valid_cut], ids=["invalid-json", "valid-json"])
def test_turn_two_joins_the_pages_of_the_history(table: dict[str, Any], cutter: Any) -> None:
    pages = [SCORE.page_of(table, o, 30) for o in range(0, len(table["lines"]), 30)]
    history = TURNS[0] + cutter(table) + "".join(json.dumps(p) for p in pages) + TURNS[1]
    actions = _drive(_turn(2, history), lambda args: pytest.fail("no call needed"))
    assert SCORE.diff(duty_quote(table), _written(actions, "duty_quote.json")) == []
    final = actions[-1].text
    assert "used=history pages" in final and f"tables={len(pages)}" in final
    if cutter is codex_valid_cut:
        assert "cut=1" in final
    assert verdicts_for_account(final, table)


def test_turn_two_fetches_again_when_the_history_lost_the_table(table: dict[str, Any]) -> None:
    actions = _drive(_turn(2, TURNS[1]), lambda args: relay(table))
    assert [a.arguments for a in actions if isinstance(a, CallTool)] == [{"schedule": SCHEDULE}]
    assert SCORE.diff(duty_quote(table), _written(actions, "duty_quote.json")) == []
    assert "tables=0 digests=- cut=0 summary=absent" in actions[-1].text and "used=call" in actions[-1].text


def test_turn_two_with_only_a_summary_writes_nothing(table: dict[str, Any]) -> None:
    summary = relay(None, f"Tariff schedule {SCHEDULE}: 170 tariff lines in EUR.")
    actions = _drive(_turn(2, TURNS[0] + summary + TURNS[1]), lambda args: summary)
    assert not any(isinstance(a, WriteFile) for a in actions)
    assert "summary=shown" in actions[-1].text and "used=none" in actions[-1].text


def verdicts_for_account(final: str, table: dict[str, Any]) -> bool:
    ctx = VerifierContext(workspace=Path("/nonexistent"), baseline=Path("/nonexistent"), truth=TRUTH, oracle=None,
                          events=[], gateway=[], probe={"final_text": final}, ledgers={}, run_dir=Path("/nonexistent"))
    verdict = SCORE._from_probe(ctx, table)
    assert verdict is not None and verdict[0] is True, verdict
    return True


def test_the_policy_waits_for_a_connecting_mcp_server() -> None:
    gen = POLICY.policy(_turn(1, tools=("Bash", "Write", "WaitForMcpServers")))
    first = next(gen)
    assert isinstance(first, NativeTool) and first.name == "WaitForMcpServers"
    assert first.arguments == {"servers": ["tariffs"]}
